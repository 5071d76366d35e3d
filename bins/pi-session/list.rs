//! `ls` and `search`: commands over many sessions (found, scanned and
//! searched by `pi_lib::session`; printed here).

use std::path::PathBuf;

use pi_lib::cli::{resolve_format, warn, CliError, OutputFormat, EXIT_FAILED, EXIT_OK};
use pi_lib::session::list::{list_sessions, SortKey};
use pi_lib::session::prefixes::IdPrefixes;
use pi_lib::session::resolve::{header_id, listing};
use pi_lib::session::search::{search as search_files, Query};
use pi_lib::timefmt::{parse_iso_ms, short_from_ms};

use crate::cli::SortBy;
use crate::out::{cell, clip, term_width, Out};
use crate::{Ctx, PROG};

/// The session files `ls` / `search` look at (skipped ones warned about),
/// and a description of where.
fn gather(ctx: &Ctx, all: bool, cwd: Option<PathBuf>) -> Result<(Vec<PathBuf>, String), CliError> {
    let found =
        listing(ctx.session_dir.as_deref(), all, cwd.as_deref()).map_err(CliError::input)?;
    for skip in &found.skipped {
        warn(PROG, &skip.to_string());
    }
    Ok((found.files, found.what))
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
    let sort = match sort {
        SortBy::Modified => SortKey::Modified,
        SortBy::Created => SortKey::Created,
    };
    let sessions = list_sessions(&files, sort, limit, &mut |w| warn(PROG, w));
    if sessions.is_empty() {
        pi_lib::cli::note(PROG, &format!("no sessions in {what}"));
        return Ok(EXIT_FAILED);
    }
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => {
            for s in &sessions {
                out.record(&s.record())?;
            }
        }
        OutputFormat::Text => {
            let width = term_width();
            // Prefixes tell each session apart from every session an id
            // prefix is resolved against, so any printed one works as an
            // argument.
            let prefixes = IdPrefixes::around(&ctx.roots(), sessions.iter().map(|s| s.id.clone()));
            let id_w = prefixes.column_len(sessions.iter().map(|s| s.id.as_str()));
            let fixed = id_w + 1 + 16 + 1 + 16 + 1 + 5 + 1 + 8 + 1 + 7 + 1 + 13 + 1;
            let cwd_w = if all { 28 } else { 0 };
            let name_w = 18;
            let first_w = width.saturating_sub(fixed + cwd_w + name_w + 2).max(12);
            let mut head = format!(
                "{} {} {} {:>5} {:>8} {:>7} {} {} ",
                cell("ID", id_w),
                cell("CREATED", 16),
                cell("MODIFIED", 16),
                "MSGS",
                "TOKENS",
                "COST",
                cell("OUTCOME", 13),
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
                    "{} {} {} {:>5} {:>8} {:>7} {} {} ",
                    cell(&s.id.chars().take(id_w).collect::<String>(), id_w),
                    cell(&created, 16),
                    cell(&short_from_ms(s.modified_ms), 16),
                    s.message_count,
                    human_tokens(s.tokens),
                    format!("${:.2}", s.cost),
                    cell(
                        s.outcomes
                            .last()
                            .map_or("-", |(_, o)| o.stop_reason.as_str()),
                        13
                    ),
                    cell(s.name.as_deref().unwrap_or("-"), name_w)
                );
                if all {
                    row.push_str(&cell(&clip_left(&s.cwd, cwd_w), cwd_w));
                    row.push(' ');
                }
                // A subagent child is marked with its parent's id.
                let first = match &s.subagent_of {
                    Some(p) => format!("[subagent of {}] {}", prefixes.short(p), s.first_message),
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
    let fmt = resolve_format(format);
    let mut out = Out::new();
    let q = Query {
        text,
        ignore_case,
        limit,
    };
    let prefixes = match fmt {
        OutputFormat::Text => {
            IdPrefixes::around(&ctx.roots(), files.iter().filter_map(|f| header_id(f)))
        }
        OutputFormat::Jsonl => IdPrefixes::default(),
    };
    let hits = search_files(&files, &q, &mut |w| warn(PROG, w), |rec| match fmt {
        OutputFormat::Jsonl => out.record(&rec),
        OutputFormat::Text => out.line(&format!(
            "{}:{} {} {}: {}",
            prefixes.short(&rec.session_id),
            rec.line,
            rec.entry_id,
            rec.role,
            rec.text
        )),
    })?;
    out.flush()?;
    Ok(if hits == 0 { EXIT_FAILED } else { EXIT_OK })
}

/// `stats --all`: the runs stored in every session of the folders.
pub fn stats_all(
    ctx: &Ctx,
    by: Option<crate::cli::GroupByArg>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    use crate::cli::GroupByArg;
    use pi_lib::session::runs::{report_dirs, GroupBy, RunTotals};
    let by = by.map(|b| match b {
        GroupByArg::Day => GroupBy::Day,
        GroupByArg::Cwd => GroupBy::Cwd,
        GroupByArg::Outcome => GroupBy::Outcome,
    });
    let report =
        report_dirs(&ctx.session_dirs, by, &mut |w| warn(PROG, w)).map_err(CliError::input)?;
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => {
            for g in report.groups.iter().chain(std::iter::once(&report.total)) {
                out.record(g)?;
            }
        }
        OutputFormat::Text => {
            out.line(&format!(
                "{} {:>6} {:>7} {:>10} {:>10} {:>10}  OUTCOMES",
                cell("GROUP", 24),
                "RUNS",
                "TURNS",
                "TOKENS",
                "COST",
                "TIME"
            ))?;
            let row = |g: &RunTotals| {
                let outcomes: Vec<String> =
                    g.outcomes.iter().map(|(k, n)| format!("{k} {n}")).collect();
                format!(
                    "{} {:>6} {:>7} {:>10} {:>10} {:>10}  {}",
                    cell(&clip_left(g.group.as_deref().unwrap_or("total"), 24), 24),
                    g.runs,
                    g.turns,
                    human_tokens(g.total_tokens),
                    format!("${:.4}", g.cost),
                    format!("{:.1}s", g.duration_ms as f64 / 1000.0),
                    outcomes.join(", ")
                )
            };
            for g in report.groups.iter().chain(std::iter::once(&report.total)) {
                out.line(row(g).trim_end())?;
            }
            out.line(&format!("{} session files read", report.sessions))?;
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}
