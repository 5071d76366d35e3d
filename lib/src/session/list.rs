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

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use memchr::memmem;
use serde_json::Value;

use crate::format::entry::header_version;
use crate::format::{AgentMessage, Usage};
use crate::timefmt::parse_iso_ms;

use super::diagnostics::{Diagnostic, Diagnostics};
use super::file::open_regular;
pub use super::file::Skipped;
use super::load::parse_json;

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

/// Bytes read from a session file at a time. Small enough to stay in the
/// CPU cache between the kernel's copy and the scan (reading a whole
/// 100 KB file into one buffer made the copy itself three times slower),
/// large enough that a typical line is found whole.
const CHUNK: usize = 64 * 1024;

/// Scans one file, reusing `buf` as its read buffer: the file is streamed
/// through a [`CHUNK`]-sized window, a line cut by the window's end is moved
/// to the front before the next read, and only a line longer than the
/// window is gathered in a separate growing buffer.
pub fn scan_file(path: &Path, buf: &mut Vec<u8>) -> Result<SessionSummary, Skipped> {
    let skip = |reason: String| Skipped {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = open_regular(path, false).map_err(|e| skip(e.to_string()))?;
    let meta = f.metadata().map_err(|e| skip(e.to_string()))?;
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

/// Reads `r` to its end through `buf` (made `window` bytes long) and hands
/// every line to `each` (1-based number, bytes without `\n` or a trailing
/// `\r`), as [`LineIter`] splits a whole buffer: a last line without `\n`
/// counts, an empty tail does not. Stops early at the first `Err` of
/// `each`. Gives the number of bytes read, or the callback's error; an I/O
/// error is the outer `Err`.
fn stream_lines<R: Read>(
    r: &mut R,
    buf: &mut Vec<u8>,
    window: usize,
    mut each: impl FnMut(usize, &[u8]) -> Result<(), String>,
) -> std::io::Result<Result<u64, String>> {
    let mut no = 0;
    stream_raw_lines(r, buf, window, |_, line, _| {
        no += 1;
        each(no, strip_cr(line))
    })
}

/// [`stream_lines`] for callers that need where each line is: `each` gets
/// the line's byte offset in the stream, its bytes without the `\n` (a
/// `\r` kept) and whether a `\n` ended it (only a last line lacks one).
pub(crate) fn stream_raw_lines<R: Read>(
    r: &mut R,
    buf: &mut Vec<u8>,
    window: usize,
    mut each: impl FnMut(u64, &[u8], bool) -> Result<(), String>,
) -> std::io::Result<Result<u64, String>> {
    if buf.len() != window.max(1) {
        buf.clear();
        buf.resize(window.max(1), 0);
    }
    let mut long: Vec<u8> = Vec::new();
    // `base`: the stream offset of `buf[0]`; `long_at`: of `long`'s start.
    let (mut base, mut long_at) = (0u64, 0u64);
    let (mut start, mut end, mut total) = (0usize, 0usize, 0u64);
    loop {
        if start > 0 {
            buf.copy_within(start..end, 0);
            end -= start;
            base += start as u64;
            start = 0;
        }
        if end == buf.len() {
            // No line end in a full window: this line continues past it.
            if long.is_empty() {
                long_at = base;
            }
            long.extend_from_slice(&buf[..end]);
            base += end as u64;
            end = 0;
        }
        let n = match r.read(&mut buf[end..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        let mut from = end;
        end += n;
        while let Some(i) = memchr::memchr(b'\n', &buf[from..end]) {
            let nl = from + i;
            let res = if long.is_empty() {
                each(base + start as u64, &buf[start..nl], true)
            } else {
                long.extend_from_slice(&buf[start..nl]);
                let res = each(long_at, &long, true);
                long.clear();
                res
            };
            if let Err(e) = res {
                return Ok(Err(e));
            }
            start = nl + 1;
            from = start;
        }
    }
    if !long.is_empty() || start < end {
        if long.is_empty() {
            long_at = base + start as u64;
        }
        long.extend_from_slice(&buf[start..end]);
        if let Err(e) = each(long_at, &long, false) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(total))
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

const USAGE_KEY: &[u8] = b"\"usage\":{";

/// Summarises the bytes of one session file.
pub fn summarize(bytes: &[u8]) -> Result<SessionSummary, String> {
    let mut z = Summarizer::new();
    let lines = LineIter {
        bytes,
        pos: 0,
        no: 0,
    };
    for (no, line) in lines {
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

const TIMESTAMP_KEY: &[u8] = b"\"timestamp\":";

/// A message's activity time: its own epoch-ms `timestamp` (the last
/// `"timestamp":` key of the line), else the entry's ISO timestamp.
fn activity_time(line: &[u8], finder: &memmem::FinderRev<'_>) -> Option<i64> {
    // pi ends a message line with its own `"timestamp":<ms>}}`: read it
    // straight from the end.
    if let Some(body) = line.strip_suffix(b"}}") {
        let digits = body.iter().rev().take_while(|c| c.is_ascii_digit()).count();
        let (head, num) = body.split_at(body.len() - digits);
        if (1..=15).contains(&digits) && head.ends_with(TIMESTAMP_KEY) {
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
    let total = u.total_tokens.as_u64();
    s.tokens += if total > 0 {
        total
    } else {
        u.input.as_u64() + u.output.as_u64() + u.cache_read.as_u64() + u.cache_write.as_u64()
    };
    s.cost += u.cost.total.as_f64();
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

/// Finds the last structural `"usage":{` of the line and adds that object:
/// read directly when it has pi's shape (numbers, and `cost` holding
/// numbers), else through serde.
fn add_usage(s: &mut SessionSummary, line: &[u8], finder: &memmem::FinderRev<'_>) -> bool {
    let Some(pos) = rfind_usage(line, finder) else {
        return false;
    };
    let start = pos + USAGE_KEY.len() - 1;
    if let Some((tokens, cost)) = exact_usage(&line[start..]).or_else(|| fast_usage(&line[start..]))
    {
        s.tokens += tokens;
        s.cost += cost;
        return true;
    }
    let mut it = serde_json::Deserializer::from_slice(&line[start..]).into_iter::<Usage>();
    match it.next() {
        Some(Ok(u)) => {
            add(s, &u);
            true
        }
        _ => false,
    }
}

/// The last `"usage":{` of a line. The key holds one `g`, and nothing pi
/// writes after an assistant message's usage (`stopReason`, `timestamp`,
/// the cost keys) has one, so jumping between `g`s from the end (`memrchr`,
/// vectorised) finds it in a few steps; a reverse substring search walks
/// every byte. Same result as `finder.rfind`, which lines without a `g`
/// fall back to.
fn rfind_usage(line: &[u8], finder: &memmem::FinderRev<'_>) -> Option<usize> {
    const G: usize = 4; // USAGE_KEY[4] == b'g'
    let mut end = line.len();
    for _ in 0..8 {
        let g = memchr::memrchr(b'g', &line[..end])?;
        if g >= G && line[g - G..].starts_with(USAGE_KEY) {
            return Some(g - G);
        }
        end = g;
    }
    // Many `g`s (an error message after the usage): the plain search, over
    // the part not yet ruled out (an occurrence may straddle `end`).
    finder.rfind(&line[..(end + USAGE_KEY.len()).min(line.len())])
}

/// [`fast_usage`] for the one layout pi writes, key for key:
/// `{"input":I,"output":I,"cacheRead":I,"cacheWrite":I,"totalTokens":I,
/// "cost":{"input":F,"output":F,"cacheRead":F,"cacheWrite":F,"total":F}}`
/// with plain integers and exponent-free decimals; one pass, no lookups.
/// `None` for anything else.
fn exact_usage(obj: &[u8]) -> Option<(u64, f64)> {
    const INT_KEYS: [&[u8]; 5] = [
        b"{\"input\":",
        b",\"output\":",
        b",\"cacheRead\":",
        b",\"cacheWrite\":",
        b",\"totalTokens\":",
    ];
    const COST_KEYS: [&[u8]; 4] = [
        b",\"cost\":{\"input\":",
        b",\"output\":",
        b",\"cacheRead\":",
        b",\"cacheWrite\":",
    ];
    let mut p = obj;
    let mut ints = [0u64; 5];
    for (key, slot) in INT_KEYS.iter().zip(&mut ints) {
        p = p.strip_prefix(*key)?;
        let (v, n) = plain_int(p)?;
        *slot = v;
        p = &p[n..];
    }
    for key in COST_KEYS {
        p = p.strip_prefix(key)?;
        p = &p[plain_decimal(p)?..];
    }
    p = p.strip_prefix(b",\"total\":")?;
    let n = plain_decimal(p)?;
    if p.get(n..n + 2) != Some(b"}}") {
        return None;
    }
    let total_cost: f64 = std::str::from_utf8(&p[..n]).ok()?.parse().ok()?;
    let [input, output, cache_read, cache_write, total] = ints;
    let tokens = if total > 0 {
        total
    } else {
        input + output + cache_read + cache_write
    };
    Some((tokens, total_cost))
}

/// A JSON integer without sign (`0` or no leading zero, at most 19 digits,
/// not followed by a fraction or exponent): its value and length.
fn plain_int(b: &[u8]) -> Option<(u64, usize)> {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 19 || (n > 1 && b[0] == b'0') {
        return None;
    }
    if matches!(b.get(n), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    Some((
        b[..n].iter().fold(0, |v, d| v * 10 + u64::from(d - b'0')),
        n,
    ))
}

/// The length of a JSON number without exponent (`-`, `0` or no leading
/// zero, an optional fraction with digits): always finite.
fn plain_decimal(b: &[u8]) -> Option<usize> {
    let neg = usize::from(b.first() == Some(&b'-'));
    let int = b[neg..].iter().take_while(|c| c.is_ascii_digit()).count();
    if int == 0 || int > 300 || (int > 1 && b[neg] == b'0') {
        return None;
    }
    let mut n = neg + int;
    if b.get(n) == Some(&b'.') {
        let frac = b[n + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if frac == 0 {
            return None;
        }
        n += 1 + frac;
    }
    if matches!(b.get(n), Some(b'e' | b'E')) {
        return None;
    }
    Some(n)
}

/// Tokens and cost of a usage object written as pi writes it:
/// `{"input":N,…,"totalTokens":N,"cost":{…,"total":F}}` with number values
/// only (any key order, unknown number keys ignored). `None` for anything
/// else (strings, nesting, duplicates, bad numbers): the caller falls back
/// to serde, so this is only ever a faster route to the same totals as
/// [`Usage`] gives.
fn fast_usage(obj: &[u8]) -> Option<(u64, f64)> {
    const TOKEN_KEYS: [&[u8]; 5] = [
        b"input",
        b"output",
        b"cacheRead",
        b"cacheWrite",
        b"totalTokens",
    ];
    let mut tokens: [Option<u64>; 5] = [None; 5];
    let mut cost_total: Option<f64> = None;
    let mut seen_cost = false;
    let mut p = Cursor { b: obj, i: 0 };
    p.eat(b'{')?;
    if p.peek()? == b'}' {
        return Some((0, 0.0));
    }
    loop {
        let key = p.key()?;
        if key == b"cost" {
            if std::mem::replace(&mut seen_cost, true) {
                return None;
            }
            p.eat(b'{')?;
            if p.peek()? != b'}' {
                loop {
                    let k = p.key()?;
                    let n = p.number()?;
                    if k == b"total" {
                        if cost_total.is_some() {
                            return None;
                        }
                        cost_total = Some(n.as_f64());
                    }
                    if !p.next_or_end()? {
                        break;
                    }
                }
            } else {
                p.i += 1;
            }
        } else {
            let n = p.number()?;
            if let Some(k) = TOKEN_KEYS.iter().position(|t| *t == key) {
                if tokens[k].replace(n.as_u64()).is_some() {
                    return None;
                }
            }
        }
        if !p.next_or_end()? {
            break;
        }
    }
    let [input, output, cache_read, cache_write, total] = tokens.map(|t| t.unwrap_or(0));
    let tokens = if total > 0 {
        total
    } else {
        input + output + cache_read + cache_write
    };
    Some((tokens, cost_total.unwrap_or(0.0)))
}

/// A JSON number token (checked against JSON's grammar, finite), converted
/// as [`crate::format::Num`] does.
struct NumTok<'a>(&'a [u8]);

impl NumTok<'_> {
    fn is_integer(&self) -> bool {
        self.0.iter().all(u8::is_ascii_digit)
    }

    fn as_f64(&self) -> f64 {
        std::str::from_utf8(self.0)
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0.0)
    }

    fn as_u64(&self) -> u64 {
        if self.is_integer() && self.0.len() <= 19 {
            return self
                .0
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        }
        let f = self.as_f64();
        if f.is_finite() && f > 0.0 {
            f as u64
        } else {
            0
        }
    }
}

/// A tiny reader for [`fast_usage`]: no whitespace (pi writes none; any
/// makes it give up), keys without escapes, plain numbers.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// `"key":` → `key`.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.b[self.i..];
        // Keys are a few letters: a plain loop beats a vectorised search.
        let end = rest.iter().position(|&c| c == b'"' || c == b'\\')?;
        if rest[end] != b'"' {
            return None;
        }
        self.i += end + 1;
        self.eat(b':')?;
        Some(&rest[..end])
    }

    /// A number that JSON allows (and serde reads: finite), as its text.
    fn number(&mut self) -> Option<NumTok<'a>> {
        let rest = &self.b[self.i..];
        let end = rest
            .iter()
            .position(|c| !(c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E')))?;
        let text = &rest[..end];
        self.i += end;
        let tok = NumTok(text);
        let digits = text.strip_prefix(b"-").unwrap_or(text);
        let int_len = digits
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        let (int, tail) = digits.split_at(int_len);
        if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
            return None;
        }
        if tail.is_empty() && int.len() <= 19 {
            return Some(tok);
        }
        // Fractions and exponents: JSON's grammar (Rust's parser is laxer:
        // "1.", "1e"), and a finite value (serde refuses "1e400").
        let mut t = tail;
        if let Some(frac) = t.strip_prefix(b".") {
            let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            t = &frac[n..];
        }
        let mut huge = int.len() > 300;
        if let Some(exp) = t.strip_prefix(b"e").or_else(|| t.strip_prefix(b"E")) {
            let exp = exp
                .strip_prefix(b"+")
                .or_else(|| exp.strip_prefix(b"-"))
                .unwrap_or(exp);
            if exp.is_empty() || !exp.iter().all(u8::is_ascii_digit) {
                return None;
            }
            t = &[];
            huge = true;
        }
        if !t.is_empty() || (huge && !tok.as_f64().is_finite()) {
            return None;
        }
        Some(tok)
    }

    /// After a value: `,` → true (more), `}` → false (end of object).
    fn next_or_end(&mut self) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.i += 1;
                Some(true)
            }
            b'}' => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
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
    let rest = line.strip_prefix(b"{\"type\":\"")?;
    let end = memchr::memchr(b'"', rest)?;
    Some(&rest[..end])
}

const ROLE_KEY: &[u8] = b"\"message\":{\"role\":\"";
const ENTRY_TIMESTAMP_KEY: &[u8] = b"\"timestamp\":\"";

/// The role of a `message` entry written in pi's key order.
fn quick_role(line: &[u8]) -> Option<&[u8]> {
    let window = &line[..line.len().min(512)];
    let pos = finders().role.find(window)?;
    let rest = &line[pos + ROLE_KEY.len()..];
    let end = memchr::memchr(b'"', rest)?;
    Some(&rest[..end])
}

/// The entry timestamp (`"timestamp":"…"` before the message) in epoch ms.
fn message_timestamp(line: &[u8]) -> Option<i64> {
    let window = &line[..line.len().min(256)];
    let pos = finders().entry_timestamp.find(window)?;
    let rest = &window[pos + ENTRY_TIMESTAMP_KEY.len()..];
    let end = memchr::memchr(b'"', rest)?;
    parse_iso_ms(std::str::from_utf8(&rest[..end]).ok()?)
}

struct LineIter<'a> {
    bytes: &'a [u8],
    pos: usize,
    no: usize,
}

impl<'a> Iterator for LineIter<'a> {
    type Item = (usize, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let mut line = &rest[..end];
        if line.ends_with(b"\r") {
            line = &line[..line.len() - 1];
        }
        self.pos += end + 1;
        self.no += 1;
        Some((self.no, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_found_as_a_reverse_search_finds_it() {
        let finder = memmem::FinderRev::new(USAGE_KEY);
        let mut cases: Vec<String> = vec![
            r#"{"usage":{"input":1},"stopReason":"stop","timestamp":1}}"#.into(),
            r#"no key at all, no letter"#.into(),
            r#"{"a":"usage","usage":{}}"#.into(),
            r#""usage":{"#.into(),
            r#"sage":{"#.into(),
        ];
        let gs = "g".repeat(20);
        cases.push(format!(
            r#"{{"usage":{{"input":1}},"errorMessage":"{gs}"}}"#
        ));
        cases.push(format!(
            r#"{{"usage":{{"x":1}},"e":"a{gs}b","usage":{{"y":2}},"f":"{gs}"}}"#
        ));
        for c in &cases {
            assert_eq!(
                rfind_usage(c.as_bytes(), &finder),
                finder.rfind(c.as_bytes()),
                "{c}"
            );
        }
    }

    #[test]
    fn the_fast_usage_reader_agrees_with_serde_or_steps_aside() {
        let cases = [
            r#"{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}}"#,
            r#"{"input":10,"output":5,"cacheRead":3,"cacheWrite":2,"totalTokens":0,"cost":{"total":1e-7}}"#,
            r#"{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":-0.5,"cacheRead":0.0,"cacheWrite":0,"total":0.021888499999999998}}"#,
            r#"{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1e-7}}"#,
            r#"{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3.5,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1}}"#,
            r#"{"input":01,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1}}"#,
            r#"{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":1.}}"#,
            r#"{"totalTokens":12.9,"reasoning":4,"cost":{"total":-1}}"#,
            r#"{"input":-5,"output":18446744073709551615,"cost":{}}"#,
            r#"{}"#,
            r#"{"cost":{"total":2},"input":1,"output":1}"#,
            r#"{"input":1e400}"#,
            r#"{"input":01}"#,
            r#"{"input":1.}"#,
            r#"{"input":"7"}"#,
            r#"{"input":1,"input":2}"#,
            r#"{"input": 1}"#,
            r#"{"cost":{"total":1,"total":2}}"#,
            r#"{"input":1,"extra":{"a":1}}"#,
            r#"{"in"put":1}"#,
            r#"{"input":1"#,
        ];
        for c in cases {
            let serde = serde_json::Deserializer::from_slice(c.as_bytes())
                .into_iter::<Usage>()
                .next()
                .and_then(Result::ok)
                .map(|u| {
                    let mut s = SessionSummary::default();
                    add(&mut s, &u);
                    (s.tokens, s.cost)
                });
            // `None`: serde decides.
            if let Some(fast) = fast_usage(c.as_bytes()) {
                assert_eq!(Some(fast), serde, "{c}");
            }
            if let Some(exact) = exact_usage(c.as_bytes()) {
                assert_eq!(Some(exact), serde, "{c}");
            }
        }
        assert_eq!(fast_usage(cases[0].as_bytes()), Some((15, 0.3)));
        assert_eq!(exact_usage(cases[0].as_bytes()), Some((15, 0.3)));
        assert_eq!(exact_usage(cases[1].as_bytes()), None, "not pi's layout");
        assert_eq!(fast_usage(cases[1].as_bytes()), Some((20, 1e-7)));
        assert_eq!(fast_usage(cases[11].as_bytes()), None);
        assert_eq!(
            exact_usage(cases[2].as_bytes()),
            Some((0, 0.021888499999999998))
        );
    }

    /// Hands out at most `step` bytes per read, and an `Interrupted` error
    /// before every third read.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        calls: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(3) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let n = self.data.len().min(self.step).min(out.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn streamed(data: &[u8], window: usize, step: usize) -> (Vec<(usize, Vec<u8>)>, u64) {
        let mut r = Trickle {
            data,
            step,
            calls: 0,
        };
        let mut lines = Vec::new();
        let mut buf = Vec::new();
        let total = stream_lines(&mut r, &mut buf, window, |no, l| {
            lines.push((no, l.to_vec()));
            Ok(())
        })
        .unwrap()
        .unwrap();
        (lines, total)
    }

    #[test]
    fn streamed_lines_are_the_lines_of_the_whole_buffer() {
        let long = "x".repeat(70_000);
        let inputs: Vec<String> = vec![
            String::new(),
            "\n".into(),
            "a".into(),
            "a\n".into(),
            "a\r\n\r\nbb\r".into(),
            "\n\n\nabc\ndef".into(),
            "one\r\ntwo\nthree\r\n".into(),
            format!("{long}\nshort\n{long}"),
            format!("h\n{long}\r\n\n{long}{long}\n"),
        ];
        for input in &inputs {
            let whole: Vec<(usize, Vec<u8>)> = LineIter {
                bytes: input.as_bytes(),
                pos: 0,
                no: 0,
            }
            .map(|(n, l)| (n, l.to_vec()))
            .collect();
            for (window, step) in [
                (1, 1),
                (2, 1),
                (3, 2),
                (4, 7),
                (16, 5),
                (CHUNK, 1000),
                (CHUNK, usize::MAX),
            ] {
                let (lines, total) = streamed(input.as_bytes(), window, step);
                assert_eq!(total, input.len() as u64);
                // The raw lines sit at their offsets, `\n` after all but the last.
                let mut r = Trickle {
                    data: input.as_bytes(),
                    step,
                    calls: 0,
                };
                let (mut raw, mut buf) = (Vec::new(), Vec::new());
                stream_raw_lines(&mut r, &mut buf, window, |at, l, nl| {
                    raw.push((at as usize, l.to_vec(), nl));
                    Ok(())
                })
                .unwrap()
                .unwrap();
                assert_eq!(raw.len(), whole.len(), "window {window}, step {step}");
                for (at, l, nl) in &raw {
                    assert_eq!(&input.as_bytes()[*at..at + l.len()], &l[..]);
                    assert_eq!(input.as_bytes().get(at + l.len()) == Some(&b'\n'), *nl);
                }
                assert!(
                    lines == whole,
                    "window {window}, step {step}, input of {} bytes",
                    input.len()
                );
            }
        }
    }

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
