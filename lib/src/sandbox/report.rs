//! The sandbox is never silent: one stderr line when it is on
//! ([`Sandbox::notice`]), the `sandbox` record of `--mode json` right after
//! the session header and the `trust` record ([`Sandbox::record`]), and the
//! `sandbox` field of RPC `get_state` ([`Sandbox::state`]).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::paths::short;
use super::{env, Mode, Sandbox};

impl Sandbox {
    /// The names of this process's variables a command does not get.
    pub fn hidden_env(&self) -> Vec<String> {
        if !self.is_on() {
            return Vec::new();
        }
        env::hidden_names(&self.provider_keys, &self.env_keep)
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    }

    /// The hidden paths that exist now.
    fn hidden_existing(&self) -> Vec<&PathBuf> {
        self.hidden
            .iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect()
    }

    /// What confines commands.
    fn mechanism(&self) -> Vec<&'static str> {
        match self.mode {
            Mode::DangerFullAccess => Vec::new(),
            Mode::ReadOnly => vec!["landlock", "seccomp"],
            Mode::WorkspaceWrite => vec!["landlock", "seccomp", "user-namespace"],
        }
    }

    /// The policy as JSON (RPC `get_state`'s `sandbox`).
    pub fn state(&self) -> Value {
        if !self.is_on() {
            return json!({"mode": self.mode.name(), "network": true});
        }
        let paths = |v: &[PathBuf]| {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        json!({
            "mode": self.mode.name(),
            "network": self.network,
            "workspace": self.workspace.display().to_string(),
            "writableRoots": paths(&self.writable),
            "readOnly": self.read_only.iter().map(|(p, _)| p.display().to_string()).collect::<Vec<_>>(),
            "hidden": paths(&self.hidden),
            "envHidden": self.hidden_env(),
            "mechanism": self.mechanism(),
        })
    }

    /// The `sandbox` record of `--mode json` (`None` without a sandbox).
    pub fn record(&self) -> Option<Value> {
        if !self.is_on() {
            return None;
        }
        let mut v = json!({"type": "sandbox"});
        if let (Some(o), Value::Object(s)) = (v.as_object_mut(), self.state()) {
            o.extend(s);
        }
        Some(v)
    }

    /// The stderr line of a sandboxed run (`None` without a sandbox): the
    /// mode, the network, the writable roots, what stays read-only inside
    /// them, the hidden paths that exist and the withheld variables.
    pub fn notice(&self) -> Option<String> {
        if !self.is_on() {
            return None;
        }
        let s = |p: &PathBuf| short(p, &self.home);
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let mut line = format!(
            "sandbox {}, network {}",
            self.mode.name(),
            if self.network { "on" } else { "off" }
        );
        if self.mode == Mode::WorkspaceWrite {
            line.push_str(&format!(
                "; writable: {}; read-only: {}",
                list(self.writable.iter().map(s).collect()),
                list(self.read_only.iter().map(|(p, _)| s(p)).collect())
            ));
        } else {
            line.push_str("; writable: nothing");
        }
        let existing = self.hidden_existing();
        line.push_str(&format!(
            "; hidden: {}",
            list(existing.iter().map(|p| s(p)).collect())
        ));
        let missing = self.hidden.len() - existing.len();
        if missing > 0 {
            line.push_str(&format!(" (and {missing} more if created)"));
        }
        line.push_str(&format!("; env hidden: {}", list(self.hidden_env())));
        Some(line)
    }
}
