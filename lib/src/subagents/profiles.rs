//! Subagent profiles: the three built-ins and Markdown files with YAML
//! frontmatter in `<agentDir>/agents/*.md` (global), `<cwd>/.agents/agents`
//! (workspace) and `<cwd>/.pi/agents` (project; both project-level folders
//! only when the project is trusted and only when they really lie inside the
//! cwd). A later scope replaces an earlier profile of the same
//! case-insensitive name; `enabled: false` hides a profile but still shadows
//! the lower ones. Unknown frontmatter keys are kept in [`Profile::extra`].

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

/// The built-in tool universe a profile's `tools` may name.
pub const BUILTIN_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];
/// The accepted thinking levels.
pub const THINKING_LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];
/// The profile used when `Agent` names none.
pub const DEFAULT_PROFILE: &str = "general-purpose";

/// Where a profile came from, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileScope {
    Builtin,
    Global,
    Workspace,
    Project,
}

impl ProfileScope {
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileScope::Builtin => "builtin",
            ProfileScope::Global => "global",
            ProfileScope::Workspace => "workspace",
            ProfileScope::Project => "project",
        }
    }
}

/// `prompt_mode`: append the profile prompt to pi's, or replace it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptMode {
    Append,
    Replace,
}

/// One profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub name: String,
    pub display_name: String,
    pub description: String,
    /// The trimmed Markdown body: the child's system prompt.
    pub prompt: String,
    /// Built-in tools, deduped, in the file's order.
    pub tools: Vec<String>,
    /// `ext:<ext>[/<tool>]` selectors from `tools`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extension_tools: Vec<String>,
    pub load_skills: bool,
    pub load_extensions: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
    pub inherit_context: bool,
    pub run_in_background: bool,
    pub prompt_mode: PromptMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// `worktree` or `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persist_session: Option<bool>,
    pub enabled: bool,
    pub scope: ProfileScope,
    /// The file (none for built-ins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Frontmatter keys this module does not interpret, in file order.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl Profile {
    /// Chat-only: no tools and neither skills nor extensions.
    pub fn is_chat_only(&self) -> bool {
        self.tools.is_empty()
            && self.extension_tools.is_empty()
            && !self.load_skills
            && !self.load_extensions
    }
}

fn builtin(name: &str, display: &str, description: &str, tools: &[&str], prompt: &str) -> Profile {
    Profile {
        name: name.into(),
        display_name: display.into(),
        description: description.into(),
        prompt: prompt.into(),
        tools: tools.iter().map(|t| t.to_string()).collect(),
        extension_tools: Vec::new(),
        load_skills: false,
        load_extensions: false,
        model: None,
        thinking: None,
        max_turns: None,
        inherit_context: false,
        run_in_background: false,
        prompt_mode: PromptMode::Append,
        color: None,
        isolation: None,
        persist_session: None,
        enabled: true,
        scope: ProfileScope::Builtin,
        path: None,
        extra: Map::new(),
    }
}

/// The built-in profiles.
pub fn builtin_profiles() -> Vec<Profile> {
    const READ_ONLY: [&str; 4] = ["read", "grep", "find", "ls"];
    vec![
        builtin(
            "general-purpose",
            "General purpose",
            "Handle a focused implementation or investigation task",
            &BUILTIN_TOOLS,
            "Work autonomously on the delegated task. Keep the final answer concise and include important files, decisions, and remaining risks.",
        ),
        builtin(
            "explore",
            "Explore",
            "Quickly inspect a codebase without modifying it",
            &READ_ONLY,
            "Explore the codebase to answer the delegated question. Do not modify files. Report concrete findings with file paths and relevant symbols.",
        ),
        builtin(
            "plan",
            "Plan",
            "Design an implementation plan without modifying files",
            &READ_ONLY,
            "Produce an implementation-ready plan for the delegated task. Inspect the repository as needed, do not modify files, and call out dependencies, risks, and verification steps.",
        ),
    ]
}

/// A profile file that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileDiagnostic {
    pub path: PathBuf,
    pub message: String,
}

/// Whether `name` is a valid profile name (`^[A-Za-z0-9][A-Za-z0-9._-]*$`).
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Splits off the frontmatter: `(fields or None when absent/unparsable,
/// body)`. An unterminated block means no frontmatter and the whole file is
/// the body; a block that is not a YAML mapping gives no fields and the text
/// after the closing fence.
fn split(text: &str) -> (Option<Map<String, Value>>, String) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match crate::resources::frontmatter::parse(text) {
        Ok(p) if p.has_frontmatter => (Some(p.fields), p.body),
        Ok(p) => (None, p.body),
        Err(_) => {
            let text = crate::resources::frontmatter::normalize_newlines(text);
            let body = text[3..]
                .find("\n---")
                .map(|end| {
                    let after = &text[end + 3 + 4..];
                    after.find('\n').map_or("", |i| &after[i + 1..]).to_string()
                })
                .unwrap_or(text.clone());
            (None, body)
        }
    }
}

/// Items of a list or comma-separated string, trimmed, empty ones dropped;
/// `None` for any other value.
fn items(v: Option<&Value>) -> Option<Vec<String>> {
    let raw: Vec<String> = match v? {
        Value::String(s) => s.split(',').map(str::to_string).collect(),
        Value::Array(a) => a
            .iter()
            .map(|x| match x {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        _ => return None,
    };
    Some(
        raw.iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// Built-in tool names of a `tools`-like list: `none` → none, `all`/`*`
/// or an empty list → all seven, else the known ones deduped.
fn builtin_tools(list: &[String], empty: &[&str]) -> Vec<String> {
    let lower: Vec<String> = list.iter().map(|s| s.to_ascii_lowercase()).collect();
    if lower.iter().any(|s| s == "none") {
        return Vec::new();
    }
    if lower.is_empty() {
        return empty.iter().map(|s| s.to_string()).collect();
    }
    if lower.iter().any(|s| s == "all" || s == "*") {
        return BUILTIN_TOOLS.iter().map(|s| s.to_string()).collect();
    }
    let mut out: Vec<String> = Vec::new();
    for t in lower {
        if BUILTIN_TOOLS.contains(&t.as_str()) && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

fn ext_selectors(list: &[String]) -> Vec<String> {
    list.iter()
        .filter(|s| s.len() > 4 && s[..4].eq_ignore_ascii_case("ext:"))
        .cloned()
        .collect()
}

/// A switch like `load_skills`: a boolean is itself, any string or list
/// means on.
fn switch(v: Option<&Value>) -> Option<bool> {
    match v? {
        Value::Bool(b) => Some(*b),
        Value::String(_) | Value::Array(_) => Some(true),
        _ => None,
    }
}

fn trimmed(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The frontmatter keys interpreted here.
const KNOWN_KEYS: &[&str] = &[
    "name",
    "display_name",
    "description",
    "tools",
    "disallowed_tools",
    "load_skills",
    "skills",
    "load_extensions",
    "extensions",
    "model",
    "thinking",
    "max_turns",
    "inherit_context",
    "run_in_background",
    "prompt_mode",
    "color",
    "isolation",
    "persist_session",
    "enabled",
];

/// Parses one profile file's text; `stem` is the file name without `.md`.
pub fn parse_profile(
    text: &str,
    stem: &str,
    scope: ProfileScope,
    path: Option<PathBuf>,
) -> Result<Profile, String> {
    let (fields, body) = split(text);
    let fm = fields.unwrap_or_default();
    let name = trimmed(fm.get("name")).unwrap_or_else(|| stem.to_string());
    if !valid_name(&name) {
        return Err(format!(
            "invalid profile name {name:?}: use letters, numbers, dots, underscores and hyphens"
        ));
    }
    let tool_list = items(fm.get("tools")).unwrap_or_default();
    let disallowed = items(fm.get("disallowed_tools")).unwrap_or_default();
    let denied = builtin_tools(&disallowed, &[]);
    let tools: Vec<String> = builtin_tools(&tool_list, &BUILTIN_TOOLS)
        .into_iter()
        .filter(|t| !denied.contains(t))
        .collect();
    let denied_ext: Vec<String> = ext_selectors(&disallowed)
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let extension_tools: Vec<String> = ext_selectors(&tool_list)
        .into_iter()
        .filter(|s| !denied_ext.contains(&s.to_ascii_lowercase()))
        .collect();
    let either = |a: &str, b: &str| switch(fm.get(a)).or_else(|| switch(fm.get(b)));
    let bool_of = |k: &str| fm.get(k).and_then(Value::as_bool);
    let extra: Map<String, Value> = fm
        .iter()
        .filter(|(k, _)| !KNOWN_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Profile {
        display_name: trimmed(fm.get("display_name")).unwrap_or_else(|| name.clone()),
        description: trimmed(fm.get("description")).unwrap_or_else(|| name.clone()),
        name,
        prompt: body.trim().to_string(),
        load_skills: either("load_skills", "skills").unwrap_or(false),
        load_extensions: either("load_extensions", "extensions")
            .unwrap_or(!extension_tools.is_empty()),
        tools,
        extension_tools,
        model: trimmed(fm.get("model")),
        thinking: trimmed(fm.get("thinking")).filter(|t| THINKING_LEVELS.contains(&t.as_str())),
        max_turns: fm
            .get("max_turns")
            .and_then(Value::as_f64)
            .filter(|n| n.is_finite() && *n >= 1.0)
            .map(|n| n.floor() as u64),
        inherit_context: bool_of("inherit_context").unwrap_or(false),
        run_in_background: bool_of("run_in_background").unwrap_or(false),
        prompt_mode: if fm.get("prompt_mode").and_then(Value::as_str) == Some("replace") {
            PromptMode::Replace
        } else {
            PromptMode::Append
        },
        color: trimmed(fm.get("color")),
        isolation: trimmed(fm.get("isolation")).filter(|s| s == "worktree" || s == "off"),
        persist_session: bool_of("persist_session"),
        enabled: bool_of("enabled").unwrap_or(true),
        scope,
        path,
        extra,
    })
}

/// The profiles of one folder: regular `*.md` files (not symlinks, no
/// recursion), in file-name order; unreadable or invalid ones are reported.
pub fn load_dir(dir: &Path, scope: ProfileScope) -> (Vec<Profile>, Vec<ProfileDiagnostic>) {
    let mut profiles = Vec::new();
    let mut diags = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (profiles, diags);
    };
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    for path in files {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = match crate::regular_file::read_capped(&path, 1 << 20, None) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(_) => {
                    diags.push(ProfileDiagnostic {
                        path,
                        message: "not valid UTF-8".into(),
                    });
                    continue;
                }
            },
            Err(e) => {
                diags.push(ProfileDiagnostic {
                    path,
                    message: e.to_string(),
                });
                continue;
            }
        };
        match parse_profile(&text, &stem, scope, Some(path.clone())) {
            Ok(p) => profiles.push(p),
            Err(message) => diags.push(ProfileDiagnostic { path, message }),
        }
    }
    (profiles, diags)
}

/// Every profile source, lowest precedence first (shadowed ones included).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProfileSources {
    pub profiles: Vec<Profile>,
    pub diagnostics: Vec<ProfileDiagnostic>,
}

/// `dir` if its real path lies inside the real `cwd`.
fn inside(dir: &Path, real_cwd: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(dir).ok()?;
    real.starts_with(real_cwd).then_some(real)
}

/// Reads every source: built-ins, global, and — when `trusted` — the
/// workspace and project folders (only if really inside `cwd`).
pub fn list_sources(agent_dir: &Path, cwd: &Path, trusted: bool) -> ProfileSources {
    let mut out = ProfileSources {
        profiles: builtin_profiles(),
        diagnostics: Vec::new(),
    };
    let mut dirs = vec![(agent_dir.join("agents"), ProfileScope::Global)];
    if trusted {
        if let Ok(real_cwd) = std::fs::canonicalize(cwd) {
            for (rel, scope) in [
                (".agents/agents", ProfileScope::Workspace),
                (".pi/agents", ProfileScope::Project),
            ] {
                let dir = cwd.join(rel);
                match inside(&dir, &real_cwd) {
                    Some(_) => dirs.push((dir, scope)),
                    None if dir.exists() => out.diagnostics.push(ProfileDiagnostic {
                        path: dir,
                        message: "Agent profile directory is outside the project root".into(),
                    }),
                    None => {}
                }
            }
        }
    }
    for (dir, scope) in dirs {
        let (p, d) = load_dir(&dir, scope);
        out.profiles.extend(p);
        out.diagnostics.extend(d);
    }
    out
}

impl ProfileSources {
    /// The effective profiles: a later source replaces an earlier one of the
    /// same case-insensitive name; sorted by display name.
    pub fn effective(&self) -> Vec<Profile> {
        let mut out: Vec<Profile> = Vec::new();
        for p in &self.profiles {
            match out
                .iter_mut()
                .find(|q| q.name.eq_ignore_ascii_case(&p.name))
            {
                Some(q) => *q = p.clone(),
                None => out.push(p.clone()),
            }
        }
        out.sort_by(|a, b| {
            a.display_name
                .to_lowercase()
                .cmp(&b.display_name.to_lowercase())
                .then_with(|| a.display_name.cmp(&b.display_name))
        });
        out
    }

    /// Whether a source is shadowed by a later one of the same name.
    pub fn is_shadowed(&self, index: usize) -> bool {
        let Some(p) = self.profiles.get(index) else {
            return false;
        };
        self.profiles[index + 1..]
            .iter()
            .any(|q| q.name.eq_ignore_ascii_case(&p.name))
    }
}

/// The enabled effective profile named `name` (trimmed, case-insensitive).
pub fn resolve<'a>(effective: &'a [Profile], name: &str) -> Option<&'a Profile> {
    let want = name.trim().to_lowercase();
    effective
        .iter()
        .find(|p| p.name.to_lowercase() == want && p.enabled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Profile {
        parse_profile(text, "stem", ProfileScope::Global, None).unwrap()
    }

    #[test]
    fn builtins_are_kebab_case_and_read_only_ones_have_no_shell() {
        let b = builtin_profiles();
        let names: Vec<&str> = b.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["general-purpose", "explore", "plan"]);
        for p in &b {
            assert!(p.name.chars().all(|c| c.is_ascii_lowercase() || c == '-'));
            assert!(p.enabled && !p.load_skills && !p.load_extensions && !p.run_in_background);
            if p.name != "general-purpose" {
                assert!(!p.tools.iter().any(|t| t == "bash"), "{}", p.name);
            }
        }
        assert_eq!(b[0].tools, BUILTIN_TOOLS);
    }

    #[test]
    fn frontmatter_keys_and_defaults() {
        let p = parse("---\nname: reviewer\ndisplay_name: ' Code reviewer '\ndescription: Review a change\ntools: [read, grep, bogus, read]\nmodel: provider/review-model\nthinking: high\nmax_turns: 4.9\nprompt_mode: replace\nisolation: worktree\nrun_in_background: true\ncolor: blue\nallowed_subagents: [x]\n---\n\n  Review carefully.\n\n");
        assert_eq!(p.name, "reviewer");
        assert_eq!(p.display_name, "Code reviewer");
        assert_eq!(p.description, "Review a change");
        assert_eq!(p.tools, ["read", "grep"]);
        assert_eq!(p.model.as_deref(), Some("provider/review-model"));
        assert_eq!(p.thinking.as_deref(), Some("high"));
        assert_eq!(p.max_turns, Some(4));
        assert_eq!(p.prompt_mode, PromptMode::Replace);
        assert_eq!(p.isolation.as_deref(), Some("worktree"));
        assert!(p.run_in_background && p.enabled);
        assert_eq!(p.prompt, "Review carefully.");
        assert_eq!(
            p.extra.get("allowed_subagents"),
            Some(&serde_json::json!(["x"]))
        );
        assert!(!p.extra.contains_key("color"));

        let d = parse("Just a prompt.");
        assert_eq!((d.name.as_str(), d.description.as_str()), ("stem", "stem"));
        assert_eq!(d.tools, BUILTIN_TOOLS);
        assert_eq!(d.prompt, "Just a prompt.");
        assert_eq!(d.thinking, None);
        assert_eq!(
            parse("---\nthinking: loud\nmax_turns: 0\n---\n").thinking,
            None
        );
        assert_eq!(parse("---\nmax_turns: 0\n---\n").max_turns, None);
    }

    #[test]
    fn tool_lists_none_all_and_disallowed() {
        assert!(parse("---\ntools: none\n---\n").tools.is_empty());
        assert_eq!(parse("---\ntools: all\n---\n").tools, BUILTIN_TOOLS);
        assert_eq!(parse("---\ntools: '*'\n---\n").tools, BUILTIN_TOOLS);
        assert_eq!(
            parse("---\ntools: read, bash\n---\n").tools,
            ["read", "bash"]
        );
        let p = parse("---\ntools: read, ext:mcp/search, write\ndisallowed_tools: write\n---\n");
        assert_eq!(p.tools, ["read"]);
        assert_eq!(p.extension_tools, ["ext:mcp/search"]);
        assert!(p.load_extensions);
        assert!(!p.is_chat_only());
        let chat = parse("---\ntools: none\n---\nBe brief.");
        assert!(chat.is_chat_only());
        // tintinweb aliases
        let t = parse("---\nname: security-review\nskills: true\nextensions: false\ndisallowed_tools: bash\n---\n");
        assert_eq!(t.name, "security-review");
        assert!(t.load_skills && !t.load_extensions);
        assert!(!t.tools.iter().any(|x| x == "bash"));
        // R's quirk: any string switch means on.
        assert!(parse("---\nload_skills: \"false\"\n---\n").load_skills);
    }

    #[test]
    fn bad_names_are_refused_and_bad_yaml_keeps_defaults() {
        assert!(parse_profile(
            "---\nname: ../escape\n---\n",
            "x",
            ProfileScope::Project,
            None
        )
        .is_err());
        assert!(parse_profile("", "-bad", ProfileScope::Project, None).is_err());
        let p = parse("---\ntools: [read\n  : : bad\n---\nBody here.");
        assert_eq!(p.tools, BUILTIN_TOOLS);
        assert_eq!(p.prompt, "Body here.");
        let unterminated = parse("---\ntools: none\nno fence");
        assert_eq!(unterminated.prompt, "---\ntools: none\nno fence");
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn precedence_trust_enabled_and_shadowing() {
        let root = tempfile::tempdir().unwrap();
        let agent = root.path().join("agent");
        let cwd = root.path().join("cwd");
        std::fs::create_dir_all(&cwd).unwrap();
        write(
            &agent.join("agents/explore.md"),
            "---\ndescription: Global explore\n---\nG",
        );
        write(&agent.join("agents/settings.json"), "{}");
        write(&agent.join("agents/notes.txt"), "not a profile");
        write(
            &cwd.join(".agents/agents/Explore.md"),
            "---\nname: Explore\ndescription: Workspace explore\n---\nW",
        );
        write(
            &cwd.join(".pi/agents/reviewer.md"),
            "---\ndescription: Review a change\ntools: none\n---\nR",
        );
        write(
            &cwd.join(".pi/agents/plan.md"),
            "---\nenabled: false\n---\n",
        );

        let untrusted = list_sources(&agent, &cwd, false);
        let eff = untrusted.effective();
        let explore = resolve(&eff, " EXPLORE ").unwrap();
        assert_eq!(
            (explore.scope, explore.description.as_str()),
            (ProfileScope::Global, "Global explore")
        );
        assert!(resolve(&eff, "reviewer").is_none());
        assert!(resolve(&eff, "plan").is_some());

        let trusted = list_sources(&agent, &cwd, true);
        let eff = trusted.effective();
        let explore = resolve(&eff, "explore").unwrap();
        assert_eq!(explore.scope, ProfileScope::Workspace);
        assert_eq!(
            resolve(&eff, "reviewer").unwrap().scope,
            ProfileScope::Project
        );
        // disabled: unresolvable but still shadows the built-in
        assert!(resolve(&eff, "plan").is_none());
        assert_eq!(eff.iter().filter(|p| p.name == "plan").count(), 1);
        // every source is listed, the shadowed ones marked
        let explores: Vec<usize> = (0..trusted.profiles.len())
            .filter(|&i| trusted.profiles[i].name.eq_ignore_ascii_case("explore"))
            .collect();
        assert_eq!(explores.len(), 3);
        assert!(trusted.is_shadowed(explores[0]) && trusted.is_shadowed(explores[1]));
        assert!(!trusted.is_shadowed(explores[2]));
        // sorted by display name
        let names: Vec<&str> = eff.iter().map(|p| p.display_name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort_by_key(|s| s.to_lowercase());
        assert_eq!(names, sorted);
        // deleting the project file restores the lower one
        std::fs::remove_file(cwd.join(".pi/agents/plan.md")).unwrap();
        let eff = list_sources(&agent, &cwd, true).effective();
        assert_eq!(resolve(&eff, "plan").unwrap().scope, ProfileScope::Builtin);
    }

    #[test]
    fn project_folders_outside_the_cwd_and_symlinked_files_are_ignored() {
        let root = tempfile::tempdir().unwrap();
        let agent = root.path().join("agent");
        let cwd = root.path().join("cwd");
        let outside = root.path().join("outside");
        write(&outside.join("evil.md"), "---\ndescription: evil\n---\n");
        std::fs::create_dir_all(cwd.join(".pi")).unwrap();
        std::os::unix::fs::symlink(&outside, cwd.join(".pi/agents")).unwrap();
        write(&cwd.join(".agents/agents/real.md"), "R");
        std::os::unix::fs::symlink(outside.join("evil.md"), cwd.join(".agents/agents/link.md"))
            .unwrap();
        let s = list_sources(&agent, &cwd, true);
        let names: Vec<&str> = s.profiles.iter().map(|p| p.name.as_str()).collect();
        assert!(
            !names.contains(&"evil") && !names.contains(&"link"),
            "{names:?}"
        );
        assert!(names.contains(&"real"));
        assert!(s
            .diagnostics
            .iter()
            .any(|d| d.message.contains("outside the project root")));
    }
}
