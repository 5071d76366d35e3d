//! pi's `settings.json`: the global file in the agent dir, merged one level
//! deep with the project's `.pi/settings.json` (only when the project is
//! trusted). Unknown keys are kept; a malformed file is an error naming the
//! file, line and column, and is never rewritten.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::provider::retry::RetrySettings;

/// Why settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{path}:{line}:{column}: invalid JSON: {message}")]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: settings must be a JSON object")]
    NotObject { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Merged settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub values: Map<String, Value>,
}

/// Reads one settings file; a missing file is empty settings. Only a
/// regular file of at most [`crate::regular_file::CONFIG_CAP`] is read.
pub fn read_file(path: &Path) -> Result<Map<String, Value>, SettingsError> {
    let text = match crate::regular_file::read_config(path, crate::regular_file::CONFIG_CAP) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(Map::new()),
        Err(e) => {
            return Err(SettingsError::Io {
                path: path.to_path_buf(),
                source: e.into(),
            })
        }
    };
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(SettingsError::NotObject {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(SettingsError::Json {
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

impl Settings {
    /// Global settings, then the project's when `trusted` (one level deep:
    /// nested objects are merged key by key). `defaultTools` follows pi
    /// 1.6.0: a project list with only `+name` / `-name` entries (or an
    /// empty one) is appended to the user's list; any other project value
    /// replaces it.
    pub fn load(agent_dir: &Path, cwd: &Path, trusted: bool) -> Result<Settings, SettingsError> {
        let mut values = read_file(&agent_dir.join("settings.json"))?;
        if trusted {
            let project = read_file(&cwd.join(".pi").join("settings.json"))?;
            for (k, v) in project {
                match (values.get_mut(&k), v) {
                    (Some(Value::Object(base)), Value::Object(over)) => {
                        for (k2, v2) in over {
                            base.insert(k2, v2);
                        }
                    }
                    (Some(Value::Array(base)), Value::Array(over))
                        if k == "defaultTools" && over.iter().all(is_tool_delta) =>
                    {
                        base.extend(over);
                    }
                    (_, v) => {
                        values.insert(k, v);
                    }
                }
            }
        }
        Ok(Settings { values })
    }

    /// A string setting.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.values.get(key).and_then(Value::as_str)
    }

    /// The `retry` settings (enabled, maxRetries, baseDelayMs, maxAgentDelayMs).
    pub fn retry(&self) -> RetrySettings {
        let mut r = RetrySettings::default();
        if let Some(Value::Object(o)) = self.values.get("retry") {
            if let Some(b) = o.get("enabled").and_then(Value::as_bool) {
                r.enabled = b;
            }
            if let Some(n) = o.get("maxRetries").and_then(Value::as_u64) {
                r.max_retries = n as u32;
            }
            if let Some(n) = o.get("baseDelayMs").and_then(Value::as_u64) {
                r.base_delay_ms = n;
            }
            if let Some(n) = o.get("maxAgentDelayMs").and_then(Value::as_u64) {
                r.max_delay_ms = n;
            }
        }
        r
    }

    /// `httpIdleTimeoutMs`: how long a model response may send nothing
    /// before the attempt fails (pi's default 300 000 ms). `0` or
    /// `"disabled"` turns the limit off (`None`); a value of another type
    /// is ignored, as pi ignores it.
    pub fn http_idle_timeout(&self) -> Option<std::time::Duration> {
        const DEFAULT_MS: u64 = 300_000;
        let ms = match self.values.get("httpIdleTimeoutMs") {
            Some(Value::String(s)) if s == "disabled" => return None,
            Some(Value::Number(n)) => match n.as_f64() {
                Some(0.0) => return None,
                Some(v) if v.is_finite() && v > 0.0 => v.min(u64::MAX as f64) as u64,
                _ => DEFAULT_MS,
            },
            _ => DEFAULT_MS,
        };
        Some(std::time::Duration::from_millis(ms.max(1)))
    }

    /// `images.autoResize` (default true).
    pub fn auto_resize_images(&self) -> bool {
        self.values
            .get("images")
            .and_then(|i| i.get("autoResize"))
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }

    /// `defaultTools` (after the user/project merge of [`Settings::load`]).
    pub fn default_tools(&self) -> crate::tools::select::DefaultTools {
        crate::tools::select::DefaultTools::from_value(self.values.get("defaultTools"))
    }
}

/// A `defaultTools` entry that is not a plain tool name: `+name` / `-name`
/// (pi's test when it merges a project list into the user's; non-strings
/// count as not plain).
fn is_tool_delta(v: &Value) -> bool {
    v.as_str()
        .is_none_or(|s| s.starts_with('+') || s.starts_with('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_idle_timeout_default_disabled_and_ignored_values() {
        use std::time::Duration;
        let with = |v: Value| {
            let mut values = Map::new();
            values.insert("httpIdleTimeoutMs".into(), v);
            Settings { values }.http_idle_timeout()
        };
        let none = Settings { values: Map::new() };
        assert_eq!(none.http_idle_timeout(), Some(Duration::from_secs(300)));
        assert_eq!(with(1500.into()), Some(Duration::from_millis(1500)));
        assert_eq!(with(0.into()), None);
        assert_eq!(with("disabled".into()), None);
        assert_eq!(with((-5).into()), Some(Duration::from_secs(300)));
        assert_eq!(with("10".into()), Some(Duration::from_secs(300)));
        assert_eq!(with(1e300.into()), Some(Duration::from_millis(u64::MAX)));
    }

    #[test]
    fn malformed_names_file_line_column() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("settings.json"), "{\n  \"a\": 1,\n  oops\n}").unwrap();
        let e = Settings::load(t.path(), t.path(), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("settings.json:3:3: invalid JSON"), "{e}");
    }

    #[test]
    fn project_merges_only_when_trusted() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("p/.pi")).unwrap();
        std::fs::write(
            t.path().join("settings.json"),
            r#"{"retry":{"maxRetries":5,"baseDelayMs":10,"maxAgentDelayMs":500}}"#,
        )
        .unwrap();
        std::fs::write(
            t.path().join("p/.pi/settings.json"),
            r#"{"retry":{"maxRetries":1}}"#,
        )
        .unwrap();
        let s = Settings::load(t.path(), &t.path().join("p"), false).unwrap();
        assert_eq!(s.retry().max_retries, 5);
        let s = Settings::load(t.path(), &t.path().join("p"), true).unwrap();
        assert_eq!((s.retry().max_retries, s.retry().base_delay_ms), (1, 10));
        assert_eq!(s.retry().max_delay_ms, 500);
    }

    /// pi 1.6.0's merge of `defaultTools` (user, project → merged), as
    /// observed with the real pi (tests/oracle/FINDINGS.md).
    #[test]
    fn default_tools_merge_as_pi() {
        use crate::tools::select::DefaultTools;
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("p/.pi")).unwrap();
        let cells: [(&str, &str, DefaultTools); 7] = [
            (r#"["grep"]"#, r#"["+ls"]"#, list(&["grep", "+ls"])),
            (r#"["grep"]"#, r#"["ls"]"#, list(&["ls"])),
            (r#"["grep"]"#, r#"[]"#, list(&["grep"])),
            (r#"["+grep"]"#, r#"["read","+ls"]"#, list(&["read", "+ls"])),
            (r#""x""#, r#"["+ls"]"#, list(&["+ls"])),
            (r#"["grep"]"#, r#""x""#, DefaultTools::Invalid("a string")),
            (r#"["grep"]"#, r#"null"#, DefaultTools::Invalid("null")),
        ];
        for (user, project, want) in cells {
            std::fs::write(
                t.path().join("settings.json"),
                format!(r#"{{"defaultTools":{user}}}"#),
            )
            .unwrap();
            std::fs::write(
                t.path().join("p/.pi/settings.json"),
                format!(r#"{{"defaultTools":{project}}}"#),
            )
            .unwrap();
            let s = Settings::load(t.path(), &t.path().join("p"), true).unwrap();
            assert_eq!(s.default_tools(), want, "{user} + {project}");
            let s = Settings::load(t.path(), &t.path().join("p"), false).unwrap();
            assert_eq!(
                s.default_tools(),
                DefaultTools::from_value(serde_json::from_str(user).ok().as_ref()),
                "untrusted: the user's value"
            );
        }
    }

    fn list(v: &[&str]) -> crate::tools::select::DefaultTools {
        crate::tools::select::DefaultTools::List(v.iter().map(|s| s.to_string()).collect())
    }
}
