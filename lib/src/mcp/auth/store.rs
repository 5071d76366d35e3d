//! The token file `<agentDir>/mcp-auth.json`, as pi keeps it: one record
//! per server under pi's key `<namespace>|<url>`, merged and dropped
//! atomically with mode 0600 (other records and fields untouched), read
//! through the bounded configuration reader; and the scope a server asked
//! for in a 403 `insufficient_scope` (`stepUpScope`), remembered so the
//! next sign-in asks for the wider scope.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::super::config::ServerConfig;

/// The token file in an agent dir.
pub const FILE: &str = "mcp-auth.json";

/// The store of one agent dir.
#[derive(Clone, Debug, PartialEq)]
pub struct Store {
    pub path: PathBuf,
}

/// Serialises read-modify-write of the file within one process.
static WRITE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Store {
    pub fn new(agent_dir: &Path) -> Store {
        Store {
            path: agent_dir.join(FILE),
        }
    }

    /// The agent dir the file is in.
    pub fn agent_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// pi's key of a server's record.
    pub fn key(cfg: &ServerConfig, url: &str) -> String {
        format!("{}|{url}", cfg.namespace())
    }

    fn read(&self) -> Result<Map<String, Value>, String> {
        match crate::regular_file::read_config(&self.path, crate::regular_file::CONFIG_CAP) {
            Ok(Some(t)) => match serde_json::from_str(&t) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Err(format!("{}: expected an object", self.path.display())),
                Err(e) => Err(format!("{}: {e}", self.path.display())),
            },
            Ok(None) => Ok(Map::new()),
            Err(e) => Err(format!("{}: {e}", self.path.display())),
        }
    }

    /// The stored record of a server, if any.
    pub fn record(&self, cfg: &ServerConfig, url: &str) -> Option<Value> {
        self.read().ok()?.remove(&Store::key(cfg, url))
    }

    /// The access token to send: the record's, unless it has expired
    /// (`tokensExpireAt`, milliseconds since the epoch).
    pub fn access_token(&self, cfg: &ServerConfig, url: &str) -> Option<String> {
        let r = self.record(cfg, url)?;
        let token = r["tokens"]["access_token"].as_str()?.to_string();
        if let Some(at) = r["tokensExpireAt"].as_f64() {
            if at <= now_ms() as f64 {
                return None;
            }
        }
        Some(token)
    }

    /// Merges `fields` into a server's record (other records and fields
    /// stay; a `null` field is removed), written atomically with mode 0600.
    pub fn update(&self, key: &str, fields: Map<String, Value>) -> Result<(), String> {
        let _g = WRITE.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read()?;
        let rec = all
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !rec.is_object() {
            *rec = Value::Object(Map::new());
        }
        if let Value::Object(m) = rec {
            for (k, v) in fields {
                if v.is_null() {
                    m.remove(&k);
                } else {
                    m.insert(k, v);
                }
            }
        }
        self.write(&all)
    }
}

impl Store {
    /// Drops a server's record (other records stay), atomically; `false`
    /// when there was none.
    pub fn remove(&self, key: &str) -> Result<bool, String> {
        let _g = WRITE.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read()?;
        if all.remove(key).is_none() {
            return Ok(false);
        }
        self.write(&all)?;
        Ok(true)
    }

    fn write(&self, all: &Map<String, Value>) -> Result<(), String> {
        let text = serde_json::to_string_pretty(all).map_err(|e| e.to_string())?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        crate::atomic_file::write_private_atomic(&self.path, text.as_bytes())
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }

    /// Notes the scope a server asked for in a 403 `insufficient_scope`
    /// challenge, added to what it asked for before.
    pub fn note_step_up(&self, cfg: &ServerConfig, url: &str, scope: &str) -> Result<(), String> {
        let old = self
            .record(cfg, url)
            .and_then(|r| r["stepUpScope"].as_str().map(str::to_string))
            .unwrap_or_default();
        let mut fields = Map::new();
        fields.insert("stepUpScope".into(), json!(union_scopes(&old, scope)));
        self.update(&Store::key(cfg, url), fields)
    }
}

/// The scopes of `a` followed by those of `b` not in `a`, space-separated.
pub(super) fn union_scopes(a: &str, b: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for s in a.split_whitespace().chain(b.split_whitespace()) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out.join(" ")
}

pub(super) fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}
