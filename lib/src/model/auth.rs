//! `<agentDir>/auth.json` and credential values.
//!
//! The file maps provider ids to credentials:
//! `{"anthropic": {"type": "api_key", "key": "sk-…"}, "github-copilot":
//! {"type": "oauth", "access": "…", "refresh": "…", "expires": 1773614418000}}`.
//! `api_key` entries are used; OAuth entries make a provider count as
//! configured (as in pi) but cannot be used yet — [`super::ModelRegistry::api_key`]
//! reports them as unsupported when nothing else supplies a key. The file is
//! only read here; pi owns writing it.
//!
//! Credential values (auth.json `key`, models.json `apiKey` and header
//! values) resolve as pi 1.6.0 documents and as `pi auth print-api-key`
//! shows: a leading `!` runs the rest through `sh -c` and uses its trimmed
//! stdout (10 s timeout; auth.json commands are cached for the process, like
//! pi); otherwise `$NAME` and `${NAME}` are replaced by the environment
//! variable (an unset one is an error), `$$` is `$` and `$!` is `!`, and
//! everything else is literal. (pi 1.6.0 no longer treats a bare `NAME` as an
//! environment variable: `"apiKey": "MYVAR"` is the literal `MYVAR`.)

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::ModelError;

/// One credential of `auth.json`.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthEntry {
    /// `{"type": "api_key", "key": …, "env"?: {…}}`.
    ApiKey {
        /// The unresolved key (`!command`, `$VAR` or literal).
        key: String,
        /// Provider-specific variables stored with the key.
        env: Map<String, Value>,
    },
    /// `{"type": "oauth", …}`: kept as stored; not usable by the toolkit.
    OAuth(Map<String, Value>),
    /// Any other entry type (kept, ignored).
    Other(Value),
}

/// The parsed `auth.json` (empty when the file is missing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Provider id → credential, in file order.
    pub entries: Vec<(String, AuthEntry)>,
}

impl AuthFile {
    /// Reads `path`; a missing or blank file is empty. Malformed JSON is an
    /// error naming the file, line and column; only a regular file of at
    /// most [`crate::regular_file::CONFIG_CAP`] is read.
    pub fn load(path: &Path) -> Result<AuthFile, ModelError> {
        let text = match crate::regular_file::read_config(path, crate::regular_file::CONFIG_CAP) {
            Ok(Some(t)) => t,
            Ok(None) => {
                return Ok(AuthFile {
                    path: path.to_path_buf(),
                    entries: Vec::new(),
                })
            }
            Err(e) => {
                return Err(ModelError::Io {
                    path: path.to_path_buf(),
                    source: e.into(),
                })
            }
        };
        Self::parse(&text, path)
    }

    /// Parses the text of an `auth.json` (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<AuthFile, ModelError> {
        let mut out = AuthFile {
            path: path.to_path_buf(),
            entries: Vec::new(),
        };
        if text.trim().is_empty() {
            return Ok(out);
        }
        let v: Value = serde_json::from_str(text).map_err(|e| json_error(path, &e))?;
        let Value::Object(map) = v else {
            return Err(ModelError::Schema {
                path: path.to_path_buf(),
                at: "(root)".into(),
                message: "must be a JSON object of provider ids".into(),
            });
        };
        for (provider, entry) in map {
            let parsed = match &entry {
                Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                    Some("api_key") => match o.get("key").and_then(Value::as_str) {
                        Some(k) => AuthEntry::ApiKey {
                            key: k.to_string(),
                            env: o
                                .get("env")
                                .and_then(Value::as_object)
                                .cloned()
                                .unwrap_or_default(),
                        },
                        None => {
                            return Err(ModelError::Schema {
                                path: path.to_path_buf(),
                                at: format!("{provider}.key"),
                                message: "an api_key entry needs a string \"key\"".into(),
                            })
                        }
                    },
                    Some("oauth") => AuthEntry::OAuth(o.clone()),
                    _ => AuthEntry::Other(entry.clone()),
                },
                _ => AuthEntry::Other(entry.clone()),
            };
            out.entries.push((provider, parsed));
        }
        Ok(out)
    }

    /// The entry for `provider`.
    pub fn get(&self, provider: &str) -> Option<&AuthEntry> {
        self.entries
            .iter()
            .find(|(p, _)| p == provider)
            .map(|(_, e)| e)
    }
}

/// A serde_json error as [`ModelError::Json`] with its line and column.
pub(crate) fn json_error(path: &Path, e: &serde_json::Error) -> ModelError {
    let msg = e.to_string();
    let message = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    };
    ModelError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message,
    }
}

fn command_cache() -> &'static Mutex<HashMap<String, String>> {
    static CACHE: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Resolves a credential value (see the module header). `desc` names where
/// the value is configured, for errors; `cache` keeps `!command` output for
/// the process (auth.json semantics).
pub fn resolve_value(
    value: &str,
    env: &HashMap<String, String>,
    desc: &str,
    cache: bool,
) -> Result<String, ModelError> {
    if let Some(cmd) = value.strip_prefix('!') {
        if cache {
            if let Ok(c) = command_cache().lock() {
                if let Some(v) = c.get(cmd) {
                    return Ok(v.clone());
                }
            }
        }
        let out = run_command(cmd, Duration::from_secs(10)).map_err(|message| {
            ModelError::Credential {
                source_desc: desc.to_string(),
                message,
            }
        })?;
        if cache {
            if let Ok(mut c) = command_cache().lock() {
                c.insert(cmd.to_string(), out.clone());
            }
        }
        return Ok(out);
    }
    interpolate(value, env).map_err(|name| ModelError::Credential {
        source_desc: desc.to_string(),
        message: format!("environment variable {name} is not set"),
    })
}

/// `$NAME`, `${NAME}`, `$$`, `$!` interpolation; `Err(name)` for an unset
/// (or empty) variable.
pub fn interpolate(value: &str, env: &HashMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let lookup = |name: &str| -> Result<String, String> {
            env.get(name)
                .filter(|v| !v.is_empty())
                .cloned()
                .ok_or_else(|| name.to_string())
        };
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('!') {
            out.push('!');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            match tail.find('}') {
                Some(end) if is_var_name(&tail[..end]) => {
                    out.push_str(&lookup(&tail[..end])?);
                    rest = &tail[end + 1..];
                }
                _ => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            let len = after
                .char_indices()
                .take_while(|(j, c)| {
                    c.is_ascii_alphabetic() || *c == '_' || (*j > 0 && c.is_ascii_digit())
                })
                .count();
            if len == 0 {
                out.push('$');
                rest = after;
            } else {
                out.push_str(&lookup(&after[..len])?);
                rest = &after[len..];
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The most of a key command's output read (a key is a line; more is an
/// error, not a growing buffer).
const COMMAND_OUTPUT_CAP: u64 = 1 << 20;

/// Runs `cmd` with `sh -c`; its trimmed stdout, or why it failed (nonzero
/// exit, empty output, more than [`COMMAND_OUTPUT_CAP`], timeout). A
/// background process that keeps the output open does not hold the run
/// past the timeout.
fn run_command(cmd: &str, timeout: Duration) -> Result<String, String> {
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run `{cmd}`: {e}"))?;
    let stdout = child.stdout.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout {
            let _ = s.take(COMMAND_OUTPUT_CAP + 1).read_to_end(&mut buf);
        }
        let _ = tx.send(buf);
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("`{cmd}` timed out after {}s", timeout.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("`{cmd}`: {e}")),
        }
    };
    let out = rx
        .recv_timeout(
            timeout
                .saturating_sub(start.elapsed())
                .max(Duration::from_millis(500)),
        )
        .map_err(|_| format!("`{cmd}` timed out after {}s", timeout.as_secs()))?;
    // Before the status: a command cut off at the cap dies of SIGPIPE.
    if out.len() as u64 > COMMAND_OUTPUT_CAP {
        return Err(format!("`{cmd}` printed more than 1MB"));
    }
    if !status.success() {
        return Err(format!("`{cmd}` exited with {status}"));
    }
    let out = String::from_utf8_lossy(&out);
    let trimmed = out.trim();
    if trimmed.is_empty() {
        return Err(format!("`{cmd}` printed nothing"));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> HashMap<String, String> {
        [("MYVAR".to_string(), "v".to_string())].into()
    }

    #[test]
    fn interpolates_like_pi() {
        // pi 1.6.0 `auth print-api-key` gave `pre-v-v-$-!-x` for this value.
        assert_eq!(
            interpolate("pre-${MYVAR}-$MYVAR-$$-$!-x", &env()).as_deref(),
            Ok("pre-v-v-$-!-x")
        );
        assert_eq!(interpolate("MYVAR", &env()).as_deref(), Ok("MYVAR"));
        assert_eq!(interpolate("$NOPE", &env()), Err("NOPE".to_string()));
        assert_eq!(interpolate("a$", &env()).as_deref(), Ok("a$"));
        assert_eq!(interpolate("$1x", &env()).as_deref(), Ok("$1x"));
    }

    #[test]
    fn commands_run_and_trim() {
        let v = resolve_value("!echo ' hello '", &env(), "t", false);
        assert_eq!(v.ok().as_deref(), Some("hello"));
        let e = resolve_value("!exit 3", &env(), "auth.json (x.key)", false);
        assert!(matches!(e, Err(ModelError::Credential { .. })));
        let e = resolve_value("!true", &env(), "t", false);
        assert!(e.is_err(), "empty output is unresolved");
    }

    /// A key command's output is capped, and a background process that
    /// keeps stdout open costs at most the timeout.
    #[test]
    fn command_output_is_bounded_in_size_and_time() {
        let e = run_command(
            "head -c 3000000 /dev/zero | tr '\\0' x",
            Duration::from_secs(10),
        );
        assert_eq!(
            e,
            Err("`head -c 3000000 /dev/zero | tr '\\0' x` printed more than 1MB".into())
        );
        let start = Instant::now();
        let cmd = "echo key; sleep 30 &";
        let e = run_command(cmd, Duration::from_secs(1));
        assert!(start.elapsed() < Duration::from_secs(5), "{e:?}");
        assert_eq!(e, Err(format!("`{cmd}` timed out after 1s")));
    }

    #[test]
    fn parses_entries_and_reports_line_col() {
        let p = Path::new("/a/auth.json");
        let f = AuthFile::parse(
            r#"{"anthropic":{"type":"api_key","key":"k"},"google":{"type":"oauth","access":"a"}}"#,
            p,
        )
        .expect("parse");
        assert!(matches!(f.get("anthropic"), Some(AuthEntry::ApiKey { key, .. }) if key == "k"));
        assert!(matches!(f.get("google"), Some(AuthEntry::OAuth(_))));
        let e = AuthFile::parse("{\n \"a\": {\"type\":\"api_key\" \"key\":\"k\"}}", p)
            .expect_err("bad");
        let s = e.to_string();
        assert!(s.starts_with("/a/auth.json:2:"), "{s}");
    }
}
