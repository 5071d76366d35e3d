//! Text and JSON mode: the prompts run one after the other, then what
//! extensions asked to run while the agent was idle, then the reports of
//! background subagents; `--then` follow-ups are queued behind the last
//! prompt. JSON mode streams pi's events (after the session header, the
//! `trust` record and the `sandbox` record); text mode prints the final answer. SIGINT, SIGTERM,
//! SIGHUP and a stdout nobody reads stop the run the same way: the request
//! is aborted, tools are killed, the partial message is saved.

use std::io::Write;

use serde_json::Value;

use super::execute::Drive;
use super::preflight::{expand_prompts, preflight};
use super::Mode;
use crate::agent::queue::IdleRun;
use crate::agent::Agent;
use crate::cli::{CliError, EXIT_OK};
use crate::extensions::runner::Runner;
use crate::format::{AgentMessage, ContentBlock};
use crate::interrupt::{StopReason, Stopper};

/// Runs the prompts of `drive` on `agent`; the exit code.
pub(super) async fn run(drive: &Drive<'_>, mut agent: Agent) -> Result<i32, CliError> {
    let asm = drive.asm;
    let prog = asm.opts.prog;
    let json = asm.opts.mode == Mode::Json;
    // SIGINT, SIGTERM and SIGHUP are taken over right here, before the
    // first request, so an early signal still saves the session; a stdout
    // that fails stops the run the same way.
    let stop = Stopper::new(asm.cancel.clone());
    if let Err(e) = stop.watch_signals() {
        crate::cli::warn(prog, &e);
    }
    if json {
        stop.watch_stdout();
    }
    let mut out = crate::cli::Stdout::new();
    // After a signal the stream goes on (the aborted message, the settled
    // event); after a failed write nothing more is tried.
    let mut write_failed = false;
    let mut emit = |v: &Value| {
        if json && !write_failed {
            if let Err(e) = out.record(v) {
                write_failed = true;
                stop.stop(StopReason::from_write_error(&e));
            }
        }
    };
    if json {
        let header = agent.store.session.header.to_line();
        emit(&serde_json::from_str(&header).unwrap_or(Value::Null));
        if let Some(t) = &asm.trust_record {
            emit(t);
        }
        if let Some(s) = &asm.sandbox_record {
            emit(s);
        }
    }
    if asm.continued {
        agent.prepare_continued_session()
    } else {
        agent.prepare_session()
    }
    .map_err(CliError::failed)?;
    let mut last = None;
    let mut failed = None;
    let mut prompts: std::collections::VecDeque<AgentMessage> = drive.prompts.clone().into();
    let mut then = Some(drive.then.clone());
    loop {
        // The prompts given, then what extensions asked to run while the
        // agent was idle (sendMessage triggerTurn, sendUserMessage).
        let user = match prompts.pop_front() {
            Some(u) => {
                // `--then`: follow-ups of the last prompt's run, each
                // delivered when the task before it has ended.
                if prompts.is_empty() {
                    let then = then.take().unwrap_or_default();
                    for m in expand_prompts(then, &asm.resources, asm.chat_only, prog) {
                        agent.queue.follow_up(m);
                    }
                }
                u
            }
            None => match agent.queue.take_idle_run() {
                Some(IdleRun::User { text }) => super::input::user(text),
                Some(IdleRun::Custom(c)) => AgentMessage::Custom(Box::new(c)),
                // Background children still running: their reports come
                // as follow-ups, so wait for them.
                None => match &asm.subagents {
                    Some(c) if c.has_running_background() => {
                        agent.idle_until(c.wait_background(), &mut emit).await;
                        continue;
                    }
                    _ => break,
                },
            },
        };
        // pi's built-in `/mcp` says nothing in print and JSON mode (it
        // notifies only a UI) but acts (`logout` drops the tokens); it is
        // handled, not sent.
        if let Some(cmd) = (!asm.opts.no_mcp)
            .then(|| crate::mcp::status::command_of(&user))
            .flatten()
        {
            let ctx = crate::mcp::command::Context {
                mcp: asm.mcp.as_ref(),
                agent_dir: &asm.opts.agent_dir,
                ui: None,
                select: Some(asm.mcp_select.as_ref()),
            };
            crate::mcp::command::run(&ctx, cmd, &mut agent.opts.tools).await;
            continue;
        }
        let Some(user) = preflight(
            &mut agent,
            user,
            &asm.resources,
            asm.chat_only,
            prog,
            &mut emit,
        )
        .await
        else {
            continue;
        };
        let outcome = agent.run(user, &mut emit).await;
        last = outcome.last.clone();
        if let Some(reason) = stop.reason() {
            return Err(stopped(prog, &reason));
        }
        if outcome.aborted {
            return Err(stopped(prog, &StopReason::Interrupt));
        }
        if let Some(err) = outcome.error {
            failed = Some(CliError::failed(err));
            break;
        }
    }
    // session_shutdown while the session is open: what its handlers append
    // is written, as pi writes it.
    agent
        .notify_hooks(Runner::shutdown_event(), &mut emit)
        .await;
    agent.apply_pending(&mut emit);
    if let Some(f) = failed {
        return Err(f);
    }
    if !json {
        if let Some(m) = &last {
            for b in &m.content {
                if let ContentBlock::Text(t) = b {
                    writeln!(out, "{}", t.text).map_err(|e| stopped_writing(prog, &e))?;
                }
            }
        }
    }
    out.flush().map_err(|e| stopped_writing(prog, &e))?;
    Ok(EXIT_OK)
}

/// The error for a run that was stopped from outside: its one line on
/// stderr and its exit code.
fn stopped(prog: &str, reason: &StopReason) -> CliError {
    crate::cli::note(prog, &reason.message());
    CliError::quiet(reason.exit_code())
}

/// The answer could not be written (the run itself finished and is saved).
fn stopped_writing(prog: &str, e: &std::io::Error) -> CliError {
    stopped(prog, &StopReason::from_write_error(e))
}
