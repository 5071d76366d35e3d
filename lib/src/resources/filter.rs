//! Settings and manifest path arrays, as pi 1.6.0 reads them: plain entries
//! are paths to load, entries with glob characters are include patterns
//! (when any is present, explicitly listed files must match one), `!glob`
//! excludes, `+path` force-includes and `-path` force-excludes one exact
//! path. Patterns match a file's path relative to the base folder, its
//! name, or its absolute path — and for a `SKILL.md` the same three forms
//! of its folder.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobMatcher};

use crate::paths::normalize;

/// One parsed array.
#[derive(Debug, Default, Clone)]
pub struct PathSpec {
    /// Plain entries, resolved against the base folder.
    pub paths: Vec<PathBuf>,
    /// Include globs (raw text kept for manifest expansion).
    pub includes: Vec<(String, GlobMatcher)>,
    pub excludes: Vec<GlobMatcher>,
    pub force_include: Vec<PathBuf>,
    pub force_exclude: Vec<PathBuf>,
}

/// Whether an entry is a glob pattern.
pub fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

fn matcher(pattern: &str) -> Option<GlobMatcher> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .or_else(|_| Glob::new(&globset::escape(pattern)))
        .ok()
        .map(|g| g.compile_matcher())
}

/// Expands `~` and resolves a relative entry against `base`.
pub fn resolve(entry: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    if entry == "~" {
        if let Some(h) = home {
            return h.to_path_buf();
        }
    }
    if let (Some(rest), Some(h)) = (entry.strip_prefix("~/"), home) {
        return h.join(rest);
    }
    let p = Path::new(entry);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    normalize(&joined)
}

impl PathSpec {
    /// Parses an array of strings (non-strings are ignored).
    pub fn parse(entries: &[String], base: &Path, home: Option<&Path>) -> PathSpec {
        let mut s = PathSpec::default();
        for e in entries {
            let e = e.trim();
            if e.is_empty() {
                continue;
            }
            if let Some(p) = e.strip_prefix('!') {
                if let Some(m) = matcher(p) {
                    s.excludes.push(m);
                }
            } else if let Some(p) = e.strip_prefix('+') {
                s.force_include.push(resolve(p, base, home));
            } else if let Some(p) = e.strip_prefix('-') {
                s.force_exclude.push(resolve(p, base, home));
            } else if is_glob(e) {
                if let Some(m) = matcher(e) {
                    s.includes.push((e.to_string(), m));
                }
            } else {
                s.paths.push(resolve(e, base, home));
            }
        }
        s
    }

    /// Whether anything but plain paths is present.
    pub fn has_filters(&self) -> bool {
        !self.includes.is_empty()
            || !self.excludes.is_empty()
            || !self.force_include.is_empty()
            || !self.force_exclude.is_empty()
    }

    /// Whether `file` stays enabled. `explicit`: it came from this array's
    /// own paths (include globs only narrow those).
    pub fn enabled(&self, file: &Path, base: &Path, explicit: bool) -> bool {
        let forms = forms(file);
        if self
            .force_exclude
            .iter()
            .any(|p| forms.iter().any(|f| f == p))
        {
            return false;
        }
        if self
            .force_include
            .iter()
            .any(|p| forms.iter().any(|f| f == p))
        {
            return true;
        }
        let cands = candidates(&forms, base);
        if explicit
            && !self.includes.is_empty()
            && !self
                .includes
                .iter()
                .any(|(_, m)| cands.iter().any(|c| m.is_match(c)))
        {
            return false;
        }
        !self
            .excludes
            .iter()
            .any(|m| cands.iter().any(|c| m.is_match(c)))
    }
}

/// The file itself and, for `SKILL.md`, its folder.
fn forms(file: &Path) -> Vec<PathBuf> {
    let mut v = vec![file.to_path_buf()];
    if file.file_name().is_some_and(|n| n == "SKILL.md") {
        if let Some(d) = file.parent() {
            v.push(d.to_path_buf());
        }
    }
    v
}

/// Relative path, name and absolute path of each form.
fn candidates(forms: &[PathBuf], base: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in forms {
        if let Ok(rel) = f.strip_prefix(base) {
            out.push(rel.to_string_lossy().into_owned());
        }
        if let Some(n) = f.file_name() {
            out.push(n.to_string_lossy().into_owned());
        }
        out.push(f.to_string_lossy().into_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(e: &[&str]) -> PathSpec {
        let v: Vec<String> = e.iter().map(|s| s.to_string()).collect();
        PathSpec::parse(&v, Path::new("/a"), None)
    }

    #[test]
    fn excludes_match_relative_name_and_skill_dir() {
        let f = Path::new("/a/extra/b/SKILL.md");
        let base = Path::new("/a");
        assert!(!spec(&["extra", "!b"]).enabled(f, base, true));
        assert!(!spec(&["extra", "!*/b"]).enabled(f, base, true));
        assert!(!spec(&["extra", "!**/b/**"]).enabled(f, base, true));
        assert!(spec(&["extra", "!b/SKILL.md"]).enabled(f, base, true));
        assert!(spec(&["extra", "!**/b/**", "+extra/b"]).enabled(f, base, true));
        assert!(!spec(&["extra", "-extra/b/SKILL.md"]).enabled(f, base, true));
    }

    #[test]
    fn include_globs_narrow_explicit_only() {
        let f = Path::new("/a/extra/b/SKILL.md");
        let base = Path::new("/a");
        let s = spec(&["extra", "extra/a/*"]);
        assert!(!s.enabled(f, base, true));
        assert!(s.enabled(f, base, false));
        assert!(spec(&["extra", "extra/*"]).enabled(f, base, true));
    }
}
