//! Automatic compaction in `pi-run`, side by side with pi 1.6.0 on the same
//! mock script: overflow recovery (a context-overflow error once, then
//! twice), the threshold after a run and between turns, `compaction.enabled:
//! false`, and sessions each side compacted continued by the other.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};

use crate::common::*;

/// One side's run: its stdout events, its session file, the requests the
/// mock saw.
struct Run {
    out: Output,
    events: Vec<Value>,
    file: PathBuf,
    requests: Vec<Value>,
}

/// The one session file under `dir`.
fn session_file(dir: &Path) -> PathBuf {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, &mut v);
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs pi 1.6.0 (`pi: true`) or pi-run in a fresh sandbox with the mock
/// replaying `turns`, a model with `context_window`, and `settings` added
/// to the defaults.
fn run(
    o: &Oracle,
    pi: bool,
    context_window: u64,
    settings: Value,
    turns: &Value,
    args: &[&str],
) -> (Sandbox, Run) {
    let sb = Sandbox::new();
    std::fs::write(sb.cwd().join("notes.txt"), "hello notes\n").unwrap();
    let mock = MockLlm::start(o, sb.root(), turns);
    mock.configure(&sb.agent());
    configure(&sb, context_window, settings);
    let out = if pi {
        o.pi160(&sb).args(args).output().unwrap()
    } else {
        sb.cmd("pi-run")
            .env("PI_OFFLINE", "1")
            .args(args)
            .output()
            .unwrap()
    };
    drop(mock);
    let events = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let file = session_file(&sb.agent().join("sessions"));
    let requests = lines(&sb.root().join("requests.jsonl"));
    (
        sb,
        Run {
            out,
            events,
            file,
            requests,
        },
    )
}

/// The mock model gets `context_window`; settings.json gets `settings`.
fn configure(sb: &Sandbox, context_window: u64, settings: Value) {
    let models = sb.agent().join("models.json");
    let text = std::fs::read_to_string(&models).unwrap();
    std::fs::write(
        &models,
        text.replace(
            "\"contextWindow\":128000",
            &format!("\"contextWindow\":{context_window}"),
        ),
    )
    .unwrap();
    let mut s = json!({"defaultProvider": "mock", "defaultModel": "mock-model"});
    if let (Some(s), Some(add)) = (s.as_object_mut(), settings.as_object()) {
        s.extend(add.clone());
    }
    std::fs::write(sb.agent().join("settings.json"), s.to_string()).unwrap();
}

/// Event types, message events refined by role and `message_update` by
/// its assistant event type; pi-run's closing `run_end` record (pi has
/// none) left out.
fn event_types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|v| v["type"] != "run_end")
        .map(|v| {
            let t = v["type"].as_str().unwrap_or("?").to_string();
            match t.as_str() {
                "message_update" => format!(
                    "{t}:{}",
                    v["assistantMessageEvent"]["type"].as_str().unwrap_or("?")
                ),
                "message_start" | "message_end" => {
                    format!("{t}:{}", v["message"]["role"].as_str().unwrap_or("?"))
                }
                "compaction_start" | "compaction_end" => {
                    format!("{t}:{}", v["reason"].as_str().unwrap_or("?"))
                }
                "entry_appended" => format!("{t}:{}", v["entry"]["type"].as_str().unwrap_or("?")),
                _ => t,
            }
        })
        .collect()
}

/// Entry types of a session file, messages by role; pi-run's stored
/// outcome (pi stores none) left out.
fn entry_types(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["customType"] != "pi-run:run_end")
        .map(|e| match e["type"].as_str().unwrap_or("?") {
            "message" => format!("message:{}", e["message"]["role"].as_str().unwrap_or("?")),
            t => t.to_string(),
        })
        .collect()
}

/// The entry with `id`, summarised as its type and message text (ids
/// differ between the two runs; what they point at must not).
fn describe(entries: &[Value], id: &str) -> String {
    let e = entries
        .iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("no entry {id}"));
    format!(
        "{} {} {}",
        e["type"], e["message"]["role"], e["message"]["content"]
    )
}

/// The `compaction_end` events, with the fields that do not depend on the
/// system prompt's size (ours differs from pi's in its docs section).
fn compaction_ends(r: &Run) -> Vec<Value> {
    let entries = lines(&r.file);
    r.events
        .iter()
        .filter(|e| e["type"] == "compaction_end")
        .map(|e| {
            let mut v = json!({
                "reason": e["reason"], "aborted": e["aborted"], "willRetry": e["willRetry"],
                "errorMessage": e["errorMessage"],
            });
            if let Some(res) = e.get("result") {
                v["summary"] = res["summary"].clone();
                v["details"] = res["details"].clone();
                v["usageKeys"] = json!(res["usage"]
                    .as_object()
                    .map(|u| u.keys().cloned().collect::<Vec<_>>()));
                v["firstKept"] = json!(describe(
                    &entries,
                    res["firstKeptEntryId"].as_str().unwrap()
                ));
            }
            v
        })
        .collect()
}

/// Each compaction entry's `tokensBefore` equals what `pi-session compact
/// --dry-run` plans on the file just before it (so on pi's file our
/// estimate equals pi's live one), and its `compaction_end` agrees.
fn tokens_before_match_plan(sb: &Sandbox, r: &Run, keep: u64) {
    let text = std::fs::read_to_string(&r.file).unwrap();
    let ls: Vec<&str> = text.lines().collect();
    let ends: Vec<&Value> = r
        .events
        .iter()
        .filter(|e| e["type"] == "compaction_end" && e.get("result").is_some())
        .collect();
    let ats: Vec<usize> = (0..ls.len())
        .filter(|&i| ls[i].contains(r#""type":"compaction""#))
        .collect();
    assert_eq!(ats.len(), ends.len(), "{}", r.file.display());
    let cut = sb.root().join("cut.jsonl");
    for (&at, end) in ats.iter().zip(ends) {
        let entry: Value = serde_json::from_str(ls[at]).unwrap();
        assert_eq!(entry["tokensBefore"], end["result"]["tokensBefore"]);
        assert_eq!(entry["firstKeptEntryId"], end["result"]["firstKeptEntryId"]);
        std::fs::write(&cut, ls[..at].join("\n") + "\n").unwrap();
        let plan = jsonl(&sb.session(&[
            "compact",
            cut.to_str().unwrap(),
            "--dry-run",
            "--keep-recent-tokens",
            &keep.to_string(),
        ]));
        assert_eq!(
            plan[0]["tokensBefore"],
            entry["tokensBefore"],
            "line {}",
            at + 1
        );
        assert_eq!(
            plan[0]["firstKeptEntryId"],
            entry["firstKeptEntryId"],
            "line {}",
            at + 1
        );
    }
}

const FIRST_ANSWER: &str = "This is the first answer. It is deliberately long so that the compaction cut point lands inside this turn and something remains to summarize.";

fn usage() -> Value {
    json!({"prompt_tokens": 100, "completion_tokens": 20})
}

/// Summary requests are matched by their text (history `<conversation>`,
/// turn prefix `# Conversation`); `second prompt` fails `overflows` times
/// with Anthropic's overflow message.
fn overflow_turns(overflows: usize) -> Value {
    let mut t = vec![
        json!({"match": "<conversation>", "text": "HISTORY SUMMARY"}),
        json!({"match": "# Conversation", "text": "PREFIX SUMMARY"}),
    ];
    for _ in 0..overflows {
        t.push(json!({"match": "second prompt", "status": 400,
                      "error": "prompt is too long: 213462 tokens > 200000 maximum"}));
    }
    t.push(json!({"text": FIRST_ANSWER, "usage": usage()}));
    t.push(json!({"text": "Recovered answer after compaction.", "usage": usage()}));
    Value::Array(t)
}

const ARGS: [&str; 4] = ["--mode", "json", "first prompt", "second prompt"];

#[test]
fn overflow_recovery_matches_pi_160() {
    let Some(o) = Oracle::find("overflow_recovery_matches_pi_160") else {
        return;
    };
    let settings = json!({"compaction": {"keepRecentTokens": 30}});
    let turns = overflow_turns(1);
    let (pi_sb, pi) = run(&o, true, 128000, settings.clone(), &turns, &ARGS);
    assert!(pi.out.status.success(), "{}", stderr(&pi.out));
    let (sb, ours) = run(&o, false, 128000, settings, &turns, &ARGS);
    assert!(ours.out.status.success(), "pi-run: {}", stderr(&ours.out));
    let (pt, ot) = (event_types(&pi.events), event_types(&ours.events));
    assert_eq!(ot, pt);
    // The recovery as pi does it: the failed reply omitted, a compaction
    // that will retry, a fresh run without the user message again.
    let tail: Vec<&str> = ot
        .iter()
        .map(String::as_str)
        .skip_while(|t| *t != "entry_appended:context_edit")
        .take(4)
        .collect();
    assert_eq!(
        tail,
        [
            "entry_appended:context_edit",
            "compaction_start:overflow",
            "compaction_end:overflow",
            "agent_start"
        ]
    );
    assert_eq!(compaction_ends(&ours), compaction_ends(&pi));
    assert_eq!(compaction_ends(&ours)[0]["willRetry"], true);
    let (pe, oe) = (lines(&pi.file), lines(&ours.file));
    assert_eq!(entry_types(&oe), entry_types(&pe));
    // The edit targets the failed reply, on both sides.
    for es in [&pe, &oe] {
        let edit = es.iter().find(|e| e["type"] == "context_edit").unwrap();
        let target = es.iter().find(|e| e["id"] == edit["targetId"]).unwrap();
        assert_eq!(target["message"]["stopReason"], "error");
        assert_eq!(edit["replacement"], Value::Null);
    }
    tokens_before_match_plan(&pi_sb, &pi, 30);
    tokens_before_match_plan(&sb, &ours, 30);
    // The retried request: the summary first, then what was kept, then the
    // second prompt; the failed reply is gone.
    let roles = |r: &Run| -> Vec<String> {
        let last = r.requests.last().unwrap();
        last["body"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(roles(&ours), roles(&pi));
    assert_eq!(ours.requests.len(), pi.requests.len());
    let last = oe.iter().rfind(|e| e["type"] == "message").unwrap();
    assert_eq!(
        last["message"]["content"][0]["text"],
        "Recovered answer after compaction."
    );

    // pi 1.6.0 continues our compacted session, and sees what `pi-session
    // context` says it holds; pi-run continues pi's.
    let live: Value = serde_json::from_slice(
        &o.node("sdk-context.mjs", &[ours.file.to_str().unwrap()])
            .stdout,
    )
    .unwrap();
    let ctx = jsonl(&sb.session(&["context", ours.file.to_str().unwrap(), "--format", "jsonl"]));
    let msgs: Vec<Value> = ctx[1..].iter().map(|r| r["message"].clone()).collect();
    assert_eq!(Value::Array(msgs), live["messages"]);
    let cont = MockLlm::start(
        &o,
        &sb.root().join("agent"),
        &json!([{"text": "continued"}]),
    );
    cont.configure(&sb.agent());
    let c = o
        .pi160(&sb)
        .args([
            "--session",
            ours.file.to_str().unwrap(),
            "-p",
            "third prompt",
        ])
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", stderr(&c));
    assert_eq!(stdout(&c).trim(), "continued");
    let req = lines(&cont.log).pop().unwrap();
    let sent = req["body"]["messages"].as_array().unwrap();
    let first_user = sent[1]["content"].to_string();
    assert!(
        first_user.contains("The conversation history before this point was compacted"),
        "{first_user}"
    );
    drop(cont);
    let cont = MockLlm::start(
        &o,
        &pi_sb.root().join("agent"),
        &json!([{"text": "ours continued"}]),
    );
    cont.configure(&pi_sb.agent());
    let c = pi_sb
        .cmd("pi-run")
        .env("PI_OFFLINE", "1")
        .args(["--session", pi.file.to_str().unwrap(), "third prompt"])
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", stderr(&c));
    assert_eq!(stdout(&c).trim(), "ours continued");
    let req = lines(&cont.log).pop().unwrap();
    let sent = req["body"]["messages"].as_array().unwrap();
    assert!(sent[1]["content"]
        .to_string()
        .contains("The conversation history before this point was compacted"));
    assert!(sent
        .iter()
        .any(|m| m["content"].to_string().contains("Recovered answer")));
}

#[test]
fn second_overflow_gives_up_as_pi_160() {
    let Some(o) = Oracle::find("second_overflow_gives_up_as_pi_160") else {
        return;
    };
    let settings = json!({"compaction": {"keepRecentTokens": 30}});
    let turns = overflow_turns(2);
    let (_pi_sb, pi) = run(&o, true, 128000, settings.clone(), &turns, &ARGS);
    let (_sb, ours) = run(&o, false, 128000, settings, &turns, &ARGS);
    assert_eq!(event_types(&ours.events), event_types(&pi.events));
    let ends = compaction_ends(&ours);
    assert_eq!(ends, compaction_ends(&pi));
    assert_eq!(
        ends.last().unwrap()["errorMessage"],
        "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
    );
    assert_eq!(
        entry_types(&lines(&ours.file)),
        entry_types(&lines(&pi.file))
    );
    // pi ends the JSON run normally; pi-run reports the model error.
    assert_eq!(ours.out.status.code(), Some(1), "{}", stderr(&ours.out));
    assert!(stderr(&ours.out).contains("prompt is too long"));
}

/// A small window (threshold 16500 − 16384 = 116 tokens): pi compacts after
/// the first run and between the turns of the second (after the tool
/// result), then again after it.
#[test]
fn threshold_compaction_matches_pi_160() {
    let Some(o) = Oracle::find("threshold_compaction_matches_pi_160") else {
        return;
    };
    let settings = json!({"compaction": {"keepRecentTokens": 8}});
    let mut t: Vec<Value> = (1..=3)
        .flat_map(|n| {
            [
                json!({"match": "<conversation>", "text": format!("HISTORY {n}"), "usage": usage()}),
                json!({"match": "# Conversation", "text": format!("PREFIX {n}"), "usage": usage()}),
            ]
        })
        .collect();
    t.push(json!({"text": FIRST_ANSWER, "usage": usage()}));
    t.push(json!({"text": "Reading the notes file now.", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}], "usage": usage()}));
    t.push(json!({"text": "Notes read; they say hello.", "usage": usage()}));
    let turns = Value::Array(t);
    let (pi_sb, pi) = run(&o, true, 16500, settings.clone(), &turns, &ARGS);
    assert!(pi.out.status.success(), "{}", stderr(&pi.out));
    let (sb, ours) = run(&o, false, 16500, settings.clone(), &turns, &ARGS);
    assert!(ours.out.status.success(), "pi-run: {}", stderr(&ours.out));
    let ot = event_types(&ours.events);
    assert_eq!(ot, event_types(&pi.events));
    assert_eq!(
        ot.iter()
            .filter(|t| *t == "compaction_end:threshold")
            .count(),
        3
    );
    // Between turns: after the tool result's turn, before the next turn.
    let at = ot
        .iter()
        .position(|t| t == "message_end:toolResult")
        .unwrap();
    assert_eq!(
        &ot[at + 1..at + 5],
        [
            "turn_end",
            "compaction_start:threshold",
            "compaction_end:threshold",
            "turn_start"
        ]
    );
    assert_eq!(compaction_ends(&ours), compaction_ends(&pi));
    // Usage-based counts are the same on both sides.
    let tb = |r: &Run| -> Vec<Value> {
        r.events
            .iter()
            .filter(|e| e["type"] == "compaction_end")
            .map(|e| e["result"]["tokensBefore"].clone())
            .collect()
    };
    assert_eq!(tb(&ours), tb(&pi));
    assert_eq!(tb(&ours), [json!(120), json!(123), json!(120)]);
    assert_eq!(
        entry_types(&lines(&ours.file)),
        entry_types(&lines(&pi.file))
    );
    tokens_before_match_plan(&pi_sb, &pi, 8);
    tokens_before_match_plan(&sb, &ours, 8);

    // compaction.enabled: false turns all of it off (and the run still
    // succeeds).
    let off = json!({"compaction": {"keepRecentTokens": 8, "enabled": false}});
    let (_sb, ours) = run(&o, false, 16500, off.clone(), &turns, &ARGS);
    assert!(ours.out.status.success(), "{}", stderr(&ours.out));
    let (_pi_sb, pi) = run(&o, true, 16500, off, &turns, &ARGS);
    let ot = event_types(&ours.events);
    assert_eq!(ot, event_types(&pi.events));
    assert!(!ot.iter().any(|t| t.starts_with("compaction")), "{ot:?}");
}

/// Without the oracle: an overflow with compaction disabled ends the run
/// with the model's error and writes no edit or compaction.
#[test]
fn overflow_without_compaction_fails_the_run() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_text("first")),
        Reply::Status(
            400,
            r#"{"error":{"message":"prompt is too long: 213462 tokens > 200000 maximum"}}"#.into(),
        ),
    ]);
    server.configure(&sb.agent());
    let mut s: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.agent().join("settings.json")).unwrap())
            .unwrap();
    s["compaction"] = json!({"enabled": false, "keepRecentTokens": 1});
    std::fs::write(sb.agent().join("settings.json"), s.to_string()).unwrap();
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "one", "two"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let types: Vec<String> = jsonl(&out)
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        !types.iter().any(|t| t.starts_with("compaction")),
        "{types:?}"
    );
    let file = session_file(&sb.agent().join("sessions"));
    let es = entry_types(&lines(&file));
    assert!(
        !es.iter().any(|t| t == "compaction" || t == "context_edit"),
        "{es:?}"
    );
    assert_eq!(server.requests.lock().unwrap().len(), 2);
}

/// A reply cut off by the output limit (`finish_reason: length`, fewer
/// tokens than the model's maximum) is recovered like an overflow: pi
/// 1.6.0 and pi-run omit it, compact and retry once.
#[test]
fn truncated_reply_recovery_matches_pi_160() {
    let Some(o) = Oracle::find("truncated_reply_recovery_matches_pi_160") else {
        return;
    };
    let settings = json!({"compaction": {"keepRecentTokens": 30}});
    let turns = json!([
        {"match": "<conversation>", "text": "HISTORY SUMMARY"},
        {"match": "# Conversation", "text": "PREFIX SUMMARY"},
        {"match": "second prompt", "text": "truncated rep", "finish_reason": "length", "usage": usage()},
        {"text": FIRST_ANSWER, "usage": usage()},
        {"text": "Recovered answer after compaction.", "usage": usage()}
    ]);
    let (_pi_sb, pi) = run(&o, true, 128000, settings.clone(), &turns, &ARGS);
    assert!(pi.out.status.success(), "{}", stderr(&pi.out));
    let (_sb, ours) = run(&o, false, 128000, settings, &turns, &ARGS);
    assert!(ours.out.status.success(), "pi-run: {}", stderr(&ours.out));
    let ot = event_types(&ours.events);
    assert_eq!(ot, event_types(&pi.events));
    assert!(
        ot.iter().any(|t| t == "entry_appended:context_edit"),
        "{ot:?}"
    );
    assert_eq!(compaction_ends(&ours), compaction_ends(&pi));
    assert_eq!(
        entry_types(&lines(&ours.file)),
        entry_types(&lines(&pi.file))
    );
}
