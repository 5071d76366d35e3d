//! `pi-run` flags a newcomer reaches for first: `--cwd DIR` (no `cd` in a
//! CI step) and what an option nobody knows gets (a did-you-mean, and the
//! extension hint only when extensions are loaded).

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
