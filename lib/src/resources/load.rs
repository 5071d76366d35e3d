//! Turning candidate files into resources, pi 1.6.0's way: SKILL.md and
//! template frontmatter, skill-name and description validation (warnings
//! that keep the skill; a missing description drops it), theme JSON
//! checks, extension entry points; then silent real-path dedupe and
//! first-name-wins collisions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::text::js_trim;
use super::{dedupe_real, frontmatter, scan, Candidate, Kind, Resources};
use crate::format::resources::{Extension, PromptTemplate, ResourceDiagnostic, Skill, Theme};

fn diag(kind: &str, rt: Kind, message: String, path: &Path) -> ResourceDiagnostic {
    ResourceDiagnostic {
        kind: kind.into(),
        resource_type: rt.label().into(),
        message,
        path: Some(path.to_path_buf()),
        winner: None,
        name: None,
    }
}

/// Whether `name` is a TypeScript/JavaScript extension file (run by the
/// Node host).
pub fn is_js_extension(name: &str) -> bool {
    [".ts", ".js", ".mjs", ".cjs"]
        .iter()
        .any(|e| name.ends_with(e))
}

fn is_executable_file(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The program of a process extension (this toolkit's rule; pi ignores
/// such files): an executable file that is not `.ts/.js/.mjs/.cjs`, or a
/// folder whose `package.json` has `"pi": {"process": "<path>"}` or that
/// holds an executable `extension` file.
pub fn process_program(p: &Path) -> Option<PathBuf> {
    if p.is_dir() {
        if let Some(prog) = super::package_json(p)
            .and_then(|v| v.get("pi")?.get("process")?.as_str().map(|s| p.join(s)))
        {
            return is_executable_file(&prog).then(|| crate::paths::normalize(&prog));
        }
        let e = p.join("extension");
        return is_executable_file(&e).then_some(e);
    }
    let name = p.file_name()?.to_string_lossy();
    (!is_js_extension(&name) && is_executable_file(p)).then(|| p.to_path_buf())
}

/// The entry points of an extension folder: its `package.json` `pi`
/// manifest's extensions, else `index.ts`, else `index.js`, else a process
/// extension's program; a folder with none of these is searched one level
/// deep for `*.ts` / `*.js` files, executable files and such subfolders
/// (the layout of `<agentDir>/extensions`).
pub(crate) fn extension_entries(dir: &Path) -> Vec<PathBuf> {
    if let Some(v) = folder_entry(dir) {
        return v;
    }
    let ignores = scan::IgnoreStack::default().enter(dir);
    let mut out = Vec::new();
    for e in scan::list(dir, &ignores).unwrap_or_default() {
        if e.is_dir {
            if let Some(v) = folder_entry(&e.path) {
                out.extend(v);
            }
        } else if e.name.ends_with(".ts")
            || e.name.ends_with(".js")
            || process_program(&e.path).is_some()
        {
            out.push(e.path);
        }
    }
    out
}

/// A folder that is one extension: manifest entries or an index file.
fn folder_entry(dir: &Path) -> Option<Vec<PathBuf>> {
    if let Some(entries) = manifest_extensions(dir) {
        return Some(entries);
    }
    for n in ["index.ts", "index.js"] {
        let p = dir.join(n);
        if p.is_file() {
            return Some(vec![p]);
        }
    }
    process_program(dir).map(|p| vec![p])
}

fn manifest_extensions(dir: &Path) -> Option<Vec<PathBuf>> {
    let v = super::package_json(dir)?;
    let list = v.get("pi")?.get("extensions")?.as_array()?;
    Some(
        list.iter()
            .filter_map(Value::as_str)
            .map(|s| crate::paths::normalize(&dir.join(s)))
            .filter(|p| p.exists())
            .collect(),
    )
}

/// Loads `cands` (in precedence order) into `res`.
pub(crate) fn load_all(kind: Kind, cands: Vec<Candidate>, res: &mut Resources) {
    let cands = dedupe_real(cands);
    let mut names: HashMap<String, PathBuf> = HashMap::new();
    for c in cands {
        let loaded = match kind {
            Kind::Extension => Some(Loaded::Extension(Extension {
                name: extension_name(&c.path),
                path: c.path.clone(),
                source: c.source,
                scope: c.scope,
                package: c.package.clone(),
                registered: None,
            })),
            Kind::Skill => load_skill(&c, &mut res.diagnostics).map(Loaded::Skill),
            Kind::Prompt => load_prompt(&c, &mut res.diagnostics).map(Loaded::Prompt),
            Kind::Theme => load_theme(&c, &mut res.diagnostics).map(Loaded::Theme),
        };
        let Some(loaded) = loaded else { continue };
        let name = match &loaded {
            Loaded::Extension(_) => None,
            Loaded::Skill(s) => Some(s.name.clone()),
            Loaded::Prompt(p) => Some(p.name.clone()),
            Loaded::Theme(t) => Some(t.name.clone()).filter(|n| !n.is_empty()),
        };
        if let Some(name) = name {
            if let Some(winner) = names.get(&name) {
                let shown = if kind == Kind::Prompt {
                    format!("/{name}")
                } else {
                    name.clone()
                };
                res.diagnostics.push(ResourceDiagnostic {
                    kind: "collision".into(),
                    resource_type: kind.label().into(),
                    message: format!("name \"{shown}\" collision"),
                    path: Some(c.path.clone()),
                    winner: Some(winner.clone()),
                    name: Some(name),
                });
                continue;
            }
            names.insert(name, c.path.clone());
        }
        match loaded {
            Loaded::Extension(e) => res.extensions.push(e),
            Loaded::Skill(s) => res.skills.push(s),
            Loaded::Prompt(p) => res.prompts.push(p),
            Loaded::Theme(t) => res.themes.push(t),
        }
    }
}

enum Loaded {
    Extension(Extension),
    Skill(Skill),
    Prompt(PromptTemplate),
    Theme(Theme),
}

/// `index.ts` is named by its folder, other files by their stem.
fn extension_name(p: &Path) -> String {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem == "index" {
        if let Some(d) = p.parent().and_then(Path::file_name) {
            return d.to_string_lossy().into_owned();
        }
    }
    stem
}

fn read(c: &Candidate, kind: Kind, diags: &mut Vec<ResourceDiagnostic>) -> Option<String> {
    match super::text::read(&c.path) {
        Ok(t) => Some(t),
        Err(e) => {
            diags.push(diag(
                "warning",
                kind,
                format!("Failed to read {}: {e}", c.path.display()),
                &c.path,
            ));
            None
        }
    }
}

/// The longest skill name pi accepts without a warning.
const MAX_NAME: usize = 64;
/// The longest description pi accepts without a warning.
const MAX_DESCRIPTION: usize = 1024;

/// pi's skill-name rules; each broken rule is a warning (the skill loads).
pub fn validate_skill_name(name: &str) -> Vec<String> {
    let mut w = Vec::new();
    let n = name.chars().count();
    if n > MAX_NAME {
        w.push(format!("name exceeds {MAX_NAME} characters ({n})"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        w.push(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)".into(),
        );
    }
    if name.starts_with('-') || name.ends_with('-') {
        w.push("name must not start or end with a hyphen".into());
    }
    if name.contains("--") {
        w.push("name must not contain consecutive hyphens".into());
    }
    w
}

fn load_skill(c: &Candidate, diags: &mut Vec<ResourceDiagnostic>) -> Option<Skill> {
    let text = read(c, Kind::Skill, diags)?;
    // A loose `.md` file is only maybe a skill: pi 1.6.0 drops one with
    // broken frontmatter (or no description) silently, and warns only
    // about a SKILL.md.
    let is_skill_md = c.path.file_name().is_some_and(|n| n == "SKILL.md");
    let parsed = match frontmatter::parse(&text) {
        Ok(p) => p,
        Err(e) => {
            if is_skill_md {
                diags.push(diag("warning", Kind::Skill, e.to_string(), &c.path));
            }
            return None;
        }
    };
    let base_dir = c.path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut fm: Map<String, Value> = parsed.fields;
    let name = match fm.remove("name") {
        Some(Value::String(s)) if !js_trim(&s).is_empty() => s,
        _ => base_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let description = match fm.remove("description") {
        Some(Value::String(s)) if !js_trim(&s).is_empty() => s,
        _ => {
            if is_skill_md {
                diags.push(diag(
                    "warning",
                    Kind::Skill,
                    "description is required".into(),
                    &c.path,
                ));
            }
            return None;
        }
    };
    for w in validate_skill_name(&name) {
        diags.push(diag("warning", Kind::Skill, w, &c.path));
    }
    let dn = description.chars().count();
    if dn > MAX_DESCRIPTION {
        diags.push(diag(
            "warning",
            Kind::Skill,
            format!("description exceeds {MAX_DESCRIPTION} characters ({dn})"),
            &c.path,
        ));
    }
    let disable = matches!(
        fm.remove("disable-model-invocation"),
        Some(Value::Bool(true))
    );
    Some(Skill {
        name,
        description,
        path: c.path.clone(),
        base_dir,
        source: c.source,
        scope: c.scope,
        disable_model_invocation: disable,
        frontmatter: fm,
        package: c.package.clone(),
    })
}

fn load_prompt(c: &Candidate, diags: &mut Vec<ResourceDiagnostic>) -> Option<PromptTemplate> {
    let text = read(c, Kind::Prompt, diags)?;
    let parsed = match frontmatter::parse(&text) {
        Ok(p) => p,
        Err(e) => {
            diags.push(diag("warning", Kind::Prompt, e.to_string(), &c.path));
            return None;
        }
    };
    // The body as pi expands it (the same rule `/template` expansion was
    // checked with against pi 1.6.0).
    let content = super::text::split_frontmatter(&text).1;
    let description = match parsed.fields.get("description") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => first_line_description(&content),
    };
    let argument_hint = parsed
        .fields
        .get("argument-hint")
        .and_then(Value::as_str)
        .map(str::to_string);
    let name = c
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".md").unwrap_or(&name).to_string();
    Some(PromptTemplate {
        name,
        description,
        argument_hint,
        path: c.path.clone(),
        source: c.source,
        scope: c.scope,
        content,
        package: c.package.clone(),
    })
}

/// The first non-empty line, cut to 60 characters plus `...`.
fn first_line_description(content: &str) -> String {
    let Some(line) = content.lines().find(|l| !js_trim(l).is_empty()) else {
        return String::new();
    };
    if line.chars().count() > 60 {
        let cut: String = line.chars().take(60).collect();
        format!("{cut}...")
    } else {
        line.to_string()
    }
}

fn load_theme(c: &Candidate, diags: &mut Vec<ResourceDiagnostic>) -> Option<Theme> {
    let text = read(c, Kind::Theme, diags)?;
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            diags.push(diag(
                "warning",
                Kind::Theme,
                format!("Failed to parse theme {}: {e}", c.path.display()),
                &c.path,
            ));
            return None;
        }
    };
    if !v.get("colors").is_some_and(Value::is_object) {
        diags.push(diag(
            "warning",
            Kind::Theme,
            format!(
                "Invalid theme \"{}\": expected an object with a \"colors\" map.",
                c.path.display()
            ),
            &c.path,
        ));
        return None;
    }
    Some(Theme {
        name: v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        path: c.path.clone(),
        source: c.source,
        scope: c.scope,
        package: c.package.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules_as_pi() {
        assert!(validate_skill_name("ok-name-1").is_empty());
        assert_eq!(validate_skill_name("Bad_Name").len(), 1);
        assert_eq!(
            validate_skill_name("a--b"),
            ["name must not contain consecutive hyphens"]
        );
        assert_eq!(
            validate_skill_name(&"a".repeat(70))[0],
            "name exceeds 64 characters (70)"
        );
    }

    #[test]
    fn description_from_first_line() {
        let long = format!("  {}", "x".repeat(80));
        assert_eq!(
            first_line_description(&format!("\n\n{long}\nb"))
                .chars()
                .count(),
            63
        );
        assert_eq!(first_line_description("\n hi\n"), " hi");
    }
}
