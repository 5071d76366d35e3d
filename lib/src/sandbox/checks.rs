//! The in-process file tools' side of the sandbox: the same policy the
//! kernel enforces on commands, applied to the path the kernel would reach
//! ([`super::paths::resolve`]: symlinks, dangling ones too, and `..`
//! resolved) before anything is touched. A denial is a plain tool error
//! naming the path and the rule, so the model can adapt.

use std::path::Path;

use super::paths::resolve;
use super::{Mode, Sandbox};

impl Sandbox {
    /// The hidden credential store `resolved` is in, if any.
    fn hidden_by(&self, resolved: &Path) -> Option<&Path> {
        self.hidden
            .iter()
            .find(|h| resolved.starts_with(h))
            .map(|h| h.as_path())
    }

    /// Whether a directory walk (grep, find) must skip `resolved`.
    pub fn hides(&self, resolved: &Path) -> bool {
        self.is_on() && self.hidden_by(resolved).is_some()
    }

    /// May a file tool read `path` (absolute)? The error is the tool's
    /// result text.
    pub fn check_read(&self, path: &Path) -> Result<(), String> {
        if !self.is_on() {
            return Ok(());
        }
        let r = resolve(path);
        match self.hidden_by(&r) {
            Some(h) => Err(format!(
                "Permission denied: {} is hidden by the {} sandbox (credential store {})",
                shown(path, &r),
                self.mode.name(),
                h.display()
            )),
            None => Ok(()),
        }
    }

    /// May a file tool write `path` (absolute)? The error is the tool's
    /// result text.
    pub fn check_write(&self, path: &Path) -> Result<(), String> {
        if !self.is_on() {
            return Ok(());
        }
        let r = resolve(path);
        let p = shown(path, &r);
        if self.mode == Mode::ReadOnly {
            return Err(format!(
                "Permission denied: {p} cannot be written: the read-only sandbox allows no writes"
            ));
        }
        if let Some(h) = self.hidden_by(&r) {
            return Err(format!(
                "Permission denied: {p} is hidden by the {} sandbox (credential store {})",
                self.mode.name(),
                h.display()
            ));
        }
        if self.absent.iter().any(|a| r.starts_with(a)) {
            return Err(format!(
                "Permission denied: {p} cannot be created in the {} sandbox: it would move git's config and hooks out of the sandbox's protection",
                self.mode.name()
            ));
        }
        if !self.writable.iter().any(|w| r.starts_with(w)) {
            return Err(format!(
                "Permission denied: {p} is outside the writable roots of the {} sandbox",
                self.mode.name()
            ));
        }
        if let Some((ro, why)) = self.read_only.iter().find(|(ro, _)| r.starts_with(ro)) {
            return Err(format!(
                "Permission denied: {p} is read-only in the {} sandbox: {} stays read-only because {}",
                self.mode.name(),
                ro.display(),
                why.reason()
            ));
        }
        Ok(())
    }
}

/// The path as given, and where it leads when that differs.
fn shown(given: &Path, resolved: &Path) -> String {
    if crate::paths::normalize(given) == resolved {
        resolved.display().to_string()
    } else {
        format!("{} (resolved: {})", given.display(), resolved.display())
    }
}

#[cfg(test)]
mod tests {
    use super::super::paths::Protected;
    use super::*;
    use std::path::PathBuf;

    fn sandbox(mode: Mode, r: &Path) -> Sandbox {
        let mut s = Sandbox::none();
        s.mode = mode;
        s.network = false;
        s.workspace = r.join("ws");
        s.writable = vec![r.join("ws"), r.join("tmp")];
        s.read_only = vec![(r.join("ws/.git/hooks"), Protected::GitHooks)];
        s.hidden = vec![r.join("home/.ssh")];
        s
    }

    #[test]
    fn writes_are_checked_on_the_path_they_reach() {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        for d in ["ws/.git/hooks", "out", "home/.ssh", "tmp"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(r.join("out"), r.join("ws/link")).unwrap();
        std::os::unix::fs::symlink(r.join("out/new"), r.join("ws/dangling")).unwrap();
        let s = sandbox(Mode::WorkspaceWrite, &r);
        assert_eq!(s.check_write(&r.join("ws/src/a.rs")), Ok(()));
        assert_eq!(s.check_write(&r.join("tmp/x")), Ok(()));
        let e = s.check_write(&r.join("out/x")).unwrap_err();
        assert_eq!(
            e,
            format!(
                "Permission denied: {} is outside the writable roots of the workspace-write sandbox",
                r.join("out/x").display()
            )
        );
        for p in ["ws/link/x", "ws/dangling", "ws/sub/../../out/y"] {
            let e = s.check_write(&r.join(p)).unwrap_err();
            assert!(e.contains("outside the writable roots"), "{p}: {e}");
            assert!(e.contains(&r.join("out").display().to_string()), "{e}");
        }
        let e = s
            .check_write(&r.join("ws/.git/hooks/pre-commit"))
            .unwrap_err();
        assert!(
            e.contains("is read-only in the workspace-write sandbox"),
            "{e}"
        );
        assert!(e.contains("git hooks run unconfined"), "{e}");
        let e = s.check_read(&r.join("home/.ssh/id_rsa")).unwrap_err();
        assert!(
            e.contains("is hidden by the workspace-write sandbox"),
            "{e}"
        );
        assert_eq!(s.check_read(&r.join("home/.bashrc")), Ok(()));
        let ro = sandbox(Mode::ReadOnly, &r);
        let e = ro.check_write(&r.join("ws/a")).unwrap_err();
        assert!(e.contains("the read-only sandbox allows no writes"), "{e}");
        let none = Sandbox::none();
        assert_eq!(none.check_write(&PathBuf::from("/etc/x")), Ok(()));
        assert_eq!(none.check_read(&r.join("home/.ssh/id_rsa")), Ok(()));
    }
}
