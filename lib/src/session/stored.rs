//! The stored text of a loaded session's header and entries, line for line
//! as they are on disk. The typed entries of [`Session`] fill in fields pi
//! may leave out and put unknown fields after the known ones, so writing
//! them back would quietly rewrite user data; commands that show or copy
//! entries (`show`, `fork`) take the stored line instead. The file is read
//! again, streaming, so a session costs no more memory for it.
//!
//! A line is used only when it still holds the entry it held at load time
//! (same `id`; for the header, `type: "session"`); otherwise — the file was
//! migrated from an older version in memory, rewritten since, or the entry
//! was never written — the typed entry's own serialization stands in.

use std::io::{BufRead, BufReader};

use serde_json::Value;

use super::Session;

/// A line for the caller: the header's, or entry `i`'s.
pub enum Line {
    Header(String),
    Entry(usize, String),
}

/// The text of a JSON line without its line ending.
fn text_of(raw: &[u8]) -> String {
    let t = raw.strip_suffix(b"\n").unwrap_or(raw);
    let t = t.strip_suffix(b"\r").unwrap_or(t);
    String::from_utf8_lossy(t).trim().to_string()
}

/// Whether `line` is the JSON object whose `key` is `want`.
fn holds(line: &str, key: &str, want: &str) -> bool {
    serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get(key).and_then(Value::as_str).map(|s| s == want))
        .unwrap_or(false)
}

/// Calls `f` with the header line and then every entry's line, in entry
/// order: the stored text where it is still there, else the typed one.
/// Streams the file: one line in memory at a time.
pub fn for_each_line<E>(s: &Session, mut f: impl FnMut(Line) -> Result<(), E>) -> Result<(), E> {
    let file = match s.migrated_from {
        None => crate::regular_file::open(&s.path).ok().map(|(f, _)| f),
        Some(_) => None,
    };
    let Some(file) = file else {
        f(Line::Header(s.header.to_line()))?;
        for (i, e) in s.entries.iter().enumerate() {
            f(Line::Entry(i, e.to_line()))?;
        }
        return Ok(());
    };
    let mut r = BufReader::new(file);
    let mut header_done = false;
    let mut next = 0usize;
    let mut no = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => no += 1,
        }
        if !header_done {
            let t = text_of(&buf);
            if t.is_empty() {
                continue;
            }
            header_done = true;
            if holds(&t, "type", "session") {
                f(Line::Header(t))?;
                continue;
            }
            f(Line::Header(s.header.to_line()))?;
        }
        // Entries the file no longer has where they were: typed.
        while next < s.entries.len() && s.lines.get(next).is_some_and(|&l| l < no) {
            f(Line::Entry(next, s.entries[next].to_line()))?;
            next += 1;
        }
        if next < s.entries.len() && s.lines.get(next) == Some(&no) {
            let t = text_of(&buf);
            let line = if holds(&t, "id", s.entries[next].id()) {
                t
            } else {
                s.entries[next].to_line()
            };
            f(Line::Entry(next, line))?;
            next += 1;
        }
    }
    if !header_done {
        f(Line::Header(s.header.to_line()))?;
    }
    for (i, e) in s.entries.iter().enumerate().skip(next) {
        f(Line::Entry(i, e.to_line()))?;
    }
    Ok(())
}
