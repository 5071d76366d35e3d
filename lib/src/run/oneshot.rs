//! Text and JSON mode: the prompts run one after the other, then what
//! extensions asked to run while the agent was idle, then the reports of
//! background subagents; `--then` follow-ups are queued behind the last
//! prompt. With `--output-schema` the final answer is then checked and,
//! when it does not match, corrected ([`super::output`]). JSON mode streams
//! pi's events (after the session header, the `trust` record and the
//! `sandbox` record) and
//! closes with the `run_end` record; text mode prints the final answer (or
//! the validated document). Every ending is stored in the session
//! ([`super::outcome`]). SIGINT, SIGTERM, SIGHUP, a stdout nobody reads and
//! a limit of the run stop it the same way: the request is aborted, tools
//! (subagent children's too) are killed, the partial message is saved.

use std::cell::RefCell;
use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use super::execute::Drive;
use super::outcome::{self, answer_text, Ended};
use super::preflight::{expand_prompts, preflight};
use super::progress::Progress;
use super::Mode;
use crate::agent::budget::Budget;
use crate::agent::queue::IdleRun;
use crate::agent::{Agent, Emit, Event, RunOutcome};
use crate::cli::{CliError, EXIT_OK};
use crate::extensions::runner::Runner;
use crate::format::message::AssistantMessage;
use crate::format::AgentMessage;
use crate::interrupt::{StopReason, Stopper};

/// How long stopped subagent children are waited for (their tools' process
/// groups are killed on the way) before the process exits.
const CHILDREN_GRACE: Duration = Duration::from_secs(5);

/// Runs the prompts of `drive` on `agent`; the exit code.
pub(super) async fn run(drive: &Drive<'_>, mut agent: Agent) -> Result<i32, CliError> {
    let asm = drive.asm;
    let prog = asm.opts.prog;
    let json = asm.opts.mode == Mode::Json;
    // SIGINT, SIGTERM and SIGHUP are taken over right here, before the
    // first request, so an early signal still saves the session; a stdout
    // that fails stops the run the same way, and so does a limit.
    let stop = Stopper::new(asm.cancel.clone());
    if let Err(e) = stop.watch_signals() {
        crate::cli::warn(prog, &e);
    }
    if json {
        stop.watch_stdout();
    }
    if let Some(b) = &asm.budget {
        let s = stop.clone();
        b.on_trip(move |l| {
            s.stop(StopReason::Limit(l));
        });
        b.on_warning(move |w| crate::cli::warn(prog, w));
        b.arm_timeout();
    }
    let mut out = crate::cli::Stdout::new();
    // After a signal the stream goes on (the aborted message, the settled
    // event); after a failed write nothing more is tried.
    let write_failed = RefCell::new(false);
    let progress = RefCell::new(Progress::new(prog, asm.opts.verbose, asm.opts.started));
    let mut emit = |v: &Event<'_>| {
        progress.borrow_mut().event(v);
        if json && !*write_failed.borrow() {
            if let Err(e) = out.record(v) {
                *write_failed.borrow_mut() = true;
                stop.stop(StopReason::from_write_error(&e));
            }
        }
    };
    if json {
        let header = agent.store.session.header.to_line();
        emit(&Event::Value(
            &serde_json::from_str(&header).unwrap_or(Value::Null),
        ));
        if let Some(t) = &asm.trust_record {
            emit(&Event::Value(t));
        }
        if let Some(s) = &asm.sandbox_record {
            emit(&Event::Value(s));
        }
    }
    let mut last: Option<AssistantMessage> = None;
    let prepared = if asm.continued {
        agent.prepare_continued_session()
    } else {
        agent.prepare_session()
    };
    let ended = match prepared {
        Err(e) => Ended::Failed(e),
        Ok(()) => prompts(drive, &mut agent, &stop, &mut last, &mut emit).await,
    };
    // --output-schema: the final answer must be a valid document.
    let mut document = None;
    let ended = match (&asm.output, ended) {
        (Some(spec), Ended::Completed) => {
            let mut left = spec.retries;
            loop {
                let text = last.as_ref().map(answer_text).unwrap_or_default();
                match spec.check(&text) {
                    Ok(doc) => {
                        document = Some(doc);
                        break Ended::Completed;
                    }
                    Err(errors) if left == 0 => break Ended::OutputSchema(errors),
                    Err(errors) => {
                        left -= 1;
                        crate::cli::warn(
                            prog,
                            &format!(
                                "the final answer does not match --output-schema ({}); asking the model again ({} of {})",
                                errors.first().map(String::as_str).unwrap_or(""),
                                spec.retries - left,
                                spec.retries
                            ),
                        );
                        let again = super::input::user(spec.retry_message(&errors));
                        let o = agent.run(again, &mut emit).await;
                        if o.last.is_some() {
                            last = o.last.clone();
                        }
                        if let Some(e) = interrupted(&o, &stop, asm.budget.as_deref()) {
                            break e;
                        }
                    }
                }
            }
        }
        (_, e) => e,
    };
    if matches!(ended, Ended::Stopped(_) | Ended::Limit(_)) {
        // Children stop with the run (a limit stopped them already), and
        // are waited for, so none of their tools outlives it.
        if let Some(c) = &asm.subagents {
            c.stop_all();
            c.wait_children(CHILDREN_GRACE).await;
        }
    } else {
        // session_shutdown while the session is open: what its handlers
        // append is written, as pi writes it.
        agent
            .notify_hooks(Runner::shutdown_event(), &mut emit)
            .await;
        agent.apply_pending(&mut emit);
    }
    // The answer as text mode prints it and --output-last-message keeps it.
    let answer = match (&document, &last) {
        (Some(d), _) => Some(format!("{d}\n")),
        (None, Some(m)) => Some(format!("{}\n", answer_text(m))).filter(|t| t.trim() != ""),
        (None, None) => None,
    };
    let mut ended = ended;
    if let (Ended::Completed, Some(path), Some(text)) =
        (&ended, &asm.opts.output_last_message, &answer)
    {
        if let Err(e) = super::output::write_last_message(&asm.opts.cwd.join(path), text) {
            ended = Ended::Failed(e);
        }
    }
    let turns = progress.borrow().turns;
    let mut end = outcome::build(asm, &agent, &ended, turns, document);
    if let Err(e) = outcome::store(&mut agent, &end) {
        if ended == Ended::Completed {
            ended = Ended::Failed(e.clone());
            end = outcome::build(asm, &agent, &ended, turns, end.output.take());
        } else {
            crate::cli::warn(prog, &e);
        }
    }
    if json && !*write_failed.borrow() {
        let _ = out.record(&end.record());
    }
    progress.borrow().finish(&end);
    match ended {
        Ended::Completed => {
            if !json {
                if let Some(text) = &answer {
                    out.write_all(text.as_bytes())
                        .map_err(|e| stopped_writing(prog, &e))?;
                }
            }
            out.flush().map_err(|e| stopped_writing(prog, &e))?;
            Ok(EXIT_OK)
        }
        Ended::Failed(e) => {
            let _ = out.flush();
            Err(CliError::failed(e))
        }
        Ended::Stopped(r) => Err(stopped(prog, &r)),
        Ended::Limit(l) => Err(stopped(prog, &StopReason::Limit(l))),
        Ended::OutputSchema(errors) => {
            let _ = out.flush();
            let schema = asm
                .output
                .as_ref()
                .map(|o| o.path.display().to_string())
                .unwrap_or_default();
            let retries = asm.output.as_ref().map_or(0, |o| o.retries);
            let mut message = format!(
                "the final answer does not match --output-schema {schema} after {retries} {}:",
                if retries == 1 { "retry" } else { "retries" }
            );
            for e in &errors {
                message.push_str("\n  ");
                message.push_str(e);
            }
            Err(CliError {
                message,
                hint: None,
                code: crate::cli::EXIT_OUTPUT_SCHEMA,
            })
        }
    }
}

/// The prompts, then what extensions asked to run while the agent was
/// idle, then the reports of background children; how it ended.
async fn prompts(
    drive: &Drive<'_>,
    agent: &mut Agent,
    stop: &Stopper,
    last: &mut Option<AssistantMessage>,
    emit: Emit<'_>,
) -> Ended {
    let asm = drive.asm;
    let prog = asm.opts.prog;
    let mut prompts: std::collections::VecDeque<AgentMessage> = drive.prompts.clone().into();
    let mut then = Some(drive.then.clone());
    loop {
        if let Some(reason) = stop.reason() {
            return Ended::from_stop(reason);
        }
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
                        agent.idle_until(c.wait_background(), emit).await;
                        continue;
                    }
                    _ => return Ended::Completed,
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
        let Some(user) = preflight(agent, user, &asm.resources, asm.chat_only, prog, emit).await
        else {
            continue;
        };
        let outcome = agent.run(user, emit).await;
        *last = outcome.last.clone();
        if outcome.hidden {
            // pi prints nothing for a reply its recovery hid; so do we, but
            // not without a word.
            if outcome.error.is_none() {
                if let Some(m) = last.as_ref() {
                    crate::cli::warn(prog, &hidden_warning(m, agent.opts.model.max_tokens));
                }
            }
            *last = None;
        }
        if let Some(e) = interrupted(&outcome, stop, asm.budget.as_deref()) {
            return e;
        }
    }
}

/// How a run that did not end with an answer ended: stopped from outside
/// or by a limit, aborted, or failed; `None` when it answered.
fn interrupted(outcome: &RunOutcome, stop: &Stopper, budget: Option<&Budget>) -> Option<Ended> {
    // The turn limit is the run's: it stops the children too.
    if let Some(l) = outcome.limit {
        match budget {
            Some(b) => {
                b.trip(l);
            }
            None => {
                stop.stop(StopReason::Limit(l));
            }
        }
    }
    if let Some(reason) = stop.reason() {
        return Some(Ended::from_stop(reason));
    }
    if outcome.aborted {
        return Some(Ended::Stopped(StopReason::Interrupt));
    }
    outcome.error.clone().map(Ended::Failed)
}

/// Why a run that ended with a length stop prints no answer.
fn hidden_warning(m: &AssistantMessage, max_tokens: u64) -> String {
    format!(
        "the reply stopped after {} of the model's {max_tokens} output tokens (stopReason \"length\": \
         the server's context size or the context window cut it); as pi 1.6.0 does, it is hidden from \
         later context (a context_edit) and not retried, since compaction found nothing to summarise \
         or failed, so no answer is printed and the exit status is 0",
        m.usage.output.as_u64()
    )
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
