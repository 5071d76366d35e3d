//! The memory guard: `bench/run.sh`'s four-turn task (read → edit → bash →
//! answer) run by `pi-run --mode json` against a loopback script server,
//! and its peak resident set size read from the kernel while it runs (its
//! own address space's high-water mark, `VmHWM`: see [`run_measured`] for
//! why not `wait4`'s `ru_maxrss`). Memory is a count, not a timing, so the
//! bound holds on a loaded machine.
//!
//! An optimised `pi-run` must stay within 12 MB. Most of a short run's
//! resident memory is its own code pages, so the figure depends on how the
//! binary is built: a debug build peaks near 41 MB. Under `CI=true` (or
//! `PI_RSS_GUARD=1`) the test therefore builds `pi-run` with the
//! `rss-guard` profile (the release profile without LTO, laid out by
//! `bins/link-order.txt`; `tests/install.sh` builds it first, so here it is
//! up to date) into `~/.cache/pi-toolkit-rss-guard`, outside the repository
//! so the dependencies are built once per machine, and holds that binary to
//! 12 MB. The shipped release binary (fat LTO) peaks lower still.
//! Otherwise the debug binary is held to [`DEBUG_BOUND_KB`], which catches a
//! buffer or a table that grows by megabytes; `PI_RSS_GUARD_BIN=path` holds
//! any binary to 12 MB (`target/release/pi-run`, say).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::{sse_text, sse_tools, Reply, Sandbox, ScriptServer};

/// The bound for an optimised build (release profile): 12 MB.
const RELEASE_BOUND_KB: i64 = 12 * 1024;
/// The bound for a debug build (measured: 32 MB before the sandbox, codemode
/// and the output schema landed, 42 MB after).
const DEBUG_BOUND_KB: i64 = 56 * 1024;

/// Whether this run holds an optimised build to the 12 MB bound: under
/// `CI=true` or `PI_RSS_GUARD=1`.
fn guard_build_wanted() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("PI_RSS_GUARD").is_ok_and(|v| v == "1")
}

/// What the guard's `cargo build` keeps of the environment, here and in
/// `tests/rss-guard/install.sh` alike: a variable a build script watches
/// (cargo passes its own to a test) would otherwise make this build
/// differ from the install's and rebuild the dependencies.
const BUILD_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "TMPDIR",
    "PI_LINK_ORDER",
];

/// Builds `pi-run` with the `rss-guard` profile into the guard's cache
/// (`$PI_RSS_GUARD_TARGET`, else `~/.cache/pi-toolkit-rss-guard`) and
/// returns the binary. Cargo only relinks what changed, and nothing at all
/// after `tests/install.sh` built the same tree.
fn guard_build() -> PathBuf {
    let target = match std::env::var_os("PI_RSS_GUARD_TARGET") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").expect("HOME is needed for the guard's cache");
            Path::new(&home).join(".cache/pi-toolkit-rss-guard")
        }
    };
    let mut cargo = std::process::Command::new("cargo");
    cargo.env_clear();
    for name in BUILD_ENV {
        if let Some(v) = std::env::var_os(name) {
            cargo.env(name, v);
        }
    }
    let out = cargo
        .args([
            "build",
            "--quiet",
            "--profile",
            "rss-guard",
            "--bin",
            "pi-run",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", &target)
        .stdin(Stdio::null())
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo build --profile rss-guard failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("rss-guard/pi-run")
}

/// The `VmHWM` line of `/proc/PID/status`: the peak resident set of the
/// process's current address space, in kB.
fn vm_hwm_kb(pid: libc::pid_t) -> Option<i64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `cmd` to its end; its exit status and the peak RSS in kB of the
/// program it ran.
///
/// Not `wait4`'s `ru_maxrss`: the kernel carries a process's peak across
/// `execve`, and a child starts as a copy (or, spawned, a borrower) of this
/// test process's address space, so `ru_maxrss` is at least the test
/// harness's own peak (37 MB in the middle of the integration suite). Nor
/// a traced child stopped on its way out: tracing slows it enough that it
/// runs other code and maps more (8.8 against 7.3 MB measured). The child
/// runs untouched, and its own address space's high-water mark (`VmHWM`,
/// which only grows) is read every 100 µs until it has exited: the last
/// reading is the peak of all but its last moments, when it only unwinds.
/// A run that outlives 120 s is killed and fails the test.
fn run_measured(mut cmd: std::process::Command) -> (std::process::ExitStatus, i64) {
    let mut child = cmd.spawn().expect("spawn pi-run");
    let pid = child.id() as libc::pid_t;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut peak = 0;
    loop {
        if let Some(kb) = vm_hwm_kb(pid) {
            peak = peak.max(kb);
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                assert!(peak > 0, "pi-run ended before its VmHWM could be read");
                return (status, peak);
            }
            Ok(None) if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("pi-run still running after 120 s (peak so far {peak} kB)");
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_micros(100)),
            Err(e) => panic!("waiting for pi-run: {e}"),
        }
    }
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
    // Made absolute: the child changes into the sandbox before it runs it.
    let explicit = std::env::var_os("PI_RSS_GUARD_BIN")
        .map(|bin| std::path::absolute(bin).expect("PI_RSS_GUARD_BIN"))
        .or_else(|| guard_build_wanted().then(guard_build));
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
        "peak RSS {peak_kb} kB is over the {bound} kB bound (if only the code's layout moved, \
         bench/link-order.py regenerates the list of hot functions)"
    );
}

#[test]
fn rss_guard_measures_the_program_not_the_test_process() {
    // This process holds 96 MB while pi-run runs: `wait4`'s figure would
    // report at least that; the program's own peak is a few MB.
    let ballast: Vec<u8> = vec![1; 96 << 20];
    let touched: u64 = ballast.iter().step_by(4096).map(|&b| u64::from(b)).sum();
    assert_eq!(touched, (96 << 20) / 4096);
    let sb = Sandbox::new();
    let mut cmd = sb.cmd("pi-run");
    cmd.arg("--version").stdout(Stdio::null());
    let (status, peak_kb) = run_measured(cmd);
    assert!(status.success(), "pi-run --version failed: {status:?}");
    drop(ballast);
    eprintln!("pi-run --version: peak RSS {peak_kb} kB");
    assert!(
        (1..32 * 1024).contains(&peak_kb),
        "pi-run --version measured at {peak_kb} kB: the test process's memory counted?"
    );
}
