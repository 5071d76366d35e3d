//! Bad input: each case gets a one-line error naming what and where, the
//! documented exit code, and leaves every file untouched.

use std::path::Path;

use crate::common::*;

const HEADER: &str = r#"{"type":"session","version":3,"id":"aaaa1111-0000-4000-8000-000000000001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;
const USER: &str = r#"{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1767225601000}}"#;
const ASSISTANT: &str = r#"{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"openai-completions","provider":"mock","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1767225602000}}"#;

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Snapshot of every file under a folder, to prove nothing changed.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for e in walk(dir) {
        out.push((e.display().to_string(), std::fs::read(&e).unwrap()));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            v.extend(walk(&e.path()));
        } else {
            v.push(e.path());
        }
    }
    v
}

#[track_caller]
fn one_line_error(out: &std::process::Output, code: i32, must_contain: &[&str]) {
    assert_eq!(out.status.code(), Some(code), "stderr: {}", stderr(out));
    let err = stderr(out);
    // One error line; an optional `hint:` line may follow.
    let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with("hint: ")).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err:?}");
    assert!(lines[0].starts_with("pi-session: error: "), "{err:?}");
    for m in must_contain {
        assert!(lines[0].contains(m), "{err:?} should mention {m:?}");
    }
    assert!(out.stdout.is_empty(), "nothing on stdout: {}", stdout(out));
}

#[test]
fn missing_file() {
    let sb = Sandbox::new();
    let before = snapshot(sb.root());
    let out = sb.session(&["show", "/nonexistent/s.jsonl"]);
    one_line_error(&out, 2, &["/nonexistent/s.jsonl", "no such file"]);
    let out = sb.session(&["context", "deadbeef"]);
    one_line_error(&out, 2, &["deadbeef", "no such file or session id"]);
    assert_eq!(before, snapshot(sb.root()));
}

#[test]
fn directory_without_sessions() {
    let sb = Sandbox::new();
    let empty = sb.root().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "not a session").unwrap();
    let before = snapshot(sb.root());
    // Listing it: ran, found nothing → 1, and says where it looked.
    let out = sb.session(&["ls", "--session-dir", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        format!("pi-session: no sessions in {}", empty.display())
    );
    // Naming it as a session: an input error.
    let out = sb.session(&["show", empty.to_str().unwrap()]);
    one_line_error(&out, 2, &[empty.to_str().unwrap(), "is a directory"]);
    // A --session-dir that does not exist.
    let out = sb.session(&["ls", "--session-dir", "/nonexistent/dir"]);
    one_line_error(&out, 2, &["/nonexistent/dir", "no such directory"]);
    // The cwd has no sessions yet.
    let out = sb.session(&["ls"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no sessions in"), "{}", stderr(&out));
    assert_eq!(before, snapshot(sb.root()));
}

#[test]
fn truncated_last_line_is_reported_and_skipped() {
    let sb = Sandbox::new();
    let torn = &ASSISTANT[..ASSISTANT.len() / 2];
    let p = write(sb.root(), "s.jsonl", &format!("{HEADER}\n{USER}\n{torn}"));
    let before = snapshot(sb.root());
    let out = sb.session(&["show", p.to_str().unwrap(), "--format", "jsonl"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(jsonl(&out).len(), 2, "header and the one whole entry");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{}:3: truncated last line", p.display())),
        "{err}"
    );
    // ls still lists it, warning about the line.
    let out = sb.session(&[
        "ls",
        "--session-dir",
        sb.root().to_str().unwrap(),
        "--format",
        "jsonl",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(jsonl(&out)[0]["messageCount"], 1);
    assert!(
        stderr(&out).contains(":3: damaged line skipped"),
        "{}",
        stderr(&out)
    );
    assert_eq!(before, snapshot(sb.root()));
}

#[test]
fn invalid_json_line_is_reported_and_skipped() {
    let sb = Sandbox::new();
    let p = write(
        sb.root(),
        "s.jsonl",
        &format!("{HEADER}\n{USER}\n{{oops not json\n{ASSISTANT}\n"),
    );
    let before = snapshot(sb.root());
    let out = sb.session(&["context", p.to_str().unwrap(), "--format", "jsonl"]);
    assert_eq!(out.status.code(), Some(0));
    let recs = jsonl(&out);
    assert_eq!(recs.len(), 3, "context header + 2 messages");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{}:3: invalid JSON", p.display())),
        "{err}"
    );
    assert_eq!(before, snapshot(sb.root()));
}

#[test]
fn dangling_parent_is_reported() {
    let sb = Sandbox::new();
    let orphan = ASSISTANT.replace(r#""parentId":"e1""#, r#""parentId":"zzzz9999""#);
    let p = write(
        sb.root(),
        "s.jsonl",
        &format!("{HEADER}\n{USER}\n{orphan}\n"),
    );
    let out = sb.session(&["tree", p.to_str().unwrap(), "--format", "jsonl"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains(":3: entry e2 has parentId zzzz9999"),
        "{}",
        stderr(&out)
    );
    assert_eq!(jsonl(&out).len(), 2);
}

#[test]
fn unknown_version() {
    let sb = Sandbox::new();
    let p = write(
        sb.root(),
        "s.jsonl",
        &format!(
            "{}\n{USER}\n",
            HEADER.replace("\"version\":3", "\"version\":4")
        ),
    );
    let before = snapshot(sb.root());
    for cmd in ["show", "context", "tree", "stats"] {
        let out = sb.session(&[cmd, p.to_str().unwrap()]);
        one_line_error(
            &out,
            2,
            &[
                &format!("{}:1", p.display()),
                "unsupported session version 4",
            ],
        );
    }
    let out = sb.session(&["name", p.to_str().unwrap(), "x"]);
    one_line_error(&out, 2, &["unsupported session version 4"]);
    assert_eq!(before, snapshot(sb.root()));
}

#[test]
fn not_a_session_file() {
    let sb = Sandbox::new();
    let p = write(sb.root(), "x.jsonl", "{\"type\":\"message\"}\n");
    let out = sb.session(&["show", p.to_str().unwrap()]);
    one_line_error(
        &out,
        2,
        &[&format!("{}:1", p.display()), "not a pi session file"],
    );
    let p = write(sb.root(), "e.jsonl", "");
    let out = sb.session(&["show", p.to_str().unwrap()]);
    one_line_error(&out, 2, &["e.jsonl", "empty"]);
}

#[test]
fn ambiguous_id_prefix() {
    let sb = Sandbox::new();
    let dir = sb.agent().join("sessions/--p--");
    std::fs::create_dir_all(&dir).unwrap();
    let h2 = HEADER.replace("000000000001", "000000000002");
    write(&dir, "a.jsonl", &format!("{HEADER}\n{USER}\n"));
    write(&dir, "b.jsonl", &format!("{h2}\n{USER}\n"));
    let before = snapshot(sb.root());
    let out = sb.session(&["show", "aaaa1111"]);
    one_line_error(
        &out,
        2,
        &[
            "aaaa1111 is ambiguous",
            "000000000001",
            "000000000002",
            "a.jsonl",
            "b.jsonl",
        ],
    );
    let out = sb.session(&["label", "aaaa", "e1", "x"]);
    one_line_error(&out, 2, &["ambiguous"]);
    // A unique prefix works.
    let out = sb.session(&[
        "show",
        "aaaa1111-0000-4000-8000-000000000002",
        "--format",
        "jsonl",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(before, snapshot(sb.root()));
}

#[test]
fn select_tool_rejects_unknown_tools() {
    let sb = Sandbox::new();
    let p = write(
        sb.root(),
        "s.jsonl",
        &format!("{HEADER}\n{USER}\n{ASSISTANT}\n"),
    );
    let before = snapshot(sb.root());
    let out = sb.session(&[
        "select-tool",
        p.to_str().unwrap(),
        "--tools",
        "read,nonexistent",
    ]);
    one_line_error(
        &out,
        2,
        &[p.to_str().unwrap(), "unknown tool \"nonexistent\""],
    );
    assert_eq!(before, snapshot(sb.root()));
    // Subagent sessions refuse any change.
    let sub = r#"{"type":"custom","customType":"pi-web:subagent","data":{"profile":"explore"},"id":"s1","parentId":"e2","timestamp":"2026-01-01T00:00:03.000Z"}"#;
    let p2 = write(
        sb.root(),
        "sub.jsonl",
        &format!("{HEADER}\n{USER}\n{ASSISTANT}\n{sub}\n"),
    );
    let before = snapshot(sb.root());
    let out = sb.session(&["select-tool", p2.to_str().unwrap(), "--chat-only"]);
    one_line_error(&out, 2, &["tool selection is fixed by its profile"]);
    assert_eq!(before, snapshot(sb.root()));
}

#[test]
fn edits_refuse_missing_entries_without_writing() {
    let sb = Sandbox::new();
    let p = write(
        sb.root(),
        "s.jsonl",
        &format!("{HEADER}\n{USER}\n{ASSISTANT}\n"),
    );
    let before = snapshot(sb.root());
    let ps = p.to_str().unwrap();
    one_line_error(
        &sb.session(&["label", ps, "nope", "x"]),
        2,
        &["no entry with id nope"],
    );
    one_line_error(
        &sb.session(&["branch", ps, "--to", "nope"]),
        2,
        &["no entry with id nope"],
    );
    one_line_error(
        &sb.session(&["fork", ps, "--at", "nope"]),
        2,
        &["no entry with id nope"],
    );
    one_line_error(
        &sb.session(&["context", ps, "--leaf", "nope"]),
        2,
        &["no entry with id nope"],
    );
    one_line_error(
        &sb.session(&["name", ps, "   "]),
        2,
        &["name cannot be empty"],
    );
    assert_eq!(before, snapshot(sb.root()));
}
