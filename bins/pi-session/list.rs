//! `ls` and `search`: commands over many sessions.

use std::path::PathBuf;

use pi_lib::cli::{resolve_format, warn, CliError, OutputFormat, EXIT_FAILED, EXIT_OK};
use pi_lib::format::records::{MatchRecord, SessionRecord};
use pi_lib::format::{AgentMessage, ContentBlock, Entry};
use pi_lib::paths::{encode_cwd, sessions_root};
use pi_lib::session::file::open_regular;
use pi_lib::session::list::{scan_all, SessionSummary};
use pi_lib::session::resolve::{session_files_flat, session_files_in};
use pi_lib::session::Session;
use pi_lib::timefmt::{iso_from_ms, parse_iso_ms, short_from_ms};
use std::io::Read;

use crate::cli::SortBy;
use crate::out::{cell, clip, term_width, unique_prefix_len, Out};
use crate::{Ctx, PROG};

/// The session files `ls` / `search` look at, and a description of where.
fn gather(ctx: &Ctx, all: bool, cwd: Option<PathBuf>) -> Result<(Vec<PathBuf>, String), CliError> {
    let (dir, recurse, what) = if all {
        let root = ctx.session_dir.clone().unwrap_or_else(sessions_root);
        let what = root.display().to_string();
        (root, true, what)
    } else {
        let cwd = match cwd {
            Some(c) => c
                .canonicalize()
                .map_err(|e| CliError::input(format!("{}: {e}", c.display())))?,
            None => std::env::current_dir()
                .map_err(|e| CliError::input(format!("current directory: {e}")))?,
        };
        let cwd_s = cwd.to_string_lossy().into_owned();
        match &ctx.session_dir {
            Some(d) => (d.clone(), false, d.display().to_string()),
            None => {
                let d = sessions_root().join(encode_cwd(&cwd_s));
                let what = format!("{} (sessions of {cwd_s})", d.display());
                (d, false, what)
            }
        }
    };
    let explicit_dir = ctx.session_dir.is_some();
    if !dir.exists() {
        if explicit_dir {
            return Err(CliError::input(format!(
                "{}: no such directory",
                dir.display()
            )));
        }
        return Ok((Vec::new(), what));
    }
    if !dir.is_dir() {
        return Err(CliError::input(format!(
            "{}: not a directory",
            dir.display()
        )));
    }
    let found = if recurse {
        // Like pi's listAll(): the per-cwd folders only, unless the user
        // pointed --session-dir at a folder that may be flat.
        session_files_in(&dir, explicit_dir)
    } else {
        session_files_flat(&dir)
    }
    .map_err(|e| CliError::input(format!("{}: {e}", dir.display())))?;
    for skip in &found.skipped {
        warn(PROG, &skip.to_string());
    }
    let files = found.files;
    Ok((files, what))
}

fn record(s: &SessionSummary) -> SessionRecord {
    SessionRecord {
        kind: "session",
        id: s.id.clone(),
        path: s.path.display().to_string(),
        cwd: s.cwd.clone(),
        name: s.name.clone(),
        parent_session: s.parent_session.clone(),
        subagent_of: s.subagent_of.clone(),
        created: s.created.clone(),
        modified: iso_from_ms(s.modified_ms),
        message_count: s.message_count,
        first_message: s.first_message.clone(),
        tokens: s.tokens,
        cost: s.cost,
        bytes: s.bytes,
    }
}

pub fn ls(
    ctx: &Ctx,
    all: bool,
    cwd: Option<PathBuf>,
    sort: SortBy,
    limit: Option<usize>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let (files, what) = gather(ctx, all, cwd)?;
    let mut sessions = Vec::with_capacity(files.len());
    for r in scan_all(&files) {
        match r {
            Ok(s) => {
                s.problems.warn(PROG);
                sessions.push(s);
            }
            Err(skip) => warn(PROG, &skip.to_string()),
        }
    }
    if sessions.is_empty() {
        pi_lib::cli::note(PROG, &format!("no sessions in {what}"));
        return Ok(EXIT_FAILED);
    }
    match sort {
        SortBy::Modified => {
            sessions.sort_by(|a, b| b.modified_ms.cmp(&a.modified_ms).then(a.path.cmp(&b.path)))
        }
        SortBy::Created => sessions.sort_by(|a, b| {
            let ca = parse_iso_ms(&a.created).unwrap_or(0);
            let cb = parse_iso_ms(&b.created).unwrap_or(0);
            cb.cmp(&ca).then(a.path.cmp(&b.path))
        }),
    }
    if let Some(n) = limit {
        sessions.truncate(n);
    }
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => {
            for s in &sessions {
                out.record(&record(s))?;
            }
        }
        OutputFormat::Text => {
            let width = term_width();
            let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
            let id_w = unique_prefix_len(&ids, 8).min(36);
            let fixed = id_w + 1 + 16 + 1 + 16 + 1 + 5 + 1 + 8 + 1 + 7 + 1;
            let cwd_w = if all { 28 } else { 0 };
            let name_w = 18;
            let first_w = width.saturating_sub(fixed + cwd_w + name_w + 2).max(12);
            let mut head = format!(
                "{} {} {} {:>5} {:>8} {:>7} {} ",
                cell("ID", id_w),
                cell("CREATED", 16),
                cell("MODIFIED", 16),
                "MSGS",
                "TOKENS",
                "COST",
                cell("NAME", name_w)
            );
            if all {
                head.push_str(&cell("CWD", cwd_w));
                head.push(' ');
            }
            head.push_str("FIRST MESSAGE");
            out.line(head.trim_end())?;
            for s in &sessions {
                let created = parse_iso_ms(&s.created)
                    .map(short_from_ms)
                    .unwrap_or_default();
                let mut row = format!(
                    "{} {} {} {:>5} {:>8} {:>7} {} ",
                    cell(&s.id.chars().take(id_w).collect::<String>(), id_w),
                    cell(&created, 16),
                    cell(&short_from_ms(s.modified_ms), 16),
                    s.message_count,
                    human_tokens(s.tokens),
                    format!("${:.2}", s.cost),
                    cell(s.name.as_deref().unwrap_or("-"), name_w)
                );
                if all {
                    row.push_str(&cell(&clip_left(&s.cwd, cwd_w), cwd_w));
                    row.push(' ');
                }
                // A subagent child is marked with its parent's id.
                let first = match &s.subagent_of {
                    Some(p) => format!(
                        "[subagent of {}] {}",
                        p.chars().take(8).collect::<String>(),
                        s.first_message
                    ),
                    None => s.first_message.clone(),
                };
                row.push_str(&clip(&first, first_w));
                out.line(row.trim_end())?;
            }
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// Keeps the end of a path, which says more than its start.
fn clip_left(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n - max + 1).collect();
    format!("…{tail}")
}

fn human_tokens(t: u64) -> String {
    if t >= 10_000_000 {
        format!("{}M", t / 1_000_000)
    } else if t >= 10_000 {
        format!("{}k", t / 1000)
    } else {
        t.to_string()
    }
}

/// Searchable texts of an entry: `(role or kind, text)`.
fn entry_texts(e: &Entry) -> Vec<(String, String)> {
    let mut v = Vec::new();
    match e {
        Entry::Message(m) => {
            let role = m.message.role().to_string();
            match &m.message {
                AgentMessage::Assistant(a) => {
                    for b in &a.content {
                        match b {
                            ContentBlock::Text(t) => v.push((role.clone(), t.text.clone())),
                            ContentBlock::Thinking(t) => {
                                v.push(("thinking".into(), t.thinking.clone()))
                            }
                            ContentBlock::ToolCall(c) => v.push((
                                format!("toolCall:{}", c.name),
                                serde_json::to_string(&c.arguments).unwrap_or_default(),
                            )),
                            _ => {}
                        }
                    }
                }
                AgentMessage::System(_) => {}
                other => v.push((role, other.text())),
            }
        }
        Entry::CustomMessage(c) => v.push(("custom_message".into(), c.content.joined_text("\n"))),
        Entry::Compaction(c) => v.push(("compaction".into(), c.summary.clone())),
        Entry::BranchSummary(b) => v.push(("branch_summary".into(), b.summary.clone())),
        Entry::SessionInfo(i) => v.push(("name".into(), i.name.clone().unwrap_or_default())),
        Entry::Label(l) => v.push(("label".into(), l.label.clone().unwrap_or_default())),
        _ => {}
    }
    v
}

fn find(hay: &str, needle: &str, ignore_case: bool) -> Option<usize> {
    if ignore_case {
        hay.to_lowercase().find(&needle.to_lowercase())
    } else {
        hay.find(needle)
    }
}

/// Text around byte offset `at`, on one line.
fn snippet(text: &str, at: usize, len: usize) -> String {
    let start = text[..at.min(text.len())]
        .char_indices()
        .rev()
        .nth(40)
        .map(|(i, _)| i)
        .unwrap_or(0);
    let end_target = (at + len + 60).min(text.len());
    let end = (end_target..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    let mut s = String::new();
    if start > 0 {
        s.push('…');
    }
    s.push_str(&clip(&text[start..end], 200));
    if end < text.len() {
        s.push('…');
    }
    s
}

#[allow(clippy::too_many_arguments)]
pub fn search(
    ctx: &Ctx,
    text: &str,
    all: bool,
    ignore_case: bool,
    sessions: &[String],
    limit: Option<usize>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    if text.is_empty() {
        return Err(CliError::input("search text is empty"));
    }
    let files: Vec<PathBuf> = if sessions.is_empty() {
        gather(ctx, all, None)?.0
    } else {
        sessions
            .iter()
            .map(|s| ctx.resolve(s))
            .collect::<Result<_, _>>()?
    };
    // Raw-byte prefilter: valid when the needle has nothing JSON escapes.
    let plain = !ignore_case
        && !text
            .chars()
            .any(|c| c == '"' || c == '\\' || c.is_control());
    let finder = memchr::memmem::Finder::new(text.as_bytes());
    let fmt = resolve_format(format);
    let mut out = Out::new();
    let mut hits = 0usize;
    'files: for path in &files {
        if plain {
            let mut bytes = Vec::new();
            match open_regular(path, false).and_then(|mut f| f.read_to_end(&mut bytes)) {
                Ok(_) if finder.find(&bytes).is_none() => continue,
                Ok(_) => {}
                Err(e) => {
                    warn(PROG, &format!("{}: skipped: {e}", path.display()));
                    continue;
                }
            }
        }
        let s = match Session::load(path) {
            Ok(s) => s,
            Err(e) => {
                warn(PROG, &format!("skipped: {e}"));
                continue;
            }
        };
        s.diagnostics.warn(PROG);
        for (e, &line) in s.entries.iter().zip(&s.lines) {
            for (role, t) in entry_texts(e) {
                let Some(at) = find(&t, text, ignore_case) else {
                    continue;
                };
                hits += 1;
                let rec = MatchRecord {
                    kind: "match",
                    session_id: s.id().to_string(),
                    path: path.display().to_string(),
                    entry_id: e.id().to_string(),
                    line,
                    role,
                    text: snippet(&t, at, text.len()),
                };
                match fmt {
                    OutputFormat::Jsonl => out.record(&rec)?,
                    OutputFormat::Text => out.line(&format!(
                        "{}:{} {} {}: {}",
                        clip(&rec.session_id, 8),
                        rec.line,
                        rec.entry_id,
                        rec.role,
                        rec.text
                    ))?,
                }
                if limit.is_some_and(|n| hits >= n) {
                    break 'files;
                }
                break;
            }
        }
    }
    out.flush()?;
    Ok(if hits == 0 { EXIT_FAILED } else { EXIT_OK })
}
