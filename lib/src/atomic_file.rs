//! Replacing a private file atomically: the files that hold secrets or
//! settings the user must never find half-written (`agents/settings.json`,
//! `mcp-auth.json`) are written to an exclusive mode-0600 temporary file in
//! the same folder, fsynced and renamed over the old one. It sits low in the
//! crate so that every module that writes such a file (subagents, MCP) uses
//! the same code without importing one another.

use std::io::Write;
use std::path::Path;

/// Replaces `path` with `bytes`: an exclusive, mode-0600 temporary file
/// `.<name>-<uuid>.tmp` in the same folder, fsync, rename. The temporary
/// file never survives.
pub fn write_private_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}-{}.tmp", uuid::Uuid::new_v4()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound && result.is_ok() => Err(e),
        _ => result,
    }
}
