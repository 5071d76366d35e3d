//! pi's TypeScript extensions end to end: one extension written against
//! pi's documented API (`tests/ext-node/fixtures/acceptance.ts`: a tool
//! with a schema, a `tool_call` block and rewrite, a `tool_result` patch,
//! an `input` transform, a `before_agent_start` message, a command, a flag)
//! run by pi 1.6.0 and by `pi-run` (through the Node host) against the same
//! mock: the same recorded system message and `toolsAdded`, tool results,
//! session entries and `--mode json` event types (issue 10, acceptance 1).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::common::*;

fn extension() -> PathBuf {
    repo().join("tests/ext-node/fixtures/acceptance.ts")
}

fn turns() -> Value {
    json!([
        {"tool_calls": [{"name": "greet", "arguments": {"name": "  Ada  "}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf ./gone && touch ran.txt"}}]},
        {"text": "done"}
    ])
}

/// `pi-run` with the oracle's Node 22 as the extensions' Node.
fn pi_run(o: &Oracle, sb: &Sandbox) -> Command {
    let mut c = sb.cmd("pi-run");
    c.env("PI_NODE", &o.node22);
    c
}

/// Event types, message events refined by role and `message_update` by
/// its assistant event type.
fn event_types(out: &Output) -> Vec<String> {
    jsonl(out)
        .iter()
        // pi-run closes its stream with `run_end` (pi has none).
        .filter(|v| v["type"] != "run_end")
        .map(|v| {
            let t = v["type"].as_str().unwrap_or("?");
            match t {
                "message_update" => format!(
                    "{t}:{}",
                    v["assistantMessageEvent"]["type"].as_str().unwrap_or("?")
                ),
                "message_start" | "message_end" => {
                    format!("{t}:{}", v["message"]["role"].as_str().unwrap_or("?"))
                }
                _ => t.to_string(),
            }
        })
        .collect()
}

/// Removes what differs by nature between two runs: ids, times (also a
/// bash result's `wall_time_seconds`), token counts (the mock counts the prompt's bytes and our `docs` section is
/// ours), the cwd and the `docs` section.
fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for k in [
                "id",
                "parentId",
                "timestamp",
                "durationMs",
                "usage",
                "responseId",
                "cwd",
                "docs",
                "wall_time_seconds",
            ] {
                m.remove(k);
            }
            m.values_mut().for_each(normalize);
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn session_entries(sb: &Sandbox) -> Vec<Value> {
    let sessions = sb.agent().join("sessions");
    let mut files = Vec::new();
    for d in std::fs::read_dir(&sessions).unwrap().flatten() {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            files.push(f.path());
        }
    }
    assert_eq!(files.len(), 1, "one session under {}", sessions.display());
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        // pi-run's stored outcome (pi has none).
        .filter(|v| v["customType"] != "pi-run:run_end")
        .map(|mut v| {
            normalize(&mut v);
            v
        })
        .collect()
}

fn tool_results(out: &Output) -> Vec<Value> {
    jsonl(out)
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .map(|e| json!({"tool": e["toolName"], "result": e["result"], "isError": e["isError"]}))
        .collect()
}

/// The user-side messages of the first model request (the transformed
/// input and the `before_agent_start` message).
fn first_request_user_messages(log: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    first["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .cloned()
        .collect()
}

#[test]
fn ts_extension_matches_real_pi() {
    let Some(o) = Oracle::find("ts_extension_matches_real_pi") else {
        return;
    };
    let ext = extension();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a = vec!["-e".to_string(), ext.display().to_string()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run1 = args(&["--shout", "--mode", "json", "please greet Ada"]);
    let run2 = args(&["-c", "--mode", "json", "/stamp a b"]);

    // pi's runs.
    let pi_sb = Sandbox::new();
    let pi_mock = MockLlm::start(&o, pi_sb.root(), &turns());
    pi_mock.configure(&pi_sb.agent());
    let pi_out = o.pi160(&pi_sb).args(&run1).output().unwrap();
    assert!(pi_out.status.success(), "pi: {}", stderr(&pi_out));
    let pi_cmd = o.pi160(&pi_sb).args(&run2).output().unwrap();
    assert!(pi_cmd.status.success(), "pi: {}", stderr(&pi_cmd));

    // Ours.
    let sb = Sandbox::new();
    let mock = MockLlm::start(&o, sb.root(), &turns());
    mock.configure(&sb.agent());
    let out = pi_run(&o, &sb).args(&run1).output().unwrap();
    assert!(out.status.success(), "pi-run: {}", stderr(&out));
    let cmd = pi_run(&o, &sb).args(&run2).output().unwrap();
    assert!(cmd.status.success(), "pi-run: {}", stderr(&cmd));

    // The blocked command never ran.
    assert!(!pi_sb.cwd().join("ran.txt").exists());
    assert!(!sb.cwd().join("ran.txt").exists());

    // The same tool results: the flag read, the rewritten argument and
    // the patch in the first, the block's reason in the second.
    let results = tool_results(&out);
    assert_eq!(results, tool_results(&pi_out));
    assert_eq!(
        results[0]["result"]["content"][0]["text"],
        "HELLO, ADA! (patched)"
    );
    assert_eq!(
        results[1]["result"]["content"][0]["text"],
        "dangerous command blocked by acceptance.ts"
    );

    // The same event types, also for the command-only run.
    assert_eq!(event_types(&out), event_types(&pi_out));
    assert_eq!(event_types(&cmd), event_types(&pi_cmd));

    // The model saw the transformed input and the extension's message.
    let ours_req = first_request_user_messages(&mock.log);
    assert_eq!(ours_req, first_request_user_messages(&pi_mock.log));
    assert_eq!(ours_req[0]["content"][0]["text"], "greet Ada");

    // The same session entries: the recorded system message (sections but
    // `docs`, `toolsAdded` with the extension's tool), the custom message,
    // the tool results and the command's entry.
    let ours = session_entries(&sb);
    let theirs = session_entries(&pi_sb);
    assert_eq!(ours.len(), theirs.len(), "{ours:#?}\n---\n{theirs:#?}");
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b);
    }
    let system = ours
        .iter()
        .find(|e| e["message"]["role"] == "system")
        .unwrap();
    let added: Vec<&str> = system["message"]["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(added.contains(&"greet"), "{added:?}");
    assert!(ours
        .iter()
        .any(|e| e["type"] == "custom_message" && e["customType"] == "acceptance-note"));
    assert_eq!(
        ours.last().unwrap(),
        &json!({"type": "custom", "customType": "acceptance-stamp", "data": {"args": "a b"}})
    );
}

/// The `Extension error (<path>): <error>` lines of a run, in order.
fn error_lines(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("Extension error ("))
        .map(str::to_string)
        .collect()
}

/// Throws in a TS extension, as pi 1.6.0 treats them: a throwing
/// `tool_call` handler blocks the call (the marker file is never made) with
/// the thrown text and no report; a throwing `input` handler and a throwing
/// `pi.events` listener are reported on stderr (also in `--mode json`) and
/// the chain goes on; two `before_agent_start` messages of one extension
/// are both recorded.
#[test]
fn ts_extension_throws_match_real_pi() {
    let Some(o) = Oracle::find("ts_extension_throws_match_real_pi") else {
        return;
    };
    let turns = json!([
        {"tool_calls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]},
        {"text": "done"}
    ]);
    let ext = repo().join("tests/ext-node/fixtures/throws.ts");
    let args = ["-e", ext.to_str().unwrap(), "--mode", "json", "go"];

    let pi_sb = Sandbox::new();
    let pi_mock = MockLlm::start(&o, pi_sb.root(), &turns);
    pi_mock.configure(&pi_sb.agent());
    let pi_out = o.pi160(&pi_sb).args(args).output().unwrap();
    assert!(pi_out.status.success(), "pi: {}", stderr(&pi_out));

    let sb = Sandbox::new();
    let mock = MockLlm::start(&o, sb.root(), &turns);
    mock.configure(&sb.agent());
    let out = pi_run(&o, &sb).args(args).output().unwrap();
    assert!(out.status.success(), "pi-run: {}", stderr(&out));

    assert!(!pi_sb.cwd().join("ran.txt").exists());
    assert!(!sb.cwd().join("ran.txt").exists(), "a throwing gate blocks");
    let results = tool_results(&out);
    assert_eq!(results, tool_results(&pi_out));
    assert_eq!(results[0]["result"]["content"][0]["text"], "gate boom");
    assert_eq!(results[0]["isError"], true);

    assert_eq!(event_types(&out), event_types(&pi_out));
    let errors = error_lines(&out);
    assert_eq!(errors, error_lines(&pi_out));
    assert_eq!(
        errors,
        [
            format!("Extension error ({}): listener boom", ext.display()),
            format!("Extension error ({}): input boom", ext.display()),
        ]
    );

    let ours = session_entries(&sb);
    assert_eq!(ours, session_entries(&pi_sb));
    let customs: Vec<&Value> = ours
        .iter()
        .filter(|e| e["type"] == "custom_message")
        .map(|e| &e["customType"])
        .collect();
    assert_eq!(customs, [&json!("first"), &json!("second")]);
    let user = ours
        .iter()
        .find(|e| e["message"]["role"] == "user")
        .unwrap();
    assert_eq!(user["message"]["content"][0]["text"], "go (seen)");
}

/// Issue 10, acceptance 3: the real npm extensions that
/// `tests/ext-node/install.sh` installs load under `pi-run` and register
/// the same tools and commands as under pi 1.6.0. pi's side comes from
/// `tests/ext-node/compare-npm.mjs` (the tools of the mock's first request,
/// RPC `get_commands`); ours from the system message `pi-run` records
/// (`toolsAdded`, also the tools registered in `session_start`) and
/// `pi-resources --inspect` (commands).
#[test]
fn npm_extensions_register_what_pi_registers() {
    let Some(o) = Oracle::find("npm_extensions_register_what_pi_registers") else {
        return;
    };
    let cache = std::env::var_os("PI_EXT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pi-toolkit-ext")
        });
    let packages = [
        ("@tintinweb/pi-subagents", "tintinweb-subagents"),
        ("pi-subagents", "pi-subagents"),
        ("pi-mcp-adapter", "pi-mcp-adapter"),
        ("pi-web-access", "pi-web-access"),
    ];
    let dirs: Vec<PathBuf> = packages
        .iter()
        .map(|(pkg, sub)| cache.join(sub).join("node_modules").join(pkg))
        .collect();
    if dirs.iter().any(|d| !d.join("package.json").is_file()) {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "the npm extensions are not installed under {} (tests/ext-node/install.sh)",
                cache.display()
            );
        }
        eprintln!("SKIP npm_extensions_register_what_pi_registers: run tests/ext-node/install.sh");
        return;
    }
    let sb = Sandbox::new();
    let rows_file = sb.root().join("rows.json");
    let cmp = Command::new(&o.node22)
        .arg(repo().join("tests/ext-node/compare-npm.mjs"))
        .args(["--json", rows_file.to_str().unwrap()])
        .env("PI_ORACLE_DIR", &o.root)
        .env("PI_EXT_CACHE", &cache)
        .output()
        .unwrap();
    assert!(cmp.status.success(), "compare-npm: {}", stderr(&cmp));
    let rows = read_json(&rows_file);
    let builtins = ["read", "bash", "edit", "write"];
    for ((pkg, _), dir) in packages.iter().zip(&dirs) {
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| {
                r["package"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with(&format!("{pkg}@"))
            })
            .unwrap_or_else(|| panic!("no row for {pkg}"));
        let names = |v: &Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        };
        // Tools: what pi-run records in the system message.
        let run = Sandbox::new();
        let mock = MockLlm::start(&o, run.root(), &json!([{"text": "ok"}]));
        mock.configure(&run.agent());
        let out = pi_run(&o, &run)
            .args(["--extension-timeout", "20", "-e"])
            .arg(dir)
            .arg("hi")
            .output()
            .unwrap();
        assert!(out.status.success(), "{pkg}: {}", stderr(&out));
        let system = session_entries(&run)
            .into_iter()
            .find(|e| e["message"]["role"] == "system")
            .unwrap();
        let tools: Vec<String> = system["message"]["toolsAdded"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| !builtins.contains(n))
            .map(str::to_string)
            .collect();
        assert_eq!(tools, names(&row["piTools"]), "{pkg}: tools");
        // Commands: pi-resources --inspect.
        let inspect = pi_run_like(&o, &run, "pi-resources")
            .args(["--inspect", "--format", "jsonl", "-e"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(inspect.status.success(), "{pkg}: {}", stderr(&inspect));
        let ext = jsonl(&inspect)
            .into_iter()
            .find(|r| r["type"] == "extension")
            .unwrap_or_else(|| panic!("{pkg}: no extension record"));
        assert_eq!(
            names(&ext["registered"]["commands"]),
            names(&row["piCommands"]),
            "{pkg}: commands"
        );
    }
}

/// One of our binaries with the oracle's Node 22 for extensions.
fn pi_run_like(o: &Oracle, sb: &Sandbox, bin: &str) -> Command {
    let mut c = sb.cmd(bin);
    c.env("PI_NODE", &o.node22);
    c
}

/// The host's calls from a command, answered as pi 1.6.0 answers them:
/// `waitForIdle` returns, `getContextUsage` is the last answer's tokens
/// against the model's window, `setLabel` labels the entry (a `label`
/// entry on the leaf the command read).
#[test]
fn ts_command_calls_match_real_pi() {
    let Some(o) = Oracle::find("ts_command_calls_match_real_pi") else {
        return;
    };
    let ext = repo().join("tests/ext-node/fixtures/calls.ts");
    let e = ext.to_str().unwrap();
    let tail = |sb: &Sandbox, out: &[Output]| -> Vec<Value> {
        for o in out {
            assert!(o.status.success(), "{}", stderr(o));
        }
        let sessions = sb.agent().join("sessions");
        let dir = std::fs::read_dir(&sessions)
            .unwrap()
            .flatten()
            .next()
            .unwrap();
        let file = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .next()
            .unwrap();
        let all: Vec<Value> = std::fs::read_to_string(file.path())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect();
        // pi-run stores each run's outcome as a custom entry (pi has
        // none), which becomes the leaf a later label or probe names:
        // those outcome entries are taken out and a reference to one
        // stands for the entry it follows.
        let outcome_parent: std::collections::HashMap<Value, Value> = all
            .iter()
            .filter(|v| v["customType"] == "pi-run:run_end")
            .map(|v| (v["id"].clone(), v["parentId"].clone()))
            .collect();
        let mut lines: Vec<Value> = all
            .into_iter()
            .filter(|v| v["customType"] != "pi-run:run_end")
            .collect();
        for v in &mut lines {
            for ptr in ["/targetId", "/data/leaf"] {
                if let Some(r) = v.pointer_mut(ptr) {
                    if let Some(p) = outcome_parent.get(r) {
                        *r = p.clone();
                    }
                }
            }
        }
        lines[lines.len() - 3..].to_vec()
    };
    let pi_sb = Sandbox::new();
    let pi_mock = MockLlm::start(&o, pi_sb.root(), &json!([{"text": "ok"}]));
    pi_mock.configure(&pi_sb.agent());
    let pi_runs = [
        o.pi160(&pi_sb)
            .args(["-e", e, "-p", "hi"])
            .output()
            .unwrap(),
        o.pi160(&pi_sb)
            .args(["-e", e, "-c", "-p", "/mark"])
            .output()
            .unwrap(),
    ];
    let theirs = tail(&pi_sb, &pi_runs);
    let sb = Sandbox::new();
    let mock = MockLlm::start(&o, sb.root(), &json!([{"text": "ok"}]));
    mock.configure(&sb.agent());
    let runs = [
        pi_run(&o, &sb)
            .args(["-e", e, "-p", "hi"])
            .output()
            .unwrap(),
        pi_run(&o, &sb)
            .args(["-e", e, "-c", "-p", "/mark"])
            .output()
            .unwrap(),
    ];
    let ours = tail(&sb, &runs);
    for (entries, who) in [(&ours, "pi-run"), (&theirs, "pi")] {
        let (answer, label, probe) = (&entries[0], &entries[1], &entries[2]);
        assert_eq!(label["type"], "label", "{who}");
        assert_eq!(label["label"], "marked", "{who}");
        assert_eq!(label["targetId"], answer["id"], "{who}");
        assert_eq!(probe["customType"], "calls-probe", "{who}");
        assert_eq!(probe["data"]["leaf"], answer["id"], "{who}");
        let usage = &probe["data"]["usage"];
        let tokens = &answer["message"]["usage"]["totalTokens"];
        assert_eq!(&usage["tokens"], tokens, "{who}: {usage}");
        assert_eq!(usage["contextWindow"], 128000, "{who}");
        let pct = tokens.as_f64().unwrap() / 1280.0;
        assert!(
            (usage["percent"].as_f64().unwrap() - pct).abs() < 1e-9,
            "{who}"
        );
    }
}

/// Runs `prompts` one process each (`-p`), with `exts` loaded, under pi
/// 1.6.0 and under `pi-run` against the same mock script; the two
/// sandboxes, pi's first.
fn both_runs(o: &Oracle, exts: &[&str], turns: &Value, runs: &[&[&str]]) -> (Run, Run) {
    both_runs_with(o, &|_, _| {}, exts, turns, runs)
}

/// One side's sandbox, mock and outputs.
type Run = (Sandbox, MockLlm, Vec<Output>);
type Setup<'a> = &'a dyn Fn(&Sandbox, &MockLlm);

/// [`both_runs`], with `setup` run on each sandbox after the mock is
/// configured.
fn both_runs_with(
    o: &Oracle,
    setup: Setup<'_>,
    exts: &[&str],
    turns: &Value,
    runs: &[&[&str]],
) -> (Run, Run) {
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let mock = MockLlm::start(o, sb.root(), turns);
        mock.configure(&sb.agent());
        setup(&sb, &mock);
        let mut outs = Vec::new();
        for r in runs {
            let mut c = if pi { o.pi160(&sb) } else { pi_run(o, &sb) };
            for e in exts {
                c.arg("-e")
                    .arg(repo().join("tests/ext-node/fixtures").join(e));
            }
            let out = c.args(*r).output().unwrap();
            let who = if pi { "pi" } else { "pi-run" };
            assert!(out.status.success(), "{who} {r:?}: {}", stderr(&out));
            outs.push(out);
        }
        (sb, mock, outs)
    };
    (run(true), run(false))
}

/// Two extensions registering `/dup`: pi names them `dup:1` and `dup:2`
/// in load order (a re-registration in one extension replaces its
/// first); `getCommands` lists those names in pi's order, and `/dup:2`
/// runs the second extension's handler, the later of its two.
#[test]
fn duplicate_commands_are_numbered_as_pi_numbers_them() {
    let Some(o) = Oracle::find("duplicate_commands_are_numbered_as_pi_numbers_them") else {
        return;
    };
    let ((pi_sb, _pm, _), (sb, _m, _)) = both_runs(
        &o,
        &["dup-a.ts", "dup-b.ts"],
        &json!([]),
        &[
            &["-p", "/dup:1 one"],
            &["-p", "/dup:2 two"],
            &["-p", "/cmds"],
        ],
    );
    for (s, who) in [(&sb, "pi-run"), (&pi_sb, "pi")] {
        let read = |f: &str| std::fs::read_to_string(s.cwd().join(f)).ok();
        assert_eq!(read("ran-a").as_deref(), Some("one"), "{who}");
        assert_eq!(read("ran-b").as_deref(), Some("two"), "{who}");
        assert_eq!(read("ran-b-first"), None, "{who}");
    }
    let cmds = |s: &Sandbox| -> Value {
        let text = std::fs::read_to_string(s.cwd().join("cmds.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let ours = cmds(&sb);
    assert_eq!(ours, cmds(&pi_sb));
    let names: Vec<&str> = ours
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["dup:1", "cmds", "dup:2"]);
}

/// The last entries of the one session file in `sb`, normalized.
fn last_entries(sb: &Sandbox, n: usize) -> Vec<Value> {
    let all = session_entries(sb);
    all[all.len().saturating_sub(n)..].to_vec()
}

/// `appendEntry` from a `session_shutdown` handler is written to the
/// session, after the run's last message, as pi 1.6.0 writes it.
#[test]
fn session_shutdown_append_entry_is_written() {
    let Some(o) = Oracle::find("session_shutdown_append_entry_is_written") else {
        return;
    };
    let ((pi_sb, _pm, _), (sb, _m, _)) = both_runs(
        &o,
        &["lifecycle.ts"],
        &json!([{"text": "hello"}]),
        &[&["-p", "hi"]],
    );
    let ours = last_entries(&sb, 2);
    assert_eq!(ours, last_entries(&pi_sb, 2));
    assert_eq!(ours[0]["message"]["role"], "assistant");
    assert_eq!(
        ours[1],
        json!({"type": "custom", "customType": "lifecycle-bye", "data": {"reason": "quit"}})
    );
}

/// The tool names of each model request in a mock's log.
fn request_tools(log: &std::path::Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            r["body"]["tools"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// The recorded system messages of a session (sections but `docs`).
fn system_messages(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["message"]["role"] == "system")
        .map(|e| e["message"].clone())
        .collect()
}

/// Runs `fixture` with `turns` under both, checks the two recorded the
/// same session (system messages included) and sent the same tools in
/// every request; gives our session and our requests' tools.
fn same_tools_as_pi(
    test: &str,
    fixture: &str,
    turns: Value,
) -> Option<(Vec<Value>, Vec<Vec<String>>)> {
    let o = Oracle::find(test)?;
    let ((pi_sb, pi_mock, pi_out), (sb, mock, out)) =
        both_runs(&o, &[fixture], &turns, &[&["--mode", "json", "go"]]);
    let results = |o: &Output| {
        let mut r = Value::Array(tool_results(o));
        normalize(&mut r);
        r
    };
    assert_eq!(results(&out[0]), results(&pi_out[0]));
    let tools = request_tools(&mock.log);
    assert_eq!(tools, request_tools(&pi_mock.log));
    let ours = session_entries(&sb);
    let theirs = session_entries(&pi_sb);
    assert_eq!(system_messages(&ours), system_messages(&theirs));
    assert_eq!(ours, theirs);
    Some((ours, tools))
}

/// A tool registered in `session_start` with the starting set chosen
/// there (`setActiveTools`), and one registered inside a `turn_end`
/// handler: pi's request tools, results and recorded system patches.
#[test]
fn late_tools_join_as_in_pi() {
    let turns = json!([
        {"tool_calls": [{"name": "late", "arguments": {"x": "1"}}]},
        {"tool_calls": [{"name": "later", "arguments": {}}]},
        {"text": "done"}
    ]);
    let Some((entries, tools)) =
        same_tools_as_pi("late_tools_join_as_in_pi", "late-tools.ts", turns)
    else {
        return;
    };
    assert_eq!(
        tools,
        [
            vec!["read", "late"],
            vec!["read", "late", "later"],
            vec!["read", "late", "later"]
        ]
    );
    let systems = system_messages(&entries);
    assert_eq!(systems.len(), 2, "{systems:#?}");
    assert_eq!(systems[1]["toolsAdded"][0]["name"], "later");
}

/// `setActiveTools` in a `turn_end` handler: the next request has only
/// those tools and the rebuilt `tools`/`rules` sections are recorded with
/// `toolsRemoved`, as pi 1.6.0 records them.
#[test]
fn set_active_tools_mid_run_rebuilds_the_prompt_as_pi() {
    let turns = json!([
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "done"}
    ]);
    let Some((entries, tools)) = same_tools_as_pi(
        "set_active_tools_mid_run_rebuilds_the_prompt_as_pi",
        "active-tools.ts",
        turns,
    ) else {
        return;
    };
    assert_eq!(tools[1], ["bash", "write"]);
    let systems = system_messages(&entries);
    assert_eq!(systems.len(), 2, "{systems:#?}");
    let patch = systems[1]["sections"].as_object().unwrap();
    assert_eq!(patch.keys().collect::<Vec<_>>(), ["tools", "rules"]);
    assert_eq!(
        systems[1]["toolsRemoved"],
        json!([{"name": "read"}, {"name": "edit"}])
    );
}

/// `pi.setModel` / `pi.setThinkingLevel` from extension commands, against
/// two mock models (the second one reasons): the same recorded
/// `model_change` / `thinking_level_change` entries, the same values read
/// back at once, the same `model_select` / `thinking_level_select` events
/// (pi's payload keys), and the next
/// request sent to the new model with the new level. `ctx.shutdown()` in
/// print mode lets the remaining prompts run, as in pi. `ctx.modelRegistry.find`
/// gives pi's model object, and `undefined` for a model that does not exist.
#[test]
fn set_model_and_thinking_level_as_pi() {
    let Some(o) = Oracle::find("set_model_and_thinking_level_as_pi") else {
        return;
    };
    let two_models = |sb: &Sandbox, mock: &MockLlm| {
        let model = |id: &str, reasoning: bool| {
            json!({"id": id, "name": id, "reasoning": reasoning, "input": ["text"],
                   "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                   "contextWindow": 128000, "maxTokens": 4096})
        };
        let models = json!({"providers": {"mock": {
            "baseUrl": format!("http://127.0.0.1:{}/v1", mock.port),
            "api": "openai-completions", "apiKey": "test",
            "models": [model("mock-model", false), model("mock-2", true)]
        }}});
        std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
    };
    let ((pi_sb, pi_mock, _), (sb, mock, _)) = both_runs_with(
        &o,
        &two_models,
        &["models.ts"],
        &json!([]),
        // One process: `-c` in a new one restores the session's model in
        // pi, which pi-run's model selection does not do yet.
        &[&[
            "-p",
            "hi",
            "/find mock-2",
            "/find nope",
            "/switch",
            "/think high",
            "/bye",
            "after bye",
        ]],
    );
    let keep = |entries: Vec<Value>| -> Vec<Value> {
        entries
            .into_iter()
            .filter(|e| {
                matches!(
                    e["type"].as_str(),
                    Some("model_change" | "thinking_level_change" | "custom")
                )
            })
            .collect()
    };
    let ours = keep(session_entries(&sb));
    assert_eq!(ours, keep(session_entries(&pi_sb)));
    let probes: Vec<&Value> = ours.iter().filter(|e| e["type"] == "custom").collect();
    // find: the model's object for one that exists, undefined for one that does not.
    // (`normalize` drops `id` keys; the name is the id here.)
    let (found, missing) = (&probes[0]["data"]["found"], &probes[1]["data"]["found"]);
    assert_eq!(
        (&found["provider"], &found["name"], &found["reasoning"]),
        (&json!("mock"), &json!("mock-2"), &json!(true)),
        "{probes:#?}"
    );
    assert_eq!(missing, "undefined", "{probes:#?}");
    let probes = &probes[2..];
    assert_eq!(probes[0]["data"]["ok"], true, "{probes:#?}");
    assert_eq!(probes[0]["data"]["model"], "mock-2");
    assert_eq!(probes[0]["data"]["seen"][0]["type"], "model_select");
    assert_eq!(probes[1]["data"]["level"], "high");
    assert_eq!(
        probes[2]["data"]["seen"][0]["type"],
        "thinking_level_select"
    );
    let sent = |log: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .map(|l| {
                let r: Value = serde_json::from_str(l).unwrap();
                json!([r["body"]["model"], r["body"]["reasoning_effort"]])
            })
            .collect()
    };
    let requests = sent(&mock.log);
    assert_eq!(requests, sent(&pi_mock.log));
    assert_eq!(requests.last().unwrap(), &json!(["mock-2", "high"]));
}

/// `agent_before_settle` carries pi's `context` preview, rebuilt for each
/// handler from the drafts proposed so far; `continue: true` after a
/// custom-message draft runs once more from the context (no new user
/// message; agent_start/agent_end again, agent_settled once), and
/// `continue: true` with nothing for the model to answer is reported on
/// stderr and the run settles: the same entries, requests, JSON event
/// types and stderr line as pi 1.6.0.
#[test]
fn before_settle_context_and_continue_as_pi() {
    let Some(o) = Oracle::find("before_settle_context_and_continue_as_pi") else {
        return;
    };
    let ((pi_sb, pi_mock, pi_out), (sb, mock, out)) = both_runs(
        &o,
        &["settle.ts"],
        &json!([{"text": "first"}, {"text": "second"}, {"text": "third"}]),
        &[&["--mode", "json", "-p", "hi"]],
    );
    let kept = |s: &Sandbox| -> Vec<Value> {
        session_entries(s)
            .into_iter()
            .filter(|e| matches!(e["type"].as_str(), Some("custom" | "custom_message")))
            .map(|mut e| {
                for k in ["id", "parentId", "timestamp"] {
                    e.as_object_mut().unwrap().remove(k);
                }
                e
            })
            .collect()
    };
    let ours = kept(&sb);
    assert_eq!(ours, kept(&pi_sb));
    let second = ours
        .iter()
        .find(|e| e["customType"] == "settle-second")
        .unwrap();
    assert_eq!(second["data"]["canContinue"], true, "{ours:#?}");
    assert_eq!(second["data"]["drafts"], json!(["nudge", "settle-first"]));
    let requests = |log: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .map(|l| {
                let r: Value = serde_json::from_str(l).unwrap();
                let roles: Vec<Value> = r["body"]["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["role"].clone())
                    .collect();
                json!(roles)
            })
            .collect()
    };
    let sent = requests(&mock.log);
    assert_eq!(sent, requests(&pi_mock.log));
    assert_eq!(sent.len(), 2, "{sent:?}");
    let types = |o: &Output| -> Vec<Value> {
        jsonl(o)
            .into_iter()
            .map(|e| e["type"].clone())
            // (pi-run's closing `run_end`: pi has none.)
            .filter(|t| t != "message_update" && t != "session" && t != "run_end")
            .collect()
    };
    assert_eq!(types(&out[0]), types(&pi_out[0]));
    let line = "Extension error (<boundary>): agent_before_settle requested continuation without runnable model context";
    assert!(stderr(&pi_out[0]).contains(line), "{}", stderr(&pi_out[0]));
    assert!(stderr(&out[0]).contains(line), "{}", stderr(&out[0]));
    let line = "Extension error (<boundary>): turn_end requested continuation without runnable model context";
    assert!(stderr(&pi_out[0]).contains(line), "{}", stderr(&pi_out[0]));
    assert!(stderr(&out[0]).contains(line), "{}", stderr(&out[0]));
}

/// Continuing a session (`-c`) keeps its model and thinking level as pi
/// 1.6.0 does: no flags → the session's (the last `model_change` or
/// assistant message; the last `thinking_level_change`); `--model` picks
/// another model but records no `model_change`; `--thinking` records its
/// `thinking_level_change`. The same requests (model, reasoning effort)
/// and the same entries as pi. (Here beside the extension tests for their
/// two-runs helper; no extension is loaded.)
#[test]
fn continue_restores_the_sessions_model_and_thinking_level_as_pi() {
    let Some(o) = Oracle::find("continue_restores_the_sessions_model_and_thinking_level_as_pi")
    else {
        return;
    };
    let three_models = |sb: &Sandbox, mock: &MockLlm| {
        let model = |id: &str, reasoning: bool| {
            json!({"id": id, "name": id, "reasoning": reasoning, "input": ["text"],
                   "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                   "contextWindow": 128000, "maxTokens": 4096})
        };
        let models = json!({"providers": {"mock": {
            "baseUrl": format!("http://127.0.0.1:{}/v1", mock.port),
            "api": "openai-completions", "apiKey": "test",
            "models": [model("mock-model", false), model("mock-2", true), model("mock-3", true)]
        }}});
        std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
    };
    let ((pi_sb, pi_mock, _), (sb, mock, _)) = both_runs_with(
        &o,
        &three_models,
        &[],
        &json!([{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}, {"text": "e"}]),
        &[
            &["--model", "mock/mock-2", "--thinking", "high", "-p", "one"],
            &["-c", "-p", "two"],
            &["-c", "--model", "mock/mock-3", "-p", "three"],
            &["-c", "--thinking", "low", "-p", "four"],
            &["-c", "-p", "five"],
        ],
    );
    let sent = |log: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .map(|l| {
                let r: Value = serde_json::from_str(l).unwrap();
                json!([r["body"]["model"], r["body"]["reasoning_effort"]])
            })
            .collect()
    };
    let requests = sent(&mock.log);
    assert_eq!(requests, sent(&pi_mock.log));
    assert_eq!(
        requests,
        json!([
            ["mock-2", "high"],
            ["mock-2", "high"],
            ["mock-3", "high"],
            ["mock-3", "low"],
            ["mock-3", "low"]
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let changes = |s: &Sandbox| -> Vec<Value> {
        session_entries(s)
            .into_iter()
            .filter_map(|e| match e["type"].as_str() {
                Some("model_change") => Some(json!(["model", e["provider"], e["modelId"]])),
                Some("thinking_level_change") => Some(json!(["thinking", e["thinkingLevel"]])),
                Some("message") if e["message"]["role"] == "assistant" => {
                    Some(json!(["answer", e["message"]["model"]]))
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(changes(&sb), changes(&pi_sb));
}

/// An extension subscribed to `message_update` gets every streamed delta
/// (pi's payload, with the cumulative `partial`) before the answer's
/// `message_end`; `agent_before_settle` is sent after the run and its
/// entry draft is appended: the same session entries as pi 1.6.0.
#[test]
fn message_update_and_before_settle_as_pi() {
    let Some(o) = Oracle::find("message_update_and_before_settle_as_pi") else {
        return;
    };
    let ((pi_sb, _pm, _), (sb, _m, _)) = both_runs(
        &o,
        &["events.ts"],
        &json!([{"text": "hello there, streaming world"}]),
        &[&["-p", "hi"]],
    );
    let custom = |s: &Sandbox| -> Vec<Value> {
        session_entries(s)
            .into_iter()
            .filter(|e| e["type"] == "custom")
            .collect()
    };
    let ours = custom(&sb);
    assert_eq!(ours, custom(&pi_sb));
    let updates = ours[0]["data"]["updates"].as_array().unwrap();
    assert!(updates.len() > 2, "{ours:#?}");
    assert_eq!(ours[1]["customType"], "events-settle");
    assert_eq!(ours[1]["data"]["outcome"], "completed");
}

/// A tool an extension registers inside `session_start`, without choosing
/// the set, is offered from the first request on, as pi 1.6.0 offers it;
/// so is the real pi-subagents' `subagent_supervisor`, registered that way.
#[test]
fn a_tool_registered_in_session_start_reaches_the_first_request_as_in_pi() {
    let turns = json!([
        {"tool_calls": [{"name": "started", "arguments": {}}]},
        {"text": "done"}
    ]);
    let Some((_, tools)) = same_tools_as_pi(
        "a_tool_registered_in_session_start_reaches_the_first_request_as_in_pi",
        "start-tool.ts",
        turns,
    ) else {
        return;
    };
    assert!(tools[0].iter().any(|t| t == "started"), "{tools:?}");

    let Some(o) = Oracle::find("subagent_supervisor in the first request") else {
        return;
    };
    let dir = std::env::var_os("PI_EXT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pi-toolkit-ext")
        })
        .join("pi-subagents/node_modules/pi-subagents");
    if !dir.join("package.json").is_file() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "pi-subagents is not installed (tests/ext-node/install.sh)"
        );
        eprintln!("SKIP: pi-subagents is not installed");
        return;
    }
    let first_tools = |pi: bool| {
        let sb = Sandbox::new();
        let mock = MockLlm::start(&o, sb.root(), &json!([{"text": "ok"}]));
        mock.configure(&sb.agent());
        let mut c = if pi {
            o.pi160(&sb)
        } else {
            let mut c = pi_run(&o, &sb);
            c.args(["--extension-timeout", "20"]);
            c
        };
        let out = c.arg("-e").arg(&dir).args(["-p", "hi"]).output().unwrap();
        assert!(out.status.success(), "pi {pi}: {}", stderr(&out));
        request_tools(&mock.log).remove(0)
    };
    let ours = first_tools(false);
    assert!(ours.iter().any(|t| t == "subagent_supervisor"), "{ours:?}");
    assert_eq!(ours, first_tools(true));
}
