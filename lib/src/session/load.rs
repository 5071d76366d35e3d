//! Reading a session file: header check, line-by-line parsing that survives
//! damage, and migration of version 1 and 2 files (in memory; the file is
//! rewritten only before something is appended to it, see `write`).
//!
//! Memory stays proportional to the file: each line becomes its entry at
//! once (no second copy of the whole file as JSON values), lines that are
//! not entries (`{}`, `[1]`, bad JSON) are dropped, and at most
//! [`MAX_KEPT_DIAGNOSTICS`] problems are kept per file; the rest are counted.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::format::entry::{header_version, VersionError};
use crate::format::{Entry, SessionHeader, CURRENT_SESSION_VERSION};

use super::file::open_regular;
use super::ids::derived_entry_id;
use super::session::{DiskState, Session};

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
    #[error("{path}:{line}: {reason}")]
    BadVersion {
        path: PathBuf,
        line: usize,
        reason: VersionError,
    },
}

impl Session {
    /// Reads and parses a session file (never blocking: a FIFO or device is
    /// refused with an error saying what it is).
    pub fn load(path: &Path) -> Result<Session, LoadError> {
        let io = |source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut f = open_regular(path, false).map_err(io)?;
        Session::load_from(path, &mut f)
    }

    /// Parses the whole of an open session file, line by line (memory: the
    /// entries plus the longest line, never the whole file at once).
    pub(crate) fn load_from(path: &Path, f: &mut std::fs::File) -> Result<Session, LoadError> {
        use std::os::unix::fs::MetadataExt;
        let io = |source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = f.metadata().map_err(io)?;
        std::io::Seek::rewind(f).map_err(io)?;
        let mut s = Session::read(path, std::io::BufReader::with_capacity(1 << 16, f))?;
        if let Some(d) = &mut s.disk {
            d.dev = meta.dev();
            d.ino = meta.ino();
        }
        Ok(s)
    }

    /// Parses the bytes of a session file that lives at `path`.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Session, LoadError> {
        Session::read(path, bytes)
    }

    /// Reads a session from `r`, one line at a time.
    fn read(path: &Path, mut r: impl std::io::BufRead) -> Result<Session, LoadError> {
        let io = |source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut buf = Vec::new();
        let mut lineno = 0;
        // Bytes and newlines up to the end of the last complete line.
        let (mut complete, mut newlines) = (0u64, 0usize);
        let mut session: Option<Session> = None;
        let mut later = Vec::new();
        loop {
            buf.clear();
            let n = r.read_until(b'\n', &mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            lineno += 1;
            let unterminated = buf.last() != Some(&b'\n');
            if !unterminated {
                buf.pop();
                complete += n as u64;
                newlines += 1;
            }
            match &mut session {
                Some(s) => s.ingest(lineno, &buf, unterminated, &mut later),
                None if trim_ascii(&buf).is_empty() => {}
                None => session = Some(Session::from_header_line(path, lineno, &buf)?),
            }
            if let Some(s) = &mut session {
                s.missing_final_newline = unterminated;
            }
        }
        let Some(mut s) = session else {
            return Err(LoadError::NotASession {
                path: path.to_path_buf(),
                line: 1,
                reason: "the file is empty".into(),
            });
        };
        if s.migrated_from.is_some() {
            s.header.version = Some(crate::format::Num::int(CURRENT_SESSION_VERSION));
        }
        s.check_links(later, true);
        s.disk = Some(DiskState {
            len: complete,
            newlines,
            dev: 0,
            ino: 0,
        });
        Ok(s)
    }

    /// An empty session from its header line (the first non-blank line).
    fn from_header_line(path: &Path, lineno: usize, line: &[u8]) -> Result<Session, LoadError> {
        let not_session = |reason: String| LoadError::NotASession {
            path: path.to_path_buf(),
            line: lineno,
            reason,
        };
        let map = match parse_json(trim_ascii(line)) {
            Ok((Value::Object(map), _)) => map,
            Ok(_) => return Err(not_session("first line is not a JSON object".into())),
            Err(e) => return Err(not_session(format!("first line is not JSON ({e})"))),
        };
        let is_header = map.get("type").and_then(Value::as_str) == Some("session")
            && map.get("id").is_some_and(Value::is_string);
        let version = if is_header {
            header_version(map.get("version")).map_err(|reason| LoadError::BadVersion {
                path: path.to_path_buf(),
                line: lineno,
                reason,
            })?
        } else {
            CURRENT_SESSION_VERSION
        };
        let header = SessionHeader::from_map(map).map_err(not_session)?;
        let mut s = Session::empty(path.to_path_buf(), header);
        s.migrated_from = (version < CURRENT_SESSION_VERSION).then_some(version);
        Ok(s)
    }

    /// Reads one entry line (`lineno` 1-based). `torn` marks the unfinished
    /// end of the file (no newline after it).
    /// Entries whose parent is not (yet) known are added to `later`.
    fn ingest(&mut self, lineno: usize, line: &[u8], torn: bool, later: &mut Vec<usize>) {
        let trimmed = trim_ascii(line);
        if trimmed.is_empty() {
            return;
        }
        let (value, lossy) = match parse_json(trimmed) {
            Ok(v) => v,
            Err(e) => {
                let what = if torn {
                    "truncated last line (the file ends mid-entry), skipped".to_string()
                } else {
                    format!("invalid JSON ({e}), line skipped")
                };
                self.diag(lineno, what);
                return;
            }
        };
        if lossy {
            self.diag(
                lineno,
                "invalid UTF-8 replaced by U+FFFD (the entry is kept)".into(),
            );
        }
        let Value::Object(mut map) = value else {
            self.diag(lineno, "line is not a JSON object, skipped".into());
            return;
        };
        match map.get("type").and_then(Value::as_str) {
            Some("session") => {
                self.diag(lineno, "second session header, skipped".into());
                return;
            }
            Some(_) => {}
            None => {
                self.diag(
                    lineno,
                    "line has no entry \"type\", skipped (not an entry)".into(),
                );
                return;
            }
        }
        match self.migrated_from {
            Some(1) => {
                self.migrate_v1_entry(&mut map);
                migrate_v2_entry(&mut map);
            }
            Some(2) => migrate_v2_entry(&mut map),
            _ => {}
        }
        let entry = Entry::from_map(map);
        // Links are checked now, while the entry is in cache; a parent that
        // comes later in the file is checked at the end.
        if entry.id().is_empty() {
            self.diag(
                lineno,
                format!(
                    "{} entry has no id; it is not part of the tree",
                    entry.kind()
                ),
            );
        }
        let has_parent = entry.parent_id().is_some();
        self.push_at(entry, lineno);
        let i = self.entries.len() - 1;
        if self.is_duplicate(i) {
            let id = self.entries[i].id();
            self.diag(
                lineno,
                format!("duplicate entry id {id}; the first one is used"),
            );
        }
        if has_parent && self.parent_unlinked(i) {
            later.push(i);
        }
    }

    /// v1 → v2 for one entry: a deterministic id, the previous entry as
    /// parent, `firstKeptEntryIndex` (counting the header as 0) becomes
    /// `firstKeptEntryId`.
    fn migrate_v1_entry(&mut self, map: &mut Map<String, Value>) {
        let n = self.entries.len();
        let id = derived_entry_id(&self.header.id, n, |id| self.has_id(id));
        let prev = self.entries.last().map(|e| e.id().to_string());
        let mut out = Map::with_capacity(map.len() + 2);
        if let Some(t) = map.shift_remove("type") {
            out.insert("type".into(), t);
        }
        out.insert("id".into(), Value::String(id));
        out.insert(
            "parentId".into(),
            prev.map(Value::String).unwrap_or(Value::Null),
        );
        map.shift_remove("id");
        map.shift_remove("parentId");
        if let Some(idx) = map.shift_remove("firstKeptEntryIndex") {
            let kept = idx
                .as_u64()
                .and_then(|k| (k as usize).checked_sub(1))
                .and_then(|k| self.entries.get(k))
                .map(|e| e.id().to_string());
            if let Some(k) = kept {
                map.insert("firstKeptEntryId".into(), Value::String(k));
            }
        }
        out.extend(std::mem::take(map));
        *map = out;
    }

    /// Reports dangling parents among the entries in `later` (those whose
    /// parent was unknown when read) and, with `cycles`, parentId cycles
    /// (only possible when a parent comes at or after its child).
    pub(crate) fn check_links(&mut self, later: Vec<usize>, cycles: bool) {
        let mut found: Vec<(usize, String)> = Vec::new();
        let mut backward = false;
        for i in later {
            let e = &self.entries[i];
            let Some(p) = e.parent_id() else { continue };
            if let Some(pi) = self.index_of(p) {
                backward = true;
                if pi != i {
                    self.set_parent_index(i, pi);
                }
            } else {
                found.push((
                    self.lines[i],
                    format!(
                        "entry {} has parentId {p}, which is not in the file; treated as a root",
                        e.id()
                    ),
                ));
            }
        }
        if cycles && backward {
            for cycle in self.cycles() {
                let ids: Vec<&str> = cycle
                    .iter()
                    .take(5)
                    .map(|&i| self.entries[i].id())
                    .collect();
                let more = if cycle.len() > 5 { ", …" } else { "" };
                found.push((
                    self.lines[cycle[0]],
                    format!(
                        "entries {}{more} form a parentId cycle (no root above them); shown from {}",
                        ids.join(", "),
                        ids[0]
                    ),
                ));
            }
        }
        for (line, message) in found {
            self.diag(line, message);
        }
    }

    /// Reads lines that follow what this copy already holds (`bytes` start
    /// at the start of a line; `first_line` is its number), as entries.
    /// Used to catch up with other writers.
    pub(crate) fn ingest_tail(&mut self, bytes: &[u8], first_line: usize) {
        let mut later = Vec::new();
        for (lineno, line, unterminated) in Lines::new(bytes, first_line - 1) {
            self.ingest(lineno, line, unterminated, &mut later);
        }
        self.missing_final_newline = !bytes.is_empty() && !bytes.ends_with(b"\n");
        self.check_links(later, false);
    }
}

/// Parses one JSON line. Invalid UTF-8 is replaced by U+FFFD, as pi (which
/// reads files as UTF-8 text) does; the flag says it happened.
pub(crate) fn parse_json(line: &[u8]) -> Result<(Value, bool), serde_json::Error> {
    match serde_json::from_slice(line) {
        Ok(v) => Ok((v, false)),
        Err(e) => match std::str::from_utf8(line) {
            Ok(_) => Err(e),
            Err(_) => serde_json::from_str(&String::from_utf8_lossy(line)).map(|v| (v, true)),
        },
    }
}

/// v2 → v3: message role `hookMessage` is renamed `custom`.
fn migrate_v2_entry(map: &mut Map<String, Value>) {
    if map.get("type").and_then(Value::as_str) != Some("message") {
        return;
    }
    if let Some(Value::Object(msg)) = map.get_mut("message") {
        if msg.get("role").and_then(Value::as_str) == Some("hookMessage") {
            msg.insert("role".into(), Value::String("custom".into()));
        }
    }
}

/// The lines of a byte buffer with their 1-based numbers (after `before`
/// lines), found with `memchr`, and whether the line lacks its newline (the
/// final piece of a file that ends mid-line).
struct Lines<'a> {
    bytes: &'a [u8],
    pos: usize,
    no: usize,
}

impl<'a> Lines<'a> {
    fn new(bytes: &'a [u8], before: usize) -> Self {
        Lines {
            bytes,
            pos: 0,
            no: before,
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = (usize, &'a [u8], bool);
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        let (end, unterminated) = match memchr::memchr(b'\n', rest) {
            Some(e) => (e, false),
            None => (rest.len(), true),
        };
        self.pos += end + 1;
        self.no += 1;
        Some((self.no, &rest[..end], unterminated))
    }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
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
