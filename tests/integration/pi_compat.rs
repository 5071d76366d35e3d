//! Compatibility with the real pi: our reading of sessions pi 1.6.0 and
//! 0.73.1 wrote equals pi 1.6.0's own SDK answers, and sessions we edit are
//! opened and continued by the real pi 1.6.0.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::common::*;

/// The fields `pi-session ls` shares with pi's `SessionInfo`, normalised.
fn comparable_ls(v: &Value) -> Value {
    json!({
        "id": v["id"],
        "cwd": v["cwd"],
        "name": v.get("name").cloned().unwrap_or(Value::Null),
        "parentSession": v.get("parentSession").or(v.get("parentSessionPath")).cloned().unwrap_or(Value::Null),
        "created": v["created"],
        "modified": v["modified"],
        "messageCount": v["messageCount"],
        "firstMessage": v["firstMessage"],
    })
}

fn by_id(list: &[Value]) -> BTreeMap<String, Value> {
    list.iter()
        .map(|v| (v["id"].as_str().unwrap().to_string(), comparable_ls(v)))
        .collect()
}

fn check_ls_against(ours: &[Value], pi: &[Value], what: &str) {
    let ours = by_id(ours);
    let pi = by_id(pi);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        pi.keys().collect::<Vec<_>>(),
        "{what}: session ids"
    );
    for (id, p) in &pi {
        assert_eq!(&ours[id], p, "{what}: session {id}");
    }
}

#[test]
fn ls_all_matches_pi_sdk_listing() {
    let sb = Sandbox::with_fixtures();
    let out = sb.session(&["ls", "--all", "--format", "jsonl"]);
    let ours = jsonl(&out);
    assert!(
        stderr(&out).is_empty(),
        "no warnings expected: {}",
        stderr(&out)
    );
    // The listing pi 1.6.0's SDK gave when the fixtures were made...
    let expected = sb.expected("list-all.json");
    check_ls_against(
        &ours,
        expected.as_array().unwrap(),
        "expected/list-all.json",
    );
    assert_eq!(ours.len(), 9);
    // ...and the one it gives now, on this very copy.
    if let Some(o) = Oracle::find("ls_all_matches_pi_sdk_listing") {
        let live = o.node(
            "sdk-list.mjs",
            &["--all", sb.agent().join("sessions").to_str().unwrap()],
        );
        let live: Value = serde_json::from_slice(&live.stdout).expect("sdk-list output");
        check_ls_against(
            &ours,
            live.as_array().unwrap(),
            "live SessionManager.listAll()",
        );
    }
}

#[test]
fn ls_of_one_cwd_matches_pi_sdk_list() {
    let sb = Sandbox::with_fixtures();
    // Sessions made in other cwds, placed in the sandbox cwd's folder: pi's
    // list(cwd) does not filter by header cwd, and neither do we.
    let cwd = sb.cwd().canonicalize().unwrap();
    let dir = sb
        .agent()
        .join("sessions")
        .join(pi_enc(cwd.to_str().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["plain-160", "tools-073"] {
        let f = sb.fixture_file(name);
        std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let ours = jsonl(&sb.session(&["ls", "--format", "jsonl"]));
    assert_eq!(ours.len(), 2);
    if let Some(o) = Oracle::find("ls_of_one_cwd_matches_pi_sdk_list") {
        let live = sdk_list_cwd(&o, &cwd, &sb.agent());
        check_ls_against(
            &ours,
            live.as_array().unwrap(),
            "live SessionManager.list(cwd)",
        );
    }
}

/// Every file and folder name under `dir`, with the file texts.
fn tree_texts(dir: &std::path::Path, out: &mut Vec<(String, Option<String>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push((p.display().to_string(), None));
            tree_texts(&p, out);
        } else {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p.display().to_string(), Some(text)));
        }
    }
}

/// The committed fixtures name none of the generator's scratch paths, only
/// placeholders; a sandbox copy fills every one in: each scenario's cwd is
/// an existing folder of the sandbox, its file lies in pi's folder for that
/// cwd (pi's own `list(cwd)` finds it there), and the fork's parent is the
/// copy of plain-160.
#[test]
fn fixtures_hold_placeholders_the_sandbox_fills() {
    let raw_root = repo().join("tests/fixtures/pi-sessions");
    let mut raw = Vec::new();
    tree_texts(&raw_root, &mut raw);
    assert!(raw.len() > 30, "{} fixture files", raw.len());
    for (path, text) in &raw {
        let rel = path.strip_prefix(raw_root.to_str().unwrap()).unwrap();
        for scratch in ["/tmp/", "pi-fixture"] {
            assert!(!rel.contains(scratch), "{rel} names {scratch}");
            assert!(
                !text.as_deref().unwrap_or("").contains(scratch),
                "{rel} holds {scratch}"
            );
        }
    }
    let sb = Sandbox::with_fixtures();
    let mut copied = Vec::new();
    tree_texts(&sb.agent().join("sessions"), &mut copied);
    assert_eq!(copied.len(), 18, "9 folders, 9 files");
    for (path, text) in &copied {
        assert!(!path.contains("@FIXTURE_"), "{path}");
        assert!(
            !text.as_deref().unwrap_or("").contains("@FIXTURE_"),
            "{path}"
        );
    }
    for name in [
        "MANIFEST.json",
        "expected/list-all.json",
        "expected/context/forked-160.json",
    ] {
        assert!(
            !sb.fixture_json(name).to_string().contains("@FIXTURE_"),
            "{name}"
        );
    }
    let mut parent = None;
    for sc in sb.manifest()["scenarios"].as_array().unwrap() {
        let name = sc["name"].as_str().unwrap();
        let file = sb.fixture_file(name);
        let text = std::fs::read_to_string(&file).unwrap();
        let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let cwd = sb.proj().join(name);
        assert_eq!(header["cwd"], cwd.display().to_string(), "{name}");
        assert!(cwd.is_dir(), "{name}: {}", cwd.display());
        assert_eq!(
            file.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap(),
            pi_enc(cwd.to_str().unwrap()),
            "{name}"
        );
        if let Some(p) = header.get("parentSession") {
            parent = Some(p.clone());
        }
    }
    let plain = sb.fixture_file("plain-160").canonicalize().unwrap();
    assert_eq!(parent, Some(Value::String(plain.display().to_string())));
    if let Some(o) = Oracle::find("fixtures_hold_placeholders_the_sandbox_fills") {
        let cwd = sb.proj().join("tools-160");
        let live = sdk_list_cwd(&o, &cwd, &sb.agent());
        let ids: Vec<&Value> = live.as_array().unwrap().iter().map(|s| &s["id"]).collect();
        assert_eq!(ids, [&sb.scenario("tools-160")["sessionId"]]);
    }
}

fn pi_enc(cwd: &str) -> String {
    format!(
        "--{}--",
        cwd.trim_start_matches('/').replace(['/', '\\', ':'], "-")
    )
}

/// Our `context` messages for a leaf (None = default leaf).
fn our_context(sb: &Sandbox, file: &str, leaf: Option<&str>) -> (Vec<Value>, Value) {
    let mut args = vec!["context", file, "--format", "jsonl"];
    if let Some(l) = leaf {
        args.extend(["--leaf", l]);
    }
    let out = sb.session(&args);
    let recs = jsonl(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let head = recs[0].clone();
    assert_eq!(head["type"], "context");
    let msgs = recs[1..].iter().map(|r| r["message"].clone()).collect();
    (msgs, head)
}

#[test]
fn context_matches_pi_build_session_context() {
    let sb = Sandbox::with_fixtures();
    let mut checked = 0;
    for sc in sb.manifest()["scenarios"].as_array().unwrap() {
        let Some(ctx_file) = sc["context"].as_str() else {
            continue;
        };
        let expected = sb.fixture_json(ctx_file);
        let file = sb.agent().join(sc["file"].as_str().unwrap());
        let (msgs, head) = our_context(&sb, file.to_str().unwrap(), None);
        assert_eq!(
            Value::Array(msgs),
            expected["messages"],
            "{}: messages",
            sc["name"]
        );
        assert_eq!(
            head["thinkingLevel"], expected["thinkingLevel"],
            "{}",
            sc["name"]
        );
        assert_eq!(head["model"], expected["model"], "{}", sc["name"]);
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} scenarios checked");
}

#[test]
fn context_at_every_leaf_matches_pi() {
    let Some(o) = Oracle::find("context_at_every_leaf_matches_pi") else {
        return;
    };
    let sb = Sandbox::with_fixtures();
    let files: Vec<String> = sb.manifest()["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            sb.agent()
                .join(s["file"].as_str().unwrap())
                .display()
                .to_string()
        })
        .collect();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let out = o.node("sdk-context-all.mjs", &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut leaves = 0;
    for f in &files {
        let per = &all[f.as_str()];
        for (leaf, ctx) in per["contexts"].as_object().unwrap() {
            let (msgs, head) = our_context(&sb, f, Some(leaf));
            assert_eq!(Value::Array(msgs), ctx["messages"], "{f} at leaf {leaf}");
            assert_eq!(
                head["thinkingLevel"], ctx["thinkingLevel"],
                "{f} at leaf {leaf}"
            );
            assert_eq!(head["model"], ctx["model"], "{f} at leaf {leaf}");
            leaves += 1;
        }
    }
    assert!(leaves > 50, "only {leaves} leaves compared");
}

/// Edits a copy of a pi session with pi-session, then checks the real pi
/// 1.6.0 exports it and continues it, and still agrees with our context.
#[test]
fn sessions_we_edit_are_opened_and_continued_by_real_pi() {
    let Some(o) = Oracle::find("sessions_we_edit_are_opened_and_continued_by_real_pi") else {
        return;
    };
    let sb = Sandbox::with_fixtures();
    let file = sb.fixture_file("tools-160");
    let f = file.to_str().unwrap();
    // label, name, select-tool on the original; fork at an earlier entry.
    let tree = jsonl(&sb.session(&["tree", f, "--format", "jsonl"]));
    let user_entry = tree.iter().find(|n| n["role"] == "user").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&sb.session(&["label", f, &user_entry, "checkpoint"]));
    ok(&sb.session(&["name", f, "Edited by pi-session"]));
    ok(&sb.session(&["select-tool", f, "--tools", "read,bash"]));
    let forked = jsonl(&sb.session(&["fork", f, "--at", &user_entry, "--format", "jsonl"]));
    let fork_path = forked[0]["path"].as_str().unwrap().to_string();

    for target in [f, fork_path.as_str()] {
        let html = sb.root().join("out.html");
        let out = o
            .pi160(&sb)
            .args(["--export", target, html.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pi --export {target}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert!(std::fs::metadata(&html).unwrap().len() > 1000);
    }

    // Continue both with the real pi against the mock.
    let mock = MockLlm::start(
        &o,
        sb.root(),
        &json!([{"text": "continued by pi"}, {"text": "fork continued by pi"}]),
    );
    mock.configure(&sb.agent());
    for (target, reply) in [
        (f, "continued by pi"),
        (fork_path.as_str(), "fork continued by pi"),
    ] {
        let before = std::fs::read_to_string(target).unwrap();
        let out = o
            .pi160(&sb)
            .args(["--session", target, "-p", "please continue"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pi --session {target}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert_eq!(stdout(&out).trim(), reply);
        let after = std::fs::read_to_string(target).unwrap();
        assert!(after.starts_with(&before), "pi only appends");
        // Our view of the continued file agrees with pi's SDK.
        let (ours, _) = our_context(&sb, target, None);
        let live = o.node("sdk-context.mjs", &[target]);
        let live: Value = serde_json::from_slice(&live.stdout).unwrap();
        assert_eq!(Value::Array(ours.clone()), live["messages"], "{target}");
        let last = ours.last().unwrap();
        assert_eq!(last["role"], "assistant");
        assert_eq!(last["content"][0]["text"], reply);
    }
    // pi kept our edits: the name and the tool selection are still there.
    let ls = jsonl(&sb.session(&["ls", "--all", "--format", "jsonl"]));
    let edited = ls.iter().find(|s| s["path"] == f).unwrap();
    assert_eq!(edited["name"], "Edited by pi-session");
    let sel = jsonl(&sb.session(&["select-tool", f, "--format", "jsonl"]));
    assert_eq!(sel[0]["tools"], json!(["read", "bash"]));
    // The fork names its parent.
    let fork_ls = ls.iter().find(|s| s["path"] == fork_path.as_str()).unwrap();
    assert_eq!(
        fork_ls["parentSession"],
        Value::String(std::fs::canonicalize(f).unwrap().display().to_string())
    );
}

/// pi's SDK answer to `SessionManager.list(cwd)` with `agent` as the agent dir.
fn sdk_list_cwd(o: &Oracle, cwd: &Path, agent: &Path) -> Value {
    let live = o.node(
        "sdk-list.mjs",
        &[
            "--cwd",
            cwd.to_str().unwrap(),
            "--agent-dir",
            agent.to_str().unwrap(),
        ],
    );
    serde_json::from_slice(&live.stdout).expect("sdk-list output")
}
