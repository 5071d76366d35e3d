//! Built-in subagents: `pi-resources agents` (the switch, the limit and the
//! profiles with their sources), driven as a user drives it.

use crate::common::*;
use serde_json::Value;

fn agents(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    sb.cmd("pi-resources")
        .args(args)
        .arg("--format")
        .arg("jsonl")
        .output()
        .unwrap()
}

fn settings_of(recs: &[Value]) -> &Value {
    recs.iter()
        .find(|r| r["type"] == "subagent_settings")
        .expect("a subagent_settings record")
}

fn settings_file(sb: &Sandbox) -> std::path::PathBuf {
    sb.agent().join("agents/settings.json")
}

#[test]
fn agents_show_enable_disable_and_limit() {
    let sb = Sandbox::new();
    let out = agents(&sb, &["agents"]);
    let recs = jsonl(&out);
    ok(&out);
    let s = settings_of(&recs);
    assert_eq!(s["builtInEnabled"], false);
    assert_eq!(s["maxConcurrent"], 10);
    assert!(
        !settings_file(&sb).exists(),
        "showing never creates the file"
    );

    std::fs::create_dir_all(sb.agent().join("agents")).unwrap();
    std::fs::write(settings_file(&sb), r#"{"futureSetting":"x"}"#).unwrap();
    let out = agents(&sb, &["agents", "--enable", "--max-concurrent", "4"]);
    ok(&out);
    let recs = jsonl(&out);
    let s = settings_of(&recs);
    assert_eq!(s["builtInEnabled"], true);
    assert_eq!(s["maxConcurrent"], 4);
    assert_eq!(
        s["changed"],
        serde_json::json!(["builtInEnabled", "maxConcurrent"])
    );
    assert_eq!(
        std::fs::read_to_string(settings_file(&sb)).unwrap(),
        "{\n  \"futureSetting\": \"x\",\n  \"version\": 1,\n  \"builtInEnabled\": true,\n  \"maxConcurrent\": 4\n}"
    );
    let out = agents(&sb, &["agents", "--disable"]);
    ok(&out);
    assert_eq!(settings_of(&jsonl(&out))["builtInEnabled"], false);
}

#[test]
fn agents_refuses_bad_limits_and_damaged_files_without_writing() {
    let sb = Sandbox::new();
    for bad in ["0", "33", "2.5", "x"] {
        let out = agents(&sb, &["agents", "--max-concurrent", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&out).contains("maxConcurrent must be an integer between 1 and 32"),
            "{}",
            stderr(&out)
        );
        assert!(!settings_file(&sb).exists());
    }
    std::fs::create_dir_all(sb.agent().join("agents")).unwrap();
    for damaged in ["{", "[]", "{\"builtInEnabled\":true} x"] {
        std::fs::write(settings_file(&sb), damaged).unwrap();
        for args in [
            &["agents"][..],
            &["agents", "--enable"],
            &["agents", "--max-concurrent", "3"],
        ] {
            let out = agents(&sb, args);
            assert_eq!(out.status.code(), Some(2), "{damaged} {args:?}");
            let err = stderr(&out);
            assert!(err.contains("settings.json"), "{err}");
            assert_eq!(
                std::fs::read_to_string(settings_file(&sb)).unwrap(),
                damaged
            );
        }
    }
}

#[test]
fn agents_lists_profiles_with_sources_and_project_ones_only_when_trusted() {
    let sb = Sandbox::new();
    let write = |p: std::path::PathBuf, t: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    };
    write(
        sb.agent().join("agents/explore.md"),
        "---\ndescription: Global explore\ntools: read\n---\nLook.",
    );
    write(sb.cwd().join(".pi/agents/reviewer.md"), "---\ndescription: Review a change\ntools: none\nmodel: p/m\ncustom_key: kept\n---\nReview.");
    write(
        sb.cwd().join(".pi/agents/bad.md"),
        "---\nname: ../escape\n---\n",
    );
    let profiles = |recs: &[Value]| -> Vec<(String, String, bool)> {
        recs.iter()
            .filter(|r| r["type"] == "subagent_profile")
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["scope"].as_str().unwrap().to_string(),
                    r["effective"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let out = agents(&sb, &["-na", "agents"]);
    ok(&out);
    let recs = jsonl(&out);
    let got = profiles(&recs);
    assert!(
        got.contains(&("explore".into(), "builtin".into(), false)),
        "{got:?}"
    );
    assert!(
        got.contains(&("explore".into(), "global".into(), true)),
        "{got:?}"
    );
    assert!(
        !got.iter().any(|p| p.0 == "reviewer"),
        "untrusted project profile listed: {got:?}"
    );

    let out = agents(&sb, &["-a", "agents"]);
    ok(&out);
    let recs = jsonl(&out);
    let got = profiles(&recs);
    assert!(
        got.contains(&("reviewer".into(), "project".into(), true)),
        "{got:?}"
    );
    let reviewer = recs.iter().find(|r| r["name"] == "reviewer").unwrap();
    assert_eq!(reviewer["tools"], serde_json::json!([]));
    assert_eq!(reviewer["model"], "p/m");
    assert_eq!(reviewer["extra"]["custom_key"], "kept");
    assert!(recs
        .iter()
        .any(|r| r["type"] == "diagnostic" && r["path"].as_str().unwrap().ends_with("bad.md")));
    let shadowed = recs
        .iter()
        .find(|r| r["name"] == "explore" && r["scope"] == "builtin")
        .unwrap();
    assert_eq!(shadowed["shadowedBy"], "global");
}
