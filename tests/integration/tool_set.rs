//! The tool set: `pi-run`, `pi-prompt system` and `pi-resources` give the
//! same tools (and `pi-run` and `pi-prompt` the same system prompt) for
//! the same tool flags and `defaultTools` settings, equal to what pi 1.6.0
//! declares to the model for those flags (the real pi is run for every
//! cell when the oracle is installed).

use serde_json::{json, Value};

use crate::common::*;

fn write(p: &std::path::Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// One cell: flags, user `defaultTools`, project `defaultTools`, and pi
/// 1.6.0's answer (the tools it declared; tools this toolkit does not
/// have — powershell, codemode, tool_search — left out).
struct Cell {
    flags: &'static [&'static str],
    user: Option<&'static str>,
    project: Option<&'static str>,
    want: &'static [&'static str],
}

const RBEW: &[&str] = &["read", "bash", "edit", "write"];

fn cells() -> Vec<Cell> {
    let c = |flags, user, project, want| Cell {
        flags,
        user,
        project,
        want,
    };
    vec![
        c(&[], None, None, RBEW),
        c(&["--tools", "gr*"], None, None, &["grep"]),
        c(
            &["-t", "write,*e*"],
            None,
            None,
            &["write", "read", "edit", "grep"],
        ),
        c(&["-t", "ls,read,ls"], None, None, &["ls", "read"]),
        // Exact names first, then the patterns' matches in registry order.
        c(&["--tools", "gr*,read"], None, None, &["read", "grep"]),
        c(
            &["--tools", "f*,ls,gr*,read"],
            None,
            None,
            &["ls", "read", "grep", "find"],
        ),
        c(
            &["--tools", "ls,*d*,bash"],
            None,
            None,
            &["ls", "bash", "read", "edit", "find"],
        ),
        c(&["--tools", " read , grep "], None, None, &["read", "grep"]),
        c(
            &["-t", "*"],
            None,
            None,
            &["read", "bash", "edit", "write", "grep", "find", "ls"],
        ),
        c(
            &["--tools", "-bash"],
            None,
            None,
            &["read", "edit", "write"],
        ),
        c(
            &["--tools", "+grep,-bash"],
            None,
            None,
            &["read", "edit", "write", "grep"],
        ),
        c(&["--tools", "+grep,-grep"], None, None, RBEW),
        c(&["-xt", "b*"], None, None, &["read", "edit", "write"]),
        c(&["--exclude-tools", "e*,w*"], None, None, &["read", "bash"]),
        c(
            &["-xt", "bash", "-xt", "read"],
            None,
            None,
            &["bash", "edit", "write"],
        ),
        c(&["-nt"], None, None, &[]),
        c(&["-nbt"], None, None, &[]),
        c(&["-nt", "-t", "+grep"], None, None, &["grep"]),
        c(&["-nbt", "--tools", "ls,grep"], None, None, &["ls", "grep"]),
        c(&["--tools", "grep", "-xt", "gr*"], None, None, &[]),
        c(
            &["--tools", "read", "--tools", "grep"],
            None,
            None,
            &["grep"],
        ),
        c(&["--tools", "nosuch"], None, None, &[]),
        c(&["--tools", ""], None, None, &[]),
        c(
            &[],
            Some(r#"["+grep"]"#),
            None,
            &["read", "bash", "edit", "write", "grep"],
        ),
        c(&[], Some(r#"["grep"]"#), None, &["grep"]),
        c(&[], Some("[]"), None, &[]),
        c(&[], Some(r#"["read","+grep"]"#), None, &["read", "grep"]),
        c(&[], Some(r#"["+grep","read"]"#), None, &["read", "grep"]),
        c(&[], Some(r#"["gr*"]"#), None, &[]),
        c(&[], Some(r#""read""#), None, &[]),
        c(
            &["--tools", "+ls"],
            Some(r#"["grep"]"#),
            None,
            &["grep", "ls"],
        ),
        c(&["--tools", "ls"], Some(r#"["grep"]"#), None, &["ls"]),
        c(&["-nbt"], Some(r#"["grep"]"#), None, &[]),
        c(
            &["-a"],
            Some(r#"["grep"]"#),
            Some(r#"["+ls"]"#),
            &["grep", "ls"],
        ),
        c(&["-na"], Some(r#"["grep"]"#), Some(r#"["+ls"]"#), &["grep"]),
        c(&["-a"], Some(r#"["grep"]"#), Some(r#"["ls"]"#), &["ls"]),
        c(
            &["-a"],
            Some(r#"["+grep"]"#),
            Some("[]"),
            &["read", "bash", "edit", "write", "grep"],
        ),
        c(
            &["-a"],
            Some(r#"["+grep"]"#),
            Some(r#"["read","+ls"]"#),
            &["read", "ls"],
        ),
        c(
            &["-a"],
            Some("[]"),
            Some(r#"["+ls"]"#),
            &["read", "bash", "edit", "write", "ls"],
        ),
    ]
}

/// A sandbox with a loopback model, the cell's settings, an AGENTS.md and a
/// skill (so the `rules`, `skills` and `project_context` sections exist).
fn sandbox(cell: &Cell) -> (Sandbox, ScriptServer) {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    if let Some(u) = cell.user {
        let p = sb.agent().join("settings.json");
        let mut v: Value = read_json(&p);
        v["defaultTools"] = serde_json::from_str(u).unwrap();
        std::fs::write(&p, v.to_string()).unwrap();
    }
    if let Some(p) = cell.project {
        write(
            &sb.cwd().join(".pi/settings.json"),
            &format!(r#"{{"defaultTools":{p}}}"#),
        );
    }
    write(&sb.cwd().join("AGENTS.md"), "Project rules.\n");
    write(
        &sb.agent().join("skills/lint/SKILL.md"),
        "---\ndescription: Lint the code\n---\nRun the linter.\n",
    );
    (sb, server)
}

/// Tool names declared in one recorded chat-completions request.
fn request_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|x| x["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn request_system(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// pi-run's declared tools and system prompt for the cell.
fn pi_run(sb: &Sandbox, server: &ScriptServer, cell: &Cell) -> (Vec<String>, String) {
    let n = server.requests.lock().unwrap().len();
    let mut args: Vec<&str> = cell.flags.to_vec();
    args.extend(["--no-session", "-p", "hi"]);
    let out = sb.cmd("pi-run").args(&args).output().unwrap();
    assert!(out.status.success(), "pi-run {args:?}: {}", stderr(&out));
    let reqs = server.requests.lock().unwrap();
    assert_eq!(reqs.len(), n + 1, "pi-run {args:?}: one request");
    (request_tools(&reqs[n]), request_system(&reqs[n]))
}

/// `pi-prompt system`: its tool records and its rendered prompt.
fn pi_prompt(sb: &Sandbox, cell: &Cell) -> (Vec<String>, String) {
    let run = |format: &str| {
        let out = sb
            .cmd("pi-prompt")
            .arg("system")
            .args(cell.flags)
            .args(["--format", format])
            .output()
            .unwrap();
        ok(&out)
    };
    let tools = run("jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["type"] == "tool")
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    let text = run("text");
    (tools, text.strip_suffix('\n').unwrap_or(&text).to_string())
}

/// `pi-resources`: its `tool_set` record.
fn pi_resources(sb: &Sandbox, cell: &Cell) -> Vec<String> {
    let out = sb
        .cmd("pi-resources")
        .args(cell.flags)
        .args(["--format", "jsonl"])
        .output()
        .unwrap();
    let recs = jsonl(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let set = recs
        .iter()
        .find(|r| r["type"] == "tool_set")
        .unwrap_or_else(|| panic!("no tool_set record: {recs:?}"));
    serde_json::from_value(set["tools"].clone()).unwrap()
}

/// The tools the real pi 1.6.0 declared for the cell, restricted to the
/// tools this toolkit has.
fn real_pi(o: &Oracle, sb: &Sandbox, server: &ScriptServer, cell: &Cell) -> Vec<String> {
    let n = server.requests.lock().unwrap().len();
    let mut args: Vec<&str> = cell.flags.to_vec();
    args.extend(["--no-session", "-p", "hi"]);
    let out = o.pi160(sb).args(&args).output().unwrap();
    assert!(out.status.success(), "pi {args:?}: {}", stderr(&out));
    let reqs = server.requests.lock().unwrap();
    assert_eq!(reqs.len(), n + 1, "pi {args:?}: one request");
    request_tools(&reqs[n])
        .into_iter()
        .filter(|t| pi_lib::tools::BUILTIN_TOOLS.contains(&t.as_str()))
        .collect()
}

#[test]
fn the_three_binaries_give_pi_s_tool_set_for_every_flag_and_setting() {
    let oracle = Oracle::find("the_three_binaries_give_pi_s_tool_set_for_every_flag_and_setting");
    let check = |cell: &Cell| {
        let (sb, server) = sandbox(cell);
        let label = format!(
            "flags {:?}, user {:?}, project {:?}",
            cell.flags, cell.user, cell.project
        );
        let (run_tools, run_prompt) = pi_run(&sb, &server, cell);
        let (prompt_tools, prompt_text) = pi_prompt(&sb, cell);
        let resources_tools = pi_resources(&sb, cell);
        assert_eq!(run_tools, cell.want, "pi-run, {label}");
        assert_eq!(prompt_tools, cell.want, "pi-prompt system, {label}");
        assert_eq!(resources_tools, cell.want, "pi-resources, {label}");
        // The same tools, so the same tools/rules/skills sections: the
        // whole prompt pi-prompt renders is the one pi-run sent.
        assert_eq!(prompt_text, run_prompt, "system prompt, {label}");
        if let Some(o) = &oracle {
            assert_eq!(
                real_pi(o, &sb, &server, cell),
                cell.want,
                "pi 1.6.0, {label}"
            );
        }
    };
    // Two workers: the cells are independent (each has its own sandbox
    // and server), and starting the real pi dominates.
    let cells = cells();
    let (a, b) = cells.split_at(cells.len() / 2);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| b.iter().for_each(check));
        a.iter().for_each(check);
        if let Err(e) = other.join() {
            std::panic::resume_unwind(e);
        }
    });
}

/// pi's two tool-flag errors, word for word, from all three binaries.
#[test]
fn tool_flag_errors_are_pi_s() {
    let oracle = Oracle::find("tool_flag_errors_are_pi_s");
    let cases: [(&str, &str); 4] = [
        (
            "read,-bash",
            "--tools: tool names cannot be mixed with +name or -name entries",
        ),
        (
            "+gr*,read",
            "--tools: tool names cannot be mixed with +name or -name entries",
        ),
        (
            "+gr*",
            "--tools: +name and -name entries take exact tool names, not patterns: +gr*",
        ),
        (
            "-x*",
            "--tools: +name and -name entries take exact tool names, not patterns: -x*",
        ),
    ];
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    for (value, message) in cases {
        for (bin, args) in [
            ("pi-run", vec!["--tools", value, "-p", "hi"]),
            ("pi-prompt", vec!["system", "--tools", value]),
            ("pi-resources", vec!["--tools", value]),
        ] {
            let out = sb.cmd(bin).args(&args).output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{bin} {args:?}");
            assert_eq!(
                stderr(&out),
                format!("{bin}: error: {message}\n"),
                "{bin} {args:?}"
            );
        }
        if let Some(o) = &oracle {
            let out = o
                .pi160(&sb)
                .args(["--tools", value, "-p", "hi"])
                .output()
                .unwrap();
            assert_eq!(
                stderr(&out).trim(),
                format!("Error: {message}"),
                "pi --tools {value}"
            );
        }
    }
    assert!(server.requests.lock().unwrap().is_empty(), "no run started");
}

/// Seed 000 still comes first: a session's pin wins over every tool flag
/// and `defaultTools`; the pin is made from a plain (pattern) list.
#[test]
fn a_session_pin_wins_over_flags_and_settings() {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    server.configure(&sb.agent());
    ok(&sb
        .cmd("pi-run")
        .args(["--tools", "r*,l*", "-xt", "read", "-p", "one"])
        .output()
        .unwrap());
    let ls = jsonl(&sb.session(&["ls", "--all"]));
    let file = ls[0]["path"].as_str().unwrap().to_string();
    assert_eq!(
        jsonl(&sb.session(&["select-tool", &file]))[0]["tools"],
        json!(["ls"])
    );
    let p = sb.agent().join("settings.json");
    let mut v: Value = read_json(&p);
    v["defaultTools"] = json!(["+grep"]);
    std::fs::write(&p, v.to_string()).unwrap();
    for flags in [
        vec!["-nt"],
        vec!["-t", "+bash"],
        vec!["-xt", "ls"],
        vec!["-nbt"],
        vec![],
    ] {
        let mut args = vec!["--session", file.as_str()];
        args.extend(&flags);
        args.extend(["-p", "again"]);
        let out = sb.cmd("pi-run").args(&args).output().unwrap();
        ok(&out);
        let reqs = server.requests.lock().unwrap();
        assert_eq!(request_tools(reqs.last().unwrap()), ["ls"], "{flags:?}");
        assert_eq!(
            stderr(&out).contains("pins its tools (ls)"),
            !flags.is_empty(),
            "{flags:?}: {}",
            stderr(&out)
        );
    }
    // pi-prompt diff reads the same pin: nothing to patch.
    let out = sb
        .cmd("pi-prompt")
        .args([
            "diff",
            "--session",
            &file,
            "-t",
            "bash",
            "--format",
            "jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(ok(&out), "");
}

/// pi-resources and pi-prompt take pi's multi-letter short forms of the
/// flags they share with pi-run.
#[test]
fn short_forms_are_shared() {
    let sb = Sandbox::new();
    write(&sb.cwd().join("AGENTS.md"), "rules\n");
    write(
        &sb.agent().join("skills/lint/SKILL.md"),
        "---\ndescription: Lint\n---\nbody\n",
    );
    write(&sb.agent().join("prompts/review.md"), "Review $1\n");
    let flags = [
        "-ns", "-np", "-ne", "-nc", "-na", "-nt", "-nbt", "-xt", "read",
    ];
    let out = sb
        .cmd("pi-resources")
        .args(flags)
        .args(["--format", "jsonl"])
        .output()
        .unwrap();
    let recs = jsonl(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let types: Vec<&str> = recs.iter().map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["trust", "tool_set"], "nothing discovered: {recs:?}");
    let out = sb
        .cmd("pi-prompt")
        .arg("system")
        .args(flags)
        .args(["--format", "jsonl"])
        .output()
        .unwrap();
    let recs = jsonl(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let names: Vec<&str> = recs.iter().filter_map(|r| r["name"].as_str()).collect();
    // No skills or context files; pi's `tools` section says "(none)".
    assert_eq!(names, ["preamble", "tools", "rules", "docs", "cwd"]);
    assert!(!recs.iter().any(|r| r["type"] == "tool"), "{recs:?}");
    // A flag's value is never taken for a short form.
    let out = sb
        .cmd("pi-resources")
        .args(["--tools", "-nt", "--format", "jsonl"])
        .output()
        .unwrap();
    assert_eq!(
        jsonl(&out)[1]["tools"],
        json!(["read", "bash", "edit", "write"])
    );
}

/// `pi-resources | pi-prompt system`: the piped `tool_set` is used unless
/// pi-prompt gets tool options itself; a Chat-only listing gives the
/// Chat-only prompt.
#[test]
fn piped_tool_set_reaches_pi_prompt() {
    use std::io::Write;
    let sb = Sandbox::new();
    write(&sb.cwd().join("AGENTS.md"), "Be nice.\n");
    let piped = |res_args: &[&str], prompt_args: &[&str]| -> Vec<Value> {
        let listing = ok(&sb
            .cmd("pi-resources")
            .args(res_args)
            .args(["--format", "jsonl"])
            .output()
            .unwrap());
        let mut child = sb
            .cmd("pi-prompt")
            .arg("system")
            .args(prompt_args)
            .args(["--format", "jsonl"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(listing.as_bytes())
            .unwrap();
        jsonl(&child.wait_with_output().unwrap())
    };
    let tools = |recs: &[Value]| -> Vec<String> {
        recs.iter()
            .filter(|r| r["type"] == "tool")
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(tools(&piped(&["-t", "gr*"], &[])), ["grep"]);
    assert_eq!(tools(&piped(&["-t", "gr*"], &["-t", "ls"])), ["ls"]);
    let chat = piped(&["--chat-only"], &[]);
    assert!(tools(&chat).is_empty());
    // The trust decision the prompt was planned under comes first.
    assert_eq!(chat[0]["type"], "trust");
    assert_eq!(
        chat[1..],
        [json!({"type": "section", "name": "preamble", "text": "Be nice.\n"})]
    );
}

/// The subagent control tools under every tool flag: `pi-run` (the
/// built-in on) declares `Agent`, `get_subagent_result` and
/// `steer_subagent` exactly where pi 1.6.0 declares an extension's tools of
/// those names (`tests/ext-node/fixtures/subagent-names.ts`; pi's own
/// `tool_search` left out), never says a declared one is "not here", and
/// `pi-prompt system` (also fed by `pi-resources`) gives the same tools and
/// prompt.
#[test]
fn subagent_tools_obey_the_tool_flags_as_pi_treats_an_extension_s_tools() {
    let oracle =
        Oracle::find("subagent_tools_obey_the_tool_flags_as_pi_treats_an_extension_s_tools");
    const A: &str = "Agent";
    const G: &str = "get_subagent_result";
    const S: &str = "steer_subagent";
    let cells: Vec<(&[&str], Vec<&str>)> = vec![
        (&[], vec!["read", "bash", "edit", "write", A, G, S]),
        (&["-nt"], vec![]),
        (&["-nbt"], vec![A, G, S]),
        (
            &["-xt", "Agent"],
            vec!["read", "bash", "edit", "write", G, S],
        ),
        (
            &["-xt", "*agent*"],
            vec!["read", "bash", "edit", "write", A],
        ),
        (&["-t", "read"], vec!["read"]),
        (&["-t", "read,Agent"], vec!["read", A]),
        (&["-t", "Agent,read"], vec![A, "read"]),
        (&["-t", "Ag*"], vec![A]),
        (&["-t", "*_*,read"], vec!["read", G, S]),
        (
            &["-t", "+grep"],
            vec!["read", "bash", "edit", "write", "grep", A, G, S],
        ),
        (
            &["-t", "-Agent"],
            vec!["read", "bash", "edit", "write", A, G, S],
        ),
        (
            &["-t", "+steer_subagent"],
            vec!["read", "bash", "edit", "write", S, A, G],
        ),
        (&["-nt", "-t", "+Agent"], vec![A]),
    ];
    let fixture = repo().join("tests/ext-node/fixtures/subagent-names.ts");
    for (flags, want) in cells {
        let sb = Sandbox::new();
        let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
        server.configure(&sb.agent());
        write(
            &sb.agent().join("agents/settings.json"),
            r#"{"builtInEnabled":true}"#,
        );
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(["--no-session", "-p", "hi"]);
        let out = sb.cmd("pi-run").args(&args).output().unwrap();
        assert!(out.status.success(), "pi-run {flags:?}: {}", stderr(&out));
        let (run_tools, run_system) = {
            let reqs = server.requests.lock().unwrap();
            (request_tools(&reqs[0]), request_system(&reqs[0]))
        };
        assert_eq!(run_tools, want, "pi-run {flags:?}");
        for n in [A, G, S] {
            assert!(
                !stderr(&out).contains(&format!("no tool \"{n}\" here")),
                "{flags:?}: {}",
                stderr(&out)
            );
        }
        let cell = Cell {
            flags,
            user: None,
            project: None,
            want: &[],
        };
        let (prompt_tools, prompt_text) = pi_prompt(&sb, &cell);
        assert_eq!(prompt_tools, want, "pi-prompt system {flags:?}");
        assert_eq!(prompt_text, run_system, "system prompt {flags:?}");
        assert_eq!(pi_resources(&sb, &cell), want, "pi-resources {flags:?}");
        // `pi-resources | pi-prompt system` keeps the listed set.
        let listing = {
            let out = sb
                .cmd("pi-resources")
                .args(flags)
                .args(["--format", "jsonl"])
                .output()
                .unwrap();
            assert!(
                !stderr(&out).contains("here (available"),
                "pi-resources {flags:?}: {}",
                stderr(&out)
            );
            ok(&out)
        };
        let piped = {
            use std::io::Write;
            let mut child = sb
                .cmd("pi-prompt")
                .args(["system", "--format", "jsonl"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(listing.as_bytes())
                .unwrap();
            jsonl(&child.wait_with_output().unwrap())
        };
        let piped_tools: Vec<&str> = piped
            .iter()
            .filter(|r| r["type"] == "tool")
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(piped_tools, want, "pi-resources | pi-prompt {flags:?}");
        if let Some(o) = &oracle {
            let out = o
                .pi160(&sb)
                .arg("-e")
                .arg(&fixture)
                .args(&args)
                .output()
                .unwrap();
            assert!(out.status.success(), "pi {flags:?}: {}", stderr(&out));
            let reqs = server.requests.lock().unwrap();
            let theirs: Vec<String> = request_tools(reqs.last().unwrap())
                .into_iter()
                .filter(|t| t != "tool_search" && t != "codemode" && t != "powershell")
                .collect();
            assert_eq!(theirs, want, "pi 1.6.0 {flags:?}");
        }
    }
}

/// What the tool flags shut out, an extension's `setActiveTools` cannot
/// bring back (`-xt`, a plain `-t` list, `-nt`; not `-t -name`), as in pi
/// 1.6.0 (`tests/ext-node/fixtures/set-active-flags.ts` chooses read,
/// bash, foo, bar in `session_start`).
#[test]
fn set_active_tools_obeys_the_tool_flags_as_pi() {
    let Some(o) = Oracle::find("set_active_tools_obeys_the_tool_flags_as_pi") else {
        return;
    };
    let fixture = repo().join("tests/ext-node/fixtures/set-active-flags.ts");
    let cells: [(&[&str], &[&str]); 6] = [
        (&[], &["read", "bash", "foo", "bar"]),
        (&["-xt", "foo"], &["read", "bash", "bar"]),
        (&["-xt", "bash"], &["read", "foo", "bar"]),
        (&["-t", "read"], &["read"]),
        (&["-nt"], &[]),
        (&["-t", "-foo"], &["read", "bash", "foo", "bar"]),
    ];
    for (flags, want) in cells {
        let sb = Sandbox::new();
        let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
        server.configure(&sb.agent());
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(["--no-session", "-p", "hi"]);
        for pi in [false, true] {
            let mut c = if pi { o.pi160(&sb) } else { sb.cmd("pi-run") };
            let out = c
                .env("PI_NODE", &o.node22)
                .arg("-e")
                .arg(&fixture)
                .args(&args)
                .output()
                .unwrap();
            let who = if pi { "pi 1.6.0" } else { "pi-run" };
            assert!(out.status.success(), "{who} {flags:?}: {}", stderr(&out));
            let reqs = server.requests.lock().unwrap();
            assert_eq!(request_tools(reqs.last().unwrap()), want, "{who} {flags:?}");
        }
    }
}
