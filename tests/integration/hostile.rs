//! The binaries against a hostile world: tool calls with absurd numbers,
//! `@file` and stdin that never end or never open, SIGTERM / SIGHUP during
//! a tool, and stdout closed or full. Nothing may panic, hang, orphan a
//! process or report success for output that was never written.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

fn faux_script(sb: &Sandbox, lines: &[Value]) -> String {
    let p = sb.root().join("script.jsonl");
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

fn wait_for_file(p: &Path, limit: Duration) {
    let t = Instant::now();
    while !p.exists() {
        assert!(t.elapsed() < limit, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// The entries of the only session in the sandbox.
fn session_entries(sb: &Sandbox) -> Vec<Value> {
    let ls = jsonl(&sb.session(&["ls"]));
    assert_eq!(ls.len(), 1, "one session");
    let path = ls[0]["path"].as_str().unwrap().to_string();
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tool_results(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| {
            e["message"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[test]
fn absurd_tool_numbers_are_answered_not_panicked() {
    // From the wire, as a provider delivers them: numbers serde cannot
    // hold, NaN, and numbers no tool can use.
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_tools(&[
            ("bash", r#"{"command": "touch ran1", "timeout": 1e20}"#),
            ("bash", r#"{"command": "touch ran2", "timeout": -5}"#),
            ("bash", r#"{"command": "touch ran3", "timeout": 1e400}"#),
            ("bash", r#"{"command": "touch ran4", "timeout": NaN}"#),
            ("read", r#"{"path": "a.txt", "offset": 2, "limit": 1e300}"#),
            (
                "grep",
                r#"{"pattern": "b", "context": 1e20, "limit": 1e20}"#,
            ),
            ("ls", r#"{"limit": -1e308}"#),
        ])),
        Reply::Sse(sse_text("survived")),
    ]);
    server.configure(&sb.agent());
    std::fs::write(sb.cwd().join("a.txt"), "a\nb\nc\n").unwrap();
    let child = sb
        .cmd("pi-run")
        .args(["--tools", "read,bash,grep,ls", "-p", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_within(child, Duration::from_secs(60), "pi-run");
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert_eq!(ok(&out), "survived\n");
    let results = tool_results(&session_entries(&sb));
    assert_eq!(results.len(), 7, "every call has a result: {results:?}");
    assert_eq!(
        results[0],
        "Invalid timeout: maximum is 2147483.647 seconds"
    );
    assert_eq!(
        results[1],
        "Invalid timeout: must be a finite number of seconds"
    );
    assert!(
        results[2].starts_with("Invalid timeout: "),
        "{}",
        results[2]
    );
    assert!(
        // NaN is not JSON: never repaired, the call is refused as pi does.
        results[3].starts_with("Invalid arguments for tool \"bash\": Unexpected token 'N'"),
        "{}",
        results[3]
    );
    assert_eq!(results[4], "b\nc\n");
    assert_eq!(results[5], "a.txt-1- a\na.txt:2: b\na.txt-3- c");
    assert_eq!(results[6], "a.txt");
    for i in 1..=4 {
        assert!(!sb.cwd().join(format!("ran{i}")).exists(), "call {i} ran");
    }
}

#[test]
fn file_arguments_and_stdin_never_block_or_balloon() {
    let sb = Sandbox::new();
    let script = faux_script(&sb, &[json!({"text": "ok"})]);
    let fifo = sb.cwd().join("pipe");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let big = sb.cwd().join("big.txt");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(17 * 1024 * 1024).unwrap();
    drop(f);
    let cases: [(&str, &str); 3] = [
        ("@pipe", "it is a FIFO, not a regular file"),
        ("@/dev/zero", "it is a character device, not a regular file"),
        ("@big.txt", "it is 17.0MB, larger than the 16.0MB limit"),
    ];
    for (arg, want) in cases {
        let child = sb
            .cmd("pi-run")
            .args(["--provider", "faux", "--model", &script, "-p", arg, "hi"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_within(child, Duration::from_secs(20), arg);
        assert_eq!(out.status.code(), Some(2), "{arg}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("cannot read @file") && err.contains(want),
            "{arg}: {err}"
        );
    }
    // stdin that never ends
    let child = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script, "-p", "hi"])
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_within(child, Duration::from_secs(20), "stdin /dev/zero");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stdin: more than the 16.0MB limit"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn sigterm_and_sighup_kill_the_tool_group_and_save_the_run() {
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        let sb = Sandbox::new();
        let script = faux_script(
            &sb,
            &[
                json!({"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 60 & echo $! > bg.pid; echo $$ > sh.pid; touch started; wait"}}]}),
                json!({"text": "never"}),
            ],
        );
        let child = sb
            .cmd("pi-run")
            .args([
                "--provider",
                "faux",
                "--model",
                &script,
                "--mode",
                "json",
                "wait",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_file(&sb.cwd().join("started"), Duration::from_secs(20));
        let pid = |f: &str| -> u32 {
            std::fs::read_to_string(sb.cwd().join(f))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        let (bg, sh) = (pid("bg.pid"), pid("sh.pid"));
        assert!(alive(bg) && alive(sh));
        let st = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let out = wait_within(child, Duration::from_secs(20), signal);
        assert_eq!(out.status.code(), Some(code), "{signal}: {}", stderr(&out));
        // The event stream is complete: it ends settled, aborted, then
        // the run's outcome.
        let events = jsonl(&out);
        let n = events.len();
        assert_eq!(
            events[n - 2],
            json!({"type": "agent_settled", "aborted": true}),
            "{signal}"
        );
        assert_eq!(events[n - 1]["type"], "run_end", "{signal}");
        assert_eq!(events[n - 1]["stopReason"], "aborted", "{signal}");
        assert_eq!(events[n - 1]["exitCode"], code, "{signal}");
        // The whole group is gone: the shell and its background job.
        let t = Instant::now();
        while (alive(bg) || alive(sh)) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(bg), "{signal}: background job {bg} survived");
        assert!(!alive(sh), "{signal}: shell {sh} survived");
        // The run is saved: the call, its aborted result, then (as pi
        // 1.6.0 ends an aborted tool turn) one empty aborted assistant
        // message made without a request.
        let mut entries = session_entries(&sb);
        let outcome = entries.pop().unwrap();
        assert_eq!(outcome["customType"], "pi-run:run_end", "{signal}");
        let n = entries.len();
        let result = &entries[n - 2];
        assert_eq!(result["message"]["role"], "toolResult", "{signal}");
        assert_eq!(result["message"]["content"][0]["text"], "Command aborted");
        assert_eq!(result["message"]["isError"], true);
        let last = &entries[n - 1]["message"];
        assert_eq!(last["role"], "assistant", "{signal}");
        assert_eq!(last["stopReason"], "aborted");
        assert_eq!(last["content"], json!([]));
    }
}

#[test]
fn a_closed_or_full_stdout_stops_the_run() {
    let turns = [
        json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch t1"}}]}),
        json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch t2"}}]}),
        json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch t3"}}]}),
        json!({"text": "done"}),
    ];
    // A reader that goes away after the first line.
    let sb = Sandbox::new();
    let script = faux_script(&sb, &turns);
    let (reader, writer) = std::io::pipe().unwrap();
    let child = sb
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script,
            "--mode",
            "json",
            "go",
        ])
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::BufRead;
        let mut first = String::new();
        std::io::BufReader::new(reader)
            .read_line(&mut first)
            .unwrap();
        assert!(first.contains("\"type\":\"session\""), "{first}");
    } // the reader is closed here
    let out = wait_within(child, Duration::from_secs(30), "json | head -1");
    assert_eq!(out.status.code(), Some(141), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stopped: stdout was closed"),
        "{}",
        stderr(&out)
    );
    assert!(
        !sb.cwd().join("t2").exists() && !sb.cwd().join("t3").exists(),
        "no tools run for nobody"
    );
    // A full disk: json mode stops at the first event, text mode runs but
    // fails to deliver the answer; neither exits 0.
    for mode in ["json", "text"] {
        let sb = Sandbox::new();
        let script = faux_script(&sb, &turns);
        let out = sb
            .cmd("pi-run")
            .args([
                "--provider",
                "faux",
                "--model",
                &script,
                "--mode",
                mode,
                "go",
            ])
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{mode}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("cannot write to stdout: No space left on device"),
            "{mode}: {}",
            stderr(&out)
        );
        assert_eq!(sb.cwd().join("t1").exists(), mode == "text", "{mode}");
    }
}

/// Every binary, every kind of output: a closed pipe ends quietly (no
/// panic, no message), a full disk is an error with exit 1.
#[test]
fn no_binary_panics_on_a_closed_or_full_stdout() {
    let sb = Sandbox::with_fixtures();
    let some_session = sb.fixture_file("plain-160");
    let session = some_session.to_str().unwrap();
    let commands: Vec<(&str, Vec<&str>)> = vec![
        ("pi-session", vec!["--help"]),
        ("pi-session", vec!["--version"]),
        ("pi-session", vec!["--generate", "man"]),
        ("pi-session", vec!["ls", "--all"]),
        ("pi-session", vec!["ls", "--all", "--format", "text"]),
        ("pi-session", vec!["show", session]),
        ("pi-session", vec!["tree", session, "--format", "text"]),
        ("pi-session", vec!["context", session]),
        ("pi-session", vec!["export", session, "--format", "md"]),
        ("pi-session", vec!["search", "--all", "a"]),
        ("pi-session", vec!["stats", session]),
        ("pi-run", vec!["--help"]),
        ("pi-run", vec!["--list-models"]),
        ("pi-run", vec!["--generate", "complete-bash"]),
        ("pi-resources", vec!["--help"]),
        ("pi-resources", vec![]),
        ("pi-resources", vec!["--format", "text"]),
        ("pi-resources", vec!["trust", "show"]),
        ("pi-prompt", vec!["--help"]),
        ("pi-prompt", vec!["system"]),
        ("pi-prompt", vec!["system", "--format", "text"]),
    ];
    for (bin, args) in &commands {
        let what = format!("{bin} {}", args.join(" "));
        // closed pipe
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = sb
            .cmd(bin)
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{what} | closed: {err}");
        assert!(!err.contains("error"), "{what} | closed: {err}");
        assert_eq!(out.status.code(), Some(0), "{what} | closed: {err}");
        // full disk
        let out = sb
            .cmd(bin)
            .args(args)
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{what} > full: {err}");
        assert_eq!(out.status.code(), Some(1), "{what} > full: {err}");
        assert!(
            err.contains("cannot write to stdout: No space left on device"),
            "{what} > full: {err}"
        );
    }
}

/// Every configuration file the toolkit reads, given as a FIFO nobody
/// writes, as `/dev/zero` behind a symlink, or as a file over the 8 MiB
/// cap, is refused at once with one line naming it: exit 2 where a bad
/// file of that kind is an error (settings, models, auth, trust, the
/// subagent settings), 1 for `mcp-auth.json` as `mcp logout` reports it,
/// and a warning while the run goes on for `mcp.json`, as for any bad
/// `mcp.json`. Nothing may block on the FIFO or read the device forever.
#[test]
fn config_files_that_never_end_are_refused_at_once() {
    // (file, command, exit code, the line's prefix)
    let cases: [(&str, &str, i32, &str); 9] = [
        ("agent/settings.json", "run", 2, "pi-run: error: "),
        ("agent/models.json", "run", 2, "pi-run: error: "),
        ("agent/auth.json", "run", 2, "pi-run: error: "),
        ("agent/mcp.json", "run", 0, "pi-run: warning: "),
        (
            "agent/trust.json",
            "run-untrusted",
            2,
            "pi-run: error: Failed to read trust store ",
        ),
        ("agent/mcp-auth.json", "logout", 1, "pi-resources: error: "),
        (
            "agent/agents/settings.json",
            "agents",
            2,
            "pi-resources: error: ",
        ),
        ("cwd/.pi/settings.json", "run", 2, "pi-run: error: "),
        ("cwd/.pi/mcp.json", "run", 0, "pi-run: warning: "),
    ];
    let kinds = [
        ("fifo", "it is a FIFO, not a regular file"),
        ("zero", "it is a character device, not a regular file"),
        ("big", "it is 9.0MB, larger than the 8.0MB limit"),
    ];
    for (file, how, code, prefix) in cases {
        for (kind, why) in kinds {
            let what = format!("{file} as {kind}");
            let sb = Sandbox::new();
            let script = faux_script(&sb, &[json!({"text": "ok"})]);
            std::fs::create_dir_all(sb.cwd().join(".pi")).unwrap();
            std::fs::create_dir_all(sb.agent().join("agents")).unwrap();
            if how == "run-untrusted" {
                // Something to decide about, so trust.json is read.
                std::fs::write(sb.cwd().join(".pi/settings.json"), "{}").unwrap();
            }
            if how == "logout" {
                let mcp = json!({"mcpServers": {"h": {"url": "http://127.0.0.1:9/mcp"}}});
                std::fs::write(sb.agent().join("mcp.json"), mcp.to_string()).unwrap();
            }
            let path = sb.root().join(file);
            match kind {
                "fifo" => assert!(Command::new("mkfifo")
                    .arg(&path)
                    .status()
                    .unwrap()
                    .success()),
                "zero" => std::os::unix::fs::symlink("/dev/zero", &path).unwrap(),
                _ => std::fs::File::create(&path)
                    .unwrap()
                    .set_len(9 * 1024 * 1024)
                    .unwrap(),
            }
            let mut cmd = match how {
                "run" | "run-untrusted" => {
                    let mut c = sb.cmd("pi-run");
                    c.args(["--provider", "faux", "--model", &script]);
                    if how == "run" {
                        c.arg("-a");
                    }
                    c.args(["-p", "hi"]);
                    c
                }
                "logout" => {
                    let mut c = sb.cmd("pi-resources");
                    c.args(["mcp", "logout", "h"]);
                    c
                }
                _ => {
                    let mut c = sb.cmd("pi-resources");
                    c.arg("agents");
                    c
                }
            };
            let child = cmd
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let out = wait_within(child, Duration::from_secs(20), &what);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(code), "{what}: {err}");
            let line = format!("{prefix}{}: {why}", path.display());
            assert!(
                err.lines().any(|l| l == line),
                "{what}: want the line {line:?} in {err:?}"
            );
        }
    }
}
