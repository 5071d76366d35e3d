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
    let last = es.iter().rfind(|e| e["type"] == "message").unwrap();
    assert_eq!(last["message"]["content"][0]["text"], "ok");
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
    let last = es.iter().rfind(|e| e["type"] == "message").unwrap();
    assert_eq!(last["message"]["content"][0]["text"], "after the branch");
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

#[test]
fn concurrent_runs_with_one_new_session_id_share_one_session() {
    // pi 1.6.0 makes one file per run here (eight files with id X, and a
    // later `--session-id X` sees one of them); pi-run claims the id in the
    // folder, so every run's prompt lands in the one session X.
    let sb = Sandbox::new();
    let script = faux_script(&sb, &vec![json!({"text": "ok"}); 20]);
    let children: Vec<_> = (0..8)
        .map(|i| {
            sb.cmd("pi-run")
                .args(["--provider", "faux", "--model", &script])
                .args(["--session-id", "nightly-42", "-p", &format!("prompt {i}")])
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
    let sessions = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    assert_eq!(sessions.len(), 1, "one session: {sessions:#?}");
    assert_eq!(sessions[0]["id"], "nightly-42");
    let file = PathBuf::from(sessions[0]["path"].as_str().unwrap());
    let mut prompts: Vec<String> = entries(&file)
        .into_iter()
        .filter(|e| e["message"]["role"] == "user")
        .map(|e| {
            e["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    prompts.sort();
    let want: Vec<String> = (0..8).map(|i| format!("prompt {i}")).collect();
    assert_eq!(prompts, want, "every prompt in the one session");
    assert_linear(&file);
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["id"], "nightly-42");
}

/// A session file in the sandbox with these entry lines after the header.
fn session_file(sb: &Sandbox, name: &str, header: &str, lines: &[&str]) -> PathBuf {
    let p = sb.root().join(name);
    let mut text = format!("{header}\n");
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_million_problems_cost_a_few_warning_lines() {
    let sb = Sandbox::new();
    let mut lines: Vec<&str> = vec![USER];
    lines.extend(std::iter::repeat_n("not json", 3000));
    lines.extend(std::iter::repeat_n("{}", 3000));
    lines.push(ASSISTANT);
    let p = session_file(&sb, "bad.jsonl", HEADER, &lines);
    let f = p.to_str().unwrap();
    let dir = sb.root().join("store/--p--");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        &p,
        dir.join(format!("2026-01-01T00-00-00-000Z_{SID}.jsonl")),
    )
    .unwrap();
    let store = sb.root().join("store");
    let mut outs = vec![
        ("show", sb.session(&["show", f, "--format", "jsonl"])),
        ("stats", sb.session(&["stats", f, "--format", "jsonl"])),
        ("search", sb.session(&["search", "hello", "--session", f])),
        (
            "ls",
            sb.session(&["ls", "--all", "--session-dir", store.to_str().unwrap()]),
        ),
    ];
    let script = faux_script(&sb, &[json!({"text": "ok"}), json!({"text": "ok"})]);
    outs.push((
        "pi-run",
        sb.cmd("pi-run")
            .args([
                "--provider",
                "faux",
                "--model",
                &script,
                "--session",
                f,
                "-p",
                "x",
            ])
            .output()
            .unwrap(),
    ));
    for (what, out) in outs {
        assert!(out.status.success(), "{what}: {}", stderr(&out));
        let err = stderr(&out);
        let n = err.lines().count();
        assert!((2..=22).contains(&n), "{what}: {n} warning lines:\n{err}");
        assert!(
            err.contains("5980 more problem(s) not shown (only the first 20 are)"),
            "{what}: {err}"
        );
    }
    // The `{}` lines are not entries: show prints only the two real ones.
    let shown = jsonl(&sb.session(&["show", f, "--format", "jsonl"]));
    assert!(shown.len() >= 3 && shown.iter().all(|e| e["type"].is_string()));
}

#[test]
fn version_one_ids_are_the_same_on_every_load_and_usable_in_edits() {
    let sb = Sandbox::new();
    let v1 = session_file(
        &sb,
        "v1.jsonl",
        r#"{"type":"session","id":"v1-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
        &[
            r#"{"type":"message","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"first","timestamp":1}}"#,
            r#"{"type":"message","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"second","timestamp":2}}"#,
        ],
    );
    let f = v1.to_str().unwrap();
    let ids = |out: &Output| -> Vec<String> {
        jsonl(out)[1..]
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    let first = ids(&sb.session(&["show", f, "--format", "jsonl"]));
    assert_eq!(first, ids(&sb.session(&["show", f, "--format", "jsonl"])));
    let out = sb.session(&["label", f, &first[0], "start"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("migrated version 1 → 3"),
        "{}",
        stderr(&out)
    );
    assert!(sb.root().join("v1.jsonl.v1.bak").exists());
    let tree = jsonl(&sb.session(&["tree", f, "--format", "jsonl"]));
    let labelled = tree.iter().find(|n| n["id"] == first[0].as_str()).unwrap();
    assert_eq!(labelled["label"], "start");
    let after = ids(&sb.session(&["show", f, "--format", "jsonl"]));
    assert_eq!(
        &after[..2],
        &first[..],
        "the ids show printed are on disk now"
    );
}

#[test]
fn a_parent_cycle_is_reported_and_its_entries_shown() {
    let sb = Sandbox::new();
    let p = session_file(
        &sb,
        "cycle.jsonl",
        HEADER,
        &[
            r#"{"type":"message","id":"c1","parentId":"c2","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}"#,
            r#"{"type":"message","id":"c2","parentId":"c1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"two","timestamp":2}}"#,
        ],
    );
    let f = p.to_str().unwrap();
    let out = sb.session(&["tree", f, "--format", "jsonl"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ids: Vec<Value> = jsonl(&out).iter().map(|n| n["id"].clone()).collect();
    assert_eq!(ids, [json!("c1"), json!("c2")]);
    assert!(
        stderr(&out).contains("entries c1, c2 form a parentId cycle"),
        "{}",
        stderr(&out)
    );
    let text = sb.session(&["tree", f, "--format", "text"]);
    assert_eq!(stdout(&text).lines().count(), 2, "{}", stdout(&text));
}

#[test]
fn odd_header_versions_get_the_same_verdict_from_every_command() {
    let cases = [
        (r#""3""#, r#"invalid session version "3""#),
        ("1e300", "unsupported session version 1e+300"),
        ("-1", "invalid session version -1"),
        ("2.5", "invalid session version 2.5"),
    ];
    for (v, verdict) in cases {
        let sb = Sandbox::new();
        let header = HEADER.replace("\"version\":3", &format!("\"version\":{v}"));
        let dir = sb.agent().join("sessions/--p--");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("2026-01-01T00-00-00-000Z_{SID}.jsonl"));
        std::fs::write(&p, format!("{header}\n{USER}\n")).unwrap();
        let before = std::fs::read(&p).unwrap();
        let f = p.to_str().unwrap();
        let script = faux_script(&sb, &[json!({"text": "ok"})]);
        let outs = [
            ("show", sb.session(&["show", f])),
            ("label", sb.session(&["label", f, "e1", "x"])),
            ("ls", sb.session(&["ls", "--all"])),
            (
                "pi-run",
                sb.cmd("pi-run")
                    .args([
                        "--provider",
                        "faux",
                        "--model",
                        &script,
                        "--session",
                        f,
                        "-p",
                        "x",
                    ])
                    .output()
                    .unwrap(),
            ),
        ];
        for (what, out) in outs {
            assert!(!out.status.success(), "{what} {v}: accepted");
            assert!(
                stderr(&out).contains(verdict),
                "{what} {v}: {}",
                stderr(&out)
            );
        }
        assert_eq!(std::fs::read(&p).unwrap(), before, "{v}: file untouched");
    }
}

#[test]
fn paths_that_are_not_session_files_say_what_they_are() {
    let sb = Sandbox::new();
    let root = sb.root();
    std::fs::create_dir_all(root.join("dir.jsonl")).unwrap();
    mkfifo(&root.join("fifo.jsonl"));
    std::os::unix::fs::symlink(root.join("loop-b.jsonl"), root.join("loop-a.jsonl")).unwrap();
    std::os::unix::fs::symlink(root.join("loop-a.jsonl"), root.join("loop-b.jsonl")).unwrap();
    std::fs::write(root.join("plain"), "x").unwrap();
    let cases = [
        ("dir.jsonl", "is a directory"),
        ("fifo.jsonl", "is a FIFO (named pipe), not a session file"),
        ("loop-a.jsonl", "is a symbolic link loop"),
        ("plain/s.jsonl", "a parent of it is not a directory"),
    ];
    let script = faux_script(&sb, &[json!({"text": "ok"})]);
    for (name, what) in cases {
        let p = root.join(name);
        let f = p.to_str().unwrap();
        let mut show = sb.cmd("pi-session");
        show.args(["show", f]);
        let mut run = sb.cmd("pi-run");
        run.args([
            "--provider",
            "faux",
            "--model",
            &script,
            "--session",
            f,
            "-p",
            "x",
        ]);
        for (prog, cmd) in [("pi-session", show), ("pi-run", run)] {
            let out = run_within(cmd, 20);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{prog} {name}: {}",
                stderr(&out)
            );
            let err = stderr(&out);
            assert!(err.contains(what), "{prog} {name}: {err}");
            assert!(
                !err.contains("no such file or session id"),
                "{prog} {name}: {err}"
            );
        }
    }
}

#[test]
fn max_turns_zero_is_a_usage_error() {
    let sb = Sandbox::new();
    let script = faux_script(&sb, &[json!({"text": "ok"})]);
    let out = sb
        .cmd("pi-run")
        .args([
            "--provider",
            "faux",
            "--model",
            &script,
            "--max-turns",
            "0",
            "-p",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--max-turns"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn invalid_utf8_inside_an_entry_keeps_the_entry_as_pi_does() {
    let sb = Sandbox::new();
    let p = sb.root().join("utf8.jsonl");
    let mut bytes = format!("{HEADER}\n").into_bytes();
    bytes.extend_from_slice(
        br#"{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"caf"#,
    );
    bytes.extend_from_slice(b"\xff\xfe");
    bytes.extend_from_slice(b"\xc3 ok\",\"timestamp\":1767225601000}}\n");
    bytes.extend_from_slice(format!("{ASSISTANT}\n").as_bytes());
    std::fs::write(&p, &bytes).unwrap();
    let f = p.to_str().unwrap();
    let out = sb.session(&["context", f, "--format", "jsonl"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("invalid UTF-8 replaced by U+FFFD"),
        "{}",
        stderr(&out)
    );
    let ours: Vec<Value> = jsonl(&out)[1..]
        .iter()
        .map(|r| r["message"].clone())
        .collect();
    assert_eq!(ours.len(), 2, "the entry is kept");
    assert_eq!(ours[0]["content"], "caf\u{fffd}\u{fffd}\u{fffd} ok");
    let ls = jsonl(&sb.session(&["ls", "--session-dir", sb.root().to_str().unwrap()]));
    assert_eq!(ls[0]["firstMessage"], "caf\u{fffd}\u{fffd}\u{fffd} ok");
    let Some(o) = Oracle::find("invalid_utf8_inside_an_entry_keeps_the_entry_as_pi_does") else {
        return;
    };
    let live: Value = serde_json::from_slice(&o.node("sdk-context.mjs", &[f]).stdout).unwrap();
    assert_eq!(Value::Array(ours), live["messages"]);
}

#[test]
fn session_text_sent_to_a_terminal_carries_no_escape_sequences() {
    // `script` gives the command a terminal; without it there is nothing
    // to check here (the cleaning itself is unit-tested in out.rs).
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIP session_text_sent_to_a_terminal_carries_no_escape_sequences: no `script` (util-linux)");
        return;
    }
    let sb = Sandbox::new();
    let evil = r#"{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi\u001b]0;pwned\u0007\u001b[2J\u009b31m there","timestamp":1767225601000}}"#;
    let p = session_file(&sb, "evil.jsonl", HEADER, &[evil, ASSISTANT]);
    let f = p.to_str().unwrap();
    for args in [
        vec!["context", f, "--format", "text"],
        vec!["export", f, "--format", "md"],
        vec!["show", f, "--format", "text"],
    ] {
        let line = std::iter::once(bin("pi-session").display().to_string())
            .chain(args.iter().map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        let out = sb
            .cmd("pi-session")
            .args::<[&str; 0], &str>([])
            .output()
            .map(|_| ())
            .and_then(|_| {
                let mut c = Command::new("script");
                c.args(["-qec", &line, "/dev/null"])
                    .env("PI_CODING_AGENT_DIR", sb.agent())
                    .env("HOME", sb.root().join("home"))
                    .current_dir(sb.cwd())
                    .stdin(Stdio::null());
                c.output()
            })
            .unwrap();
        let text = stdout(&out);
        assert!(text.contains("hi"), "{args:?}: {text}");
        assert!(!text.contains('\u{1b}'), "{args:?} sent ESC: {text:?}");
        assert!(
            !text.contains('\u{9b}') && !text.contains('\u{7}'),
            "{args:?}: {text:?}"
        );
        assert!(text.contains("␛]0;pwned␇"), "{args:?} shows them: {text:?}");
    }
    // Into a pipe the export stays verbatim (it is a document).
    let out = sb.session(&["export", f, "--format", "md"]);
    assert!(stdout(&out).contains("\u{1b}]0;pwned"));
}
