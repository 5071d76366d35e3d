//! Replacing a file atomically, so that nobody ever finds it half-written:
//! the bytes go to an exclusive temporary file in the same folder, are
//! fsynced, and the temporary file is renamed over the target. A reader
//! sees the old file or the new one. Every such write in the crate goes
//! through [`replace_atomic`]: session forks and exports, the global
//! `settings.json`, `trust.json`, and the private files that hold secrets
//! (`agents/settings.json`, `mcp-auth.json`, written mode 0600). It sits on
//! the ground floor and imports nothing from the crate, so every module can
//! use it without importing another.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Writes `contents` to `path` atomically, creating the folder when
/// missing. Refuses to replace an existing file (`AlreadyExists`) unless
/// `replace` is set. The new file gets the ordinary mode (0666 less the
/// umask).
pub fn write_atomic(path: &Path, contents: &[u8], replace: bool) -> io::Result<()> {
    if !replace && path.exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} already exists", path.display()),
        ));
    }
    std::fs::create_dir_all(folder_of(path))?;
    replace_atomic(path, contents, 0o666)
}

/// Replaces `path` with `bytes` readable and writable by the owner only
/// (mode 0600), for files that hold secrets.
pub fn write_private_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_atomic(path, bytes, 0o600)
}

/// The one atomic writer: an exclusive temporary file
/// `.<name>.<pid>.<uuid>.tmp` created with `mode` (less the umask) next to
/// `path`, the bytes, fsync, rename over `path`. The temporary file never
/// survives: it is removed when any step fails.
pub fn replace_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A temporary name next to `path`, `.<name>.<pid>.<uuid>.tmp`, unique to
/// this process and call (also for session files that are linked into
/// place rather than renamed).
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    folder_of(path).join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ))
}

/// The folder a file is in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn refuses_to_clobber_unless_asked_and_leaves_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/x.json");
        write_atomic(&p, b"1", false).unwrap();
        assert!(write_atomic(&p, b"2", false).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"1");
        write_atomic(&p, b"3", true).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"3");
        let names: Vec<_> = std::fs::read_dir(d.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["x.json"]);
    }

    #[test]
    fn private_files_are_owner_only_and_a_failed_write_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("secret.json");
        write_private_atomic(&p, b"{}").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // The target is a folder: the rename fails, the temporary goes.
        std::fs::create_dir(d.path().join("dir")).unwrap();
        std::fs::write(d.path().join("dir/f"), b"x").unwrap();
        assert!(write_private_atomic(&d.path().join("dir"), b"x").is_err());
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}
