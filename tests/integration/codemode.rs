//! Codemode: `pi-run` against the real pi 1.6.0 with the real
//! `@modelcontextprotocol/server-everything` at the default exposure (the
//! declarations, the results of scripts covering every output form and
//! failure, the nested calls' events), and this toolkit's own limits: a
//! runaway loop, a memory bomb, cancellation, calls left running, and the
//! `--gate` on nested calls.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

/// What one run recorded: its JSON events and its session entries.
struct Run {
    events: Vec<Value>,
    entries: Vec<Value>,
    root: String,
}

fn session_entries(sb: &Sandbox) -> Vec<Value> {
    let sessions = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    assert_eq!(sessions.len(), 1, "one session");
    let text = std::fs::read_to_string(sessions[0]["path"].as_str().unwrap()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs pi 1.6.0 (`ours: false`) or pi-run on `mcp` and the mock `turns`.
fn run_one(o: &Oracle, ours: bool, mcp: &Value, turns: &Value, settings: &Value) -> Run {
    let sb = Sandbox::new();
    let mock = MockLlm::start(o, sb.root(), turns);
    mock.configure(&sb.agent());
    let mut s: Value = read_json(&sb.agent().join("settings.json"));
    for (k, v) in settings.as_object().unwrap() {
        s[k] = v.clone();
    }
    std::fs::write(sb.agent().join("settings.json"), s.to_string()).unwrap();
    std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
    let mut cmd = if ours { sb.cmd("pi-run") } else { o.pi160(&sb) };
    let out = cmd.args(["--mode", "json", "go"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        if ours { "pi-run" } else { "pi" },
        stderr(&out)
    );
    let r = Run {
        events: jsonl(&out),
        entries: session_entries(&sb),
        root: std::fs::canonicalize(sb.root())
            .unwrap()
            .display()
            .to_string(),
    };
    drop(mock);
    r
}

fn everything(root: &std::path::Path, o: &Oracle) -> Value {
    let bin = root.join("npm/node_modules/.bin/mcp-server-everything");
    let path = format!(
        "{}:{}",
        o.node22.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    json!({"mcpServers": {"everything": {"command": bin.display().to_string(), "args": ["stdio"], "env": {"PATH": path}}}})
}

fn cm(code: &str) -> Value {
    json!({"tool_calls": [{"name": "codemode", "arguments": {"code": code}}]})
}

/// The system message's declared tools by name.
fn declared(r: &Run) -> Vec<(String, Value)> {
    let sys = r
        .entries
        .iter()
        .find(|e| e["message"]["role"] == "system")
        .expect("a system message");
    sys["message"]["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t.clone()))
        .collect()
}

fn section(r: &Run, name: &str) -> Value {
    let sys = r
        .entries
        .iter()
        .find(|e| e["message"]["role"] == "system")
        .unwrap();
    sys["message"]["sections"][name].clone()
}

/// The codemode description with its pointer to the documentation (each
/// program's own) taken out.
fn without_docs(desc: &str) -> String {
    match (desc.find("- `models`: "), desc.find(" first.")) {
        (Some(a), Some(b)) if a < b => format!("{}<docs>{}", &desc[..a], &desc[b..]),
        _ => desc.to_string(),
    }
}

/// Wall times, bash's `wall_time_seconds`, the engine's syntax-error
/// wording and the sandbox paths made equal.
fn normal(text: &str, root: &str) -> String {
    let mut out = String::new();
    let mut skip_frames = false;
    for line in text.replace(root, "<root>").split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("Wall time ") {
            let tail = rest.split_once(' ').map(|x| x.1).unwrap_or("");
            out.push_str(&format!("Wall time N {tail}"));
            continue;
        }
        if line.starts_with("SyntaxError: ") {
            out.push_str("SyntaxError: <engine wording>\n");
            skip_frames = true;
            continue;
        }
        if skip_frames && line.starts_with("    at ") {
            continue;
        }
        skip_frames = false;
        out.push_str(line);
    }
    // "wall_time_seconds":0.1 → N (JSON inside the text, maybe escaped).
    let mut s = out;
    for key in ["\"wall_time_seconds\":", "\\\"wall_time_seconds\\\":"] {
        let mut res = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find(key) {
            res.push_str(&rest[..i + key.len()]);
            rest = &rest[i + key.len()..];
            let n = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            res.push('N');
            rest = &rest[n..];
        }
        res.push_str(rest);
        s = res;
    }
    s
}

/// Each tool result: name, normalised content, `details.calls` without
/// durations, isError.
fn results(r: &Run) -> Vec<Value> {
    r.entries
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| {
            let m = &e["message"];
            let content: Vec<Value> = m["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| match b["text"].as_str() {
                    Some(t) => json!(normal(t, &r.root)),
                    None => json!(b["type"]),
                })
                .collect();
            let calls: Vec<Value> = m["details"]["calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let mut c = c.clone();
                    c.as_object_mut().unwrap().remove("durationMs");
                    if let Some(e) = c.get("error").and_then(Value::as_str) {
                        c["error"] = json!(normal(e, &r.root));
                    }
                    c
                })
                .collect();
            json!({"tool": m["toolName"], "content": content, "calls": calls, "isError": m["isError"]})
        })
        .collect()
}

/// The nested calls' start and end events: `(type, id, tool, parent,
/// isError)`, sorted.
fn nested_events(r: &Run) -> Vec<Value> {
    let mut v: Vec<Value> = r
        .events
        .iter()
        .filter(|e| e.get("parentToolCallId").is_some())
        .filter(|e| e["type"] != "tool_execution_update")
        .map(|e| {
            json!([
                e["type"],
                e["toolCallId"],
                e["toolName"],
                e["parentToolCallId"],
                e["isError"],
                e["args"]
            ])
        })
        .collect();
    v.sort_by_key(|x| x.to_string());
    v
}

/// Whether each partial result of a codemode call lists only nested calls
/// whose start event came before it (pi emits the start, then the update).
fn updates_follow_starts(r: &Run) -> bool {
    let mut started: std::collections::HashMap<String, usize> = Default::default();
    for e in &r.events {
        if e["type"] == "tool_execution_start" {
            if let Some(p) = e["parentToolCallId"].as_str() {
                *started.entry(p.to_string()).or_default() += 1;
            }
        }
        if e["type"] == "tool_execution_update" && e["toolName"] == "codemode" {
            let listed = e["partialResult"]["details"]["calls"]
                .as_array()
                .map_or(0, Vec::len);
            let id = e["toolCallId"].as_str().unwrap_or("");
            if listed > started.get(id).copied().unwrap_or(0) {
                return false;
            }
        }
    }
    true
}

#[test]
fn codemode_matches_pi_with_server_everything() {
    let test = "codemode_matches_pi_with_server_everything";
    let Some(o) = Oracle::find(test) else { return };
    let Some(root) = crate::mcp::servers(test) else {
        return;
    };
    let mcp = everything(&root, &o);
    let turns = json!([
        cm("console.log('hi', 1, {a: 2}, null, undefined);\ntext('first');\ntext({x: 1});\nreturn [1, 2];"),
        cm("const r = await tools.bash({command: 'echo out; echo err >&2; exit 3'});\nreturn r;"),
        cm("const r = await tools.mcp__everything__echo({message: 'hi'});\nconsole.log(typeof r);\nreturn r;"),
        cm("store('k', {a: [1, 2]});\nstore('n', 5);\ntext('stored');"),
        cm("return [load('k'), load('n'), load('missing')];"),
        cm("const x = ;"),
        cm("throw new Error('boom');"),
        cm("// @options: {\"timeout_ms\": 300}\nwhile (true) {}"),
        cm("const rs = await Promise.allSettled([tools.mcp__everything__get_sum({a: 2, b: 3}), tools.read({path: 'nope.txt'})]);\nreturn rs.map((r) => r.status === 'fulfilled' ? r.value : String(r.reason));"),
        cm("return ALL_TOOLS;"),
        cm("text('a'); exit(); text('b');"),
        cm("return await tools.nope({});"),
        {"text": "done"}
    ]);
    let settings = json!({});
    let pi = run_one(&o, false, &mcp, &turns, &settings);
    let ours = run_one(&o, true, &mcp, &turns, &settings);

    // Declarations: the same tools, the codemode declaration and every
    // other tool's `Codemode:` line.
    let (a, b) = (declared(&pi), declared(&ours));
    let names = |d: &[(String, Value)]| d.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&b), names(&a), "declared tools");
    assert_eq!(names(&a), ["read", "bash", "edit", "write", "codemode"]);
    for ((name, p), (_, q)) in a.iter().zip(&b) {
        let (mut p, mut q) = (p.clone(), q.clone());
        if name == "codemode" {
            p["description"] = json!(without_docs(p["description"].as_str().unwrap()));
            q["description"] = json!(without_docs(q["description"].as_str().unwrap()));
        }
        assert_eq!(q, p, "declaration of {name}");
    }
    for s in ["tools", "rules", "mcp_servers"] {
        assert_eq!(section(&ours, s), section(&pi, s), "section {s}");
    }

    // Results, one by one (the first difference named).
    let (ra, rb) = (results(&pi), results(&ours));
    assert_eq!(ra.len(), rb.len(), "results");
    for (i, (x, y)) in ra.iter().zip(&rb).enumerate() {
        assert_eq!(y, x, "result {}", i + 1);
    }
    // The store: one `codemode-store` entry, as pi writes it.
    let stores = |r: &Run| -> Vec<Value> {
        r.entries
            .iter()
            // (pi-run's stored outcome aside: pi has none.)
            .filter(|e| e["type"] == "custom" && e["customType"] != "pi-run:run_end")
            .map(|e| json!([e["customType"], e["data"]]))
            .collect()
    };
    assert_eq!(stores(&ours), stores(&pi));
    assert_eq!(stores(&ours).len(), 1);
    // Nested calls have their own events, with the parent's id.
    assert_eq!(nested_events(&ours), nested_events(&pi));
    assert!(!nested_events(&ours).is_empty());
    assert!(updates_follow_starts(&pi));
    assert!(
        updates_follow_starts(&ours),
        "a partial result listed a call before its start"
    );
}

/// `codemode.mode: only` hides the other tools from the model and lists
/// them in the codemode description, as pi does.
#[test]
fn codemode_only_mode_lists_the_tools_like_pi() {
    let test = "codemode_only_mode_lists_the_tools_like_pi";
    let Some(o) = Oracle::find(test) else { return };
    let Some(root) = crate::mcp::servers(test) else {
        return;
    };
    let mcp = everything(&root, &o);
    let turns = json!([cm("return await tools.bash({command: 'echo hi'});"), {"text": "done"}]);
    let settings = json!({"codemode": {"mode": "only"}});
    let pi = run_one(&o, false, &mcp, &turns, &settings);
    let ours = run_one(&o, true, &mcp, &turns, &settings);
    let cm_decl = |r: &Run| {
        let d = declared(r);
        let c = d.iter().find(|x| x.0 == "codemode").unwrap().1.clone();
        without_docs(c["description"].as_str().unwrap())
    };
    assert_eq!(cm_decl(&ours), cm_decl(&pi));
    assert!(cm_decl(&ours).contains("### `bash`"));
    for s in ["tools", "rules"] {
        assert_eq!(section(&ours, s), section(&pi, s), "section {s}");
    }
    assert_eq!(results(&ours), results(&pi));
}

/// A probe MCP server (the fixture) at the default exposure: enough for
/// the codemode tool to be there, no oracle needed.
fn fixture_mcp(sb: &Sandbox) -> Value {
    let fixture = repo().join("tests/mcp/fixture.py").display().to_string();
    let _ = sb;
    json!({"mcpServers": {"fx": {"command": "python3", "args": [fixture, "ok"]}}})
}

fn faux(sb: &Sandbox, turns: &[Value]) -> String {
    let p = sb.root().join("script.jsonl");
    let text: Vec<String> = turns.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

fn faux_cm(code: &str) -> Value {
    json!({"toolCalls": [{"name": "codemode", "arguments": {"code": code}}]})
}

fn ours(sb: &Sandbox, turns: &[Value], extra: &[&str]) -> Command {
    std::fs::write(sb.agent().join("mcp.json"), fixture_mcp(sb).to_string()).unwrap();
    let mut c = sb.cmd("pi-run");
    c.args(["--no-session", "--provider", "faux", "--model"])
        .arg(faux(sb, turns))
        .args(["--mode", "json"])
        .args(extra)
        .arg("go");
    c
}

/// The codemode result texts of a run.
fn codemode_texts(out: &Output) -> Vec<String> {
    jsonl(out)
        .iter()
        .filter(|e| e["type"] == "tool_execution_end" && e["toolName"] == "codemode")
        .map(|e| {
            e["result"]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .collect()
}

/// A runaway loop stops at `timeout_ms`; a memory bomb hits the 256 MB
/// cap inside the script, which fails cleanly; a script that waits on
/// nothing fails at once; the run goes on after each.
#[test]
fn codemode_limits_hold() {
    let sb = Sandbox::new();
    let t = Instant::now();
    let out = ours(
        &sb,
        &[
            faux_cm("// @options: {\"timeout_ms\": 200}\nlet i = 0; while (true) { i++; }"),
            faux_cm("const a = []; while (true) { a.push('x'.repeat(1 << 20) + a.length); }"),
            faux_cm("await new Promise(() => {});"),
            faux_cm("function f() { return f() + 1; } f();"),
            json!({"text": "done"}),
        ],
        &[],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    let texts = codemode_texts(&out);
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert!(
        texts[0].contains("Script timed out: Execution timed out after 200 ms"),
        "{}",
        texts[0]
    );
    assert!(
        texts[1].contains("Script failed") && texts[1].contains("out of memory"),
        "{}",
        texts[1]
    );
    assert!(
        texts[2].contains("a promise that can never settle"),
        "{}",
        texts[2]
    );
    assert!(
        texts[3].contains("Script failed") && texts[3].contains("RangeError"),
        "{}",
        texts[3]
    );
}

/// SIGINT while a script spins (no deadline) ends the script and the run at
/// once; a bash call the script left running is killed when it ends.
#[test]
fn codemode_cancellation_ends_scripts_and_their_calls() {
    let sb = Sandbox::new();
    let child = ours(
        &sb,
        &[faux_cm("while (true) {}"), json!({"text": "done"})],
        &[],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let texts = codemode_texts(&out);
    assert_eq!(texts.len(), 1, "{}", stdout(&out));
    assert!(
        texts[0].contains("Script failed") && texts[0].contains("aborted"),
        "{}",
        texts[0]
    );

    let sb = Sandbox::new();
    let marker = sb.root().join("late");
    let code = format!(
        "tools.bash({{command: 'sleep 3; touch {}'}}); return 'early';",
        marker.display()
    );
    let t = Instant::now();
    let out = ours(&sb, &[faux_cm(&code), json!({"text": "done"})], &[])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let events = jsonl(&out);
    let cm_end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolName"] == "codemode")
        .unwrap();
    assert_eq!(
        cm_end["result"]["details"]["calls"][0]["status"],
        "cancelled"
    );
    let nested_end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolName"] == "bash")
        .unwrap();
    assert_eq!(nested_end["isError"], true, "{nested_end}");
    std::thread::sleep(Duration::from_millis(3500));
    assert!(!marker.exists(), "the nested bash call was not killed");
}

/// An RPC `abort` ends a spinning script at once, like a signal.
#[test]
fn codemode_rpc_abort_ends_a_running_script() {
    let sb = Sandbox::new();
    std::fs::write(sb.agent().join("mcp.json"), fixture_mcp(&sb).to_string()).unwrap();
    let mut cmd = sb.cmd("pi-run");
    cmd.args(["--no-session", "--provider", "faux", "--model"])
        .arg(faux(
            &sb,
            &[faux_cm("while (true) {}"), json!({"text": "done"})],
        ))
        .args(["--mode", "rpc"]);
    let mut rpc = crate::mcp::Rpc::spawn(cmd);
    rpc.send(json!({"id": "1", "type": "prompt", "message": "go"}));
    rpc.wait("the codemode call", &|v| {
        v["type"] == "tool_execution_update" && v["toolName"] == "codemode"
    });
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    rpc.send(json!({"id": "2", "type": "abort"}));
    let end = rpc.wait("its end", &|v| {
        v["type"] == "tool_execution_end" && v["toolName"] == "codemode"
    });
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let text = end["result"]["content"][1]["text"].as_str().unwrap_or("");
    assert!(text.contains("Script aborted"), "{end}");
    assert!(rpc.finish().success());
}

/// `--gate` judges nested calls exactly as calls of the model: a blocked
/// nested call rejects inside the script with the gate's reason.
#[test]
fn codemode_nested_calls_pass_the_gate() {
    let sb = Sandbox::new();
    let marker = sb.cwd().join("marker");
    // (Only the nested call's arguments hold the command in double quotes.)
    let gate = "grep -q '\"touch marker\"' && { echo 'no touching'; exit 1; }; exit 0";
    let code = "try { await tools.bash({command: 'touch marker'}); return 'ran'; } catch (e) { return 'blocked: ' + e.message; }";
    let out = ours(
        &sb,
        &[faux_cm(code), json!({"text": "done"})],
        &["--gate", gate],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!marker.exists(), "the gate did not stop the nested call");
    let texts = codemode_texts(&out);
    assert!(texts[0].contains("blocked: no touching"), "{}", texts[0]);
    let nested = jsonl(&out)
        .into_iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolName"] == "bash")
        .unwrap();
    assert_eq!(
        nested["parentToolCallId"],
        json!(nested["toolCallId"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap())
    );
    assert_eq!(nested["isError"], true);
}

/// The sandbox confines the tools a script calls exactly as it confines
/// direct calls: a nested bash call cannot write outside the workspace
/// under `--sandbox workspace-write`, and the same script writes there
/// unconfined (the control run).
#[test]
fn codemode_nested_calls_run_in_the_run_s_sandbox() {
    let sb = Sandbox::new();
    let root = std::fs::canonicalize(sb.root()).unwrap();
    for d in ["tmp", "out"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let outside = root.join("out/escaped");
    let code = format!(
        "try {{ await tools.bash({{command: 'echo x > {}'}}); return 'ran'; }} catch (e) {{ return 'failed: ' + e.message; }}",
        outside.display()
    );
    let run = |extra: &[&str]| {
        ours(&sb, &[faux_cm(&code), json!({"text": "done"})], extra)
            .env("TMPDIR", root.join("tmp"))
            .output()
            .unwrap()
    };
    let out = run(&["--sandbox", "workspace-write"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !outside.exists(),
        "a script's bash call wrote outside the workspace"
    );
    let out = run(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(outside.exists(), "control run: {}", stdout(&out));
}

/// `--timeout` ends a spinning script (no deadline of its own) at once:
/// the run exits 3 with `run_end` saying `timeout`.
#[test]
fn codemode_run_timeout_ends_a_running_script() {
    let sb = Sandbox::new();
    let t = Instant::now();
    let out = ours(
        &sb,
        &[faux_cm("while (true) {}"), json!({"text": "done"})],
        &["--timeout", "2s"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let events = jsonl(&out);
    let end = events.last().unwrap();
    assert_eq!(end["type"], "run_end", "{end}");
    assert_eq!(end["stopReason"], "timeout", "{end}");
    let texts = codemode_texts(&out);
    assert_eq!(texts.len(), 1, "{}", stdout(&out));
    assert!(texts[0].contains("Script failed"), "{}", texts[0]);
}
