//! Context files (AGENTS.md / CLAUDE.md): always loaded, trust-independent.
//!
//! Order as pi 1.6.0: the global `<agentDir>` file first, then every
//! directory from the filesystem root down to the cwd; in each directory
//! the first of `AGENTS.override.md`, `AGENTS.md`, `AGENTS.MD`, `CLAUDE.md`,
//! `CLAUDE.MD` wins (exact names: `agents.md` or `Claude.md` are not
//! context files). The same path is loaded once (a symlink to another
//! context file is *not* merged: pi loads both), and inside a linked git worktree nested in its main checkout, the
//! main checkout's file is skipped when the worktree has its own copy of it
//! (the same rule, checked out twice).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// One loaded context file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    pub path: PathBuf,
    pub content: String,
}

/// The names tried in each directory, in priority order.
pub const NAMES: [&str; 5] = [
    "AGENTS.override.md",
    "AGENTS.md",
    "AGENTS.MD",
    "CLAUDE.md",
    "CLAUDE.MD",
];

/// The first context file present in `dir`.
fn find_in(dir: &Path) -> Option<PathBuf> {
    NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// For a cwd inside a linked worktree: `(worktree root, main checkout root)`.
fn worktree_roots(cwd: &Path) -> Option<(PathBuf, PathBuf)> {
    for dir in cwd.ancestors() {
        let git = dir.join(".git");
        // One stat per level: a `.git` directory ends the search, a
        // `.git` file is a linked worktree's pointer.
        let Ok(meta) = std::fs::metadata(&git) else {
            continue;
        };
        if meta.is_dir() {
            return None;
        }
        if meta.is_file() {
            // A `gitdir:` pointer is one short line.
            let text = crate::regular_file::read_config(&git, 64 << 10).ok()??;
            let gitdir = text.trim().strip_prefix("gitdir:")?.trim();
            let gitdir = if Path::new(gitdir).is_absolute() {
                PathBuf::from(gitdir)
            } else {
                dir.join(gitdir)
            };
            // <main>/.git/worktrees/<name>
            let dotgit = gitdir.parent()?.parent()?;
            if dotgit.file_name()? != ".git" {
                return None;
            }
            return Some((dir.to_path_buf(), dotgit.parent()?.to_path_buf()));
        }
    }
    None
}

/// Discovers the context files for `cwd` with `agent_dir` as the global dir.
/// Unreadable files are skipped (returned in the second list with the error).
pub fn discover(agent_dir: &Path, cwd: &Path) -> (Vec<ContextFile>, Vec<(PathBuf, String)>) {
    let mut candidates = Vec::new();
    if let Some(p) = find_in(agent_dir) {
        candidates.push(p);
    }
    let worktree = worktree_roots(cwd);
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    for d in dirs {
        let Some(p) = find_in(d) else { continue };
        if let Some((wt, main)) = &worktree {
            if !d.starts_with(wt) {
                if let (Ok(rel), Some(name)) = (d.strip_prefix(main), p.file_name()) {
                    if wt.join(rel).join(name).is_file() {
                        continue;
                    }
                }
            }
        }
        candidates.push(p);
    }
    let mut seen = HashSet::new();
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in candidates {
        if !seen.insert(p.clone()) {
            continue;
        }
        match crate::resources::text::read(&p) {
            Ok(content) => files.push(ContextFile { path: p, content }),
            Err(e) => errors.push((p, e.to_string())),
        }
    }
    (files, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_then_root_to_cwd_first_name_wins() {
        let t = tempfile::tempdir().unwrap();
        let agent = t.path().join("agent");
        let proj = t.path().join("proj");
        let sub = proj.join("sub");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(agent.join("AGENTS.md"), "g").unwrap();
        std::fs::write(proj.join("AGENTS.md"), "p").unwrap();
        std::fs::write(proj.join("CLAUDE.md"), "ignored").unwrap();
        std::fs::write(sub.join("claude.md"), "not a context file").unwrap();
        std::fs::write(sub.join("CLAUDE.MD"), "s").unwrap();
        let (files, errs) = discover(&agent, &sub);
        assert!(errs.is_empty());
        let contents: Vec<&str> = files.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(contents, ["g", "p", "s"]);
    }
}
