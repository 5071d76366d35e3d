//! Round trip: every line of every fixture, plus lines with entry types,
//! roles, blocks and fields this version does not know, survives
//! read → write unchanged in meaning.

use serde_json::Value;

use crate::common::*;

/// Lines a future pi might write.
const FUTURE_LINES: &[&str] = &[
    r#"{"type":"hologram","id":"f0000001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","beam":{"color":"blue","power":[1,2.5,null]}}"#,
    r#"{"type":"message","id":"f0000002","parentId":"f0000001","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"oracle","content":"prophecy","timestamp":2,"confidence":0.9},"entryFlag":true}"#,
    r#"{"type":"message","id":"f0000003","parentId":"f0000002","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":[{"type":"text","text":"hi","lang":"en"},{"type":"audio","data":"AAAA","format":"wav"}],"timestamp":3,"mood":"curious"}}"#,
    r#"{"type":"message","id":"f0000004","parentId":"f0000003","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm","thinkingSignature":"sig","redacted":false},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"},"thoughtSignature":"x"}],"api":"anthropic-messages","provider":"anthropic","model":"claude","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"reasoning":7,"totalTokens":3,"cost":{"input":0.000003,"output":0.00003,"cacheRead":0,"cacheWrite":0,"total":0.000033,"totalFromProvider":0.00004}},"stopReason":"toolUse","timestamp":4,"responseId":"r1","durationMs":12.5,"diagnostics":[{"k":1}]}}"#,
    r#"{"type":"message","id":"f0000005","parentId":"f0000004","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"x"}],"details":null,"isError":false,"timestamp":5,"nestedCalls":{"calls":[],"complete":true}}}"#,
    r#"{"type":"label","id":"f0000006","parentId":"f0000005","timestamp":"2026-01-01T00:00:06.000Z","targetId":"f0000003","label":"here","color":"red"}"#,
    r#"{"type":"custom","customType":"ext","data":null,"id":"f0000007","parentId":"f0000006","timestamp":"2026-01-01T00:00:07.000Z"}"#,
    r#"{"type":"compaction","id":"f0000008","parentId":"f0000007","timestamp":"2026-01-01T00:00:08.000Z","summary":"s","firstKeptEntryId":"f0000005","tokensBefore":100,"details":{"readFiles":["a"],"modifiedFiles":[]},"fromHook":false,"strategy":"v9"}"#,
    r#"{"type":"context_edit","id":"f0000009","parentId":"f0000008","timestamp":"2026-01-01T00:00:09.000Z","targetId":"f0000003","replacement":null}"#,
    r#"{"type":"usage","id":"f000000a","parentId":"f0000009","timestamp":"2026-01-01T00:00:10.000Z","kind":"cache_warm","provider":"anthropic","model":"claude","usage":{"input":0,"output":0,"cacheRead":5,"cacheWrite":0,"totalTokens":5,"cost":{"input":0,"output":0,"cacheRead":0.1,"cacheWrite":0,"total":0.1}},"note":"warm"}"#,
    r#"{"type":"message","id":"f000000b","parentId":"f000000a","timestamp":"2026-01-01T00:00:11.000Z","message":{"role":"system","content":"","sections":{"preamble":"p","skills":null},"timestamp":11,"toolsRemoved":[{"name":"write"}],"extraTool":1}}"#,
    r#"{"type":"label","id":"f000000c","parentId":"f000000b","timestamp":"2026-01-01T00:00:12.000Z"}"#,
];

fn values(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check_round_trip(sb: &Sandbox, file: &std::path::Path) {
    let input = std::fs::read_to_string(file).unwrap();
    let out = sb.session(&["show", file.to_str().unwrap(), "--format", "jsonl"]);
    let output = ok(&out);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    let (a, b) = (values(&input), values(&output));
    assert_eq!(a.len(), b.len(), "{}", file.display());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "{} line {}", file.display(), i + 1);
    }
}

#[test]
fn every_fixture_line_round_trips() {
    let sb = Sandbox::with_fixtures();
    let mut n = 0;
    for sc in sb.manifest()["scenarios"].as_array().unwrap() {
        check_round_trip(&sb, &sb.agent().join(sc["file"].as_str().unwrap()));
        n += 1;
    }
    assert!(n >= 9);
}

#[test]
fn unknown_types_roles_blocks_and_fields_round_trip() {
    let sb = Sandbox::new();
    let header = r#"{"type":"session","version":3,"id":"rt","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p","futureHeaderField":{"a":1}}"#;
    let p = sb.root().join("future.jsonl");
    std::fs::write(&p, format!("{header}\n{}\n", FUTURE_LINES.join("\n"))).unwrap();
    check_round_trip(&sb, &p);
    // A fork copies unknown entries on the path verbatim too (label
    // entries are re-created at the end, so parents past one are re-linked).
    let forked = jsonl(&sb.session(&["fork", p.to_str().unwrap(), "--format", "jsonl"]));
    let fork_text = std::fs::read_to_string(forked[0]["path"].as_str().unwrap()).unwrap();
    let unparent = |mut v: Value| {
        v.as_object_mut().unwrap().remove("parentId");
        v
    };
    let copied: Vec<Value> = values(&fork_text).into_iter().map(unparent).collect();
    let originals = values(&FUTURE_LINES.join("\n"));
    for o in originals.into_iter().filter(|o| o["type"] != "label") {
        let o = unparent(o);
        assert!(copied.iter().any(|c| c == &o), "fork lost {o}");
    }
}

#[test]
fn migrate_keeps_the_old_file_and_writes_version_3() {
    let sb = Sandbox::new();
    let v1 = concat!(
        r#"{"type":"session","id":"old1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}"#,
        "\n",
        r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
        "\n",
        r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"h","content":"b","display":true,"timestamp":2}}"#,
        "\n",
    );
    let p = sb.root().join("v1.jsonl");
    std::fs::write(&p, v1).unwrap();
    let rec = jsonl(&sb.session(&["migrate", p.to_str().unwrap(), "--format", "jsonl"]));
    assert_eq!(rec[0]["from"], 1);
    let backup = sb.root().join("v1.jsonl.v1.bak");
    assert_eq!(
        std::fs::read_to_string(&backup).unwrap(),
        v1,
        "old file kept byte for byte"
    );
    let new = values(&std::fs::read_to_string(&p).unwrap());
    assert_eq!(new[0]["version"], 3);
    assert_eq!(new[1]["parentId"], Value::Null);
    assert_eq!(new[2]["parentId"], new[1]["id"]);
    assert_eq!(new[2]["message"]["role"], "custom");
    // Migrating again changes nothing.
    let before = std::fs::read(&p).unwrap();
    let rec = jsonl(&sb.session(&["migrate", p.to_str().unwrap(), "--format", "jsonl"]));
    assert_eq!(rec[0]["changed"], false);
    assert_eq!(before, std::fs::read(&p).unwrap());
    // And the real pi reads the result.
    if let Some(o) = Oracle::find("migrate_keeps_the_old_file_and_writes_version_3") {
        let html = sb.root().join("m.html");
        let out = o
            .pi160(&sb)
            .args(["--export", p.to_str().unwrap(), html.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            before,
            std::fs::read(&p).unwrap(),
            "pi found nothing to migrate"
        );
    }
}
