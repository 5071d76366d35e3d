//! `pi-session agents SESSION`: the subagent runs a parent session started,
//! read back from the child session files by `pi_lib::subagents::runs`.

use pi_lib::cli::{resolve_format, CliError, OutputFormat, EXIT_OK};
use pi_lib::session::{resolve, Session};
use pi_lib::subagents::runs;
use serde_json::json;

use crate::out::Out;
use crate::Ctx;

/// Lists `parent`'s children found under the session roots and in the
/// parent's own folder.
pub fn agents(ctx: &Ctx, parent: &Session, format: Option<OutputFormat>) -> Result<i32, CliError> {
    let files = resolve::files_around(&ctx.roots(), parent.path.parent());
    let children = runs::children_of(parent, &files);
    let mut out = Out::new();
    let fmt = resolve_format(format);
    if fmt == OutputFormat::Text && children.is_empty() {
        out.line(&format!("no subagent runs for session {}", parent.id()))?;
    }
    for (run, s) in &children {
        let st = s.stats();
        let duration = run
            .completed_at
            .as_deref()
            .and_then(|c| runs::duration_ms(&run.created_at, c));
        match fmt {
            OutputFormat::Jsonl => out.record(&json!({
                "type": "subagent_run",
                "sessionId": run.session_id,
                "path": run.session_path,
                "parentSessionId": run.parent_session_id,
                "parentToolCallId": run.parent_tool_call_id,
                "profile": run.profile,
                "description": run.description,
                "task": run.task,
                "status": run.status.as_str(),
                "runInBackground": run.run_in_background,
                "createdAt": run.created_at,
                "completedAt": run.completed_at,
                "durationMs": duration,
                "totalTokens": st.total.total_tokens,
                "cost": st.total.cost,
                "error": run.error,
                "worktreePath": run.worktree_path,
                "worktreeCleanupError": run.worktree_cleanup_error,
            }))?,
            OutputFormat::Text => {
                let dur =
                    duration.map_or("-".to_string(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
                let bg = if run.run_in_background { " bg" } else { "" };
                out.line(&format!(
                    "{}  {:<11} {:<16} {}  {dur}  {} tok  ${:.4}{bg}",
                    run.session_id,
                    run.status.as_str(),
                    run.profile,
                    run.description,
                    st.total.total_tokens,
                    st.total.cost
                ))?;
            }
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}
