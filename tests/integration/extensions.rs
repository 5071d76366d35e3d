//! Extensions under `pi-run` with the faux provider: the example process
//! extensions (Python, bash), the fail-closed gate (a `tool_call` handler
//! that errors, times out or crashes: the tool never runs), a throwing
//! `tool_result` reported while the run goes on, project trust (an
//! untrusted project's extension never starts; `project_trust` answered by
//! a user extension), extension commands, and `--gate`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::*;

/// Whether `prog` is on PATH; a skip with a message, a failure under CI.
fn have(prog: &str, test: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false);
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: {prog} is not installed");
        }
        eprintln!("SKIP {test}: {prog} is not installed");
    }
    found
}

fn script(sb: &Sandbox, lines: &[Value]) -> String {
    let p = sb.root().join("script.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

/// A configurable probe extension: `PROBE` (in its environment) says what
/// it does; `PROBE_MARKER` is touched when it starts.
const PROBE: &str = r#"#!/usr/bin/env python3
import json, os, sys
mode = os.environ.get("PROBE", "")
if os.environ.get("PROBE_MARKER"):
    open(os.environ["PROBE_MARKER"], "w").close()
def send(r):
    sys.stdout.write(json.dumps(r) + "\n"); sys.stdout.flush()
hello = json.loads(sys.stdin.readline())
events = ["tool_call", "tool_result", "project_trust", "input", "before_agent_start"]
if mode == "boundary":
    events.append("turn_end")
if mode == "discover":
    events.append("resources_discover")
flags = [{"name": "probe-flag", "type": "string"}, {"name": "probe-bool", "type": "boolean", "default": False}]
send({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": events, "flags": flags}]})
seen = {}
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "configure":
        seen = r["flags"]
    if r["type"] != "event":
        continue
    t = r["event"]["type"]
    if t == "tool_call" and mode == "tool_call:error":
        send({"type": "result", "id": r["id"], "error": "probe exploded"}); continue
    if t == "tool_call" and mode == "tool_call:hang":
        continue
    if t == "tool_call" and mode == "nested":
        # Call back into the host while the host waits for this answer.
        send({"type": "call", "id": "c1", "method": "appendEntry", "params": {"customType": "probe", "data": {"n": 1}}})
        send({"type": "call", "id": "c2", "method": "session.getBranch"})
        send({"type": "call", "id": "c3", "method": "nope"})
        got = {}
        while len(got) < 3:
            a = json.loads(sys.stdin.readline())
            if a["type"] == "return":
                got[a["id"]] = a
        types = [e.get("customType") or e["type"] for e in got["c2"]["result"]]
        send({"type": "result", "id": r["id"], "result": {"block": True, "reason": json.dumps([types[-1], got["c3"]["error"]])}}); continue
    if t == "tool_call" and mode.startswith("send:"):
        opts = {"deliverAs": mode.split(":")[1]} if mode != "send:" else {}
        send({"type": "call", "id": "s1", "method": "sendMessage",
              "params": {"message": {"customType": "queued", "content": "from probe", "display": True}, "options": opts}})
        while json.loads(sys.stdin.readline())["type"] != "return":
            pass
    if t == "resources_discover":
        send({"type": "result", "id": r["id"], "result": {"skillPaths": [os.environ["PROBE_SKILLS"]]}}); continue
    if t == "turn_end" and mode == "boundary":
        i = r["event"]["turnIndex"]
        # At turn 1 (after a text answer) a custom message gives the model something to answer,
        # so `continue` makes one more request (pi: without it, nothing runnable, an error).
        extra = [{"type": "custom_message", "customType": "nudge", "content": "more", "display": False}] if i == 1 else []
        send({"type": "result", "id": r["id"], "result": {"entries": [{"type": "custom", "customType": "b", "data": {"turn": i}}] + extra, "continue": i == 1}}); continue
    if t == "tool_call" and mode == "flags":
        send({"type": "result", "id": r["id"], "result": {"block": True, "reason": json.dumps(seen, sort_keys=True)}}); continue
    if t == "tool_call" and mode == "tool_call:crash":
        sys.exit(3)
    if t == "tool_result" and mode == "tool_result:error":
        send({"type": "result", "id": r["id"], "error": "result handler threw"}); continue
    if t == "project_trust" and mode.startswith("trust:"):
        answer = mode.split(":")[1]
        send({"type": "result", "id": r["id"], "result": {"trusted": answer, "remember": os.environ.get("PROBE_REMEMBER") == "1"}}); continue
    if t == "input" and mode == "input":
        send({"type": "result", "id": r["id"], "result": {"action": "transform", "text": r["event"]["text"] + " (via input)"}}); continue
    if t == "before_agent_start" and mode == "input":
        send({"type": "result", "id": r["id"], "result": {"message": {"customType": "probe", "content": "from probe", "display": True}}}); continue
    send({"type": "result", "id": r["id"], "result": None})
"#;

fn write_exec(path: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

fn touch_call(sb: &Sandbox) -> String {
    script(
        sb,
        &[
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch marker"}}]}),
            json!({"text": "done"}),
        ],
    )
}

/// `(toolName, text, isError)` of every `tool_execution_end`.
fn ends(out: &std::process::Output) -> Vec<(String, String, bool)> {
    jsonl(out)
        .iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .map(|e| {
            (
                e["toolName"].as_str().unwrap_or("").to_string(),
                e["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                e["isError"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

fn run_probe(sb: &Sandbox, mode: &str, extra: &[&str]) -> std::process::Output {
    let probe = write_exec(&sb.root().join("probe.py"), PROBE);
    let s = touch_call(sb);
    sb.cmd("pi-run")
        .env("PROBE", mode)
        .args([
            "--no-session",
            "--provider",
            "faux",
            "--model",
            &s,
            "--mode",
            "json",
        ])
        .arg("-e")
        .arg(&probe)
        .args(extra)
        .arg("go")
        .output()
        .unwrap()
}

fn example_run(example: &str) {
    let sb = Sandbox::new();
    let s = script(
        &sb,
        &[
            json!({"toolCalls": [
                {"name": "bash", "arguments": {"command": "rm -rf nothing; touch marker"}},
                {"name": "bash", "arguments": {"command": "echo hi"}},
                {"name": "shout", "arguments": {"text": "hey"}},
                {"name": "read", "arguments": {"path": "notes.txt"}}
            ]}),
            json!({"text": "done"}),
        ],
    );
    std::fs::write(sb.cwd().join("notes.txt"), "secret").unwrap();
    let ext = repo().join("examples").join(example);
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &s, "--mode", "json", "-e"])
        .arg(&ext)
        .arg("go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!sb.cwd().join("marker").exists(), "the blocked command ran");
    let mut e = ends(&out);
    e.sort();
    let tag = example;
    assert_eq!(
        e,
        [
            (
                "bash".to_string(),
                format!("{tag}: rm -rf is not allowed"),
                true
            ),
            (
                "bash".to_string(),
                "hi checked-by-guard\n".to_string(),
                false
            ),
            ("read".to_string(), format!("[redacted by {tag}]"), false),
            ("shout".to_string(), "HEY".to_string(), false),
        ]
    );
    // The registered tool is declared to the model and recorded as pi
    // records tools: in the first system message's toolsAdded, with its
    // line in the tools section.
    let sys = jsonl(&out)
        .into_iter()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "system")
        .unwrap();
    let added: Vec<&str> = sys["message"]["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(added.contains(&"shout"), "{added:?}");
    assert!(sys["message"]["sections"]["tools"]
        .as_str()
        .unwrap()
        .contains("- shout: Upper-case a text"));

    // The command runs instead of the agent: a custom entry, no model turn.
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &s, "--mode", "json", "-e"])
        .arg(&ext)
        .arg("/note remember this")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let evs = jsonl(&out);
    assert!(
        evs.iter().all(|e| e["type"] != "agent_start"),
        "no run for a command"
    );
    let entry = evs.iter().find(|e| e["type"] == "entry_appended").unwrap();
    assert_eq!(entry["entry"]["customType"], "note");
    assert_eq!(entry["entry"]["data"]["text"], "remember this");
}

#[test]
fn python_example_blocks_rewrites_patches_and_registers() {
    if have("python3", "python_example") {
        example_run("guard.py");
    }
}

#[test]
fn bash_example_blocks_rewrites_patches_and_registers() {
    if have("jq", "bash_example") {
        example_run("guard.sh");
    }
}

#[test]
fn tool_call_fails_closed_on_error_timeout_and_crash() {
    if !have("python3", "fail_closed") {
        return;
    }
    for (mode, want) in [
        ("tool_call:error", "probe exploded".to_string()),
        (
            "tool_call:hang",
            "did not answer tool_call within 1 s; blocking execution".to_string(),
        ),
        (
            "tool_call:crash",
            "is not running; blocking execution".to_string(),
        ),
    ] {
        let sb = Sandbox::new();
        let out = run_probe(&sb, mode, &["--extension-timeout", "1"]);
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        assert!(
            !sb.cwd().join("marker").exists(),
            "{mode}: the tool ran: {}",
            stderr(&out)
        );
        let e = ends(&out);
        assert_eq!(e.len(), 1, "{mode}");
        assert!(e[0].2 && e[0].1.contains(&want), "{mode}: {e:?}");
        // No extension_error for a tool_call failure (pi: fail closed).
        assert!(jsonl(&out).iter().all(|e| e["type"] != "extension_error"));
        if mode == "tool_call:crash" {
            assert!(stderr(&out).contains("exited (code 3)"), "{}", stderr(&out));
        }
    }
}

#[test]
fn throwing_tool_result_is_reported_and_the_run_goes_on() {
    if !have("python3", "tool_result_throw") {
        return;
    }
    let sb = Sandbox::new();
    let out = run_probe(&sb, "tool_result:error", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(sb.cwd().join("marker").exists(), "the tool ran");
    // --mode json: pi 1.6.0's stderr line, no record on the event stream
    // (pi sends extension_error records only in RPC mode).
    let evs = jsonl(&out);
    assert!(evs.iter().all(|e| e["type"] != "extension_error"));
    let line = stderr(&out);
    assert!(
        line.contains("Extension error (") && line.contains("probe.py): result handler threw"),
        "{line}"
    );
    assert_eq!(evs[evs.len() - 2]["type"], "agent_settled");
    assert_eq!(evs.last().unwrap()["type"], "run_end");
    // Text mode: the same stderr line.
    let sb = Sandbox::new();
    let probe = write_exec(&sb.root().join("probe.py"), PROBE);
    let s = touch_call(&sb);
    let out = sb
        .cmd("pi-run")
        .env("PROBE", "tool_result:error")
        .args(["--no-session", "--provider", "faux", "--model", &s, "-e"])
        .arg(&probe)
        .arg("go")
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim(), "done");
    assert!(stderr(&out).contains(&format!(
        "Extension error ({}): result handler threw",
        probe.display()
    )));
}

#[test]
fn input_transform_and_before_agent_start_message() {
    if !have("python3", "input_transform") {
        return;
    }
    let sb = Sandbox::new();
    let out = run_probe(&sb, "input", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let msgs: Vec<Value> = jsonl(&out)
        .into_iter()
        .filter(|e| e["type"] == "message_end")
        .map(|e| e["message"].clone())
        .collect();
    let user = msgs.iter().find(|m| m["role"] == "user").unwrap();
    assert_eq!(user["content"][0]["text"], "go (via input)");
    let roles: Vec<&str> = msgs.iter().filter_map(|m| m["role"].as_str()).collect();
    let u = roles.iter().position(|r| *r == "user").unwrap();
    assert_eq!(roles[u + 1], "custom", "{roles:?}");
    let custom = &msgs[u + 1];
    assert_eq!(custom["customType"], "probe");
}

/// A project whose `.pi/extensions/evil.py` would touch `evil-ran` when
/// started.
fn evil_project(sb: &Sandbox) -> PathBuf {
    let marker = sb.root().join("evil-ran");
    let evil = PROBE.replace(
        "mode = os.environ.get(\"PROBE\", \"\")",
        &format!(
            "mode = \"\"\nopen({:?}, \"w\").close()",
            marker.display().to_string()
        ),
    );
    write_exec(&sb.cwd().join(".pi/extensions/evil.py"), &evil);
    marker
}

fn run_plain(sb: &Sandbox, extra: &[&str]) -> std::process::Output {
    let s = script(sb, &[json!({"text": "ok"})]);
    sb.cmd("pi-run")
        .args(["--no-session", "--provider", "faux", "--model", &s])
        .args(extra)
        .arg("hi")
        .output()
        .unwrap()
}

#[test]
fn untrusted_project_extension_never_starts() {
    if !have("python3", "untrusted_project") {
        return;
    }
    let sb = Sandbox::new();
    let marker = evil_project(&sb);
    let out = run_plain(&sb, &["--no-approve"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!marker.exists(), "an untrusted project's extension started");
    // Nothing decides (print mode, no saved decision): untrusted too.
    let out = run_plain(&sb, &[]);
    assert!(out.status.success());
    assert!(!marker.exists());
    // Trusted, it starts.
    let out = run_plain(&sb, &["--approve"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(marker.exists());
}

#[test]
fn project_trust_answered_by_a_user_extension() {
    if !have("python3", "project_trust") {
        return;
    }
    for (answer, remember, starts) in [
        ("yes", false, true),
        ("no", false, false),
        ("undecided", false, false),
        ("yes", true, true),
    ] {
        let sb = Sandbox::new();
        let marker = evil_project(&sb);
        write_exec(&sb.agent().join("extensions/trust.py"), PROBE);
        let s = script(&sb, &[json!({"text": "ok"})]);
        let out = sb
            .cmd("pi-run")
            .env("PROBE", format!("trust:{answer}"))
            .env("PROBE_REMEMBER", if remember { "1" } else { "0" })
            .args(["--no-session", "--provider", "faux", "--model", &s, "hi"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{answer}: {}", stderr(&out));
        assert_eq!(marker.exists(), starts, "{answer}: {}", stderr(&out));
        let trust = sb.agent().join("trust.json");
        assert_eq!(trust.exists(), remember, "{answer} remember={remember}");
        if remember {
            let text = std::fs::read_to_string(&trust).unwrap();
            assert!(text.contains("true"), "{text}");
        }
    }
}

#[test]
fn gate_command_allows_blocks_and_fails_closed() {
    for (gate, runs, text) in [
        ("cat >/dev/null; exit 0", true, ""),
        (
            "grep -q '\"touch marker\"' && { echo 'no touching'; exit 1; }; exit 0",
            false,
            "no touching",
        ),
        ("exit 1", false, "blocked by --gate"),
        (
            "exit 7",
            false,
            "--gate failed (exit 7); blocking execution",
        ),
        ("kill -9 $$", false, "--gate was killed; blocking execution"),
        (
            "sleep 30",
            false,
            "--gate did not answer within 1 s; blocking execution",
        ),
    ] {
        let sb = Sandbox::new();
        let s = touch_call(&sb);
        let out = sb
            .cmd("pi-run")
            .args([
                "--no-session",
                "--provider",
                "faux",
                "--model",
                &s,
                "--mode",
                "json",
            ])
            .args(["--extension-timeout", "1", "--gate", gate, "go"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{gate}: {}", stderr(&out));
        assert_eq!(sb.cwd().join("marker").exists(), runs, "{gate}");
        let e = ends(&out);
        assert_eq!(e[0].2, !runs, "{gate}: {e:?}");
        if !runs {
            assert_eq!(e[0].1, text, "{gate}");
        }
    }
}

/// The same tool, registered by a TypeScript extension under pi 1.6.0 and
/// by a process extension under pi-run, through the same mock: the same
/// recorded system message (toolsAdded, the tools and rules sections; the
/// docs section names this toolkit), the same tool result and the same
/// event types.
#[test]
fn registered_tool_is_recorded_as_pi_records_it() {
    let Some(o) = Oracle::find("registered_tool_is_recorded_as_pi_records_it") else {
        return;
    };
    if !have("python3", "registered_tool_vs_pi") {
        return;
    }
    let turns = json!([
        {"tool_calls": [{"name": "shout", "arguments": {"text": "hey"}}]},
        {"text": "done"}
    ]);
    let ts = r#"import { Type } from "typebox";
export default function (pi: any) {
  pi.registerTool({
    name: "shout", label: "Shout", description: "Upper-case a text.",
    promptSnippet: "Upper-case a text", promptGuidelines: ["Use shout to shout."],
    parameters: Type.Object({ text: Type.String() }),
    async execute(_id: string, p: any) { return { content: [{ type: "text", text: p.text.toUpperCase() }], details: {} }; },
  });
}
"#;
    let py = r#"#!/usr/bin/env python3
import json, sys
def send(r): sys.stdout.write(json.dumps(r) + "\n"); sys.stdout.flush()
h = json.loads(sys.stdin.readline())
send({"type": "register", "protocol": 1, "extensions": [{"path": h["load"][0]["path"], "tools": [{"name": "shout", "label": "Shout",
  "description": "Upper-case a text.", "promptSnippet": "Upper-case a text", "promptGuidelines": ["Use shout to shout."],
  "parameters": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}}]}]})
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "execute":
        send({"type": "result", "id": r["id"], "result": {"content": [{"type": "text", "text": r["params"]["text"].upper()}], "details": {}}})
"#;
    let run = |ours: bool| {
        let sb = Sandbox::new();
        let mock = MockLlm::start(&o, sb.root(), &turns);
        mock.configure(&sb.agent());
        let out = if ours {
            let ext = write_exec(&sb.root().join("shout.py"), py);
            sb.cmd("pi-run")
                .arg("-e")
                .arg(&ext)
                .args(["--mode", "json", "-p", "go"])
                .output()
                .unwrap()
        } else {
            let ext = sb.root().join("shout.ts");
            std::fs::write(&ext, ts).unwrap();
            o.pi160(&sb)
                .arg("-e")
                .arg(&ext)
                .args(["--mode", "json", "-p", "go"])
                .output()
                .unwrap()
        };
        assert!(out.status.success(), "ours={ours}: {}", stderr(&out));
        let evs = jsonl(&out);
        let mut sys = evs
            .iter()
            .find(|e| e["type"] == "message_end" && e["message"]["role"] == "system")
            .map(|e| e["message"].clone())
            .unwrap();
        sys.as_object_mut().unwrap().remove("timestamp");
        sys["sections"].as_object_mut().unwrap().remove("docs");
        // Each run has its own sandbox.
        assert_eq!(
            sys["sections"]["cwd"],
            format!("<cwd>\n{}\n</cwd>", sb.cwd().display())
        );
        sys["sections"]["cwd"] = json!("<cwd>");
        let mut end = evs
            .iter()
            .find(|e| e["type"] == "tool_execution_end")
            .cloned()
            .unwrap();
        end.as_object_mut().unwrap().remove("durationMs");
        let types: Vec<String> = evs
            .iter()
            .filter_map(|e| e["type"].as_str())
            .filter(|t| *t != "message_update")
            .map(str::to_string)
            .collect();
        (sys, end, types)
    };
    let theirs = run(false);
    let ours = run(true);
    assert_eq!(ours.0, theirs.0, "system message");
    assert_eq!(ours.1, theirs.1, "tool result");
    // pi-run closes its JSON stream with run_end (pi has none).
    let mut our_types = ours.2.clone();
    assert_eq!(our_types.pop().as_deref(), Some("run_end"));
    assert_eq!(our_types, theirs.2, "event types");
}

#[test]
fn pi_resources_lists_process_extensions() {
    let sb = Sandbox::new();
    let ext = sb.agent().join("extensions");
    write_exec(&ext.join("guard.py"), "#!/bin/sh\n");
    write_exec(&ext.join("pkg/bin/run"), "#!/bin/sh\n");
    std::fs::write(
        ext.join("pkg/package.json"),
        r#"{"pi": {"process": "./bin/run"}}"#,
    )
    .unwrap();
    write_exec(&ext.join("dir/extension"), "#!/bin/sh\n");
    std::fs::write(ext.join("notes.txt"), "not executable").unwrap();
    let out = sb.cmd("pi-resources").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut paths: Vec<String> = jsonl(&out)
        .iter()
        .filter(|r| r["type"] == "extension")
        .filter_map(|r| r["path"].as_str())
        .map(|p| {
            p.strip_prefix(&ext.display().to_string())
                .unwrap_or(p)
                .to_string()
        })
        .collect();
    paths.sort();
    assert_eq!(paths, ["/dir/extension", "/guard.py", "/pkg/bin/run"]);
}

#[test]
fn extension_flags_are_parsed_after_load() {
    if !have("python3", "extension_flags") {
        return;
    }
    let sb = Sandbox::new();
    let out = run_probe(&sb, "flags", &["--probe-flag", "cli-value", "--probe-bool"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // `go` after the boolean flag is still the prompt.
    let user = jsonl(&out)
        .into_iter()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "user")
        .unwrap();
    assert_eq!(user["message"]["content"][0]["text"], "go");
    assert_eq!(
        ends(&out)[0].1,
        r#"{"probe-bool": true, "probe-flag": "cli-value"}"#
    );
    // Defaults when not given; a flag nobody registered is a usage error.
    let sb = Sandbox::new();
    let out = run_probe(&sb, "flags", &[]);
    assert_eq!(
        ends(&out)[0].1,
        r#"{"probe-bool": false, "probe-flag": null}"#
    );
    let out = run_probe(&sb, "flags", &["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown option --no-such-flag"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn calls_are_served_while_the_host_waits_for_the_handler() {
    if !have("python3", "nested_calls") {
        return;
    }
    let sb = Sandbox::new();
    let out = run_probe(&sb, "nested", &["--extension-timeout", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The entry appended from inside the handler is on the branch the same
    // handler reads back; an unknown method is pi's error.
    assert_eq!(ends(&out)[0].1, r#"["probe", "Unknown method: nope"]"#);
    let appended: Vec<Value> = jsonl(&out)
        .into_iter()
        .filter(|e| e["type"] == "entry_appended")
        .collect();
    assert_eq!(appended.len(), 1);
    assert_eq!(appended[0]["entry"]["data"]["n"], 1);
}

#[test]
fn send_message_follows_pi_delivery_rules() {
    if !have("python3", "send_message") {
        return;
    }
    // (mode, roles after the tool result, final answer)
    for (mode, after, answer) in [
        ("send:", vec!["custom", "assistant"], "second"),
        ("send:steer", vec!["custom", "assistant"], "second"),
        (
            "send:followUp",
            vec!["assistant", "custom", "assistant"],
            "third",
        ),
    ] {
        let sb = Sandbox::new();
        let probe = write_exec(&sb.root().join("probe.py"), PROBE);
        let s = script(
            &sb,
            &[
                json!({"toolCalls": [{"name": "bash", "arguments": {"command": "true"}}]}),
                json!({"text": "second"}),
                json!({"text": "third"}),
            ],
        );
        let out = sb
            .cmd("pi-run")
            .env("PROBE", mode)
            .args([
                "--no-session",
                "--provider",
                "faux",
                "--model",
                &s,
                "--mode",
                "json",
                "-e",
            ])
            .arg(&probe)
            .arg("go")
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        let roles: Vec<String> = jsonl(&out)
            .into_iter()
            .filter(|e| e["type"] == "message_end")
            .map(|e| e["message"]["role"].as_str().unwrap_or("").to_string())
            .collect();
        let t = roles.iter().position(|r| r == "toolResult").unwrap();
        assert_eq!(roles[t + 1..], after[..], "{mode}: {roles:?}");
        let last = jsonl(&out)
            .into_iter()
            .rev()
            .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
            .unwrap();
        assert_eq!(last["message"]["content"][0]["text"], answer, "{mode}");
    }
}

#[test]
fn pi_resources_inspect_lists_what_extensions_registered() {
    if !have("python3", "inspect") {
        return;
    }
    let sb = Sandbox::new();
    let ext = sb.agent().join("extensions");
    std::fs::create_dir_all(&ext).unwrap();
    std::fs::copy(repo().join("examples/guard.py"), ext.join("guard.py")).unwrap();
    let marker = evil_project(&sb);
    let rec = |args: &[&str]| {
        let out = sb.cmd("pi-resources").args(args).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        jsonl(&out)
            .into_iter()
            .filter(|r| r["type"] == "extension")
            .collect::<Vec<Value>>()
    };
    // Without --inspect nothing runs and nothing is added.
    let plain = rec(&["--approve"]);
    assert!(plain.iter().all(|r| r.get("registered").is_none()));
    assert!(!marker.exists());
    // Untrusted: only the user's extension starts.
    let untrusted = rec(&["--inspect", "--no-approve"]);
    assert_eq!(untrusted.len(), 1);
    assert_eq!(
        untrusted[0]["registered"],
        json!({"tools": ["shout"], "commands": ["note"], "flags": []})
    );
    assert!(!marker.exists(), "an untrusted project's extension started");
    let trusted = rec(&["--inspect", "--approve"]);
    assert_eq!(trusted.len(), 2);
    assert!(marker.exists());
    let evil = trusted.iter().find(|r| r["name"] == "evil").unwrap();
    assert_eq!(
        evil["registered"]["flags"],
        json!(["probe-flag", "probe-bool"])
    );
}

#[test]
fn turn_end_boundary_appends_entries_and_continues() {
    if !have("python3", "boundary") {
        return;
    }
    let sb = Sandbox::new();
    let probe = write_exec(&sb.root().join("probe.py"), PROBE);
    let s = script(
        &sb,
        &[
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": "true"}}]}),
            json!({"text": "second"}),
            json!({"text": "third"}),
        ],
    );
    let out = sb
        .cmd("pi-run")
        .env("PROBE", "boundary")
        .args([
            "--no-session",
            "--provider",
            "faux",
            "--model",
            &s,
            "--mode",
            "json",
            "-e",
        ])
        .arg(&probe)
        .arg("go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let evs = jsonl(&out);
    let turns: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "entry_appended" && e["entry"]["customType"] == "b")
        .map(|e| &e["entry"]["data"]["turn"])
        .collect();
    assert_eq!(turns, [&json!(0), &json!(1), &json!(2)]);
    // `continue` after the answer "second" (and the custom message) asked
    // for one more request.
    let texts: Vec<&str> = evs
        .iter()
        .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .filter_map(|e| e["message"]["content"][0]["text"].as_str())
        .collect();
    assert_eq!(texts, ["second", "third"]);
}

#[test]
fn resources_discover_adds_skills_to_the_prompt() {
    if !have("python3", "resources_discover") {
        return;
    }
    let sb = Sandbox::new();
    let skill = sb.root().join("extra-skills/probe-skill");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: probe-skill\ndescription: A skill an extension brought.\n---\nBody.\n",
    )
    .unwrap();
    let probe = write_exec(&sb.root().join("probe.py"), PROBE);
    let s = script(&sb, &[json!({"text": "ok"})]);
    let out = sb
        .cmd("pi-run")
        .env("PROBE", "discover")
        .env("PROBE_SKILLS", sb.root().join("extra-skills"))
        .args([
            "--no-session",
            "--provider",
            "faux",
            "--model",
            &s,
            "--mode",
            "json",
            "-e",
        ])
        .arg(&probe)
        .arg("go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let sys = jsonl(&out)
        .into_iter()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "system")
        .unwrap();
    let skills = sys["message"]["sections"]["skills"].as_str().unwrap_or("");
    assert!(skills.contains("probe-skill"), "{sys}");
}
