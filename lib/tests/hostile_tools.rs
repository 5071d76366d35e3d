//! The built-in tools against hostile calls a model can make: devices,
//! FIFOs and huge files for the file tools (none may block, balloon or
//! ignore an abort), and absurd numbers (none may panic). pi 1.6.0's answers
//! to the numbers are compared in `tools_vs_pi.rs`; here pi itself hangs
//! (read on a FIFO or /dev/zero), so the result is ours.

use std::path::Path;
use std::time::{Duration, Instant};

use pi_lib::tools::{builtin, ToolContext, ToolOutput};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

fn ctx(cwd: &Path, cancel: &CancellationToken) -> ToolContext {
    ToolContext {
        tool_call_id: String::new(),
        caller: None,
        sandbox: Default::default(),
        host: None,
        env: Vec::new(),
        cwd: cwd.to_path_buf(),
        cancel: cancel.clone(),
        auto_resize_images: true,
    }
}

/// Runs a tool, failing the test if it takes longer than `limit`.
async fn run(tool: &str, args: Value, cwd: &Path, cancel: &CancellationToken) -> ToolOutput {
    let t = builtin(tool).unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        t.execute(args.clone(), ctx(cwd, cancel), Box::new(|_| {})),
    )
    .await
    .unwrap_or_else(|_| panic!("{tool} {args} did not return within 20 s"))
}

fn text(out: &ToolOutput) -> String {
    serde_json::to_value(&out.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn file_tools_refuse_fifos_and_devices() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    mkfifo(&cwd.join("pipe"));
    let cancel = CancellationToken::new();
    for path in ["pipe", "/dev/zero", "/dev/urandom"] {
        let out = run("read", json!({ "path": path }), cwd, &cancel).await;
        assert!(out.is_error, "read {path}: {}", text(&out));
        let t = text(&out);
        assert!(
            t.contains("not a regular file") && t.contains("Use bash"),
            "read {path}: {t}"
        );
    }
    let t = text(&run("read", json!({"path": "pipe"}), cwd, &cancel).await);
    assert_eq!(
        t,
        format!(
            "Cannot read {}: it is a FIFO, not a regular file. Use bash to read from devices, pipes or sockets.",
            cwd.join("pipe").display()
        )
    );
    let out = run(
        "edit",
        json!({"path": "pipe", "edits": [{"oldText": "a", "newText": "b"}]}),
        cwd,
        &cancel,
    )
    .await;
    assert!(out.is_error);
    assert_eq!(
        text(&out),
        "Could not edit file: pipe. It is a FIFO, not a regular file."
    );
    let out = run(
        "write",
        json!({"path": "pipe", "content": "x"}),
        cwd,
        &cancel,
    )
    .await;
    assert!(out.is_error, "{}", text(&out));
    assert!(text(&out).contains("FIFO"), "{}", text(&out));
    // grep skips a FIFO inside the tree and refuses one named directly.
    std::fs::write(cwd.join("a.txt"), "needle\n").unwrap();
    let out = run("grep", json!({"pattern": "needle"}), cwd, &cancel).await;
    assert_eq!(text(&out), "a.txt:1: needle");
    let out = run(
        "grep",
        json!({"pattern": "x", "path": "pipe"}),
        cwd,
        &cancel,
    )
    .await;
    assert!(out.is_error);
    assert!(text(&out).contains("it is a FIFO"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn read_streams_huge_files_and_stops_on_abort() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    // 64 MiB of zero bytes (sparse) and one more line: all counted, little kept.
    let p = cwd.join("big");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(64 * 1024 * 1024).unwrap();
    drop(f);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"\nlast\n").unwrap();
    }
    let cancel = CancellationToken::new();
    let out = run("read", json!({"path": "big", "offset": 2}), cwd, &cancel).await;
    assert_eq!(text(&out), "last\n");
    let out = run("read", json!({"path": "big"}), cwd, &cancel).await;
    assert_eq!(
        text(&out),
        "[Line 1 is 64.0MB, exceeds 50.0KB limit. Use bash: sed -n '1p' big | head -c 51200]"
    );
    // A file far too large to scan in the test's time: the abort ends it.
    let huge = cwd.join("huge");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(1 << 40).unwrap();
    drop(f);
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let started = Instant::now();
    let out = run("read", json!({"path": "huge"}), cwd, &cancel).await;
    assert!(out.is_error);
    assert_eq!(text(&out), "Operation aborted");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread")]
async fn absurd_numbers_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    std::fs::write(cwd.join("a.txt"), "a\nb\nc\n").unwrap();
    let cancel = CancellationToken::new();
    let numbers = [
        json!(1e20),
        json!(-1e20),
        json!(1.7976931348623157e308),
        json!(-0.0),
        json!(0.5),
        json!(u64::MAX),
        json!(i64::MIN),
    ];
    for n in &numbers {
        for (tool, args) in [
            ("bash", json!({"command": "echo hi", "timeout": n})),
            ("read", json!({"path": "a.txt", "offset": n})),
            ("read", json!({"path": "a.txt", "limit": n})),
            ("read", json!({"path": "a.txt", "offset": n, "limit": n})),
            ("grep", json!({"pattern": "b", "context": n, "limit": n})),
            ("find", json!({"pattern": "*.txt", "limit": n})),
            ("ls", json!({"limit": n})),
        ] {
            // returning at all is the test: a panic fails it
            let _ = run(tool, args, cwd, &cancel).await;
        }
    }
    // read with an absurd limit still answers sensibly
    let out = run("read", json!({"path": "a.txt", "limit": -1}), cwd, &cancel).await;
    assert_eq!(text(&out), "a\nb\nc\n");
    let out = run("read", json!({"path": "a.txt", "limit": 1.5}), cwd, &cancel).await;
    assert_eq!(
        text(&out),
        "a\n\n[3 more lines in file. Use offset=2 to continue.]"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_images_are_omitted_not_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("huge.png");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A])
            .unwrap();
        f.set_len(65 * 1024 * 1024).unwrap();
    }
    let cancel = CancellationToken::new();
    let out = run("read", json!({"path": "huge.png"}), tmp.path(), &cancel).await;
    assert!(!out.is_error);
    assert_eq!(
        text(&out),
        "Read image file [image/png]\n[Image omitted: the file is 65.0MB, over the 64.0MB limit for images.]"
    );
    assert_eq!(out.content.len(), 1, "no image block");
}
