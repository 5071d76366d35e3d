//! Where pi keeps its files: the agent directory, the per-cwd session
//! folders and session file names.

use std::path::{Path, PathBuf};

/// The agent directory: `$PI_CODING_AGENT_DIR` (a leading `~` expanded), else
/// `~/.pi/agent`.
pub fn agent_dir() -> PathBuf {
    match std::env::var_os("PI_CODING_AGENT_DIR") {
        Some(v) if !v.is_empty() => expand_tilde(Path::new(&v)),
        _ => home_dir().join(".pi").join("agent"),
    }
}

/// The user's home directory (`$HOME`, else `/`).
pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The toolkit's own cache folder (never pi's agent dir):
/// `$XDG_CACHE_HOME/pi-toolkit`, else `~/.cache/pi-toolkit`.
pub fn toolkit_cache_dir() -> PathBuf {
    match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => home_dir().join(".cache"),
    }
    .join("pi-toolkit")
}

/// Expands a leading `~` or `~/` to the home directory.
pub fn expand_tilde(p: &Path) -> PathBuf {
    let s = p.to_string_lossy();
    if s == "~" {
        home_dir()
    } else if let Some(rest) = s.strip_prefix("~/") {
        home_dir().join(rest)
    } else {
        p.to_path_buf()
    }
}

/// Removes `.` and `..` components lexically, without asking the file
/// system (as Node's `path.resolve` does): `/a/./b/../c` is `/a/c`, and
/// `..` at the root stays at the root.
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The root of all session folders: `<agentDir>/sessions`.
pub fn sessions_root() -> PathBuf {
    agent_dir().join("sessions")
}

/// The folder name pi uses for a cwd: `--` + cwd without one leading
/// separator, with `/`, `\` and `:` replaced by `-`, + `--`.
pub fn encode_cwd(cwd: &str) -> String {
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(cwd);
    let mut out = String::with_capacity(trimmed.len() + 4);
    out.push_str("--");
    for c in trimmed.chars() {
        out.push(if matches!(c, '/' | '\\' | ':') {
            '-'
        } else {
            c
        });
    }
    out.push_str("--");
    out
}

/// The session folder of `cwd` under `root`.
pub fn session_dir_for(root: &Path, cwd: &str) -> PathBuf {
    root.join(encode_cwd(cwd))
}

/// The file name of a new session: `<ts with : and . as ->_<id>.jsonl`.
pub fn session_file_name(iso_timestamp: &str, id: &str) -> String {
    let ts: String = iso_timestamp
        .chars()
        .map(|c| if c == ':' || c == '.' { '-' } else { c })
        .collect();
    format!("{ts}_{id}.jsonl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_pi() {
        assert_eq!(encode_cwd("/home/ann/proj"), "--home-ann-proj--");
        assert_eq!(encode_cwd("/"), "----");
        assert_eq!(encode_cwd("C:\\Users\\x"), "--C--Users-x--");
        assert_eq!(
            session_file_name("2026-03-15T22:40:18.123Z", "abc"),
            "2026-03-15T22-40-18-123Z_abc.jsonl"
        );
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), Path::new("/x"));
        assert_eq!(normalize(Path::new("a/b/..")), Path::new("a"));
    }
}
