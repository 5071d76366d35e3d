//! The system prompt `pi-run` records and sends: trust-gated project
//! resources, section patches across runs, Chat only (seed 000), the
//! `pi-resources | pi-prompt | pi-run` pipeline, and equality with what the
//! real pi 1.6.0 records for the same tree.

use serde_json::{json, Value};

use crate::common::*;

fn write(p: &std::path::Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The system text and tool names of request `i`.
fn request(server: &ScriptServer, i: usize) -> (String, Vec<String>) {
    let reqs = server.requests.lock().unwrap();
    let r = &reqs[i];
    let sys = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let tools = r["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|x| x["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    (sys, tools)
}

/// The `system` messages of a session file, in order.
fn system_messages(file: &str) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["message"]["role"] == "system")
        .map(|e| e["message"].clone())
        .collect()
}

fn only_session(sb: &Sandbox) -> String {
    let ls = jsonl(&sb.session(&["ls", "--all"]));
    assert_eq!(ls.len(), 1, "{ls:?}");
    ls[0]["path"].as_str().unwrap().to_string()
}

fn skill(dir: &std::path::Path, name: &str, desc: &str) {
    write(
        &dir.join(name).join("SKILL.md"),
        &format!("---\ndescription: {desc}\n---\nSteps for {name}.\n"),
    );
}

#[test]
fn project_skills_need_trust() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    skill(&sb.cwd().join(".pi/skills"), "deploy", "Deploy the app");
    ok(&sb
        .cmd("pi-run")
        .args(["--no-approve", "--no-session", "-p", "hi"])
        .output()
        .unwrap());
    ok(&sb
        .cmd("pi-run")
        .args(["-a", "--no-session", "-p", "hi"])
        .output()
        .unwrap());
    // Without a decision: non-interactive and nothing saved → untrusted.
    ok(&sb
        .cmd("pi-run")
        .args(["--no-session", "-p", "hi"])
        .output()
        .unwrap());
    assert!(!request(&server, 0).0.contains("<name>deploy</name>"));
    assert!(request(&server, 1).0.contains("<name>deploy</name>"));
    assert!(!request(&server, 2).0.contains("<name>deploy</name>"));
    // A saved decision in trust.json is honoured.
    ok(&sb
        .cmd("pi-resources")
        .args(["trust", "allow"])
        .output()
        .unwrap());
    ok(&sb
        .cmd("pi-run")
        .args(["--no-session", "-p", "hi"])
        .output()
        .unwrap());
    assert!(request(&server, 3).0.contains("<name>deploy</name>"));
}

#[test]
fn a_new_skill_between_runs_is_one_skills_patch_and_no_change_is_nothing() {
    let sb = Sandbox::new();
    let script = sb.root().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"text\":\"1\"}\n{\"text\":\"2\"}\n{\"text\":\"3\"}\n",
    )
    .unwrap();
    let s = script.to_str().unwrap();
    ok(&sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", s, "-p", "one"])
        .output()
        .unwrap());
    let file = only_session(&sb);
    assert_eq!(system_messages(&file).len(), 1);
    let first = &system_messages(&file)[0];
    assert!(first["sections"].get("skills").is_none());
    assert_eq!(first["toolsAdded"].as_array().unwrap().len(), 4);
    skill(&sb.agent().join("skills"), "lint", "Lint the code");
    ok(&sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", s, "-c", "-p", "two"])
        .output()
        .unwrap());
    let sys = system_messages(&file);
    assert_eq!(sys.len(), 2);
    let keys: Vec<&String> = sys[1]["sections"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["skills"], "only the changed section");
    assert!(sys[1].get("toolsAdded").is_none() && sys[1].get("toolsRemoved").is_none());
    ok(&sb
        .cmd("pi-run")
        .args(["--provider", "faux", "--model", s, "-c", "-p", "three"])
        .output()
        .unwrap());
    assert_eq!(
        system_messages(&file).len(),
        2,
        "nothing changed: no system entry"
    );
    // pi-prompt diff agrees: nothing to append now.
    let d = sb
        .cmd("pi-prompt")
        .args([
            "diff",
            "--session",
            &file,
            "--no-stdin",
            "--format",
            "jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(ok(&d), "");
}

#[test]
fn chat_only_sends_exactly_the_context_files_and_no_tools() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    write(&sb.agent().join("AGENTS.md"), "global agents\n");
    write(&sb.cwd().join("CLAUDE.md"), "project claude\n");
    write(&sb.cwd().join("sub/AGENTS.override.md"), "nested override");
    let cwd = sb.cwd().join("sub");
    skill(&sb.cwd().join(".pi/skills"), "deploy", "Deploy");
    write(&sb.cwd().join(".pi/prompts/review.md"), "Review $1");
    // An extension that would leave a marker if anything ran it.
    let marker = sb.root().join("extension-ran");
    write(
        &sb.cwd().join(".pi/extensions/mark.sh"),
        &format!("#!/bin/sh\ntouch {}\n", marker.display()),
    );
    let out = sb
        .cmd("pi-run")
        .current_dir(&cwd)
        .args(["-a", "--chat-only", "-p", "/review x"])
        .output()
        .unwrap();
    ok(&out);
    let (sys, tools) = request(&server, 0);
    assert_eq!(
        sys,
        "global agents\n\n\nproject claude\n\n\nnested override"
    );
    assert!(tools.is_empty());
    assert!(server.requests.lock().unwrap()[0].get("tools").is_none());
    let user = &server.requests.lock().unwrap()[0]["messages"][1]["content"][0]["text"];
    assert_eq!(user, "/review x", "no template expansion in Chat only");
    assert!(!marker.exists());
    // The selection is pinned in the session.
    let file = only_session(&sb);
    let sel = jsonl(&sb.session(&["select-tool", &file]));
    assert_eq!(sel[0]["state"], "chat_only");
}

/// Seed 000: the Chat-only prompt is exactly the context files' contents
/// as pi 1.6.0 loads them — one leading BOM dropped, a second one kept —
/// joined by a blank line (tests/fixtures/resources/bom.json).
#[test]
fn chat_only_prompt_is_the_context_files_as_pi_loads_them() {
    let tree = crate::resources::build("bom");
    let sb = &tree.sb;
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    ok(&sb
        .cmd("pi-run")
        .current_dir(&tree.cwd)
        .args(["-a", "--chat-only", "--no-session", "-p", "hi"])
        .output()
        .unwrap());
    let (sys, _) = request(&server, 0);
    assert_eq!(
        sys,
        "global rules\n\n\n\u{feff}two BOMs: the second is content\n\n\noverride rules\n"
    );
    let Some(o) = Oracle::find("chat_only_prompt_is_the_context_files_as_pi_loads_them") else {
        return;
    };
    let pi = tree.theirs(&o);
    let contents: Vec<&str> = pi["agentsFileContents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(sys, contents.join("\n\n"), "pi 1.6.0's context files");
}

#[test]
fn crossing_the_chat_only_boundary_keeps_the_session() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    write(&sb.cwd().join("AGENTS.md"), "rules");
    ok(&sb.cmd("pi-run").args(["-p", "one"]).output().unwrap());
    let file = only_session(&sb);
    let id = jsonl(&sb.session(&["show", &file]))[0]["id"].clone();
    // Legacy: the default tools.
    assert_eq!(request(&server, 0).1, ["read", "bash", "edit", "write"]);
    // Into Chat only.
    ok(&sb.session(&["select-tool", &file, "--chat-only"]));
    ok(&sb
        .cmd("pi-run")
        .args(["--session", &file, "-p", "two"])
        .output()
        .unwrap());
    let (sys, tools) = request(&server, 1);
    assert_eq!(sys, "rules");
    assert!(tools.is_empty());
    // Out again, to a non-empty selection.
    ok(&sb.session(&["select-tool", &file, "--tools", "read,ls"]));
    ok(&sb
        .cmd("pi-run")
        .args(["--session", &file, "-p", "three"])
        .output()
        .unwrap());
    let (sys, tools) = request(&server, 2);
    assert!(sys.starts_with("You are a coding assistant"), "{sys}");
    assert_eq!(tools, ["read", "ls"]);
    // An invalid newer entry is skipped; cleared goes back to defaults.
    ok(&sb.session(&["select-tool", &file, "--clear"]));
    ok(&sb
        .cmd("pi-run")
        .args(["--session", &file, "-p", "four"])
        .output()
        .unwrap());
    assert_eq!(request(&server, 3).1, ["read", "bash", "edit", "write"]);
    // Replaying the recorded system messages gives exactly what was sent,
    // at the end and at the Chat-only run's answer.
    let replayed = jsonl(&sb.session(&["context", &file, "--prompt", "--format", "jsonl"]));
    assert_eq!(replayed[0]["text"].as_str().unwrap(), request(&server, 3).0);
    let tree = jsonl(&sb.session(&["tree", &file]));
    let answers: Vec<&str> = tree
        .iter()
        .filter(|n| n["role"] == "assistant")
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    let at_chat = jsonl(&sb.session(&[
        "context", &file, "--prompt", "--leaf", answers[1], "--format", "jsonl",
    ]));
    assert_eq!(at_chat[0]["text"], "rules");
    assert_eq!(at_chat[0]["tools"], json!([]));
    // Same file, same id throughout.
    assert_eq!(only_session(&sb), file);
    assert_eq!(jsonl(&sb.session(&["show", &file]))[0]["id"], id);
    // Replaying the system messages gives each run's prompt: the Chat-only
    // patch left only the preamble.
    let sys_msgs = system_messages(&file);
    let chat = sys_msgs
        .iter()
        .find(|m| m["sections"]["preamble"] == "rules")
        .expect("chat-only patch");
    assert!(chat["sections"]["tools"].is_null());
    assert_eq!(chat["toolsRemoved"].as_array().unwrap().len(), 4);
}

#[test]
fn pipeline_runs_with_exactly_the_piped_prompt() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    write(&sb.cwd().join("AGENTS.md"), "pipeline rules\n");
    let bin = |n: &str| bin(n).display().to_string();
    let cmd = format!(
        "'{}' -na | '{}' system | '{}' --system-from - --no-session -p task",
        bin("pi-resources"),
        bin("pi-prompt"),
        bin("pi-run")
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &cmd])
        .env_clear()
        .env("HOME", sb.root().join("home"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PI_CODING_AGENT_DIR", sb.agent())
        .current_dir(sb.cwd())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(ok(&out), "ok\n");
    let direct = sb
        .cmd("pi-prompt")
        .args(["system", "--no-stdin", "-na", "--format", "text"])
        .output()
        .unwrap();
    let (sys, _) = request(&server, 0);
    assert_eq!(format!("{sys}\n"), stdout(&direct));
    // And pi-run alone sends the same prompt.
    ok(&sb
        .cmd("pi-run")
        .args(["-na", "--no-session", "-p", "task"])
        .output()
        .unwrap());
    assert_eq!(request(&server, 1).0, sys);
}

/// `pi-resources -a | pi-prompt system | pi-run --system-from -`: the
/// prompt lists the trusted project's skills, so a run that does not trust
/// the project refuses it (a usage error saying to pass -a; nothing is
/// sent) instead of sending `/skill:x` unexpanded; with -a the skill
/// expands.
#[test]
fn a_trusted_projects_prompt_needs_a_run_that_trusts_it() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    write(
        &sb.cwd().join(".pi/skills/x/SKILL.md"),
        "---\ndescription: The x skill\n---\nDo the x thing.\n",
    );
    let bin = |n: &str| bin(n).display().to_string();
    let pipeline = |run_flags: &str| {
        let cmd = format!(
            "'{}' -a | '{}' system | '{}' {run_flags} --system-from - --no-session -p '/skill:x go'",
            bin("pi-resources"),
            bin("pi-prompt"),
            bin("pi-run")
        );
        std::process::Command::new("bash")
            .args(["-c", &cmd])
            .env_clear()
            .env("HOME", sb.root().join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PI_CODING_AGENT_DIR", sb.agent())
            .current_dir(sb.cwd())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = pipeline("");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("made for a trusted project"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("pass -a to pi-run too"),
        "{}",
        stderr(&out)
    );
    assert!(server.requests.lock().unwrap().is_empty(), "nothing sent");
    let out = pipeline("-a");
    assert_eq!(ok(&out), "ok\n");
    let body = server.requests.lock().unwrap()[0].to_string();
    assert!(
        body.contains("Do the x thing."),
        "the skill expanded: {body}"
    );
    assert!(body.contains("The x skill"), "the prompt lists it: {body}");
}

/// The recorded system message equals pi 1.6.0's for the same tree, byte
/// for byte, except `docs` (ours points at this toolkit's manuals).
#[test]
fn recorded_system_message_matches_real_pi() {
    let Some(o) = Oracle::find("recorded_system_message_matches_real_pi") else {
        return;
    };
    /// (name, files to write, flags).
    type Tree<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<&'a str>);
    let trees: Vec<Tree> = vec![
        (
            "context-and-skills",
            vec![
                ("agent/AGENTS.md", "global\n"),
                ("cwd/AGENTS.md", "# Project\nUse tabs.\n"),
                (
                    "cwd/.pi/skills/deploy/SKILL.md",
                    "---\ndescription: Deploy <safely> & \"fast\"\n---\nbody\n",
                ),
                (
                    "agent/skills/lint/SKILL.md",
                    "---\ndescription: Lint things\n---\nbody\n",
                ),
            ],
            vec!["-a"],
        ),
        (
            "system-files",
            vec![
                ("agent/SYSTEM.md", "You are terse.\n"),
                ("agent/APPEND_SYSTEM.md", "Always answer in English.\n"),
            ],
            vec![],
        ),
        (
            "untrusted",
            vec![
                (
                    "cwd/.pi/skills/deploy/SKILL.md",
                    "---\ndescription: Deploy\n---\nbody\n",
                ),
                ("cwd/.pi/APPEND_SYSTEM.md", "project append\n"),
                ("cwd/CLAUDE.md", "claude rules\n"),
            ],
            vec!["-na"],
        ),
        ("tools-subset", vec![], vec!["--tools", "read,grep,ls"]),
        (
            "bom-flag-files",
            vec![
                ("cwd/sp.md", "\u{feff}From the flag file.\n"),
                ("cwd/ap.md", "\u{feff}Appended from a file.\n"),
            ],
            vec![
                "--system-prompt",
                "sp.md",
                "--append-system-prompt",
                "ap.md",
            ],
        ),
    ];
    for (name, files, flags) in trees {
        let sb = Sandbox::new();
        for (p, text) in &files {
            write(&sb.root().join(p), text);
        }
        let mock = MockLlm::start(&o, sb.root(), &json!([]));
        mock.configure(&sb.agent());
        let mut pi_args: Vec<&str> = flags.clone();
        pi_args.extend(["-p", "hi"]);
        let pi = o.pi160(&sb).args(&pi_args).output().unwrap();
        assert!(pi.status.success(), "{name}: {}", stderr(&pi));
        let ours = sb.cmd("pi-run").args(&pi_args).output().unwrap();
        assert!(ours.status.success(), "{name}: {}", stderr(&ours));
        let ls = jsonl(&sb.session(&["ls", "--all"]));
        assert_eq!(ls.len(), 2, "{name}");
        let mut sys: Vec<Value> = ls
            .iter()
            .map(|s| system_messages(s["path"].as_str().unwrap())[0].clone())
            .collect();
        for m in &mut sys {
            let o = m.as_object_mut().unwrap();
            o.remove("timestamp");
            o["sections"].as_object_mut().unwrap().shift_remove("docs");
        }
        assert_eq!(sys[0], sys[1], "{name}: the recorded system message");
    }
}

/// pi 1.6.0 continues a session pi-run wrote, and pi-run one pi wrote,
/// without re-sending a full prompt: at most a `docs` patch.
#[test]
fn pi_and_pi_run_continue_each_other_with_small_patches() {
    let Some(o) = Oracle::find("pi_and_pi_run_continue_each_other_with_small_patches") else {
        return;
    };
    let sb = Sandbox::new();
    write(&sb.cwd().join("AGENTS.md"), "rules\n");
    let mock = MockLlm::start(&o, sb.root(), &json!([]));
    mock.configure(&sb.agent());
    ok(&sb.cmd("pi-run").args(["-p", "first"]).output().unwrap());
    let file = only_session(&sb);
    let c = o
        .pi160(&sb)
        .args(["--session", &file, "-p", "second"])
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", stderr(&c));
    ok(&sb
        .cmd("pi-run")
        .args(["--session", &file, "-p", "third"])
        .output()
        .unwrap());
    let sys = system_messages(&file);
    assert!(sys.len() <= 3, "{sys:?}");
    for patch in &sys[1..] {
        let keys: Vec<&String> = patch["sections"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["docs"],
            "only the docs section differs between pi and pi-run"
        );
        assert!(patch.get("toolsAdded").is_none());
    }
}

/// For every resources fixture tree (nested context files, `.pi/`
/// resources, ancestor `.agents/skills`, symlinks, collisions, packages,
/// invalid skills, settings filters), the system message `pi-run` records
/// equals pi 1.6.0's, apart from `docs`.
#[test]
fn recorded_system_message_matches_real_pi_on_resource_trees() {
    let Some(o) = Oracle::find("recorded_system_message_matches_real_pi_on_resource_trees") else {
        return;
    };
    let mut compared = 0;
    for name in crate::resources::fixture_names() {
        let tree = crate::resources::build(&name);
        let sb = &tree.sb;
        let mock = MockLlm::start(&o, sb.root(), &json!([]));
        mock.configure(&sb.agent());
        let mut args: Vec<String> = vec![if tree.trusted {
            "-a".into()
        } else {
            "-na".into()
        }];
        args.extend(tree.args.iter().cloned());
        args.extend(["-p".to_string(), "hi".to_string()]);
        let pi = o
            .pi160(sb)
            .current_dir(&tree.cwd)
            .args(&args)
            .output()
            .unwrap();
        assert!(pi.status.success(), "{name}: pi: {}", stderr(&pi));
        // TypeScript extensions in the trees need the oracle's Node 22.
        let ours = sb
            .cmd("pi-run")
            .current_dir(&tree.cwd)
            .env("PI_NODE", &o.node22)
            .args(&args)
            .output()
            .unwrap();
        assert!(ours.status.success(), "{name}: pi-run: {}", stderr(&ours));
        let ls = jsonl(&sb.session(&["ls", "--all"]));
        assert_eq!(ls.len(), 2, "{name}");
        let mut sys: Vec<Value> = ls
            .iter()
            .map(|s| system_messages(s["path"].as_str().unwrap())[0].clone())
            .collect();
        for m in &mut sys {
            let obj = m.as_object_mut().unwrap();
            obj.remove("timestamp");
            obj["sections"]
                .as_object_mut()
                .unwrap()
                .shift_remove("docs");
        }
        assert_eq!(sys[0], sys[1], "{name}: the recorded system message");
        compared += 1;
    }
    assert!(compared >= 9, "{compared} trees");
}

/// Seed 000's order: a session's pin wins over this run's `--tools`, and
/// the user is told; a new session pins the request.
#[test]
fn a_session_pin_wins_over_requested_tools() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    ok(&sb
        .cmd("pi-run")
        .args(["--tools", "read,ls", "-p", "one"])
        .output()
        .unwrap());
    let file = only_session(&sb);
    assert_eq!(
        jsonl(&sb.session(&["select-tool", &file]))[0]["tools"],
        json!(["read", "ls"])
    );
    let out = sb
        .cmd("pi-run")
        .args(["--session", &file, "--tools", "bash", "-p", "two"])
        .output()
        .unwrap();
    ok(&out);
    assert!(
        stderr(&out).contains("pins its tools (read, ls)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(request(&server, 1).1, ["read", "ls"]);
}

#[test]
fn prompt_flag_files_give_the_same_prompt_in_pi_prompt_and_pi_run() {
    // `--system-prompt` / `--append-system-prompt` take text or a file
    // path in both binaries (one library function decides).
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    write(&sb.cwd().join("sp.md"), "System from a file.\n");
    write(&sb.cwd().join("ap.md"), "Appended from a file.\n");
    let flags = [
        "--system-prompt",
        "sp.md",
        "--append-system-prompt",
        "ap.md",
        "--append-system-prompt",
        "-inline text",
    ];
    let direct = sb
        .cmd("pi-prompt")
        .args(["system", "--no-stdin", "--format", "text"])
        .args(flags)
        .output()
        .unwrap();
    let text = ok(&direct);
    assert!(text.contains("System from a file."), "{text}");
    assert!(text.contains("Appended from a file."), "{text}");
    assert!(text.contains("-inline text"), "{text}");
    assert!(!text.contains("sp.md"), "{text}");
    ok(&sb
        .cmd("pi-run")
        .args(flags)
        .args(["--no-session", "-p", "task"])
        .output()
        .unwrap());
    let (sys, _) = request(&server, 0);
    assert_eq!(format!("{sys}\n"), text);
}
