//! pi 1.6.0's command line in `pi-run`: a CI script written for `pi -p`
//! runs unchanged (`tests/ci/pi-flags.sh`, one row per flag), and the flags
//! that do something here do what pi does (`--session-id`, `--models`,
//! `--export`, `-v`), checked against the real pi where it is installed.
//! Plus: trust is never silent.

use serde_json::{json, Value};

use crate::common::*;

fn write(p: &std::path::Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Runs the CI script with `pi` = the given command words.
fn ci_script(sb: &Sandbox, pi: &str, path: &str) -> std::process::Output {
    std::process::Command::new("bash")
        .arg(repo().join("tests/ci/pi-flags.sh"))
        .env_clear()
        .env("PI", pi)
        .env("HOME", sb.root().join("home"))
        .env("PATH", path)
        .env("PI_CODING_AGENT_DIR", sb.agent())
        .env("NO_COLOR", "1")
        .current_dir(sb.cwd())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_ci_script_written_for_pi_runs_unchanged_with_pi_run() {
    let path = std::env::var("PATH").unwrap_or_default();
    let oracle = Oracle::find("a_ci_script_written_for_pi_runs_unchanged_with_pi_run");
    // The script's TypeScript extension needs a Node that runs TypeScript
    // (an extension that cannot load fails the run, as in pi): the
    // oracle's, first on PATH, when it is installed.
    let our_path = match &oracle {
        Some(o) => format!("{}:{path}", o.node22.parent().unwrap().display()),
        None => path.clone(),
    };
    let mut runs = vec![("pi-run", bin("pi-run").display().to_string(), our_path)];
    if let Some(o) = oracle {
        runs.push((
            "pi 1.6.0",
            format!("{} {}", o.node22.display(), o.pi160_cli.display()),
            format!("{}:{path}", o.node22.parent().unwrap().display()),
        ));
    }
    // The runs are independent: both at once.
    std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .iter()
            .map(|(who, cmd, path)| {
                scope.spawn(move || {
                    let sb = Sandbox::new();
                    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
                    server.configure(&sb.agent());
                    (who, ci_script(&sb, cmd, path))
                })
            })
            .collect();
        for h in handles {
            let (who, out) = h.join().unwrap();
            let report = stdout(&out);
            assert!(
                out.status.success(),
                "{who}: the CI script failed:\n{report}\n{}",
                stderr(&out)
            );
            let rows = report.lines().filter(|l| l.starts_with("ok: ")).count();
            assert!(rows >= 55, "{who}: {rows} rows\n{report}");
            assert!(!report.contains("FAIL"), "{who}:\n{report}");
        }
    });
}

/// `--session-id`: the cwd's session with that exact id is continued,
/// else one is created with that id (`<ts>_<id>.jsonl`, pi's warning);
/// invalid ids are pi's error.
#[test]
fn session_id_continues_or_creates_as_pi() {
    let oracle = Oracle::find("session_id_continues_or_creates_as_pi");
    let mut who: Vec<&str> = vec!["pi-run"];
    if oracle.is_some() {
        who.push("pi");
    }
    for w in who {
        let sb = Sandbox::new();
        let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
        server.configure(&sb.agent());
        let cmd = |args: &[&str]| {
            let mut c = match w {
                "pi" => oracle.as_ref().unwrap().pi160(&sb),
                _ => sb.cmd("pi-run"),
            };
            c.args(args).output().unwrap()
        };
        // A session whose id only starts with the requested one.
        ok(&cmd(&["--session-id", "abcdef", "-p", "zero"]));
        let first = cmd(&["--session-id", "abc", "-p", "one"]);
        ok(&first);
        assert!(
            stderr(&first).contains(
                "No project session found with id 'abc'; creating a new session with that id."
            ),
            "{w}: {}",
            stderr(&first)
        );
        let second = cmd(&["--session-id", "abc", "-p", "two"]);
        ok(&second);
        assert!(!stderr(&second).contains("No project session"), "{w}");
        let ls = jsonl(&sb.session(&["ls", "--all"]));
        let mut ids: Vec<&str> = ls.iter().map(|s| s["id"].as_str().unwrap()).collect();
        ids.sort();
        assert_eq!(ids, ["abc", "abcdef"], "{w}");
        let abc = ls.iter().find(|s| s["id"] == "abc").unwrap();
        assert!(
            abc["path"].as_str().unwrap().ends_with("_abc.jsonl"),
            "{w}: {abc}"
        );
        // The second run continued it: the model saw the first exchange.
        let reqs = server.requests.lock().unwrap();
        let msgs = reqs.last().unwrap()["messages"].as_array().unwrap().clone();
        let users = msgs.iter().filter(|m| m["role"] == "user").count();
        assert_eq!(users, 2, "{w}");
        drop(reqs);
        for bad in ["-bad", "a b", "x.", ""] {
            let out = cmd(&["--session-id", bad, "-p", "x"]);
            assert!(!out.status.success(), "{w} {bad:?}");
            assert!(
                stderr(&out).contains("Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', and start and end with an alphanumeric character"),
                "{w} {bad:?}: {}",
                stderr(&out)
            );
        }
    }
}

/// `--models` chooses the start model as pi does: the settings default
/// when in scope, else the scope's first model, with its `:level`.
#[test]
fn model_scope_chooses_the_start_model_as_pi() {
    let oracle = Oracle::find("model_scope_chooses_the_start_model_as_pi");
    let cells: [(&[&str], &str, Option<&str>); 6] = [
        (&["--models", "other-model"], "other-model", None),
        (&["--models", "oth*"], "other-model", None),
        (&["--models", "other-model,mock-model"], "mock-model", None),
        (
            &["--models", "think-model:high"],
            "think-model",
            Some("high"),
        ),
        (&["--models", "nosuch,other*"], "other-model", None),
        (
            &["--model", "mock-model", "--models", "other-model"],
            "mock-model",
            None,
        ),
    ];
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    let p = sb.agent().join("models.json");
    let mut models: Value = read_json(&p);
    let list = models["providers"]["mock"]["models"]
        .as_array_mut()
        .unwrap();
    let mut other = list[0].clone();
    other["id"] = json!("other-model");
    other["name"] = json!("Other");
    let mut think = list[0].clone();
    think["id"] = json!("think-model");
    think["name"] = json!("Think");
    think["reasoning"] = json!(true);
    list.push(other);
    list.push(think);
    std::fs::write(&p, models.to_string()).unwrap();
    for (flags, model, effort) in cells {
        let mut args = flags.to_vec();
        args.extend(["--no-session", "-p", "hi"]);
        let mut cmds = vec![("pi-run", sb.cmd("pi-run"))];
        if let Some(o) = &oracle {
            cmds.push(("pi", o.pi160(&sb)));
        }
        for (who, mut c) in cmds {
            let out = c.args(&args).output().unwrap();
            assert!(out.status.success(), "{who} {flags:?}: {}", stderr(&out));
            if flags.contains(&"nosuch,other*") {
                assert!(
                    stderr(&out).contains("No models match pattern \"nosuch\""),
                    "{who}: {}",
                    stderr(&out)
                );
            }
            let reqs = server.requests.lock().unwrap();
            let body = reqs.last().unwrap();
            assert_eq!(body["model"], model, "{who} {flags:?}");
            assert_eq!(body["reasoning_effort"].as_str(), effort, "{who} {flags:?}");
        }
    }
}

/// `--export FILE [OUTPUT]` writes the HTML page and says where, as pi.
#[test]
fn export_writes_html_as_pi() {
    let sb = Sandbox::with_fixtures();
    let file = sb.fixture_file("tools-160");
    let out = sb
        .cmd("pi-run")
        .args(["--export", file.to_str().unwrap(), "out.html"])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "Exported to: out.html\n");
    let html = std::fs::read_to_string(sb.cwd().join("out.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("notes.txt"));
    let out = sb
        .cmd("pi-run")
        .args(["--export", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stem = file.file_stem().unwrap().to_string_lossy();
    assert_eq!(ok(&out), format!("Exported to: pi-session-{stem}.html\n"));
    assert!(sb.cwd().join(format!("pi-session-{stem}.html")).is_file());
    let out = sb
        .cmd("pi-run")
        .args(["--export", "missing.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!(
            "File not found: {}",
            sb.cwd().join("missing.jsonl").display()
        )),
        "{}",
        stderr(&out)
    );
}

/// Flags with no effect here are accepted; interactive-only ones are a
/// one-line usage error; values may start with `-`; `-v` is the version.
#[test]
fn flag_edges() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    for (flags, what) in [
        (vec!["-r"], "-r/--resume"),
        (vec!["--resume"], "-r/--resume"),
        (vec!["--tui-mode", "regular"], "--tui-mode"),
        (vec!["--use-theme", "dark"], "--use-theme"),
    ] {
        let mut args = flags.clone();
        args.extend(["-p", "hi"]);
        let out = sb.cmd("pi-run").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("pi-run: error: {what}")) && err.contains("interactive only"),
            "{err}"
        );
    }
    assert!(server.requests.lock().unwrap().is_empty());
    let out = sb.cmd("pi-run").arg("-v").output().unwrap();
    assert_eq!(ok(&out), format!("pi-run {}\n", env!("CARGO_PKG_VERSION")));
    // A value that starts with `-` is a value.
    let out = sb
        .cmd("pi-run")
        .args(["--tools", "-bash", "--name", "-nt", "-p", "hi"])
        .output()
        .unwrap();
    ok(&out);
    let ls = jsonl(&sb.session(&["ls", "--all"]));
    assert_eq!(ls[0]["name"], "-nt");
    let reqs = server.requests.lock().unwrap();
    let tools: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "edit", "write"]);
    drop(reqs);
    // Extensions: a missing path is pi's error; an existing one is listed
    // as not run.
    let out = sb
        .cmd("pi-run")
        .args(["-e", "./nosuch.ts", "-p", "hi"])
        .output()
        .unwrap();
    // pi's exit status for it (a failed load).
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Extension path does not exist"),
        "{}",
        stderr(&out)
    );
    write(
        &sb.cwd().join("ext.ts"),
        "export default function (pi) {}\n",
    );
    let mut c = sb.cmd("pi-run");
    // A Node that runs TypeScript, when the oracle's is installed.
    if let Some(o) = Oracle::find("flag_edges") {
        c.env("PI_NODE", &o.node22);
    }
    let out = c
        .args([
            "-e",
            "./ext.ts",
            "--no-mcp",
            "--offline",
            "--verbose",
            "-p",
            "hi",
        ])
        .output()
        .unwrap();
    ok(&out);
    // The extension is run now (by the Node host): never the old "not
    // run" notice.
    assert!(
        !stderr(&out).contains("not run by this toolkit"),
        "{}",
        stderr(&out)
    );
}

/// Trust is never silent: with protected project resources, one stderr
/// line says the decision and why, and `--mode json` carries a `trust`
/// record right after the session header; without any, nothing.
#[test]
fn pi_run_says_what_it_decided_about_trust() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    let run = |args: &[&str]| sb.cmd("pi-run").args(args).output().unwrap();
    // Nothing protected: nothing said.
    let out = run(&["--mode", "json", "hi"]);
    ok(&out);
    assert_eq!(stderr(&out), "");
    assert_ne!(jsonl(&out)[1]["type"], "trust");
    write(
        &sb.cwd().join(".pi/skills/deploy/SKILL.md"),
        "---\ndescription: Deploy\n---\nbody\n",
    );
    write(&sb.cwd().join(".pi/settings.json"), "{}");
    let out = run(&["-p", "hi"]);
    ok(&out);
    assert_eq!(
        stderr(&out),
        "pi-run: project untrusted (not interactive and no saved decision): ignoring .pi/settings.json, .pi/skills; -a trusts it for this run, `pi-resources trust allow` saves that\n"
    );
    let out = run(&["-a", "-p", "hi"]);
    assert_eq!(
        stderr(&out),
        "pi-run: project trusted (-a/--approve): loading .pi/settings.json, .pi/skills\n"
    );
    let out = run(&["-na", "--mode", "json", "hi"]);
    ok(&out);
    assert!(stderr(&out).starts_with("pi-run: project untrusted (-na/--no-approve): ignoring"));
    let recs = jsonl(&out);
    assert_eq!(recs[0]["type"], "session");
    let cwd = std::fs::canonicalize(sb.cwd()).unwrap();
    assert_eq!(
        recs[1],
        json!({"type": "trust", "decision": "untrusted", "trusted": false, "reason": "cli",
               "protectedPaths": [cwd.join(".pi/settings.json"), cwd.join(".pi/skills")]})
    );
    assert_eq!(recs.iter().filter(|r| r["type"] == "trust").count(), 1);
    // The same record pi-resources prints.
    let res = jsonl(
        &sb.cmd("pi-resources")
            .args(["-na", "--format", "jsonl"])
            .output()
            .unwrap(),
    );
    assert_eq!(res[0], recs[1]);
    // A saved decision is named.
    ok(&sb
        .cmd("pi-resources")
        .args(["trust", "allow"])
        .output()
        .unwrap());
    let out = run(&["-p", "hi"]);
    assert!(
        stderr(&out).starts_with(&format!(
            "pi-run: project trusted (saved in trust.json for {}): loading",
            cwd.display()
        )),
        "{}",
        stderr(&out)
    );
}
