//! `pi-resources` against the real pi 1.6.0: for every fixture tree in
//! tests/fixtures/resources, the skills, prompt templates, themes,
//! extensions, context files and system-prompt files we report — names,
//! paths, order — and the collision / validation diagnostics equal what
//! pi's own `DefaultResourceLoader` loads for the same tree and agent dir
//! (tests/oracle/resources/sdk-resources.mjs). Plus bad input and output
//! format checks that need no oracle.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::*;

fn fixture_dir() -> PathBuf {
    repo().join("tests/fixtures/resources")
}

/// One fixture tree, built in a fresh sandbox.
pub(crate) struct Tree {
    pub(crate) sb: Sandbox,
    pub(crate) cwd: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) trusted: bool,
}

/// The names of the fixture trees.
pub(crate) fn fixture_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

pub(crate) fn build(name: &str) -> Tree {
    let spec = read_json(&fixture_dir().join(format!("{name}.json")));
    let sb = Sandbox::new();
    let root = sb.root().to_path_buf();
    let sub = |s: &str| s.replace("$ROOT", &root.display().to_string());
    for d in spec["dirs"].as_array().into_iter().flatten() {
        std::fs::create_dir_all(root.join(d.as_str().unwrap())).unwrap();
    }
    for (p, content) in spec["files"].as_object().into_iter().flatten() {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, sub(content.as_str().unwrap())).unwrap();
    }
    for (link, target) in spec["symlinks"].as_object().into_iter().flatten() {
        let path = root.join(link);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target.as_str().unwrap(), &path).unwrap();
    }
    let cwd = root.join(spec["cwd"].as_str().unwrap_or("cwd"));
    std::fs::create_dir_all(&cwd).unwrap();
    let args = spec["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| sub(a.as_str().unwrap()))
        .collect();
    Tree {
        sb,
        cwd,
        args,
        trusted: spec["trusted"].as_bool().unwrap_or(true),
    }
}

impl Tree {
    /// `pi-resources --format jsonl` for this tree.
    fn ours(&self) -> Vec<Value> {
        let out = self
            .sb
            .cmd("pi-resources")
            .arg("--cwd")
            .arg(&self.cwd)
            .arg(if self.trusted { "-a" } else { "-na" })
            .args(["--format", "jsonl"])
            .args(&self.args)
            .output()
            .unwrap();
        ok(&out);
        jsonl(&out)
    }

    /// pi 1.6.0's DefaultResourceLoader for this tree.
    pub(crate) fn theirs(&self, o: &Oracle) -> Value {
        let out = Command::new(&o.node22)
            .arg(repo().join("tests/oracle/resources/sdk-resources.mjs"))
            .arg("--cwd")
            .arg(&self.cwd)
            .arg("--agent-dir")
            .arg(self.sb.agent())
            .arg(if self.trusted {
                "--trusted"
            } else {
                "--untrusted"
            })
            .args(
                self.args
                    .iter()
                    .map(|a| if a == "-e" { "-e" } else { a.as_str() }),
            )
            .env_clear()
            .env("HOME", self.sb.root().join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PI_CODING_AGENT_DIR", self.sb.agent())
            .env("PI_OFFLINE", "1")
            .env("PI_ORACLE_DIR", &o.root)
            .current_dir(&self.cwd)
            .output()
            .unwrap();
        assert!(out.status.success(), "oracle: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn of_type<'a>(recs: &'a [Value], t: &str) -> Vec<&'a Value> {
    recs.iter().filter(|r| r["type"] == t).collect()
}

/// The comparable view of our records.
fn our_view(recs: &[Value]) -> Value {
    let pairs = |t: &str| -> Vec<Value> {
        of_type(recs, t)
            .iter()
            .map(|r| json!([r["name"], r["path"]]))
            .collect()
    };
    let skills: Vec<Value> = of_type(recs, "skill")
        .iter()
        .map(|r| {
            json!([
                r["name"],
                r["path"],
                r["description"],
                r["disableModelInvocation"]
            ])
        })
        .collect();
    let prompts: Vec<Value> = of_type(recs, "prompt")
        .iter()
        .map(|r| {
            json!([
                r["name"],
                r["path"],
                r["description"],
                r.get("argumentHint")
            ])
        })
        .collect();
    let diags: Vec<Value> = of_type(recs, "diagnostic")
        .iter()
        .filter(|d| d["resourceType"] != "package" && d["resourceType"] != "extension")
        .map(|d| diag_view(&d["kind"], &d["path"], &d["message"], &d["winner"]))
        .collect();
    json!({
        "skills": skills,
        "prompts": prompts,
        "themes": of_type(recs, "theme").iter().map(|r| r["path"].clone()).collect::<Vec<_>>(),
        "extensions": of_type(recs, "extension").iter().map(|r| r["path"].clone()).collect::<Vec<_>>(),
        "context": of_type(recs, "context_file").iter().map(|r| r["path"].clone()).collect::<Vec<_>>(),
        "system": of_type(recs, "system_prompt").iter().filter(|r| r["kind"] == "system").map(|r| r["path"].clone()).collect::<Vec<_>>(),
        "append": of_type(recs, "system_prompt").iter().filter(|r| r["kind"] == "append").map(|r| r["path"].clone()).collect::<Vec<_>>(),
        "diagnostics": diags,
        "_pairs": pairs("skill").len(),
    })
}

/// YAML parser messages differ in wording (pi uses the `yaml` package);
/// theme token checks are not replicated: both compare by kind and path.
fn diag_view(kind: &Value, path: &Value, message: &Value, winner: &Value) -> Value {
    let m = message.as_str().unwrap_or("");
    let yaml = m.contains("line") || m.contains("Theme token");
    let msg = if yaml || m.starts_with("Failed to parse theme") {
        Value::Null
    } else {
        message.clone()
    };
    json!([kind, path, msg, winner])
}

/// The comparable view of pi's answer.
fn their_view(pi: &Value, ours: &Value) -> Value {
    let arr = |k: &str| pi[k].as_array().cloned().unwrap_or_default();
    let mut diags: Vec<Value> = Vec::new();
    for k in ["skillDiagnostics", "promptDiagnostics", "themeDiagnostics"] {
        for d in arr(k) {
            let winner = d["collision"]["winnerPath"].clone();
            diags.push(diag_view(&d["type"], &d["path"], &d["message"], &winner));
        }
    }
    // Diagnostics come per type in pi; ours are in load order per type too.
    json!({
        "skills": arr("skills").iter().map(|s| json!([s["name"], s["path"], s["description"], s["disableModelInvocation"]])).collect::<Vec<_>>(),
        "prompts": arr("prompts").iter().map(|p| json!([p["name"], p["path"], p["description"], p.get("argumentHint")])).collect::<Vec<_>>(),
        "themes": arr("themes").iter().map(|t| t["path"].clone()).collect::<Vec<_>>(),
        "extensions": arr("extensions").iter().map(|e| e["path"].clone()).collect::<Vec<_>>(),
        "context": arr("agentsFiles"),
        "system": if pi["systemPrompt"].is_null() { json!([]) } else { json!([pi["systemPrompt"]]) },
        "append": arr("appendSystemPrompt"),
        "diagnostics": diags,
        "_pairs": ours["_pairs"],
    })
}

/// Sorts diagnostics (pi groups them by resource type, with warnings and
/// collisions interleaved as it loads; we do the same, but the interleaving
/// of two types is not part of the contract).
fn normalize(mut v: Value) -> Value {
    if let Some(d) = v["diagnostics"].as_array_mut() {
        d.sort_by_key(|x| x.to_string());
    }
    v
}

fn compare(name: &str) {
    let Some(o) = Oracle::find(&format!("resources_vs_pi::{name}")) else {
        return;
    };
    let tree = build(name);
    let ours = our_view(&tree.ours());
    let theirs = their_view(&tree.theirs(&o), &ours);
    let (ours, theirs) = (normalize(ours), normalize(theirs));
    let root = tree.sb.root().display().to_string();
    let show = |v: &Value| {
        serde_json::to_string_pretty(v)
            .unwrap()
            .replace(&root, "$ROOT")
    };
    assert_eq!(
        show(&ours),
        show(&theirs),
        "fixture {name}: ours (left) vs pi 1.6.0 (right)"
    );
}

#[test]
fn vs_pi_nested_context() {
    compare("nested-context");
}
#[test]
fn vs_pi_pi_dirs() {
    compare("pi-dirs");
}
#[test]
fn vs_pi_agents_ancestors() {
    compare("agents-ancestors");
}
#[test]
fn vs_pi_symlinks() {
    compare("symlinks");
}
#[test]
fn vs_pi_collisions() {
    compare("collisions");
}
#[test]
fn vs_pi_collisions_untrusted() {
    compare("collisions-untrusted");
}
#[test]
fn vs_pi_packages() {
    compare("packages");
}
#[test]
fn vs_pi_invalid_skills() {
    compare("invalid-skills");
}
#[test]
fn vs_pi_settings_filters() {
    compare("settings-filters");
}
#[test]
fn vs_pi_bom() {
    compare("bom");
}
#[test]
fn vs_pi_agents_skills_layout() {
    compare("agents-skills-layout");
}

/// Runs `pi-resources ARGS` in the sandbox's cwd.
fn run(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    sb.cmd("pi-resources").args(args).output().unwrap()
}

fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

#[test]
fn jsonl_starts_with_the_trust_record_and_text_is_grouped() {
    let sb = Sandbox::new();
    write(
        &sb.cwd().join(".pi/skills/s/SKILL.md"),
        "---\ndescription: d\n---\n",
    );
    write(&sb.cwd().join("AGENTS.md"), "rules");
    let recs = jsonl(&run(&sb, &["-a", "--format", "jsonl"]));
    assert_eq!(recs[0]["type"], "trust");
    assert_eq!(recs[0]["decision"], "trusted");
    assert_eq!(recs[0]["reason"], "cli");
    let skill = &of_type(&recs, "skill")[0];
    assert_eq!(skill["source"], "project");
    assert_eq!(skill["name"], "s");
    assert_eq!(of_type(&recs, "context_file").len(), 1);
    // Untrusted: the project skill is gone, context files stay.
    let recs = jsonl(&run(&sb, &["-na", "--format", "jsonl"]));
    assert_eq!(recs[0]["trusted"], false);
    assert!(of_type(&recs, "skill").is_empty());
    assert_eq!(of_type(&recs, "context_file").len(), 1);
    let text = ok(&run(&sb, &["-a", "--format", "text"]));
    assert!(text.starts_with("Project: trusted (cli)"), "{text}");
    assert!(
        text.contains("Skills (1)") && text.contains("Context files (1)"),
        "{text}"
    );
    let none = jsonl(&run(&sb, &["-a", "--no-context-files", "--no-skills"]));
    assert!(of_type(&none, "context_file").is_empty() && of_type(&none, "skill").is_empty());
}

#[test]
fn corrupt_settings_is_exit_2_naming_file_line_column_and_untouched() {
    let sb = Sandbox::new();
    let bad = "{\n  \"skills\": [\n  oops\n}";
    write(&sb.agent().join("settings.json"), bad);
    let out = run(&sb, &["-a"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("settings.json:3:3"), "{err}");
    assert_eq!(
        std::fs::read_to_string(sb.agent().join("settings.json")).unwrap(),
        bad
    );
    // The project's, when trusted.
    std::fs::remove_file(sb.agent().join("settings.json")).unwrap();
    write(&sb.cwd().join(".pi/settings.json"), "[1,");
    let out = run(&sb, &["-a"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(".pi/settings.json:1:"),
        "{}",
        stderr(&out)
    );
    // Untrusted, the project file is not read at all.
    ok(&run(&sb, &["-na"]));
}

#[test]
fn corrupt_trust_json_is_exit_2_and_untouched() {
    let sb = Sandbox::new();
    write(&sb.cwd().join(".pi/settings.json"), "{}");
    write(&sb.agent().join("trust.json"), "{not json");
    let out = run(&sb, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("trust.json"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(sb.agent().join("trust.json")).unwrap(),
        "{not json"
    );
}

#[test]
fn unknown_package_and_missing_cli_path_are_warnings() {
    let sb = Sandbox::new();
    write(
        &sb.agent().join("settings.json"),
        r#"{"packages":["npm:nope-not-installed","git:github.com/x/y"]}"#,
    );
    write(
        &sb.agent().join("skills/ok/SKILL.md"),
        "---\ndescription: d\n---\n",
    );
    let recs = jsonl(&run(&sb, &["-na", "--skill", "does/not/exist"]));
    let diags = of_type(&recs, "diagnostic");
    assert_eq!(
        diags
            .iter()
            .filter(|d| d["resourceType"] == "package")
            .count(),
        2
    );
    assert!(diags.iter().any(|d| d["resourceType"] == "skill"
        && d["message"].as_str().unwrap().contains("does not exist")));
    assert_eq!(of_type(&recs, "skill").len(), 1);
}

#[test]
fn unreadable_dir_and_symlink_loop_skip_only_themselves() {
    let sb = Sandbox::new();
    let skills = sb.agent().join("skills");
    write(&skills.join("good/SKILL.md"), "---\ndescription: d\n---\n");
    write(
        &skills.join("locked/SKILL.md"),
        "---\ndescription: d\n---\n",
    );
    std::os::unix::fs::symlink("..", skills.join("good/loop")).unwrap();
    std::os::unix::fs::symlink("/nonexistent", skills.join("dangling")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        skills.join("locked"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let out = run(&sb, &["-na"]);
    std::fs::set_permissions(
        skills.join("locked"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let recs = jsonl(&out);
    let names: Vec<_> = of_type(&recs, "skill")
        .iter()
        .map(|s| s["name"].clone())
        .collect();
    assert!(names.contains(&json!("good")), "{names:?}");
}

#[test]
fn missing_cwd_is_a_usage_error() {
    let sb = Sandbox::new();
    let out = run(&sb, &["--cwd", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no/such/dir"));
}

/// Seed 002: "CLI > project > user > packages", first wins — a `--skill`
/// path beats a project and a user skill of the same name (pi 1.6.0 itself
/// loads `--skill` paths last; the seed is the brief).
#[test]
fn cli_paths_win_collisions() {
    let sb = Sandbox::new();
    let skill = |dir: &Path, desc: &str| {
        std::fs::create_dir_all(dir.join("dup")).unwrap();
        std::fs::write(
            dir.join("dup/SKILL.md"),
            format!("---\ndescription: {desc}\n---\n"),
        )
        .unwrap();
    };
    let cli_dir = sb.root().join("clidir");
    skill(&cli_dir, "from the command line");
    skill(&sb.cwd().join(".pi/skills"), "from the project");
    skill(&sb.agent().join("skills"), "from the user");
    let recs = jsonl(&run(&sb, &["-a", "--skill", cli_dir.to_str().unwrap()]));
    let skills: Vec<&Value> = recs.iter().filter(|r| r["type"] == "skill").collect();
    assert_eq!(skills.len(), 1);
    assert_eq!(skills[0]["description"], "from the command line");
    assert_eq!(skills[0]["source"], "cli");
    let collisions: Vec<&Value> = recs
        .iter()
        .filter(|r| r["type"] == "diagnostic" && r["kind"] == "collision")
        .collect();
    assert_eq!(collisions.len(), 2, "{collisions:?}");
    let winner = cli_dir.join("dup/SKILL.md").canonicalize().unwrap();
    assert!(collisions
        .iter()
        .all(|c| std::path::Path::new(c["winner"].as_str().unwrap())
            .canonicalize()
            .unwrap()
            == winner));
}
