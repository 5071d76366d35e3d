//! The memory guard: `bench/run.sh`'s four-turn task (read → edit → bash →
//! answer) run by `pi-run --mode json` against a loopback script server,
//! and its peak resident set size taken from the kernel when the process
//! is reaped (`wait4`'s `ru_maxrss`, the figure GNU time prints). Memory is
//! a count, not a timing, so the bound holds on a loaded machine.
//!
//! An optimised `pi-run` must stay within 12 MB. A debug build runs several
//! times as much unoptimised code, so by default (`cargo test`) the bound is
//! [`DEBUG_BOUND_KB`]; it catches a buffer or a table that grows by megabytes.
//! The 12 MB bound is checked by `cargo test --release --test integration
//! rss_guard`, or on any binary with `PI_RSS_GUARD_BIN=target/release/pi-run
//! cargo test --test integration rss_guard`.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;

use crate::common::{sse_text, sse_tools, Reply, Sandbox, ScriptServer};

/// The bound for an optimised build (release profile): 12 MB.
const RELEASE_BOUND_KB: i64 = 12 * 1024;
/// The bound for a debug build (measured: 32 MB before the sandbox, codemode
/// and the output schema landed, 42 MB after).
const DEBUG_BOUND_KB: i64 = 56 * 1024;

/// Runs `cmd` to its end; its exit status and peak RSS in kB.
fn run_measured(mut cmd: std::process::Command) -> (std::process::ExitStatus, i64) {
    let child = cmd.spawn().expect("spawn pi-run");
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child and nothing else reaps it (dropping a
    // `Child` neither waits nor kills).
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    drop(child);
    (
        std::process::ExitStatus::from_raw(status),
        usage.ru_maxrss as i64,
    )
}

#[test]
fn rss_guard_four_turn_task() {
    let server = ScriptServer::start(vec![
        Reply::Sse(sse_tools(&[("read", r#"{"path":"notes.txt"}"#)])),
        Reply::Sse(sse_tools(&[(
            "edit",
            r#"{"path":"notes.txt","edits":[{"oldText":"hello","newText":"goodbye"}]}"#,
        )])),
        Reply::Sse(sse_tools(&[("bash", r#"{"command":"cat notes.txt"}"#)])),
        Reply::Sse(sse_text("Done: notes.txt now says goodbye.")),
    ]);
    let sb = Sandbox::new();
    server.configure(&sb.agent());
    std::fs::write(sb.cwd().join("notes.txt"), "hello world\n").unwrap();
    let explicit = std::env::var_os("PI_RSS_GUARD_BIN").map(PathBuf::from);
    let mut cmd = sb.cmd("pi-run");
    if let Some(bin) = &explicit {
        let mut c = std::process::Command::new(bin);
        c.env_clear()
            .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .current_dir(sb.cwd())
            .stdin(Stdio::null());
        cmd = c;
    }
    // A backtrace asked for in the test's environment would make every
    // error capture one (and load the debug info): not the run's memory.
    cmd.env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE");
    cmd.args(["--mode", "json", "Change hello to goodbye in notes.txt"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let (status, peak_kb) = run_measured(cmd);
    assert!(status.success(), "pi-run failed: {status:?}");
    assert_eq!(
        std::fs::read_to_string(sb.cwd().join("notes.txt")).unwrap(),
        "goodbye world\n",
        "the task was not done"
    );
    assert_eq!(server.requests.lock().unwrap().len(), 4, "four requests");
    let bound = if explicit.is_some() || !cfg!(debug_assertions) {
        RELEASE_BOUND_KB
    } else {
        DEBUG_BOUND_KB
    };
    eprintln!("pi-run four-turn task: peak RSS {peak_kb} kB (bound {bound} kB)");
    assert!(
        peak_kb <= bound,
        "peak RSS {peak_kb} kB is over the {bound} kB bound"
    );
}
