//! `<agentDir>/trust.json`: saved project-trust decisions, shared with the
//! real pi, so both sides must agree on every byte and on the lock.
//!
//! * Shape: one flat object, canonical directory path → `true` / `false`
//!   (`null` is accepted, kept, and skipped by lookups).
//! * Reading strips a BOM; bad JSON, a non-object or any other value is an
//!   error naming the file, worded as pi words it, and such a file is never
//!   rewritten.
//! * Writing sorts the keys (JavaScript's UTF-16 order), indents by two
//!   spaces and ends with a newline — byte-for-byte what pi writes.
//! * Every read and read-modify-write holds the lock `trust.json.lock`. pi
//!   takes it with proper-lockfile, whose lock is a *directory* created with
//!   `mkdir`; we create the same directory (as atomic as `create_new`, and
//!   the only form both tools respect), retry with a bounded wait, and treat
//!   a lock older than proper-lockfile's 10 s staleness threshold as stale.
//! * Writes go to a temporary file in the same folder, then `rename` over
//!   trust.json, so a reader never sees half a file.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value};

use super::protected::canonicalize_dir;
use super::TrustError;

/// The file name inside the agent directory.
pub const TRUST_FILE: &str = "trust.json";

/// A lock older than this is stale (proper-lockfile's default `stale`;
/// a live pi refreshes its lock's mtime every 5 s).
const STALE_AFTER: Duration = Duration::from_secs(10);
/// How long to wait for a held lock before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// A saved decision that applies to a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedDecision {
    /// The trust.json key that decided (the directory or an ancestor).
    pub path: PathBuf,
    pub trusted: bool,
}

/// One change for [`TrustStore::set_many`]: `None` removes the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustUpdate {
    pub path: PathBuf,
    pub decision: Option<bool>,
}

impl TrustUpdate {
    /// Saves `decision` for `path`.
    pub fn set(path: impl Into<PathBuf>, decision: bool) -> Self {
        TrustUpdate {
            path: path.into(),
            decision: Some(decision),
        }
    }

    /// Removes the saved decision for `path`.
    pub fn remove(path: impl Into<PathBuf>) -> Self {
        TrustUpdate {
            path: path.into(),
            decision: None,
        }
    }
}

/// The parsed contents of trust.json: every key, in file order, each with
/// `true`, `false` or `null`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustEntries {
    map: Map<String, Value>,
}

impl TrustEntries {
    /// Parses file text (BOM stripped); `path` only names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<TrustEntries, TrustError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let value: Value = serde_json::from_str(text).map_err(|e| TrustError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
            corrupt: true,
        })?;
        let Value::Object(map) = value else {
            return Err(TrustError::Invalid {
                path: path.to_path_buf(),
                message: "expected an object".into(),
            });
        };
        for (key, value) in &map {
            if !matches!(value, Value::Bool(_) | Value::Null) {
                return Err(TrustError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "value for {} must be true, false, or null",
                        Value::String(key.clone())
                    ),
                });
            }
        }
        Ok(TrustEntries { map })
    }

    /// Every entry, in file order (`None` for `null`).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<bool>)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v.as_bool()))
    }

    /// Number of keys (including `null` ones).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the file has no keys.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The decision saved exactly for the canonical directory `dir`
    /// (`None`: no key, or only `null`).
    pub fn exact(&self, dir: &Path) -> Option<bool> {
        let want = path_key(dir);
        self.map
            .iter()
            .filter(|(k, _)| keys_equal(k, &want))
            .find_map(|(_, v)| v.as_bool())
    }

    /// The nearest saved decision: walking up from the canonical directory
    /// `dir`, the first key with a boolean value.
    pub fn nearest(&self, dir: &Path) -> Option<SavedDecision> {
        for d in dir.ancestors() {
            let want = path_key(d);
            for (k, v) in &self.map {
                if keys_equal(k, &want) {
                    if let Some(trusted) = v.as_bool() {
                        return Some(SavedDecision {
                            path: PathBuf::from(k),
                            trusted,
                        });
                    }
                }
            }
        }
        None
    }

    /// Applies pi's `setMany`: for each update, delete every key equal to
    /// its (canonical) path, then write the decision unless it is `None`.
    pub fn apply(&mut self, updates: &[TrustUpdate]) {
        for u in updates {
            let key = path_key(&canonicalize_dir(&u.path));
            self.map.retain(|k, _| !keys_equal(k, &key));
            if let Some(d) = u.decision {
                self.map.insert(key, Value::Bool(d));
            }
        }
    }

    /// The file text pi writes: sorted keys, 2-space indent, final newline.
    pub fn to_file_text(&self) -> String {
        let mut keys: Vec<&String> = self.map.keys().collect();
        // JavaScript's default sort compares UTF-16 code units.
        keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
        let mut sorted = Map::new();
        for k in keys {
            if let Some(v) = self.map.get(k) {
                sorted.insert(k.clone(), v.clone());
            }
        }
        let mut text = serde_json::to_string_pretty(&Value::Object(sorted))
            .unwrap_or_else(|_| "{}".to_string());
        text.push('\n');
        text
    }
}

/// A path as a trust.json key.
fn path_key(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// pi compares keys case-insensitively on Windows only.
fn keys_equal(a: &str, b: &str) -> bool {
    if cfg!(windows) {
        a.to_lowercase() == b.to_lowercase()
    } else {
        a == b
    }
}

/// trust.json at a known path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// `<agent_dir>/trust.json`.
    pub fn in_agent_dir(agent_dir: &Path) -> TrustStore {
        TrustStore {
            path: agent_dir.join(TRUST_FILE),
        }
    }

    /// A store at an explicit file path.
    pub fn at(path: impl Into<PathBuf>) -> TrustStore {
        TrustStore { path: path.into() }
    }

    /// The trust.json path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock directory path (`trust.json.lock`).
    pub fn lock_path(&self) -> PathBuf {
        let mut s = self.path.as_os_str().to_owned();
        s.push(".lock");
        PathBuf::from(s)
    }

    /// Reads the whole file under the lock; a missing file is empty.
    pub fn load(&self) -> Result<TrustEntries, TrustError> {
        if !self.path.exists() {
            return Ok(TrustEntries::default());
        }
        let _guard = match self.lock() {
            Ok(g) => Some(g),
            // A read-only agent dir cannot hold a lock; reading is still safe
            // against our own writers (they rename whole files).
            Err(LockFailure::CannotCreate(_)) => None,
            Err(LockFailure::Busy) => return Err(self.busy_error()),
        };
        self.read_unlocked()
    }

    /// The nearest saved decision for `dir` (canonicalized first).
    pub fn nearest(&self, dir: &Path) -> Result<Option<SavedDecision>, TrustError> {
        Ok(self.load()?.nearest(&canonicalize_dir(dir)))
    }

    /// Saves one decision (`None` removes it).
    pub fn set(&self, dir: &Path, decision: Option<bool>) -> Result<(), TrustError> {
        self.set_many(&[TrustUpdate {
            path: dir.to_path_buf(),
            decision,
        }])
    }

    /// pi's `setMany`, as one locked read-modify-write. A corrupt file is an
    /// error and is left exactly as it was.
    pub fn set_many(&self, updates: &[TrustUpdate]) -> Result<(), TrustError> {
        if let Some(parent) = self.path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent).map_err(|e| self.write_error(e))?;
            }
        }
        let _guard = match self.lock() {
            Ok(g) => g,
            Err(LockFailure::Busy) => return Err(self.busy_error()),
            Err(LockFailure::CannotCreate(e)) => {
                return Err(TrustError::Lock {
                    path: self.lock_path(),
                    message: e.to_string(),
                })
            }
        };
        let mut entries = self.read_unlocked()?;
        entries.apply(updates);
        self.write_atomic(&entries.to_file_text())
    }

    fn read_unlocked(&self) -> Result<TrustEntries, TrustError> {
        match crate::regular_file::read_config_bytes(&self.path, crate::regular_file::CONFIG_CAP) {
            Ok(Some(bytes)) => {
                let text = String::from_utf8_lossy(&bytes);
                TrustEntries::parse(&text, &self.path)
            }
            Ok(None) => Ok(TrustEntries::default()),
            Err(e) => Err(TrustError::Read {
                path: self.path.clone(),
                message: e.to_string(),
                corrupt: false,
            }),
        }
    }

    fn write_atomic(&self, text: &str) -> Result<(), TrustError> {
        crate::atomic_file::replace_atomic(&self.path, text.as_bytes(), 0o666)
            .map_err(|e| self.write_error(e))
    }

    fn write_error(&self, e: std::io::Error) -> TrustError {
        TrustError::Write {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    fn busy_error(&self) -> TrustError {
        TrustError::Lock {
            path: self.lock_path(),
            message: format!(
                "held by another process for more than {} s (remove it if no pi is running)",
                LOCK_WAIT.as_secs()
            ),
        }
    }

    /// Takes the lock: `mkdir trust.json.lock`, retried with a short,
    /// growing sleep for up to [`LOCK_WAIT`]; a stale lock is removed.
    fn lock(&self) -> Result<LockGuard, LockFailure> {
        let lock = self.lock_path();
        let start = Instant::now();
        let mut sleep = Duration::from_millis(1);
        let mut attempt: u32 = 0;
        loop {
            match std::fs::create_dir(&lock) {
                Ok(()) => return Ok(LockGuard { path: lock }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if is_stale(&lock) {
                        remove_lock(&lock);
                        continue;
                    }
                }
                Err(e) => return Err(LockFailure::CannotCreate(e)),
            }
            if start.elapsed() >= LOCK_WAIT {
                return Err(LockFailure::Busy);
            }
            // A little jitter so threads of one process do not march in step.
            attempt = attempt.wrapping_add(1);
            let jitter = Duration::from_micros(u64::from((std::process::id() ^ attempt) % 500));
            std::thread::sleep(sleep + jitter);
            sleep = (sleep * 2).min(Duration::from_millis(20));
        }
    }
}

enum LockFailure {
    /// Held by someone else for the whole wait.
    Busy,
    /// Could not be created at all (permissions, read-only file system…).
    CannotCreate(std::io::Error),
}

/// Removes the lock when dropped.
struct LockGuard {
    path: PathBuf,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        remove_lock(&self.path);
    }
}

fn is_stale(lock: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(lock) else {
        return false;
    };
    match meta.modified() {
        Ok(m) => SystemTime::now()
            .duration_since(m)
            .is_ok_and(|age| age > STALE_AFTER),
        Err(_) => false,
    }
}

/// A lock is a directory (ours, pi's); tolerate a plain file too.
fn remove_lock(lock: &Path) {
    if std::fs::remove_dir(lock).is_err() {
        let _ = std::fs::remove_file(lock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn setup() -> (tempfile::TempDir, PathBuf, TrustStore) {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap();
        let store = TrustStore::in_agent_dir(&root.join("agent"));
        (t, root, store)
    }

    #[test]
    fn missing_file_is_empty_and_first_write_creates_it() {
        let (_t, root, store) = setup();
        assert!(store.load().unwrap().is_empty());
        let p = root.join("p");
        fs::create_dir(&p).unwrap();
        store.set(&p, Some(true)).unwrap();
        assert_eq!(
            fs::read_to_string(store.path()).unwrap(),
            format!("{{\n  \"{}\": true\n}}\n", p.display())
        );
        assert!(!store.lock_path().exists());
    }

    #[test]
    fn format_is_sorted_two_space_and_keeps_nulls_and_unknown_keys() {
        let (_t, root, store) = setup();
        fs::create_dir_all(root.join("agent")).unwrap();
        let p = root.join("p");
        fs::create_dir(&p).unwrap();
        // pi's own rewrite of this file (captured in tests/fixtures/trust/matrix.json)
        fs::write(
            store.path(),
            format!(
                "\u{feff}{{\"/zzz/other\": true, \"{r}\": false, \"/aaa/nulled\": null, \"{p}\": null}}",
                r = root.display(),
                p = p.display()
            ),
        )
        .unwrap();
        store.set(&p, Some(true)).unwrap();
        assert_eq!(
            fs::read_to_string(store.path()).unwrap(),
            format!(
                "{{\n  \"/aaa/nulled\": null,\n  \"{r}\": false,\n  \"{p}\": true,\n  \"/zzz/other\": true\n}}\n",
                r = root.display(),
                p = p.display()
            )
        );
    }

    #[test]
    fn sorts_like_javascript() {
        let mut e = TrustEntries::default();
        for k in ["/\u{ff21}", "/\u{1f600}", "/b", "/B", "/a"] {
            e.map.insert(k.into(), Value::Bool(true));
        }
        let text = e.to_file_text();
        let order: Vec<&str> = text.lines().filter_map(|l| l.split('"').nth(1)).collect();
        // UTF-16: an astral char (surrogate D83D…) sorts before U+FF21
        assert_eq!(order, ["/B", "/a", "/b", "/\u{1f600}", "/\u{ff21}"]);
    }

    #[test]
    fn nearest_ancestor_wins_and_null_is_skipped() {
        let e = TrustEntries::parse(
            r#"{"/w": true, "/w/p": false, "/w/p/q": null, "/w/p/qq": true}"#,
            Path::new("t"),
        )
        .unwrap();
        assert_eq!(
            e.nearest(Path::new("/w/p/q/r")),
            Some(SavedDecision {
                path: "/w/p".into(),
                trusted: false
            })
        );
        assert_eq!(e.nearest(Path::new("/w/x")).map(|d| d.trusted), Some(true));
        assert_eq!(e.nearest(Path::new("/v")), None);
        assert_eq!(e.exact(Path::new("/w/p/q")), None);
        assert_eq!(e.exact(Path::new("/w/p")), Some(false));
    }

    #[test]
    fn set_many_deletes_then_writes() {
        let mut e = TrustEntries::parse(r#"{"/a/b": false, "/a": null}"#, Path::new("t")).unwrap();
        e.apply(&[TrustUpdate::set("/a", true), TrustUpdate::remove("/a/b")]);
        assert_eq!(e.to_file_text(), "{\n  \"/a\": true\n}\n");
        e.apply(&[TrustUpdate::remove("/a")]);
        assert_eq!(e.to_file_text(), "{}\n");
    }

    #[test]
    fn corrupt_files_are_errors_and_never_rewritten() {
        let cases: [(&str, &str); 6] = [
            ("{\"a\": ", "Failed to read trust store"),
            ("", "Failed to read trust store"),
            ("null", "Invalid trust store"),
            ("[true]", "Invalid trust store"),
            ("{\"/x\": \"yes\"}", "must be true, false, or null"),
            ("{\"/x\": 1}", "Invalid trust store"),
        ];
        for (text, want) in cases {
            let (_t, root, store) = setup();
            fs::create_dir_all(root.join("agent")).unwrap();
            fs::write(store.path(), text).unwrap();
            let err = store.load().unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
            assert!(err.contains(&store.path().display().to_string()), "{err}");
            let err = store.set(&root, Some(true)).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
            assert_eq!(fs::read(store.path()).unwrap(), text.as_bytes());
            assert!(!store.lock_path().exists());
        }
    }

    #[test]
    fn bad_value_message_matches_pi() {
        let err = TrustEntries::parse(r#"{"/x": "yes"}"#, Path::new("/a/trust.json")).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"Invalid trust store /a/trust.json: value for "/x" must be true, false, or null"#
        );
        let err = TrustEntries::parse("[1]", Path::new("/a/trust.json")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid trust store /a/trust.json: expected an object"
        );
    }

    #[test]
    fn held_lock_is_waited_for_and_stale_lock_removed() {
        let (_t, root, store) = setup();
        fs::create_dir_all(root.join("agent")).unwrap();
        // a fresh lock held by "someone": released after 100 ms
        fs::create_dir(store.lock_path()).unwrap();
        let lock = store.lock_path();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            fs::remove_dir(lock).unwrap();
        });
        store.set(&root, Some(false)).unwrap();
        h.join().unwrap();
        // a stale one (mtime 1 h ago) is taken over at once
        fs::create_dir(store.lock_path()).unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        fs::File::open(store.lock_path())
            .unwrap()
            .set_modified(old)
            .unwrap();
        let t0 = Instant::now();
        store.set(&root, Some(true)).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert_eq!(store.nearest(&root).unwrap().map(|d| d.trusted), Some(true));
        assert!(!store.lock_path().exists());
    }
}
