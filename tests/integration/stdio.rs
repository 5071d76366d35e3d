//! `pi-run`'s standard streams under pressure: piped stdin that comes
//! slowly (kept, as pi 1.6.0 keeps it) or never (no hang), and in RPC mode
//! a command line without end (bounded memory), a stdout whose reader goes
//! away while a silent tool runs (noticed at once), an `abort` while an
//! extension handler hangs (immediate), and a command file (pi's EOF
//! behaviour side by side, and `--drain` running it to the end).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

fn faux_script(sb: &Sandbox, lines: &[Value]) -> String {
    let p = sb.root().join("script.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

/// `c` run as the last command of `sh -c "PRODUCER | c"`: the producer is
/// the program's sibling in a pipeline, as in a user's shell.
fn after_producer(c: &Command, producer: &str) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("{producer} | exec \"$0\" \"$@\""))
        .arg(c.get_program())
        .args(c.get_args())
        .env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    if let Some(d) = c.get_current_dir() {
        sh.current_dir(d);
    }
    sh
}

/// The text of the last user message of a chat-completions request body.
fn last_user_text(body: &Value) -> String {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let user = msgs.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &user["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn mock_bodies(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["body"].clone())
        .collect()
}

// ---------------------------------------------------------------------------
// Piped stdin for a prompt.

/// `(echo FIRST; sleep 3; echo LAST) | pi-run -p summarize`: pi 1.6.0
/// waits for the end of its input; so does pi-run (it used to give up
/// after 2 s and send only the prompt).
#[test]
fn slow_piped_input_is_read_to_its_end_as_pi_does() {
    let producer = "(echo FIRST; sleep 3; echo LAST)";
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("seen"))]);
    server.configure(&sb.agent());
    let ours = after_producer(sb.cmd("pi-run").args(["-p", "summarize"]), producer)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_within(ours, Duration::from_secs(30), "slow pipe");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("ignored"), "{}", stderr(&out));
    let req = server.requests.lock().unwrap()[0].clone();
    let ours_text = last_user_text(&req);
    assert_eq!(ours_text, "FIRST\nLASTsummarize");
    let Some(o) = Oracle::find("slow_piped_input_is_read_to_its_end_as_pi_does") else {
        return;
    };
    let pi_sb = Sandbox::new();
    let mock = MockLlm::start(&o, pi_sb.root(), &json!([{"text": "seen"}]));
    mock.configure(&pi_sb.agent());
    let mut pi = o.pi160(&pi_sb);
    pi.env("PI_TELEMETRY", "0").args(["-p", "summarize"]);
    let pi_out = after_producer(&pi, producer).output().unwrap();
    assert!(pi_out.status.success(), "{}", stderr(&pi_out));
    let bodies = mock_bodies(&mock.log);
    assert_eq!(last_user_text(&bodies[0]), ours_text, "pi's first prompt");
}

/// A producer that stays silent longer than the grace period (a build
/// printing nothing while it compiles) is still waited for: it is a
/// command of the pipeline, not pi-run's caller.
#[test]
fn a_silent_producer_in_the_pipeline_is_waited_for() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("seen"))]);
    server.configure(&sb.agent());
    let out = after_producer(
        sb.cmd("pi-run").args(["-p", "why?"]),
        "(sleep 4; echo 'error: late')",
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let req = server.requests.lock().unwrap()[0].clone();
    assert_eq!(last_user_text(&req), "error: latewhy?");
}

/// An open pipe nobody feeds (a CI runner's stdin, a calling program that
/// never writes or closes it) never hangs the run: after the grace period
/// it is ignored with one warning, with `CI=true` too.
#[test]
fn an_idle_open_pipe_held_by_the_caller_does_not_hang() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("answer"))]);
    server.configure(&sb.agent());
    let mut child = sb
        .cmd("pi-run")
        .env("CI", "true")
        .args(["-p", "hello"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // This test holds the write end open and never writes.
    let held = child.stdin.take();
    let t = Instant::now();
    let out = wait_within(child, Duration::from_secs(20), "idle pipe");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    drop(held);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "answer\n");
    assert!(
        stderr(&out).contains("stdin is an open pipe with no input after 2 s"),
        "{}",
        stderr(&out)
    );
    let req = server.requests.lock().unwrap()[0].clone();
    assert_eq!(last_user_text(&req), "hello");
}

// ---------------------------------------------------------------------------
// An RPC client on pipes.

struct Rpc {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Rpc {
    fn spawn(mut cmd: Command) -> Rpc {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn pi-run");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str(&line).unwrap_or_else(|_| json!({"NOT_JSON": line}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Rpc {
            child,
            stdin,
            rx,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, v: &Value) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(format!("{v}\n").as_bytes()).unwrap();
        s.flush().unwrap();
    }

    /// The first record (seen or to come, within `limit`) matching `pred`.
    fn wait_for(&mut self, what: &str, limit: Duration, pred: &dyn Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(v) = self.seen.iter().find(|v| pred(v)) {
                return v.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("no {what} within {limit:?}; got {:#?}", self.seen),
            }
        }
    }

    fn response(&mut self, id: &str) -> Value {
        self.wait_for(&format!("response {id}"), Duration::from_secs(30), &|v| {
            v["type"] == "response" && v["id"] == id
        })
    }

    /// Closes stdin, waits for the exit: code, every record, stderr.
    fn finish(mut self) -> (Option<i32>, Vec<Value>, String) {
        drop(self.stdin.take());
        let out = wait_within(self.child, Duration::from_secs(30), "rpc exit");
        while let Ok(v) = self.rx.recv_timeout(Duration::from_millis(300)) {
            self.seen.push(v);
        }
        (out.status.code(), self.seen, stderr(&out))
    }
}

fn rpc_faux(sb: &Sandbox, turns: &[Value]) -> Command {
    let script = faux_script(sb, turns);
    let mut c = sb.cmd("pi-run");
    c.args([
        "--mode",
        "rpc",
        "--no-session",
        "--provider",
        "faux",
        "--model",
        &script,
    ]);
    c
}

/// Peak resident memory of a live process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// 512 MB without a newline used to grow pi-run to 1 GB: a command line
/// is capped at 64 MiB, answered with one parse error, skipped up to its
/// newline, and the next command is served. Measured by the child's peak
/// resident memory, not by time.
#[test]
fn rpc_a_command_line_without_end_is_bounded() {
    let sb = Sandbox::new();
    let mut rpc = Rpc::spawn(rpc_faux(&sb, &[json!({"text": "never"})]));
    rpc.send(&json!({"id": "before", "type": "get_state"}));
    rpc.response("before");
    let baseline = peak_rss_kib(rpc.child.id());
    {
        let s = rpc.stdin.as_mut().unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..512 {
            s.write_all(&chunk).unwrap();
        }
        s.write_all(b"\n").unwrap();
    }
    rpc.send(&json!({"id": "after", "type": "get_state"}));
    let after = rpc.response("after");
    assert_eq!(after["success"], true);
    let peak = peak_rss_kib(rpc.child.id());
    assert!(
        peak < baseline + 200 * 1024,
        "peak RSS {peak} KiB (baseline {baseline} KiB) after 512 MB without a newline"
    );
    let (code, seen, err) = rpc.finish();
    assert_eq!(code, Some(0), "{err}");
    let parse: Vec<&Value> = seen.iter().filter(|v| v["command"] == "parse").collect();
    assert_eq!(parse.len(), 1, "one answer for the long line: {parse:?}");
    assert_eq!(parse[0]["success"], false);
    assert_eq!(
        parse[0]["error"],
        "Failed to parse command: line longer than 64 MiB; skipped up to its newline"
    );
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn wait_for_file(p: &Path, limit: Duration) {
    let t = Instant::now();
    while !p.exists() {
        assert!(t.elapsed() < limit, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pid_in(sb: &Sandbox, f: &str) -> u32 {
    std::fs::read_to_string(sb.cwd().join(f))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The client stops reading while a tool prints nothing: pi-run notices at
/// once (not at its next write, an hour later), kills the tool's process
/// group and exits 141 with one line on stderr — in RPC mode, and in JSON
/// mode the same way.
#[test]
fn stdout_closed_while_a_silent_tool_runs_stops_at_once() {
    for mode in ["rpc", "json"] {
        let sb = Sandbox::new();
        let script = faux_script(
            &sb,
            &[
                json!({"toolCalls": [{"name": "bash", "arguments": {"command": "sleep 300 & echo $! > bg.pid; echo $$ > sh.pid; touch started; wait"}}]}),
                json!({"text": "never"}),
            ],
        );
        let mut c = sb.cmd("pi-run");
        c.args([
            "--no-session",
            "--provider",
            "faux",
            "--model",
            &script,
            "--mode",
            mode,
        ]);
        if mode == "json" {
            c.arg("wait");
        }
        let stdin_kind = if mode == "rpc" {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = c
            .stdin(stdin_kind)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take();
        if let Some(stdin) = stdin.as_mut() {
            stdin
                .write_all(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"wait\"}\n")
                .unwrap();
            stdin.flush().unwrap();
        }
        {
            let mut reader = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            while !line.contains("\"tool_execution_start\"") {
                line.clear();
                assert!(
                    reader.read_line(&mut line).unwrap() > 0,
                    "{mode}: stream ended"
                );
            }
            wait_for_file(&sb.cwd().join("started"), Duration::from_secs(20));
        } // the read end is closed here; stdin stays open
        let (bg, sh) = (pid_in(&sb, "bg.pid"), pid_in(&sb, "sh.pid"));
        let t = Instant::now();
        let out = wait_within(child, Duration::from_secs(20), mode);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{mode}: {:?}",
            t.elapsed()
        );
        drop(stdin);
        assert_eq!(out.status.code(), Some(141), "{mode}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            "pi-run: stopped: stdout was closed\n",
            "{mode}"
        );
        let t = Instant::now();
        while (alive(bg) || alive(sh)) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(bg), "{mode}: background job {bg} survived");
        assert!(!alive(sh), "{mode}: shell {sh} survived");
    }
}

/// A process extension that never answers the event named in `HANG`
/// (touching `HANG_MARKER` when it arrives) and logs the type of every
/// record it gets to `HANG_LOG`.
const HANGING: &str = r#"#!/usr/bin/env python3
import json, os, sys
hang = os.environ["HANG"]
log = open(os.environ["HANG_LOG"], "a")
def send(r):
    sys.stdout.write(json.dumps(r) + "\n"); sys.stdout.flush()
hello = json.loads(sys.stdin.readline())
send({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": [hang]}]})
for line in sys.stdin:
    r = json.loads(line)
    log.write(r["type"] + ("/" + r["event"]["type"] if r["type"] == "event" else "") + "\n"); log.flush()
    if r["type"] == "event" and r["event"]["type"] == hang:
        open(os.environ["HANG_MARKER"], "w").close()
        continue
    if r["type"] == "event":
        send({"type": "result", "id": r["id"], "result": None})
"#;

fn python3() -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("python3").is_file()))
        .unwrap_or(false);
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("python3 is not installed");
        }
        eprintln!("SKIP: python3 is not installed");
    }
    found
}

fn write_exec(path: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// `abort` while an extension handler hangs is answered at once, whichever
/// event it hangs on (the handler timeout here is 60 s): the wait for the
/// handler ends, the extension is told (`cancel`), and a tool call whose
/// `tool_call` handler never answered does not run (fail closed).
#[test]
fn rpc_abort_while_an_extension_handler_hangs_is_immediate() {
    if !python3() {
        return;
    }
    for hang in ["tool_call", "before_agent_start", "context"] {
        let sb = Sandbox::new();
        let ext = write_exec(&sb.root().join("hang.py"), HANGING);
        let log = sb.root().join("ext.log");
        let marker = sb.root().join("hung");
        let mut cmd = rpc_faux(
            &sb,
            &[
                json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran"}}]}),
                json!({"text": "done"}),
            ],
        );
        cmd.env("HANG", hang)
            .env("HANG_LOG", &log)
            .env("HANG_MARKER", &marker)
            .args(["--extension-timeout", "60", "-e"])
            .arg(&ext);
        let mut rpc = Rpc::spawn(cmd);
        rpc.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
        rpc.response("p");
        wait_for_file(&marker, Duration::from_secs(20));
        let t = Instant::now();
        rpc.send(&json!({"id": "a", "type": "abort"}));
        let answer = rpc.wait_for("abort response", Duration::from_secs(20), &|v| {
            v["type"] == "response" && v["id"] == "a"
        });
        let took = t.elapsed();
        assert_eq!(answer["success"], true, "{hang}");
        assert!(took < Duration::from_secs(5), "{hang}: abort took {took:?}");
        let settled = rpc.wait_for("agent_settled", Duration::from_secs(5), &|v| {
            v["type"] == "agent_settled"
        });
        assert_eq!(settled["aborted"], true, "{hang}");
        let (code, seen, err) = rpc.finish();
        assert_eq!(code, Some(0), "{hang}: {err}");
        assert!(!sb.cwd().join("ran").exists(), "{hang}: the tool ran");
        if hang == "tool_call" {
            let end = seen
                .iter()
                .find(|v| v["type"] == "tool_execution_end")
                .expect("tool_execution_end");
            assert_eq!(end["isError"], true);
            assert_eq!(end["result"]["content"][0]["text"], "Operation aborted");
        }
        let got = std::fs::read_to_string(&log).unwrap();
        assert!(
            got.lines().any(|l| l == "cancel"),
            "{hang}: the extension is told: {got}"
        );
    }
}

// ---------------------------------------------------------------------------
// A command file.

fn command_file(sb: &Sandbox) -> PathBuf {
    let p = sb.root().join("commands.jsonl");
    let lines = [
        json!({"id": "1", "type": "prompt", "message": "first"}),
        json!({"id": "2", "type": "prompt", "message": "second", "streamingBehavior": "followUp"}),
        json!({"id": "3", "type": "get_state"}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p
}

fn records(out: &std::process::Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The texts of the assistant messages that ended.
fn answers(recs: &[Value]) -> Vec<String> {
    recs.iter()
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .filter_map(|v| v["message"]["content"][0]["text"].as_str())
        .map(str::to_string)
        .collect()
}

fn response<'a>(recs: &'a [Value], id: &str) -> Option<&'a Value> {
    recs.iter()
        .find(|v| v["type"] == "response" && v["id"] == id)
}

/// `pi-run --mode rpc < commands.jsonl`: EOF cuts the run short, as pi
/// 1.6.0's does (both exit 0 at once, the prompt answered `started`, no
/// answer from a model that would take 30 s; which later commands get
/// answered before the end is a race in both); `--drain` runs the file to
/// its end: both prompts answered by the model, every command answered,
/// exit 0.
#[test]
fn rpc_command_file_stops_at_eof_as_pi_and_drain_runs_it_to_the_end() {
    let run = |c: &mut Command, file: &Path| {
        let t = Instant::now();
        let out = c
            .stdin(std::fs::File::open(file).unwrap())
            .output()
            .unwrap();
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
        out
    };
    let oracle = Oracle::find("rpc_command_file_stops_at_eof_as_pi");
    let mut sides = vec![false];
    if oracle.is_some() {
        sides.push(true);
    }
    let mut got = Vec::new();
    for pi in sides {
        let sb = Sandbox::new();
        let server = ScriptServer::start(vec![Reply::Stall]);
        server.configure(&sb.agent());
        let file = command_file(&sb);
        let mut c = match (&oracle, pi) {
            (Some(o), true) => {
                let mut c = o.pi160(&sb);
                c.env("PI_TELEMETRY", "0");
                c
            }
            _ => sb.cmd("pi-run"),
        };
        c.args(["--mode", "rpc", "--no-session"]);
        let out = run(&mut c, &file);
        let recs = records(&out);
        got.push((
            out.status.code(),
            response(&recs, "1").map(|r| r["data"].clone()),
            answers(&recs),
        ));
    }
    let want = (
        Some(0),
        Some(json!({"disposition": "started"})),
        Vec::<String>::new(),
    );
    for g in &got {
        assert_eq!(g, &want, "ours, then pi's");
    }
    // --drain: the file runs to its end.
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_text("one")),
        Reply::Sse(sse_text("two")),
    ]);
    server.configure(&sb.agent());
    let file = command_file(&sb);
    let out = run(
        sb.cmd("pi-run")
            .args(["--mode", "rpc", "--no-session", "--drain"]),
        &file,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let recs = records(&out);
    assert_eq!(server.requests.lock().unwrap().len(), 2, "both prompts ran");
    for id in ["1", "2", "3"] {
        assert_eq!(response(&recs, id).unwrap()["success"], true, "{id}");
    }
    assert_eq!(answers(&recs), ["one", "two"]);
    // One run, or two when the follow-up came after the first ended.
    let settled: Vec<&Value> = recs
        .iter()
        .filter(|v| v["type"] == "agent_settled")
        .collect();
    assert!(!settled.is_empty());
    assert!(settled.iter().all(|v| v["aborted"] == false), "{settled:?}");
    // Only for RPC.
    let out = sb
        .cmd("pi-run")
        .args(["--drain", "-p", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--drain applies to --mode rpc only"),
        "{}",
        stderr(&out)
    );
}

/// A `bash` command in a file runs to its end under `--drain` (EOF used to
/// cancel it).
#[test]
fn rpc_drain_lets_a_running_bash_command_finish() {
    let sb = Sandbox::new();
    let file = sb.root().join("commands.jsonl");
    std::fs::write(
        &file,
        json!({"id": "b", "type": "bash", "command": "sleep 1; echo finished"}).to_string() + "\n",
    )
    .unwrap();
    let mut c = rpc_faux(&sb, &[json!({"text": "x"})]);
    c.arg("--drain");
    let out = c
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let recs = records(&out);
    let r = response(&recs, "b").expect("bash answered");
    assert_eq!(r["data"]["output"], "finished\n");
    assert_eq!(r["data"]["cancelled"], false);
}

/// `pi-prompt system` reads piped `pi-resources` records like pi-run reads
/// a piped prompt: an open pipe nobody feeds is ignored after the grace
/// period instead of hanging the pipeline step.
#[test]
fn pi_prompt_does_not_hang_on_an_idle_open_pipe() {
    let sb = Sandbox::new();
    let mut child = sb
        .cmd("pi-prompt")
        .env("CI", "true")
        .args(["system", "--format", "jsonl", "--no-mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let held = child.stdin.take();
    let t = Instant::now();
    let out = wait_within(child, Duration::from_secs(20), "idle pipe");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    drop(held);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(jsonl(&out).iter().any(|r| r["type"] == "section"));
}

/// `--system-from` is bounded like every outside input: a FIFO is refused
/// at once with a line naming it (exit 2), not waited on.
#[test]
fn system_from_a_fifo_is_refused_at_once() {
    let sb = Sandbox::new();
    let fifo = sb.cwd().join("prompt.fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let child = sb
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            "none.jsonl",
            "--system-from",
        ])
        .arg(&fifo)
        .args(["-p", "hi"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_within(child, Duration::from_secs(20), "--system-from FIFO");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("prompt.fifo"), "{}", stderr(&out));
}
