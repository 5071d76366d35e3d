//! `pi-session export --format html` as a person meets it: the page opened
//! in a real headless Chromium (no script errors, the branch tree and the
//! tool folds work when clicked, nothing from the session runs as script),
//! compared with pi 1.6.0's own export of the same session, and written to
//! a file rather than dumped when the output is a terminal.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::browser::{artifact_dir, chromium, Browser};
use crate::common::*;
use crate::session_ux::on_pty;

/// A session with two branches from the model change: the first has a
/// thinking answer with two tool calls (one failing) and a labelled
/// Markdown answer, the second (the current one) a short exchange. The
/// user's text, the model's text and a tool's output all try to inject
/// script.
fn branched_session(dir: &Path) -> PathBuf {
    let usage = |input: u64, output: u64, read: u64, cost: f64| {
        json!({"input": input, "output": output, "cacheRead": read, "cacheWrite": 0,
               "totalTokens": input + output + read,
               "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}})
    };
    let msg = |id: &str, parent: Option<&str>, n: u64, message: Value| {
        json!({"type": "message", "id": id, "parentId": parent,
               "timestamp": format!("2026-12-01T10:00:{n:02}.000Z"), "message": message})
    };
    let assistant = |content: Value, u: Value, stop: &str| {
        json!({"role": "assistant", "content": content, "api": "openai-completions",
               "provider": "mock", "model": "mock-model", "usage": u, "stopReason": stop, "timestamp": 1})
    };
    let entries = vec![
        json!({"type": "session", "version": 3, "id": "0190aaaa-0000-7000-8000-000000000001",
               "timestamp": "2026-12-01T10:00:00.000Z", "cwd": dir.display().to_string()}),
        json!({"type": "model_change", "id": "m1", "parentId": null,
               "timestamp": "2026-12-01T10:00:00.000Z", "provider": "mock", "modelId": "mock-model"}),
        msg(
            "u1",
            Some("m1"),
            1,
            json!({"role": "user", "timestamp": 1,
            "content": "Look at notes.txt <script>window.__pwned='user'</script> <img src=x onerror=\"window.__pwned='img'\">"}),
        ),
        msg(
            "a1",
            Some("u1"),
            2,
            assistant(
                json!([
                    {"type": "thinking", "thinking": "I should read the notes first."},
                    {"type": "text", "text": "Reading **notes.txt** now. [run](javascript:window.__pwned='link') <iframe src=\"javascript:window.__pwned='frame'\"></iframe>"},
                    {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "notes.txt"}},
                    {"type": "toolCall", "id": "call_2", "name": "bash", "arguments": {"command": "cat missing.txt"}}
                ]),
                usage(1000, 50, 0, 0.003),
                "toolUse",
            ),
        ),
        msg(
            "r1",
            Some("a1"),
            3,
            json!({"role": "toolResult", "toolCallId": "call_1", "toolName": "read",
            "content": [{"type": "text", "text": "hello from notes\n</pre><script>window.__pwned='tool'</script>"}],
            "isError": false, "timestamp": 3}),
        ),
        msg(
            "r2",
            Some("r1"),
            4,
            json!({"role": "toolResult", "toolCallId": "call_2", "toolName": "bash",
            "content": [{"type": "text", "text": "cat: missing.txt: No such file or directory"}],
            "isError": true, "timestamp": 4}),
        ),
        msg(
            "a2",
            Some("r2"),
            5,
            assistant(
                json!([
                    {"type": "text", "text": "## Findings\n\n- the notes say `hello`\n- the other file is missing\n\n| file | state |\n|---|---|\n| notes.txt | read |"}
                ]),
                usage(1200, 80, 512, 0.004),
                "stop",
            ),
        ),
        json!({"type": "label", "id": "l1", "parentId": "a2", "timestamp": "2026-12-01T10:00:06.000Z",
               "targetId": "a2", "label": "findings"}),
        msg(
            "u2",
            Some("m1"),
            7,
            json!({"role": "user", "content": "A different question", "timestamp": 7}),
        ),
        msg(
            "a3",
            Some("u2"),
            8,
            assistant(
                json!([{"type": "text", "text": "A different *answer*."}]),
                usage(300, 10, 0, 0.001),
                "stop",
            ),
        ),
    ];
    let file = dir.join("branched.jsonl");
    let text: String = entries.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file
}

/// Ids of the entry sections on show.
fn shown(b: &mut Browser) -> Vec<String> {
    let v = b.eval("Array.from(document.querySelectorAll('#entries > section')).filter(s => !s.hidden).map(s => s.dataset.id)");
    serde_json::from_value(v).unwrap()
}

fn visible(b: &mut Browser, selector: &str) -> bool {
    let sel = serde_json::to_string(selector).unwrap();
    b.eval(&format!(
        "(() => {{ const e = document.querySelector({sel}); return !!e && e.checkVisibility(); }})()"
    )) == Value::Bool(true)
}

fn export(sb: &Sandbox, file: &Path, out: &Path) {
    ok(&sb.session(&[
        "export",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]));
}

/// The page in a real browser: it runs without script errors, opens on the
/// current branch, a click in the tree shows another branch, a click on a
/// tool call unfolds it with its result, the totals are shown, and nothing
/// the session says runs as script. Screenshots are kept under target/tmp.
#[test]
fn html_export_in_a_browser() {
    let Some(exe) = chromium("html_export_in_a_browser") else {
        return;
    };
    let sb = Sandbox::new();
    let file = branched_session(&sb.cwd());
    let page = sb.root().join("page.html");
    export(&sb, &file, &page);

    let mut b = Browser::launch(&exe, 1280, 900);
    b.open(&page);
    assert_eq!(
        b.eval("document.documentElement.dataset.ready"),
        "1",
        "the page's script ran"
    );
    assert_eq!(b.errors(), Vec::<String>::new(), "script or console errors");

    // The current branch, with the other branch in the tree.
    assert_eq!(shown(&mut b), ["m1", "u2", "a3"]);
    let tree = b
        .eval("document.getElementById('tree').innerText")
        .as_str()
        .unwrap()
        .to_string();
    for text in [
        "Look at notes.txt",
        "A different question",
        "[read notes.txt]",
        "findings",
    ] {
        assert!(tree.contains(text), "tree lacks {text:?}:\n{tree}");
    }
    let header = b
        .eval("document.querySelector('header').innerText")
        .as_str()
        .unwrap()
        .to_string();
    assert!(header.contains("↑2.5k ↓140 R512"), "{header}");
    assert!(header.contains("$0.0080"), "{header}");
    assert!(
        header.contains("Tool calls\t2") || header.contains("Tool calls\n2"),
        "{header}"
    );
    let dir = artifact_dir("session-export");
    let shot = dir.join("current-branch.png");
    b.screenshot(&shot);
    println!("screenshot: {}", shot.display());

    // A click on the other branch's answer shows that branch.
    b.click("#tree li[data-id='a2'] a");
    assert_eq!(shown(&mut b), ["m1", "u1", "a1", "r1", "r2", "a2", "l1"]);
    assert!(visible(&mut b, "#e-a2 h2"), "the Markdown heading is shown");
    assert!(
        visible(&mut b, "#e-a2 table"),
        "the Markdown table is shown"
    );
    assert!(visible(&mut b, "#e-a2 .label"), "the label is shown");
    assert!(!visible(&mut b, "#e-a3"), "the other branch is hidden");

    // Tool calls are folded: a click unfolds the call with its result.
    assert!(!visible(&mut b, "#c-a1-0 pre.out"), "folded at first");
    b.click("#c-a1-0 > summary");
    assert_eq!(b.eval("document.getElementById('c-a1-0').open"), true);
    assert!(
        visible(&mut b, "#c-a1-0 pre.out"),
        "the result shows when unfolded"
    );
    let call = b
        .eval("document.getElementById('c-a1-0').innerText")
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        call.contains("notes.txt") && call.contains("hello from notes"),
        "{call}"
    );
    assert!(
        call.contains("</pre><script>"),
        "the tool's output is shown as text: {call}"
    );
    assert_eq!(
        b.eval("document.getElementById('c-a1-1').className"),
        "tool error"
    );
    // The failed call's entry in the tree opens its fold.
    b.click("#tree li[data-id='r2'] a");
    assert_eq!(b.eval("document.getElementById('c-a1-1').open"), true);

    // Back to the current branch through the tree.
    b.click("#tree li[data-id='a3'] a");
    assert_eq!(shown(&mut b), ["m1", "u2", "a3"]);

    // Nothing injected ran; the links to script were dropped.
    b.click("#tree li[data-id='a1'] a");
    b.click("#e-a1 .md a");
    assert_eq!(b.eval("window.__pwned === undefined"), true);
    assert_eq!(b.eval("document.scripts.length"), 1);
    assert_eq!(
        b.eval("document.querySelectorAll('iframe, img[src=x]').length"),
        0
    );
    b.click("#c-a1-0 > summary");
    let shot = dir.join("other-branch.png");
    b.screenshot(&shot);
    println!("screenshot: {}", shot.display());
    assert_eq!(b.errors(), Vec::<String>::new(), "script or console errors");

    // A link to an entry opens the page on its branch.
    b.open_url("about:blank");
    b.open_url(&format!("file://{}#e-a2", page.display()));
    assert_eq!(shown(&mut b), ["m1", "u1", "a1", "r1", "r2", "a2", "l1"]);
    assert_eq!(b.errors(), Vec::<String>::new(), "script or console errors");
}

/// The same session exported by pi 1.6.0 (`pi --export`) and by
/// `pi-session export`, both opened in the browser: what pi's page shows of
/// the conversation and its token totals, ours shows too.
#[test]
fn html_export_shows_what_pis_does() {
    let Some(exe) = chromium("html_export_shows_what_pis_does") else {
        return;
    };
    let Some(o) = Oracle::find("html_export_shows_what_pis_does") else {
        return;
    };
    let sb = Sandbox::with_fixtures();
    let file = sb.fixture_file("tools-160");
    let ours = sb.root().join("ours.html");
    export(&sb, &file, &ours);
    let theirs = sb.root().join("pi.html");
    let out = o
        .pi160(&sb)
        .arg("--export")
        .arg(&file)
        .arg(&theirs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let mut b = Browser::launch(&exe, 1280, 900);
    b.open(&theirs);
    let pi_text = b
        .eval("document.body.innerText")
        .as_str()
        .unwrap()
        .to_string();
    b.open(&ours);
    assert_eq!(b.errors(), Vec::<String>::new());
    b.click("#open-tools");
    let our_text = b
        .eval("document.body.innerText")
        .as_str()
        .unwrap()
        .to_string();
    let shot = artifact_dir("session-export").join("tools-160.png");
    b.screenshot(&shot);
    println!("screenshot: {}", shot.display());
    for fact in [
        "What is in notes.txt? Then run echo hi.",
        "The user wants the notes file. I will read it.",
        "Let me read the file.",
        "notes.txt",
        "hello from notes",
        "echo hi",
        "↑2.3k ↓50 R512",
        "mock/mock-model",
    ] {
        assert!(
            pi_text.contains(fact),
            "pi's page shows {fact:?}:\n{pi_text}"
        );
        assert!(our_text.contains(fact), "ours lacks {fact:?}:\n{our_text}");
    }
    // pi renders `echo hi` in the answer as code; so do we.
    assert_eq!(
        b.eval("Array.from(document.querySelectorAll('.md code')).some(c => c.textContent === 'echo hi')"),
        true
    );
}

/// To a terminal, `export` without `-o` writes the page to a file named
/// after the session and prints its path (Markdown is still shown); to a
/// pipe it still writes the page to stdout.
#[test]
fn session_export_to_a_terminal_writes_a_file() {
    let sb = Sandbox::new();
    let file = branched_session(&sb.root().join("home"));
    let mut cmd = sb.cmd("pi-session");
    cmd.args(["export", file.to_str().unwrap()]);
    let shown = on_pty(cmd, 120);
    let want = std::fs::canonicalize(sb.cwd())
        .unwrap()
        .join("pi-session-branched.html");
    assert_eq!(shown.trim(), want.display().to_string(), "{shown}");
    let page = std::fs::read_to_string(&want).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page:.200}");

    // Markdown is text: the terminal shows it.
    let mut cmd = sb.cmd("pi-session");
    cmd.args(["export", file.to_str().unwrap(), "--format", "md"]);
    let shown = on_pty(cmd, 120);
    assert!(shown.starts_with("# Session 0190aaaa"), "{shown}");

    std::fs::remove_file(&want).unwrap();
    let out = sb.session(&["export", file.to_str().unwrap()]);
    assert!(
        stdout(&out).starts_with("<!DOCTYPE html>"),
        "{}",
        stderr(&out)
    );
    assert!(!want.exists(), "a pipe gets the page, no file");
}
