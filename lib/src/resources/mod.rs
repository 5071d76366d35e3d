//! Resource discovery, exactly as pi 1.6.0 decides it: which extensions,
//! skills, prompt templates, themes, context files and system-prompt files
//! apply in a directory, where each came from, and what lost a collision.
//!
//! Candidates are gathered in pi 1.6.0's precedence order — project
//! settings paths, project auto-discovery (`.pi/…`, `.agents/skills` up to
//! the git root), user settings paths, user auto-discovery (`<agentDir>/…`,
//! `~/.agents/skills`), then packages (project before user) — with CLI
//! paths (`-e`, `--skill`, `--prompt-template`, `--theme`) first, as seed
//! 002 specifies ("CLI > project > user > packages", first wins). (pi 1.6.0
//! itself loads `--skill`, `--prompt-template` and `--theme` paths last; the
//! seed is the brief, so a CLI path wins here.) Everything is loaded in that
//! order: the same real file reached twice is loaded once, silently;
//! a later resource with a taken name becomes a `collision` diagnostic
//! naming the winner. A broken resource is one diagnostic; the rest load.
//!
//! Project trust is an input here (`trusted`): the decision itself is
//! [`crate::trust::decide`]'s. Untrusted skips project settings, `.pi/*`,
//! project `.agents/skills` and project packages; context files always load.

pub mod context_files;
pub mod filter;
pub mod frontmatter;
mod load;
mod packages;
pub mod scan;
pub mod text;
pub use load::{is_js_extension, process_program};

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use crate::format::resources::{
    ContextFileRecord, Extension, PromptTemplate, ResourceDiagnostic, ResourceRecord, Scope, Skill,
    Source, SystemPromptFile, Theme,
};
use crate::settings::SettingsError;
use filter::PathSpec;

/// The parsed `package.json` of a folder (an extension or a package), when
/// it is a regular file of JSON within
/// [`crate::regular_file::CONFIG_CAP`].
fn package_json(dir: &Path) -> Option<Value> {
    let text = crate::regular_file::read_config(
        &dir.join("package.json"),
        crate::regular_file::CONFIG_CAP,
    )
    .ok()??;
    serde_json::from_str(&text).ok()
}

/// What to discover, and the CLI's explicit paths and switches.
#[derive(Debug, Clone, Default)]
pub struct DiscoverOptions {
    /// Absolute working directory.
    pub cwd: PathBuf,
    /// `$PI_CODING_AGENT_DIR` or `~/.pi/agent`.
    pub agent_dir: PathBuf,
    /// The home directory (`~/.agents/skills`, `~` in settings paths).
    pub home: Option<PathBuf>,
    /// `-e/--extension` paths.
    pub extensions: Vec<PathBuf>,
    /// `--skill` paths.
    pub skills: Vec<PathBuf>,
    /// `--prompt-template` paths.
    pub prompt_templates: Vec<PathBuf>,
    /// `--theme` paths.
    pub themes: Vec<PathBuf>,
    pub no_extensions: bool,
    pub no_skills: bool,
    pub no_prompt_templates: bool,
    pub no_themes: bool,
    pub no_context_files: bool,
}

impl DiscoverOptions {
    /// Options for `cwd` with the agent dir and home from the environment.
    pub fn for_cwd(cwd: &Path) -> DiscoverOptions {
        DiscoverOptions {
            cwd: cwd.to_path_buf(),
            agent_dir: crate::paths::agent_dir(),
            home: std::env::var_os("HOME").map(PathBuf::from),
            ..Default::default()
        }
    }
}

/// Everything that applies, each list in precedence (load) order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    pub extensions: Vec<Extension>,
    pub skills: Vec<Skill>,
    pub prompts: Vec<PromptTemplate>,
    pub themes: Vec<Theme>,
    pub context_files: Vec<ContextFileRecord>,
    /// `SYSTEM.md`: project `.pi/` when trusted, else global.
    pub system_prompt: Option<SystemPromptFile>,
    /// `APPEND_SYSTEM.md`, same rule.
    pub append_system_prompt: Vec<SystemPromptFile>,
    pub diagnostics: Vec<ResourceDiagnostic>,
}

impl Resources {
    /// Every record in output order: extensions, skills, prompts, themes,
    /// context files, system-prompt files, then diagnostics.
    pub fn records(&self) -> Vec<ResourceRecord> {
        let mut v = Vec::new();
        v.extend(
            self.extensions
                .iter()
                .cloned()
                .map(ResourceRecord::Extension),
        );
        v.extend(self.skills.iter().cloned().map(ResourceRecord::Skill));
        v.extend(self.prompts.iter().cloned().map(ResourceRecord::Prompt));
        v.extend(self.themes.iter().cloned().map(ResourceRecord::Theme));
        v.extend(
            self.context_files
                .iter()
                .cloned()
                .map(ResourceRecord::ContextFile),
        );
        v.extend(
            self.system_prompt
                .iter()
                .chain(&self.append_system_prompt)
                .cloned()
                .map(ResourceRecord::SystemPrompt),
        );
        v.extend(
            self.diagnostics
                .iter()
                .cloned()
                .map(ResourceRecord::Diagnostic),
        );
        v
    }
}

/// The four resource kinds that come from paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Extension,
    Skill,
    Prompt,
    Theme,
}

impl Kind {
    /// The settings / manifest key and conventional folder name.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Kind::Extension => "extensions",
            Kind::Skill => "skills",
            Kind::Prompt => "prompts",
            Kind::Theme => "themes",
        }
    }
    /// pi's `resourceType` in diagnostics.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Extension => "extension",
            Kind::Skill => "skill",
            Kind::Prompt => "prompt",
            Kind::Theme => "theme",
        }
    }
}

/// One file that may become a resource, with where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub path: PathBuf,
    pub source: Source,
    pub scope: Scope,
    pub package: Option<String>,
}

/// How a folder was reached, which decides how deep it is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reached {
    /// Listed in settings, a package or on the command line: prompt and
    /// theme folders are searched recursively.
    Explicit,
    /// A conventional folder (`.pi/<kind>`, `<agentDir>/<kind>`): prompt
    /// and theme folders are searched flat.
    Conventional,
    /// An auto-discovered `.agents/skills` folder (project or home).
    AgentSkills,
}

/// Files a path contributes for `kind`.
pub(crate) fn expand_path(kind: Kind, p: &Path, how: Reached) -> Vec<PathBuf> {
    let Ok(meta) = std::fs::metadata(p) else {
        return Vec::new();
    };
    if meta.is_file() {
        return vec![p.to_path_buf()];
    }
    let explicit = how == Reached::Explicit;
    match kind {
        Kind::Skill if how == Reached::AgentSkills => {
            scan::skill_files(p, scan::SkillLayout::AgentSkills)
        }
        Kind::Skill => scan::skill_files(p, scan::SkillLayout::Pi),
        Kind::Prompt if explicit => scan::files_recursive(p, &|n| n.ends_with(".md")),
        Kind::Prompt => scan::files_flat(p, &|n| n.ends_with(".md")),
        Kind::Theme if explicit => scan::files_recursive(p, &|n| n.ends_with(".json")),
        Kind::Theme => scan::files_flat(p, &|n| n.ends_with(".json")),
        Kind::Extension => load::extension_entries(p),
    }
}

/// Reads one settings file's string array for `key`.
fn strings(settings: &Map<String, Value>, key: &str) -> Vec<String> {
    crate::format::string_list(settings.get(key))
}

/// The auto-discovery folders of one scope for `kind`.
fn auto_dirs(kind: Kind, opts: &DiscoverOptions, project: bool) -> Vec<(PathBuf, Reached)> {
    let own = if project {
        opts.cwd.join(".pi").join(kind.key())
    } else {
        opts.agent_dir.join(kind.key())
    };
    let mut v = vec![(own, Reached::Conventional)];
    if kind == Kind::Skill {
        let agents = if project {
            project_agents_skills(&opts.cwd, opts.home.as_deref())
        } else {
            opts.home
                .iter()
                .map(|h| h.join(".agents").join("skills"))
                .collect()
        };
        v.extend(agents.into_iter().map(|d| (d, Reached::AgentSkills)));
    }
    v
}

/// `.agents/skills` in the cwd and each ancestor up to the git root (the
/// folder holding `.git`), or the filesystem root; `~/.agents/skills` is the
/// user's, not the project's.
pub fn project_agents_skills(cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let home_skills = home.map(|h| scan::real(&h.join(".agents").join("skills")));
    let mut out = Vec::new();
    for dir in cwd.ancestors() {
        let p = dir.join(".agents").join("skills");
        if p.is_dir() && home_skills.as_ref() != Some(&scan::real(&p)) {
            out.push(p);
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    out
}

/// Gathers the candidates of one scope (`project` or user): settings paths
/// then auto-discovery, filtered by that scope's settings array.
fn scope_candidates(
    kind: Kind,
    opts: &DiscoverOptions,
    settings: &Map<String, Value>,
    project: bool,
    auto: bool,
    out: &mut Vec<Candidate>,
) {
    let base = if project {
        opts.cwd.join(".pi")
    } else {
        opts.agent_dir.clone()
    };
    let spec = PathSpec::parse(&strings(settings, kind.key()), &base, opts.home.as_deref());
    let scope = if project { Scope::Project } else { Scope::User };
    let explicit_source = if project {
        Source::ProjectSettings
    } else {
        Source::UserSettings
    };
    for p in &spec.paths {
        for f in expand_path(kind, p, Reached::Explicit) {
            if spec.enabled(&f, &base, true) {
                out.push(Candidate {
                    path: f,
                    source: explicit_source,
                    scope,
                    package: None,
                });
            }
        }
    }
    if !auto {
        return;
    }
    let source = if project {
        Source::Project
    } else {
        Source::User
    };
    for (d, how) in auto_dirs(kind, opts, project) {
        for f in expand_path(kind, &d, how) {
            if spec.enabled(&f, &base, false) {
                out.push(Candidate {
                    path: f,
                    source,
                    scope,
                    package: None,
                });
            }
        }
    }
}

/// What a Chat-only run (an explicitly empty tool selection) loads: the context files only — no
/// extensions, skills, prompt templates, themes, SYSTEM.md or
/// APPEND_SYSTEM.md, explicit paths included. The same for pi-run,
/// pi-prompt and pi-resources.
pub fn discover_chat_only(opts: &DiscoverOptions) -> Result<Resources, SettingsError> {
    let o = DiscoverOptions {
        extensions: Vec::new(),
        skills: Vec::new(),
        prompt_templates: Vec::new(),
        themes: Vec::new(),
        no_extensions: true,
        no_skills: true,
        no_prompt_templates: true,
        no_themes: true,
        ..opts.clone()
    };
    let mut r = discover(&o, false)?;
    r.system_prompt = None;
    r.append_system_prompt.clear();
    Ok(r)
}

/// The extensions [`discover`] finds without trust, and nothing else: what
/// the first extension pass loads before the trust decision. The skill,
/// template and theme scans and the context-file walk are skipped, since
/// that pass uses none of them and the trusted discovery repeats them.
pub fn discover_untrusted_extensions(opts: &DiscoverOptions) -> Result<Resources, SettingsError> {
    let o = DiscoverOptions {
        skills: Vec::new(),
        prompt_templates: Vec::new(),
        themes: Vec::new(),
        no_skills: true,
        no_prompt_templates: true,
        no_themes: true,
        no_context_files: true,
        ..opts.clone()
    };
    discover(&o, false)
}

/// Discovers everything for `opts.cwd`. `trusted` is the project-trust
/// decision. Fails only on a settings file that cannot be read (named with
/// line and column); everything else is a diagnostic.
pub fn discover(opts: &DiscoverOptions, trusted: bool) -> Result<Resources, SettingsError> {
    let user_settings = crate::settings::read_file(&opts.agent_dir.join("settings.json"))?;
    let project_settings = if trusted {
        crate::settings::read_file(&opts.cwd.join(".pi").join("settings.json"))?
    } else {
        Map::new()
    };
    let mut res = Resources::default();
    let pkgs = packages::resolve(
        opts,
        &project_settings,
        &user_settings,
        trusted,
        &mut res.diagnostics,
    );

    for kind in [Kind::Extension, Kind::Skill, Kind::Prompt, Kind::Theme] {
        let (cli, off) = match kind {
            Kind::Extension => (&opts.extensions, opts.no_extensions),
            Kind::Skill => (&opts.skills, opts.no_skills),
            Kind::Prompt => (&opts.prompt_templates, opts.no_prompt_templates),
            Kind::Theme => (&opts.themes, opts.no_themes),
        };
        let mut cli_cands = Vec::new();
        for p in cli {
            let p = filter::resolve(&p.to_string_lossy(), &opts.cwd, opts.home.as_deref());
            if !p.exists() {
                res.diagnostics.push(ResourceDiagnostic {
                    kind: "warning".into(),
                    resource_type: kind.label().into(),
                    message: format!("{} path does not exist: {}", kind.label(), p.display()),
                    path: Some(p.clone()),
                    winner: None,
                    name: None,
                });
            }
            for f in expand_path(kind, &p, Reached::Explicit) {
                cli_cands.push(Candidate {
                    path: f,
                    source: Source::Cli,
                    scope: Scope::Path,
                    package: None,
                });
            }
        }
        // CLI paths first for every kind (precedence CLI > project > user >
        // packages; pi 1.6.0 puts --skill/--prompt-template/--theme last).
        let mut cands = Vec::new();
        cands.append(&mut cli_cands);
        if !off {
            if trusted {
                scope_candidates(kind, opts, &project_settings, true, true, &mut cands);
            }
            scope_candidates(kind, opts, &user_settings, false, true, &mut cands);
            for pkg in &pkgs {
                packages::candidates(pkg, kind, &mut cands);
            }
        }
        load::load_all(kind, cands, &mut res);
    }

    if !opts.no_context_files {
        let (files, errors) = context_files::discover(&opts.agent_dir, &opts.cwd);
        for f in files {
            let scope = if f.path.parent() == Some(opts.agent_dir.as_path()) {
                "global"
            } else {
                "project"
            };
            res.context_files.push(ContextFileRecord {
                bytes: f.content.len() as u64,
                path: f.path,
                scope: scope.into(),
            });
        }
        for (p, e) in errors {
            res.diagnostics.push(ResourceDiagnostic {
                kind: "warning".into(),
                resource_type: "context".into(),
                message: format!("Failed to read {}: {e}", p.display()),
                path: Some(p),
                winner: None,
                name: None,
            });
        }
    }
    res.system_prompt = system_file(opts, trusted, "SYSTEM.md", "system");
    res.append_system_prompt = system_file(opts, trusted, "APPEND_SYSTEM.md", "append")
        .into_iter()
        .collect();
    Ok(res)
}

/// `SYSTEM.md` / `APPEND_SYSTEM.md`: the project's (trusted only), else the
/// global one.
pub fn system_file(
    opts: &DiscoverOptions,
    trusted: bool,
    name: &str,
    kind: &str,
) -> Option<SystemPromptFile> {
    let project = opts.cwd.join(".pi").join(name);
    if trusted && project.is_file() {
        return Some(SystemPromptFile {
            kind: kind.into(),
            path: project,
            scope: "project".into(),
        });
    }
    let global = opts.agent_dir.join(name);
    global.is_file().then(|| SystemPromptFile {
        kind: kind.into(),
        path: global,
        scope: "global".into(),
    })
}

/// Removes candidates whose real file was already seen (symlinked
/// duplicates load once, silently).
pub(crate) fn dedupe_real(cands: Vec<Candidate>) -> Vec<Candidate> {
    let mut seen = HashSet::new();
    cands
        .into_iter()
        .filter(|c| seen.insert(scan::real(&c.path)))
        .collect()
}

impl Resources {
    /// Rebuilds resources from `pi-resources` JSONL records (the pipeline
    /// form); the trust record, if any, is returned beside them. Prompt
    /// templates get their bodies read from their files.
    pub fn from_records(
        records: Vec<crate::format::resources::ResourceRecord>,
    ) -> (Resources, Option<crate::format::resources::TrustRecord>) {
        use crate::format::resources::ResourceRecord as R;
        let mut r = Resources::default();
        let mut trust = None;
        for rec in records {
            match rec {
                R::Trust(t) => trust = Some(t),
                R::Extension(e) => r.extensions.push(e),
                R::Skill(s) => r.skills.push(s),
                R::Prompt(mut p) => {
                    if let Ok(text) = text::read(&p.path) {
                        p.content = text::split_frontmatter(&text).1;
                    }
                    r.prompts.push(p)
                }
                R::Theme(t) => r.themes.push(t),
                R::ContextFile(c) => r.context_files.push(c),
                R::SystemPrompt(s) => {
                    if s.kind == "system" {
                        r.system_prompt = Some(s);
                    } else {
                        r.append_system_prompt.push(s);
                    }
                }
                R::Diagnostic(d) => r.diagnostics.push(d),
                R::ToolSet(_) | R::McpServer(_) => {}
            }
        }
        (r, trust)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    #[test]
    fn project_beats_user_and_loser_is_a_collision() {
        let t = tempfile::tempdir().unwrap();
        let agent = t.path().join("agent");
        let cwd = t.path().join("cwd");
        std::fs::create_dir_all(cwd.join(".git")).unwrap();
        w(
            &agent.join("skills/dup/SKILL.md"),
            "---\ndescription: user\n---\n",
        );
        w(
            &cwd.join(".pi/skills/dup/SKILL.md"),
            "---\ndescription: project\n---\n",
        );
        let opts = DiscoverOptions {
            cwd: cwd.clone(),
            agent_dir: agent.clone(),
            ..Default::default()
        };
        let r = discover(&opts, true).unwrap();
        assert_eq!(r.skills.len(), 1);
        assert_eq!(r.skills[0].description, "project");
        assert_eq!(r.diagnostics[0].kind, "collision");
        assert_eq!(
            r.diagnostics[0].winner.as_deref(),
            Some(cwd.join(".pi/skills/dup/SKILL.md").as_path())
        );
        let r = discover(&opts, false).unwrap();
        assert_eq!(r.skills[0].description, "user");
        assert!(r.diagnostics.is_empty());
    }

    #[test]
    fn a_cli_folder_named_agents_skills_is_laid_out_like_pi_skills() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("x/.agents/skills");
        w(&dir.join("top.md"), "---\nname: top\ndescription: d\n---\n");
        w(&dir.join("sub/loose.md"), "---\ndescription: d\n---\n");
        let cwd = t.path().join("cwd");
        std::fs::create_dir_all(cwd.join(".git")).unwrap();
        let opts = DiscoverOptions {
            cwd,
            agent_dir: t.path().join("agent"),
            skills: vec![dir],
            ..Default::default()
        };
        let r = discover(&opts, true).unwrap();
        let names: Vec<&str> = r.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["top"]);
    }
}
