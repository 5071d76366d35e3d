//! The Node host asset: the JS files of `node-host/`, embedded at build
//! time, written once per content into
//! `<cache>/pi-toolkit/node-host-<hash>/` (`$XDG_CACHE_HOME`, else
//! `~/.cache`; written to a temporary folder and renamed, so a half-written
//! host is never run) and run from there as `node host.mjs`. Node is
//! `$PI_NODE`, else `node` on `PATH`.

use std::path::{Path, PathBuf};

/// The host's files: `(relative path, contents)`.
pub static FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/node_host_files.rs"));

/// The host's entry file.
pub const ENTRY: &str = "host.mjs";

/// Whether this build carries a Node host.
pub fn available() -> bool {
    FILES.iter().any(|(p, _)| *p == ENTRY)
}

/// FNV-1a over every path and content: stable across builds and machines.
fn content_hash(files: &[(&str, &[u8])]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    for (p, c) in files {
        eat(p.as_bytes());
        eat(c);
    }
    h
}

/// Writes `files` under `base/node-host-<hash>/` unless it is there
/// already; returns that folder.
pub fn install_into(base: &Path, files: &[(&str, &[u8])]) -> std::io::Result<PathBuf> {
    let dir = base.join(format!("node-host-{:016x}", content_hash(files)));
    if dir.join(ENTRY).is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(base)?;
    let tmp = base.join(format!(
        ".node-host-{:016x}.tmp-{}",
        content_hash(files),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    for (rel, bytes) in files {
        let p = tmp.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, bytes)?;
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another run installed it meanwhile.
        Err(_) if dir.join(ENTRY).is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

/// The embedded host, installed in the user's cache.
pub fn install() -> std::io::Result<PathBuf> {
    install_into(&crate::paths::toolkit_cache_dir(), FILES)
}

/// `$PI_NODE` (when it exists), else `node` on `PATH`.
pub fn find_node() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PI_NODE").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_once_per_content() {
        let t = tempfile::tempdir().unwrap();
        let files: &[(&str, &[u8])] = &[("host.mjs", b"1"), ("lib/a.mjs", b"2")];
        let a = install_into(t.path(), files).unwrap();
        assert_eq!(std::fs::read(a.join("lib/a.mjs")).unwrap(), b"2");
        assert_eq!(install_into(t.path(), files).unwrap(), a, "reused");
        let other: &[(&str, &[u8])] = &[("host.mjs", b"changed")];
        assert_ne!(install_into(t.path(), other).unwrap(), a);
        // No temporary folder is left behind.
        let names: Vec<String> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| n.starts_with("node-host-")),
            "{names:?}"
        );
    }
}
