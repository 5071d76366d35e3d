//! The session store under hostile conditions: FIFOs and other non-files
//! in the sessions folders, several processes writing one session at once,
//! degenerate files, odd header versions and paths.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

const SID: &str = "aaaa1111-0000-4000-8000-000000000001";
const HEADER: &str = r#"{"type":"session","version":3,"id":"aaaa1111-0000-4000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;
const USER: &str = r#"{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1767225601000}}"#;
const ASSISTANT: &str = r#"{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"openai-completions","provider":"mock","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1767225602000}}"#;

/// Runs a command, killing it (and failing) if it is still running after
/// `secs`: a hang must fail the test, not stall the suite.
#[track_caller]
fn run_within(mut cmd: Command, secs: u64) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if t.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{cmd:?} still running after {secs} s (killed); stderr: {}",
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo")
        .arg(p)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", p.display());
}

/// A project folder of the sandbox's store with one real session in it.
fn store_with_session(sb: &Sandbox) -> PathBuf {
    let dir = sb.agent().join("sessions/--p--");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("2026-01-01T00-00-00-000Z_{SID}.jsonl"));
    std::fs::write(&file, format!("{HEADER}\n{USER}\n{ASSISTANT}\n")).unwrap();
    file
}

fn faux_script(sb: &Sandbox, lines: &[Value]) -> String {
    let p = sb.root().join("script.jsonl");
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

/// The entries of a session file (header left out).
fn entries(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Asserts the entries form one chain: each one's parent is the entry
/// before it in the file (no branch point anywhere).
#[track_caller]
fn assert_linear(path: &Path) {
    let es = entries(path);
    let mut prev = Value::Null;
    for (i, e) in es.iter().enumerate() {
        assert_eq!(
            e["parentId"],
            prev,
            "entry {i} ({}, {}) hangs off {} instead of the entry before it; file:\n{}",
            e["type"],
            e["id"],
            e["parentId"],
            std::fs::read_to_string(path).unwrap()
        );
        prev = e["id"].clone();
    }
}

#[test]
fn fifo_named_like_a_session_is_skipped_with_a_warning() {
    let sb = Sandbox::new();
    let real = store_with_session(&sb);
    // A FIFO whose name also matches the id prefix, one in the top folder
    // (seen with --session-dir), and one in the cwd's project folder.
    let dir = real.parent().unwrap();
    let fifo = dir.join("2026-01-02T00-00-00-000Z_aaaa1111-ffff-4000-8000-000000000009.jsonl");
    mkfifo(&fifo);
    mkfifo(&sb.agent().join("sessions/top.jsonl"));
    let cwd_dir = sb
        .agent()
        .join("sessions")
        .join(pi_lib::paths::encode_cwd(&sb.cwd().display().to_string()));
    std::fs::create_dir_all(&cwd_dir).unwrap();
    mkfifo(&cwd_dir.join("2026-01-03T00-00-00-000Z_bbbb2222-0000-4000-8000-000000000002.jsonl"));
    let sessions = sb.agent().join("sessions");
    let sessions = sessions.to_str().unwrap();
    let expect_warned = |out: &Output, what: &str| {
        assert!(
            stderr(out).contains("skipped: is a FIFO (named pipe), not a session file"),
            "{what}: {}",
            stderr(out)
        );
    };
    let cmd = |args: &[&str]| {
        let mut c = sb.cmd("pi-session");
        c.args(args);
        c
    };
    let out = run_within(cmd(&["ls", "--all", "--format", "jsonl"]), 20);
    assert_eq!(jsonl(&out).len(), 1, "{}", stderr(&out));
    expect_warned(&out, "ls --all");
    let out = run_within(
        cmd(&[
            "ls",
            "--all",
            "--session-dir",
            sessions,
            "--format",
            "jsonl",
        ]),
        20,
    );
    assert_eq!(jsonl(&out).len(), 1, "{}", stderr(&out));
    expect_warned(&out, "ls --all --session-dir");
    let out = run_within(cmd(&["ls", "--format", "jsonl"]), 20);
    expect_warned(&out, "ls (this cwd)");
    let out = run_within(cmd(&["search", "--all", "hello", "--format", "jsonl"]), 20);
    assert_eq!(jsonl(&out).len(), 1, "{}", stderr(&out));
    expect_warned(&out, "search --all");
    for sub in ["show", "tree", "stats"] {
        let out = run_within(cmd(&[sub, "aaaa1111", "--format", "jsonl"]), 20);
        assert!(out.status.success(), "{sub}: {}", stderr(&out));
        expect_warned(&out, sub);
    }
    // The FIFO itself, by path: an error that says what it is.
    let out = run_within(cmd(&["show", fifo.to_str().unwrap()]), 20);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is a FIFO (named pipe), not a session file"),
        "{}",
        stderr(&out)
    );
    // pi-run: --session PREFIX, and -c in a folder holding only a FIFO.
    let script = faux_script(&sb, &[json!({"text": "ok"}), json!({"text": "ok"})]);
    let mut run = sb.cmd("pi-run");
    run.args(["--provider", "faux", "--model", &script]).args([
        "--session",
        "aaaa1111",
        "-p",
        "more",
    ]);
    let out = run_within(run, 30);
    assert!(out.status.success(), "{}", stderr(&out));
    expect_warned(&out, "pi-run --session PREFIX");
    let es = entries(&real);
    assert_eq!(es[0]["id"], "e1", "the real session was continued");
    assert_eq!(es.last().unwrap()["message"]["content"][0]["text"], "ok");
    let mut run = sb.cmd("pi-run");
    run.args(["--provider", "faux", "--model", &script, "-c", "-p", "new"]);
    let out = run_within(run, 30);
    assert!(out.status.success(), "{}", stderr(&out));
    expect_warned(&out, "pi-run -c");
}

#[test]
fn parallel_labels_make_one_linear_chain() {
    let sb = Sandbox::new();
    let file = store_with_session(&sb);
    let f = file.to_str().unwrap();
    let children: Vec<_> = (0..20)
        .map(|i| {
            sb.cmd("pi-session")
                .args(["label", f, "e1", &format!("label {i}")])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(entries(&file).len(), 22);
    assert_linear(&file);
}

#[test]
fn edits_while_pi_run_writes_land_on_the_live_branch() {
    // The model's tool call names the session and labels it mid-run, as a
    // second terminal would: pi-run holds its own copy meanwhile.
    let sb = Sandbox::new();
    let file = sb.root().join("live.jsonl");
    let ps = bin("pi-session");
    let f = file.display().to_string();
    let edit = format!(
        "{ps} name {f} renamed && {ps} label {f} $({ps} show {f} --format jsonl | grep -o '\"id\":\"[0-9a-f]*\"' | sed -n 2p | cut -d'\"' -f4) mid-run",
        ps = ps.display()
    );
    let script = faux_script(
        &sb,
        &[
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": edit}}]}),
            json!({"text": "final answer"}),
        ],
    );
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script])
        .args(["--session", &f, "-p", "go"])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "final answer\n");
    let types: Vec<String> = entries(&file)
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert!(
        types.contains(&"session_info".to_string()) && types.contains(&"label".to_string()),
        "{types:?}"
    );
    assert_linear(&file);
    // The final answer is on the active branch (it is the leaf's context).
    let ctx = jsonl(&sb.session(&["context", &f, "--format", "jsonl"]));
    assert_eq!(
        ctx.last().unwrap()["message"]["content"][0]["text"],
        "final answer"
    );
}

#[test]
fn a_branch_made_during_a_run_is_where_the_run_goes_on() {
    let sb = Sandbox::new();
    let file = sb.root().join("live.jsonl");
    let ps = bin("pi-session");
    let f = file.display().to_string();
    // Move the leaf back to the first message while the tool runs.
    let edit = format!(
        "{ps} branch {f} --to $(grep -o '\"type\":\"message\",\"id\":\"[0-9a-f]*\"' {f} | head -1 | cut -d'\"' -f8)",
        ps = ps.display()
    );
    let script = faux_script(
        &sb,
        &[
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": edit}}]}),
            json!({"text": "after the branch"}),
        ],
    );
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script])
        .args(["--session", &f, "-p", "go"])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "after the branch\n");
    let es = entries(&file);
    let pos = es
        .iter()
        .position(|e| e["customType"] == "pi-session:branch")
        .expect("branch entry written");
    // The run's next entry hangs off the branch entry, not off its own stale leaf.
    assert_eq!(es[pos + 1]["parentId"], es[pos]["id"], "{es:#?}");
    assert_eq!(es[pos + 1]["message"]["role"], "toolResult");
    let first_message = es.iter().find(|e| e["type"] == "message").unwrap();
    assert_eq!(es[pos]["parentId"], first_message["id"]);
    assert_eq!(
        es.last().unwrap()["message"]["content"][0]["text"],
        "after the branch"
    );
}

#[test]
fn concurrent_runs_creating_one_new_session_all_continue_it() {
    let sb = Sandbox::new();
    let file = sb.root().join("new.jsonl");
    let f = file.display().to_string();
    let script = faux_script(&sb, &vec![json!({"text": "ok"}); 40]);
    let children: Vec<_> = (0..20)
        .map(|i| {
            sb.cmd("pi-run")
                .args(["--provider", "faux", "--model", &script])
                .args(["--session", &f, "-p", &format!("prompt {i}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), "ok\n");
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches(r#""type":"session""#).count(), 1, "one header");
    let users: Vec<Value> = entries(&file)
        .into_iter()
        .filter(|e| e["message"]["role"] == "user")
        .collect();
    assert_eq!(users.len(), 20, "no prompt lost");
    assert_linear(&file);
    let leftovers: Vec<_> = std::fs::read_dir(sb.root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
