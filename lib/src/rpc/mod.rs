//! `pi-run --mode rpc`: pi 1.6.0's RPC protocol over the
//! agent loop. A client writes JSON commands on stdin and reads responses
//! and the same events `--mode json` writes on stdout. This module is the
//! dispatcher: it keeps reading commands while a run streams (steer and
//! follow-up go into [`crate::agent::queue`], whose delivery points are the
//! loop's; `abort` cancels the run and answers once it settled), answers
//! the state, model, session and queue commands from the library's own
//! types, and ends cleanly on stdin EOF, SIGTERM or SIGHUP with every entry
//! already on disk. Session replacement and `export_html` are in
//! [`replace`], the `bash` command in [`bash`]. A run and a `compact`
//! command are both jobs during which commands are read: `get_messages`,
//! `get_last_assistant_text` and `get_commands` are answered at once from
//! what the job began with and the messages it ended since; `get_state`
//! and the other read and model commands by the running agent
//! ([`inquire`]), so `isCompacting` is true while any compaction runs
//! (manual, threshold, overflow); `bash` runs at once; `compact` and the
//! session replacements abort a streaming run first, as pi 1.6.0 does; the
//! rest is answered as soon as the job settled, in the order it came.

mod bash;
mod ctl;
mod inquire;
pub mod io;
mod replace;
mod state;
pub mod ui;

use crate::agent::Event;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::agent::autocompact::Compacted;
use crate::agent::queue::{DrainMode, QueueKind};
use crate::agent::{events, Agent};
use crate::format::compaction::CompactionReason;
use crate::format::message::UserMessage;
use crate::format::model::ThinkingLevel;
use crate::format::rpc::{RpcCommand, RpcResponse, RpcState, COMMANDS};
use crate::format::{AgentMessage, ContentBlock, Entry, Num, UserContent};
use crate::model::ModelRegistry;
use crate::timefmt::now_ms;

use ctl::Job;
pub use io::{Inbox, Input, Out};
pub use state::{builtin_mcp_command, command_list, persist_setting};

/// A future that may borrow the agent (not `Send`: it holds the emitter).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What the caller does with a prompt before it runs (extension commands,
/// `input` hooks, template and skill expansion); `None`: it was handled.
pub trait Preflight {
    fn prepare<'a>(
        &'a self,
        agent: &'a mut Agent,
        user: AgentMessage,
        emit: crate::agent::Emit<'a>,
    ) -> LocalFuture<'a, Option<AgentMessage>>;
}

/// Runs every prompt as it is.
pub struct NoPreflight;

impl Preflight for NoPreflight {
    fn prepare<'a>(
        &'a self,
        _agent: &'a mut Agent,
        user: AgentMessage,
        _emit: crate::agent::Emit<'a>,
    ) -> LocalFuture<'a, Option<AgentMessage>> {
        Box::pin(async move { Some(user) })
    }
}

/// What the server needs besides the agent.
#[derive(Clone)]
pub struct RpcOptions {
    /// The models `set_model` / `cycle_model` / `get_available_models`
    /// choose from (`None`: only the current model, e.g. the faux one).
    pub registry: Option<Arc<ModelRegistry>>,
    /// Where `settings.json` lives (`set_*_mode`, `set_auto_*` persist
    /// there, as pi does).
    pub agent_dir: PathBuf,
    /// `compaction.enabled` (reported by `get_state`).
    pub auto_compaction: bool,
    /// `get_commands`' list (extension commands, templates, skills).
    pub commands: Vec<Value>,
    /// Makes `commands` again after a session replacement (the extensions
    /// registered anew); `None`: the list stays.
    pub refresh_commands: Option<Arc<dyn Fn() -> Vec<Value> + Send + Sync>>,
    /// The extensions' UI, answered by this client (§1.8).
    pub ui: Option<Arc<ui::RpcUi>>,
    /// Whether an extension asked to end the process (`ctx.shutdown()`):
    /// checked while idle, after each command and once a run settled, as
    /// pi 1.6.0 does; then the server ends as on EOF (exit 0).
    pub shutdown_requested: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
    /// What stdin EOF does: `false` (pi 1.6.0) stops a running request and
    /// exits; `true` lets the work already asked for finish first — the
    /// running job (its queued steering and follow-ups included), a
    /// running `bash`, the commands read before EOF and the runs
    /// extensions start — then exits 0. Dialogs opened after EOF resolve
    /// with their defaults (nobody can answer them).
    pub finish_on_eof: bool,
}

/// The server's own state next to the agent.
struct Ctl {
    opts: RpcOptions,
    out: Out,
    /// Cancels a running `bash` command.
    bash_cancel: Option<CancellationToken>,
    /// Answers are given while a prompt's run streams (`isStreaming`).
    streaming: bool,
}

fn mode_name(m: DrainMode) -> &'static str {
    match m {
        DrainMode::All => "all",
        DrainMode::OneAtATime => "one-at-a-time",
    }
}

fn user_message(text: &str, images: &[Value]) -> AgentMessage {
    let mut blocks = vec![ContentBlock::text(text.to_string())];
    blocks.extend(
        images
            .iter()
            .filter_map(|i| serde_json::from_value::<ContentBlock>(i.clone()).ok()),
    );
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(blocks),
        timestamp: Num::signed(now_ms()),
        extra: Map::new(),
    })
}

/// A parsed input line: the command, or the response that answers it at
/// once (bad JSON, unknown or malformed command).
enum Parsed {
    Command(Option<Value>, String, RpcCommand),
    Answer(RpcResponse),
    /// An `extension_ui_response` (never answered).
    Ui(Value),
}

fn parse(line: &str) -> Parsed {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Parsed::Answer(RpcResponse::err(
                None,
                "parse",
                format!("Failed to parse command: {e}"),
            ))
        }
    };
    if v.get("type").and_then(Value::as_str) == Some("extension_ui_response") {
        return Parsed::Ui(v);
    }
    let id = v.get("id").cloned();
    let kind = match v.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "undefined".into(),
    };
    if !COMMANDS.contains(&kind.as_str()) {
        return Parsed::Answer(RpcResponse::err(
            id,
            &kind,
            format!("Unknown command: {kind}"),
        ));
    }
    match serde_json::from_value::<RpcCommand>(v) {
        Ok(c) => Parsed::Command(id, kind, c),
        Err(e) => Parsed::Answer(RpcResponse::err(id, &kind, format!("Invalid command: {e}"))),
    }
}

/// Serves the protocol until stdin ends or a signal arrives; the exit code
/// (0 on EOF, 143 SIGTERM, 129 SIGHUP, 141 when stdout's reader went away,
/// 1 when stdout failed otherwise; the last two with their line on
/// stderr).
pub async fn serve(
    agent: &mut Agent,
    opts: RpcOptions,
    pre: &dyn Preflight,
    input: UnboundedReceiver<Input>,
    out: Out,
) -> i32 {
    let mut ctl = Ctl {
        opts,
        out: out.clone(),
        bash_cancel: None,
        streaming: false,
    };
    let mut input = Inbox::new(input, out.clone());
    let mut backlog = Default::default();
    let code = serve_loop(&mut ctl, agent, pre, &mut input, &mut backlog).await;
    // A broken stdout says why once, whichever way it was noticed.
    match out.failure() {
        Some(reason) => {
            crate::cli::note("pi-run", &reason.message());
            reason.exit_code()
        }
        None if code == crate::cli::EXIT_CLOSED_STDOUT => {
            let reason = crate::interrupt::StopReason::StdoutClosed;
            crate::cli::note("pi-run", &reason.message());
            code
        }
        None => code,
    }
}

/// The idle loop: commands one by one; jobs run in [`Ctl::run`].
async fn serve_loop(
    ctl: &mut Ctl,
    agent: &mut Agent,
    pre: &dyn Preflight,
    input: &mut Inbox,
    backlog: &mut std::collections::VecDeque<String>,
) -> i32 {
    let finish_on_eof = ctl.opts.finish_on_eof;
    loop {
        if ctl.opts.shutdown_requested.as_ref().is_some_and(|f| f()) {
            return 0;
        }
        if let Some(reason) = ctl.out.failure() {
            return reason.exit_code();
        }
        // Stdin ended and nothing is to finish: what was read but not
        // started goes unanswered, as in pi 1.6.0.
        if input.ended() && !finish_on_eof {
            return 0;
        }
        // A run an extension asked for while idle (`sendMessage` with
        // `triggerTurn`, `sendUserMessage`) starts right after the command
        // that asked, before the next one is read.
        if let Some(run) = agent.queue.take_idle_run() {
            let user = match run {
                crate::agent::queue::IdleRun::Custom(c) => Some(AgentMessage::Custom(Box::new(c))),
                crate::agent::queue::IdleRun::User { text } => {
                    let out = ctl.out.clone();
                    let mut emit = |v: &Event<'_>| {
                        out.record(v);
                    };
                    pre.prepare(agent, user_message(&text, &[]), &mut emit)
                        .await
                }
            };
            if let Some(user) = user {
                if let Some(code) = ctl.run(agent, Job::Prompt(user), input, backlog).await {
                    return code;
                }
            }
            continue;
        }
        let next = match backlog.pop_front() {
            Some(l) => Input::Line(l),
            // Stdin ended earlier and everything read is done.
            None if input.ended() => return 0,
            None => input.recv().await,
        };
        let line = match next {
            Input::Eof if finish_on_eof => {
                ctl.ui_gone();
                continue;
            }
            Input::Eof => return 0,
            Input::Signal(code) => return code,
            Input::TooLong => continue,
            Input::Line(l) => l,
        };
        if line.trim().is_empty() {
            continue;
        }
        let (id, kind, cmd) = match parse(&line) {
            Parsed::Answer(r) => {
                ctl.out.record(&r);
                continue;
            }
            Parsed::Ui(v) => {
                ctl.ui_answer(v);
                continue;
            }
            Parsed::Command(id, kind, cmd) => (id, kind, cmd),
        };
        let job = match cmd {
            RpcCommand::Prompt {
                message, images, ..
            } => {
                let msg = user_message(&message, &images);
                let out = ctl.out.clone();
                let mut emit = |v: &Event<'_>| {
                    out.record(v);
                };
                // An extension command's dialogs are answered meanwhile;
                // other commands wait their turn.
                let mut exit = None;
                let prepared = {
                    let fut = pre.prepare(agent, msg, &mut emit);
                    tokio::pin!(fut);
                    loop {
                        tokio::select! {
                            r = &mut fut => break r,
                            inp = input.recv() => match inp {
                                Input::Line(l) => match parse(&l) {
                                    Parsed::Ui(v) => ctl.ui_answer(v),
                                    _ => backlog.push_back(l),
                                },
                                Input::Signal(code) => { exit = Some(code); ctl.ui_gone(); }
                                // The prompt is answered and its run
                                // starts already aborted (see `run`), as
                                // when EOF comes right after it started.
                                Input::Eof => ctl.ui_gone(),
                                Input::TooLong => {}
                            },
                        }
                    }
                };
                if let Some(code) = exit {
                    return code;
                }
                match prepared {
                    Some(u) => {
                        ctl.out.record(&RpcResponse::ok(
                            id,
                            &kind,
                            Some(json!({"disposition": "started"})),
                        ));
                        Job::Prompt(u)
                    }
                    None => {
                        ctl.out.record(&RpcResponse::ok(
                            id,
                            &kind,
                            Some(json!({"disposition": "handled"})),
                        ));
                        continue;
                    }
                }
            }
            RpcCommand::Bash {
                command,
                exclude_from_context,
            } => {
                match ctl
                    .bash(agent, &id, &command, exclude_from_context, input, backlog)
                    .await
                {
                    Ok(Some(code)) => return code,
                    Ok(None) => {}
                    Err(e) => {
                        ctl.out.record(&RpcResponse::err(id, &kind, e));
                    }
                }
                continue;
            }
            // The client's commands are read while it runs, as pi does.
            RpcCommand::Compact {
                custom_instructions,
            } => Job::Compact {
                id,
                instructions: custom_instructions,
            },
            RpcCommand::NewSession { .. }
            | RpcCommand::SwitchSession { .. }
            | RpcCommand::Fork { .. }
            | RpcCommand::Clone => {
                let what = match cmd {
                    RpcCommand::NewSession { parent_session } => replace::Replacement::New {
                        parent: parent_session,
                    },
                    RpcCommand::SwitchSession { session_path } => {
                        replace::Replacement::Switch { path: session_path }
                    }
                    RpcCommand::Fork { entry_id } => replace::Replacement::Fork { entry_id },
                    _ => replace::Replacement::Clone,
                };
                let r = ctl.replace(agent, what).await;
                ctl.respond(id, &kind, r);
                continue;
            }
            other => {
                let r = match ctl.idle(agent, other) {
                    Ok(data) => RpcResponse::ok(id, &kind, data),
                    Err(e) => RpcResponse::err(id, &kind, e),
                };
                ctl.out.record(&r);
                continue;
            }
        };
        if let Some(code) = ctl.run(agent, job, input, backlog).await {
            return code;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_answers_bad_json_unknown_and_keeps_the_id() {
        let Parsed::Answer(r) = parse("{\"type\": \"get_state\"") else {
            panic!("bad JSON is answered");
        };
        assert_eq!(r.command, "parse");
        assert!(r.id.is_none());
        assert!(r.error.unwrap().starts_with("Failed to parse command: "));
        let Parsed::Answer(r) = parse(r#"{"id":"x1","type":"no_such_command"}"#) else {
            panic!("unknown is answered");
        };
        assert_eq!(r.id, Some(json!("x1")));
        assert_eq!(r.command, "no_such_command");
        assert_eq!(r.error.as_deref(), Some("Unknown command: no_such_command"));
        assert!(matches!(
            parse(r#"{"id":1,"type":"steer","message":"m"}"#),
            Parsed::Command(Some(_), _, RpcCommand::Steer { .. })
        ));
    }

    #[test]
    fn persist_setting_keeps_other_keys_and_refuses_a_broken_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("settings.json"),
            r#"{"theme":"dark","compaction":{"reserveTokens":5}}"#,
        )
        .unwrap();
        persist_setting(d.path(), &["compaction", "enabled"], false.into()).unwrap();
        persist_setting(d.path(), &["steeringMode"], "all".into()).unwrap();
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("settings.json")).unwrap())
                .unwrap();
        assert_eq!(
            v,
            json!({"theme":"dark","compaction":{"reserveTokens":5,"enabled":false},"steeringMode":"all"})
        );
        std::fs::write(d.path().join("settings.json"), "{broken").unwrap();
        assert!(persist_setting(d.path(), &["steeringMode"], "all".into()).is_err());
        assert_eq!(
            std::fs::read_to_string(d.path().join("settings.json")).unwrap(),
            "{broken"
        );
    }
}
