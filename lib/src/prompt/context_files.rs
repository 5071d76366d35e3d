//! Context files (AGENTS.md / CLAUDE.md): always loaded, trust-independent.
//!
//! Order as pi 1.6.0: the global `<agentDir>/AGENTS.md` (or CLAUDE.md) first,
//! then every directory from the filesystem root down to the cwd; in each
//! directory the first of `AGENTS.override.md`, `AGENTS.md`, `CLAUDE.md`
//! (case variants accepted) wins. The same real file reached twice (a git
//! worktree's copy, a symlink) is loaded once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// One loaded context file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    pub path: PathBuf,
    pub content: String,
}

/// The names tried in each directory, in priority order.
const NAMES: [&str; 3] = ["AGENTS.override.md", "AGENTS.md", "CLAUDE.md"];

/// The first context file present in `dir` (exact name first, then any case
/// variant of it).
fn find_in(dir: &Path) -> Option<PathBuf> {
    let listing: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for name in NAMES {
        if listing.iter().any(|n| n == name) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
        if let Some(n) = listing.iter().find(|n| n.eq_ignore_ascii_case(name)) {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
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
    let mut dirs: Vec<&Path> = cwd.ancestors().collect();
    dirs.reverse();
    for d in dirs {
        if let Some(p) = find_in(d) {
            candidates.push(p);
        }
    }
    let mut seen = HashSet::new();
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in candidates {
        let real = p.canonicalize().unwrap_or_else(|_| p.clone());
        if !seen.insert(real) {
            continue;
        }
        match std::fs::read_to_string(&p) {
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
        std::fs::write(sub.join("claude.md"), "s").unwrap();
        let (files, errs) = discover(&agent, &sub);
        assert!(errs.is_empty());
        let contents: Vec<&str> = files.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(contents, ["g", "p", "s"]);
    }
}
