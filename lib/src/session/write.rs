//! Writing sessions without ever losing data: whole-line appends under an
//! exclusive lock, and new files written to a temporary name then renamed.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::format::entry::{CustomEntry, LabelEntry, SessionInfoEntry};
use crate::format::Entry;
use crate::timefmt::now_iso;

use super::ids::new_entry_id;
use super::Session;

/// Appends whole lines to an existing session file.
///
/// Holds an exclusive advisory lock for the write, and starts with a newline
/// when the file ends mid-line (a crash), so the new entries never merge into
/// a damaged line. Each entry is one `write` of a complete line.
pub fn append_lines(path: &Path, lines: &[String]) -> std::io::Result<()> {
    append_lines_with(path, lines, true)
}

/// [`append_lines`], with `durable` choosing whether to fsync. The agent
/// appends without fsync, as pi does: a crashed process loses nothing the
/// kernel already has, and a run appends many small lines.
pub fn append_lines_with(path: &Path, lines: &[String], durable: bool) -> std::io::Result<()> {
    let mut f = OpenOptions::new().read(true).append(true).open(path)?;
    f.lock()?;
    let len = f.metadata()?.len();
    let mut buf = String::new();
    if len > 0 {
        let mut last = [0u8; 1];
        f.seek(SeekFrom::Start(len - 1))?;
        f.read_exact(&mut last)?;
        if last[0] != b'\n' {
            buf.push('\n');
        }
    }
    for l in lines {
        buf.push_str(l);
        buf.push('\n');
    }
    f.write_all(buf.as_bytes())?;
    if durable {
        f.sync_data()?;
    }
    f.unlock()
}

/// Writes `contents` to `path` atomically: a temporary file in the same
/// folder, fsync, then rename. Refuses to replace an existing file unless
/// `replace` is set.
pub fn write_atomic(path: &Path, contents: &[u8], replace: bool) -> std::io::Result<()> {
    if !replace && path.exists() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} already exists", path.display()),
        ));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

impl Session {
    /// A fresh entry id for this session.
    pub fn fresh_id(&self) -> String {
        new_entry_id(&self.id_set())
    }

    /// Builds a `label` entry on `target` (`None` clears), child of the leaf.
    pub fn new_label(&self, target: &str, label: Option<String>) -> Entry {
        Entry::Label(LabelEntry {
            id: self.fresh_id(),
            parent_id: self.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            target_id: target.to_string(),
            label,
            extra: Map::new(),
        })
    }

    /// Builds a `session_info` entry naming the session, child of the leaf.
    pub fn new_session_info(&self, name: &str) -> Entry {
        Entry::SessionInfo(SessionInfoEntry {
            id: self.fresh_id(),
            parent_id: self.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            name: Some(name.trim().to_string()),
            extra: Map::new(),
        })
    }

    /// Builds a `custom` entry with `parent` as its parent.
    pub fn new_custom(&self, parent: Option<&str>, custom_type: &str, data: Value) -> Entry {
        Entry::Custom(CustomEntry {
            custom_type: custom_type.to_string(),
            data: Some(data),
            id: self.fresh_id(),
            parent_id: parent.map(str::to_string),
            timestamp: now_iso(),
            extra: Map::new(),
        })
    }

    /// Appends entries to the file (whole lines, locked) and to memory.
    pub fn append(&mut self, entries: Vec<Entry>) -> std::io::Result<()> {
        let lines: Vec<String> = entries.iter().map(Entry::to_line).collect();
        append_lines(&self.path, &lines)?;
        for e in entries {
            self.push(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_after_truncated_line_starts_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        std::fs::write(&p, "{\"a\":1}\n{\"trunc").unwrap();
        append_lines(&p, &["{\"b\":2}".to_string()]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"a\":1}\n{\"trunc\n{\"b\":2}\n"
        );
    }

    #[test]
    fn atomic_write_refuses_to_clobber() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        write_atomic(&p, b"1", false).unwrap();
        assert!(write_atomic(&p, b"2", false).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"1");
    }
}
