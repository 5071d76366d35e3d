//! The paths of a sandbox: the credential stores it hides (the one list,
//! [`HIDDEN_IN_HOME`] and [`HIDDEN_IN_AGENT_DIR`]), the workspace (the git
//! work tree holding the cwd, else the cwd) and the paths inside it that
//! stay read-only (git's hooks and config, the project's `.pi/`), and
//! [`resolve`], which turns any path into the one the kernel would reach
//! (every symlink followed, dangling ones too, `..` applied after them).

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The credential stores under `$HOME` that no sandboxed command or file
/// tool may read. docs/sandbox.md lists the same paths.
pub const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".gnupg",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
];

/// The credential files in the agent directory (pi's and the MCP
/// servers' tokens).
pub const HIDDEN_IN_AGENT_DIR: &[&str] = &["auth.json", "mcp-auth.json"];

/// How many symlinks [`resolve`] follows before it takes the path as it
/// is (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// The path the kernel reaches for the absolute path `path`: every
/// existing symlink is followed (a dangling one too: a write through it
/// creates its target), `..` goes to the parent of what was reached, and
/// the part that does not exist yet is taken lexically. Relative paths are
/// taken against the process's cwd.
pub fn resolve(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut pending: Vec<OsString> = parts(&abs);
    pending.reverse();
    let mut out = PathBuf::from("/");
    let mut links = 0usize;
    let mut missing = false;
    while let Some(part) = pending.pop() {
        if part == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&part);
        if missing {
            out = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() && links < MAX_LINKS => {
                links += 1;
                match std::fs::read_link(&next) {
                    Ok(target) => {
                        if target.is_absolute() {
                            out = PathBuf::from("/");
                        }
                        let mut t = parts(&target);
                        t.reverse();
                        pending.extend(t);
                    }
                    Err(_) => out = next,
                }
            }
            Ok(_) => out = next,
            Err(_) => {
                missing = true;
                out = next;
            }
        }
    }
    out
}

/// The normal and `..` components of `p`, in order.
fn parts(p: &Path) -> Vec<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

/// `p` with a leading `~` expanded and, when relative, taken against
/// `base`; then [`resolve`]d.
pub fn from_setting(p: &str, base: &Path) -> PathBuf {
    let expanded = crate::paths::expand_tilde(Path::new(p));
    resolve(&base.join(expanded))
}

/// Whether `p` is `root` or inside it (both resolved).
pub fn within(p: &Path, root: &Path) -> bool {
    p.starts_with(root)
}

/// The hidden credential paths for `home` and `agent_dir` plus `extra`
/// (already absolute), each resolved; in the order of the lists.
pub fn hidden_paths(home: &Path, agent_dir: &Path, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let all = HIDDEN_IN_HOME
        .iter()
        .map(|r| home.join(r))
        .chain(HIDDEN_IN_AGENT_DIR.iter().map(|r| agent_dir.join(r)))
        .chain(extra.iter().cloned());
    for p in all {
        let r = resolve(&p);
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// Where a git work tree keeps what the sandbox protects.
#[derive(Debug, Clone, PartialEq)]
pub struct GitLayout {
    /// `<workspace>/.git`: a directory, or a file naming the git dir (a
    /// linked worktree or a submodule).
    pub dot_git: PathBuf,
    /// The repository's own git dir (holds `HEAD`, `index`).
    pub git_dir: PathBuf,
    /// The common git dir (holds `hooks`, `config`, `objects`); the git
    /// dir itself unless a `commondir` file points elsewhere.
    pub common_dir: PathBuf,
}

/// The workspace for `cwd` (resolved): the root of the git work tree that
/// holds it (the nearest ancestor with a `.git`), else `cwd` itself; and
/// the git layout when there is one.
pub fn workspace(cwd: &Path) -> (PathBuf, Option<GitLayout>) {
    let cwd = resolve(cwd);
    for dir in cwd.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&dot_git) else {
            continue;
        };
        let git_dir = if meta.is_dir() {
            dot_git.clone()
        } else {
            match git_file_target(&dot_git) {
                Some(d) => d,
                None => continue,
            }
        };
        let common_dir = std::fs::read_to_string(git_dir.join("commondir"))
            .ok()
            .map(|s| resolve(&git_dir.join(s.trim())))
            .unwrap_or_else(|| git_dir.clone());
        return (
            dir.to_path_buf(),
            Some(GitLayout {
                dot_git,
                git_dir,
                common_dir,
            }),
        );
    }
    (cwd, None)
}

/// The git dir a `.git` file names (`gitdir: PATH`, relative to the file's
/// directory), when it is a directory.
fn git_file_target(file: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let base = file.parent()?;
    let dir = resolve(&base.join(target));
    dir.is_dir().then_some(dir)
}

/// Why a path inside the workspace stays read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protected {
    /// Git runs these outside any sandbox on the next commit.
    GitHooks,
    /// `core.fsmonitor`, `core.hooksPath`, aliases and filters run code.
    GitConfig,
    /// A `.git` file names the git dir.
    GitFile,
    /// Project extensions, `mcp.json` and settings load on the next run.
    ProjectPi,
    /// A hidden credential store inside a writable root.
    Hidden,
}

impl Protected {
    /// What the rule guards against, for denials and the docs.
    pub fn reason(self) -> &'static str {
        match self {
            Protected::GitHooks => "git hooks run unconfined on the next git command",
            Protected::GitConfig => "git config can name commands that run unconfined",
            Protected::GitFile => "it names the git directory",
            Protected::ProjectPi => {
                "project extensions, MCP servers and settings load on the next run"
            }
            Protected::Hidden => "it is a hidden credential store",
        }
    }
}

/// The paths inside the writable roots that the workspace-write sandbox
/// keeps read-only, with why: git's hooks and config (of the repository,
/// its linked worktree's git dir and its submodules), the `.git` file of a
/// linked worktree, `core.hooksPath` when it is set, and the project's
/// `.pi/` (in the workspace root and the cwd). Missing ones that would
/// otherwise be created unprotected (`.pi/`, `hooks/`) are listed too;
/// the caller creates them before protecting them.
pub fn protected_paths(
    workspace: &Path,
    cwd: &Path,
    git: Option<&GitLayout>,
    hooks_path: Option<&Path>,
) -> Vec<(PathBuf, Protected)> {
    let mut out: Vec<(PathBuf, Protected)> = Vec::new();
    let mut push = |p: PathBuf, why: Protected| {
        if !out.iter().any(|(q, _)| *q == p) {
            out.push((p, why));
        }
    };
    if let Some(g) = git {
        if g.dot_git.is_file() {
            push(g.dot_git.clone(), Protected::GitFile);
        }
        let mut repos = vec![g.common_dir.clone()];
        repos.extend(submodule_git_dirs(&g.common_dir.join("modules")));
        for d in &repos {
            push(d.join("hooks"), Protected::GitHooks);
            push(d.join("config"), Protected::GitConfig);
        }
        // `extensions.worktreeConfig` adds a per-worktree config file.
        repos.push(g.git_dir.clone());
        for d in &repos {
            let worktree_config = d.join("config.worktree");
            if worktree_config.exists() {
                push(worktree_config, Protected::GitConfig);
            }
        }
        if let Some(h) = hooks_path {
            push(resolve(&workspace.join(h)), Protected::GitHooks);
        }
        // A linked worktree's `commondir` names where its config and
        // hooks live.
        let commondir = g.git_dir.join("commondir");
        if commondir.is_file() {
            push(commondir, Protected::GitFile);
        }
    }
    push(workspace.join(".pi"), Protected::ProjectPi);
    push(resolve(cwd).join(".pi"), Protected::ProjectPi);
    out
}

/// The `commondir` files that must not appear: one in the repository's
/// own git dir or a submodule's would move the git dir's config and hooks
/// to wherever it points, out of the sandbox's protection (git reads it in
/// any git dir). Listed for the git dirs that have none now.
pub fn absent_paths(git: &GitLayout) -> Vec<PathBuf> {
    let mut dirs = vec![git.common_dir.clone()];
    dirs.extend(submodule_git_dirs(&git.common_dir.join("modules")));
    dirs.into_iter()
        .map(|d| d.join("commondir"))
        .filter(|p| std::fs::symlink_metadata(p).is_err())
        .collect()
}

/// The git dirs of submodules under `modules` (each holds a `HEAD`),
/// nested ones too; at most 200, at most 6 levels deep.
fn submodule_git_dirs(modules: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(modules.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if p.join("HEAD").is_file() {
                out.push(p.clone());
                if depth < 6 {
                    stack.push((p.join("modules"), depth + 1));
                }
            } else if depth < 6 {
                stack.push((p, depth + 1));
            }
            if out.len() >= 200 {
                return out;
            }
        }
    }
    out
}

/// `p` with the home directory written as `~` (for the notice line).
pub fn short(p: &Path, home: &Path) -> String {
    match p.strip_prefix(home) {
        Ok(rest) if home != Path::new("/") => {
            if rest.as_os_str().is_empty() {
                "~".into()
            } else {
                format!("~/{}", rest.display())
            }
        }
        _ => p.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        (t, root)
    }

    #[test]
    fn resolve_follows_links_dangling_too_and_dotdot_after_them() {
        let (_t, r) = tmp();
        std::fs::create_dir_all(r.join("ws/sub")).unwrap();
        std::fs::create_dir_all(r.join("out/deep")).unwrap();
        symlink(r.join("out/deep"), r.join("ws/link")).unwrap();
        symlink(r.join("out/new.txt"), r.join("ws/dangling")).unwrap();
        symlink("../out", r.join("ws/rel")).unwrap();
        symlink("loop", r.join("ws/loop")).unwrap();
        assert_eq!(resolve(&r.join("ws/sub/../x")), r.join("ws/x"));
        assert_eq!(resolve(&r.join("ws/link/f")), r.join("out/deep/f"));
        // `..` after a link goes to the parent of its target.
        assert_eq!(resolve(&r.join("ws/link/../g")), r.join("out/g"));
        assert_eq!(resolve(&r.join("ws/dangling")), r.join("out/new.txt"));
        assert_eq!(resolve(&r.join("ws/rel/h")), r.join("out/h"));
        assert_eq!(resolve(&r.join("ws/missing/../../y")), r.join("y"));
        assert_eq!(resolve(&r.join("ws/loop")), r.join("ws/loop"));
        assert_eq!(resolve(Path::new("/../..")), PathBuf::from("/"));
    }

    #[test]
    fn workspace_is_the_git_root_and_a_worktree_names_its_common_dir() {
        let (_t, r) = tmp();
        std::fs::create_dir_all(r.join("repo/.git/hooks")).unwrap();
        std::fs::create_dir_all(r.join("repo/a/b")).unwrap();
        let (ws, git) = workspace(&r.join("repo/a/b"));
        assert_eq!(ws, r.join("repo"));
        let g = git.unwrap();
        assert_eq!(g.git_dir, r.join("repo/.git"));
        assert_eq!(g.common_dir, r.join("repo/.git"));
        // A linked worktree: `.git` is a file; commondir points back.
        std::fs::create_dir_all(r.join("repo/.git/worktrees/wt")).unwrap();
        std::fs::write(r.join("repo/.git/worktrees/wt/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(r.join("wt")).unwrap();
        std::fs::write(
            r.join("wt/.git"),
            format!("gitdir: {}\n", r.join("repo/.git/worktrees/wt").display()),
        )
        .unwrap();
        let (ws, git) = workspace(&r.join("wt"));
        assert_eq!(ws, r.join("wt"));
        let g = git.unwrap();
        assert_eq!(g.git_dir, r.join("repo/.git/worktrees/wt"));
        assert_eq!(g.common_dir, r.join("repo/.git"));
        let p = protected_paths(&ws, &ws, Some(&g), None);
        let names: Vec<_> = p.iter().map(|(p, _)| p.clone()).collect();
        assert!(names.contains(&r.join("wt/.git")));
        assert!(names.contains(&r.join("repo/.git/hooks")));
        assert!(names.contains(&r.join("repo/.git/config")));
        assert!(names.contains(&r.join("wt/.pi")));
        // No git: the cwd, and only `.pi/` to protect.
        std::fs::create_dir_all(r.join("plain")).unwrap();
        let (ws, git) = workspace(&r.join("plain"));
        assert_eq!((ws.clone(), git.is_none()), (r.join("plain"), true));
        assert_eq!(
            protected_paths(&ws, &ws, None, None),
            vec![(r.join("plain/.pi"), Protected::ProjectPi)]
        );
    }

    #[test]
    fn submodules_and_hooks_path_are_protected() {
        let (_t, r) = tmp();
        std::fs::create_dir_all(r.join("repo/.git/modules/sub/modules/inner")).unwrap();
        std::fs::write(r.join("repo/.git/modules/sub/HEAD"), "x").unwrap();
        std::fs::write(r.join("repo/.git/modules/sub/modules/inner/HEAD"), "x").unwrap();
        let (ws, git) = workspace(&r.join("repo"));
        let p = protected_paths(&ws, &ws, git.as_ref(), Some(Path::new(".husky")));
        let names: Vec<_> = p.iter().map(|(p, _)| p.clone()).collect();
        for want in [
            "repo/.git/hooks",
            "repo/.git/config",
            "repo/.git/modules/sub/hooks",
            "repo/.git/modules/sub/config",
            "repo/.git/modules/sub/modules/inner/hooks",
            "repo/.husky",
            "repo/.pi",
        ] {
            assert!(names.contains(&r.join(want)), "{want}: {names:?}");
        }
    }

    #[test]
    fn hidden_paths_resolve_links_and_keep_the_list_order() {
        let (_t, r) = tmp();
        std::fs::create_dir_all(r.join("home")).unwrap();
        std::fs::create_dir_all(r.join("vault")).unwrap();
        symlink(r.join("vault"), r.join("home/.ssh")).unwrap();
        let h = hidden_paths(&r.join("home"), &r.join("agent"), &[r.join("extra")]);
        assert_eq!(h[0], r.join("vault"));
        assert_eq!(
            h.len(),
            HIDDEN_IN_HOME.len() + HIDDEN_IN_AGENT_DIR.len() + 1
        );
        assert_eq!(h.last().unwrap(), &r.join("extra"));
        assert!(h.contains(&r.join("agent/auth.json")));
    }

    /// docs/sandbox.md lists exactly the paths of the code's one list.
    #[test]
    fn the_docs_list_the_hidden_paths() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/sandbox.md"),
        )
        .unwrap();
        for p in HIDDEN_IN_HOME {
            assert!(
                doc.contains(&format!("`~/{p}`")),
                "docs/sandbox.md lacks ~/{p}"
            );
        }
        for p in HIDDEN_IN_AGENT_DIR {
            assert!(doc.contains(&format!("`{p}`")), "docs/sandbox.md lacks {p}");
        }
    }
}
