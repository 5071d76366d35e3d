//! Extensions that fail, hang or misbehave. An extension that does not
//! load fails the run before the model is called (exit 1, naming the
//! extension and the cause; pi 1.6.0 does the same for the failures it
//! survives), and one TypeScript extension can never switch off the
//! others. A `tool_call` answer blocks on any truthy `block` and a
//! malformed one fails closed. A hung notification handler costs one
//! timeout per run. Extension processes end with the run, what they
//! started in the background too. What an extension or a `--gate` prints
//! is read under a size cap.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

fn write(path: &Path, text: &str) -> PathBuf {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn write_exec(path: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    write(path, text);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// Whether `prog` is on PATH; a skip with a message, a failure under CI.
fn have(prog: &str, test: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false);
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {prog} is not installed"
        );
        eprintln!("SKIP {test}: {prog} is not installed");
    }
    found
}

/// The model's first answer runs `touch ran.txt`; the second is text.
fn touch_turns() -> Vec<Reply> {
    vec![
        Reply::Sse(sse_tools(&[("bash", r#"{"command":"touch ran.txt"}"#)])),
        Reply::Sse(sse_text("done")),
    ]
}

/// A TypeScript guard that blocks every bash call.
const TS_GUARD: &str = r#"export default function (pi: any) {
  pi.on("tool_call", (e: any) => (e.toolName === "bash" ? { block: true, reason: "guarded" } : undefined));
}
"#;

/// `pi-run -p go` in `sb` against `server`, with the oracle's Node for TS
/// extensions.
fn run_ours(sb: &Sandbox, node: Option<&Path>, args: &[&str]) -> Output {
    let mut c = sb.cmd("pi-run");
    if let Some(n) = node {
        c.env("PI_NODE", n);
    }
    c.args(args).args(["-p", "go"]).output().unwrap()
}

/// The checks every failed load shares: exit 1, the error names the
/// extension (and `cause`), no request reached the model, the tool never
/// ran.
fn assert_failed_before_model(
    what: &str,
    out: &Output,
    server: &ScriptServer,
    sb: &Sandbox,
    ext: &Path,
    cause: &str,
) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    let want = format!(
        "pi-run: error: Failed to load extension \"{}\": {cause}",
        ext.display()
    );
    assert!(err.contains(&want), "{what}: wanted {want:?} in\n{err}");
    assert_eq!(
        server.requests.lock().unwrap().len(),
        0,
        "{what}: the model was called"
    );
    assert!(!sb.cwd().join("ran.txt").exists(), "{what}: the tool ran");
    assert_eq!(stdout(out), "", "{what}");
}

/// pi 1.6.0 and pi-run on the same failing TypeScript extensions (after a
/// guard that would block the tool): both exit 1 before any request, with
/// the same `Failed to load extension "<path>": <cause>` line.
#[test]
fn ts_load_failures_fail_the_run_before_the_model_as_in_pi() {
    let Some(o) = Oracle::find("ts_load_failures_fail_the_run_before_the_model_as_in_pi") else {
        return;
    };
    let cases: &[(&str, &str, &str)] = &[
        (
            "throws.ts",
            r#"export default function (pi: any) { throw new Error("factory boom"); }"#,
            "Failed to load extension: factory boom",
        ),
        (
            "nofactory.ts",
            "export const x = 1;\n",
            "Extension does not export a valid factory function: ",
        ),
        (
            "syntax.ts",
            "export default function (pi: any) { const x = ; }\n",
            "Failed to load extension: ",
        ),
    ];
    for (name, src, cause) in cases {
        let pi_sb = Sandbox::new();
        let turns = json!([
            {"tool_calls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]},
            {"text": "done"}
        ]);
        let mock = MockLlm::start(&o, pi_sb.root(), &turns);
        mock.configure(&pi_sb.agent());
        let guard = write(&pi_sb.root().join("guard.ts"), TS_GUARD);
        let ext = write(&pi_sb.root().join(name), src);
        let pi = o
            .pi160(&pi_sb)
            .args(["-e", guard.to_str().unwrap(), "-e", ext.to_str().unwrap()])
            .args(["-p", "go"])
            .output()
            .unwrap();
        assert_eq!(pi.status.code(), Some(1), "pi {name}: {}", stderr(&pi));
        let pi_line = format!(
            "Error: Failed to load extension \"{}\": {cause}",
            ext.display()
        );
        assert!(stderr(&pi).contains(&pi_line), "pi {name}: {}", stderr(&pi));
        assert!(!mock.log.exists(), "pi {name}: the model was called");

        let sb = Sandbox::new();
        let server = ScriptServer::start(touch_turns());
        server.configure(&sb.agent());
        let guard = write(&sb.root().join("guard.ts"), TS_GUARD);
        let ext = write(&sb.root().join(name), src);
        let out = run_ours(
            &sb,
            Some(&o.node22),
            &["-e", guard.to_str().unwrap(), "-e", ext.to_str().unwrap()],
        );
        assert_failed_before_model(name, &out, &server, &sb, &ext, cause);
    }
    // A missing -e path: pi's message, exit 1.
    let sb = Sandbox::new();
    let server = ScriptServer::start(touch_turns());
    server.configure(&sb.agent());
    let missing = sb.cwd().join("nosuch.ts");
    let out = run_ours(&sb, Some(&o.node22), &["-e", "./nosuch.ts"]);
    let cause = format!("Extension path does not exist: {}", missing.display());
    assert_failed_before_model("missing", &out, &server, &sb, &missing, &cause);
}

/// What pi 1.6.0 does not survive, pi-run turns into a failed load of that
/// one extension, never into a run without its guard: a factory that can
/// never finish (pi: exits 0 at once, silently; pi-run fails as fast), one
/// that loops forever (pi: hangs, deaf to SIGTERM; pi-run fails after the
/// load limit), `process.exit(3)` in a factory (pi exits 3) and a
/// rejection nobody handles (pi crashes). Each after a guard
/// that loaded fine: today's single Node host must not take it down.
#[test]
fn ts_extensions_that_hang_exit_or_crash_fail_only_the_run() {
    let Some(o) = Oracle::find("ts_extensions_that_hang_exit_or_crash_fail_only_the_run") else {
        return;
    };
    let cases: &[(&str, &str, &str, Option<i32>, u64)] = &[
        (
            "never.ts",
            "export default function (pi: any) { return new Promise(() => {}); }\n",
            "Failed to load extension: its factory never finished (it waits for something that can never happen)",
            Some(0),
            5,
        ),
        (
            "exit.ts",
            "export default function (pi: any) { process.exit(3); }\n",
            "Failed to load extension: it called process.exit(3) while loading",
            Some(3),
            5,
        ),
        (
            "stray.ts",
            r#"export default function (pi: any) { Promise.reject(new Error("later boom")); }"#,
            "Failed to load extension: unhandled rejection: later boom",
            Some(1),
            5,
        ),
        (
            "loop.ts",
            "export default function (pi: any) { while (true) {} }\n",
            "did not finish loading within 10 s",
            None,
            25,
        ),
    ];
    for (name, src, cause, pi_code, limit) in cases {
        if let Some(code) = pi_code {
            // What pi does with it: no request either way, and never
            // faster than pi-run by more than start-up noise.
            let pi_sb = Sandbox::new();
            let turns = json!([{"tool_calls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]}, {"text": "done"}]);
            let mock = MockLlm::start(&o, pi_sb.root(), &turns);
            mock.configure(&pi_sb.agent());
            let ext = write(&pi_sb.root().join(name), src);
            let pi = o
                .pi160(&pi_sb)
                .args(["-e", ext.to_str().unwrap(), "-p", "go"])
                .output()
                .unwrap();
            assert_eq!(pi.status.code(), Some(*code), "pi {name}: {}", stderr(&pi));
            assert!(!mock.log.exists(), "pi {name}: the model was called");
        }
        let sb = Sandbox::new();
        let server = ScriptServer::start(touch_turns());
        server.configure(&sb.agent());
        let guard = write(&sb.root().join("guard.ts"), TS_GUARD);
        let ext = write(&sb.root().join(name), src);
        let t = Instant::now();
        let out = run_ours(
            &sb,
            Some(&o.node22),
            &["-e", guard.to_str().unwrap(), "-e", ext.to_str().unwrap()],
        );
        assert!(
            t.elapsed() < Duration::from_secs(*limit),
            "{name}: took {:?}",
            t.elapsed()
        );
        assert_failed_before_model(name, &out, &server, &sb, &ext, cause);
    }
}

/// The Node host cannot run: every TypeScript extension fails the run.
#[test]
fn no_node_fails_the_run() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(touch_turns());
    server.configure(&sb.agent());
    let ext = write(&sb.agent().join("extensions/guard.ts"), TS_GUARD);
    let out = sb
        .cmd("pi-run")
        .env("PI_NODE", sb.root().join("no-such-node"))
        .env("PATH", "/nonexistent")
        .args(["-p", "go"])
        .output()
        .unwrap();
    let cause = "needs Node.js (set PI_NODE or put node on PATH)";
    assert_failed_before_model("no node", &out, &server, &sb, &ext, cause);
}

/// A process extension that fails before `register`: each fails the run,
/// named, before the model is called.
#[test]
fn process_extension_load_failures_fail_the_run() {
    if !have("python3", "process_extension_load_failures_fail_the_run") {
        return;
    }
    let head = "#!/usr/bin/env python3\nimport json, sys, time\nhello = json.loads(sys.stdin.readline())\n";
    let cases: Vec<(&str, String, &str)> = vec![
        ("crash", format!("{head}sys.exit(3)\n"), "exited (code 3) before registering"),
        (
            "garbage",
            format!("{head}print('hello there', flush=True)\ntime.sleep(30)\n"),
            "broke the protocol: not JSON: ",
        ),
        (
            "errors",
            format!(
                "{head}print(json.dumps({{'type': 'register', 'protocol': 1, 'extensions': [], 'errors': [{{'path': '', 'message': 'no config file'}}]}}), flush=True)\nsys.stdin.read()\n"
            ),
            "no config file",
        ),
        (
            "protocol",
            format!("{head}print(json.dumps({{'type': 'register', 'protocol': 9}}), flush=True)\nsys.stdin.read()\n"),
            "protocol 9 not supported (host speaks 1)",
        ),
        (
            "silent",
            format!("{head}time.sleep(60)\n"),
            "did not register within 10 s",
        ),
    ];
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(name, src, cause)| {
            std::thread::spawn(move || {
                let sb = Sandbox::new();
                let server = ScriptServer::start(touch_turns());
                server.configure(&sb.agent());
                let ext = write_exec(&sb.root().join(format!("{name}.py")), &src);
                let t = Instant::now();
                let out = run_ours(&sb, None, &["-e", ext.to_str().unwrap()]);
                assert!(
                    t.elapsed() < Duration::from_secs(20),
                    "{name}: {:?}",
                    t.elapsed()
                );
                assert_failed_before_model(name, &out, &server, &sb, &ext, cause);
            })
        })
        .collect();
    // The second pass too: a trusted project's extension (MCP is up by
    // then; it is shut down first).
    let sb = Sandbox::new();
    let server = ScriptServer::start(touch_turns());
    server.configure(&sb.agent());
    let ext = write_exec(
        &sb.cwd().join(".pi/extensions/crash.py"),
        &format!("{head}sys.exit(3)\n"),
    );
    let out = run_ours(&sb, None, &["--approve"]);
    assert_failed_before_model(
        "project",
        &out,
        &server,
        &sb,
        &ext,
        "exited (code 3) before registering",
    );
    for r in runs {
        r.join().unwrap();
    }
}

/// A process extension answering `tool_call` with `$ANSWER` (JSON).
const ANSWERS: &str = r#"#!/usr/bin/env python3
import json, os, sys
hello = json.loads(sys.stdin.readline())
def send(r):
    sys.stdout.write(json.dumps(r) + "\n"); sys.stdout.flush()
send({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": ["tool_call"]}]})
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "event":
        sys.stdout.write('{"type": "result", "id": %d, "result": %s}\n' % (r["id"], os.environ["ANSWER"])); sys.stdout.flush()
"#;

fn faux_touch(sb: &Sandbox) -> String {
    let p = sb.root().join("script.jsonl");
    let lines = [
        json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]}),
        json!({"text": "done"}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

/// The text and error flag of the first tool result of a `--mode json` run.
fn first_result(out: &Output) -> (String, bool) {
    let end = jsonl(out)
        .into_iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool result: {}", stderr(out)));
    (
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        end["isError"].as_bool().unwrap_or(false),
    )
}

/// pi blocks on any truthy `block` (`"yes"`, `1`); falsy ones (`0`, `""`,
/// `false`) let the call run; an answer that is not `null` or an object,
/// or an `input` that is not an object, blocks (fail closed) with one
/// stderr line.
#[test]
fn truthy_blocks_block_and_malformed_answers_fail_closed() {
    if !have(
        "python3",
        "truthy_blocks_block_and_malformed_answers_fail_closed",
    ) {
        return;
    }
    let cases: &[(&str, bool, &str)] = &[
        (
            r#"{"block": "yes", "reason": "said yes"}"#,
            false,
            "said yes",
        ),
        (r#"{"block": 1}"#, false, "Tool execution was blocked"),
        (r#"{"block": "no"}"#, false, "Tool execution was blocked"),
        (r#"{"block": 0}"#, true, ""),
        (r#"{"block": ""}"#, true, ""),
        (r#"{"block": false}"#, true, ""),
        (r#"null"#, true, ""),
        (
            r#""garbage""#,
            false,
            "answered tool_call with \"garbage\", not null or an object",
        ),
        (
            r#"[true]"#,
            false,
            "answered tool_call with [true], not null or an object",
        ),
        (
            r#"{"input": "rm -rf /"}"#,
            false,
            "answered tool_call with an input that is not an object (a string)",
        ),
    ];
    for (answer, runs, text) in cases {
        let sb = Sandbox::new();
        let ext = write_exec(&sb.root().join("answers.py"), ANSWERS);
        let script = faux_touch(&sb);
        let out = sb
            .cmd("pi-run")
            .env("ANSWER", answer)
            .args(["--no-session", "--provider", "faux", "--model", &script])
            .args(["--mode", "json", "-e", ext.to_str().unwrap(), "go"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{answer}: {}", stderr(&out));
        assert_eq!(sb.cwd().join("ran.txt").exists(), *runs, "{answer}");
        let (got, is_error) = first_result(&out);
        assert_eq!(is_error, !runs, "{answer}: {got}");
        if !runs {
            assert!(got.contains(text), "{answer}: {got}");
        }
        let malformed = stderr(&out)
            .lines()
            .filter(|l| l.contains("answered tool_call"))
            .count();
        assert_eq!(
            malformed,
            usize::from(text.starts_with("answered")),
            "{answer}: {}",
            stderr(&out)
        );
    }
}

/// The same answers from a TypeScript handler, under pi 1.6.0 and pi-run:
/// the tool runs in both or in neither.
#[test]
fn ts_truthy_blocks_as_in_pi() {
    let Some(o) = Oracle::find("ts_truthy_blocks_as_in_pi") else {
        return;
    };
    for (ret, runs) in [
        (r#"{ block: "yes" }"#, false),
        ("{ block: 1 }", false),
        ("{ block: 0 }", true),
        (r#""garbage""#, true),
    ] {
        let src = format!(
            "export default function (pi: any) {{ pi.on(\"tool_call\", () => ({ret}) as any); }}\n"
        );
        let pi_sb = Sandbox::new();
        let turns = json!([{"tool_calls": [{"name": "bash", "arguments": {"command": "touch ran.txt"}}]}, {"text": "done"}]);
        let mock = MockLlm::start(&o, pi_sb.root(), &turns);
        mock.configure(&pi_sb.agent());
        let ext = write(&pi_sb.root().join("t.ts"), &src);
        let pi = o
            .pi160(&pi_sb)
            .args(["-e", ext.to_str().unwrap(), "-p", "go"])
            .output()
            .unwrap();
        assert!(pi.status.success(), "pi {ret}: {}", stderr(&pi));
        assert_eq!(pi_sb.cwd().join("ran.txt").exists(), runs, "pi {ret}");

        let sb = Sandbox::new();
        let server = ScriptServer::start(touch_turns());
        server.configure(&sb.agent());
        let ext = write(&sb.root().join("t.ts"), &src);
        let out = run_ours(&sb, Some(&o.node22), &["-e", ext.to_str().unwrap()]);
        assert!(out.status.success(), "{ret}: {}", stderr(&out));
        assert_eq!(sb.cwd().join("ran.txt").exists(), runs, "{ret}");
    }
}

/// A `message_update` handler that never answers: the first delta costs
/// the extension timeout, the rest nothing (one stderr line says so), so
/// ~25 deltas with a 1 s limit take seconds, not 25.
#[test]
fn a_hung_notification_handler_costs_one_timeout() {
    if !have("python3", "a_hung_notification_handler_costs_one_timeout") {
        return;
    }
    let ext_src = r#"#!/usr/bin/env python3
import json, sys
hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": ["message_update"]}]}) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    pass
"#;
    let sb = Sandbox::new();
    let ext = write_exec(&sb.root().join("deaf.py"), ext_src);
    let text = "x".repeat(190);
    let p = sb.root().join("script.jsonl");
    std::fs::write(&p, json!({"text": text}).to_string() + "\n").unwrap();
    let t = Instant::now();
    let out = sb
        .cmd("pi-run")
        .args([
            "--no-session",
            "--provider",
            "faux",
            "--model",
            p.to_str().unwrap(),
        ])
        .args([
            "--extension-timeout",
            "1",
            "-e",
            ext.to_str().unwrap(),
            "--mode",
            "json",
            "go",
        ])
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    let deltas = jsonl(&out)
        .iter()
        .filter(|e| e["type"] == "message_update")
        .count();
    assert!(deltas >= 22, "{deltas} deltas");
    assert!(
        took < Duration::from_secs(8),
        "{deltas} deltas took {took:?}"
    );
    let err = stderr(&out);
    assert_eq!(
        err.matches("its message_update handler did not answer within 1 s; not waiting for it again this run")
            .count(),
        1,
        "{err}"
    );
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

fn wait_gone(pids: &[u32], what: &str) {
    let t = Instant::now();
    while pids.iter().any(|p| alive(*p)) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in pids {
        assert!(!alive(*p), "{what}: process {p} outlived pi-run");
    }
}

/// An extension started as `sh -c "sleep 1000 & exec python3 ext.py"`:
/// it writes its own pid and the background sleep's to files, then
/// serves; `$STUBBORN` makes it ignore EOF and SIGTERM.
fn group_extension(sb: &Sandbox) -> PathBuf {
    let py = write(
        &sb.root().join("ext.py"),
        r#"import json, os, signal, sys, time
if os.environ.get("STUBBORN"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
hello = json.loads(sys.stdin.readline())
open(os.environ["PIDS"] + "/ext.pid", "w").write(str(os.getpid()))
sys.stdout.write(json.dumps({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": ["tool_call"],
  "flags": [{"name": "known", "type": "boolean"}]}]}) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "event":
        sys.stdout.write(json.dumps({"type": "result", "id": r["id"], "result": None}) + "\n"); sys.stdout.flush()
if os.environ.get("STUBBORN"):
    while True:
        time.sleep(1)
"#,
    );
    write_exec(
        &sb.root().join("ext.sh"),
        &format!(
            "#!/bin/sh\nsleep 1000 &\necho $! > \"$PIDS/bg.pid\"\nexec python3 {}\n",
            py.display()
        ),
    )
}

fn pids(dir: &Path) -> Vec<u32> {
    ["ext.pid", "bg.pid"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(dir.join(f))
                .unwrap_or_else(|e| panic!("{f}: {e}"))
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

/// After a normal exit, an exit on an error after the extensions loaded
/// (an unknown flag), SIGTERM during a tool, and with an extension that
/// ignores EOF and SIGTERM: nothing of the extension's process group is
/// left (EOF, then SIGTERM, then SIGKILL).
#[test]
fn extension_process_groups_end_with_the_run() {
    if !have("python3", "extension_process_groups_end_with_the_run") {
        return;
    }
    for case in ["normal", "stubborn", "bad-flag", "sigterm"] {
        let sb = Sandbox::new();
        let ext = group_extension(&sb);
        let pid_dir = sb.root().join("pids");
        std::fs::create_dir_all(&pid_dir).unwrap();
        let p = sb.root().join("script.jsonl");
        let first = if case == "sigterm" {
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch started; sleep 60"}}]})
        } else {
            json!({"text": "ok"})
        };
        std::fs::write(&p, format!("{first}\n{}\n", json!({"text": "done"}))).unwrap();
        let mut c = sb.cmd("pi-run");
        c.env("PIDS", &pid_dir)
            .args([
                "--no-session",
                "--provider",
                "faux",
                "--model",
                p.to_str().unwrap(),
            ])
            .args(["-e", ext.to_str().unwrap()]);
        if case == "stubborn" {
            c.env("STUBBORN", "1");
        }
        if case == "bad-flag" {
            c.arg("--unknown-flag");
        }
        c.arg("go").stdout(Stdio::piped()).stderr(Stdio::piped());
        let t = Instant::now();
        let out = if case == "sigterm" {
            let child = c.spawn().unwrap();
            let started = sb.cwd().join("started");
            while !started.exists() {
                assert!(
                    t.elapsed() < Duration::from_secs(30),
                    "the tool never started"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap();
            child.wait_with_output().unwrap()
        } else {
            c.output().unwrap()
        };
        let want = match case {
            "bad-flag" => 2,
            "sigterm" => 143,
            _ => 0,
        };
        assert_eq!(out.status.code(), Some(want), "{case}: {}", stderr(&out));
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{case}: {:?}",
            t.elapsed()
        );
        wait_gone(&pids(&pid_dir), case);
    }
}

/// Max RSS (KiB) of `cmd` and what it waited for, by GNU time.
fn max_rss_kib(cmd: &mut Command) -> (Output, u64) {
    let report = tempfile::NamedTempFile::new().unwrap();
    let prog = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut timed = Command::new("/usr/bin/time");
    timed
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(report.path())
        .arg(prog)
        .args(args);
    // The sandbox's command has a cleared environment plus these.
    timed.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            timed.env(k, v);
        }
    }
    if let Some(d) = cmd.get_current_dir() {
        timed.current_dir(d);
    }
    let out = timed.stdin(Stdio::null()).output().unwrap();
    let kib = std::fs::read_to_string(report.path())
        .unwrap()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no RSS from /usr/bin/time: {}", stderr(&out)));
    (out, kib)
}

/// An extension answering `tool_call` with 300 MB on one line, and a
/// `--gate` printing 1 GB: both hit a cap (the call is blocked, fail
/// closed, with a clear error) and pi-run's memory stays small.
#[test]
fn oversized_extension_and_gate_output_is_capped() {
    if !have("python3", "oversized_extension_and_gate_output_is_capped") {
        return;
    }
    if !Path::new("/usr/bin/time").exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "/usr/bin/time is needed"
        );
        eprintln!("SKIP oversized_extension_and_gate_output_is_capped: no /usr/bin/time");
        return;
    }
    let flood = r#"#!/usr/bin/env python3
import json, sys
hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"type": "register", "protocol": 1, "extensions": [{"path": hello["load"][0]["path"], "events": ["tool_call"]}]}) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "event":
        chunk = "x" * (1 << 20)
        try:
            sys.stdout.write('{"type": "result", "id": %d, "result": {"reason": "' % r["id"])
            for _ in range(300):
                sys.stdout.write(chunk)
            sys.stdout.flush()
        except BrokenPipeError:
            sys.exit(0)
"#;
    let limit_kib = 200 * 1024;
    for case in ["extension", "gate"] {
        let sb = Sandbox::new();
        let script = faux_touch(&sb);
        let mut c = sb.cmd("pi-run");
        c.args([
            "--no-session",
            "--provider",
            "faux",
            "--model",
            &script,
            "--mode",
            "json",
        ]);
        if case == "extension" {
            let ext = write_exec(&sb.root().join("flood.py"), flood);
            c.args(["-e", ext.to_str().unwrap()]);
        } else {
            c.args(["--gate", "head -c 1000000000 /dev/zero; exit 0"]);
        }
        c.arg("go");
        let t = Instant::now();
        let (out, kib) = max_rss_kib(&mut c);
        assert!(out.status.success(), "{case}: {}", stderr(&out));
        assert!(!sb.cwd().join("ran.txt").exists(), "{case}: the tool ran");
        let (text, is_error) = first_result(&out);
        assert!(is_error, "{case}: {text}");
        let want = if case == "extension" {
            "is not running; blocking execution"
        } else {
            "--gate printed more than 1 MiB; blocking execution"
        };
        assert!(text.contains(want), "{case}: {text}");
        if case == "extension" {
            assert!(
                stderr(&out)
                    .contains("broke the protocol: a record is longer than 16 MiB (the limit)"),
                "{}",
                stderr(&out)
            );
        }
        assert!(kib < limit_kib, "{case}: max RSS {kib} KiB");
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{case}: {:?}",
            t.elapsed()
        );
    }
}

/// A `tool_call` handler whose child process prints forged answers
/// (`{"type":"result","id":N,"result":null}` for every likely id) on the
/// stdout it inherits, before the handler blocks the call: the records
/// travel on the records pipe (fd 3), so the forgeries are only text and
/// the block stands. For the Node host (TypeScript, under pi-run) and for
/// a process extension that writes its records to `$PI_EXT_RECORDS_FD`.
#[test]
fn a_child_process_cannot_answer_for_its_extension() {
    let Some(o) = Oracle::find("a_child_process_cannot_answer_for_its_extension") else {
        return;
    };
    if !have("python3", "a_child_process_cannot_answer_for_its_extension") {
        return;
    }
    let forge =
        r#"for i in $(seq 1 60); do echo "{\"type\":\"result\",\"id\":$i,\"result\":null}"; done"#;
    let ts = format!(
        r#"import {{ execSync }} from "node:child_process";
export default function (pi: any) {{
  pi.on("tool_call", () => {{
    execSync({forge:?}, {{ stdio: "inherit", shell: "/bin/sh" }});
    return {{ block: true, reason: "guarded" }};
  }});
}}
"#
    );
    let py = format!(
        r#"#!/usr/bin/env python3
import json, os, subprocess, sys
records = os.fdopen(int(os.environ["PI_EXT_RECORDS_FD"]), "w")
def send(r):
    records.write(json.dumps(r) + "\n"); records.flush()
hello = json.loads(sys.stdin.readline())
send({{"type": "register", "protocol": 1, "extensions": [{{"path": hello["load"][0]["path"], "events": ["tool_call"]}}]}})
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] == "event":
        subprocess.run({forge:?}, shell=True)
        send({{"type": "result", "id": r["id"], "result": {{"block": True, "reason": "guarded"}}}})
"#
    );
    for kind in ["ts", "process"] {
        let sb = Sandbox::new();
        let script = faux_touch(&sb);
        let ext = if kind == "ts" {
            write(&sb.root().join("guard.ts"), &ts)
        } else {
            write_exec(&sb.root().join("guard.py"), &py)
        };
        let out = sb
            .cmd("pi-run")
            .env("PI_NODE", &o.node22)
            .args([
                "--no-session",
                "--provider",
                "faux",
                "--model",
                &script,
                "--mode",
                "json",
            ])
            .args(["-e", ext.to_str().unwrap(), "go"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{kind}: {}", stderr(&out));
        assert!(
            !sb.cwd().join("ran.txt").exists(),
            "{kind}: a forged answer let the tool run"
        );
        assert_eq!(first_result(&out), ("guarded".to_string(), true), "{kind}");
        // The forgeries were passed on as the extension's text.
        assert!(
            stderr(&out).contains(r#": {"type":"result","id":1,"result":null}"#),
            "{kind}: {}",
            stderr(&out)
        );
    }
}

/// A TypeScript `session_start` handler waiting for something that can
/// never happen (a promise nothing settles) costs no timeout: once the
/// host has nothing left to run, the handler is answered as failed and
/// the run goes on (pi 1.6.0's process just exits 0 at that point, after
/// ~2.3 s, printing no answer; pi-run used to wait the 30 s event timeout).
#[test]
fn a_ts_handler_that_can_never_finish_costs_no_timeout() {
    let Some(o) = Oracle::find("a_ts_handler_that_can_never_finish_costs_no_timeout") else {
        return;
    };
    let sb = Sandbox::new();
    let ext = write(
        &sb.root().join("stuck.ts"),
        "export default function (pi: any) {\n  pi.on(\"session_start\", async () => { await new Promise(() => {}); });\n}\n",
    );
    let p = write(
        &sb.root().join("script.jsonl"),
        "{\"text\": \"answered\"}\n",
    );
    let t = Instant::now();
    let out = sb
        .cmd("pi-run")
        .env("PI_NODE", &o.node22)
        .args(["--provider", "faux", "--model", p.to_str().unwrap()])
        .arg("-e")
        .arg(&ext)
        .args(["-p", "go"])
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "answered\n");
    assert!(
        stderr(&out).contains("its handler never finished"),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
}
