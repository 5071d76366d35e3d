//! MCP servers as tools: `pi-run` against the real pi 1.6.0 with the same
//! `mcp.json` (the fixture server of tests/mcp/ and the real servers that
//! tests/mcp/install.sh installs), the trust rule for a project's
//! `.pi/mcp.json`, and servers that fail in every way we know.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

fn fixture() -> String {
    repo().join("tests/mcp/fixture.py").display().to_string()
}

fn stdio(mode: &str, exposure: &str) -> Value {
    json!({"command": "python3", "args": [fixture(), mode], "exposure": exposure})
}

/// The real servers' cache (tests/mcp/install.sh); `None` (a SKIP, or a
/// failure under CI=true) when absent.
pub(crate) fn servers(test: &str) -> Option<PathBuf> {
    let root = std::env::var_os("PI_MCP_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/pi-toolkit-mcp")
        });
    if root.join("stamp").is_file() {
        return Some(root);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{test}: the MCP servers are not installed under {} (run tests/mcp/install.sh)",
            root.display()
        );
    }
    eprintln!(
        "SKIP {test}: the MCP servers are not installed under {}; run tests/mcp/install.sh",
        root.display()
    );
    None
}

/// What a run recorded: the first system message and the tool results.
struct Recorded {
    system: Value,
    results: Vec<Value>,
    out: Output,
}

fn recorded(sb: &Sandbox, out: Output) -> Recorded {
    let root = sb.root().display().to_string();
    let sessions = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    assert_eq!(sessions.len(), 1, "one session: {}", stderr(&out));
    let text = std::fs::read_to_string(sessions[0]["path"].as_str().unwrap()).unwrap();
    let entries: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let system = entries
        .iter()
        .find(|e| e["message"]["role"] == "system")
        .map(|e| e["message"].clone())
        .unwrap_or(Value::Null);
    let mut results: Vec<Value> = entries
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| {
            let m = &e["message"];
            let mut d = m["details"].clone();
            // A temp file name differs per run; its presence must not.
            if let Some(p) = d.get_mut("fullOutputPath") {
                let path = p.as_str().unwrap_or("").to_string();
                assert!(Path::new(&path).is_file(), "full output kept in {path}");
                let _ = std::fs::remove_file(&path);
                *p = json!("<path>");
            }
            let content = serde_json::to_string(&m["content"]).unwrap();
            let content = regex_lite_paths(&content).replace(&root, "<root>");
            json!({"toolName": m["toolName"], "content": content, "details": d, "isError": m["isError"]})
        })
        .collect();
    results.sort_by_key(|r| r.to_string());
    Recorded {
        system,
        results,
        out,
    }
}

/// `/tmp/pi-mcp-<hex>.txt` → `<path>` in a result's text.
fn regex_lite_paths(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/pi-mcp-") {
        let start = rest[..i].rfind(' ').map(|j| j + 1).unwrap_or(0);
        out.push_str(&rest[..start]);
        let end = rest[i..]
            .find(".txt")
            .map(|j| i + j + 4)
            .unwrap_or(rest.len());
        out.push_str("<path>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Runs pi 1.6.0 and pi-run on the same `mcp.json` and mock script.
fn both(o: &Oracle, mcp: &Value, turns: &Value, extra: &[&str]) -> (Recorded, Recorded) {
    both_in(o, &|_| mcp.clone(), &|_| turns.clone(), extra)
}

/// [`both`] with the `mcp.json` and the script made for each sandbox.
fn both_in(
    o: &Oracle,
    mcp: &dyn Fn(&Sandbox) -> Value,
    turns: &dyn Fn(&Sandbox) -> Value,
    extra: &[&str],
) -> (Recorded, Recorded) {
    let run = |ours: bool| {
        let sb = Sandbox::new();
        let mock = MockLlm::start(o, sb.root(), &turns(&sb));
        mock.configure(&sb.agent());
        std::fs::write(sb.agent().join("mcp.json"), mcp(&sb).to_string()).unwrap();
        let mut cmd = if ours { sb.cmd("pi-run") } else { o.pi160(&sb) };
        let out = cmd
            .args(["--mode", "json"])
            .args(extra)
            .arg("go")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            if ours { "pi-run" } else { "pi" },
            stderr(&out)
        );
        let r = recorded(&sb, out);
        drop(mock);
        r
    };
    (run(false), run(true))
}

/// [`both_in`] for servers slow to start (the real npm and PyPI ones): pi
/// and pi-run wait at most 10 s at the first request for servers with
/// direct tools, so on a loaded machine a server can miss that window in
/// either program and its tools are then simply not declared. Such a pair
/// of runs says nothing about fidelity; it is run again (up to three times
/// in all, the caches now warm) until both declared every tool in `needed`
/// from the start. Three misses in a row fail, naming the tools.
fn both_declaring(
    o: &Oracle,
    mcp: &dyn Fn(&Sandbox) -> Value,
    turns: &dyn Fn(&Sandbox) -> Value,
    needed: &[&str],
) -> (Recorded, Recorded) {
    let missing = |r: &Recorded| -> Vec<String> {
        let names = tool_names(&r.system);
        needed
            .iter()
            .filter(|n| !names.iter().any(|m| m == *n))
            .map(|n| n.to_string())
            .collect()
    };
    let mut last = Vec::new();
    for attempt in 1..=3 {
        let (pi, ours) = both_in(o, mcp, turns, &[]);
        let (a, b) = (missing(&pi), missing(&ours));
        if a.is_empty() && b.is_empty() {
            return (pi, ours);
        }
        eprintln!(
            "attempt {attempt}: a server missed the 10 s first-request wait (pi lacks {a:?}, pi-run lacks {b:?}); running both again"
        );
        last = [a, b].concat();
    }
    panic!("three attempts in a row, a server missed the 10 s first-request wait: {last:?} not declared (machine too loaded?)");
}

fn section<'a>(system: &'a Value, name: &str) -> &'a Value {
    &system["sections"][name]
}

fn tool_names(system: &Value) -> Vec<String> {
    system["toolsAdded"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The same declarations. Servers' tools come in the order the servers
/// finish connecting, in pi as here, so the order across servers is
/// compared only for the tools of one server (and the built-ins first).
fn assert_same_tools(pi: &Recorded, ours: &Recorded, what: &str) {
    let key = |n: &String| {
        let server = n.strip_prefix("mcp__").and_then(|r| r.split("__").next());
        server.map(str::to_string)
    };
    let per_server = |names: Vec<String>| {
        let mut m: std::collections::BTreeMap<Option<String>, Vec<String>> = Default::default();
        for n in names {
            m.entry(key(&n)).or_default().push(n);
        }
        m
    };
    assert_eq!(
        per_server(tool_names(&ours.system)),
        per_server(tool_names(&pi.system)),
        "{what}: declared tools"
    );
    let by_name = |r: &Recorded| -> std::collections::BTreeMap<String, String> {
        r.system["toolsAdded"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| (t["name"].as_str().unwrap_or("").to_string(), t.to_string()))
            .collect()
    };
    let (a, b) = (by_name(ours), by_name(pi));
    for (name, decl) in &a {
        assert_eq!(Some(decl), b.get(name), "{what}: declaration of {name}");
    }
}

fn assert_same(pi: &Recorded, ours: &Recorded) {
    assert_same_tools(pi, ours, "run");
    for s in ["tools", "rules", "mcp_servers"] {
        assert_eq!(
            section(&ours.system, s),
            section(&pi.system, s),
            "section {s}"
        );
    }
    assert_eq!(ours.results, pi.results, "tool results");
}

#[test]
fn mcp_direct_tools_results_and_resources_match_pi() {
    let Some(o) = Oracle::find("mcp_direct_tools_results_and_resources_match_pi") else {
        return;
    };
    let mcp = json!({"mcpServers": {
        "fx": stdio("ok", "direct"),
        "rpc": stdio("rpcerror", "direct"),
        "die": stdio("die", "direct"),
        "gone": stdio("exit", "direct"),
        "bad": {"command": "x", "timeout": -1}
    }});
    let turns = json!([
        {"tool_calls": [
            {"name": "mcp__fx__add", "arguments": {"a": 40, "b": 2}},
            {"name": "mcp__fx__fail", "arguments": {"msg": "boom"}},
            {"name": "mcp__fx__big_text", "arguments": {"n": 30000}},
            {"name": "read_mcp_resource", "arguments": {"server": "fx", "uri": "fixture://hello"}},
            {"name": "mcp__rpc__add", "arguments": {"a": 1, "b": 2}},
            {"name": "mcp__die__add", "arguments": {"a": 1, "b": 2}}
        ]},
        {"tool_calls": [{"name": "mcp__die__add", "arguments": {"a": 1, "b": 2}}]},
        {"text": "done"}
    ]);
    let (pi, ours) = both(&o, &mcp, &turns, &[]);
    assert_same(&pi, &ours);
    let names: Vec<&str> = ours.system["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"mcp__fx__big_text") && names.contains(&"read_mcp_resource"),
        "{names:?}"
    );
    // One line per problem, on stderr; the run went on.
    let err = stderr(&ours.out);
    assert!(
        err.contains("server \"bad\": timeout must be a positive number of seconds"),
        "{err}"
    );
    assert!(err.contains("MCP server \"gone\" failed: "), "{err}");
}

#[test]
fn mcp_servers_section_matches_pi_for_deferred_servers() {
    let Some(o) = Oracle::find("mcp_servers_section_matches_pi_for_deferred_servers") else {
        return;
    };
    let mut described = stdio("ok", "deferred");
    described["description"] = json!("Deferred fixture\nsecond line");
    let mcp = json!({"mcpServers": {"zz-def": described, "fx3": stdio("ok", "deferred")}});
    let (pi, ours) = both(&o, &mcp, &json!([{"text": "done"}]), &[]);
    assert_eq!(
        section(&ours.system, "mcp_servers"),
        section(&pi.system, "mcp_servers")
    );
    assert!(section(&ours.system, "mcp_servers")
        .as_str()
        .unwrap()
        .contains("- mcp__zz_def (tool_search): Deferred fixture\n"));
}

#[test]
fn mcp_tool_flags_filter_like_pi() {
    let Some(o) = Oracle::find("mcp_tool_flags_filter_like_pi") else {
        return;
    };
    let mcp = json!({"mcpServers": {"fx": stdio("ok", "direct")}});
    let turns = json!([{"text": "done"}]);
    for flags in [
        &["--tools", "read,bash"][..],
        &["--tools", "read,mcp__fx__add"][..],
        &["-xt", "mcp__*"][..],
    ] {
        let (pi, ours) = both(&o, &mcp, &turns, flags);
        assert_same_tools(&pi, &ours, &format!("{flags:?}"));
    }
    // --no-mcp: no server starts.
    let sb = Sandbox::new();
    let mock = MockLlm::start(&o, sb.root(), &turns);
    mock.configure(&sb.agent());
    let marker = sb.root().join("started");
    let mcp = json!({"mcpServers": {"fx": {"command": "python3", "args": [fixture(), "ok", marker.display().to_string()], "exposure": "direct"}}});
    std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
    let out = sb
        .cmd("pi-run")
        .args(["--no-mcp", "-p", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!marker.exists(), "--no-mcp started a server");
}

/// The untrusted project's server never starts; trusted with -a it does.
#[test]
fn mcp_project_servers_need_trust() {
    let sb = Sandbox::new();
    let srv = ScriptServer::start(vec![Reply::Sse(sse_text("done"))]);
    srv.configure(&sb.agent());
    let marker = sb.root().join("project-server-started");
    std::fs::create_dir_all(sb.cwd().join(".pi")).unwrap();
    let mcp = json!({"mcpServers": {"proj": {"command": "python3", "args": [fixture(), "ok", marker.display().to_string()], "exposure": "direct"}}});
    std::fs::write(sb.cwd().join(".pi/mcp.json"), mcp.to_string()).unwrap();
    let out = sb
        .cmd("pi-run")
        .args(["--no-approve", "-p", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !marker.exists(),
        "an untrusted project's MCP server started"
    );
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "-a", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        marker.exists(),
        "the trusted project's MCP server did not start"
    );
    let tools = srv.requests.lock().unwrap().last().unwrap()["tools"].clone();
    assert!(tools.to_string().contains("mcp__proj__add"), "{tools}");
}

/// A server that hangs on initialize costs its timeout, not the run.
#[test]
fn mcp_hanging_server_times_out_with_one_diagnostic() {
    let sb = Sandbox::new();
    let srv = ScriptServer::start(vec![Reply::Sse(sse_text("done"))]);
    srv.configure(&sb.agent());
    let mut hang = stdio("hang", "direct");
    hang["timeout"] = json!(1);
    let mcp = json!({"mcpServers": {"hang": hang, "fx": stdio("ok", "direct")}});
    std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
    let t = Instant::now();
    let out = sb.cmd("pi-run").args(["-p", "go"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "took {:?}",
        t.elapsed()
    );
    let err = stderr(&out);
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("MCP server \"hang\""))
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("MCP request timed out after 1000ms"), "{err}");
    assert_eq!(stdout(&out), "done\n");
}

/// A loopback streamable HTTP server-everything, killed on drop.
struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl HttpServer {
    fn start(bin: &Path) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start server-everything");
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "server-everything did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mcp_real_servers_stdio_and_http_match_pi() {
    let Some(o) = Oracle::find("mcp_real_servers_stdio_and_http_match_pi") else {
        return;
    };
    let Some(root) = servers("mcp_real_servers_stdio_and_http_match_pi") else {
        return;
    };
    let bin = root.join("npm/node_modules/.bin");
    let node_path = format!(
        "{}:{}",
        o.node22.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let http = HttpServer::start(&bin.join("mcp-server-everything"));
    let node_env = json!({"PATH": node_path});
    let mcp = |sb: &Sandbox| {
        std::fs::write(sb.cwd().join("hello.txt"), "hello file\n").unwrap();
        json!({"mcpServers": {
            "everything": {"command": bin.join("mcp-server-everything").display().to_string(), "args": ["stdio"], "env": node_env, "exposure": "direct"},
            "web": {"url": format!("http://127.0.0.1:{}/mcp", http.port), "exposure": "direct"},
            "files": {"command": bin.join("mcp-server-filesystem").display().to_string(), "args": [sb.cwd().display().to_string()], "env": node_env, "exposure": "direct"}
        }})
    };
    let turns = |sb: &Sandbox| {
        let hello = sb.cwd().join("hello.txt").display().to_string();
        json!([
            {"tool_calls": [
                {"name": "mcp__everything__echo", "arguments": {"message": "hi"}},
                {"name": "mcp__everything__get_sum", "arguments": {"a": 2, "b": 3}},
                {"name": "mcp__web__echo", "arguments": {"message": "over http"}},
                {"name": "mcp__files__read_text_file", "arguments": {"path": hello}},
                {"name": "mcp__files__read_text_file", "arguments": {"path": "/etc/passwd"}}
            ]},
            {"text": "done"}
        ])
    };
    let needed = [
        "mcp__everything__echo",
        "mcp__everything__get_sum",
        "mcp__web__echo",
        "mcp__files__read_text_file",
    ];
    let (pi, ours) = both_declaring(&o, &mcp, &turns, &needed);
    assert_same(&pi, &ours);
    assert_eq!(ours.results.len(), 5);
    // mcp-server-time (Python) on its own: it takes seconds to start on a
    // busy machine, and with the others it could miss the 10 s first-request
    // wait in either program.
    let time = json!({"mcpServers": {"time": {"command": root.join("py/bin/mcp-server-time").display().to_string(), "args": ["--local-timezone", "UTC"], "exposure": "direct"}}});
    let turns = json!([
        {"tool_calls": [
            {"name": "mcp__time__convert_time", "arguments": {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}},
            {"name": "mcp__time__get_current_time", "arguments": {"timezone": "Nowhere/Else"}}
        ]},
        {"text": "done"}
    ]);
    let (pi_t, ours_t) = both_declaring(
        &o,
        &|_| time.clone(),
        &|_| turns.clone(),
        &["mcp__time__convert_time", "mcp__time__get_current_time"],
    );
    assert_same(&pi_t, &ours_t);
    assert_eq!(ours_t.results.len(), 2);
    assert!(ours.results.iter().any(|r| r["content"]
        .as_str()
        .unwrap_or("")
        .contains("Echo: over http")));
}

/// `pi-resources` lists each server with its file, scope, status,
/// transport and exposure; an untrusted project's servers are `skipped`
/// and never started; `--inspect` connects and lists the tools.
#[test]
fn mcp_servers_listed_by_pi_resources() {
    let sb = Sandbox::new();
    let marker = sb.root().join("project-server-started");
    std::fs::write(
        sb.agent().join("mcp.json"),
        json!({"mcpServers": {
            "fx": stdio("ok", "direct"),
            "web": {"url": "http://127.0.0.1:9/mcp", "exposure": "deferred", "enabled": false},
            "bad": {"command": "x", "args": "no"}
        }})
        .to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(sb.cwd().join(".pi")).unwrap();
    std::fs::write(
        sb.cwd().join(".pi/mcp.json"),
        json!({"mcpServers": {"proj": {"command": "python3", "args": [fixture(), "ok", marker.display().to_string()]}}}).to_string(),
    )
    .unwrap();
    let out = sb
        .cmd("pi-resources")
        .args(["-na", "--inspect", "--format", "jsonl"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let recs = jsonl(&out);
    let servers: Vec<&Value> = recs.iter().filter(|r| r["type"] == "mcp_server").collect();
    let brief: Vec<(String, String, String, String, String)> = servers
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            (
                s("name"),
                s("scope"),
                s("status"),
                s("transport"),
                s("exposure"),
            )
        })
        .collect();
    let t = |a: &str, b: &str, c: &str, d: &str, e: &str| {
        (
            a.to_string(),
            b.to_string(),
            c.to_string(),
            d.to_string(),
            e.to_string(),
        )
    };
    assert_eq!(
        brief,
        [
            t("fx", "global", "loaded", "stdio", "direct"),
            t("web", "global", "disabled", "http", "deferred"),
            t("proj", "project", "skipped", "stdio", "codemode"),
        ]
    );
    assert_eq!(servers[0]["source"], json!(sb.agent().join("mcp.json")));
    let tools: Vec<&str> = servers[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        tools,
        ["mcp__fx__add", "mcp__fx__fail", "mcp__fx__big_text"]
    );
    assert!(!marker.exists(), "an untrusted project's server started");
    assert!(recs.iter().any(|r| r["type"] == "diagnostic"
        && r["message"]
            .as_str()
            .unwrap_or("")
            .ends_with("server \"bad\": args must be an array of strings")));
}

/// Runs one `@modelcontextprotocol/conformance client` scenario with
/// tests/mcp/conformance-client.sh as the client (results under `out_dir`
/// when given) and asserts it passed with nothing failed.
fn conformance_scenario(o: &Oracle, root: &Path, scenario: &str, out_dir: Option<&Path>) {
    let suite = root.join("npm/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let client = format!(
        "bash {} {} {}",
        repo().join("tests/mcp/conformance-client.sh").display(),
        bin("pi-run").display(),
        bin("pi-resources").display()
    );
    let mut cmd = Command::new(&o.node22);
    cmd.arg(&suite)
        .args(["client", "--command", &client, "--scenario", scenario]);
    if let Some(d) = out_dir {
        cmd.arg("-o").arg(d);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        out.status.success() && text.contains("OVERALL: PASSED"),
        "{scenario}: {text}"
    );
    assert!(text.contains(" 0 failed"), "{scenario}: {text}");
}

/// The client scenarios of `@modelcontextprotocol/conformance` that need
/// no OAuth, over streamable HTTP (the suite's client scenarios are all
/// HTTP), with tests/mcp/conformance-client.sh as the client (which opts the
/// elicitation scenario's entry in to our `"elicitation": "defaults"`).
#[test]
fn mcp_conformance_client_scenarios_pass() {
    let Some(o) = Oracle::find("mcp_conformance_client_scenarios_pass") else {
        return;
    };
    let Some(root) = servers("mcp_conformance_client_scenarios_pass") else {
        return;
    };
    // elicitation-sep1034-client-defaults fails for pi 1.6.0's client (it
    // offers no elicitation, nor does ours by default: see
    // mcp_elicitation_and_sampling_are_refused_like_pi) and passes for an
    // entry that opts in (mcp_elicitation_opt_in_answers_with_the_defaults);
    // the auth/* scenarios are in mcp_conformance_auth_scenarios_pass.
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
    ] {
        conformance_scenario(&o, &root, scenario, None);
    }
}

/// The suite's OAuth client scenarios, each through `pi-resources mcp
/// login` (the browser is a curl that follows the authorization redirect to
/// the loopback callback) and then a connection with the stored token; the
/// per-scenario steps are in tests/mcp/conformance-client.sh. pi 1.6.0's
/// `pi mcp login` passes the first sixteen in the same harness (FINDINGS
/// §14); the rest are ours beyond pi: `basic-cimd` (our
/// `oauth.clientMetadataUrl` as the client ID), `scope-step-up` (a 403
/// `insufficient_scope` to a tool call is noted and the next sign-in asks
/// for the wider scope), `2025-03-26-oauth-metadata-backcompat` (the
/// server's own root metadata when discovery finds no matching issuer) and
/// `client-credentials-basic`/`-jwt` (our `oauth.grantType:
/// "client_credentials"`, with `clientSecret` or our `privateKey` for a
/// `private_key_jwt` assertion; the token fetched at connect) and
/// `cross-app-access-complete-flow` (our `grantType: "enterprise"` with
/// `oauth.idp`: the IdP's ID token exchanged for an ID-JAG, then the JWT
/// bearer grant). That is every auth scenario the suite offers.
#[test]
fn mcp_conformance_auth_scenarios_pass() {
    let Some(o) = Oracle::find("mcp_conformance_auth_scenarios_pass") else {
        return;
    };
    let Some(root) = servers("mcp_conformance_auth_scenarios_pass") else {
        return;
    };
    let scenarios = [
        "metadata-default",
        "metadata-var1",
        "metadata-var2",
        "metadata-var3",
        "scope-from-www-authenticate",
        "scope-from-scopes-supported",
        "scope-omitted-when-undefined",
        "scope-retry-limit",
        "token-endpoint-auth-basic",
        "token-endpoint-auth-post",
        "token-endpoint-auth-none",
        "pre-registration",
        "2025-03-26-oauth-endpoint-fallback",
        "resource-mismatch",
        "offline-access-scope",
        "offline-access-not-supported",
        "basic-cimd",
        "scope-step-up",
        "2025-03-26-oauth-metadata-backcompat",
        "client-credentials-basic",
        "client-credentials-jwt",
        "cross-app-access-complete-flow",
    ];
    let out_dir = tempfile::tempdir().unwrap();
    for scenario in scenarios {
        conformance_scenario(&o, &root, &format!("auth/{scenario}"), Some(out_dir.path()));
    }
}

/// `pi-resources mcp logout` as `pi mcp logout`: the same words, exit
/// status and resulting `mcp-auth.json` (only that server's record gone,
/// the file still private), a second sign-out finds nothing, an unknown
/// server is an error for both.
#[test]
fn mcp_logout_drops_only_that_servers_tokens_like_pi() {
    use std::os::unix::fs::PermissionsExt;
    let Some(o) = Oracle::find("mcp_logout_drops_only_that_servers_tokens_like_pi") else {
        return;
    };
    let run = |ours: bool| {
        let sb = Sandbox::new();
        let mcp = json!({"mcpServers": {
            "my-srv": {"url": "http://127.0.0.1:9/mcp"},
            "other": {"url": "http://127.0.0.1:8/mcp"}}});
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        let auth = json!({
            "mcp__my_srv|http://127.0.0.1:9/mcp": {"tokens": {"access_token": "a"}},
            "mcp__other|http://127.0.0.1:8/mcp": {"tokens": {"access_token": "b"}, "serverUrl": "http://127.0.0.1:8/mcp"}});
        let path = sb.agent().join("mcp-auth.json");
        std::fs::write(&path, auth.to_string()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let logout = |server: &str| {
            let mut c = if ours {
                sb.cmd("pi-resources")
            } else {
                o.pi160(&sb)
            };
            c.args(["mcp", "logout", server]).output().unwrap()
        };
        let first = logout("my-srv");
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let second = logout("my-srv");
        let unknown = logout("nope");
        (first, file, mode, second, unknown)
    };
    let (pi, ours) = (run(false), run(true));
    assert_eq!(stdout(&ours.0), stdout(&pi.0), "{}", stderr(&ours.0));
    assert_eq!(stdout(&ours.0), "Signed out of MCP server \"my-srv\".\n");
    assert_eq!(
        (ours.0.status.code(), pi.0.status.code()),
        (Some(0), Some(0))
    );
    assert_eq!(ours.1, pi.1, "mcp-auth.json after the sign-out");
    assert_eq!(
        ours.1,
        json!({"mcp__other|http://127.0.0.1:8/mcp": {"tokens": {"access_token": "b"}, "serverUrl": "http://127.0.0.1:8/mcp"}})
    );
    assert_eq!((ours.2, pi.2), (0o600, 0o600));
    assert_eq!(stdout(&ours.3), stdout(&pi.3));
    assert_eq!(
        stdout(&ours.3),
        "No stored credentials for MCP server \"my-srv\".\n"
    );
    assert_eq!(ours.3.status.code(), Some(0));
    // pi exits 1 here, ours 2 (our usage-error status, as for `mcp login`).
    assert_eq!(
        (ours.4.status.code(), pi.4.status.code()),
        (Some(2), Some(1))
    );
    assert!(
        stderr(&ours.4).contains("no MCP server \"nope\""),
        "{}",
        stderr(&ours.4)
    );
}

/// The client offers roots and answers `roots/list` with the session cwd,
/// as pi 1.6.0 does (FINDINGS §13).
#[test]
fn mcp_roots_answer_is_the_session_cwd() {
    let sb = Sandbox::new();
    let srv = ScriptServer::start(vec![Reply::Sse(sse_text("done"))]);
    srv.configure(&sb.agent());
    let answer = sb.root().join("roots.json");
    let mcp = json!({"mcpServers": {"r": {"command": "python3", "args": [fixture(), "roots", answer.display().to_string()], "exposure": "direct"}}});
    std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
    let out = sb.cmd("pi-run").args(["-p", "go"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Value = serde_json::from_str(&std::fs::read_to_string(&answer).unwrap()).unwrap();
    assert_eq!(
        got["result"],
        json!({"roots": [{"uri": format!("file://{}", sb.cwd().display()), "name": "cwd"}]})
    );
}

/// A server's `elicitation/create` and `sampling/createMessage` get what
/// pi 1.6.0 answers (its client declares only `roots`, offers neither, and
/// answers "Method not found: <method>"), and the initialize capabilities
/// are pi's (FINDINGS §14).
#[test]
fn mcp_elicitation_and_sampling_are_refused_like_pi() {
    let Some(o) = Oracle::find("mcp_elicitation_and_sampling_are_refused_like_pi") else {
        return;
    };
    // The sandboxes go with their runs: the fixture records the initialize
    // capabilities here instead.
    let keep = tempfile::tempdir().unwrap();
    let n = std::cell::Cell::new(0);
    let marker = |_: &Sandbox| {
        n.set(n.get() + 1);
        keep.path().join(format!("caps-{}.jsonl", n.get()))
    };
    let mcp = |sb: &Sandbox| {
        json!({"mcpServers": {"fx": {"command": "python3",
            "args": [fixture(), "elicit", marker(sb).display().to_string()], "exposure": "direct"}}})
    };
    let turns = json!([
        {"tool_calls": [
            {"name": "mcp__fx__ask", "arguments": {}},
            {"name": "mcp__fx__sample", "arguments": {}}
        ]},
        {"text": "done"}
    ]);
    let (pi, ours) = both_in(&o, &mcp, &|_| turns.clone(), &[]);
    assert_eq!(ours.results, pi.results, "tool results");
    let texts = serde_json::to_string(&ours.results).unwrap();
    assert!(
        texts.contains("Method not found: elicitation/create")
            && texts.contains("Method not found: sampling/createMessage"),
        "{texts}"
    );
    let caps: Vec<Vec<Value>> = (1..=2)
        .map(|i| marker_lines(&keep.path().join(format!("caps-{i}.jsonl"))))
        .collect();
    assert_eq!(caps[1], caps[0], "initialize capabilities");
    assert_eq!(caps[1], [json!({"capabilities": {"roots": {}}})]);
}

/// The `tool_execution_update` events of a `--mode json` run, without
/// timing.
fn updates(out: &Output) -> Vec<Value> {
    jsonl(out)
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_update")
        .collect()
}

/// Waits (at most 60 s) until `file` holds a line containing `what`.
fn wait_for_line(file: &Path, what: &str) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if std::fs::read_to_string(file).is_ok_and(|s| s.contains(what)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no {what:?} in {} after 60 s", file.display());
}

/// The fixture's record: the lines of MARKER as JSON (the first line,
/// `started`, is not JSON).
fn marker_lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn mcp_progress_is_forwarded_as_tool_execution_update_like_pi() {
    let Some(o) = Oracle::find("mcp_progress_is_forwarded_as_tool_execution_update_like_pi") else {
        return;
    };
    let mcp = json!({"mcpServers": {"fx": stdio("slow", "direct")}});
    let turns = json!([
        {"tool_calls": [{"name": "mcp__fx__progress", "arguments": {}}]},
        {"text": "done"}
    ]);
    let (pi, ours) = both(&o, &mcp, &turns, &[]);
    let want = updates(&pi.out);
    // With a message, progress alone, progress with a total (pi's texts).
    assert_eq!(want.len(), 3, "pi sent three updates: {want:?}");
    assert_eq!(updates(&ours.out), want);
    assert_eq!(ours.results, pi.results, "the final result");
}

/// A child on piped stdin/stdout whose stdout lines are collected by a
/// thread.
pub(crate) struct Rpc {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Rpc {
    pub(crate) fn spawn(mut cmd: Command) -> Rpc {
        use std::io::BufRead;
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&l) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        Rpc {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    pub(crate) fn send(&mut self, v: Value) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits (at most 60 s) for a record matching `pred`.
    pub(crate) fn wait(&mut self, what: &str, pred: &dyn Fn(&Value) -> bool) -> Value {
        let t0 = Instant::now();
        loop {
            if let Some(v) = self.seen.iter().find(|v| pred(v)) {
                return v.clone();
            }
            let left = Duration::from_secs(60).saturating_sub(t0.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("no {what} within 60 s; seen {:?}", self.seen),
            }
        }
    }

    pub(crate) fn finish(mut self) -> std::process::ExitStatus {
        drop(self.child.stdin.take());
        self.child.wait().unwrap()
    }
}

/// What one abort of a running MCP call left: the end event of the call
/// and the `notifications/cancelled` the server got for it.
fn abort_call(o: &Oracle, ours: bool) -> (Value, Value) {
    let sb = Sandbox::new();
    let turns =
        json!([{"tool_calls": [{"name": "mcp__fx__wait", "arguments": {}}]}, {"text": "done"}]);
    let mock = MockLlm::start(o, sb.root(), &turns);
    mock.configure(&sb.agent());
    let marker = sb.root().join("marker");
    let mut fx = stdio("slow", "direct");
    fx["args"] = json!([fixture(), "slow", marker]);
    std::fs::write(
        sb.agent().join("mcp.json"),
        json!({"mcpServers": {"fx": fx}}).to_string(),
    )
    .unwrap();
    let mut cmd = if ours { sb.cmd("pi-run") } else { o.pi160(&sb) };
    cmd.args(["--mode", "rpc", "--no-session"]);
    let mut rpc = Rpc::spawn(cmd);
    rpc.send(json!({"id": "1", "type": "prompt", "message": "go"}));
    wait_for_line(&marker, "waiting");
    rpc.send(json!({"id": "2", "type": "abort"}));
    rpc.wait("abort response", &|v| v["id"] == "2");
    let end = rpc.wait("tool_execution_end", &|v| v["type"] == "tool_execution_end");
    wait_for_line(&marker, "notifications/cancelled");
    let st = rpc.finish();
    assert!(st.success(), "{st:?}");
    let lines = marker_lines(&marker);
    let waiting = lines.iter().find(|l| l.get("waiting").is_some()).unwrap();
    let cancelled = lines
        .iter()
        .find(|l| l["method"] == "notifications/cancelled")
        .unwrap()
        .clone();
    assert_eq!(
        cancelled["params"]["requestId"], waiting["waiting"],
        "the cancel names the running call"
    );
    drop(mock);
    (end, cancelled)
}

#[test]
fn mcp_abort_cancels_the_running_call_like_pi() {
    let Some(o) = Oracle::find("mcp_abort_cancels_the_running_call_like_pi") else {
        return;
    };
    let (pi_end, pi_cancel) = abort_call(&o, false);
    let (end, cancel) = abort_call(&o, true);
    let strip = |mut v: Value| {
        if let Value::Object(m) = &mut v {
            m.remove("durationMs");
        }
        v
    };
    assert_eq!(strip(end), strip(pi_end), "the call's end");
    assert_eq!(
        cancel["params"]["reason"], pi_cancel["params"]["reason"],
        "the reason"
    );
    assert_eq!(
        pi_cancel["params"]["requestId"].is_number(),
        cancel["params"]["requestId"].is_number()
    );
}

/// SIGINT in print mode: the server is told the call is cancelled, the
/// aborted call is recorded in the session and the exit code is pi's 130.
#[test]
fn mcp_sigint_in_print_mode_cancels_the_call() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_tools(&[("mcp__fx__wait", "{}")]))]);
    server.configure(&sb.agent());
    let marker = sb.root().join("marker");
    let mut fx = stdio("slow", "direct");
    fx["args"] = json!([fixture(), "slow", marker]);
    std::fs::write(
        sb.agent().join("mcp.json"),
        json!({"mcpServers": {"fx": fx}}).to_string(),
    )
    .unwrap();
    let mut child = sb
        .cmd("pi-run")
        .args(["-p", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_line(&marker, "waiting");
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "pi-run did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(130));
    let lines = marker_lines(&marker);
    let cancelled = lines
        .iter()
        .find(|l| l["method"] == "notifications/cancelled")
        .unwrap_or_else(|| panic!("no cancel in {lines:?}"));
    assert_eq!(
        cancelled["params"]["reason"],
        "AbortError: This operation was aborted"
    );
    let sessions = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    let text = std::fs::read_to_string(sessions[0]["path"].as_str().unwrap()).unwrap();
    assert!(
        text.contains(
            r#""toolName":"mcp__fx__wait","content":[{"type":"text","text":"MCP request aborted"}]"#
        ),
        "{text}"
    );
}

/// The metadata cache: after a run that connected, the next run declares
/// the server's tools from `~/.cache/pi-toolkit/mcp-cache.json` (never in
/// pi's agent dir) without waiting for
/// it — here a server that never answers `initialize` — with the same
/// declarations pi 1.6.0 makes for the live server, and the held server
/// is stopped when the run ends.
#[test]
fn mcp_cached_tools_need_no_wait_and_match_pi() {
    let Some(o) = Oracle::find("mcp_cached_tools_need_no_wait_and_match_pi") else {
        return;
    };
    let marker = |sb: &Sandbox| sb.root().join("marker");
    let mcp = |sb: &Sandbox| {
        let mut fx = stdio("ok", "direct");
        fx["args"] = json!([fixture(), "ok", marker(sb)]);
        json!({"mcpServers": {"fx": fx}})
    };
    let turns = |_: &Sandbox| json!([{"text": "done"}]);
    let (pi, _) = both_in(&o, &mcp, &turns, &[]);
    let sb = Sandbox::new();
    std::fs::write(sb.agent().join("mcp.json"), mcp(&sb).to_string()).unwrap();
    let run = |sb: &Sandbox| {
        let mock = MockLlm::start(&o, sb.root(), &json!([{"text": "done"}]));
        mock.configure(&sb.agent());
        let out = sb
            .cmd("pi-run")
            .args(["--mode", "json", "go"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        drop(mock);
        out
    };
    let first = run(&sb);
    assert!(
        sb.root()
            .join("home/.cache/pi-toolkit/mcp-cache.json")
            .is_file()
            && !sb.agent().join("mcp-cache.json").exists(),
        "the cache is written in the toolkit's cache, not pi's agent dir"
    );
    // The server now hangs on initialize: only the cache can declare it.
    std::fs::write(sb.root().join("marker.hold"), "").unwrap();
    let t0 = Instant::now();
    let second = run(&sb);
    assert!(
        t0.elapsed() < Duration::from_secs(9),
        "the second run did not wait for the held server (10 s limit)"
    );
    assert!(
        !stderr(&second).contains("still connecting"),
        "{}",
        stderr(&second)
    );
    let sessions = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    assert_eq!(sessions.len(), 2, "{}", stderr(&first));
    for s in &sessions {
        let text = std::fs::read_to_string(s["path"].as_str().unwrap()).unwrap();
        let system = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["message"]["role"] == "system")
            .map(|e| e["message"].clone())
            .unwrap();
        let ours = Recorded {
            system,
            results: Vec::new(),
            out: first.clone(),
        };
        assert_same_tools(&pi, &ours, "cached run");
        for sec in ["tools", "rules", "mcp_servers"] {
            assert_eq!(
                section(&ours.system, sec),
                section(&pi.system, sec),
                "section {sec}"
            );
        }
    }
    // The held server was stopped with the run: no process names the
    // marker any more.
    let m = marker(&sb).display().to_string();
    let running = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|c| String::from_utf8_lossy(&c).contains(&m))
    };
    let t0 = Instant::now();
    while running() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the held server still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `pi-prompt system` shows the MCP tools and the `mcp_servers` section
/// exactly as `pi-run` sends them in its first request.
#[test]
fn mcp_pi_prompt_shows_what_pi_run_sends() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("done"))]);
    server.configure(&sb.agent());
    let mut described = stdio("ok", "deferred");
    described["description"] = json!("Deferred fixture");
    // A codemode server (pi's default exposure) too: the codemode tool and
    // every other tool's `Codemode:` line.
    // (Described, so its line does not depend on whether it connected yet.)
    let mut code = stdio("ok", "codemode");
    code["description"] = json!("Codemode fixture");
    let mcp = json!({"mcpServers": {"fx": stdio("ok", "direct"), "dx": described, "cx": code}});
    std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
    let out = sb.cmd("pi-run").args(["-p", "go"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let body = server.requests.lock().unwrap()[0].clone();
    let sent_tools: Vec<Value> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            json!({"name": f["name"], "description": f["description"], "parameters": f["parameters"]})
        })
        .collect();
    let system = body["messages"][0]["content"].as_str().unwrap().to_string();
    let shown = sb
        .cmd("pi-prompt")
        .args(["system", "--format", "jsonl"])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    let records = jsonl(&shown);
    let shown_tools: Vec<Value> = records
        .iter()
        .filter(|r| r["type"] == "tool")
        .map(|t| json!({"name": t["name"], "description": t["description"], "parameters": t["parameters"]}))
        .collect();
    assert_eq!(shown_tools, sent_tools, "tools");
    assert!(
        shown_tools.iter().any(|t| t["name"] == "mcp__fx__add"),
        "{shown_tools:?}"
    );
    assert!(shown_tools.iter().any(|t| t["name"] == "codemode"));
    let bash = shown_tools.iter().find(|t| t["name"] == "bash").unwrap();
    assert!(
        bash["description"].as_str().unwrap().ends_with(
            "\n\nCodemode: `tools.bash(args)` resolves to `{ output, truncated, full_output_path?, exit_code, wall_time_seconds }`."
        ),
        "{bash}"
    );
    let text: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "section")
        .filter_map(|r| r["text"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(text.join("\n\n"), system, "the system prompt");
    assert!(system.contains("<mcp_servers>"), "{system}");
    // --no-mcp: neither.
    let none = sb
        .cmd("pi-prompt")
        .args(["system", "--format", "jsonl", "--no-mcp"])
        .output()
        .unwrap();
    let s = stdout(&none);
    assert!(!s.contains("mcp__") && !s.contains("mcp_servers"), "{s}");
}

// ---- issue 13 (elicitation opt-in, `auth.provider`, mcp-auth.json records
// read by pi): one block, kept together.

/// An entry with our `"elicitation": "defaults"`: pi 1.6.0 ignores the key
/// (the server still connects, pi still declares only `roots` and answers
/// "Method not found"); ours declares form elicitation for that server and
/// accepts with the schema's defaults, and sampling stays pi's "Method not
/// found". Without the key both answer alike
/// (mcp_elicitation_and_sampling_are_refused_like_pi).
#[test]
fn mcp_elicitation_opt_in_answers_with_the_defaults() {
    let Some(o) = Oracle::find("mcp_elicitation_opt_in_answers_with_the_defaults") else {
        return;
    };
    let keep = tempfile::tempdir().unwrap();
    let n = std::cell::Cell::new(0);
    let marker = |_: &Sandbox| {
        n.set(n.get() + 1);
        keep.path().join(format!("caps-{}.jsonl", n.get()))
    };
    let mcp = |sb: &Sandbox| {
        json!({"mcpServers": {"fx": {"command": "python3",
            "args": [fixture(), "elicit", marker(sb).display().to_string()],
            "exposure": "direct", "elicitation": "defaults"}}})
    };
    let turns = json!([
        {"tool_calls": [
            {"name": "mcp__fx__ask", "arguments": {}},
            {"name": "mcp__fx__sample", "arguments": {}}
        ]},
        {"text": "done"}
    ]);
    let (pi, ours) = both_in(&o, &mcp, &|_| turns.clone(), &[]);
    let by = |r: &Recorded, tool: &str| {
        r.results
            .iter()
            .find(|x| x["toolName"] == tool)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(ours.results.len(), 2, "{}", stderr(&ours.out));
    let sample = by(&ours, "mcp__fx__sample");
    assert_eq!(sample, by(&pi, "mcp__fx__sample"), "sampling: pi's answer");
    assert!(
        sample
            .to_string()
            .contains("Method not found: sampling/createMessage"),
        "{sample}"
    );
    let pi_ask = by(&pi, "mcp__fx__ask").to_string();
    assert!(
        pi_ask.contains("Method not found: elicitation/create"),
        "pi ignores the key and offers no elicitation: {pi_ask}"
    );
    // The fixture returns the client's answer as the tool's text.
    let ask = by(&ours, "mcp__fx__ask");
    let content: Value =
        serde_json::from_str(ask["content"].as_str().unwrap_or("")).unwrap_or_default();
    let answer: Value =
        serde_json::from_str(content[0]["text"].as_str().unwrap_or("")).unwrap_or_default();
    assert_eq!(
        answer,
        json!({"action": "accept", "content": {"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true}}),
        "{ask}"
    );
    let caps: Vec<Vec<Value>> = (1..=2)
        .map(|i| marker_lines(&keep.path().join(format!("caps-{i}.jsonl"))))
        .collect();
    assert_eq!(caps[0], [json!({"capabilities": {"roots": {}}})], "pi's");
    assert_eq!(
        caps[1],
        [json!({"capabilities": {"roots": {}, "elicitation": {"form": {}}}})]
    );
}

/// tests/mcp/http-recorder.py on a free loopback port, logging every HTTP
/// request it gets; killed (by PID) on drop.
struct Recorder {
    child: std::process::Child,
    url: String,
    log: PathBuf,
}

impl Recorder {
    /// `token`: the only `Authorization: Bearer` it accepts (else 401).
    fn start(dir: &Path, token: Option<&str>) -> Recorder {
        Recorder::start_with(dir, token.as_slice())
    }

    /// With the script's optional arguments (`TOKEN [oauth]`).
    fn start_with(dir: &Path, extra: &[&str]) -> Recorder {
        Recorder::start_on("127.0.0.1", dir, extra)
    }

    /// On another loopback address (`127.0.0.2`, …).
    fn start_on(host: &str, dir: &Path, extra: &[&str]) -> Recorder {
        std::fs::create_dir_all(dir).unwrap();
        let (port_file, log) = (dir.join("port"), dir.join("requests.jsonl"));
        let mut cmd = Command::new("python3");
        cmd.arg(repo().join("tests/mcp/http-recorder.py"))
            .arg(&port_file)
            .arg(&log)
            .args(extra)
            .env("RECORDER_HOST", host)
            .stdin(std::process::Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p;
            }
            if let Ok(Some(st)) = child.try_wait() {
                panic!("http-recorder.py exited: {st}");
            }
            assert!(Instant::now() < deadline, "http-recorder.py never listened");
            std::thread::sleep(Duration::from_millis(20));
        };
        Recorder {
            child,
            url: format!("http://{host}:{}/mcp", port.trim()),
            log,
        }
    }

    /// `(HTTP method, JSON-RPC method, Authorization)` of each request.
    fn requests(&self) -> Vec<(String, Option<String>, Option<String>)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|r| {
                let s = |v: &Value| v.as_str().map(str::to_string);
                (
                    s(&r["method"]).unwrap_or_default(),
                    s(&r["rpc"]),
                    s(&r["headers"]["authorization"]),
                )
            })
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `auth: {provider}` side by side with pi 1.6.0 (FINDINGS §14): an HTTP
/// server that accepts only `Bearer tok-1` gets the provider's `auth.json`
/// API key, or its OAuth login's unexpired `access` token, on every
/// request, and the tool sees it; with no credential for the provider
/// nothing is sent, the server refuses and its tool is missing for both,
/// and ours says on stderr how to sign in.
#[test]
fn mcp_auth_provider_sends_the_providers_token_like_pi() {
    let Some(o) = Oracle::find("mcp_auth_provider_sends_the_providers_token_like_pi") else {
        return;
    };
    let far = 9_999_999_999_999u64;
    let cases = [
        json!({"anthropic": {"type": "api_key", "key": "tok-1"}}),
        json!({"anthropic": {"type": "oauth", "access": "tok-1", "refresh": "r", "expires": far}}),
        json!({"openai": {"type": "api_key", "key": "tok-1"}}),
    ];
    for auth in cases {
        // The sandboxes go with their runs: the servers log here instead.
        let keep = tempfile::tempdir().unwrap();
        let servers = std::cell::RefCell::new(Vec::new());
        let mcp = |sb: &Sandbox| {
            let dir = keep.path().join(format!("srv-{}", servers.borrow().len()));
            let rec = Recorder::start(&dir, Some("tok-1"));
            std::fs::write(sb.agent().join("auth.json"), auth.to_string()).unwrap();
            let m = json!({"mcpServers": {"h": {"url": rec.url, "exposure": "direct",
                "auth": {"provider": "anthropic"}}}});
            servers.borrow_mut().push(rec);
            m
        };
        let turns = json!([
            {"tool_calls": [{"name": "mcp__h__whoami", "arguments": {}}]},
            {"text": "done"}
        ]);
        let (pi, ours) = both_in(&o, &mcp, &|_| turns.clone(), &[]);
        let what = auth.to_string();
        assert_eq!(ours.results, pi.results, "{what}: {}", stderr(&ours.out));
        let seen: Vec<_> = servers.borrow().iter().map(Recorder::requests).collect();
        let rpc = |r: &[(String, Option<String>, Option<String>)]| {
            r.iter().filter_map(|x| x.1.clone()).collect::<Vec<_>>()
        };
        if auth.get("anthropic").is_some() {
            let text = ours.results[0]["content"]
                .as_str()
                .unwrap_or("")
                .to_string();
            assert!(text.contains("Bearer tok-1"), "{what}: {text}");
            for (who, r) in ["pi", "ours"].iter().zip(&seen) {
                assert!(
                    r.iter().all(|x| x.2.as_deref() == Some("Bearer tok-1")),
                    "{what}: {who} sent {r:?}"
                );
                assert!(rpc(r).contains(&"tools/call".to_string()), "{who}: {r:?}");
            }
        } else {
            // No credential for the provider: nothing sent, refused at
            // initialize, so no tool.
            let text = ours.results[0]["content"]
                .as_str()
                .unwrap_or("")
                .to_string();
            assert!(!text.contains("tok-1"), "{what}: {text}");
            for (who, r) in ["pi", "ours"].iter().zip(&seen) {
                assert!(r.iter().all(|x| x.2.is_none()), "{what}: {who} sent {r:?}");
                assert_eq!(rpc(r), ["initialize"], "{what}: {who}");
            }
            let err = stderr(&ours.out);
            assert!(
                err.contains("provider \"anthropic\"") && err.contains("/login anthropic"),
                "{err}"
            );
        }
    }
    // Signing in to such a server is the provider's sign-in: pi's words.
    let sb = Sandbox::new();
    let mcp = json!({"mcpServers": {"h": {"url": "http://127.0.0.1:9/mcp",
        "auth": {"provider": "anthropic"}}}});
    std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
    let login = |mut c: Command| c.args(["mcp", "login", "h"]).output().unwrap();
    let (pi, ours) = (login(o.pi160(&sb)), login(sb.cmd("pi-resources")));
    let line = "MCP server \"h\" uses the credentials of provider \"anthropic\". Run \"pi auth login anthropic\".";
    assert!(stderr(&pi).contains(line), "{}", stderr(&pi));
    assert!(stderr(&ours).contains(line), "{}", stderr(&ours));
    assert_eq!((pi.status.code(), ours.status.code()), (Some(1), Some(1)));
    assert!(!sb.agent().join("mcp-auth.json").exists());
}

/// URLs are parsed, as pi 1.6.0 parses them, before a credential goes
/// anywhere. `http://127.0.0.1:x@127.0.0.2:<port>/mcp` reads as loopback
/// but its host is 127.0.0.2 (user `127.0.0.1`, password `x`): with
/// `auth.provider` it is pi's config error "auth requires an https URL, or
/// http on localhost, 127.0.0.1, or [::1]". A URL with a user name or
/// password on a real loopback host is refused before any request with
/// pi's "Request cannot be constructed from a URL that includes
/// credentials". The listeners behind both URLs get no request at all from
/// either program, so the provider's key never leaves.
#[test]
fn mcp_urls_with_userinfo_never_carry_the_key_as_pi() {
    let Some(o) = Oracle::find("mcp_urls_with_userinfo_never_carry_the_key_as_pi") else {
        return;
    };
    let keep = tempfile::tempdir().unwrap();
    let far = Recorder::start_on("127.0.0.2", &keep.path().join("far"), &[]);
    let near = Recorder::start_on("127.0.0.1", &keep.path().join("near"), &[]);
    let port = |r: &Recorder| {
        r.url
            .trim_end_matches("/mcp")
            .rsplit(':')
            .next()
            .unwrap()
            .to_string()
    };
    let fooled = format!("http://127.0.0.1:x@127.0.0.2:{}/mcp", port(&far));
    let creds = format!("http://user:pw@127.0.0.1:{}/mcp", port(&near));
    let mcp = json!({"mcpServers": {
        "fooled": {"url": fooled, "exposure": "direct", "auth": {"provider": "anthropic"}},
        "creds": {"url": creds, "exposure": "direct", "auth": {"provider": "anthropic"}}}});
    let refused =
        "server \"fooled\": auth requires an https URL, or http on localhost, 127.0.0.1, or [::1]";
    let no_creds =
        format!("Request cannot be constructed from a URL that includes credentials: {creds}");
    let turns = json!([{"text": "done"}]);
    for ours in [false, true] {
        let who = if ours { "pi-run" } else { "pi" };
        let sb = Sandbox::new();
        let mock = MockLlm::start(&o, sb.root(), &turns);
        mock.configure(&sb.agent());
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        std::fs::write(
            sb.agent().join("auth.json"),
            json!({"anthropic": {"type": "api_key", "key": "tok-SECRET"}}).to_string(),
        )
        .unwrap();
        let mut cmd = if ours { sb.cmd("pi-run") } else { o.pi160(&sb) };
        let out = cmd.args(["--mode", "json", "go"]).output().unwrap();
        assert!(out.status.success(), "{who}: {}", stderr(&out));
        if ours {
            let err = stderr(&out);
            assert!(err.contains(refused), "{err}");
            assert!(
                err.contains(&format!("MCP server \"creds\" failed: {no_creds}")),
                "{err}"
            );
        } else {
            // pi says it in `pi mcp list` (its print mode is silent).
            let list = o.pi160(&sb).args(["mcp", "list"]).output().unwrap();
            let text = format!("{}{}", stdout(&list), stderr(&list));
            assert!(text.contains(refused), "{text}");
            assert!(text.contains(&no_creds), "{text}");
        }
        drop(mock);
        for r in [&far, &near] {
            assert_eq!(r.requests(), [], "{who} sent to {}", r.url);
        }
    }
}

/// A record `pi-resources mcp login` wrote to `mcp-auth.json` (pi's key and
/// shape, plus our `stepUpScope` once a call met a 403
/// `insufficient_scope`) is used by pi 1.6.0 as it is: pi sends its access
/// token on every request and leaves the file alone, and when the token has
/// expired pi refreshes it with our stored refresh token, client and
/// metadata and keeps our extra field (FINDINGS §14).
#[test]
fn mcp_auth_records_written_by_us_are_used_by_pi() {
    use std::os::unix::fs::PermissionsExt;
    let Some(o) = Oracle::find("mcp_auth_records_written_by_us_are_used_by_pi") else {
        return;
    };
    let sb = Sandbox::new();
    let rec = Recorder::start_with(&sb.root().join("srv"), &["tok-1", "oauth"]);
    let mcp = json!({"mcpServers": {"h": {"url": rec.url, "exposure": "direct"}}});
    std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
    let bin = sb.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let open = bin.join("xdg-open");
    std::fs::write(
        &open,
        "#!/bin/sh\nexec curl -s -o /dev/null -L --max-time 20 \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let login = sb
        .cmd("pi-resources")
        .env("PATH", &path)
        .args(["mcp", "login", "h", "--timeout", "25"])
        .output()
        .unwrap();
    assert!(login.status.success(), "{}", stderr(&login));
    let file = sb.agent().join("mcp-auth.json");
    let read = || std::fs::read_to_string(&file).unwrap();
    let key = format!("mcp__h|{}", rec.url);
    // pi connects with the record as it is, and does not rewrite it.
    let pi_list = |what: &str| {
        let before = rec.requests().len();
        let out = o.pi160(&sb).args(["mcp", "list"]).output().unwrap();
        assert!(
            stdout(&out).contains("h: connected, 2 tools"),
            "{what}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        rec.requests()[before..].to_vec()
    };
    let ours = read();
    let seen = pi_list("our record");
    assert!(
        !seen.is_empty() && seen.iter().all(|r| r.2.as_deref() == Some("Bearer tok-1")),
        "{seen:?}"
    );
    assert_eq!(read(), ours, "pi left our record alone");
    // A call refused with 403 insufficient_scope: ours notes the scope.
    let script = sb.root().join("script.jsonl");
    std::fs::write(
        &script,
        "{\"toolCalls\":[{\"name\":\"mcp__h__admin\",\"arguments\":{},\"id\":\"c1\"}]}\n{\"text\":\"done\"}\n",
    )
    .unwrap();
    let run = sb
        .cmd("pi-run")
        .args(["--no-session", "--provider", "faux", "--model"])
        .arg(&script)
        .args(["-p", "go"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    let noted: Value = serde_json::from_str(&read()).unwrap();
    assert_eq!(noted[&key]["stepUpScope"], "mcp:admin", "{noted}");
    let ours = read();
    let seen = pi_list("our record with stepUpScope");
    assert!(
        seen.iter().all(|r| r.2.as_deref() == Some("Bearer tok-1")),
        "{seen:?}"
    );
    assert_eq!(read(), ours, "pi left our record alone");
    // Expired: pi refreshes with what we stored and keeps our field.
    let mut expired = noted.clone();
    expired[&key]["tokensExpireAt"] = json!(1);
    expired[&key]["tokens"]["access_token"] = json!("stale");
    std::fs::write(&file, expired.to_string()).unwrap();
    let seen = pi_list("our expired record");
    assert!(
        seen.iter().any(|r| r.1.as_deref() == Some("/token")),
        "pi refreshed: {seen:?}"
    );
    assert!(
        seen.iter()
            .filter(|r| r.1.as_deref() == Some("initialize"))
            .all(|r| r.2.as_deref() == Some("Bearer tok-1")),
        "{seen:?}"
    );
    let after: Value = serde_json::from_str(&read()).unwrap();
    assert_eq!(after[&key]["stepUpScope"], "mcp:admin", "{after}");
    assert_eq!(after[&key]["tokens"]["access_token"], "tok-1", "{after}");
    assert_eq!(
        after[&key]["clientInformation"],
        noted[&key]["clientInformation"]
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

// ---------------------------------------------------------------------------
// `/mcp` in RPC mode (and print mode) side by side with pi 1.6.0: reconnect,
// logout, login, the status of a server still connecting.

fn listed() -> String {
    repo().join("tests/mcp/listed.py").display().to_string()
}

/// An RPC process (pi 1.6.0 or pi-run) driven one prompt at a time.
struct McpRpc {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    rx: std::sync::mpsc::Receiver<Value>,
    /// The start-up notices (`MCP servers need attention: …`), wherever
    /// they came.
    attention: Vec<Value>,
}

/// A UI request without its id (a fresh UUID each time).
fn without_id(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("id");
    }
    v
}

impl McpRpc {
    fn spawn(sb: &Sandbox, mut cmd: Command) -> McpRpc {
        use std::io::BufRead;
        let err = std::fs::File::create(sb.root().join("rpc-stderr.txt")).unwrap();
        cmd.args(["--mode", "rpc"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(err);
        let mut child = cmd.spawn().expect("spawn the rpc process");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str(&line).unwrap_or_else(|_| json!({"NOT_JSON": line}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        McpRpc {
            child,
            stdin,
            rx,
            attention: Vec::new(),
        }
    }

    fn send(&mut self, v: &Value) {
        use std::io::Write;
        let s = self.stdin.as_mut().expect("stdin open");
        writeln!(s, "{v}").unwrap();
        s.flush().unwrap();
    }

    /// Sends the prompt `message` and answers its dialogs with `answer`
    /// (`None`: left open); the UI requests it brought (without ids, the
    /// start-up notice set aside) until its response, and for a run until
    /// `agent_settled`. `answer` sees every request, notices too.
    fn prompt(
        &mut self,
        id: &str,
        message: &str,
        answer: &mut dyn FnMut(&Value) -> Option<Value>,
    ) -> Vec<Value> {
        self.send(&json!({"id": id, "type": "prompt", "message": message}));
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut ui = Vec::new();
        let mut running = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("{message}: no response; UI so far {ui:?}"));
            if v["type"] == "extension_ui_request" {
                let text = v["message"].as_str().unwrap_or("");
                if text.starts_with("MCP servers need attention:") {
                    self.attention.push(without_id(&v));
                    continue;
                }
                ui.push(without_id(&v));
                if let Some(mut a) = answer(&v) {
                    a["type"] = json!("extension_ui_response");
                    a["id"] = v["id"].clone();
                    self.send(&a);
                }
            } else if v["type"] == "response" && v["id"] == id {
                assert_eq!(v["success"], json!(true), "{message}: {v}");
                if v["data"]["disposition"] != "started" {
                    return ui;
                }
                running = true;
            } else if running && v["type"] == "agent_settled" {
                return ui;
            }
        }
    }

    /// Closes stdin and waits for the exit (30 s at most); the start-up
    /// notices.
    fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                assert!(s.success(), "rpc exit {s:?}");
                break;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the rpc process did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        while let Ok(v) = self.rx.recv_timeout(Duration::from_millis(200)) {
            if v["type"] == "extension_ui_request"
                && v["message"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("MCP servers need attention:")
            {
                self.attention.push(without_id(&v));
            }
        }
        std::mem::take(&mut self.attention)
    }
}

impl Drop for McpRpc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn no_answer(_: &Value) -> Option<Value> {
    None
}

fn notify(message: &str, kind: &str) -> Value {
    json!({"type": "extension_ui_request", "method": "notify", "message": message, "notifyType": kind})
}

/// The system messages of the sandbox's one session after the first, without
/// their timestamps (the tool patches a reconnect brought).
fn later_system_messages(sb: &Sandbox) -> Vec<Value> {
    system_messages(sb).split_off(1)
}

/// The system messages of the sandbox's one session, without their
/// timestamps.
fn system_messages(sb: &Sandbox) -> Vec<Value> {
    let sessions = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    assert_eq!(sessions.len(), 1, "one session");
    let text = std::fs::read_to_string(sessions[0]["path"].as_str().unwrap()).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["message"]["role"] == "system")
        .map(|e| {
            let mut m = e["message"].clone();
            m.as_object_mut().unwrap().remove("timestamp");
            m
        })
        .collect()
}

/// `/mcp reconnect` as pi: without a name and with two connected servers
/// it asks (`select` "MCP server"), reconnects the one picked and says so
/// (`Reconnected to MCP server "var" (connected · 2 tools).`); a disabled
/// server, an unknown one and two words are pi's errors and usage; the
/// status then counts the new tools, and the next request records the
/// change as pi does (`toolsAdded` the new tool, `toolsRemoved` the gone
/// one).
#[test]
fn rpc_mcp_reconnect_matches_pi() {
    let Some(o) = Oracle::find("rpc_mcp_reconnect_matches_pi") else {
        return;
    };
    let run = |ours: bool| {
        let sb = Sandbox::new();
        let mock = MockLlm::start(&o, sb.root(), &json!([]));
        mock.configure(&sb.agent());
        let (t1, t2) = (sb.root().join("tools1.txt"), sb.root().join("tools2.txt"));
        std::fs::write(&t1, "alpha beta").unwrap();
        std::fs::write(&t2, "one").unwrap();
        let (t1s, t2s) = (t1.display().to_string(), t2.display().to_string());
        let mcp = json!({"mcpServers": {
            "var": {"command": "python3", "args": [listed(), t1s], "exposure": "direct"},
            "var2": {"command": "python3", "args": [listed(), t2s], "exposure": "direct"},
            "off": {"command": "python3", "args": [listed(), t2s], "exposure": "direct", "enabled": false}}});
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        let mut c = McpRpc::spawn(&sb, if ours { sb.cmd("pi-run") } else { o.pi160(&sb) });
        let mut ui = vec![c.prompt("p1", "hi", &mut no_answer)];
        std::fs::write(&t1, "alpha gamma").unwrap();
        let mut pick = |v: &Value| (v["method"] == "select").then(|| json!({"value": "var"}));
        ui.push(c.prompt("p2", "/mcp reconnect", &mut pick));
        for (id, m) in [
            ("p3", "/mcp reconnect off"),
            ("p4", "/mcp reconnect nope"),
            ("p5", "/mcp reconnect var extra"),
            ("p6", "/mcp"),
            ("p7", "again"),
        ] {
            ui.push(c.prompt(id, m, &mut no_answer));
        }
        let attention = c.finish();
        let patches = later_system_messages(&sb);
        drop(mock);
        (ui, attention, patches)
    };
    let (pi, ours) = (run(false), run(true));
    assert_eq!(ours.0, pi.0, "the UI requests of each prompt");
    assert_eq!(
        ours.0[1],
        [
            json!({"type": "extension_ui_request", "method": "select", "title": "MCP server", "options": ["var", "var2"]}),
            notify(
                "Reconnected to MCP server \"var\" (connected · 2 tools).",
                "info"
            ),
        ]
    );
    assert_eq!(
        ours.0[2..6],
        [
            vec![notify("No enabled MCP server to reconnect.", "error")],
            vec![notify("No MCP server named \"nope\".", "error")],
            vec![notify(pi_lib::mcp::status::USAGE, "warning")],
            vec![notify(
                "var: connected, 2 tools (direct)\nvar2: connected, 1 tools (direct)\noff: disabled (direct)",
                "info"
            )],
        ]
    );
    assert_eq!((ours.1.len(), pi.1.len()), (0, 0), "no start-up notice");
    assert_eq!(ours.2, pi.2, "the tool patch of the next request");
    assert_eq!(
        ours.2,
        [json!({"role": "system", "content": "",
            "toolsAdded": [{"name": "mcp__var__gamma", "description": "Tool gamma.", "parameters": {"type": "object", "properties": {}}}],
            "toolsRemoved": [{"name": "mcp__var__beta"}]})]
    );
}

/// Without a name, `/mcp reconnect` takes the one server that is not
/// connected, without asking, and says why it failed again, as pi.
#[test]
fn rpc_mcp_reconnect_without_a_name_retries_the_failed_server_as_pi() {
    let Some(o) = Oracle::find("rpc_mcp_reconnect_without_a_name_retries_the_failed_server_as_pi")
    else {
        return;
    };
    let run = |ours: bool| {
        let sb = Sandbox::new();
        // pi-run needs a model to start (pi does not); no request is made.
        let mock = MockLlm::start(&o, sb.root(), &json!([]));
        mock.configure(&sb.agent());
        let t = sb.root().join("tools.txt");
        std::fs::write(&t, "alpha").unwrap();
        let mcp = json!({"mcpServers": {
            "var": {"command": "python3", "args": [listed(), t.display().to_string()], "exposure": "direct"},
            "gone": {"command": "/nonexistent/pi-toolkit-mcp", "exposure": "direct"}}});
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        let mut c = McpRpc::spawn(&sb, if ours { sb.cmd("pi-run") } else { o.pi160(&sb) });
        let ui = c.prompt("p", "/mcp reconnect", &mut no_answer);
        let attention = c.finish();
        (ui, attention)
    };
    for (who, (ui, attention)) in [("pi", run(false)), ("pi-run", run(true))] {
        assert_eq!(ui.len(), 1, "{who}: {ui:?}");
        assert_eq!(ui[0]["notifyType"], "error", "{who}: {ui:?}");
        let text = ui[0]["message"].as_str().unwrap_or("");
        assert!(
            text.starts_with("MCP server \"gone\" failed to connect: "),
            "{who}: {text}"
        );
        assert_eq!(attention.len(), 1, "{who}: {attention:?}");
    }
}

/// A loopback MCP server behind OAuth (tests/mcp/oauth.py), stopped on drop.
struct OAuthServer {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl OAuthServer {
    fn start(dir: &Path) -> OAuthServer {
        use std::io::BufRead;
        let log = dir.join("oauth-log.jsonl");
        let mut child = Command::new("python3")
            .arg(repo().join("tests/mcp/oauth.py"))
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start tests/mcp/oauth.py");
        let mut first = String::new();
        let out = child.stdout.take().unwrap();
        std::io::BufReader::new(out).read_line(&mut first).unwrap();
        let port = first
            .trim()
            .strip_prefix("PORT=")
            .and_then(|p| p.parse().ok())
            .expect("oauth.py prints PORT=");
        OAuthServer { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The paths it was asked for, in order.
    fn paths(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["path"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One plain HTTP GET of `url` (loopback); the `Location` of its answer.
fn http_get_location(url: &str) -> Option<String> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_at(rest.find('/')?);
    let mut s = std::net::TcpStream::connect(host).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("location"))
        })
        .map(|(_, v)| v.trim().to_string())
}

/// A sandbox bin dir with an `xdg-open` that only notes the URL it gets
/// (nobody's browser opens), first on PATH.
fn fake_opener(sb: &Sandbox, cmd: &mut Command) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = sb.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let noted = sb.root().join("opened.txt");
    let script = bin.join("xdg-open");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho \"$1\" >> '{}'\n", noted.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = cmd
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v.map(|v| v.to_string_lossy().to_string()))
        .unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin.display()));
    noted
}

/// The authorization URL of a sign-in notice (its second line).
fn notified_url(v: &Value) -> Option<String> {
    let text = v["message"].as_str()?;
    text.strip_prefix("Sign in to MCP server ")?;
    text.lines().nth(1).map(str::to_string)
}

/// `/mcp logout` as pi: without a name it takes the OAuth server that needs
/// sign-in (no `select`), which had nothing stored; by name it drops that
/// server's tokens from `mcp-auth.json` and leaves it needing sign-in (the
/// status says so); a server with its own `Authorization` header and an
/// unknown one are pi's errors.
#[test]
fn rpc_mcp_logout_matches_pi() {
    let Some(o) = Oracle::find("rpc_mcp_logout_matches_pi") else {
        return;
    };
    let run = |ours: bool| {
        let sb = Sandbox::new();
        // pi-run needs a model to start (pi does not); no request is made.
        let mock = MockLlm::start(&o, sb.root(), &json!([]));
        mock.configure(&sb.agent());
        let srv = OAuthServer::start(sb.root());
        let url = srv.url();
        let mcp = json!({"mcpServers": {
            "web": {"url": url, "exposure": "direct"},
            "web2": {"url": format!("{url}?s=2"), "exposure": "direct"},
            "hdr": {"url": url, "headers": {"Authorization": "Bearer tok-1"}, "exposure": "direct"}}});
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        let auth = sb.agent().join("mcp-auth.json");
        let stored = json!({format!("mcp__web|{url}"): {"tokens": {"access_token": "tok-1", "token_type": "Bearer"}}});
        std::fs::write(&auth, stored.to_string()).unwrap();
        let mut c = McpRpc::spawn(&sb, if ours { sb.cmd("pi-run") } else { o.pi160(&sb) });
        let ui: Vec<Vec<Value>> = [
            "/mcp",
            "/mcp logout",
            "/mcp logout web",
            "/mcp logout web",
            "/mcp logout hdr",
            "/mcp logout nope",
            "/mcp",
            "/mcp reconnect web",
        ]
        .iter()
        .enumerate()
        .map(|(i, m)| c.prompt(&format!("p{i}"), m, &mut no_answer))
        .collect();
        let attention = c.finish();
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&auth).unwrap()).unwrap();
        (ui, attention, file)
    };
    let (pi, ours) = (run(false), run(true));
    assert_eq!(ours.0, pi.0, "the UI requests of each prompt");
    let oauth_only =
        "No enabled MCP server uses OAuth. Only HTTP servers without an Authorization header do.";
    assert_eq!(
        ours.0,
        [
            vec![notify("web: connected, 1 tools (direct)\nweb2: needs sign-in, run /mcp login web2 (direct)\nhdr: connected, 1 tools (direct)", "info")],
            vec![notify("No stored credentials for MCP server \"web2\".", "info")],
            vec![notify("Signed out of MCP server \"web\".", "info")],
            vec![notify("No stored credentials for MCP server \"web\".", "info")],
            vec![notify(oauth_only, "error")],
            vec![notify("No MCP server named \"nope\".", "error")],
            vec![notify("web: needs sign-in, run /mcp login web (direct)\nweb2: needs sign-in, run /mcp login web2 (direct)\nhdr: connected, 1 tools (direct)", "info")],
            vec![notify("MCP server \"web\" requires sign-in. Run /mcp to sign in.", "error")],
        ]
    );
    assert_eq!(ours.1, pi.1, "the start-up notice");
    assert_eq!(
        ours.1,
        [
            json!({"type": "extension_ui_request", "method": "notify", "notifyType": "warning",
            "message": "MCP servers need attention:\n  web2: needs sign-in\nRun /mcp to fix."})
        ]
    );
    assert_eq!(ours.2, pi.2, "mcp-auth.json afterwards");
    assert_eq!(ours.2, json!({}));
}

/// `/mcp login` in RPC as pi: the authorization URL is notified (and given
/// to the browser), an `input` dialog waits; the browser reaching the
/// loopback callback signs in (`Signed in to MCP server "web" (1 tools).`)
/// and the server reconnects, its tool declared on the next request; a
/// pasted redirect URL signs in too; cancelling the dialog is `Sign-in
/// cancelled.`.
#[test]
fn rpc_mcp_login_signs_in_and_reconnects_as_pi() {
    let Some(o) = Oracle::find("rpc_mcp_login_signs_in_and_reconnects_as_pi") else {
        return;
    };
    let run = |ours: bool| {
        let sb = Sandbox::new();
        let mock = MockLlm::start(&o, sb.root(), &json!([]));
        mock.configure(&sb.agent());
        let srv = OAuthServer::start(sb.root());
        let mcp = json!({"mcpServers": {"web": {"url": srv.url(), "exposure": "direct"}}});
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        let mut cmd = if ours { sb.cmd("pi-run") } else { o.pi160(&sb) };
        let opened = fake_opener(&sb, &mut cmd);
        let mut c = McpRpc::spawn(&sb, cmd);
        // The browser: follows the authorization redirect to the callback.
        let mut browser = |v: &Value| {
            if let Some(u) = notified_url(v) {
                std::thread::spawn(move || {
                    if let Some(cb) = http_get_location(&u) {
                        http_get_location(&cb);
                    }
                });
            }
            None
        };
        let mut ui = vec![c.prompt("p1", "/mcp login web", &mut browser)];
        ui.push(c.prompt("p2", "/mcp", &mut no_answer));
        // The user pastes where the browser was sent.
        let mut pasted = None;
        let mut paste = |v: &Value| {
            if let Some(u) = notified_url(v) {
                pasted = http_get_location(&u);
            }
            (v["method"] == "input").then(|| json!({"value": pasted.clone().unwrap_or_default()}))
        };
        ui.push(c.prompt("p3", "/mcp login", &mut paste));
        let mut cancel = |v: &Value| (v["method"] == "input").then(|| json!({"cancelled": true}));
        ui.push(c.prompt("p4", "/mcp login web", &mut cancel));
        ui.push(c.prompt("p5", "hi", &mut no_answer));
        let attention = c.finish();
        let declared: Vec<Value> = system_messages(&sb)
            .iter()
            .map(|m| m["toolsAdded"].clone())
            .collect();
        let opened = std::fs::read_to_string(opened).unwrap_or_default();
        drop(mock);
        // The URLs differ per run (ports, PKCE, state): what they are.
        let urls: Vec<String> = ui.iter().flatten().filter_map(notified_url).collect();
        let prefix = format!("http://127.0.0.1:{}/authorize?", srv.port);
        assert_eq!(urls.len(), 3, "{ours}: {urls:?}");
        for u in &urls {
            assert!(u.starts_with(&prefix), "{ours}: {u}");
            assert!(u.contains("code_challenge_method=S256"), "{ours}: {u}");
            assert!(opened.contains(u.as_str()), "{ours}: opened {opened}");
        }
        let ui: Vec<Vec<Value>> = ui
            .into_iter()
            .map(|p| {
                p.into_iter()
                    .map(|mut v| {
                        if notified_url(&v).is_some() {
                            v["message"] =
                                json!("Sign in to MCP server \"web\" in your browser:\n<url>");
                        }
                        v
                    })
                    .collect()
            })
            .collect();
        (ui, attention, declared, srv.paths())
    };
    let (pi, ours) = (run(false), run(true));
    assert_eq!(ours.0, pi.0, "the UI requests of each prompt");
    let url_notice = notify(
        "Sign in to MCP server \"web\" in your browser:\n<url>",
        "info",
    );
    let waiting = json!({"type": "extension_ui_request", "method": "input",
        "title": "Waiting for sign-in to \"web\". If the browser cannot reach this machine, paste the URL it was redirected to.",
        "placeholder": "http://127.0.0.1:.../callback?code=..."});
    let signed_in = notify("Signed in to MCP server \"web\" (1 tools).", "info");
    assert_eq!(
        ours.0[..4],
        [
            vec![url_notice.clone(), waiting.clone(), signed_in.clone()],
            vec![notify("web: connected, 1 tools (direct)", "info")],
            vec![url_notice.clone(), waiting.clone(), signed_in],
            vec![url_notice, waiting, notify("Sign-in cancelled.", "info")],
        ]
    );
    assert_eq!(ours.1, pi.1, "the start-up notice");
    assert_eq!(ours.2, pi.2, "the request declares the server's tool");
    assert!(
        ours.2
            .iter()
            .any(|t| t.to_string().contains("\"mcp__web__echo\"")),
        "{:?}",
        ours.2
    );
    for (who, paths) in [("pi", &pi.3), ("pi-run", &ours.3)] {
        let tokens = paths.iter().filter(|p| *p == "/token").count();
        assert_eq!(tokens, 2, "{who}: two code exchanges: {paths:?}");
    }
}

/// `/mcp` waits for a server whose `initialize` stalls until its timeout,
/// then shows it failed with pi's reason (`MCP request timed out after
/// 2000ms`), never as still connecting.
#[test]
fn rpc_mcp_status_of_a_pending_server_matches_pi() {
    let Some(o) = Oracle::find("rpc_mcp_status_of_a_pending_server_matches_pi") else {
        return;
    };
    let run = |ours: bool| {
        let sb = Sandbox::new();
        // pi-run needs a model to start (pi does not); no request is made.
        let mock = MockLlm::start(&o, sb.root(), &json!([]));
        mock.configure(&sb.agent());
        let t = sb.root().join("tools.txt");
        std::fs::write(&t, "alpha beta").unwrap();
        let mut slow = stdio("hang", "deferred");
        slow["timeout"] = json!(2);
        let mcp = json!({"mcpServers": {
            "var": {"command": "python3", "args": [listed(), t.display().to_string()], "exposure": "direct"},
            "slow": slow}});
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        let mut c = McpRpc::spawn(&sb, if ours { sb.cmd("pi-run") } else { o.pi160(&sb) });
        let ui = c.prompt("p", "/mcp", &mut no_answer);
        (ui, c.finish())
    };
    let (pi, ours) = (run(false), run(true));
    assert_eq!(ours, pi);
    assert_eq!(
        ours.0,
        [notify(
            "var: connected, 2 tools (direct)\nslow: failed (deferred)\n    MCP request timed out after 2000ms",
            "info"
        )]
    );
}

/// In print mode pi's `/mcp` shows nothing but acts: `logout` drops the
/// tokens, `login` (which needs a UI) does not start a sign-in; nothing is
/// sent to the model.
#[test]
fn mcp_print_mode_logout_drops_tokens_and_login_does_nothing_as_pi() {
    let Some(o) = Oracle::find("mcp_print_mode_logout_drops_tokens_and_login_does_nothing_as_pi")
    else {
        return;
    };
    let run = |ours: bool| {
        let sb = Sandbox::new();
        let mock = MockLlm::start(&o, sb.root(), &json!([]));
        mock.configure(&sb.agent());
        let srv = OAuthServer::start(sb.root());
        let url = srv.url();
        let mcp = json!({"mcpServers": {"web": {"url": url, "exposure": "direct"}}});
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        let auth = sb.agent().join("mcp-auth.json");
        let stored = json!({format!("mcp__web|{url}"): {"tokens": {"access_token": "tok-1"}}, "other|x": {"tokens": {}}});
        std::fs::write(&auth, stored.to_string()).unwrap();
        let p = |m: &str| {
            let mut cmd = if ours { sb.cmd("pi-run") } else { o.pi160(&sb) };
            let opened = fake_opener(&sb, &mut cmd);
            let out = cmd.args(["-p", m]).output().unwrap();
            (out, opened)
        };
        let (login, opened) = p("/mcp login web");
        let (logout, _) = p("/mcp logout web");
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&auth).unwrap()).unwrap();
        let outputs = [&login, &logout].map(|o| (o.status.code(), stdout(o)));
        let signin = srv
            .paths()
            .iter()
            .any(|p| p == "/register" || p == "/authorize");
        drop(mock);
        (outputs, file, opened.exists(), signin)
    };
    let (pi, ours) = (run(false), run(true));
    assert_eq!(ours, pi);
    assert_eq!(ours.0, [(Some(0), String::new()), (Some(0), String::new())]);
    assert_eq!(ours.1, json!({"other|x": {"tokens": {}}}));
    assert!(!ours.2 && !ours.3, "no sign-in started");
}

/// Whether process group `pgid` still holds a process that is not a zombie
/// (where nobody reaps orphans, ended ones stay as zombies).
fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            return false;
        };
        let f: Vec<&str> = rest.split(' ').collect();
        f.len() > 2 && f[2] == pgid.to_string() && f[0] != "Z" && f[0] != "X"
    })
}

/// Kills the groups it holds when dropped (so a failing test leaves
/// nothing behind either).
struct Groups(Vec<u32>);

impl Drop for Groups {
    fn drop(&mut self) {
        for g in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{g}")])
                .status();
        }
    }
}

/// Stdio servers end with pi-run, and so does everything they started:
/// after a normal exit, after SIGTERM to pi-run (exit 143), and when an RPC
/// session ends (stdin closed). Two servers: one that exits on EOF but
/// left a child in the background (`sh -c "sleep 1000 & exec server"`),
/// and one that ignores both EOF and SIGTERM (its shell loops on after the
/// server's EOF, with SIGTERM ignored by it and its children). Nothing of
/// either process group is left once pi-run has exited: EOF, then SIGTERM
/// to the group, then SIGKILL after the grace period.
#[test]
fn mcp_stdio_servers_and_their_children_end_with_pi_run() {
    for how in ["exit", "sigterm", "rpc"] {
        let sb = Sandbox::new();
        let d = sb.root().display().to_string();
        let fx = fixture();
        let bg = json!({"command": "sh", "exposure": "direct", "args": ["-c",
            format!("sleep 1000 & echo $$ > {d}/bg.pid; exec python3 {fx} ok")]});
        let stubborn = json!({"command": "sh", "exposure": "direct", "args": ["-c",
            format!("trap '' TERM; echo $$ > {d}/stubborn.pid; python3 {fx} ok; while :; do sleep 1; done")]});
        let mcp = json!({"mcpServers": {"bg": bg, "stubborn": stubborn}});
        std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
        let script = sb.root().join("script.jsonl");
        let turns = match how {
            "sigterm" => json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch started; sleep 30"}}]}).to_string() + "\n{\"text\":\"never\"}\n",
            _ => "{\"text\":\"done\"}\n".to_string(),
        };
        std::fs::write(&script, turns).unwrap();
        let mut cmd = sb.cmd("pi-run");
        cmd.args(["--provider", "faux", "--model"]).arg(&script);
        if how == "rpc" {
            cmd.args(["--mode", "rpc"])
                .stdin(std::process::Stdio::piped());
        } else {
            cmd.args(["--mode", "json", "go"]);
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid_of = |f: &str| -> u32 {
            let p = sb.root().join(f);
            let t = Instant::now();
            loop {
                if let Some(n) = std::fs::read_to_string(&p)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                {
                    return n;
                }
                assert!(t.elapsed() < Duration::from_secs(30), "{how}: no {f}");
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let groups = Groups(vec![pid_of("bg.pid"), pid_of("stubborn.pid")]);
        match how {
            "sigterm" => {
                let started = sb.cwd().join("started");
                let t = Instant::now();
                while !started.exists() {
                    assert!(t.elapsed() < Duration::from_secs(30), "the tool never ran");
                    std::thread::sleep(Duration::from_millis(20));
                }
                let st = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status()
                    .unwrap();
                assert!(st.success());
            }
            "rpc" => {
                // Connected (the fixture answers at once), then the client
                // goes away.
                std::thread::sleep(Duration::from_millis(1500));
                drop(child.stdin.take());
            }
            _ => {}
        }
        let t = Instant::now();
        let out = loop {
            if child.try_wait().unwrap().is_some() {
                break child.wait_with_output().unwrap();
            }
            if t.elapsed() > Duration::from_secs(40) {
                let _ = child.kill();
                panic!("{how}: pi-run still running after 40 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let want = if how == "sigterm" { 143 } else { 0 };
        assert_eq!(out.status.code(), Some(want), "{how}: {}", stderr(&out));
        // Signals take a moment to land after pi-run's last SIGKILL.
        let t = Instant::now();
        while groups.0.iter().any(|g| group_alive(*g)) && t.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for (g, name) in groups.0.iter().zip(["bg", "stubborn"]) {
            assert!(
                !group_alive(*g),
                "{how}: server {name} (group {g}) outlived pi-run"
            );
        }
    }
}

/// tests/mcp/oversize-http.py on a free loopback port; killed on drop.
struct Oversized {
    child: std::process::Child,
    url: String,
}

impl Oversized {
    fn start(dir: &Path, sse: bool) -> Oversized {
        let port_file = dir.join(if sse { "sse.port" } else { "json.port" });
        let mut cmd = Command::new("python3");
        cmd.arg(repo().join("tests/mcp/oversize-http.py"))
            .arg(&port_file);
        if sse {
            cmd.arg("sse");
        }
        let child = cmd.stdin(std::process::Stdio::null()).spawn().unwrap();
        let t = Instant::now();
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "oversize-http.py never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Oversized {
            child,
            url: format!("http://127.0.0.1:{}/mcp", port.trim()),
        }
    }
}

impl Drop for Oversized {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A message over 16 MiB (a `tools/call` answer of 17 MB) is an error
/// result at once, naming the server and the limit, not a timeout after
/// the server's `timeout` (30 s here): from a stdio server, whose
/// connection is then closed (its next call fails the same way), and from
/// an HTTP server as a JSON body (that call fails) or as a server-sent
/// event (the SDK ends the connection on it).
#[test]
fn mcp_message_over_the_cap_is_reported_at_once() {
    let sb = Sandbox::new();
    let json_srv = Oversized::start(sb.root(), false);
    let sse_srv = Oversized::start(sb.root(), true);
    let mut fx = stdio("ok", "direct");
    fx["timeout"] = json!(30);
    let http = |u: &str| json!({"url": u, "exposure": "direct", "timeout": 30});
    let mcp = json!({"mcpServers": {"fx": fx, "j": http(&json_srv.url), "s": http(&sse_srv.url)}});
    std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
    let script = sb.root().join("script.jsonl");
    let call = |name: &str, args: Value| {
        json!({"toolCalls": [{"name": name, "arguments": args}]}).to_string()
    };
    std::fs::write(
        &script,
        [
            call("mcp__fx__big_text", json!({"n": 17_000_000})),
            call("mcp__fx__add", json!({"a": 1, "b": 2})),
            call("mcp__j__big", json!({})),
            call("mcp__s__big", json!({})),
            json!({"text": "done"}).to_string(),
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let t = Instant::now();
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model"])
        .arg(&script)
        .args(["--mode", "json", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        t.elapsed() < Duration::from_secs(25),
        "took {:?}",
        t.elapsed()
    );
    let ends: Vec<Value> = jsonl(&out)
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    let limit = "sent a message larger than the 16 MiB limit";
    let closed = format!("{limit}; its connection was closed");
    let want = [
        format!("MCP server \"fx\" {closed}"),
        format!("MCP server \"fx\" {closed}"),
        format!("MCP server \"j\" {limit}"),
        format!("MCP server \"s\" {closed}"),
    ];
    assert_eq!(ends.len(), want.len(), "{ends:?}");
    for (e, want) in ends.iter().zip(want) {
        assert_eq!(e["isError"], true, "{e}");
        let text = e["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert_eq!(text, want, "{e}");
    }
}

/// An `mcp.json` in VS Code's shape (`{"servers": …}`) starts nothing, in
/// pi 1.6.0 as here. pi says nothing about it (`pi mcp list`: "No MCP
/// servers configured"); ours says, once, which key is read — a warning of
/// ours, the run going on as pi's.
#[test]
fn mcp_vscode_servers_key_is_named_not_silently_ignored() {
    let Some(o) = Oracle::find("mcp_vscode_servers_key_is_named_not_silently_ignored") else {
        return;
    };
    let sb = Sandbox::new();
    let marker = sb.root().join("started");
    let mcp = json!({"servers": {"fx": {"command": "python3",
        "args": [fixture(), "ok", marker.display().to_string()]}}});
    let path = sb.agent().join("mcp.json");
    std::fs::write(&path, mcp.to_string()).unwrap();
    let pi = o.pi160(&sb).args(["mcp", "list"]).output().unwrap();
    assert_eq!(pi.status.code(), Some(0));
    assert!(
        stdout(&pi).starts_with("No MCP servers configured"),
        "{}",
        stdout(&pi)
    );
    assert!(
        !stderr(&pi).contains("servers"),
        "pi is silent: {}",
        stderr(&pi)
    );
    let script = sb.root().join("script.jsonl");
    std::fs::write(&script, "{\"text\":\"done\"}\n").unwrap();
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model"])
        .arg(&script)
        .args(["-p", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "done\n");
    let line = format!(
        "pi-run: warning: {}: \"servers\" is not read (VS Code's shape); MCP servers go under \"mcpServers\"",
        path.display()
    );
    assert_eq!(stderr(&out).lines().collect::<Vec<_>>(), [line.as_str()]);
    assert!(!marker.exists(), "nothing was started");
}
