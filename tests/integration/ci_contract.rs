//! The CI contract of `pi-run`: the `run_end` record closing `--mode json`
//! and the same outcome stored in the session, `--verbose` progress and
//! the usage line, the length warning, the limits (`--max-turns`,
//! `--max-cost`, `--timeout`, their settings keys) with exit 3, and
//! structured output (`--output-schema`, retries, exit 4,
//! `--output-last-message`). Driven against loopback model servers that
//! report usage (100 input and 10 output tokens per response; the mock
//! model costs $3 / $15 per million, so $0.00045 a response).

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use crate::subagents::{agent_call, enable, parent_and_children, read_jsonl, Mock};

/// What one mock response costs.
const RESPONSE_COST: f64 = 0.00045;

/// Whether a process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn wait_gone(pids: &[u32], what: &str) {
    let t = Instant::now();
    while pids.iter().any(|p| alive(*p)) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for p in pids {
        assert!(!alive(*p), "{what}: process {p} outlived pi-run");
    }
}

fn pid_in(sb: &Sandbox, file: &str) -> u32 {
    std::fs::read_to_string(sb.cwd().join(file))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The only session file of the sandbox and its entries.
fn the_session(sb: &Sandbox) -> (String, Vec<Value>) {
    let ls = jsonl(&sb.session(&["ls", "--format", "jsonl"]));
    assert_eq!(ls.len(), 1, "one session: {ls:?}");
    let path = ls[0]["path"].as_str().unwrap().to_string();
    let entries = read_jsonl(std::path::Path::new(&path));
    (path, entries)
}

/// The outcome entry a run appended last.
fn outcome_entry(entries: &[Value]) -> &Value {
    let last = entries.last().unwrap();
    assert_eq!(last["type"], "custom", "{last}");
    assert_eq!(last["customType"], "pi-run:run_end", "{last}");
    &last["data"]
}

/// Sums the usage of the assistant messages of session entries.
fn usage_of(entries: &[Value]) -> (u64, u64, u64, f64) {
    let mut s = (0, 0, 0, 0.0);
    for e in entries {
        let m = &e["message"];
        if e["type"] == "message" && m["role"] == "assistant" {
            let u = &m["usage"];
            s.0 += u["input"].as_u64().unwrap();
            s.1 += u["output"].as_u64().unwrap();
            s.2 += u["totalTokens"].as_u64().unwrap();
            s.3 += u["cost"]["total"].as_f64().unwrap();
        }
    }
    s
}

fn usage_tuple(u: &Value) -> (u64, u64, u64, f64) {
    (
        u["input"].as_u64().unwrap(),
        u["output"].as_u64().unwrap(),
        u["totalTokens"].as_u64().unwrap(),
        u["cost"]["total"].as_f64().unwrap(),
    )
}

fn same_usage(a: (u64, u64, u64, f64), b: (u64, u64, u64, f64), what: &str) {
    assert_eq!((a.0, a.1, a.2), (b.0, b.1, b.2), "{what}");
    assert!((a.3 - b.3).abs() < 1e-9, "{what}: cost {} vs {}", a.3, b.3);
}

/// models.json for `server` with `extra` merged into the model, and
/// settings.json `settings` (fast retries are kept).
fn configure(sb: &Sandbox, server: &ScriptServer, extra: Value, settings: Value) {
    server.configure(&sb.agent());
    let mut models = read_json(&sb.agent().join("models.json"));
    let model = &mut models["providers"]["mock"]["models"][0];
    for (k, v) in extra.as_object().unwrap() {
        model[k] = v.clone();
    }
    std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
    let mut s = read_json(&sb.agent().join("settings.json"));
    for (k, v) in settings.as_object().unwrap() {
        s[k] = v.clone();
    }
    std::fs::write(sb.agent().join("settings.json"), s.to_string()).unwrap();
}

// ---- the outcome record ----------------------------------------------

#[test]
fn run_end_totals_are_the_parent_s_and_the_children_s_usage_and_stored_in_the_session() {
    let sb = Sandbox::new();
    let mock = Mock::start(vec![
        agent_call(json!({"prompt": "first task", "description": "one"})),
        agent_call(json!({"prompt": "second task", "description": "two"})),
    ]);
    mock.configure(&sb.agent());
    enable(&sb, 4);
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "delegate"])
        .output()
        .unwrap();
    ok(&out);
    let events = jsonl(&out);
    let end = events.last().unwrap();
    assert_eq!(end["type"], "run_end", "{end}");
    assert_eq!(events[events.len() - 2]["type"], "agent_settled");
    assert_eq!(end["exitCode"], 0);
    assert_eq!(end["stopReason"], "completed");
    assert_eq!(end["model"], "mock/mock-model");
    assert!(end["durationMs"].as_u64().is_some(), "{end}");
    // The parent: one delegating response, one acknowledgement.
    let (parent, children) = parent_and_children(&sb);
    let parent_entries = read_jsonl(&parent);
    assert_eq!(end["turns"], 2, "{end}");
    assert_eq!(end["sessionFile"], parent.display().to_string());
    assert_eq!(end["sessionId"], parent_entries[0]["id"]);
    // Each child's usage, and the total: the parent's plus the children's.
    assert_eq!(children.len(), 2);
    let kids = end["children"].as_array().unwrap();
    assert_eq!(kids.len(), 2, "{end}");
    let mut total = usage_of(&parent_entries);
    for file in &children {
        let entries = read_jsonl(file);
        let id = entries[0]["id"].as_str().unwrap();
        let kid = kids.iter().find(|k| k["id"] == id).expect("child listed");
        assert_eq!(kid["agent"], "general-purpose");
        assert_eq!(kid["status"], "completed");
        let u = usage_of(&entries);
        assert!(u.0 > 0, "the child spent something");
        same_usage(usage_tuple(&kid["usage"]), u, "child usage");
        total = (total.0 + u.0, total.1 + u.1, total.2 + u.2, total.3 + u.3);
    }
    same_usage(usage_tuple(&end["usage"]), total, "run total");
    assert!(
        (end["usage"]["cost"]["total"].as_f64().unwrap() - 4.0 * RESPONSE_COST).abs() < 1e-9,
        "{end}"
    );
    // The same outcome is the session's last entry (a custom entry).
    let stored = outcome_entry(&parent_entries);
    let mut record = end.clone();
    record.as_object_mut().unwrap().shift_remove("type");
    assert_eq!(stored, &record);
}

#[test]
fn verbose_prints_progress_and_one_usage_line_and_a_cut_reply_warns() {
    let sb = Sandbox::new();
    let cut = sse_text("partial answ")
        .replace("\"finish_reason\":\"stop\"", "\"finish_reason\":\"length\"");
    assert!(cut.contains("\"length\""));
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_tools(&[("bash", r#"{"command":"echo hi"}"#)])),
        Reply::Sse(cut),
    ]);
    // Cut at the model's whole `maxTokens` (the mock's 10 output tokens):
    // the reply stays. One cut short of it is hidden, as pi hides it
    // (context_window.rs).
    configure(&sb, &server, json!({"maxTokens": 10}), json!({}));
    let out = sb
        .cmd("pi-run")
        .args(["--verbose", "-p", "go"])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "partial answ\n");
    let err = stderr(&out);
    for want in [
        "] turn 1",
        "] tool bash started",
        "] tool bash ended after",
        "] turn 2",
        "usage: 2 turns, 220 tokens (input 200, output 20, cache read 0, cache write 0), cost $0.0009,",
        "completed (exit 0)",
        "cut at the output token limit",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    // Without --verbose: no progress, but the cut reply still warns (also
    // in JSON mode).
    let server = ScriptServer::start(vec![Reply::Sse(
        sse_text("short").replace("\"finish_reason\":\"stop\"", "\"finish_reason\":\"length\""),
    )]);
    configure(&sb, &server, json!({"maxTokens": 10}), json!({}));
    for mode in ["text", "json"] {
        let out = sb
            .cmd("pi-run")
            .args(["--mode", mode, "--no-session", "go"])
            .output()
            .unwrap();
        ok(&out);
        let err = stderr(&out);
        assert!(
            err.contains("cut at the output token limit"),
            "{mode}: {err}"
        );
        assert!(
            !err.contains("usage:") && !err.contains("] turn"),
            "{mode}: {err}"
        );
    }
}

// ---- limits ------------------------------------------------------------

#[test]
fn max_turns_is_exit_3_with_stop_reason_max_turns() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_tools(&[("ls", "{}")]))]);
    configure(&sb, &server, json!({}), json!({}));
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "--max-turns", "2", "loop"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(server.requests.lock().unwrap().len(), 2);
    let end = jsonl(&out).pop().unwrap();
    assert_eq!(end["stopReason"], "max_turns", "{end}");
    assert_eq!(end["exitCode"], 3);
    assert_eq!(end["turns"], 2);
    let (_, entries) = the_session(&sb);
    assert_eq!(outcome_entry(&entries)["stopReason"], "max_turns");
}

#[test]
fn max_cost_is_exit_3_and_nothing_starts_after_the_response_that_reached_it() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_tools(&[("bash", r#"{"command":"touch first"}"#)])),
        Reply::Sse(sse_tools(&[("bash", r#"{"command":"touch second"}"#)])),
        Reply::Sse(sse_text("never")),
    ]);
    configure(&sb, &server, json!({}), json!({}));
    // Two responses cost $0.0009: the second reaches $0.0008.
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "--max-cost", "0.0008", "spend"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("--max-cost"), "{}", stderr(&out));
    assert_eq!(server.requests.lock().unwrap().len(), 2);
    assert!(sb.cwd().join("first").exists());
    assert!(
        !sb.cwd().join("second").exists(),
        "a tool ran past the limit"
    );
    let end = jsonl(&out).pop().unwrap();
    assert_eq!(end["stopReason"], "max_cost", "{end}");
    assert!(
        (end["usage"]["cost"]["total"].as_f64().unwrap() - 2.0 * RESPONSE_COST).abs() < 1e-9,
        "{end}"
    );
    let (_, entries) = the_session(&sb);
    assert_eq!(outcome_entry(&entries)["stopReason"], "max_cost");
}

#[test]
fn max_cost_with_a_model_without_prices_is_a_usage_error_naming_it() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("never"))]);
    configure(
        &sb,
        &server,
        json!({"cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}),
        json!({}),
    );
    let out = sb
        .cmd("pi-run")
        .args(["--max-cost", "1", "-p", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("mock/mock-model"), "{}", stderr(&out));
    assert!(server.requests.lock().unwrap().is_empty());
    // Without a cost limit the same model runs.
    let out = sb.cmd("pi-run").args(["-p", "hi"]).output().unwrap();
    ok(&out);
}

#[test]
fn timeout_is_exit_3_killing_the_running_tool_s_process_group() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_tools(&[(
            "bash",
            r#"{"command":"sleep 60 & echo $! > bg.pid; echo $$ > sh.pid; touch started; wait"}"#,
        )])),
        Reply::Sse(sse_text("never")),
    ]);
    configure(&sb, &server, json!({}), json!({}));
    let t = Instant::now();
    let child = sb
        .cmd("pi-run")
        .args(["--mode", "json", "--timeout", "3s", "wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_within(child, Duration::from_secs(30), "--timeout");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert!(stderr(&out).contains("--timeout 3s"), "{}", stderr(&out));
    assert!(sb.cwd().join("started").exists());
    wait_gone(&[pid_in(&sb, "bg.pid"), pid_in(&sb, "sh.pid")], "--timeout");
    assert_eq!(server.requests.lock().unwrap().len(), 1);
    let end = jsonl(&out).pop().unwrap();
    assert_eq!(end["stopReason"], "timeout", "{end}");
    // The partial run is saved as on a signal: the aborted tool result,
    // then the outcome.
    let (_, entries) = the_session(&sb);
    assert_eq!(outcome_entry(&entries)["stopReason"], "timeout");
    let result = entries
        .iter()
        .rfind(|e| e["message"]["role"] == "toolResult")
        .unwrap();
    assert_eq!(result["message"]["isError"], true, "{result}");
    let last_msg = entries
        .iter()
        .rfind(|e| e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(last_msg["message"]["stopReason"], "aborted", "{last_msg}");
}

#[test]
fn limits_come_from_settings_and_a_flag_wins() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_tools(&[("ls", "{}")]))]);
    configure(&sb, &server, json!({}), json!({"limits": {"maxTurns": 1}}));
    let out = sb.cmd("pi-run").args(["-p", "loop"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(server.requests.lock().unwrap().len(), 1);
    let out = sb
        .cmd("pi-run")
        .args(["--max-turns", "3", "-p", "loop"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(
        server.requests.lock().unwrap().len(),
        1 + 3,
        "the flag wins"
    );
    // A malformed key is a configuration error naming it.
    configure(
        &sb,
        &server,
        json!({}),
        json!({"limits": {"maxCost": "lots"}}),
    );
    let out = sb.cmd("pi-run").args(["-p", "loop"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("limits.maxCost"), "{}", stderr(&out));
    // limits.maxCost reached.
    configure(
        &sb,
        &server,
        json!({}),
        json!({"limits": {"maxCost": 0.0001}}),
    );
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "loop"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(jsonl(&out).pop().unwrap()["stopReason"], "max_cost");
}

// ---- structured output -------------------------------------------------

const VERDICT: &str = r#"{"type": "object", "properties": {"status": {"enum": ["ok", "failed"]}, "notes": {"type": "string"}}, "required": ["status", "notes"], "additionalProperties": false}"#;

fn schema_file(sb: &Sandbox, text: &str) -> String {
    let p = sb.root().join("verdict.json");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn last_user(body: &Value) -> String {
    let msgs = body["messages"].as_array().unwrap();
    let m = msgs.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

#[test]
fn a_mismatched_answer_is_corrected_then_printed_alone() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_text("Looks fine to me!")),
        Reply::Sse(sse_text(r#"{"status": "maybe", "notes": "x"}"#)),
        Reply::Sse(sse_text(
            "```json\n{\"status\": \"ok\",\n \"notes\": \"fine\"}\n```",
        )),
    ]);
    configure(&sb, &server, json!({}), json!({}));
    let schema = schema_file(&sb, VERDICT);
    let last = sb.root().join("answer.json");
    let out = sb
        .cmd("pi-run")
        .args([
            "--output-schema",
            &schema,
            "--output-last-message",
            last.to_str().unwrap(),
            "-p",
            "review",
        ])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "{\"status\":\"ok\",\"notes\":\"fine\"}\n");
    assert_eq!(
        std::fs::read_to_string(&last).unwrap(),
        "{\"status\":\"ok\",\"notes\":\"fine\"}\n"
    );
    let reqs = server.requests.lock().unwrap();
    assert_eq!(reqs.len(), 3);
    // The format is in the system prompt; each correction names the
    // errors and repeats the schema.
    let system = reqs[0]["messages"][0]["content"].to_string();
    assert!(system.contains("Final answer format"), "{system}");
    let first = last_user(&reqs[1]);
    assert!(first.contains("not a JSON document"), "{first}");
    assert!(first.contains("\"additionalProperties\""), "{first}");
    let second = last_user(&reqs[2]);
    assert!(second.contains("/status"), "{second}");
    // The model has no strict mode: the schema is validated only.
    assert!(reqs[0].get("response_format").is_none());
}

#[test]
fn an_answer_that_never_matches_is_exit_4_and_json_mode_carries_the_document() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("no JSON here"))]);
    configure(&sb, &server, json!({}), json!({}));
    let schema = schema_file(&sb, VERDICT);
    let out = sb
        .cmd("pi-run")
        .args([
            "--output-schema",
            &schema,
            "--output-retries",
            "1",
            "-p",
            "review",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(
        err.contains("after 1 retry") && err.contains("not a JSON document"),
        "{err}"
    );
    assert_eq!(server.requests.lock().unwrap().len(), 2);
    // JSON mode: run_end carries the validated document; a strict-mode
    // model gets the schema natively.
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text(
        r#"{"status":"failed","notes":"n"}"#,
    ))]);
    configure(
        &sb,
        &server,
        json!({"compat": {"supportsStrictMode": true}}),
        json!({}),
    );
    let schema = schema_file(&sb, VERDICT);
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "--output-schema", &schema, "review"])
        .output()
        .unwrap();
    ok(&out);
    let end = jsonl(&out).pop().unwrap();
    assert_eq!(
        end["output"],
        json!({"status": "failed", "notes": "n"}),
        "{end}"
    );
    let req = server.requests.lock().unwrap()[0].clone();
    assert_eq!(req["response_format"]["type"], "json_schema", "{req}");
    assert_eq!(req["response_format"]["json_schema"]["strict"], true);
    // A schema strict mode refuses (an optional property) stays local.
    let server = ScriptServer::start(vec![Reply::Sse(sse_text(r#"{"status":"ok"}"#))]);
    configure(
        &sb,
        &server,
        json!({"compat": {"supportsStrictMode": true}}),
        json!({}),
    );
    let schema = schema_file(
        &sb,
        r#"{"type": "object", "properties": {"status": {"enum": ["ok"]}, "notes": {"type": "string"}}, "required": ["status"]}"#,
    );
    let out = sb
        .cmd("pi-run")
        .args(["--output-schema", &schema, "-p", "review"])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "{\"status\":\"ok\"}\n");
    assert!(server.requests.lock().unwrap()[0]
        .get("response_format")
        .is_none());
}

#[test]
fn a_missing_or_invalid_schema_is_exit_2_before_any_request() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("{}"))]);
    configure(&sb, &server, json!({}), json!({}));
    let missing = sb.root().join("nope.json");
    let bad = schema_file(&sb, r#"{"type": "strnig"}"#);
    for (file, want) in [
        (missing.display().to_string(), "nope.json"),
        (bad, "not a valid JSON Schema"),
    ] {
        let out = sb
            .cmd("pi-run")
            .args(["--output-schema", &file, "-p", "x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(want), "{}", stderr(&out));
    }
    assert!(server.requests.lock().unwrap().is_empty());
}

// ---- many runs ---------------------------------------------------------

#[test]
fn ls_shows_the_outcome_and_stats_all_adds_up_runs_over_many_folders() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("done"))]);
    configure(&sb, &server, json!({}), json!({}));
    let (a, b) = (sb.root().join("runs-a"), sb.root().join("runs-b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let run = |dir: &std::path::Path, args: &[&str]| {
        sb.cmd("pi-run")
            .arg("--session-dir")
            .arg(dir)
            .args(args)
            .output()
            .unwrap()
    };
    ok(&run(&a, &["-p", "one"]));
    ok(&run(&a, &["-p", "two"]));
    ok(&run(&b, &["-p", "three"]));
    // A run stopped by its turn limit (the model keeps calling tools).
    let looping = ScriptServer::start(vec![Reply::Sse(sse_tools(&[("ls", "{}")]))]);
    configure(&sb, &looping, json!({}), json!({}));
    assert_eq!(
        run(&b, &["--max-turns", "2", "-p", "four"]).status.code(),
        Some(3)
    );
    // A session of pi's own (no outcome) is read, not counted as a run.
    std::fs::write(
        b.join("pi.jsonl"),
        r#"{"type":"session","version":3,"id":"0000-pi","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/elsewhere"}
"#,
    )
    .unwrap();
    // ls: the outcome column and record.
    let ls = sb.session(&[
        "ls",
        "--session-dir",
        b.to_str().unwrap(),
        "--format",
        "jsonl",
    ]);
    let rows = jsonl(&ls);
    let outcomes: Vec<&Value> = rows.iter().map(|r| &r["outcome"]["stopReason"]).collect();
    assert!(outcomes.contains(&&json!("completed")), "{rows:?}");
    assert!(outcomes.contains(&&json!("max_turns")), "{rows:?}");
    let text = stdout(&sb.session(&[
        "ls",
        "--session-dir",
        b.to_str().unwrap(),
        "--format",
        "text",
    ]));
    assert!(text.lines().next().unwrap().contains("OUTCOME"), "{text}");
    assert!(text.contains("max_turns"), "{text}");
    // stats --all over both folders.
    let stats = |extra: &[&str]| {
        let mut args = vec![
            "stats",
            "--all",
            "--session-dir",
            a.to_str().unwrap(),
            "--session-dir",
            b.to_str().unwrap(),
            "--format",
            "jsonl",
        ];
        args.extend_from_slice(extra);
        jsonl(&sb.session(&args))
    };
    let all = stats(&[]);
    assert_eq!(all.len(), 1, "{all:?}");
    let total = &all[0];
    assert_eq!(total["type"], "run_stats");
    assert_eq!(total["group"], Value::Null);
    assert_eq!(total["runs"], 4, "{total}");
    assert_eq!(total["turns"], 3 + 2, "{total}");
    assert_eq!(total["input"], 100 * 5, "{total}");
    assert!(
        (total["cost"].as_f64().unwrap() - 5.0 * RESPONSE_COST).abs() < 1e-9,
        "{total}"
    );
    assert_eq!(total["outcomes"], json!({"completed": 3, "max_turns": 1}));
    let by = stats(&["--by", "outcome"]);
    let groups: Vec<(&Value, &Value)> = by.iter().map(|g| (&g["group"], &g["runs"])).collect();
    assert_eq!(
        groups,
        [
            (&json!("completed"), &json!(3)),
            (&json!("max_turns"), &json!(1)),
            (&Value::Null, &json!(4))
        ]
    );
    let by_cwd = stats(&["--by", "cwd"]);
    assert_eq!(by_cwd.len(), 2, "one cwd, then the total: {by_cwd:?}");
    let by_day = stats(&["--by", "day"]);
    assert!(
        by_day[0]["group"].as_str().unwrap().len() == 10,
        "{by_day:?}"
    );
    let text = stdout(&sb.session(&[
        "stats",
        "--all",
        "--session-dir",
        a.to_str().unwrap(),
        "--session-dir",
        b.to_str().unwrap(),
        "--format",
        "text",
    ]));
    assert!(text.contains("completed 3, max_turns 1"), "{text}");
    assert!(
        text.contains("6 session files read") || text.contains("5 session files read"),
        "{text}"
    );
    // More than one folder is for stats --all only.
    let bad = sb.session(&[
        "ls",
        "--session-dir",
        a.to_str().unwrap(),
        "--session-dir",
        b.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

#[test]
fn every_man_page_has_the_one_exit_status_table() {
    for page in ["pi-run", "pi-session", "pi-resources", "pi-prompt"] {
        let text = std::fs::read_to_string(repo().join("man").join(format!("{page}.1"))).unwrap();
        for want in [
            "ne table for pi\\-run, pi\\-session, pi\\-resources and pi\\-prompt",
            "a limit was reached",
            "did not match \\-\\-output\\-schema",
            "the sandbox could not be set up",
        ] {
            assert!(text.contains(want), "{page}.1 lacks {want:?}");
        }
    }
}

/// The Kubernetes recipe's pod command (examples/k8s/run-task.sh), run
/// here for indexes 0–3 against the faux provider: four sessions in the
/// shared folder, and `stats --all` over it reports four runs with their
/// outcomes and costs.
#[test]
fn the_indexed_job_pod_command_runs_four_tasks_that_stats_all_reports() {
    let sb = Sandbox::new();
    let script = sb.root().join("script.jsonl");
    std::fs::write(
        &script,
        "{\"text\": \"done\", \"usage\": {\"input\": 1000, \"output\": 100}}\n",
    )
    .unwrap();
    let tasks = sb.root().join("tasks.txt");
    std::fs::write(
        &tasks,
        "fix the build\nadd a test\nit's a quote\nupdate docs\n",
    )
    .unwrap();
    let out = sb.root().join("sessions");
    std::fs::create_dir_all(&out).unwrap();
    let bin_dir = bin("pi-run").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for i in 0..4 {
        let o = std::process::Command::new(repo().join("examples/k8s/run-task.sh"))
            .env("JOB_COMPLETION_INDEX", i.to_string())
            .env("TASKS_FILE", &tasks)
            .env("SESSIONS_DIR", &out)
            .env(
                "PI_RUN_ARGS",
                format!("--provider faux --model {}", script.display()),
            )
            .env("PATH", &path)
            .env("PI_CODING_AGENT_DIR", sb.agent())
            .current_dir(sb.cwd())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        ok(&o);
        assert_eq!(jsonl(&o).last().unwrap()["type"], "run_end");
    }
    // A fifth index has no line: a usage error.
    let o = std::process::Command::new(repo().join("examples/k8s/run-task.sh"))
        .env("JOB_COMPLETION_INDEX", "4")
        .env("TASKS_FILE", &tasks)
        .env("SESSIONS_DIR", &out)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let ls = jsonl(&sb.session(&[
        "ls",
        "--session-dir",
        out.to_str().unwrap(),
        "--format",
        "jsonl",
    ]));
    let mut ids: Vec<&str> = ls.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, ["task-0", "task-1", "task-2", "task-3"]);
    let stats = jsonl(&sb.session(&[
        "stats",
        "--all",
        "--session-dir",
        out.to_str().unwrap(),
        "--by",
        "outcome",
        "--format",
        "jsonl",
    ]));
    let total = stats.last().unwrap();
    assert_eq!(total["runs"], 4, "{stats:?}");
    assert_eq!(total["outcomes"], json!({"completed": 4}));
    assert_eq!(total["totalTokens"], 4 * 1100);
    assert!(total["cost"].is_number(), "{total}");
    assert_eq!(stats[0]["group"], "completed");
}
