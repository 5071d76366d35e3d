//! pi packages named in settings (`packages`): local folders or files,
//! and npm / git packages already installed where pi installs them
//! (`<agentDir>/npm/node_modules/<name>`, `<agentDir>/git/<host>/<path>`;
//! project packages under `<cwd>/.pi/`). Nothing is installed here: a
//! package that is not on disk is one warning. A package contributes what
//! its `package.json` `pi` manifest lists, else its conventional folders;
//! the object form's arrays narrow that. Project entries come first and
//! replace a user entry for the same package.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::filter::{self, PathSpec};
use super::{expand_path, scan, Candidate, DiscoverOptions, Kind, Reached};
use crate::format::resources::{ResourceDiagnostic, Scope, Source};

/// A package found on disk.
#[derive(Debug, Clone)]
pub(crate) struct Package {
    /// The source string as written in settings.
    pub source: String,
    pub root: PathBuf,
    pub scope: Scope,
    /// A local file: one extension.
    pub single_file: bool,
    /// The object form's per-type filters.
    pub filters: Map<String, Value>,
}

/// How a source string names a package.
enum Spec {
    Npm {
        name: String,
        version: Option<String>,
    },
    Git {
        host: String,
        path: String,
    },
    Local(PathBuf),
}

fn parse_source(src: &str, base: &Path, home: Option<&Path>) -> Spec {
    if let Some(rest) = src.strip_prefix("npm:") {
        // `@scope/name@1.2.3` or `name@1.2.3`.
        let (name, version) = match rest[1.min(rest.len())..].find('@') {
            Some(i) => (rest[..i + 1].to_string(), Some(rest[i + 2..].to_string())),
            None => (rest.to_string(), None),
        };
        return Spec::Npm { name, version };
    }
    let git = src
        .strip_prefix("git:")
        .or_else(|| src.strip_prefix("https://"))
        .or_else(|| src.strip_prefix("http://"))
        .or_else(|| src.strip_prefix("ssh://"));
    if let Some(rest) = git {
        let rest = rest.strip_prefix("git@").unwrap_or(rest);
        let rest = rest.replacen(':', "/", if rest.contains("://") { 0 } else { 1 });
        let (host, path) = rest.split_once('/').unwrap_or((&rest, ""));
        let path = path.split('@').next().unwrap_or("");
        let path = path.trim_end_matches('/').trim_end_matches(".git");
        return Spec::Git {
            host: host.to_string(),
            path: path.to_string(),
        };
    }
    if let Some(rest) = src.strip_prefix("git@") {
        let (host, path) = rest.split_once(':').unwrap_or((rest, ""));
        return Spec::Git {
            host: host.to_string(),
            path: path.trim_end_matches(".git").to_string(),
        };
    }
    Spec::Local(filter::resolve(src, base, home))
}

/// Resolves the packages of both scopes (project first when trusted).
pub(crate) fn resolve(
    opts: &DiscoverOptions,
    project: &Map<String, Value>,
    user: &Map<String, Value>,
    trusted: bool,
    diags: &mut Vec<ResourceDiagnostic>,
) -> Vec<Package> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let scopes: Vec<(&Map<String, Value>, bool)> = if trusted {
        vec![(project, true), (user, false)]
    } else {
        vec![(user, false)]
    };
    for (settings, is_project) in scopes {
        let base = if is_project {
            opts.cwd.join(".pi")
        } else {
            opts.agent_dir.clone()
        };
        let Some(list) = settings.get("packages").and_then(Value::as_array) else {
            continue;
        };
        for entry in list {
            let (source, filters) = match entry {
                Value::String(s) => (s.clone(), Map::new()),
                Value::Object(o) => match o.get("source").and_then(Value::as_str) {
                    Some(s) => (s.to_string(), o.clone()),
                    None => continue,
                },
                _ => continue,
            };
            let spec = parse_source(&source, &base, opts.home.as_deref());
            let (identity, root) = match &spec {
                Spec::Npm { name, version } => {
                    let root = base.join("npm").join("node_modules").join(name);
                    let ok = installed_version(&root)
                        .is_some_and(|v| version.as_ref().is_none_or(|want| *want == v));
                    (format!("npm:{name}"), ok.then_some(root))
                }
                Spec::Git { host, path } => {
                    let root = base.join("git").join(host).join(path);
                    let ok = root.is_dir();
                    (format!("git:{host}/{path}"), ok.then_some(root))
                }
                Spec::Local(p) => (
                    format!("local:{}", scan::real(p).display()),
                    p.exists().then(|| p.clone()),
                ),
            };
            if !seen.insert(identity) {
                continue;
            }
            let Some(root) = root else {
                diags.push(ResourceDiagnostic {
                    kind: "warning".into(),
                    resource_type: "package".into(),
                    message: format!(
                        "package {source} is not installed; its resources are skipped (run pi install)"
                    ),
                    path: None,
                    winner: None,
                    name: None,
                });
                continue;
            };
            out.push(Package {
                source,
                single_file: root.is_file(),
                root,
                scope: if is_project {
                    Scope::Project
                } else {
                    Scope::User
                },
                filters,
            });
        }
    }
    out
}

/// The `version` of an installed npm package, when it has one.
fn installed_version(root: &Path) -> Option<String> {
    let v = super::package_json(root)?;
    v.get("version")?.as_str().map(str::to_string)
}

/// The package's `pi` manifest, when its package.json has one.
fn manifest(root: &Path) -> Option<Map<String, Value>> {
    let v = super::package_json(root)?;
    v.get("pi")?.as_object().cloned()
}

fn string_list(v: &Value) -> Vec<String> {
    crate::format::string_list(Some(v))
}

/// Appends the package's files of `kind` to `out`.
pub(crate) fn candidates(pkg: &Package, kind: Kind, out: &mut Vec<Candidate>) {
    let push = |out: &mut Vec<Candidate>, path: PathBuf| {
        out.push(Candidate {
            path,
            source: Source::Package,
            scope: pkg.scope,
            package: Some(pkg.source.clone()),
        })
    };
    if pkg.single_file {
        if kind == Kind::Extension {
            push(out, pkg.root.clone());
        }
        return;
    }
    let files: Vec<PathBuf> = match manifest(&pkg.root) {
        Some(m) => match m.get(kind.key()) {
            Some(v) => manifest_files(&pkg.root, kind, &string_list(v)),
            None => Vec::new(),
        },
        None => expand_path(kind, &pkg.root.join(kind.key()), Reached::Explicit),
    };
    let narrowed = pkg
        .filters
        .get(kind.key())
        .map(|v| PathSpec::parse(&string_list(v), &pkg.root, None));
    for f in files {
        if let Some(spec) = &narrowed {
            if !package_filter_allows(spec, &f, &pkg.root) {
                continue;
            }
        }
        push(out, f);
    }
}

/// The object form narrows: `[]` loads none; plain entries and globs
/// include, `!`/`-` exclude, `+` includes.
fn package_filter_allows(spec: &PathSpec, f: &Path, root: &Path) -> bool {
    if spec.paths.is_empty() && !spec.has_filters() {
        return false;
    }
    let listed = spec
        .paths
        .iter()
        .any(|p| f == p || f.starts_with(p) || f.parent() == Some(p.as_path()));
    if !spec.paths.is_empty() && spec.includes.is_empty() && !listed {
        return spec.force_include.iter().any(|p| p == f);
    }
    if listed {
        return spec.enabled(f, root, false);
    }
    spec.enabled(f, root, true)
}

/// A manifest array: paths and globs relative to the package root, `!`
/// exclusions applied to what they select.
fn manifest_files(root: &Path, kind: Kind, entries: &[String]) -> Vec<PathBuf> {
    let spec = PathSpec::parse(entries, root, None);
    let mut files = Vec::new();
    for p in &spec.paths {
        files.extend(expand_path(kind, p, Reached::Explicit));
    }
    if !spec.includes.is_empty() {
        let all = scan::files_recursive(root, &|_| true);
        let mut dirs_done = HashSet::new();
        for f in all {
            let rel = f
                .strip_prefix(root)
                .unwrap_or(&f)
                .to_string_lossy()
                .into_owned();
            for (raw, _) in &spec.includes {
                let pat = raw.strip_prefix("./").unwrap_or(raw);
                let Ok(g) = globset::GlobBuilder::new(pat)
                    .literal_separator(true)
                    .build()
                else {
                    continue;
                };
                let m = g.compile_matcher();
                if m.is_match(&rel) {
                    files.push(f.clone());
                    break;
                }
                // A glob naming folders (e.g. `skills/*`) selects them.
                let mut d = f.parent();
                while let Some(dir) = d {
                    if dir == root {
                        break;
                    }
                    let drel = dir
                        .strip_prefix(root)
                        .unwrap_or(dir)
                        .to_string_lossy()
                        .into_owned();
                    if m.is_match(&drel) && dirs_done.insert(dir.to_path_buf()) {
                        files.extend(expand_path(kind, dir, Reached::Explicit));
                    }
                    d = dir.parent();
                }
            }
        }
    }
    files
        .into_iter()
        .filter(|f| spec.enabled(f, root, false))
        .collect()
}
