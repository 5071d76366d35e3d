//! Our input expansion and `skills` section against pi 1.6.0's, case by
//! case. The cases and pi's answers live in `tests/fixtures/expand/cases.json`
//! (made by `tests/oracle/expand/capture.sh`), so no node is needed here.
//!
//! Each case's files are written to a fresh temp project, the templates and
//! skills built from them the way pi loads them (template content =
//! frontmatter-stripped body; a skill's name as annotated in the case), and
//! `<ROOT>` in pi's answer is replaced by the temp project path.

use std::fs;
use std::path::{Path, PathBuf};

use pi_lib::format::resources::{PromptTemplate, Skill};
use pi_lib::prompt::expand::{expand_input, split_frontmatter, ExpansionKind, NoHooks};
use pi_lib::prompt::skills::skills_section;
use pi_lib::prompt::wrap;
use serde_json::{json, Value};

fn cases() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/expand/cases.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Writes the case's skills; returns those pi loads (the ones with a name).
fn skills(root: &Path, case: &Value) -> Vec<Skill> {
    let mut out = Vec::new();
    for sk in case
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let dir = root.join(".pi/skills").join(s(sk, "dir"));
        let path = dir.join("SKILL.md");
        write(&path, s(sk, "text"));
        let Some(name) = sk.get("name").and_then(Value::as_str) else {
            continue;
        };
        // Built through serde so fields added to `Skill` later keep their defaults.
        let skill: Skill = serde_json::from_value(json!({
            "name": name,
            "description": s(sk, "description"),
            "path": path,
            "baseDir": dir,
            "source": "project",
            "scope": "project",
            "disableModelInvocation": sk
                .get("disableModelInvocation")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }))
        .unwrap_or_else(|e| panic!("skill {name}: {e}"));
        out.push(skill);
    }
    out
}

fn templates(root: &Path, case: &Value) -> Vec<PromptTemplate> {
    let mut out = Vec::new();
    for (name, text) in case
        .get("templates")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let text = text.as_str().unwrap_or_default();
        let path = root.join(".pi/prompts").join(format!("{name}.md"));
        write(&path, text);
        let mut tpl: PromptTemplate = serde_json::from_value(json!({
            "name": name,
            "path": path,
            "source": "project",
            "scope": "project",
        }))
        .unwrap_or_else(|e| panic!("template {name}: {e}"));
        // As the loader reads the file: one leading BOM dropped.
        tpl.content = split_frontmatter(&pi_lib::resources::text::decode(text.as_bytes())).1;
        out.push(tpl);
    }
    out
}

fn root_for(tmp: &Path, name: &str) -> PathBuf {
    let root = tmp.join(name);
    fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    root
}

#[test]
fn expansion_matches_pi_160() {
    let all = cases();
    let list = all["expand"].as_array().cloned().unwrap_or_default();
    assert!(list.len() >= 20, "too few cases: {}", list.len());
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut failures = Vec::new();
    for case in &list {
        let name = s(case, "name");
        let root = root_for(tmp.path(), name);
        let skills = skills(&root, case);
        let templates = templates(&root, case);
        let got = expand_input(s(case, "input"), &skills, &templates, &mut NoHooks);
        let root_str = root.to_string_lossy();
        let want = case["expected"]
            .as_str()
            .map(|t| t.replace("<ROOT>", &root_str));
        let kind = match &got.kind {
            ExpansionKind::Skill { .. } => "skill",
            ExpansionKind::Template { .. } => "template",
            ExpansionKind::Plain => "plain",
            other => panic!("{name}: unexpected {other:?}"),
        };
        if got.text != want || kind != s(case, "kind") {
            failures.push(format!(
                "{name}: input {:?}\n  pi:   {want:?} ({})\n  ours: {:?} ({kind})",
                s(case, "input"),
                s(case, "kind"),
                got.text
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from pi 1.6.0:\n{}",
        failures.len(),
        list.len(),
        failures.join("\n")
    );
}

#[test]
fn skills_section_matches_pi_160() {
    let all = cases();
    let list = all["sections"].as_array().cloned().unwrap_or_default();
    assert!(list.len() >= 3, "too few section cases: {}", list.len());
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    for case in &list {
        let name = s(case, "name");
        let root = root_for(tmp.path(), name);
        let skills = skills(&root, case);
        let tools: Vec<&str> = s(case, "tools").split(',').collect();
        let got = skills_section(&skills, &tools).map(|b| wrap("skills", &b));
        let want = case["expectedSection"]
            .as_str()
            .map(|t| t.replace("<ROOT>", &root.to_string_lossy()));
        assert_eq!(got, want, "section case {name} (tools {:?})", tools);
    }
}
