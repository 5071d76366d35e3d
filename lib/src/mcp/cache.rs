//! The toolkit's MCP metadata cache: what each server answered to
//! `initialize` and `tools/list` last time, kept in
//! `mcp-cache.json` in the toolkit's cache folder (`~/.cache/pi-toolkit`,
//! not pi's agent dir, which holds only pi's files) under a hash of the server's transport
//! (command, args, env, cwd, or url and headers) and the session cwd.
//! pi 1.6.0 keeps no such cache: its first request waits for every server
//! with direct tools. With an entry the first request need not wait for
//! the server's own start-up (most of the time to the first request): the
//! tools are declared from the cached answers, which are the same answers
//! a fresh connection gives, while the server connects in the background;
//! a call waits for its server as before. A live answer that differs
//! replaces the entry for the next run; a server that fails to connect
//! loses its entry, so the next run waits for it and reports it at start.
//! A missing or unreadable cache is an empty one; writes are atomic and a
//! failed write only costs the shortcut.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::config::ServerConfig;

/// The file in the cache folder.
pub const FILE: &str = "mcp-cache.json";

/// The largest cache read (a bigger one, or one that is not a regular
/// file, is an empty cache): every server's tool list, each at most one
/// 16 MiB message, of a few servers.
const CAP: u64 = 64 << 20;

/// One server's answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub tools: Vec<rmcp::model::Tool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default)]
    pub has_resources: bool,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    servers: BTreeMap<String, Entry>,
}

/// The cache file in one folder.
#[derive(Clone)]
pub struct Cache {
    path: PathBuf,
}

/// Serialises read-modify-write among the servers of one process.
static WRITE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Cache {
    /// The cache in `dir` (tests use a temp dir).
    pub fn new(dir: &Path) -> Cache {
        Cache {
            path: dir.join(FILE),
        }
    }

    /// The user's cache: `paths::toolkit_cache_dir()`.
    pub fn user() -> Cache {
        Cache::new(&crate::paths::toolkit_cache_dir())
    }

    /// The key of a server as started from `cwd`.
    pub fn key(cfg: &ServerConfig, cwd: &Path) -> String {
        let mut h = Sha256::new();
        h.update(format!("{:?}", cfg.transport).as_bytes());
        h.update([0]);
        h.update(cwd.as_os_str().as_encoded_bytes());
        h.finalize()
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    fn read(&self) -> File {
        crate::regular_file::read_config_bytes(&self.path, CAP)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Every entry (empty when the file is missing or unreadable).
    pub fn load(&self) -> BTreeMap<String, Entry> {
        self.read().servers
    }

    /// Sets (`Some`) or drops (`None`) one entry; nothing is written when
    /// it is unchanged.
    pub fn store(&self, key: &str, entry: Option<&Entry>) {
        let Ok(_guard) = WRITE.lock() else { return };
        let mut file = self.read();
        if file.servers.get(key) == entry {
            return;
        }
        match entry {
            Some(e) => file.servers.insert(key.to_string(), e.clone()),
            None => file.servers.remove(key),
        };
        if let Ok(bytes) = serde_json::to_vec(&file) {
            let _ = crate::atomic_file::write_atomic(&self.path, &bytes, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_drop() {
        let t = tempfile::tempdir().unwrap();
        let c = Cache::new(t.path());
        assert!(c.load().is_empty());
        let tool: rmcp::model::Tool = serde_json::from_value(serde_json::json!({
            "name": "add", "description": "Add.", "inputSchema": {"type": "object"}
        }))
        .unwrap();
        let e = Entry {
            tools: vec![tool],
            instructions: Some("hi".into()),
            has_resources: true,
        };
        c.store("k", Some(&e));
        assert_eq!(c.load().get("k"), Some(&e));
        c.store("k", None);
        assert!(c.load().is_empty());
        // A broken file is an empty cache, and the next store replaces it.
        std::fs::write(t.path().join(FILE), "{not json").unwrap();
        assert!(c.load().is_empty());
        c.store("k", Some(&e));
        assert_eq!(c.load().len(), 1);
    }
}
