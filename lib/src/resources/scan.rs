//! Directory scanning shared by every resource type: entries in sorted
//! (byte) order, hidden entries and `node_modules` skipped, `.gitignore`,
//! `.ignore` and `.fdignore` honoured at every level, symlinks followed —
//! pi 1.6.0's rules. A symlink loop ends where the OS refuses to resolve the
//! path (ELOOP), exactly where pi's walk ends; unreadable entries are
//! skipped silently, as pi does.

use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// One directory entry, resolved through symlinks.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub path: PathBuf,
    pub is_dir: bool,
}

/// The ignore files in effect while walking down a tree.
#[derive(Default, Clone)]
pub struct IgnoreStack {
    layers: Vec<Gitignore>,
}

impl IgnoreStack {
    /// Adds the ignore files found in `dir` (returns the deeper stack).
    pub fn enter(&self, dir: &Path) -> IgnoreStack {
        let mut b = GitignoreBuilder::new(dir);
        let mut any = false;
        for name in [".gitignore", ".ignore", ".fdignore"] {
            let p = dir.join(name);
            if p.is_file() {
                any = true;
                let _ = b.add(p);
            }
        }
        let mut next = self.clone();
        if any {
            if let Ok(g) = b.build() {
                next.layers.push(g);
            }
        }
        next
    }

    /// Whether `path` is ignored by any layer (deepest layer decides first).
    pub fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        for g in self.layers.iter().rev() {
            let m = g.matched(path, is_dir);
            if m.is_ignore() {
                return true;
            }
            if m.is_whitelist() {
                return false;
            }
        }
        false
    }
}

/// The visible entries of `dir`, sorted by name; `None` when unreadable.
pub fn list(dir: &Path, ignores: &IgnoreStack) -> Option<Vec<Entry>> {
    let rd = std::fs::read_dir(dir).ok()?;
    let mut names: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.') && n != "node_modules")
        .collect();
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let path = dir.join(&name);
        // Follows symlinks: broken links and loops fail here and are skipped.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let is_dir = meta.is_dir();
        if !is_dir && !meta.is_file() {
            continue;
        }
        if ignores.ignored(&path, is_dir) {
            continue;
        }
        out.push(Entry { name, path, is_dir });
    }
    Some(out)
}

/// Every file under `dir` (recursively) whose name satisfies `want`, in
/// walk order.
pub fn files_recursive(dir: &Path, want: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, &IgnoreStack::default(), want, &mut out);
    out
}

fn walk(dir: &Path, parent: &IgnoreStack, want: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
    let ignores = parent.enter(dir);
    let Some(entries) = list(dir, &ignores) else {
        return;
    };
    for e in entries {
        if e.is_dir {
            walk(&e.path, &ignores, want, out);
        } else if want(&e.name) {
            out.push(e.path);
        }
    }
}

/// The files directly in `dir` whose name satisfies `want`.
pub fn files_flat(dir: &Path, want: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let ignores = IgnoreStack::default().enter(dir);
    list(dir, &ignores)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| !e.is_dir && want(&e.name))
        .map(|e| e.path)
        .collect()
}

/// The two ways pi 1.6.0 lays out a skills folder (observed with the
/// oracle, tests/oracle/FINDINGS.md). In both, a folder holding a
/// `SKILL.md` is one skill (its other files and subfolders are not
/// searched), folders without one are searched deeper, and entries are
/// visited in sorted order, files and folders interleaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillLayout {
    /// pi's own folders (`.pi/skills`, `<agentDir>/skills`, settings, CLI
    /// and package paths): a `*.md` file directly in the top folder is a
    /// skill; loose `.md` files deeper down are not.
    Pi,
    /// The Agent Skills folders pi discovers by itself (`.agents/skills` in
    /// the project and its ancestors, `~/.agents/skills`): loose `.md` files
    /// in the top folder are ignored; in every deeper folder without a
    /// `SKILL.md`, each `*.md` file is a skill.
    AgentSkills,
}

/// The skill files of the skills folder `dir` laid out as `layout`.
pub fn skill_files(dir: &Path, layout: SkillLayout) -> Vec<PathBuf> {
    let mut out = Vec::new();
    skill_walk(dir, &IgnoreStack::default(), true, layout, &mut out);
    out
}

fn skill_walk(
    dir: &Path,
    parent: &IgnoreStack,
    root: bool,
    layout: SkillLayout,
    out: &mut Vec<PathBuf>,
) {
    let ignores = parent.enter(dir);
    let Some(entries) = list(dir, &ignores) else {
        return;
    };
    if let Some(s) = entries.iter().find(|e| !e.is_dir && e.name == "SKILL.md") {
        out.push(s.path.clone());
        return;
    }
    let loose_md = match layout {
        SkillLayout::Pi => root,
        SkillLayout::AgentSkills => !root,
    };
    for e in entries {
        if e.is_dir {
            skill_walk(&e.path, &ignores, false, layout, out);
        } else if loose_md && e.name.ends_with(".md") {
            out.push(e.path);
        }
    }
}

/// The realpath of `p`, or `p` itself when it cannot be resolved.
pub fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "x").unwrap();
    }

    #[test]
    fn the_two_skill_layouts() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for f in [
            "a-top.md",
            "folder/SKILL.md",
            "folder/extra.md",
            "folder/sub/SKILL.md",
            "loose/aa.md",
            "loose/b/SKILL.md",
            "loose/cc.md",
            "loose/deeper/x.md",
            "loose/UPPER.MD",
        ] {
            w(&d.join(f));
        }
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(d).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            rel(skill_files(d, SkillLayout::Pi)),
            ["a-top.md", "folder/SKILL.md", "loose/b/SKILL.md"]
        );
        assert_eq!(
            rel(skill_files(d, SkillLayout::AgentSkills)),
            [
                "folder/SKILL.md",
                "loose/aa.md",
                "loose/b/SKILL.md",
                "loose/cc.md",
                "loose/deeper/x.md"
            ]
        );
        // A SKILL.md at the top makes the whole folder one skill.
        w(&d.join("SKILL.md"));
        for layout in [SkillLayout::Pi, SkillLayout::AgentSkills] {
            assert_eq!(rel(skill_files(d, layout)), ["SKILL.md"]);
        }
    }
}
