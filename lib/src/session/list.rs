//! Fast listing of many session files (`pi-session ls`).
//!
//! Listing must keep up with 10,000 sessions / several GB, so it does not
//! build full entries. Each file is streamed once through a small reused
//! buffer that stays in the CPU cache, lines are found with `memchr`, and
//! only the few lines that matter are parsed: the
//! header, `session_info` names, the first user message, and the `usage`
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
            path: self.path.display().to_string(),
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

/// Scans one file, reusing `buf` as its read buffer: the file is streamed
/// through a [`CHUNK`]-sized window, a line cut by the window's end is moved
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
    let bytes = stream_lines(&mut f, buf, CHUNK, |no, line| z.line(no, line))
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
                            match full_message(line) {
                                Some(m) => {
                                    let t = listing_text(&m);
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

const ROLE_KEY: &[u8] = b"\"message\":{\"role\":\"";
const ENTRY_TIMESTAMP_KEY: &[u8] = b"\"timestamp\":\"";

/// How far into a line [`quick_role`] looks for the role key.
const ROLE_WINDOW: usize = 512;

/// The role of a `message` entry written in pi's key order: after the
/// first `"message":{"role":"` within the line's first [`ROLE_WINDOW`]
/// bytes.
fn quick_role(line: &[u8]) -> Option<&[u8]> {
    let rest = match role_in_layout(line) {
        Some(rest) => rest,
        None => {
            let window = &line[..line.len().min(ROLE_WINDOW)];
            let pos = finders().role.find(window)?;
            &line[pos + ROLE_KEY.len()..]
        }
    };
    role_text(rest)
}

/// The bytes after the role key of a line laid out exactly as pi writes a
/// message entry: `{"type":"message","id":"…","parentId":"…"|null,
/// "timestamp":"…","message":{"role":"`, each string without a quote or
/// backslash. Nothing before the key can then start a match of it (every
/// quote there is followed by a key, a `,` or a value that is not
/// `message":{`), so this is the first match, as the search finds it,
/// read at known places instead of searched for. `None` for any other
/// layout (the caller searches).
fn role_in_layout(line: &[u8]) -> Option<&[u8]> {
    let rest = after(line, b"{\"type\":\"message\",\"id\":\"")?;
    // pi's entry ids are 8 hex digits, its timestamps 24 characters.
    let rest = after(plain_string::<8>(rest)?, b",\"parentId\":")?;
    let rest = match after(rest, b"null") {
        Some(r) => r,
        None => plain_string::<8>(after(rest, b"\"")?)?,
    };
    let rest = plain_string::<24>(after(rest, b",\"timestamp\":\"")?)?;
    let rest = after(rest, b",\"message\":{\"role\":\"")?;
    (line.len() - rest.len() <= ROLE_WINDOW).then_some(rest)
}

/// The bytes after the closing quote of a JSON string whose opening quote
/// is just before `b`, when the string holds no quote or backslash; `N`
/// is its usual length, checked first without a loop that can exit early.
#[inline(always)]
fn plain_string<const N: usize>(b: &[u8]) -> Option<&[u8]> {
    if let Some((body, rest)) = b.split_first_chunk::<N>() {
        let special = body
            .iter()
            .fold(false, |acc, &c| acc | (c == b'"') | (c == b'\\'));
        if !special && rest.first() == Some(&b'"') {
            return Some(&rest[1..]);
        }
    }
    let end = b.iter().position(|&c| c == b'"' || c == b'\\')?;
    (b[end] == b'"').then(|| &b[end + 1..])
}

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
        let big = "y".repeat(3 * CHUNK);
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
        assert_eq!(buf.len(), CHUNK, "the read buffer stays one window");
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
        assert!(role_in_layout(lines[0].as_bytes()).is_some());
        assert!(role_in_layout(lines[1].as_bytes()).is_some());
        assert!(role_in_layout(lines[4].as_bytes()).is_none());
        assert!(role_in_layout(lines[5].as_bytes()).is_none());
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
