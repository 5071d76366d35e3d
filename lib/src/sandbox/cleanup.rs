//! What pi-run (unconfined) undoes after confined commands: a git dir's
//! `commondir` a command created (it would move git's config and hooks
//! out of the sandbox's protection, so the next unconfined `git` would
//! run what it names) is removed after each bash call and when the run
//! ends; and at the end of a `workspace-write` run every process still in
//! the sandbox's user namespace (a command left running in the
//! background) is killed, so none can plant one later.

use std::os::fd::AsRawFd;
use std::path::Path;

use super::Sandbox;

impl Sandbox {
    /// Removes each `commondir` a command created where none may be; one
    /// sentence per removal (for the tool result), empty when none.
    pub fn sweep(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.absent {
            let Ok(meta) = std::fs::symlink_metadata(p) else {
                continue;
            };
            let removed = if meta.is_dir() {
                std::fs::remove_dir_all(p)
            } else {
                std::fs::remove_file(p)
            };
            out.push(match removed {
                Ok(()) => format!(
                    "Permission denied: {} was removed: the {} sandbox does not let a command create it (it would move git's config and hooks out of the sandbox's protection)",
                    p.display(),
                    self.mode.name()
                ),
                Err(e) => format!(
                    "{} was created by a command and could not be removed ({e}): do not run git in this repository before removing it",
                    p.display()
                ),
            });
        }
        out
    }

    /// The end of the run: kills every process left in the sandbox's user
    /// namespace, then sweeps. Errors go to stderr through `warn`.
    pub fn end(&self, warn: &dyn Fn(&str)) {
        if let Some(ns) = self.kernel.as_ref().and_then(|k| k.ns.as_ref()) {
            kill_namespace(ns.user.as_raw_fd());
        }
        for line in self.sweep() {
            warn(&line);
        }
    }
}

/// SIGKILLs every process whose user namespace is the one `fd` holds (a
/// process cannot leave it), a few rounds while new ones appear.
fn kill_namespace(fd: std::os::fd::RawFd) {
    // SAFETY: an all-zero stat is a valid output buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on a descriptor the sandbox holds open.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    for _ in 0..5 {
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return;
        };
        let mut killed = 0;
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let ns = Path::new("/proc").join(pid.to_string()).join("ns/user");
            let Ok(m) = std::fs::metadata(&ns) else {
                continue;
            };
            if m.ino() == st.st_ino && m.dev() == st.st_dev {
                // SAFETY: kill with a pid read from /proc.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed += 1;
            }
        }
        if killed == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
