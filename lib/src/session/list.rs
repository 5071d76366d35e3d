//! Fast listing of many session files (`pi-session ls`).
//!
//! Listing must keep up with 10,000 sessions / several GB, so it does not
//! build full entries. Each file is streamed once through a small reused
//! buffer that stays in the CPU cache, lines are found with `memchr`, and
//! only the few lines that matter are parsed: the
//! header, `session_info` names, the first user message (its text, by a
//! borrowing reader), and the `usage`
//! object at the end of assistant lines (a structural `"usage":{` cannot
//! occur inside a JSON string, where quotes are escaped). Anything that does
//! not match the expected shape falls back to a full parse of that line, so
//! odd files are slower, never wrong. Files are spread over all cores.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use memchr::memmem;
use serde_json::Value;

use crate::format::entry::header_version;
use crate::format::records::SessionRecord;
use crate::format::{AgentMessage, Usage};
use crate::timefmt::{iso_from_ms, parse_iso_ms};

use super::diagnostics::{Diagnostic, Diagnostics};
use super::file::open_regular_meta;
pub use super::file::Skipped;
use super::lines::{stream_lines, LineIter, CHUNK};
use super::load::parse_json;
use super::usage_scan::{after, line_usage, usage_totals, USAGE_KEY};
use super::user_text::user_text;
use crate::format::records::OutcomeRecord;

/// What `ls` shows of one session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionSummary {
    pub path: PathBuf,
    pub id: String,
    pub cwd: String,
    pub name: Option<String>,
    pub parent_session: Option<String>,
    /// A built-in subagent's child: the parent session id its
    /// `pi-web:subagent` metadata entry names.
    pub subagent_of: Option<String>,
    /// Header timestamp (ISO).
    pub created: String,
    /// Epoch ms of the last activity: the latest message timestamp, else the
    /// header time.
    pub modified_ms: i64,
    /// File modification time, epoch ms.
    pub mtime_ms: i64,
    pub message_count: u64,
    /// Text of the first user message (empty when there is none).
    pub first_message: String,
    pub tokens: u64,
    pub cost: f64,
    pub bytes: u64,
    /// Damaged lines skipped while scanning (the first few, and a count).
    pub problems: Diagnostics,
    /// The outcomes `pi-run` stored in the session, one per run, oldest
    /// first: the entry's timestamp and the outcome.
    pub outcomes: Vec<(String, crate::format::run_end::RunEnd)>,
}

impl SessionSummary {
    fn bad_line(&mut self, line: usize) {
        self.problems.push(Diagnostic {
            path: PathBuf::new(),
            line,
            message: "damaged line skipped".into(),
        });
    }
}

impl SessionSummary {
    /// The `session` record of `pi-session ls`.
    pub fn record(&self) -> SessionRecord {
        SessionRecord {
            kind: "session",
            id: self.id.clone(),
            // A UTF-8 path as it is (what `display` gives it, without
            // the lossy conversion's scan).
            path: self
                .path
                .to_str()
                .map_or_else(|| self.path.display().to_string(), str::to_string),
            cwd: self.cwd.clone(),
            name: self.name.clone(),
            parent_session: self.parent_session.clone(),
            subagent_of: self.subagent_of.clone(),
            created: self.created.clone(),
            modified: iso_from_ms(self.modified_ms),
            message_count: self.message_count,
            first_message: self.first_message.clone(),
            tokens: self.tokens,
            cost: self.cost,
            bytes: self.bytes,
            outcome: self.outcomes.last().map(|(_, o)| OutcomeRecord {
                stop_reason: o.stop_reason.clone(),
                exit_code: o.exit_code,
                cost: o.usage.cost.total,
                turns: o.turns,
                duration_ms: o.duration_ms,
            }),
            runs: self.outcomes.len() as u64,
        }
    }
}

/// The order of a listing, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// By last activity.
    Modified,
    /// By the header's creation time.
    Created,
}

/// The sessions of `files` for a listing: each file scanned (one that is
/// not a session, and every file's damaged lines, reported to `warn`),
/// sorted newest first by `sort` (ties by path), at most `limit`.
pub fn list_sessions(
    files: &[PathBuf],
    sort: SortKey,
    limit: Option<usize>,
    warn: &mut dyn FnMut(&str),
) -> Vec<SessionSummary> {
    let mut sessions = Vec::with_capacity(files.len());
    for r in scan_all(files) {
        match r {
            Ok(s) => {
                for m in s.problems.messages() {
                    warn(&m);
                }
                sessions.push(s);
            }
            Err(skip) => warn(&skip.to_string()),
        }
    }
    // The path breaks ties only: compared lazily (`then_with`), since a
    // path comparison walks components and costs more than the key.
    match sort {
        SortKey::Modified => sessions.sort_by(|a, b| {
            b.modified_ms
                .cmp(&a.modified_ms)
                .then_with(|| a.path.cmp(&b.path))
        }),
        SortKey::Created => {
            // Each header time parsed once, not at every comparison.
            let mut keyed: Vec<(i64, SessionSummary)> = sessions
                .into_iter()
                .map(|s| (parse_iso_ms(&s.created).unwrap_or(0), s))
                .collect();
            keyed.sort_by(|(ca, a), (cb, b)| cb.cmp(ca).then_with(|| a.path.cmp(&b.path)));
            sessions = keyed.into_iter().map(|(_, s)| s).collect();
        }
    }
    if let Some(n) = limit {
        sessions.truncate(n);
    }
    sessions
}

/// Scans `files` in parallel; results keep the input order.
pub fn scan_all(files: &[PathBuf]) -> Vec<Result<SessionSummary, Skipped>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<Result<SessionSummary, Skipped>>> = vec![None; files.len()];
    let chunks: Vec<Vec<(usize, Result<SessionSummary, Skipped>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut buf = Vec::new();
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= files.len() {
                            break;
                        }
                        out.push((i, scan_file(&files[i], &mut buf)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for chunk in chunks {
        for (i, r) in chunk {
            results[i] = Some(r);
        }
    }
    results
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.unwrap_or_else(|| {
                Err(Skipped {
                    path: files[i].clone(),
                    reason: "scan did not complete".into(),
                })
            })
        })
        .collect()
}

/// The window [`scan_file`] reads through: most session files fit in one
/// read (a 100 KB file in two 64 KiB windows cost a third system call and a
/// move of the cut line), and it stays well inside a core's cache.
const WINDOW: usize = 4 * CHUNK;

/// Scans one file, reusing `buf` as its read buffer: the file is streamed
/// through a [`WINDOW`]-sized window, a line cut by the window's end is moved
/// to the front before the next read, and only a line longer than the
/// window is gathered in a separate growing buffer.
pub fn scan_file(path: &Path, buf: &mut Vec<u8>) -> Result<SessionSummary, Skipped> {
    let skip = |reason: String| Skipped {
        path: path.to_path_buf(),
        reason,
    };
    let (mut f, meta) = open_regular_meta(path, false).map_err(|e| skip(e.to_string()))?;
    let mtime_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let mut z = Summarizer::new();
    let bytes = stream_lines(&mut f, buf, WINDOW, |no, line| z.line(no, line))
        .map_err(|e| skip(e.to_string()))?
        .map_err(skip)?;
    let mut s = z.finish().map_err(skip)?;
    s.path = path.to_path_buf();
    s.problems.set_path(path);
    s.mtime_ms = mtime_ms;
    s.bytes = bytes;
    Ok(s)
}

/// Summarises the bytes of one session file.
pub fn summarize(bytes: &[u8]) -> Result<SessionSummary, String> {
    let mut z = Summarizer::new();
    for (no, line) in LineIter::new(bytes) {
        z.line(no, line)?;
    }
    z.finish()
}

/// The summary of one file as its lines come in (the header first).
struct Summarizer {
    s: SessionSummary,
    header_seen: bool,
    first_user_found: bool,
    last_activity: i64,
    f: &'static Finders,
}

impl Summarizer {
    fn new() -> Self {
        Summarizer {
            s: SessionSummary::default(),
            header_seen: false,
            first_user_found: false,
            last_activity: 0,
            f: finders(),
        }
    }

    fn finish(self) -> Result<SessionSummary, String> {
        if !self.header_seen {
            return Err("empty file".into());
        }
        let mut s = self.s;
        if s.first_message.is_empty() {
            s.first_message = NO_MESSAGES.to_string();
        }
        if self.last_activity > 0 {
            s.modified_ms = self.last_activity;
        }
        Ok(s)
    }

    /// The header: the first non-blank line.
    fn header(&mut self, header: &[u8]) -> Result<(), String> {
        let s = &mut self.s;
        let (h, _) =
            parse_json(header).map_err(|e| format!("line 1: not a session header ({e})"))?;
        if h.get("type").and_then(Value::as_str) != Some("session") {
            return Err("line 1: not a session header (type is not \"session\")".into());
        }
        s.id = h
            .get("id")
            .and_then(Value::as_str)
            .ok_or("line 1: session header has no id")?
            .to_string();
        header_version(h.get("version")).map_err(|e| format!("line 1: {e}"))?;
        s.cwd = h
            .get("cwd")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        s.created = h
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        s.parent_session = h
            .get("parentSession")
            .and_then(Value::as_str)
            .map(str::to_string);
        s.modified_ms = parse_iso_ms(&s.created).unwrap_or(0);
        self.header_seen = true;
        Ok(())
    }

    /// One line of the file; `Err` only for a bad header, which ends the scan.
    fn line(&mut self, no: usize, line: &[u8]) -> Result<(), String> {
        if !self.header_seen {
            if line.iter().all(u8::is_ascii_whitespace) {
                return Ok(());
            }
            return self.header(line);
        }
        if line.is_empty() {
            return Ok(());
        }
        let Summarizer {
            s,
            first_user_found,
            last_activity,
            f,
            ..
        } = self;
        let finder = &f.usage;
        let ts_finder = &f.timestamp;
        match quick_type(line) {
            Some(b"message") => {
                let Some(role) = quick_role(line) else {
                    // Unusual layout: parse the whole line.
                    let entry = parse_json(line)
                        .is_ok_and(|(v, _)| handle_value(s, v, first_user_found, last_activity));
                    if !entry {
                        s.bad_line(no);
                    }
                    return Ok(());
                };
                if !line.ends_with(b"}") {
                    // A torn line (crash mid-write): not an entry.
                    s.bad_line(no);
                    return Ok(());
                }
                s.message_count += 1;
                match role {
                    b"user" => {
                        if let Some(ts) = activity_time(line, ts_finder) {
                            *last_activity = (*last_activity).max(ts);
                        }
                        if !*first_user_found {
                            let text = user_text(line, " ")
                                .or_else(|| full_message(line).map(|m| listing_text(&m)));
                            match text {
                                Some(t) => {
                                    if !t.is_empty() {
                                        *first_user_found = true;
                                        s.first_message = t;
                                    }
                                }
                                None => {
                                    s.message_count -= 1;
                                    s.bad_line(no);
                                }
                            }
                        }
                    }
                    b"assistant" => {
                        if let Some(ts) = activity_time(line, ts_finder) {
                            *last_activity = (*last_activity).max(ts);
                        }
                        if !add_usage(s, line, finder) {
                            match full_message(line) {
                                Some(AgentMessage::Assistant(a)) => add(s, &a.usage),
                                Some(_) => {}
                                None => {
                                    s.message_count -= 1;
                                    s.bad_line(no);
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            Some(b"session_info") => match parse_json(line) {
                Ok((v, _)) => set_name(s, &v),
                Err(_) => s.bad_line(no),
            },
            Some(b"custom") if memmem::find(line, b"\"pi-run:run_end\"").is_some() => {
                if let Ok((v, _)) = parse_json(line) {
                    if let Some(end) = crate::format::run_end::RunEnd::from_entry(&v) {
                        let ts = v["timestamp"].as_str().unwrap_or_default().to_string();
                        s.outcomes.push((ts, end));
                    }
                }
            }
            Some(b"custom")
                if s.subagent_of.is_none()
                    && memmem::find(line, b"\"pi-web:subagent\"").is_some() =>
            {
                if let Ok((v, _)) = parse_json(line) {
                    s.subagent_of = crate::format::subagent::metadata_parent(&v);
                }
            }
            Some(b"usage") | Some(b"compaction") | Some(b"branch_summary") => {
                add_usage(s, line, finder);
            }
            Some(_) => {}
            None => {
                // Not pi's usual key order (or not JSON at all).
                let entry = parse_json(line)
                    .is_ok_and(|(v, _)| handle_value(s, v, first_user_found, last_activity));
                if !entry {
                    s.bad_line(no);
                }
            }
        }
        Ok(())
    }
}

/// What pi shows as the first message of a session without user text.
pub const NO_MESSAGES: &str = "(no messages)";

/// Text of a message as pi's listing reads it: a string content verbatim,
/// else the text blocks joined by one space.
pub fn listing_text(m: &AgentMessage) -> String {
    let content = match m {
        AgentMessage::User(u) => &u.content,
        AgentMessage::Custom(c) => &c.content,
        AgentMessage::Assistant(a) => return crate::format::message::blocks_text(&a.content, " "),
        _ => return String::new(),
    };
    content.joined_text(" ")
}

/// The latest `session_info` decides: a blank or missing name clears it.
fn set_name(s: &mut SessionSummary, v: &Value) {
    s.name = v
        .get("name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
}

/// Takes one fully parsed line into the summary; false when it is not an
/// entry at all (not an object, or no `type`), which the loader skips too.
fn handle_value(
    s: &mut SessionSummary,
    v: Value,
    first_user_found: &mut bool,
    last_activity: &mut i64,
) -> bool {
    let Value::Object(mut map) = v else {
        return false;
    };
    match map.get("type").and_then(Value::as_str) {
        None => return false,
        Some("message") => {
            let entry_ts = map
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(parse_iso_ms);
            if let Some(Value::Object(m)) = map.shift_remove("message") {
                let m = AgentMessage::from_map(m);
                s.message_count += 1;
                let own_ts = match &m {
                    AgentMessage::User(u) => u.timestamp.0.as_f64(),
                    AgentMessage::Assistant(a) => a.timestamp.0.as_f64(),
                    _ => None,
                };
                if matches!(m, AgentMessage::User(_) | AgentMessage::Assistant(_)) {
                    if let Some(ts) = own_ts.map(|f| f as i64).or(entry_ts) {
                        *last_activity = (*last_activity).max(ts);
                    }
                }
                match &m {
                    AgentMessage::User(_) if !*first_user_found => {
                        let t = listing_text(&m);
                        if !t.is_empty() {
                            *first_user_found = true;
                            s.first_message = t;
                        }
                    }
                    AgentMessage::Assistant(a) => add(s, &a.usage),
                    _ => {}
                }
            }
        }
        Some("session_info") => set_name(s, &Value::Object(map)),
        Some("usage") | Some("compaction") | Some("branch_summary") => {
            if let Some(u) = map
                .get("usage")
                .and_then(|u| <Usage as serde::Deserialize>::deserialize(u).ok())
            {
                add(s, &u);
            }
        }
        _ => {}
    }
    true
}

const TIMESTAMP_KEY: &[u8; 12] = b"\"timestamp\":";

/// A message's activity time: its own epoch-ms `timestamp` (the last
/// `"timestamp":` key of the line), else the entry's ISO timestamp.
fn activity_time(line: &[u8], finder: &memmem::FinderRev<'_>) -> Option<i64> {
    // pi's epoch-ms times have 13 digits: `"timestamp":<13 digits>}}` at
    // the end is checked as one block first (the digit run is then exactly
    // those 13, as the scan below would count it).
    if let Some((head, num)) = line
        .strip_suffix(b"}}")
        .and_then(|body| body.split_last_chunk::<13>())
    {
        if head.last_chunk() == Some(TIMESTAMP_KEY) && num.iter().all(u8::is_ascii_digit) {
            return Some(num.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')));
        }
    }
    activity_time_scan(line, finder)
}

/// [`activity_time`] for any layout.
fn activity_time_scan(line: &[u8], finder: &memmem::FinderRev<'_>) -> Option<i64> {
    // pi ends a message line with its own `"timestamp":<ms>}}`: read it
    // straight from the end.
    if let Some(body) = line.strip_suffix(b"}}") {
        let digits = body.iter().rev().take_while(|c| c.is_ascii_digit()).count();
        let (head, num) = body.split_at(body.len() - digits);
        if (1..=15).contains(&digits) && head.last_chunk() == Some(TIMESTAMP_KEY) {
            return Some(num.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')));
        }
    }
    let pos = finder.rfind(line)?;
    let rest = &line[pos + TIMESTAMP_KEY.len()..];
    match rest.first()? {
        b'0'..=b'9' | b'-' => {
            let end = rest
                .iter()
                .position(|b| {
                    !(b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'e' | b'E' | b'+'))
                })
                .unwrap_or(rest.len());
            let n: f64 = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
            Some(n as i64)
        }
        _ => message_timestamp(line),
    }
}

fn add(s: &mut SessionSummary, u: &Usage) {
    let (tokens, cost) = usage_totals(u);
    s.tokens += tokens;
    s.cost += cost;
}

/// The substring searchers of the scan, built once (building one costs more
/// than a search in a short line).
struct Finders {
    usage: memmem::FinderRev<'static>,
    timestamp: memmem::FinderRev<'static>,
    role: memmem::Finder<'static>,
    entry_timestamp: memmem::Finder<'static>,
}

fn finders() -> &'static Finders {
    static F: std::sync::OnceLock<Finders> = std::sync::OnceLock::new();
    F.get_or_init(|| Finders {
        usage: memmem::FinderRev::new(USAGE_KEY),
        timestamp: memmem::FinderRev::new(TIMESTAMP_KEY),
        role: memmem::Finder::new(ROLE_KEY),
        entry_timestamp: memmem::Finder::new(ENTRY_TIMESTAMP_KEY),
    })
}

/// Adds the usage object of the line (its last structural `"usage":{`).
fn add_usage(s: &mut SessionSummary, line: &[u8], finder: &memmem::FinderRev<'_>) -> bool {
    match line_usage(line, finder) {
        Some((tokens, cost)) => {
            s.tokens += tokens;
            s.cost += cost;
            true
        }
        None => false,
    }
}

fn full_message(line: &[u8]) -> Option<AgentMessage> {
    let (v, _) = parse_json(line).ok()?;
    let Value::Object(mut map) = v else {
        return None;
    };
    match map.shift_remove("message")? {
        Value::Object(m) => Some(AgentMessage::from_map(m)),
        _ => None,
    }
}

/// `{"type":"X"` at the start of the line → `X`.
fn quick_type(line: &[u8]) -> Option<&[u8]> {
    let rest = after(line, b"{\"type\":\"")?;
    if after(rest, b"message\"").is_some() {
        return Some(&rest[..7]);
    }
    Some(&rest[..memchr::memchr(b'"', rest)?])
}

/// The text of `b` before its first `"`: the usual roles compared in place
/// (a few loads), any other searched for.
#[inline(always)]
fn role_text(b: &[u8]) -> Option<&[u8]> {
    let n = if after(b, b"toolResult\"").is_some() {
        10
    } else if after(b, b"assistant\"").is_some() {
        9
    } else if after(b, b"user\"").is_some() {
        4
    } else {
        memchr::memchr(b'"', b)?
    };
    Some(&b[..n])
}

const ROLE_KEY: &[u8; 19] = b"\"message\":{\"role\":\"";
const ENTRY_TIMESTAMP_KEY: &[u8] = b"\"timestamp\":\"";

/// How far into a line [`quick_role`] looks for the role key.
const ROLE_WINDOW: usize = 512;

/// The role of a `message` entry written in pi's key order: after the
/// first `"message":{"role":"` within the line's first [`ROLE_WINDOW`]
/// bytes. Every match holds a `{` ten bytes in, so when the first `{`
/// after the line's own opens a match, no match can start before it:
/// that one is the first, found with one byte search instead of a
/// substring search. Otherwise the substring search decides.
fn quick_role(line: &[u8]) -> Option<&[u8]> {
    let window = &line[..line.len().min(ROLE_WINDOW)];
    let brace = 1 + memchr::memchr(b'{', window.get(1..)?)?;
    let pos = match brace.checked_sub(ROLE_BRACE) {
        Some(start) if after(&window[start..], ROLE_KEY).is_some() => start,
        _ => finders().role.find(window)?,
    };
    role_text(&line[pos + ROLE_KEY.len()..])
}

/// Where the `{` of [`ROLE_KEY`] is.
const ROLE_BRACE: usize = 10;

/// The entry timestamp (`"timestamp":"…"` before the message) in epoch ms.
fn message_timestamp(line: &[u8]) -> Option<i64> {
    let window = &line[..line.len().min(256)];
    let pos = finders().entry_timestamp.find(window)?;
    let rest = &window[pos + ENTRY_TIMESTAMP_KEY.len()..];
    let end = memchr::memchr(b'"', rest)?;
    parse_iso_ms(std::str::from_utf8(&rest[..end]).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_file_has_the_summary_of_its_bytes() {
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
        );
        text.push('\n');
        let big = "y".repeat(3 * WINDOW);
        for i in 0..400 {
            let body = if i % 97 == 5 { big.as_str() } else { "hello" };
            text.push_str(&format!(
                r#"{{"type":"message","id":"u{i}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{body} {i}","timestamp":{i}}}}}"#
            ));
            text.push_str(if i % 2 == 0 { "\r\n" } else { "\n" });
            text.push_str(&format!(
                r#"{{"type":"message","id":"a{i}","parentId":"u{i}","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":{{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.5}}}},"stopReason":"stop","timestamp":{}}}}}"#,
                1000 + i
            ));
            text.push('\n');
        }
        text.push_str(r#"{"type":"message","id":"torn","parentId":null,"timestamp":"2026-01-0"#);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, &text).unwrap();
        let mut expected = summarize(text.as_bytes()).unwrap();
        expected.path = path.clone();
        expected.problems.set_path(&path);
        expected.bytes = text.len() as u64;
        let mut buf = Vec::new();
        let mut got = scan_file(&path, &mut buf).unwrap();
        assert_eq!(buf.len(), WINDOW, "the read buffer stays one window");
        expected.mtime_ms = got.mtime_ms;
        assert_eq!(got.message_count, 800);
        assert_eq!(got.tokens, 1200);
        assert_eq!(got.first_message, "hello 0");
        assert_eq!(got.modified_ms, 1399);
        assert_eq!(
            got.problems.iter().map(|d| d.line).collect::<Vec<_>>(),
            vec![802]
        );
        got.problems.set_path(&path);
        assert_eq!(got, expected);
        // A bad header ends the scan with the same reason.
        std::fs::write(&path, "\n  \n{\"type\":\"nope\"}\n").unwrap();
        let err = scan_file(&path, &mut buf).unwrap_err();
        assert_eq!(
            Err(err.reason),
            summarize(b"\n  \n{\"type\":\"nope\"}\n").map(|_| ())
        );
        std::fs::write(&path, "\n\n").unwrap();
        assert_eq!(scan_file(&path, &mut buf).unwrap_err().reason, "empty file");
    }

    #[test]
    fn the_role_read_in_place_is_the_one_the_search_finds() {
        fn search(line: &[u8]) -> Option<&[u8]> {
            let window = &line[..line.len().min(ROLE_WINDOW)];
            let pos = memmem::find(window, ROLE_KEY)?;
            let rest = &line[pos + ROLE_KEY.len()..];
            Some(&rest[..memchr::memchr(b'"', rest)?])
        }
        let long = "x".repeat(600);
        let lines: Vec<String> = vec![
            r#"{"type":"message","id":"a1b2c3d4","parentId":"e5f6a7b8","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi"}}"#.into(),
            r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant"}}"#.into(),
            // Other lengths, escapes, keys hidden in strings, other orders.
            r#"{"type":"message","id":"a","parentId":"bb","timestamp":"t","message":{"role":"toolResult"}}"#.into(),
            r#"{"type":"message","id":"message","parentId":"message","timestamp":"message","message":{"role":"x"}}"#.into(),
            r#"{"type":"message","id":"a"message":{"role":"fake","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user"}}"#.into(),
            r#"{"type":"message","id":"a1b2c3d\","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user"}}"#.into(),
            r#"{"type":"message","id":"a1b2c3d4","parentId":"e5f6a7b8","timestamp":"2026-01-01T00:00:00.000Z","extra":1,"message":{"role":"user"}}"#.into(),
            r#"{"type":"message","parentId":null,"id":"a1b2c3d4","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user"}}"#.into(),
            r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"#.into(),
            r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"a very long role name indeed here""#.into(),
            format!(r#"{{"type":"message","id":"{long}","parentId":null,"timestamp":"t","message":{{"role":"user"}}}}"#),
            format!(r#"{{"type":"message","id":"{}","parentId":null,"timestamp":"t","message":{{"role":"user"}}}}"#, &long[..430]),
            format!(r#"{{"type":"message","id":"{}","parentId":null,"timestamp":"t","message":{{"role":"user"}}}}"#, &long[..440]),
            // Braces before the key: in a string, in another object, at
            // the very start, too close to the start to open a match.
            r#"{"type":"message","id":"a{b","parentId":null,"timestamp":"t","message":{"role":"user"}}"#.into(),
            r#"{"type":"message","meta":{"x":1},"message":{"role":"assistant"}}"#.into(),
            r#"{"type":"message","id":""message":{"role":"x","message":{"role":"user"}}"#.into(),
            r#"{"type":"message","id":""message":{"role":"fake","message":{"role":"user"}}"#.into(),
            r#"{{"message":{"role":"user"}}"#.into(),
            r#"{"a{":1,"message":{"role":"user"}}"#.into(),
            r#""message":{"role":"user"}"#.into(),
            r#"x"message":{"role":"user"}"#.into(),
            r#"{"type":"message"}"#.into(),
            "{".into(),
            String::new(),
            // The key cut by the window's end, and just inside it.
            format!(r#"{{"id":"{}","message":{{"role":"user"}}}}"#, &long[..ROLE_WINDOW - 27]),
            format!(r#"{{"id":"{}","message":{{"role":"user"}}}}"#, &long[..ROLE_WINDOW - 26]),
            format!(r#"{{"id":"{}","message":{{"role":"user"}}}}"#, &long[..ROLE_WINDOW - 25]),
        ];
        for line in &lines {
            let line = line.as_bytes();
            assert_eq!(
                quick_role(line),
                search(line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        assert_eq!(quick_role(lines[0].as_bytes()), Some(&b"user"[..]));
        assert_eq!(ROLE_KEY[ROLE_BRACE], b'{');
    }

    #[test]
    fn the_activity_time_read_in_one_block_is_the_scanned_one() {
        let f = memmem::FinderRev::new(TIMESTAMP_KEY);
        let lines = [
            r#"{"message":{"role":"user","timestamp":1768000000000}}"#,
            r#"{"message":{"role":"user","timestamp":0001768000000}}"#,
            r#"{"message":{"role":"user","timestamp":176800000000}}"#,
            r#"{"message":{"role":"user","timestamp":17680000000000}}"#,
            r#"{"message":{"role":"user","timestamp":1768000000000.5}}"#,
            r#"{"message":{"role":"user","timestamp":-768000000000}}"#,
            r#"{"message":{"role":"user","timestamp":"1768000000000"}}"#,
            r#"{"message":{"role":"user","timestamp":x1768000000000}}"#,
            r#"{"message":{"role":"user","timestamp":1768000000000}"#,
            r#"{"message":{"role":"user","timestamp":1768000000000} }"#,
            r#"{"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","time":1768000000000}}"#,
            r#""timestamp":1768000000000}}"#,
            r#"timestamp":1768000000000}}"#,
            r#"1768000000000}}"#,
            "}}",
            "",
        ];
        for line in lines {
            assert_eq!(
                activity_time(line.as_bytes(), &f),
                activity_time_scan(line.as_bytes(), &f),
                "{line}"
            );
        }
        assert_eq!(activity_time(lines[0].as_bytes(), &f), Some(1768000000000));
    }

    /// Every line read the slow way: parsed whole, as a line the fast
    /// reader does not recognise is.
    fn summarize_slowly(text: &str) -> SessionSummary {
        let mut lines = LineIter::new(text.as_bytes());
        let mut z = Summarizer::new();
        for (no, line) in lines.by_ref() {
            z.line(no, line).unwrap();
            if z.header_seen {
                break;
            }
        }
        for (no, line) in lines {
            if line.is_empty() {
                continue;
            }
            let Summarizer {
                s,
                first_user_found,
                last_activity,
                ..
            } = &mut z;
            let entry = parse_json(line)
                .is_ok_and(|(v, _)| handle_value(s, v, first_user_found, last_activity));
            if !entry {
                s.bad_line(no);
            }
        }
        z.finish().unwrap()
    }

    #[test]
    fn the_fast_reader_agrees_with_parsing_every_line() {
        let usage = r#""usage":{"input":10,"output":5,"cacheRead":1,"cacheWrite":2,"totalTokens":18,"cost":{"input":0.1,"output":0.2,"cacheRead":0.001,"cacheWrite":0,"total":0.021888499999999998}}"#;
        let big = "z".repeat(3 * WINDOW);
        let lines: Vec<String> = vec![
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#.into(),
            // pi's layout.
            format!(r#"{{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":[{{"type":"text","text":"hi {{\"message\":{{\"role\":\"x"}}],"timestamp":1767225601000}}}}"#),
            format!(r#"{{"type":"message","id":"b1b2c3d4","parentId":"a1b2c3d4","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"\"usage\":{{\"input\":99}}"}}],"api":"a","provider":"p","model":"m",{usage},"stopReason":"stop","timestamp":1767225602000}}}}"#),
            // Keys in other orders, usage missing, odd numbers.
            format!(r#"{{"id":"c","type":"message","parentId":null,"timestamp":"2026-01-01T00:00:03.000Z","message":{{"content":[],"role":"assistant",{usage},"timestamp":1767225603000}}}}"#),
            r#"{"type":"message","id":"d","parentId":null,"timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[],"stopReason":"stop","timestamp":1767225604000}}"#.into(),
            r#"{"type":"message","id":"e","parentId":null,"timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"assistant","content":[],"usage":{"totalTokens":7,"input":3,"cost":{"total":1e-3}},"timestamp":17672256050}}"#.into(),
            r#"{"type":"message","id":"f","parentId":null,"timestamp":"2026-01-01T00:00:06.000Z","message":{"role":"assistant","content":[],"usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":12345678901234567}},"timestamp":1767225606000.25}}"#.into(),
            r#"{"type":"message","id":"g","parentId":null,"timestamp":"2026-01-01T00:00:07.000Z","message":{"role":"assistant","content":[],"usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.5}},"timestamp":1.7672256075e12}}"#.into(),
            // An id with a brace and escapes before the message.
            r#"{"type":"message","id":"{\"x\\","parentId":null,"timestamp":"2026-01-01T00:00:08.000Z","message":{"role":"toolResult","toolCallId":"t","toolName":"read","content":[],"isError":false,"timestamp":1767225608000}}"#.into(),
            // A line longer than the read window.
            format!(r#"{{"type":"message","id":"h","parentId":null,"timestamp":"2026-01-01T00:00:09.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"{big}"}}],{usage},"stopReason":"stop","timestamp":1767225609000}}}}"#),
            r#"{"type":"usage","id":"u","parentId":null,"timestamp":"2026-01-01T00:00:10.000Z","kind":"cache_warm","usage":{"input":0,"output":0,"cacheRead":5,"cacheWrite":0,"totalTokens":5,"cost":{"input":0,"output":0,"cacheRead":0.1,"cacheWrite":0,"total":0.1}}}"#.into(),
            r#"{"type":"session_info","id":"i","parentId":null,"timestamp":"2026-01-01T00:00:11.000Z","name":"n"}"#.into(),
        ];
        for crlf in [false, true] {
            for torn in [false, true] {
                let end = if crlf { "\r\n" } else { "\n" };
                let mut text = lines.join(end);
                text.push_str(end);
                if torn {
                    // A last line cut short by a crash.
                    text.push_str(&lines[2][..150]);
                }
                let fast = summarize(text.as_bytes()).unwrap();
                let slow = summarize_slowly(&text);
                assert_eq!(fast, slow, "crlf {crlf}, torn {torn}");
                assert_eq!(fast.message_count, 9);
                assert_eq!(fast.tokens, 70);
                assert_eq!(fast.first_message, "hi {\"message\":{\"role\":\"x");
            }
        }
    }

    #[test]
    fn the_user_text_read_in_place_is_the_parsed_one() {
        let head = r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":"#;
        let messages = [
            // Usual shapes: read in place.
            r#"{"role":"user","content":"plain","timestamp":1}"#,
            r#"{"role":"user","content":"esc \"q\" \\ \u00e9 \ud83d\ude00 \n","timestamp":1}"#,
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","data":"x","mimeType":"image/png"},{"type":"text","text":"b","textSignature":{"k":[1,2]}}],"timestamp":1.5}"#,
            r#"{"content":[],"role":"user"}"#,
            r#"{"role":"user","content":[{"text":"t","type":"text"},{"type":"text"},{"type":"text","text":7},{"type":"thinking","text":"no"},{"type":7,"text":"no"},{"text":"no"}]}"#,
            r#"{"role":"user","content":"","timestamp":1,"extra":{"nested":[{"a":null,"b":true}]}}"#,
            r#"{"r\u006fle":"user","c\u006fntent":[{"typ\u0065":"t\u0065xt","t\u0065xt":"k"}]}"#,
            // Unusual ones: the full parse decides.
            r#"{"role":"user","content":"a","content":"b"}"#,
            r#"{"role":"user","role":"user","content":"a"}"#,
            r#"{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}"#,
            r#"{"role":"user","content":[{"type":"text","type":"image","text":"a"}]}"#,
            r#"{"role":"user","content":["a"]}"#,
            r#"{"role":"user","content":{"type":"text","text":"a"}}"#,
            r#"{"role":"user","content":7}"#,
            r#"{"role":"user","content":null}"#,
            r#"{"role":"user"}"#,
            r#"{"role":"user","content":"a","timestamp":"1"}"#,
            r#"{"role":"user","content":"a","timestamp":null}"#,
            r#"{"role":"user","content":"a","timestamp":1,"timestamp":2}"#,
            r#"{"role":"user","content":"a","x":1e400}"#,
            r#"{"role":"user","content":"a","x":"\ud800"}"#,
            r#"{"role":"assistant","content":"a"}"#,
            r#"{"content":"a"}"#,
            r#""text""#,
            r#"[]"#,
        ];
        let mut fast = 0;
        for m in messages {
            let mut lines = vec![format!("{head}{m}}}")];
            // Another key order, a repeated message, trailing bytes, a torn line.
            lines.push(format!(r#"{{"message":{m},"type":"message"}}"#));
            lines.push(format!(r#"{{"message":{m},"message":{m}}}"#));
            lines.push(format!("{head}{m}}} x"));
            lines.push(format!("{head}{m}"));
            for line in &lines {
                let slow = full_message(line.as_bytes()).map(|m| listing_text(&m));
                if let Some(t) = user_text(line.as_bytes(), " ") {
                    assert_eq!(Some(t), slow, "{line}");
                    fast += 1;
                }
            }
        }
        assert_eq!(fast, 14, "the usual shapes, in both key orders");
        let bad = b"{\"message\":{\"role\":\"user\",\"content\":\"\xff\"}}";
        assert_eq!(user_text(bad, " "), None);
    }

    #[test]
    fn summarises_counts_names_usage() {
        let text = concat!(
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
            "\n",
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hi \"there\" \"usage\":{"}],"timestamp":1}}"#,
            "\n",
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"x"}],"api":"a","provider":"p","model":"m","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}},"stopReason":"stop","timestamp":2}}"#,
            "\n",
            r#"{"type":"session_info","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","name":"  named  "}"#,
            "\n",
            r#"{"id":"d","type":"message","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":"second","timestamp":3}}"#,
            "\n",
            r#"{"id":"u","type":"usage","parentId":"d","timestamp":"2026-01-01T00:00:04.500Z","kind":"cache_warm","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":5,"cacheWrite":0,"totalTokens":5,"cost":{"input":0,"output":0,"cacheRead":0.1,"cacheWrite":0,"total":0.1}}}"#,
            "\n",
            r#"{"type":"message","id":"e","parentId":"d","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"toolRes"#,
        );
        let s = summarize(text.as_bytes()).unwrap();
        assert_eq!(s.id, "s1");
        assert_eq!(s.message_count, 3);
        assert_eq!(s.first_message, "hi \"there\" \"usage\":{");
        assert_eq!(s.modified_ms, 3);
        assert_eq!(s.name.as_deref(), Some("named"));
        assert_eq!(
            s.tokens, 20,
            "assistant usage + a usage entry in another key order"
        );
        assert!((s.cost - 0.4).abs() < 1e-12);
        let bad: Vec<usize> = s.problems.iter().map(|d| d.line).collect();
        assert_eq!(bad, vec![7]);
    }
}
