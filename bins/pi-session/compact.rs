//! `compact` and `branch --summarize`: the commands that have the model
//! write a summary. The library decides everything (settings, model, the
//! compaction through `pi_lib::session::compact::run`, the append); this
//! file prints what happens and maps the outcome to an exit status.

use pi_lib::cli::{resolve_format, CliError, OutputFormat, EXIT_INTERRUPTED, EXIT_OK};
use pi_lib::format::compaction::{CompactionReason, SummaryRetry};
use pi_lib::session::branch_summary::{budget, reserve_tokens, write_branch_summary};
use pi_lib::session::compact::command::{
    keep_recent_tokens, project_settings, session_model, summary_model, FileHost, WriteError,
};
use pi_lib::session::compact::plan::{CompactionPlan, Index};
use pi_lib::session::compact::run::{run, Event, Failure, Outcome, Request};
use pi_lib::session::compact::SummaryModel;
use pi_lib::session::write::Migrated;
use pi_lib::session::Session;
use pi_lib::settings::Settings;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::out::Out;
use crate::PROG;

/// The agent folder and the current project's settings.
fn settings() -> Result<(std::path::PathBuf, Settings), CliError> {
    let agent_dir = pi_lib::paths::agent_dir();
    let cwd =
        std::env::current_dir().map_err(|e| CliError::input(format!("current directory: {e}")))?;
    let settings = project_settings(&agent_dir, &cwd).map_err(CliError::input)?;
    Ok((agent_dir, settings))
}

/// The summary model, its selection warnings printed.
fn model_for(
    s: &Session,
    agent_dir: &std::path::Path,
    settings: &Settings,
    model: Option<&str>,
) -> Result<SummaryModel, CliError> {
    let (m, warnings) = summary_model(s, agent_dir, settings, model).map_err(CliError::input)?;
    for w in &warnings {
        pi_lib::cli::warn(PROG, w);
    }
    Ok(m)
}

/// Prints an event: the record in JSONL (at once), a warning per retry in
/// text.
fn show(out: &mut Out, fmt: OutputFormat, ev: Event<'_>) {
    match (fmt, ev) {
        (OutputFormat::Jsonl, ev) => {
            let _ = out.record(&ev.record());
            let _ = out.flush();
        }
        (
            OutputFormat::Text,
            Event::Retry(
                SummaryRetry::Scheduled {
                    attempt,
                    max_attempts,
                    delay_ms,
                    error_message,
                },
                _,
            ),
        ) => pi_lib::cli::warn(
            PROG,
            &format!(
                "summary request failed ({}); retry {attempt} of {max_attempts} in {delay_ms} ms",
                crate::out::clean_for_terminal(error_message)
            ),
        ),
        (OutputFormat::Text, _) => {}
    }
}

fn warn_migrated(m: &Migrated) {
    pi_lib::cli::warn(PROG, &m.to_string());
}

/// Runs a summary to completion; SIGINT cancels it.
fn block_on<T>(
    cancel: &CancellationToken,
    fut: impl std::future::Future<Output = T>,
) -> Result<T, CliError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("cannot start the runtime: {e}")))?;
    let cancel = cancel.clone();
    Ok(rt.block_on(async move {
        tokio::select! {
            biased;
            v = fut => v,
            _ = async {
                let _ = tokio::signal::ctrl_c().await;
                cancel.cancel();
                std::future::pending::<()>().await
            } => unreachable!("the pending future never ends"),
        }
    }))
}

/// The exit of a summary that wrote nothing.
fn failed(f: Failure<WriteError>) -> CliError {
    match f {
        Failure::Cancelled => CliError::quiet(EXIT_INTERRUPTED),
        Failure::Summary(msg) => CliError::failed(msg),
        Failure::Write(e @ WriteError::LeafMoved(_)) => CliError::failed(e.to_string()),
        Failure::Write(WriteError::Io(msg)) => CliError::input(msg),
    }
}

/// A session with nothing to compact (too small, or compacted last) is
/// left as it is: a note on stderr and exit 0, since the session is already
/// as compact as asked (exit 2 would say the command line was wrong).
fn nothing_to_do(path: &std::path::Path, e: &pi_lib::session::compact::PrepareError) -> i32 {
    pi_lib::cli::note(
        "pi-session",
        &format!("{}: {e}; nothing written", path.display()),
    );
    EXIT_OK
}

/// `pi-session compact`.
pub fn compact(
    mut s: Session,
    keep_recent_tokens_flag: Option<u64>,
    instructions: Option<String>,
    model: Option<String>,
    dry_run: bool,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let (agent_dir, settings) = settings()?;
    let keep = keep_recent_tokens(
        &settings,
        session_model(&s).as_deref(),
        keep_recent_tokens_flag,
    )
    .map_err(CliError::input)?;
    let prep = match s.prepare_compaction(None, keep) {
        Ok(p) => p,
        Err(e) => return Ok(nothing_to_do(&s.path, &e)),
    };
    if dry_run {
        return print_plan(&prep.plan(), keep, format);
    }
    let prep = prep.into_owned();
    let fmt = resolve_format(format);
    let mut m = model_for(&s, &agent_dir, &settings, model.as_deref())?;
    let cancel = m.cancel.clone();
    let mut out = Out::new();
    let outcome = {
        let mut host = FileHost::new(&mut s, |ev| show(&mut out, fmt, ev), warn_migrated);
        let req = Request {
            reason: CompactionReason::Manual,
            instructions: instructions.as_deref(),
            will_retry: false,
        };
        block_on(&cancel, run(&mut host, prep, &mut m, req))?
    };
    let (result, written) = match outcome {
        Outcome::Done { result, written } => (result, written),
        Outcome::Failed(f) => return Err(failed(f)),
    };
    match fmt {
        OutputFormat::Jsonl => crate::edit::record_appended(&mut out, &s, &written)?,
        OutputFormat::Text => {
            out.line(&format!(
                "compacted: kept from {}, {} tokens before, about {} after",
                result.first_kept_entry_id, result.tokens_before, result.estimated_tokens_after
            ))?;
            out.line("")?;
            out.line(&crate::out::clean_for_terminal(&result.summary))?;
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// `pi-session branch --to ENTRY --summarize`.
pub fn branch_summarize(
    mut s: Session,
    target: &str,
    instructions: Option<String>,
    model: Option<String>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let (agent_dir, settings) = settings()?;
    let reserve = reserve_tokens(&settings).map_err(CliError::input)?;
    let mut m = model_for(&s, &agent_dir, &settings, model.as_deref())?;
    let Some(prep) = s.prepare_branch_summary(target, budget(m.model.context_window, reserve))
    else {
        return crate::edit::report_appended(
            &s,
            &[],
            &format!("the leaf is already {target}; nothing written"),
            format,
        );
    };
    let (fmt, mut out) = (resolve_format(format), Out::new());
    let cancel = m.cancel.clone();
    let done = {
        let mut host = FileHost::new(&mut s, |ev| show(&mut out, fmt, ev), warn_migrated);
        block_on(
            &cancel,
            write_branch_summary(&mut host, &prep, &mut m, instructions.as_deref()),
        )?
    };
    let (result, written) = done.map_err(failed)?;
    crate::edit::report_appended(
        &s,
        &written,
        &format!(
            "leaf moved to {}{}; branch summary:\n\n{}",
            prep.new_leaf.as_deref().unwrap_or("the root"),
            match &prep.editor_text {
                Some(t) => format!(
                    " (before user message {target}, to be sent again: {})",
                    crate::out::clean_for_terminal(t)
                ),
                None => String::new(),
            },
            crate::out::clean_for_terminal(&result.summary)
        ),
        format,
    )
}

/// `compact --dry-run` through the index planner (no full load); `None`
/// when the file needs the full path (which then also reports any error).
pub fn dry_run_fast(
    path: &std::path::Path,
    keep_recent_tokens_flag: Option<u64>,
    format: Option<OutputFormat>,
) -> Result<Option<i32>, CliError> {
    let Ok(f) = pi_lib::session::file::open_regular(path, false) else {
        return Ok(None);
    };
    let Some(mut index) = Index::open(f) else {
        return Ok(None);
    };
    let (_, settings) = settings()?;
    let keep = keep_recent_tokens(&settings, index.model().as_deref(), keep_recent_tokens_flag)
        .map_err(CliError::input)?;
    match index.plan(keep) {
        None => Ok(None),
        Some(Err(e)) => Ok(Some(nothing_to_do(path, &e))),
        Some(Ok(plan)) => print_plan(&plan, keep, format).map(Some),
    }
}

/// Prints what a compaction would do.
fn print_plan(
    plan: &CompactionPlan,
    keep: u64,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => out.record(&json!({
            "type": "compaction_plan",
            "firstKeptEntryId": plan.first_kept_entry_id,
            "splitTurn": plan.split_turn,
            "tokensBefore": plan.tokens_before,
            "keepRecentTokens": keep,
            "messagesToSummarize": plan.messages_to_summarize,
            "turnPrefixMessages": plan.turn_prefix_messages,
            "previousSummary": plan.previous_summary,
        }))?,
        OutputFormat::Text => {
            out.line(&format!(
                "would keep from {}{} ({} tokens before, keeping about {keep})",
                plan.first_kept_entry_id,
                if plan.split_turn {
                    ", splitting its turn"
                } else {
                    ""
                },
                plan.tokens_before
            ))?;
            out.line(&format!(
                "would summarise {} message(s){}{}",
                plan.messages_to_summarize,
                if plan.split_turn {
                    format!(" and a turn prefix of {}", plan.turn_prefix_messages)
                } else {
                    String::new()
                },
                if plan.previous_summary {
                    ", updating the previous summary"
                } else {
                    ""
                }
            ))?;
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}
