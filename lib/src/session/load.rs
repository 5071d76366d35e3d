//! Reading a session file: header check, line-by-line parsing that survives
//! damage, and migration of version 1 and 2 files (in memory; only
//! `pi-session migrate` writes the result).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::format::{Entry, SessionHeader, CURRENT_SESSION_VERSION};

use super::ids::new_entry_id;

/// A problem found while reading, tied to a file and line. The command still
/// serves the rest of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub path: PathBuf,
    /// 1-based line number; 0 when the problem is not tied to a line.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
        } else {
            write!(f, "{}: {}", self.path.display(), self.message)
        }
    }
}

/// Why a file could not be used as a session at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a pi session file: {reason}")]
    NotASession {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}:1: unsupported session version {version} (this pi-session reads versions 1 to {max})", max = CURRENT_SESSION_VERSION)]
    UnsupportedVersion { path: PathBuf, version: u64 },
}

/// A loaded session: header, entries in file order, and what went wrong.
#[derive(Debug, Clone)]
pub struct Session {
    pub path: PathBuf,
    pub header: SessionHeader,
    pub entries: Vec<Entry>,
    /// The 1-based file line of each entry (parallel to `entries`).
    pub lines: Vec<usize>,
    pub diagnostics: Vec<Diagnostic>,
    /// The version the file had on disk, when it was migrated in memory.
    pub migrated_from: Option<u64>,
    /// Whether the file ended without a newline (a crash mid-write).
    pub missing_final_newline: bool,
    index: HashMap<String, usize>,
}

impl Session {
    /// Reads and parses a session file.
    pub fn load(path: &Path) -> Result<Session, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Session::parse(path, &bytes)
    }

    /// Parses the bytes of a session file that lives at `path`.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Session, LoadError> {
        let mut diagnostics = Vec::new();
        let mut header: Option<SessionHeader> = None;
        let mut raw: Vec<(usize, Map<String, Value>)> = Vec::new();
        let missing_final_newline = !bytes.is_empty() && !bytes.ends_with(b"\n");
        let total_lines = bytes.split(|b| *b == b'\n').count();
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            let lineno = i + 1;
            let trimmed = trim_ascii(line);
            if trimmed.is_empty() {
                continue;
            }
            let is_last = lineno == total_lines;
            let value: Value = match serde_json::from_slice(trimmed) {
                Ok(v) => v,
                Err(e) => {
                    let what = if is_last && missing_final_newline {
                        "truncated last line (the file ends mid-entry), skipped".to_string()
                    } else {
                        format!("invalid JSON ({e}), line skipped")
                    };
                    if header.is_none() && raw.is_empty() {
                        return Err(LoadError::NotASession {
                            path: path.to_path_buf(),
                            line: lineno,
                            reason: format!("first line is not JSON ({e})"),
                        });
                    }
                    diagnostics.push(Diagnostic {
                        path: path.to_path_buf(),
                        line: lineno,
                        message: what,
                    });
                    continue;
                }
            };
            let Value::Object(map) = value else {
                diagnostics.push(Diagnostic {
                    path: path.to_path_buf(),
                    line: lineno,
                    message: "line is not a JSON object, skipped".into(),
                });
                continue;
            };
            if header.is_none() {
                let h = SessionHeader::from_map(map).map_err(|reason| LoadError::NotASession {
                    path: path.to_path_buf(),
                    line: lineno,
                    reason,
                })?;
                if h.version() > CURRENT_SESSION_VERSION {
                    return Err(LoadError::UnsupportedVersion {
                        path: path.to_path_buf(),
                        version: h.version(),
                    });
                }
                header = Some(h);
                continue;
            }
            if map.get("type").and_then(Value::as_str) == Some("session") {
                diagnostics.push(Diagnostic {
                    path: path.to_path_buf(),
                    line: lineno,
                    message: "second session header, skipped".into(),
                });
                continue;
            }
            raw.push((lineno, map));
        }
        let Some(mut header) = header else {
            return Err(LoadError::NotASession {
                path: path.to_path_buf(),
                line: 1,
                reason: "the file is empty".into(),
            });
        };
        let version = header.version();
        let migrated_from = (version < CURRENT_SESSION_VERSION).then_some(version);
        if version < 2 {
            migrate_v1_to_v2(&mut raw);
        }
        if version < 3 {
            migrate_v2_to_v3(&mut raw);
        }
        if migrated_from.is_some() {
            header.version = Some(crate::format::Num::int(CURRENT_SESSION_VERSION));
        }
        let mut entries = Vec::with_capacity(raw.len());
        let mut lines = Vec::with_capacity(raw.len());
        for (lineno, map) in raw {
            entries.push(Entry::from_map(map));
            lines.push(lineno);
        }
        let mut s = Session {
            path: path.to_path_buf(),
            header,
            entries,
            lines,
            diagnostics,
            migrated_from,
            missing_final_newline,
            index: HashMap::new(),
        };
        s.reindex();
        s.check_links();
        Ok(s)
    }

    fn reindex(&mut self) {
        self.index.clear();
        for (i, e) in self.entries.iter().enumerate() {
            let id = e.id();
            if !id.is_empty() {
                self.index.entry(id.to_string()).or_insert(i);
            }
        }
    }

    fn check_links(&mut self) {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut found: Vec<(usize, String)> = Vec::new();
        for (e, &line) in self.entries.iter().zip(&self.lines) {
            if e.id().is_empty() {
                found.push((
                    line,
                    format!("{} entry has no id; it is not part of the tree", e.kind()),
                ));
                continue;
            }
            if !seen.insert(e.id()) {
                found.push((
                    line,
                    format!("duplicate entry id {}; the first one is used", e.id()),
                ));
            }
            if let Some(p) = e.parent_id() {
                if !self.index.contains_key(p) {
                    found.push((
                        line,
                        format!("entry {} has parentId {p}, which is not in the file; treated as a root", e.id()),
                    ));
                }
            }
        }
        let path = self.path.clone();
        self.diagnostics
            .extend(found.into_iter().map(|(line, message)| Diagnostic {
                path: path.clone(),
                line,
                message,
            }));
    }

    /// A session with no entries (not yet on disk).
    pub fn empty(path: PathBuf, header: SessionHeader) -> Session {
        Session {
            path,
            header,
            entries: Vec::new(),
            lines: Vec::new(),
            diagnostics: Vec::new(),
            migrated_from: None,
            missing_final_newline: false,
            index: HashMap::new(),
        }
    }

    /// The session id from the header.
    pub fn id(&self) -> &str {
        &self.header.id
    }

    /// The index of the entry with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.index_of(id).map(|i| &self.entries[i])
    }

    /// All entry ids (for drawing fresh ones).
    pub fn id_set(&self) -> HashSet<String> {
        self.index.keys().cloned().collect()
    }

    /// Finds an entry by full id or unique prefix.
    pub fn find_entry(&self, id_or_prefix: &str) -> Result<&Entry, String> {
        if let Some(e) = self.get(id_or_prefix) {
            return Ok(e);
        }
        let matches: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| !e.id().is_empty() && e.id().starts_with(id_or_prefix))
            .collect();
        match matches.len() {
            0 => Err(format!(
                "{}: no entry with id {id_or_prefix}",
                self.path.display()
            )),
            1 => Ok(matches[0]),
            _ => Err(format!(
                "{}: entry id prefix {id_or_prefix} is ambiguous: {}",
                self.path.display(),
                matches
                    .iter()
                    .map(|e| e.id())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// The leaf: the last entry (in file order) that has an id.
    pub fn leaf_id(&self) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .map(Entry::id)
            .find(|id| !id.is_empty())
    }

    /// Appends an entry in memory (the caller persists it).
    pub fn push(&mut self, entry: Entry) {
        let id = entry.id().to_string();
        self.entries.push(entry);
        self.lines.push(0);
        if !id.is_empty() {
            self.index.entry(id).or_insert(self.entries.len() - 1);
        }
    }

    /// The whole file as pi writes it: header line, then one line per entry.
    pub fn to_jsonl(&self) -> String {
        let mut out = self.header.to_line();
        out.push('\n');
        for e in &self.entries {
            out.push_str(&e.to_line());
            out.push('\n');
        }
        out
    }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let mut s = b;
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// v1 → v2: a linear chain of fresh ids; `firstKeptEntryIndex` (counting the
/// header as 0) becomes `firstKeptEntryId`.
fn migrate_v1_to_v2(raw: &mut [(usize, Map<String, Value>)]) {
    let mut taken = HashSet::new();
    let mut ids = Vec::with_capacity(raw.len());
    for _ in 0..raw.len() {
        let id = new_entry_id(&taken);
        taken.insert(id.clone());
        ids.push(id);
    }
    let mut prev: Option<String> = None;
    for (i, (_, map)) in raw.iter_mut().enumerate() {
        let id = ids[i].clone();
        let mut out = Map::with_capacity(map.len() + 2);
        if let Some(t) = map.shift_remove("type") {
            out.insert("type".into(), t);
        }
        out.insert("id".into(), Value::String(id.clone()));
        out.insert(
            "parentId".into(),
            prev.clone().map(Value::String).unwrap_or(Value::Null),
        );
        map.shift_remove("id");
        map.shift_remove("parentId");
        if let Some(idx) = map.shift_remove("firstKeptEntryIndex") {
            let kept = idx
                .as_u64()
                .and_then(|n| (n as usize).checked_sub(1))
                .and_then(|n| ids.get(n).cloned());
            if let Some(k) = kept {
                map.insert("firstKeptEntryId".into(), Value::String(k));
            }
        }
        out.extend(std::mem::take(map));
        *map = out;
        prev = Some(id);
    }
}

/// v2 → v3: message role `hookMessage` is renamed `custom`.
fn migrate_v2_to_v3(raw: &mut [(usize, Map<String, Value>)]) {
    for (_, map) in raw.iter_mut() {
        if map.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        if let Some(Value::Object(msg)) = map.get_mut("message") {
            if msg.get("role").and_then(Value::as_str) == Some("hookMessage") {
                msg.insert("role".into(), Value::String("custom".into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;

    #[test]
    fn damaged_lines_are_reported_and_skipped() {
        let text = format!(
            "{HDR}\n{}\nnot json\n{}\n{{\"type\":\"message\",\"id\":\"c",
            r#"{"type":"session_info","id":"a","parentId":null,"timestamp":"t","name":"n"}"#,
            r#"{"type":"label","id":"b","parentId":"zz","timestamp":"t","targetId":"a","label":"x"}"#
        );
        let s = Session::parse(Path::new("f.jsonl"), text.as_bytes()).unwrap();
        assert_eq!(s.entries.len(), 2);
        let msgs: Vec<String> = s.diagnostics.iter().map(|d| d.to_string()).collect();
        assert!(msgs[0].starts_with("f.jsonl:3: invalid JSON"), "{msgs:?}");
        assert!(
            msgs[1].starts_with("f.jsonl:5: truncated last line"),
            "{msgs:?}"
        );
        assert!(
            msgs[2].contains("f.jsonl:4: entry b has parentId zz"),
            "{msgs:?}"
        );
        assert_eq!(s.leaf_id(), Some("b"));
    }

    #[test]
    fn migrates_v1_and_v2() {
        let text = concat!(
            r#"{"type":"session","id":"s","timestamp":"t","cwd":"/p"}"#,
            "\n",
            r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"a","timestamp":1}}"#,
            "\n",
            r#"{"type":"message","timestamp":"t","message":{"role":"hookMessage","customType":"x","content":"b","display":true,"timestamp":2}}"#,
            "\n",
            r#"{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":2,"tokensBefore":5}"#,
            "\n",
        );
        let s = Session::parse(Path::new("v1.jsonl"), text.as_bytes()).unwrap();
        assert_eq!(s.migrated_from, Some(1));
        assert_eq!(s.header.version(), 3);
        assert_eq!(s.entries[0].parent_id(), None);
        assert_eq!(s.entries[1].parent_id(), Some(s.entries[0].id()));
        assert_eq!(s.entries[1].message().unwrap().role(), "custom");
        let Entry::Compaction(c) = &s.entries[2] else {
            panic!("{:?}", s.entries[2])
        };
        assert_eq!(c.first_kept_entry_id, s.entries[1].id());
    }

    #[test]
    fn rejects_unknown_version_and_non_sessions() {
        let e = Session::parse(
            Path::new("x"),
            br#"{"type":"session","version":4,"id":"s"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unsupported session version 4"));
        let e = Session::parse(Path::new("x"), b"").unwrap_err();
        assert!(e.to_string().contains("empty"));
        let e = Session::parse(Path::new("x"), br#"{"type":"message"}"#).unwrap_err();
        assert!(e.to_string().contains("not a pi session file"));
    }
}
