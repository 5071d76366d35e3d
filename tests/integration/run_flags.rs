//! `pi-run` flags a newcomer reaches for first: `--cwd DIR` (no `cd` in a
//! CI step) and what an option nobody knows gets (a did-you-mean, and the
//! extension hint only when extensions are loaded), and the `PI_*`
//! variables the bash tool promises.

use serde_json::{json, Value};

use crate::common::*;

fn faux_script(sb: &Sandbox, lines: &[Value]) -> String {
    let p = sb.root().join("script.jsonl");
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p.display().to_string()
}

#[test]
fn cwd_runs_the_task_in_that_directory() {
    let sb = Sandbox::new();
    let api = sb.cwd().join("services/api");
    std::fs::create_dir_all(&api).unwrap();
    std::fs::write(api.join("notes.txt"), "from the api folder\n").unwrap();
    let script = faux_script(
        &sb,
        &[
            json!({"toolCalls": [{"name": "bash", "arguments": {"command": "pwd; echo \"$PWD\"; cat notes.txt"}}]}),
            json!({"text": "done"}),
        ],
    );
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script])
        .args(["--cwd", "services/api", "-p", "@notes.txt", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "done\n");
    let real = api.canonicalize().unwrap().display().to_string();
    // The session is the folder's: its header and its sessions folder.
    let sessions = jsonl(
        &sb.cmd("pi-session")
            .args(["ls", "--all", "--format", "jsonl"])
            .output()
            .unwrap(),
    );
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    assert_eq!(sessions[0]["cwd"], real.as_str());
    let text = std::fs::read_to_string(sessions[0]["path"].as_str().unwrap()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["cwd"], real.as_str());
    // `@notes.txt` is read from DIR.
    let user = lines
        .iter()
        .find(|l| l["message"]["role"] == "user")
        .unwrap()
        .to_string();
    assert!(user.contains("from the api folder"), "{user}");
    // The tool ran in DIR, with $PWD saying so.
    let result = lines
        .iter()
        .find(|l| l["message"]["role"] == "toolResult")
        .unwrap();
    let shown = result["message"]["content"][0]["text"].as_str().unwrap();
    let shown: Vec<&str> = shown.lines().collect();
    assert_eq!(
        shown[..3],
        [real.as_str(), real.as_str(), "from the api folder"],
        "{result}"
    );

    // A folder that is not there is a usage error naming it.
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script])
        .args(["--cwd", "no/such", "-p", "go"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--cwd no/such"), "{}", stderr(&out));
}

#[test]
fn an_unknown_option_gets_a_did_you_mean() {
    let sb = Sandbox::new();
    let script = faux_script(&sb, &[json!({"text": "unused"})]);
    let run = |args: &[&str]| {
        sb.cmd("pi-run")
            .args(["--provider", "faux", "--model", &script])
            .args(args)
            .output()
            .unwrap()
    };
    for (typo, meant) in [
        ("--max-turn", "--max-turns"),
        ("--no-aprove", "--no-approve"),
        ("--sesion-id", "--session-id"),
    ] {
        let out = run(&[typo, "3", "-p", "hi"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("unknown option {typo}")), "{err}");
        assert!(err.contains(&format!("did you mean {meant}?")), "{err}");
        // No extension is loaded: no word about extension flags.
        assert!(!err.contains("extension"), "{err}");
    }
    // With an extension loaded, the message says none registers it.
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 is needed"
        );
        return;
    }
    let guard = repo().join("examples/guard.py");
    let out = run(&["-e", guard.to_str().unwrap(), "--no-aprove", "-p", "hi"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown option --no-aprove (no loaded extension registers it)"),
        "{err}"
    );
    assert!(err.contains("did you mean --no-approve?"), "{err}");
}

/// The `PI_*` variables of a bash tool call's environment (sorted).
fn pi_vars(tool_output: &str) -> Vec<(String, String)> {
    tool_output
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .filter(|(k, _)| {
            [
                "PI_CODING_AGENT",
                "PI_PROVIDER",
                "PI_MODEL",
                "PI_REASONING_LEVEL",
                "PI_SESSION_ID",
                "PI_SESSION_FILE",
            ]
            .contains(&k.as_str())
        })
        .collect()
}

/// The bash tool's guideline says "You can inspect PI_* environment
/// variables for current model and session details": they are set, as pi
/// 1.6.0 sets them (the same names, side by side).
#[test]
fn bash_tool_processes_get_the_pi_variables_its_guideline_promises() {
    let sb = Sandbox::new();
    let env_call = json!({"toolCalls": [{"name": "bash", "arguments": {"command": "env | grep '^PI_' | sort"}}]});
    let script = faux_script(&sb, &[env_call, json!({"text": "done"})]);
    let out = sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", &script, "--mode", "json"])
        .args(["--thinking", "off", "-p", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let events = jsonl(&out);
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap();
    let vars = pi_vars(end["result"]["content"][0]["text"].as_str().unwrap());
    let sessions = jsonl(
        &sb.cmd("pi-session")
            .args(["ls", "--all", "--format", "jsonl"])
            .output()
            .unwrap(),
    );
    let want = vec![
        ("PI_CODING_AGENT".to_string(), "true".to_string()),
        ("PI_MODEL".into(), script.clone()),
        ("PI_PROVIDER".into(), "faux".into()),
        ("PI_REASONING_LEVEL".into(), "off".into()),
        (
            "PI_SESSION_FILE".into(),
            sessions[0]["path"].as_str().unwrap().to_string(),
        ),
        (
            "PI_SESSION_ID".into(),
            sessions[0]["id"].as_str().unwrap().to_string(),
        ),
    ];
    assert_eq!(vars, want);

    // pi 1.6.0 sets the same variables.
    let Some(o) = Oracle::find("PI_* variables, pi 1.6.0") else {
        return;
    };
    let sb = Sandbox::new();
    let env_call = json!({"tool_calls": [{"name": "bash", "arguments": {"command": "env | grep '^PI_' | sort"}}]});
    let mock = MockLlm::start(&o, sb.root(), &json!([env_call, {"text": "done"}]));
    mock.configure(&sb.agent());
    let out = o
        .pi160(&sb)
        .args(["--mode", "json", "-p", "go"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let end = jsonl(&out)
        .into_iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap();
    let theirs = pi_vars(end["result"]["content"][0]["text"].as_str().unwrap());
    let names = |v: &[(String, String)]| v.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&vars), names(&theirs), "{theirs:?}");
    assert!(theirs.contains(&("PI_MODEL".into(), "mock-model".into())));
}
