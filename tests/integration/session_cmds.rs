//! The `pi-session` subcommands on sessions the real pi wrote: what they
//! print, what they append, and that edits mean what they say.

use serde_json::{json, Value};

use crate::common::*;

fn branched(sb: &Sandbox) -> String {
    sb.fixture_file("branched-160").display().to_string()
}

#[test]
fn tree_marks_leaf_branch_points_and_labels() {
    let sb = Sandbox::with_fixtures();
    let f = branched(&sb);
    let text = ok(&sb.session(&["tree", &f, "--format", "text"]));
    assert!(text.contains("⑂ 2 branches"), "{text}");
    assert!(text.contains("◀ leaf"), "{text}");
    assert!(text.contains("[checkpoint-1]"), "{text}");
    assert!(text.contains("├─ ○") && text.contains("└─ ●"), "{text}");
    let nodes = jsonl(&sb.session(&["tree", &f, "--format", "jsonl"]));
    assert_eq!(nodes.iter().filter(|n| n["leaf"] == true).count(), 1);
    assert_eq!(
        nodes
            .iter()
            .filter(|n| n["children"].as_u64() > Some(1))
            .count(),
        1
    );
    let labelled: Vec<&Value> = nodes
        .iter()
        .filter(|n| n["label"] == "checkpoint-1")
        .collect();
    assert_eq!(labelled.len(), 1);
    assert_eq!(labelled[0]["role"], "user");
    // Entries off the active branch are marked so.
    assert_eq!(nodes.iter().filter(|n| n["onBranch"] == false).count(), 2);
}

#[test]
fn ls_text_table_and_limits() {
    let sb = Sandbox::with_fixtures();
    let text = ok(&sb
        .cmd("pi-session")
        .args(["ls", "--all", "--format", "text"])
        .env("COLUMNS", "160")
        .output()
        .unwrap());
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("ID") && lines[0].contains("FIRST MESSAGE"));
    assert_eq!(lines.len(), 10);
    // Ids are cut where they become unique, not at a fixed 8 characters.
    let ids: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let mut uniq = ids.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), ids.len(), "{ids:?}");
    assert!(text.contains("Branch demo") && text.contains("What is 2+2?"));
    let two = jsonl(&sb.session(&["ls", "--all", "-n", "2", "--sort", "created"]));
    assert_eq!(two.len(), 2);
    assert!(two[0]["created"].as_str() >= two[1]["created"].as_str());
    // Tokens and cost are summed from the assistant messages.
    let all = jsonl(&sb.session(&["ls", "--all"]));
    let tools = all.iter().find(|s| s["name"] == "Tool demo").unwrap();
    let stats = jsonl(&sb.session(&[
        "stats",
        tools["path"].as_str().unwrap(),
        "--format",
        "jsonl",
    ]));
    assert_eq!(stats[0]["totalTokens"], tools["tokens"]);
    assert!(tools["tokens"].as_u64().unwrap() > 0 && tools["cost"].as_f64().unwrap() > 0.0);
}

#[test]
fn search_finds_text_across_sessions() {
    let sb = Sandbox::with_fixtures();
    let hits = jsonl(&sb.session(&["search", "3+3", "--all"]));
    assert!(hits.len() >= 2, "{hits:?}");
    assert!(hits
        .iter()
        .all(|h| h["type"] == "match" && h["text"].as_str().unwrap().contains("3+3")));
    let ci = jsonl(&sb.session(&["search", "WHAT IS 4+4", "--all", "-i"]));
    assert_eq!(ci.len(), 1);
    assert_eq!(ci[0]["role"], "user");
    let none = sb.session(&["search", "no such text anywhere", "--all"]);
    assert_eq!(none.status.code(), Some(1));
    let limited = jsonl(&sb.session(&["search", "hello", "--all", "-n", "1"]));
    assert_eq!(limited.len(), 1);
}

#[test]
fn branch_moves_the_leaf_and_summary_enters_context() {
    let sb = Sandbox::with_fixtures();
    let f = branched(&sb);
    let nodes = jsonl(&sb.session(&["tree", &f]));
    let off = nodes
        .iter()
        .find(|n| n["onBranch"] == false && n["role"] == "assistant")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let at_off: Vec<Value> = jsonl(&sb.session(&["context", &f, "--leaf", &off]))[1..].to_vec();
    ok(&sb.session(&["branch", &f, "--to", &off]));
    let now: Vec<Value> = jsonl(&sb.session(&["context", &f]))[1..].to_vec();
    assert_eq!(
        now, at_off,
        "after branch --to, the leaf context is the target's"
    );
    ok(&sb.session(&["branch", &f, "--to", &off, "--summary", "Tried 4+4 too."]));
    let with_summary = jsonl(&sb.session(&["context", &f]));
    let last = &with_summary.last().unwrap()["message"];
    assert_eq!(last["role"], "branchSummary");
    assert_eq!(last["summary"], "Tried 4+4 too.");
}

#[test]
fn label_name_and_clear() {
    let sb = Sandbox::with_fixtures();
    let f = sb.fixture_file("plain-160").display().to_string();
    let nodes = jsonl(&sb.session(&["tree", &f]));
    let user = nodes.iter().find(|n| n["role"] == "user").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let rec = jsonl(&sb.session(&["label", &f, &user[..4], "start"]));
    assert_eq!(rec[0]["entry"]["type"], "label");
    assert_eq!(rec[0]["entry"]["targetId"], user.as_str());
    let nodes = jsonl(&sb.session(&["tree", &f]));
    assert_eq!(
        nodes.iter().find(|n| n["id"] == user.as_str()).unwrap()["label"],
        "start"
    );
    ok(&sb.session(&["label", &f, &user, "--clear"]));
    let nodes = jsonl(&sb.session(&["tree", &f]));
    assert!(nodes
        .iter()
        .find(|n| n["id"] == user.as_str())
        .unwrap()
        .get("label")
        .is_none());
    ok(&sb.session(&["name", &f, "  My session  "]));
    let ls = jsonl(&sb.session(&["ls", "--all"]));
    assert_eq!(
        ls.iter().find(|s| s["path"] == f.as_str()).unwrap()["name"],
        "My session"
    );
    // The context the model sees is unchanged by labels and names.
    let expected = sb.expected("context/plain-160.json");
    let msgs: Vec<Value> = jsonl(&sb.session(&["context", &f]))[1..]
        .iter()
        .map(|r| r["message"].clone())
        .collect();
    assert_eq!(Value::Array(msgs), expected["messages"]);
}

#[test]
fn select_tool_three_states() {
    let sb = Sandbox::with_fixtures();
    let f = sb.fixture_file("plain-160").display().to_string();
    let state = |args: &[&str]| {
        let mut a = vec!["select-tool", f.as_str()];
        a.extend_from_slice(args);
        jsonl(&sb.session(&a))[0].clone()
    };
    assert_eq!(state(&[])["state"], "legacy");
    assert_eq!(state(&[])["tools"], Value::Null);
    assert_eq!(state(&["--chat-only"])["state"], "chat_only");
    assert_eq!(state(&[])["tools"], json!([]));
    let s = state(&["--tools", "read,read,ls"]);
    assert_eq!(s["state"], "tools");
    assert_eq!(s["tools"], json!(["read", "ls"]));
    assert_eq!(state(&["--clear"])["state"], "legacy");
    // The entries are pi-web's format.
    let last = std::fs::read_to_string(&f)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string();
    let v: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(v["customType"], "pi-web:tool-selection");
    assert_eq!(v["data"], json!({"version": 1, "cleared": true}));
    // An invalid newer entry is skipped with a warning.
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str(&format!(
        "{}\n",
        json!({"type":"custom","customType":"pi-web:tool-selection","data":{"version":2,"tools":["read"]},"id":"bad00001","parentId":v["id"],"timestamp":"2026-12-01T00:00:00.000Z"})
    ));
    std::fs::write(&f, text).unwrap();
    let out = sb.session(&["select-tool", &f]);
    assert_eq!(jsonl(&out)[0]["state"], "legacy");
    assert!(
        stderr(&out).contains("bad00001 is invalid (unsupported version 2)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn export_html_is_self_contained_and_md_is_readable() {
    let sb = Sandbox::with_fixtures();
    let f = sb.fixture_file("tools-160").display().to_string();
    let out_html = sb.root().join("s.html");
    let r = sb.session(&["export", &f, "-o", out_html.to_str().unwrap()]);
    ok(&r);
    let html = std::fs::read_to_string(&out_html).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    for forbidden in [
        "<link",
        "src=\"http",
        "href=\"http",
        "@import",
        "<script src",
    ] {
        assert!(!html.contains(forbidden), "{forbidden} in HTML");
    }
    // One script, the page's own, and a policy that allows nothing else.
    assert_eq!(html.matches("<script").count(), 1);
    assert!(html.contains("content=\"default-src 'none'; img-src data:;"));
    assert!(html.contains("What is in notes.txt?") && html.contains("tool result"));
    let md = ok(&sb.session(&["export", &f, "--format", "md"]));
    assert!(md.starts_with("# Tool demo"));
    assert!(md.contains("## User") && md.contains("**Tool call `read`**"));
    // Refuses to overwrite the session itself.
    let r = sb.session(&["export", &f, "-o", &f]);
    assert_eq!(r.status.code(), Some(2));
}

#[test]
fn fork_at_entry_makes_a_child_session() {
    let sb = Sandbox::with_fixtures();
    let f = branched(&sb);
    let nodes = jsonl(&sb.session(&["tree", &f]));
    let first_answer = nodes.iter().find(|n| n["role"] == "assistant").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let rec = jsonl(&sb.session(&["fork", &f, "--at", &first_answer]))[0].clone();
    let path = rec["path"].as_str().unwrap();
    assert!(path.starts_with(std::path::Path::new(&f).parent().unwrap().to_str().unwrap()));
    let shown = jsonl(&sb.session(&["show", path]));
    assert_eq!(
        shown[0]["parentSession"],
        Value::String(std::fs::canonicalize(&f).unwrap().display().to_string())
    );
    assert_eq!(shown[0]["version"], 3);
    // The fork's context is the source's context at that entry.
    let a: Vec<Value> = jsonl(&sb.session(&["context", &f, "--leaf", &first_answer]))[1..].to_vec();
    let b: Vec<Value> = jsonl(&sb.session(&["context", path]))[1..].to_vec();
    assert_eq!(a, b);
    // The label on the kept user message is re-created in the fork.
    let fork_nodes = jsonl(&sb.session(&["tree", path]));
    assert!(fork_nodes.iter().any(|n| n["label"] == "checkpoint-1"));
}

#[test]
fn show_and_fork_keep_entries_as_stored() {
    // Fields pi left out stay out, unknown fields stay where they are:
    // `show` prints the stored lines and `fork` copies them, changing only
    // `parentId` (the label entry in the path is dropped and re-linked).
    let sb = Sandbox::new();
    let dir = sb.root().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("s.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","zzz":1}"#,
        r#"{"type":"message","id":"a1","parentId":null,"extraMid":{"k":1},"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","custom":"x","content":"hi","timestamp":1}}"#,
        r#"{"type":"label","id":"l1","parentId":"a1","timestamp":"2026-01-01T00:00:01.500Z","targetId":"a1","label":"mark"}"#,
        r#"{"type":"message","id":"a2","parentId":"l1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"yo","weird":true}],"model":"m","stopReason":"stop","timestamp":2}}"#,
    ];
    std::fs::write(&f, lines.join("\n") + "\n").unwrap();
    let fs = f.display().to_string();
    let shown = ok(&sb.session(&["show", &fs, "--format", "jsonl"]));
    assert_eq!(shown, lines.join("\n") + "\n");
    let rec = jsonl(&sb.session(&["fork", &fs]))[0].clone();
    let text = std::fs::read_to_string(rec["path"].as_str().unwrap()).unwrap();
    let forked: Vec<&str> = text.lines().collect();
    assert_eq!(forked[1], lines[1]);
    assert_eq!(
        forked[2],
        lines[3].replace(r#""parentId":"l1""#, r#""parentId":"a1""#)
    );
    assert!(forked[3].contains(r#""type":"label""#) && forked[3].contains(r#""label":"mark""#));
}

#[test]
fn closed_stdout_ends_quietly() {
    let sb = Sandbox::new();
    let p = sb.root().join("big.jsonl");
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"big","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
    );
    let mut parent = "null".to_string();
    for i in 0..20000 {
        text.push_str(&format!(
            "\n{{\"type\":\"custom\",\"customType\":\"x\",\"data\":{{\"n\":{i}}},\"id\":\"e{i:07}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:01.000Z\"}}"
        ));
        parent = format!("\"e{i:07}\"");
    }
    text.push('\n');
    std::fs::write(&p, text).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{}' show '{}' --format jsonl | head -n 1; echo \"rc=${{PIPESTATUS[0]}}\"",
            bin("pi-session").display(),
            p.display()
        ))
        .output()
        .unwrap();
    assert!(
        stderr(&out).is_empty(),
        "no error on a closed pipe: {}",
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(text.starts_with("{\"type\":\"session\""), "{text}");
    assert!(text.ends_with("rc=0\n"), "exit 0 on a closed pipe: {text}");
}
