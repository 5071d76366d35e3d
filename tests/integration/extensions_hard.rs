//! Extensions that misbehave: a `tool_call` answer blocks on any truthy
//! `block` (as pi) and a malformed one fails closed; a hung notification
//! handler costs one timeout per run.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

fn write(path: &Path, text: &str) -> PathBuf {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn write_exec(path: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    write(path, text);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// Whether `prog` is on PATH; a skip with a message, a failure under CI.
fn have(prog: &str, test: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false);
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {prog} is not installed"
        );
        eprintln!("SKIP {test}: {prog} is not installed");
    }
    found
}

/// The model's first answer runs `touch ran.txt`; the second is text.
fn touch_turns() -> Vec<Reply> {
    vec![
        Reply::Sse(sse_tools(&[("bash", r#"{"command":"touch ran.txt"}"#)])),
        Reply::Sse(sse_text("done")),
    ]
}

/// `pi-run -p go` in `sb` against `server`, with the oracle's Node for TS
/// extensions.
fn run_ours(sb: &Sandbox, node: Option<&Path>, args: &[&str]) -> Output {
    let mut c = sb.cmd("pi-run");
    if let Some(n) = node {
        c.env("PI_NODE", n);
    }
    c.args(args).args(["-p", "go"]).output().unwrap()
}

/// A process extension answering `tool_call` with `$ANSWER` (JSON).
const ANSWERS: &str = r#"#!/usr/bin/env python3
import json, os, sys
hello = json.loads(sys.stdin.readline())
def send(r):
    sys.stdout.write(json.dumps(r) + "\n"); sys.stdout.flush()
send({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": ["tool_call"]}]})
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "event":
        sys.stdout.write('{"type": "result", "id": %d, "result": %s}\n' % (r["id"], os.environ["ANSWER"])); sys.stdout.flush()
"#;

fn faux_touch(sb: &Sandbox) -> String {
    let p = sb.root().join("script.jsonl");
    let lines = [
        json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]}),
        json!({"text": "done"}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

/// The text and error flag of the first tool result of a `--mode json` run.
fn first_result(out: &Output) -> (String, bool) {
    let end = jsonl(out)
        .into_iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool result: {}", stderr(out)));
    (
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        end["isError"].as_bool().unwrap_or(false),
    )
}

/// pi blocks on any truthy `block` (`"yes"`, `1`); falsy ones (`0`, `""`,
/// `false`) let the call run; an answer that is not `null` or an object,
/// or an `input` that is not an object, blocks (fail closed) with one
/// stderr line.
#[test]
fn truthy_blocks_block_and_malformed_answers_fail_closed() {
    if !have(
        "python3",
        "truthy_blocks_block_and_malformed_answers_fail_closed",
    ) {
        return;
    }
    let cases: &[(&str, bool, &str)] = &[
        (
            r#"{"block": "yes", "reason": "said yes"}"#,
            false,
            "said yes",
        ),
        (r#"{"block": 1}"#, false, "Tool execution was blocked"),
        (r#"{"block": "no"}"#, false, "Tool execution was blocked"),
        (r#"{"block": 0}"#, true, ""),
        (r#"{"block": ""}"#, true, ""),
        (r#"{"block": false}"#, true, ""),
        (r#"null"#, true, ""),
        (
            r#""garbage""#,
            false,
            "answered tool_call with \"garbage\", not null or an object",
        ),
        (
            r#"[true]"#,
            false,
            "answered tool_call with [true], not null or an object",
        ),
        (
            r#"{"input": "rm -rf /"}"#,
            false,
            "answered tool_call with an input that is not an object (a string)",
        ),
    ];
    for (answer, runs, text) in cases {
        let sb = Sandbox::new();
        let ext = write_exec(&sb.root().join("answers.py"), ANSWERS);
        let script = faux_touch(&sb);
        let out = sb
            .cmd("pi-run")
            .env("ANSWER", answer)
            .args(["--no-session", "--provider", "faux", "--model", &script])
            .args(["--mode", "json", "-e", ext.to_str().unwrap(), "go"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{answer}: {}", stderr(&out));
        assert_eq!(sb.cwd().join("ran.txt").exists(), *runs, "{answer}");
        let (got, is_error) = first_result(&out);
        assert_eq!(is_error, !runs, "{answer}: {got}");
        if !runs {
            assert!(got.contains(text), "{answer}: {got}");
        }
        let malformed = stderr(&out)
            .lines()
            .filter(|l| l.contains("answered tool_call"))
            .count();
        assert_eq!(
            malformed,
            usize::from(text.starts_with("answered")),
            "{answer}: {}",
            stderr(&out)
        );
    }
}

/// The same answers from a TypeScript handler, under pi 1.6.0 and pi-run:
/// the tool runs in both or in neither.
#[test]
fn ts_truthy_blocks_as_in_pi() {
    let Some(o) = Oracle::find("ts_truthy_blocks_as_in_pi") else {
        return;
    };
    for (ret, runs) in [
        (r#"{ block: "yes" }"#, false),
        ("{ block: 1 }", false),
        ("{ block: 0 }", true),
        (r#""garbage""#, true),
    ] {
        let src = format!(
            "export default function (pi: any) {{ pi.on(\"tool_call\", () => ({ret}) as any); }}\n"
        );
        let pi_sb = Sandbox::new();
        let turns = json!([{"tool_calls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]}, {"text": "done"}]);
        let mock = MockLlm::start(&o, pi_sb.root(), &turns);
        mock.configure(&pi_sb.agent());
        let ext = write(&pi_sb.root().join("t.ts"), &src);
        let pi = o
            .pi160(&pi_sb)
            .args(["-e", ext.to_str().unwrap(), "-p", "go"])
            .output()
            .unwrap();
        assert!(pi.status.success(), "pi {ret}: {}", stderr(&pi));
        assert_eq!(pi_sb.cwd().join("ran.txt").exists(), runs, "pi {ret}");

        let sb = Sandbox::new();
        let server = ScriptServer::start(touch_turns());
        server.configure(&sb.agent());
        let ext = write(&sb.root().join("t.ts"), &src);
        let out = run_ours(&sb, Some(&o.node22), &["-e", ext.to_str().unwrap()]);
        assert!(out.status.success(), "{ret}: {}", stderr(&out));
        assert_eq!(sb.cwd().join("ran.txt").exists(), runs, "{ret}");
    }
}

/// A `message_update` handler that never answers: the first delta costs
/// the extension timeout, the rest nothing (one stderr line says so), so
/// ~25 deltas with a 1 s limit take seconds, not 25.
#[test]
fn a_hung_notification_handler_costs_one_timeout() {
    if !have("python3", "a_hung_notification_handler_costs_one_timeout") {
        return;
    }
    let ext_src = r#"#!/usr/bin/env python3
import json, sys
hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": ["message_update"]}]}) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    pass
"#;
    let sb = Sandbox::new();
    let ext = write_exec(&sb.root().join("deaf.py"), ext_src);
    let text = "x".repeat(190);
    let p = sb.root().join("script.jsonl");
    std::fs::write(&p, json!({"text": text}).to_string() + "\n").unwrap();
    let t = Instant::now();
    let out = sb
        .cmd("pi-run")
        .args([
            "--no-session",
            "--provider",
            "faux",
            "--model",
            p.to_str().unwrap(),
        ])
        .args([
            "--extension-timeout",
            "1",
            "-e",
            ext.to_str().unwrap(),
            "--mode",
            "json",
            "go",
        ])
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    let deltas = jsonl(&out)
        .iter()
        .filter(|e| e["type"] == "message_update")
        .count();
    assert!(deltas >= 22, "{deltas} deltas");
    assert!(
        took < Duration::from_secs(8),
        "{deltas} deltas took {took:?}"
    );
    let err = stderr(&out);
    assert_eq!(
        err.matches("its message_update handler did not answer within 1 s; not waiting for it again this run")
            .count(),
        1,
        "{err}"
    );
}
