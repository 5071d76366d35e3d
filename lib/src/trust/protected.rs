//! Which paths make a project need a trust decision (pi 1.6.0's rule, plus
//! the toolkit's subagent profiles), and the canonical form of a directory
//! that every trust lookup keys on.
//!
//! The rule is deliberately narrow and cheap: existence checks only, the
//! `.pi/` entries in the cwd alone, `.agents/skills` in the cwd and every
//! ancestor except the user's own `$HOME/.agents/skills`. A bare `.pi/`
//! (or one holding anything else) needs nothing. pi has no subagent
//! profiles; ours define a child's tools, prompt and model, so a profile
//! folder of the cwd (`.pi/agents`, `.agents/agents`) holding a `*.md` file
//! needs a decision too (listed after pi's paths; a project without
//! profiles is decided exactly as pi decides it).

use std::path::{Path, PathBuf};

use crate::paths::normalize;

/// The entries of `<cwd>/.pi/` that need a decision, in pi's order.
pub const PROTECTED_PI_ENTRIES: [&str; 8] = [
    "settings.json",
    "mcp.json",
    "extensions",
    "skills",
    "prompts",
    "themes",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
];

/// The cwd's subagent profile folders (the toolkit's own protected
/// resources; the profile loader reads `*.md` files from exactly these).
pub const PROFILE_DIRS: [&str; 2] = [".agents/agents", ".pi/agents"];

/// pi's config folder name (`piConfig.configDir`).
pub const CONFIG_DIR: &str = ".pi";

/// `dir` made absolute (against the process cwd) and realpath'd; when the
/// realpath fails (a missing folder) the absolute, lexically cleaned path.
/// This is the form trust.json keys are written in.
pub fn canonicalize_dir(dir: &Path) -> PathBuf {
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(dir),
            Err(_) => dir.to_path_buf(),
        }
    };
    std::fs::canonicalize(&abs).unwrap_or_else(|_| normalize(&abs))
}

/// The protected resources found from `cwd` (canonicalized first), in
/// pi's order: `.pi/` entries, then `.agents/skills` from the cwd upwards.
/// Empty means the project needs no trust decision. `home` is the user's
/// home directory, whose `.agents/skills` is user-level, not project-level.
pub fn protected_paths(cwd: &Path, home: &Path) -> Vec<PathBuf> {
    let cwd = canonicalize_dir(cwd);
    let mut found = Vec::new();
    let pi_dir = cwd.join(CONFIG_DIR);
    for entry in PROTECTED_PI_ENTRIES {
        let p = pi_dir.join(entry);
        if p.exists() {
            found.push(p);
        }
    }
    // pi compares real paths: a symlinked $HOME still excludes its own
    // `.agents/skills` (checked against pi 1.6.0).
    let home_skills =
        [home.to_path_buf(), canonicalize_dir(home)].map(|h| h.join(".agents").join("skills"));
    for dir in cwd.ancestors() {
        let p = dir.join(".agents").join("skills");
        if home_skills.contains(&p) {
            continue;
        }
        if p.exists() {
            found.push(p);
        }
    }
    for rel in PROFILE_DIRS {
        let dir = cwd.join(rel);
        if holds_profiles(&dir) {
            found.push(dir);
        }
    }
    found
}

/// Whether `dir` holds a `*.md` file (symlinks followed: it is enough that
/// a profile might load).
fn holds_profiles(dir: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let p = e.path();
        p.extension().is_some_and(|x| x == "md") && p.is_file()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap();
        (t, root)
    }

    #[test]
    fn bare_pi_dir_needs_nothing() {
        let (_t, root) = tmp();
        let cwd = root.join("p");
        fs::create_dir_all(cwd.join(".pi/other")).unwrap();
        fs::write(cwd.join(".pi/AGENTS.md"), "x").unwrap();
        assert!(protected_paths(&cwd, &root.join("home")).is_empty());
    }

    #[test]
    fn every_pi_entry_counts_in_cwd_only() {
        for e in PROTECTED_PI_ENTRIES {
            let (_t, root) = tmp();
            let cwd = root.join("a/p");
            fs::create_dir_all(cwd.join(".pi")).unwrap();
            if e.contains('.') {
                fs::write(cwd.join(".pi").join(e), "{}").unwrap();
            } else {
                fs::create_dir(cwd.join(".pi").join(e)).unwrap();
            }
            assert_eq!(
                protected_paths(&cwd, &root.join("home")),
                vec![cwd.join(".pi").join(e)],
                "{e}"
            );
            // the same entry in an ancestor's .pi counts for nothing
            let sub = cwd.join("sub");
            fs::create_dir(&sub).unwrap();
            assert!(protected_paths(&sub, &root.join("home")).is_empty(), "{e}");
        }
    }

    #[test]
    fn agents_skills_in_ancestors_but_not_home() {
        let (_t, root) = tmp();
        let cwd = root.join("w/parent/p");
        fs::create_dir_all(&cwd).unwrap();
        fs::create_dir_all(root.join("w/.agents/skills")).unwrap();
        fs::create_dir_all(cwd.join(".agents/skills")).unwrap();
        let home = root.join("elsewhere");
        assert_eq!(
            protected_paths(&cwd, &home),
            vec![cwd.join(".agents/skills"), root.join("w/.agents/skills")]
        );
        // home's own .agents/skills is user-level
        assert_eq!(
            protected_paths(&cwd, &root.join("w")),
            vec![cwd.join(".agents/skills")]
        );
        // a symlinked home is compared by its real path
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("w"), root.join("homelink")).unwrap();
            assert_eq!(
                protected_paths(&cwd, &root.join("homelink")),
                vec![cwd.join(".agents/skills")]
            );
        }
        // `.agents` without `skills` counts for nothing
        let other = root.join("o");
        fs::create_dir_all(other.join(".agents/x")).unwrap();
        assert!(protected_paths(&other, &home).is_empty());
    }

    #[test]
    fn profile_folders_with_profiles_count_after_pi_s_paths() {
        let (_t, root) = tmp();
        let cwd = root.join("p");
        let home = root.join("home");
        // Empty folders, or ones without a profile, need nothing.
        fs::create_dir_all(cwd.join(".pi/agents/sub")).unwrap();
        fs::create_dir_all(cwd.join(".agents/agents")).unwrap();
        fs::write(cwd.join(".pi/agents/notes.txt"), "x").unwrap();
        fs::write(cwd.join(".pi/agents/sub/deep.md"), "x").unwrap();
        assert!(protected_paths(&cwd, &home).is_empty());
        fs::write(cwd.join(".pi/agents/explore.md"), "---\n---\n").unwrap();
        assert_eq!(protected_paths(&cwd, &home), vec![cwd.join(".pi/agents")]);
        fs::write(cwd.join(".agents/agents/x.md"), "").unwrap();
        fs::create_dir_all(cwd.join(".pi/skills")).unwrap();
        assert_eq!(
            protected_paths(&cwd, &home),
            vec![
                cwd.join(".pi/skills"),
                cwd.join(".agents/agents"),
                cwd.join(".pi/agents")
            ]
        );
        // Only the cwd's own folders: an ancestor's profiles never load.
        let sub = cwd.join("sub");
        fs::create_dir_all(&sub).unwrap();
        assert!(protected_paths(&sub, &home).is_empty());
    }

    #[test]
    fn cwd_is_realpathed() {
        let (_t, root) = tmp();
        let real = root.join("real");
        fs::create_dir_all(real.join(".pi/prompts")).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&real, root.join("link")).unwrap();
            assert_eq!(
                protected_paths(&root.join("link"), &root.join("h")),
                vec![real.join(".pi/prompts")]
            );
            assert_eq!(canonicalize_dir(&root.join("link")), real);
        }
        assert_eq!(
            canonicalize_dir(&root.join("missing/./x/../y")),
            root.join("missing/y")
        );
    }
}
