//! `compact` and `branch --summarize`: the commands that ask the model for a
//! summary (through `pi_lib::session::compact`) and append the result under
//! the session file's lock. The model comes from `--model`, else the
//! session's own model, else the settings defaults, with pi's selection,
//! auth and thinking rules (`pi_lib::model`).

use std::time::Duration;

use pi_lib::cli::{resolve_format, CliError, OutputFormat, EXIT_OK};
use pi_lib::format::compaction::{
    CompactionEnd, CompactionEventResult, CompactionReason, CompactionStart, SummaryRetry,
    SummarySource,
};
use pi_lib::model::select::{resolve_selection, SelectionDefaults, SelectionRequest};
use pi_lib::model::ModelRegistry;
use pi_lib::session::branch_summary::{budget, reserve_tokens, summarize_branch};
use pi_lib::session::compact::{
    compact as run_compaction, reporting_retries, CompactionSettings, SummaryModel,
};
use pi_lib::session::compact::plan::{CompactionPlan, Index};
use pi_lib::session::Session;
use pi_lib::settings::Settings;
use pi_lib::timefmt::now_ms;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::out::Out;
use crate::PROG;

/// Settings of the current project (trusted only as pi would trust it,
/// never asking).
fn settings(agent_dir: &std::path::Path) -> Result<Settings, CliError> {
    let cwd =
        std::env::current_dir().map_err(|e| CliError::input(format!("current directory: {e}")))?;
    let trust = pi_lib::trust::decide(&cwd, agent_dir, pi_lib::trust::CliTrust::Unset, None, false)
        .map_err(|e| CliError::input(e.to_string()))?;
    Settings::load(agent_dir, &cwd, trust.trusted).map_err(|e| CliError::input(e.to_string()))
}

/// The model that writes the summary: `--model`, else the session's model
/// at its leaf, else the settings defaults; thinking is the session's level.
fn summary_model(
    s: &Session,
    agent_dir: &std::path::Path,
    settings: &Settings,
    model: Option<&str>,
) -> Result<SummaryModel, CliError> {
    let input = |e: pi_lib::model::ModelError| CliError::input(e.to_string());
    let registry = ModelRegistry::load(agent_dir).map_err(input)?;
    let path = s.leaf_id().map(|l| s.path_to(l)).unwrap_or_default();
    let (session_model, thinking_level) = s.model_on_path(&path);
    let (provider, model) = match (model, &session_model) {
        (Some(m), _) => (None, Some(m.to_string())),
        (None, Some((p, id))) => (Some(p.clone()), Some(id.clone())),
        (None, None) => (None, None),
    };
    let req = SelectionRequest {
        provider,
        model,
        thinking: Some(thinking_level),
        api_key: None,
        scope: None,
        continuing: true,
    };
    let sel = resolve_selection(&registry, &req, &SelectionDefaults::from_settings(settings))
        .map_err(input)?;
    for w in &sel.warnings {
        pi_lib::cli::warn(PROG, w);
    }
    let model = registry
        .resolve_headers(&sel.model, sel.api_key.as_deref())
        .map_err(input)?;
    Ok(SummaryModel {
        model,
        api_key: sel.api_key,
        thinking: sel.thinking,
        idle_timeout: settings
            .http_idle_timeout()
            .unwrap_or(Duration::from_secs(24 * 3600)),
        cancel: CancellationToken::new(),
        retry: settings.retry(),
        retry_events: None,
    })
}

/// Shows a summary call's retry progress as it happens: pi's
/// `summarization_retry_*` records in JSONL, a warning per retry in text.
fn show_retry(out: &mut Out, fmt: OutputFormat, source: SummarySource, r: SummaryRetry) {
    match (fmt, &r) {
        (OutputFormat::Jsonl, _) => {
            let _ = out.record(&r.record(source));
            let _ = out.flush();
        }
        (
            OutputFormat::Text,
            SummaryRetry::Scheduled {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            },
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

/// Runs a summary call to completion; SIGINT cancels it.
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

/// The session changed on disk while the model wrote its summary.
fn moved(s: &Session) -> CliError {
    CliError::failed(format!(
        "{}: the session's leaf moved while the summary was written (another process appended); nothing written, run the command again",
        s.path.display()
    ))
}

/// `pi-session compact`.
pub fn compact(
    mut s: Session,
    keep_recent_tokens: Option<u64>,
    instructions: Option<String>,
    model: Option<String>,
    dry_run: bool,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let agent_dir = pi_lib::paths::agent_dir();
    let settings = settings(&agent_dir)?;
    let path = s.leaf_id().map(|l| s.path_to(l)).unwrap_or_default();
    let session_model = s.model_on_path(&path).0.map(|(p, id)| format!("{p}/{id}"));
    let cs = CompactionSettings::from_settings(&settings, session_model.as_deref())
        .map_err(CliError::input)?;
    let keep = keep_recent_tokens.unwrap_or(cs.keep_recent_tokens);
    let prep = s
        .prepare_compaction(None, keep)
        .map_err(|e| CliError::input(format!("{}: {e}", s.path.display())))?;
    if dry_run {
        return print_plan(&prep.plan(), keep, format);
    }
    let fmt = resolve_format(format);
    let mut out = Out::new();
    let mut m = summary_model(&s, &agent_dir, &settings, model.as_deref())?;
    let mut retries = m.report_retries();
    let leaf_before = s.leaf_id().map(str::to_string);
    if fmt == OutputFormat::Jsonl {
        out.record(&CompactionStart::new(CompactionReason::Manual))?;
        out.flush()?;
    }
    let source = SummarySource::Compaction(CompactionReason::Manual);
    let result = block_on(
        &m.cancel,
        reporting_retries(
            run_compaction(&prep, &m, instructions.as_deref()),
            &mut retries,
            |r| show_retry(&mut out, fmt, source, r),
        ),
    )?;
    let result = match result {
        Ok(r) => r,
        Err(msg) => {
            if fmt == OutputFormat::Jsonl {
                let end = if m.cancel.is_cancelled() {
                    CompactionEnd::aborted(CompactionReason::Manual)
                } else {
                    CompactionEnd::failure(CompactionReason::Manual, &msg)
                };
                out.record(&end)?;
                out.flush()?;
            }
            if m.cancel.is_cancelled() {
                return Err(CliError::quiet(pi_lib::cli::EXIT_INTERRUPTED));
            }
            return Err(CliError::failed(msg));
        }
    };
    crate::edit::migrate_before_append(&mut s)?;
    let written = s
        .append_with(true, |s: &Session| {
            if s.leaf_id().map(str::to_string) != leaf_before {
                return Err(());
            }
            let parent = s.leaf_id().map(str::to_string);
            Ok(vec![result.entry(s.fresh_id(), parent, now_ms())])
        })
        .map_err(|e| match e {
            pi_lib::session::write::AppendError::Refused(()) => moved(&s),
            pi_lib::session::write::AppendError::Io(e) => crate::edit::cannot_append(&s, e),
        })?;
    // pi's estimate of the rebuilt context (its usage figures are older
    // than the compaction, so this is the pure estimate).
    let estimated_after = s.projection(None).estimate_tokens();
    match fmt {
        OutputFormat::Jsonl => {
            out.record(&CompactionEnd::success(
                CompactionReason::Manual,
                CompactionEventResult {
                    summary: result.summary.clone(),
                    first_kept_entry_id: result.first_kept_entry_id.clone(),
                    tokens_before: result.tokens_before,
                    estimated_tokens_after: estimated_after,
                    usage: Some(result.usage.clone()),
                    details: Some(result.details.clone()),
                },
                false,
            ))?;
            for e in &written {
                out.record(&json!({
                    "type": "entry_appended",
                    "sessionId": s.id(),
                    "path": s.path.display().to_string(),
                    "entry": e,
                }))?;
            }
        }
        OutputFormat::Text => {
            out.line(&format!(
                "compacted: kept from {}, {} tokens before, about {estimated_after} after",
                result.first_kept_entry_id, result.tokens_before
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
    let agent_dir = pi_lib::paths::agent_dir();
    let settings = settings(&agent_dir)?;
    let reserve = reserve_tokens(&settings).map_err(CliError::input)?;
    let mut m = summary_model(&s, &agent_dir, &settings, model.as_deref())?;
    let mut retries = m.report_retries();
    let leaf_before = s.leaf_id().map(str::to_string);
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
    let result = block_on(
        &m.cancel,
        reporting_retries(
            summarize_branch(&prep, &m, instructions.as_deref()),
            &mut retries,
            |r| show_retry(&mut out, fmt, SummarySource::BranchSummary, r),
        ),
    )?;
    let result = match result {
        Ok(r) => r,
        Err(_) if m.cancel.is_cancelled() => {
            return Err(CliError::quiet(pi_lib::cli::EXIT_INTERRUPTED))
        }
        Err(msg) => return Err(CliError::failed(msg)),
    };
    crate::edit::migrate_before_append(&mut s)?;
    let written = s
        .append_with(true, |s: &Session| {
            if s.leaf_id().map(str::to_string) != leaf_before {
                return Err(());
            }
            Ok(vec![result.entry(
                s.fresh_id(),
                prep.new_leaf.clone(),
                now_ms(),
            )])
        })
        .map_err(|e| match e {
            pi_lib::session::write::AppendError::Refused(()) => moved(&s),
            pi_lib::session::write::AppendError::Io(e) => crate::edit::cannot_append(&s, e),
        })?;
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
    keep_recent_tokens: Option<u64>,
    format: Option<OutputFormat>,
) -> Result<Option<i32>, CliError> {
    let Ok(f) = pi_lib::session::file::open_regular(path, false) else {
        return Ok(None);
    };
    let Some(mut index) = Index::open(f) else {
        return Ok(None);
    };
    let agent_dir = pi_lib::paths::agent_dir();
    let settings = settings(&agent_dir)?;
    let model = index.model();
    let cs =
        CompactionSettings::from_settings(&settings, model.as_deref()).map_err(CliError::input)?;
    let keep = keep_recent_tokens.unwrap_or(cs.keep_recent_tokens);
    match index.plan(keep) {
        None => Ok(None),
        Some(Err(e)) => Err(CliError::input(format!("{}: {e}", path.display()))),
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
