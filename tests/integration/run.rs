//! `pi-run` end to end against loopback servers and the faux provider:
//! modes, sessions, retries, failures, bad input, interruption.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

fn faux_script(sb: &Sandbox, lines: &[Value]) -> String {
    let p = sb.root().join("script.jsonl");
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

fn types(out: &std::process::Output) -> Vec<String> {
    jsonl(out)
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn faux_demo_text_and_json_modes() {
    let sb = Sandbox::new();
    let script = faux_script(
        &sb,
        &[
            json!({"thinking": "plan", "toolCalls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "hi\n"}}]}),
            json!({"text": "Wrote hello.txt.\nAll done."}),
        ],
    );
    let out = sb
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script,
            "-p",
            "make hello.txt",
        ])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "Wrote hello.txt.\nAll done.\n");
    assert_eq!(
        std::fs::read_to_string(sb.cwd().join("hello.txt")).unwrap(),
        "hi\n"
    );
    // The session landed in pi's layout and pi-session reads it.
    let ls = jsonl(&sb.session(&["ls"]));
    assert_eq!(ls.len(), 1);
    assert_eq!(ls[0]["firstMessage"], "make hello.txt");
    // JSON mode: the header first, agent_settled last.
    let sb2 = Sandbox::new();
    let script = faux_script(&sb2, &[json!({"text": "ok"})]);
    let out = sb2
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script,
            "--mode",
            "json",
            "hi",
        ])
        .output()
        .unwrap();
    ok(&out);
    let t = types(&out);
    assert_eq!(t.first().unwrap(), "session");
    assert_eq!(t.last().unwrap(), "run_end");
    assert_eq!(t[t.len() - 2], "agent_settled");
    assert!(t.contains(&"agent_end".to_string()));
}

#[test]
fn sessions_continue_no_session_and_session_dir() {
    let sb = Sandbox::new();
    let script = faux_script(&sb, &[json!({"text": "first"}), json!({"text": "second"})]);
    ok(&sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script, "-p", "one"])
        .output()
        .unwrap());
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script, "-c", "-p", "two"])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "second\n");
    let ls = jsonl(&sb.session(&["ls"]));
    assert_eq!(ls.len(), 1, "continued, not a new session");
    let ctx = jsonl(&sb.session(&["context", ls[0]["id"].as_str().unwrap()]));
    let roles: Vec<&str> = ctx[1..]
        .iter()
        .map(|r| r["message"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant"],
        "one system message: nothing changed"
    );
    // --no-session writes nothing.
    let sb2 = Sandbox::new();
    let script2 = faux_script(&sb2, &[json!({"text": "x"})]);
    ok(&sb2
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script2,
            "--no-session",
            "-p",
            "hi",
        ])
        .output()
        .unwrap());
    assert!(std::fs::read_dir(sb2.agent().join("sessions"))
        .unwrap()
        .next()
        .is_none());
    // --session-dir puts the file there.
    let dir = sb2.root().join("elsewhere");
    ok(&sb2
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script2,
            "--session-dir",
            dir.to_str().unwrap(),
            "-p",
            "hi",
        ])
        .output()
        .unwrap());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn piped_stdin_and_file_arguments() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("seen"))]);
    server.configure(&sb.agent());
    std::fs::write(sb.cwd().join("a.txt"), "line1\n").unwrap();
    let mut child = sb
        .cmd("pi-run")
        .args(["-p", "@a.txt", "what is this?"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"piped text\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(ok(&out), "seen\n");
    let req = server.requests.lock().unwrap()[0].clone();
    let user = &req["messages"][1]["content"][0]["text"];
    let expected = format!(
        "piped text<file name=\"{}\">\nline1\n\n</file>\nwhat is this?",
        sb.cwd().join("a.txt").display()
    );
    assert_eq!(user, &Value::String(expected));
}

#[test]
fn retries_429_then_succeeds() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![
        Reply::Status(429, r#"{"error":{"message":"rate limited"}}"#.into()),
        Reply::Sse(sse_text("after retry")),
    ]);
    server.configure(&sb.agent());
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "hi"])
        .output()
        .unwrap();
    ok(&out);
    let evs = jsonl(&out);
    let start = evs
        .iter()
        .find(|e| e["type"] == "auto_retry_start")
        .expect("auto_retry_start");
    assert_eq!(start["attempt"], 1);
    assert!(start["errorMessage"].as_str().unwrap().contains("429"));
    let end = evs
        .iter()
        .find(|e| e["type"] == "auto_retry_end")
        .expect("auto_retry_end");
    assert_eq!(end["success"], true);
    assert_eq!(server.requests.lock().unwrap().len(), 2);
}

#[test]
fn http_500_gives_up_with_exit_1() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Status(
        500,
        r#"{"error":{"message":"upstream exploded"}}"#.into(),
    )]);
    server.configure(&sb.agent());
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("500"), "{}", stderr(&out));
    assert_eq!(
        server.requests.lock().unwrap().len(),
        4,
        "1 try + 3 retries"
    );
    let evs = jsonl(&out);
    let end = evs.iter().rfind(|e| e["type"] == "auto_retry_end").unwrap();
    assert_eq!(end["success"], false);
    assert_eq!(evs[evs.len() - 2]["type"], "agent_settled");
    let run_end = evs.last().unwrap();
    assert_eq!(run_end["type"], "run_end");
    assert_eq!(
        (&run_end["exitCode"], &run_end["stopReason"]),
        (&json!(1), &json!("error"))
    );
}

#[test]
fn dropped_connection_and_garbage_end_with_clear_errors() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Drop(
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par".into(),
    )]);
    server.configure(&sb.agent());
    let out = sb.cmd("pi-run").args(["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("pi-run: error: "),
        "{}",
        stderr(&out)
    );
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Garbage("<html>Bad gateway</html>".into())]);
    server.configure(&sb.agent());
    let out = sb.cmd("pi-run").args(["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not an event stream"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn stalled_server_times_out() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Stall]);
    server.configure(&sb.agent());
    let t = Instant::now();
    let out = sb
        .cmd("pi-run")
        .args(["--idle-timeout", "1", "-p", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
}

#[test]
fn unknown_thinking_level_is_a_warning_as_in_pi() {
    // pi 1.6.0: `Warning: Invalid thinking level "bogus". Valid values: …`,
    // the run goes on at the default level (exit 0).
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    let out = sb
        .cmd("pi-run")
        .args(["--thinking", "bogus", "-p", "hi"])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "ok\n");
    assert!(
        stderr(&out).contains("warning: Invalid thinking level \"bogus\". Valid values: off, minimal, low, medium, high, xhigh, max"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn settings_http_idle_timeout_sets_the_stall_limit() {
    // pi 1.6.0's `httpIdleTimeoutMs`; `--idle-timeout` still wins.
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Stall, Reply::Stall]);
    server.configure(&sb.agent());
    std::fs::write(
        sb.agent().join("settings.json"),
        r#"{"defaultProvider":"mock","defaultModel":"mock-model","httpIdleTimeoutMs":700,"retry":{"enabled":false}}"#,
    )
    .unwrap();
    let out = sb.cmd("pi-run").args(["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no data received for 700ms"),
        "{}",
        stderr(&out)
    );
    let out = sb
        .cmd("pi-run")
        .args(["--idle-timeout", "1", "-p", "hi"])
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("no data received for 1s"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn invalid_tool_arguments_go_back_to_the_model() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_tools(&[
            ("read", r#"{"offset": "x"}"#),
            ("read", r#"{"path": "#),
            ("nosuch", "{}"),
        ])),
        Reply::Sse(sse_text("recovered")),
    ]);
    server.configure(&sb.agent());
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "go"])
        .output()
        .unwrap();
    ok(&out);
    let ends: Vec<Value> = jsonl(&out)
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 3);
    assert!(ends.iter().all(|e| e["isError"] == true));
    let first = ends[0]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(first.starts_with("Validation failed for tool \"read\":\n  - path: missing\n  - offset: expected number, got string"), "{first}");
    // Arguments cut short are not repaired: pi 1.6.0's answer.
    assert_eq!(
        ends[1]["result"]["content"][0]["text"],
        "Invalid arguments for tool \"read\": Unexpected end of JSON input\n\nReceived arguments:\n{\"path\": "
    );
    assert_eq!(
        ends[2]["result"]["content"][0]["text"],
        "Tool nosuch not found"
    );
    // The second request carries the three error results.
    let reqs = server.requests.lock().unwrap();
    let tool_msgs = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(tool_msgs, 3);
}

#[test]
fn max_turns_stops_with_exit_3() {
    let sb = Sandbox::new();
    let script = faux_script(
        &sb,
        &[
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": "true"}}]}),
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": "true"}}]}),
            json!({"text": "never reached"}),
        ],
    );
    let out = sb
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script,
            "--max-turns",
            "1",
            "-p",
            "loop",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("--max-turns"), "{}", stderr(&out));
}

#[test]
fn bad_input_is_a_clear_error_with_exit_2() {
    let sb = Sandbox::new();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--provider", "nosuchprovider", "--model", "x", "-p", "hi"],
            "nosuchprovider",
        ),
        (
            vec!["--model", "no-such-model-xyz", "-p", "hi"],
            "no-such-model-xyz",
        ),
        (
            vec!["--model", "anthropic/claude-sonnet-4-5", "-p", "hi"],
            "No API key found for anthropic",
        ),
        // (An unknown `--thinking` level is a warning, as in pi:
        // `unknown_thinking_level_is_a_warning_as_in_pi`.)
        (
            vec![
                "--model",
                "anthropic/claude-sonnet-4-5",
                "--api-key",
                "k",
                "-p",
                "@missing.txt",
            ],
            "missing.txt",
        ),
        (
            vec!["--model", "anthropic/claude-sonnet-4-5", "--api-key", "k"],
            "no prompt given",
        ),
    ];
    for (args, needle) in cases {
        let out = sb
            .cmd("pi-run")
            .args(&args)
            .env_remove("ANTHROPIC_API_KEY")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.starts_with("pi-run: error: ") && err.contains(needle),
            "{args:?}: {err}"
        );
    }
    // Malformed models.json names the file, line and column.
    std::fs::write(
        sb.agent().join("models.json"),
        "{\n  \"providers\": {\n    oops\n  }\n}\n",
    )
    .unwrap();
    let out = sb
        .cmd("pi-run")
        .args(["--model", "x", "-p", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("models.json:3:"), "{err}");
    // Nothing was written anywhere.
    assert!(std::fs::read_dir(sb.agent().join("sessions"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn sigint_aborts_and_exits_130() {
    // During a stalled request.
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Stall]);
    server.configure(&sb.agent());
    let child = sb
        .cmd("pi-run")
        .args(["-p", "hi"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the request is in flight (the handler exists by then).
    let t = Instant::now();
    while server.requests.lock().unwrap().is_empty() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let ls = jsonl(&sb.session(&["ls"]));
    let ctx = jsonl(&sb.session(&["show", ls[0]["path"].as_str().unwrap()]));
    let last = ctx.iter().rfind(|e| e.get("message").is_some()).unwrap();
    assert_eq!(
        last["message"]["stopReason"], "aborted",
        "the partial message is saved as aborted"
    );
    // During a long tool: the process group is killed.
    let sb = Sandbox::new();
    let script = faux_script(
        &sb,
        &[
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch started; sleep 30; echo late > late.txt"}}]}),
        ],
    );
    let t = Instant::now();
    let child = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script, "-p", "wait"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the command is running.
    while !sb.cwd().join("started").exists() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        t.elapsed() < Duration::from_secs(25),
        "ended well before sleep 30"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!sb.cwd().join("late.txt").exists());
}

#[test]
fn json_mode_exits_1_on_auth_error() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Status(
        401,
        r#"{"error":{"message":"invalid api key"}}"#.into(),
    )]);
    server.configure(&sb.agent());
    let out = sb
        .cmd("pi-run")
        .args(["--mode", "json", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let evs = jsonl(&out);
    assert_eq!(evs[evs.len() - 2]["type"], "agent_settled");
    assert_eq!(evs.last().unwrap()["stopReason"], "error");
    assert_eq!(
        server.requests.lock().unwrap().len(),
        1,
        "401 is not retried"
    );
}

#[test]
fn fork_and_list_models() {
    let sb = Sandbox::with_fixtures();
    let source = sb.fixture_file("tools-160");
    // faux plays the turn after the assistant messages already in context (3).
    let script = faux_script(
        &sb,
        &[
            json!({"text": "1"}),
            json!({"text": "2"}),
            json!({"text": "3"}),
            json!({"text": "forked answer"}),
        ],
    );
    let out = sb
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script,
            "--fork",
            source.to_str().unwrap(),
            "-p",
            "go on",
        ])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "forked answer\n");
    let ls = jsonl(&sb.session(&["ls"]));
    assert_eq!(ls.len(), 1, "the fork lives in this directory's folder");
    assert_eq!(
        ls[0]["parentSession"],
        Value::String(source.canonicalize().unwrap().display().to_string())
    );
    assert_eq!(
        ls[0]["firstMessage"],
        "What is in notes.txt? Then run echo hi."
    );
    // The source is untouched.
    let original = sb.fixture_text("tools-160").into_bytes();
    assert_eq!(std::fs::read(&source).unwrap(), original);
    // --list-models filters pi's catalogue.
    let out = sb
        .cmd("pi-run")
        .args(["--list-models", "sonnet"])
        .env("ANTHROPIC_API_KEY", "x")
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(
        text.lines().count() > 1 && text.contains("anthropic") && text.contains("sonnet"),
        "{text}"
    );
}

/// `-c` continues the session whose file was modified last (pi's rule,
/// checked with a probe), not the one created last.
#[test]
fn continue_picks_the_most_recently_modified_file() {
    let sb = Sandbox::new();
    let script = faux_script(&sb, &[json!({"text": "a"}), json!({"text": "b"})]);
    ok(&sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script, "-p", "first"])
        .output()
        .unwrap());
    std::thread::sleep(Duration::from_millis(20));
    ok(&sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script, "-p", "second"])
        .output()
        .unwrap());
    let ls = jsonl(&sb.session(&["ls", "--sort", "created"]));
    let older = ls.iter().find(|s| s["firstMessage"] == "first").unwrap()["path"]
        .as_str()
        .unwrap()
        .to_string();
    let f = std::fs::File::options().append(true).open(&older).unwrap();
    f.set_modified(std::time::SystemTime::now() + Duration::from_secs(3600))
        .unwrap();
    drop(f);
    ok(&sb
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script,
            "-c",
            "-p",
            "third",
        ])
        .output()
        .unwrap());
    let ctx = jsonl(&sb.session(&["context", &older]));
    let users = ctx
        .iter()
        .filter(|r| r["message"]["role"] == "user")
        .count();
    assert_eq!(users, 2, "the older file, modified last, was continued");
}
