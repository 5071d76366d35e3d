//! `pi-run` against the real pi 1.6.0: the same scripted four-turn task
//! (read a file, edit it, run bash, answer) through the same mock server
//! leaves the same file, the same event types, and a session pi continues.

use serde_json::{json, Value};

use crate::common::*;

fn four_turns() -> Value {
    json!([
        {"reasoning": "Let me look at the file.", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}], "usage": {"prompt_tokens": 120, "completion_tokens": 12}},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "notes.txt", "edits": [{"oldText": "hello", "newText": "goodbye"}]}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "cat notes.txt && echo done"}}]},
        {"text": "notes.txt now says goodbye world."}
    ])
}

/// Event types, with `message_update` refined by its assistant event type
/// and message events by role. A run of `tool_execution_update` counts once:
/// how many progress updates a command produces depends on how its output
/// happens to be split into reads.
fn event_types(stdout: &str) -> Vec<String> {
    let mut v: Vec<String> = stdout
        .lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l}: {e}"));
            let t = v["type"].as_str().unwrap_or("?").to_string();
            match t.as_str() {
                "message_update" => format!(
                    "{t}:{}",
                    v["assistantMessageEvent"]["type"].as_str().unwrap_or("?")
                ),
                "message_start" | "message_end" => {
                    format!("{t}:{}", v["message"]["role"].as_str().unwrap_or("?"))
                }
                _ => t,
            }
        })
        .collect();
    v.dedup_by(|a, b| a == "tool_execution_update" && b == "tool_execution_update");
    v
}

#[test]
fn four_turn_task_matches_real_pi() {
    let Some(o) = Oracle::find("four_turn_task_matches_real_pi") else {
        return;
    };
    // pi's run.
    let pi_sb = Sandbox::new();
    std::fs::write(pi_sb.cwd().join("notes.txt"), "hello world\n").unwrap();
    let pi_mock = MockLlm::start(&o, pi_sb.root(), &four_turns());
    pi_mock.configure(&pi_sb.agent());
    let pi_out = o
        .pi160(&pi_sb)
        .args(["--mode", "json", "Change hello to goodbye in notes.txt"])
        .output()
        .unwrap();
    assert!(pi_out.status.success(), "{}", stderr(&pi_out));
    // Our run.
    let sb = Sandbox::new();
    std::fs::write(sb.cwd().join("notes.txt"), "hello world\n").unwrap();
    let mock = MockLlm::start(&o, sb.root(), &four_turns());
    mock.configure(&sb.agent());
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "Change hello to goodbye in notes.txt"])
        .output()
        .unwrap();
    assert!(out.status.success(), "pi-run failed: {}", stderr(&out));
    // Same file contents.
    assert_eq!(
        std::fs::read_to_string(sb.cwd().join("notes.txt")).unwrap(),
        std::fs::read_to_string(pi_sb.cwd().join("notes.txt")).unwrap()
    );
    // Same event sequence, then our closing run_end record.
    let mut ours = event_types(&stdout(&out));
    assert_eq!(ours.pop().as_deref(), Some("run_end"));
    let theirs = event_types(&stdout(&pi_out));
    assert_eq!(ours, theirs);
    // The session: pi exports it and continues it.
    let sessions = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    assert_eq!(sessions.len(), 1);
    let file = sessions[0]["path"].as_str().unwrap().to_string();
    let html = sb.root().join("s.html");
    let exp = o
        .pi160(&sb)
        .args(["--export", &file, html.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(exp.status.success(), "{}", stderr(&exp));
    let cont = MockLlm::start(
        &o,
        &sb.root().join("agent"),
        &json!([{"text": "continued"}]),
    );
    cont.configure(&sb.agent());
    let before = std::fs::read_to_string(&file).unwrap();
    // The run's outcome is the session's last entry (a custom entry pi
    // keeps), and pi continues the session past it.
    let last: Value = serde_json::from_str(before.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "custom", "{last}");
    assert_eq!(last["customType"], "pi-run:run_end", "{last}");
    assert_eq!(last["data"]["stopReason"], "completed", "{last}");
    assert_eq!(last["data"]["turns"], 4, "{last}");
    let c = o
        .pi160(&sb)
        .args(["--session", &file, "-p", "and now?"])
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", stderr(&c));
    assert_eq!(stdout(&c).trim(), "continued");
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(after.starts_with(&before));
    // pi appended no system patch: our recorded prompt is what it would send
    // (apart from the docs section, which points at this toolkit).
    let appended: Vec<Value> = after[before.len()..]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let roles: Vec<&str> = appended
        .iter()
        .filter_map(|e| e["message"]["role"].as_str())
        .collect();
    assert_eq!(&roles[roles.len() - 2..], ["user", "assistant"]);
    // pi went on from the outcome entry (its leaf), and the outcome never
    // reached the model.
    assert_eq!(appended[0]["parentId"], last["id"], "{appended:?}");
    let sent = std::fs::read_to_string(&cont.log).unwrap();
    assert!(
        sent.contains("and now?") && !sent.contains("run_end"),
        "{sent}"
    );
}

#[test]
fn pi_run_continues_sessions_real_pi_wrote() {
    let Some(o) = Oracle::find("pi_run_continues_sessions_real_pi_wrote") else {
        return;
    };
    for scenario in ["tools-160", "tools-073", "compaction-160", "branched-160"] {
        let sb = Sandbox::with_fixtures();
        let file = sb.fixture_file(scenario);
        let mock = MockLlm::start(&o, sb.root(), &json!([{"text": "pi-run continues"}]));
        mock.configure(&sb.agent());
        let before = std::fs::read_to_string(&file).unwrap();
        let out = sb
            .cmd("pi-run")
            .args(["--session", file.to_str().unwrap(), "-p", "one more thing"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{scenario}: {}", stderr(&out));
        assert_eq!(stdout(&out), "pi-run continues\n", "{scenario}");
        let after = std::fs::read_to_string(&file).unwrap();
        assert!(after.starts_with(&before), "{scenario}: only appends");
        // The model saw the old conversation: the request carries it.
        let reqs: Vec<Value> = std::fs::read_to_string(&mock.log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let msgs = reqs.last().unwrap()["body"]["messages"]
            .as_array()
            .unwrap()
            .clone();
        assert!(msgs.len() >= 4, "{scenario}: history sent ({})", msgs.len());
        // pi's SDK agrees with our reading of the continued file.
        let (ours, _) = {
            let out = sb.session(&["context", file.to_str().unwrap(), "--format", "jsonl"]);
            let recs = jsonl(&out);
            (
                recs[1..]
                    .iter()
                    .map(|r| r["message"].clone())
                    .collect::<Vec<_>>(),
                recs[0].clone(),
            )
        };
        let live: Value =
            serde_json::from_slice(&o.node("sdk-context.mjs", &[file.to_str().unwrap()]).stdout)
                .unwrap();
        assert_eq!(Value::Array(ours), live["messages"], "{scenario}");
        // And the real pi continues the file pi-run extended.
        let mock2 = MockLlm::start(&o, &sb.root().join("agent"), &json!([{"text": "pi again"}]));
        mock2.configure(&sb.agent());
        let c = o
            .pi160(&sb)
            .args(["--session", file.to_str().unwrap(), "-p", "last"])
            .output()
            .unwrap();
        assert!(c.status.success(), "{scenario}: {}", stderr(&c));
        assert_eq!(stdout(&c).trim(), "pi again");
    }
}
