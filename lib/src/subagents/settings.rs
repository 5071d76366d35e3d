//! `<agentDir>/agents/settings.json`: the global switch of the built-in
//! subagents (`builtInEnabled`, on only for the JSON literal `true`) and the
//! per-parent concurrency limit (`maxConcurrent`, 1–32, default 10).
//!
//! Reading a damaged file (bad JSON, not an object, a directory, unreadable)
//! is an error; asking "enabled?" answers no instead (fail closed). Writes
//! read first, so a damaged file is reported and left byte-identical; they
//! keep every other key in place and replace the file atomically with a
//! private (0600) temporary file in the same folder.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Default of `maxConcurrent`.
pub const DEFAULT_MAX_CONCURRENT: u32 = 10;
/// Largest accepted `maxConcurrent`.
pub const MAX_MAX_CONCURRENT: u32 = 32;

/// The settings file of an agent dir.
pub fn settings_path(agent_dir: &Path) -> PathBuf {
    agent_dir.join("agents").join("settings.json")
}

/// The effective settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentSettings {
    /// `builtInEnabled` is the JSON literal `true`.
    pub built_in_enabled: bool,
    /// `maxConcurrent` if it is an integer in 1..=32, else the default.
    pub max_concurrent: u32,
}

impl Default for SubagentSettings {
    fn default() -> Self {
        SubagentSettings {
            built_in_enabled: false,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
        }
    }
}

/// Why the settings could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SubagentSettingsError {
    #[error("{path}:{line}:{column}: invalid JSON: {message}")]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: Invalid subagent settings: expected an object")]
    NotObject { path: PathBuf },
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    /// Not a regular file, or over the size cap: the file is at fault,
    /// not the disk.
    #[error("{path}: {message}")]
    Refused { path: PathBuf, message: String },
    #[error("maxConcurrent must be an integer between 1 and 32")]
    MaxConcurrent,
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> SubagentSettingsError {
    SubagentSettingsError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The stored object (every key, in file order); `{}` when the file is
/// missing. Only a regular file of at most
/// [`crate::regular_file::CONFIG_CAP`] is read (a FIFO cannot hang it).
pub fn read_stored(path: &Path) -> Result<Map<String, Value>, SubagentSettingsError> {
    let bytes = match crate::regular_file::read_config_bytes(path, crate::regular_file::CONFIG_CAP)
    {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(Map::new()),
        Err(e @ crate::regular_file::FileError::Io(_)) => return Err(io_err(path, e)),
        Err(e) => {
            return Err(SubagentSettingsError::Refused {
                path: path.to_path_buf(),
                message: e.to_string(),
            })
        }
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(SubagentSettingsError::NotObject {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(SubagentSettingsError::Json {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e
                .to_string()
                .split(" at line")
                .next()
                .unwrap_or("")
                .to_string(),
        }),
    }
}

/// The read rules applied to a stored object.
pub fn from_stored(stored: &Map<String, Value>) -> SubagentSettings {
    let max_concurrent = stored
        .get("maxConcurrent")
        .and_then(Value::as_f64)
        .filter(|n| n.fract() == 0.0 && *n >= 1.0 && *n <= f64::from(MAX_MAX_CONCURRENT))
        .map_or(DEFAULT_MAX_CONCURRENT, |n| n as u32);
    SubagentSettings {
        built_in_enabled: stored.get("builtInEnabled") == Some(&Value::Bool(true)),
        max_concurrent,
    }
}

/// Reads the settings; a damaged file is an error.
pub fn read(path: &Path) -> Result<SubagentSettings, SubagentSettingsError> {
    read_stored(path).map(|m| from_stored(&m))
}

/// Whether the built-in subagents are on; `false` on any error (fail closed).
pub fn is_enabled(path: &Path) -> bool {
    read(path).is_ok_and(|s| s.built_in_enabled)
}

/// Checks a `maxConcurrent` value before any file access.
pub fn check_max_concurrent(n: f64) -> Result<u32, SubagentSettingsError> {
    if n.is_finite() && n.fract() == 0.0 && (1.0..=f64::from(MAX_MAX_CONCURRENT)).contains(&n) {
        Ok(n as u32)
    } else {
        Err(SubagentSettingsError::MaxConcurrent)
    }
}

/// Turns the built-in subagents on or off; returns the settings read back.
pub fn write_enabled(
    path: &Path,
    enabled: bool,
) -> Result<SubagentSettings, SubagentSettingsError> {
    write_field(path, "builtInEnabled", Value::Bool(enabled))
}

/// Sets `maxConcurrent` (validated first); returns the settings read back.
pub fn write_max_concurrent(
    path: &Path,
    n: f64,
) -> Result<SubagentSettings, SubagentSettingsError> {
    let n = check_max_concurrent(n)?;
    write_field(path, "maxConcurrent", Value::from(n))
}

/// Read (refusing a damaged file), set `version: 1` and `key`, write
/// atomically, read back.
fn write_field(
    path: &Path,
    key: &str,
    value: Value,
) -> Result<SubagentSettings, SubagentSettingsError> {
    let mut stored = read_stored(path)?;
    stored.insert("version".into(), Value::from(1));
    stored.insert(key.into(), value);
    let text = serde_json::to_string_pretty(&Value::Object(stored)).map_err(|e| io_err(path, e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    }
    write_private_atomic(path, text.as_bytes()).map_err(|e| io_err(path, e))?;
    read(path)
}

pub use crate::atomic_file::write_private_atomic;

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = settings_path(dir.path());
        (dir, path)
    }

    fn put(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn missing_file_is_off_with_default_limit() {
        let (_d, path) = setup();
        assert_eq!(read(&path).unwrap(), SubagentSettings::default());
        assert_eq!(read(&path).unwrap().max_concurrent, 10);
        assert!(!is_enabled(&path));
        assert!(!path.exists());
    }

    #[test]
    fn only_the_literal_true_enables() {
        let (_d, path) = setup();
        for (text, on) in [
            (r#"{"builtInEnabled":true}"#, true),
            (r#"{"builtInEnabled":"true"}"#, false),
            (r#"{"builtInEnabled":1}"#, false),
            (r#"{"builtInEnabled":{}}"#, false),
            (r#"{"builtInEnabled":[]}"#, false),
            (r#"{"builtInEnabled":null}"#, false),
            (r#"{"builtInEnabled":false}"#, false),
            (r#"{"__proto__":{"builtInEnabled":true}}"#, false),
            ("{}", false),
        ] {
            put(&path, text);
            assert_eq!(read(&path).unwrap().built_in_enabled, on, "{text}");
            assert_eq!(is_enabled(&path), on, "{text}");
        }
    }

    #[test]
    fn max_concurrent_bounds() {
        let (_d, path) = setup();
        for (v, want) in [
            ("1", 1),
            ("32", 32),
            ("7", 7),
            ("4.0", 4),
            ("0", 10),
            ("33", 10),
            ("-1", 10),
            ("2.5", 10),
            ("\"4\"", 10),
            ("null", 10),
            ("true", 10),
            ("1e400", 10),
        ] {
            put(&path, &format!(r#"{{"maxConcurrent":{v}}}"#));
            match read(&path) {
                Ok(s) => assert_eq!(s.max_concurrent, want, "{v}"),
                // 1e400 is not representable: serde refuses it, still no panic
                Err(_) => assert_eq!(v, "1e400"),
            }
        }
        for bad in [0.0, 33.0, 2.5, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                check_max_concurrent(bad),
                Err(SubagentSettingsError::MaxConcurrent)
            ));
        }
        assert_eq!(
            SubagentSettingsError::MaxConcurrent.to_string(),
            "maxConcurrent must be an integer between 1 and 32"
        );
    }

    #[test]
    fn whitespace_around_the_object_parses_but_garbage_does_not() {
        let (_d, path) = setup();
        put(&path, " \t\r\n{\"builtInEnabled\":true}\r\n\t ");
        assert!(is_enabled(&path));
        for bad in [
            "",
            "   \n",
            "{",
            r#"{"builtInEnabled":true} trailing"#,
            r#"{"builtInEnabled":true}{}"#,
        ] {
            put(&path, bad);
            assert!(
                matches!(read(&path), Err(SubagentSettingsError::Json { .. })),
                "{bad:?}"
            );
            assert!(!is_enabled(&path));
        }
    }

    #[test]
    fn non_object_files_fail_closed() {
        let (_d, path) = setup();
        for text in ["null", "[]", "[true]", "1", "\"x\"", "true"] {
            put(&path, text);
            let err = read(&path).unwrap_err();
            assert!(
                err.to_string().ends_with("expected an object"),
                "{text}: {err}"
            );
            assert!(!is_enabled(&path));
            assert!(write_enabled(&path, true).is_err());
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
    }

    #[test]
    fn damaged_settings_fail_closed_and_are_not_overwritten() {
        let (d, path) = setup();
        put(&path, "{");
        assert!(!is_enabled(&path));
        assert!(read(&path).is_err());
        assert!(write_enabled(&path, true).is_err());
        assert!(write_enabled(&path, false).is_err());
        assert!(write_max_concurrent(&path, 4.0).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"{");
        assert_eq!(listing(&d.path().join("agents")), ["settings.json"]);
        // The value is checked before the file is looked at.
        assert!(matches!(
            write_max_concurrent(&path, 0.0),
            Err(SubagentSettingsError::MaxConcurrent)
        ));
    }

    #[test]
    fn a_directory_or_fifo_at_the_path_fails_closed_without_hanging() {
        let (_d, path) = setup();
        std::fs::create_dir_all(&path).unwrap();
        assert!(read(&path).is_err());
        assert!(!is_enabled(&path));
        assert!(write_enabled(&path, true).is_err());
        assert!(path.is_dir());
        std::fs::remove_dir(&path).unwrap();
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&path).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        assert!(!is_enabled(&path));
    }

    #[test]
    fn writes_keep_unknown_keys_in_place_and_append_new_ones() {
        let (_d, path) = setup();
        assert!(write_enabled(&path, true).unwrap().built_in_enabled);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\n  \"version\": 1,\n  \"builtInEnabled\": true\n}"
        );
        put(
            &path,
            r#"{"builtInEnabled":false,"custom":1,"futureSetting":{"a":[1,"x"]},"__proto__":{"builtInEnabled":true}}"#,
        );
        let s = write_enabled(&path, true).unwrap();
        assert!(s.built_in_enabled);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\n  \"builtInEnabled\": true,\n  \"custom\": 1,\n  \"futureSetting\": {\n    \"a\": [\n      1,\n      \"x\"\n    ]\n  },\n  \"__proto__\": {\n    \"builtInEnabled\": true\n  },\n  \"version\": 1\n}"
        );
        let s = write_max_concurrent(&path, 3.0).unwrap();
        assert_eq!(
            s,
            SubagentSettings {
                built_in_enabled: true,
                max_concurrent: 3
            }
        );
        let stored = read_stored(&path).unwrap();
        let keys: Vec<&str> = stored.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "builtInEnabled",
                "custom",
                "futureSetting",
                "__proto__",
                "version",
                "maxConcurrent"
            ]
        );
        assert!(!text.ends_with('\n'));
    }

    #[test]
    fn writes_are_atomic_private_and_repeatable() {
        use std::os::unix::fs::PermissionsExt;
        let (d, path) = setup();
        write_enabled(&path, false).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\n  \"version\": 1,\n  \"builtInEnabled\": false\n}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Replaced, not rewritten in place: a hard link keeps the old bytes.
        let alias = d.path().join("alias.json");
        std::fs::hard_link(&path, &alias).unwrap();
        let old = std::fs::read(&alias).unwrap();
        write_enabled(&path, true).unwrap();
        assert_eq!(std::fs::read(&alias).unwrap(), old);
        let once = std::fs::read(&path).unwrap();
        write_enabled(&path, true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), once);
        assert_eq!(listing(&d.path().join("agents")), ["settings.json"]);
        // Removing the file disables at once; a later write recreates it.
        std::fs::remove_file(&path).unwrap();
        assert!(!is_enabled(&path));
        write_enabled(&path, true).unwrap();
        assert!(is_enabled(&path));
    }

    #[test]
    fn a_file_in_place_of_the_folder_makes_writes_fail_and_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("agents"), "not a folder").unwrap();
        let path = settings_path(dir.path());
        assert!(write_enabled(&path, true).is_err());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("agents")).unwrap(),
            "not a folder"
        );
    }

    #[test]
    fn two_settings_files_never_share_state() {
        let (_d1, a) = setup();
        let (_d2, b) = setup();
        put(&a, "{");
        write_enabled(&b, true).unwrap();
        assert!(!is_enabled(&a));
        assert!(is_enabled(&b));
        let mut s = read(&b).unwrap();
        s.built_in_enabled = false;
        assert_ne!(s, read(&b).unwrap());
        assert!(is_enabled(&b));
    }
}
