//! `pi-run --mode rpc`: pi 1.6.0's RPC protocol (reference §2) over the
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
mod inquire;
pub mod io;
mod replace;
pub mod ui;

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
use crate::format::rpc::{
    RpcCommand, RpcContextUsage, RpcResponse, RpcSessionStats, RpcState, RpcTokens, COMMANDS,
};
use crate::format::{AgentMessage, ContentBlock, Entry, Num, UserContent};
use crate::model::ModelRegistry;
use crate::session::store::SessionStore;
use crate::timefmt::now_ms;

pub use io::{Inbox, Input, Out};

/// A future that may borrow the agent (not `Send`: it holds the emitter).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What the caller does with a prompt before it runs (extension commands,
/// `input` hooks, template and skill expansion); `None`: it was handled.
pub trait Preflight {
    fn prepare<'a>(
        &'a self,
        agent: &'a mut Agent,
        user: AgentMessage,
        emit: &'a mut dyn FnMut(&Value),
    ) -> LocalFuture<'a, Option<AgentMessage>>;
}

/// Runs every prompt as it is.
pub struct NoPreflight;

impl Preflight for NoPreflight {
    fn prepare<'a>(
        &'a self,
        _agent: &'a mut Agent,
        user: AgentMessage,
        _emit: &'a mut dyn FnMut(&Value),
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
                    let mut emit = |v: &Value| {
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
                let mut emit = |v: &Value| {
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

/// A `prompt` sent while the `compact` command runs (pi 1.6.0's text).
const COMPACTING: &str =
    "Cannot submit a prompt while compaction is in progress. Wait for compaction to finish and retry.";

/// What the server runs while it goes on reading commands.
enum Job {
    /// A prompt's run.
    Prompt(AgentMessage),
    /// The `compact` command (answered when it ends).
    Compact {
        id: Option<Value>,
        instructions: Option<String>,
    },
}

impl Ctl {
    fn ui_answer(&self, v: Value) {
        if let Some(ui) = &self.opts.ui {
            ui.answer(v);
        }
    }

    /// The client is gone: open dialogs resolve with their defaults.
    fn ui_gone(&self) {
        if let Some(ui) = &self.opts.ui {
            ui.cancel_all();
        }
    }

    fn respond(&self, id: Option<Value>, kind: &str, r: Result<Option<Value>, String>) {
        let r = match r {
            Ok(d) => RpcResponse::ok(id, kind, d),
            Err(e) => RpcResponse::err(id, kind, e),
        };
        self.out.record(&r);
    }

    fn queue_update(&self, agent_queue: &crate::agent::queue::MessageQueue) {
        let (s, f) = agent_queue.listed();
        self.out.record(&events::queue_update(&s, &f));
    }

    /// `steer` / `follow_up` / a queued `prompt`: listed, reported, queued.
    fn enqueue(
        &self,
        queue: &crate::agent::queue::MessageQueue,
        kind: QueueKind,
        text: &str,
        images: &[Value],
    ) -> Option<Value> {
        queue.enqueue_listed(kind, user_message(text, images), text.to_string());
        self.queue_update(queue);
        Some(json!({"disposition": "queued"}))
    }

    /// `steer` / `follow_up`: queued, unless the text runs an extension
    /// command — that only runs from `prompt` (pi refuses to queue it).
    fn queue_command(
        &self,
        queue: &crate::agent::queue::MessageQueue,
        kind: QueueKind,
        text: &str,
        images: &[Value],
    ) -> Result<Option<Value>, String> {
        if let Some(name) = text.strip_prefix('/') {
            let name = name.split_whitespace().next().unwrap_or("");
            let ext = self
                .opts
                .commands
                .iter()
                .any(|c| c["source"] == "extension" && c["name"] == name);
            if ext {
                return Err(format!(
                    "Extension command \"/{name}\" cannot be queued. Use prompt() or execute the command when not streaming."
                ));
            }
        }
        Ok(self.enqueue(queue, kind, text, images))
    }

    /// One prompt's run or one compaction, reading commands while it goes
    /// on. `Some(code)`: exit (a signal, or EOF after the run was aborted).
    async fn run(
        &mut self,
        agent: &mut Agent,
        job: Job,
        input: &mut Inbox,
        backlog: &mut std::collections::VecDeque<String>,
    ) -> Option<i32> {
        let cancel = CancellationToken::new();
        agent.cancel = cancel.clone();
        let mut exit = None;
        // Stdin ended before the job began (while its prompt was being
        // prepared): it stops at once, as it would have a moment later.
        if input.ended() && !self.opts.finish_on_eof {
            cancel.cancel();
            exit = Some(0);
        }
        let queue = Arc::clone(&agent.queue);
        // What read-only commands answer while the run streams (pi answers
        // them at once from the agent's state): the context as the run
        // began and the messages it ended since.
        let base: Vec<AgentMessage> = agent
            .store
            .session
            .context(None)
            .messages
            .iter()
            .map(|(_, m)| (**m).clone())
            .collect();
        let ended: Arc<std::sync::Mutex<Vec<AgentMessage>>> = Arc::default();
        let (compact_id, prompting) = match &job {
            Job::Compact { id, .. } => (Some(id.clone()), false),
            Job::Prompt(_) => (None, true),
        };
        let inquiries = inquire::Asked::new(Ctl {
            opts: self.opts.clone(),
            out: self.out.clone(),
            bash_cancel: None,
            streaming: prompting,
        });
        agent.inquiries = Some(inquiries.clone());
        let mut aborts: Vec<Option<Value>> = Vec::new();
        let compacted;
        // A `bash` sent mid-run runs at once (an extension's `user_bash`
        // handler is asked first, also at once, as pi 1.6.0 does); its
        // message joins the session after the run.
        let bash_here = bash::where_(agent);
        let bash_hooks = agent.ext.hooks.clone().filter(|h| h.handles("user_bash"));
        let mut asking: Option<bash::Asking<'_>> = None;
        let mut user_bash: Option<bash::UserBash> = None;
        let mut bashed: Vec<AgentMessage> = Vec::new();
        {
            let out = self.out.clone();
            let live = Arc::clone(&ended);
            let stop = cancel.clone();
            let mut emit = move |v: &Value| {
                if v.get("type").and_then(Value::as_str) == Some("message_end") {
                    if let Some(m) = v
                        .get("message")
                        .and_then(|m| serde_json::from_value::<AgentMessage>(m.clone()).ok())
                    {
                        if let Ok(mut l) = live.lock() {
                            l.push(m);
                        }
                    }
                }
                // Nobody reads the stream any more: stop the run (the
                // session keeps what was written).
                if !out.record(v) {
                    stop.cancel();
                }
            };
            let (ag, em) = (&mut *agent, &mut emit);
            let fut: LocalFuture<'_, Option<Compacted>> = match job {
                Job::Prompt(user) => Box::pin(async move {
                    ag.run(user, em).await;
                    None
                }),
                Job::Compact { instructions, .. } => Box::pin(async move {
                    let done = ag
                        .compact_now(CompactionReason::Manual, instructions.as_deref(), false, em)
                        .await;
                    Some(done)
                }),
            };
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    r = &mut fut => break compacted = r,
                    (asked, answer) = bash::next_answer(&mut asking) => {
                        if let Some(r) = self.bash_answered(asked, answer, bash_here.clone(), bash_hooks.as_deref(), &mut bashed) {
                            user_bash = Some(r);
                        }
                    }
                    step = bash::next_step(&mut user_bash) => match step {
                        bash::Step::Update(text) => {
                            if let Some(b) = user_bash.as_mut() {
                                b.update(self, text);
                            }
                        }
                        bash::Step::Done(done) => {
                            if let Some(b) = user_bash.take() {
                                let (b, r) = b.finish(self, done);
                                bashed.push(bash::message(&b.command, b.exclude, &r));
                                self.respond(b.id, "bash", Ok(serde_json::to_value(r).ok()));
                            }
                        }
                    },
                    inp = input.recv() => match inp {
                        Input::Line(line) => {
                            if line.trim().is_empty() {
                                continue;
                            }
                            let (id, kind, cmd) = match parse(&line) {
                                Parsed::Answer(r) => { self.out.record(&r); continue; }
                                Parsed::Ui(v) => { self.ui_answer(v); continue; }
                                Parsed::Command(id, kind, cmd) => (id, kind, cmd),
                            };
                            // The `compact` command refuses prompts (steering
                            // and follow-ups are queued), as pi 1.6.0 does.
                            if !prompting && matches!(cmd, RpcCommand::Prompt { .. }) {
                                self.respond(id, &kind, Err(COMPACTING.to_string()));
                                continue;
                            }
                            match cmd {
                                RpcCommand::Prompt { message, images, streaming_behavior } => {
                                    let r = match streaming_behavior.as_deref() {
                                        Some("steer") => Ok(self.enqueue(&queue, QueueKind::Steering, &message, &images)),
                                        Some("followUp") => Ok(self.enqueue(&queue, QueueKind::FollowUp, &message, &images)),
                                        _ => Err("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.".to_string()),
                                    };
                                    self.respond(id, &kind, r);
                                }
                                RpcCommand::Steer { message, images } => {
                                    let r = self.queue_command(&queue, QueueKind::Steering, &message, &images);
                                    self.respond(id, &kind, r);
                                }
                                RpcCommand::FollowUp { message, images } => {
                                    let r = self.queue_command(&queue, QueueKind::FollowUp, &message, &images);
                                    self.respond(id, &kind, r);
                                }
                                RpcCommand::Abort => {
                                    cancel.cancel();
                                    aborts.push(id);
                                }
                                RpcCommand::ClearQueue => {
                                    let r = self.clear_queue(&queue);
                                    self.respond(id, &kind, Ok(r));
                                }
                                RpcCommand::SetSteeringMode { mode } => {
                                    let r = self.set_mode(&queue, QueueKind::Steering, &mode);
                                    self.respond(id, &kind, r);
                                }
                                RpcCommand::SetFollowUpMode { mode } => {
                                    let r = self.set_mode(&queue, QueueKind::FollowUp, &mode);
                                    self.respond(id, &kind, r);
                                }
                                RpcCommand::Bash { command, exclude_from_context }
                                    if prompting && user_bash.is_none() && asking.is_none() =>
                                {
                                    let asked = bash::Asked { id, command, exclude: exclude_from_context };
                                    match &bash_hooks {
                                        Some(h) => asking = Some(bash::ask(h.as_ref(), asked, &bash_here.0)),
                                        None => user_bash = Some(asked.start(bash_here.clone())),
                                    }
                                }
                                RpcCommand::AbortRetry | RpcCommand::AbortBash => {
                                    if let (RpcCommand::AbortBash, Some(b)) = (&cmd, &user_bash) {
                                        b.cancel.cancel();
                                    }
                                    self.respond(id, &kind, Ok(None));
                                }
                                RpcCommand::GetMessages | RpcCommand::GetLastAssistantText => {
                                    let l = ended.lock().map(|l| l.clone()).unwrap_or_default();
                                    let msgs: Vec<&AgentMessage> = base.iter().chain(l.iter()).collect();
                                    let data = match cmd {
                                        RpcCommand::GetMessages => json!({ "messages": msgs }),
                                        _ => last_assistant_text(msgs.into_iter()),
                                    };
                                    self.respond(id, &kind, Ok(Some(data)));
                                }
                                RpcCommand::GetCommands => {
                                    self.respond(id, &kind, Ok(Some(json!({ "commands": self.opts.commands }))));
                                }
                                RpcCommand::GetState
                                | RpcCommand::GetAvailableModels
                                | RpcCommand::GetAvailableThinkingLevels
                                | RpcCommand::GetEntries { .. }
                                | RpcCommand::GetTree
                                | RpcCommand::GetForkMessages
                                | RpcCommand::GetSessionStats
                                | RpcCommand::SetModel { .. }
                                | RpcCommand::CycleModel
                                | RpcCommand::SetThinkingLevel { .. }
                                | RpcCommand::CycleThinkingLevel => inquiries.ask(id, kind, cmd),
                                // A replacement aborts the run first (pi
                                // does), then goes on once it settled.
                                // So does `compact` (pi 1.6.0 aborts the
                                // streaming run, then compacts).
                                RpcCommand::NewSession { .. }
                                | RpcCommand::SwitchSession { .. }
                                | RpcCommand::Fork { .. }
                                | RpcCommand::Clone
                                | RpcCommand::Compact { .. } => {
                                    cancel.cancel();
                                    backlog.push_back(line);
                                }
                                // Everything else needs the agent: answered
                                // once the run settled, in order.
                                _ => backlog.push_back(line),
                            }
                        }
                        Input::Signal(code) => {
                            exit = Some(code);
                            cancel.cancel();
                            self.ui_gone();
                        }
                        // The client is gone: stop the run, keep the
                        // session as written, exit 0 — or let the job
                        // finish first when asked to.
                        Input::Eof => {
                            if !self.opts.finish_on_eof {
                                exit = Some(0);
                                cancel.cancel();
                            }
                            self.ui_gone();
                        }
                        Input::TooLong => {}
                    },
                }
            }
        }
        // What the run had no wait left to answer.
        agent.inquiries = None;
        crate::agent::hooks::Inquiries::serve(&*inquiries, agent);
        // Handlers still deciding about a `bash` finish now (their calls
        // into the agent served meanwhile).
        if let Some(h) = bash_hooks.as_ref().filter(|_| asking.is_some()) {
            let out = self.out.clone();
            let mut emit = |v: &Value| {
                out.record(v);
            };
            let (asked, answer) = loop {
                tokio::select! {
                    r = bash::next_answer(&mut asking) => break r,
                    _ = h.ops_ready() => agent.apply_pending(&mut emit),
                }
            };
            user_bash = self.bash_answered(
                asked,
                answer,
                bash_here.clone(),
                Some(h.as_ref()),
                &mut bashed,
            );
        }
        if let Some(b) = user_bash.take() {
            let (id, command, exclude) = (b.id.clone(), b.command.clone(), b.exclude);
            let (r, e) = self.bash_to_end(b, input, backlog).await;
            exit = exit.or(e);
            bashed.push(bash::message(&command, exclude, &r));
            self.respond(id, "bash", Ok(serde_json::to_value(r).ok()));
        }
        for m in bashed {
            let e = agent.store.message_entry(m);
            if let Err(e) = self.append(agent, e) {
                eprintln!("pi-run: {e}");
            }
        }
        if let (Some(id), Some(done)) = (compact_id, compacted) {
            let r = match done {
                Compacted::Done(result) => Ok(serde_json::to_value(&*result).ok()),
                Compacted::Nothing(e) | Compacted::Failed(e) => Err(e),
            };
            self.respond(id, "compact", r);
        }
        for id in aborts {
            self.respond(id, "abort", Ok(None));
        }
        // Idle work (a session replacement's hooks, say) is not part of
        // an aborted job: it waits for its handlers as usual.
        agent.cancel = CancellationToken::new();
        exit
    }

    fn clear_queue(&self, queue: &crate::agent::queue::MessageQueue) -> Option<Value> {
        let (s, f) = queue.clear();
        self.queue_update(queue);
        Some(json!({"steering": s, "followUp": f}))
    }

    fn set_mode(
        &self,
        queue: &crate::agent::queue::MessageQueue,
        kind: QueueKind,
        mode: &str,
    ) -> Result<Option<Value>, String> {
        let m = match mode {
            "all" => DrainMode::All,
            "one-at-a-time" => DrainMode::OneAtATime,
            other => return Err(format!("Invalid mode: {other}")),
        };
        let key = match kind {
            QueueKind::Steering => "steeringMode",
            QueueKind::FollowUp => "followUpMode",
        };
        persist_setting(&self.opts.agent_dir, &[key], Value::String(mode.into()))?;
        queue.set_mode(kind, m);
        Ok(None)
    }

    fn model_json(&self, agent: &Agent) -> Option<Value> {
        let m = &agent.opts.model;
        match self.opts.registry.as_ref().and_then(|r| r.pi_json(m)) {
            Some(raw) => Some(Value::Object(raw)),
            None => serde_json::to_value(m).ok(),
        }
    }

    fn state(&self, agent: &Agent, streaming: bool) -> RpcState {
        let (s, f) = agent.queue.modes();
        RpcState {
            model: self.model_json(agent),
            thinking_level: agent.opts.thinking.as_str().to_string(),
            is_streaming: streaming,
            is_compacting: agent.compacting,
            steering_mode: mode_name(s),
            follow_up_mode: mode_name(f),
            session_file: agent.store.path().map(|p| p.display().to_string()),
            session_id: agent.store.session.id().to_string(),
            session_name: agent.store.session.name(),
            auto_compaction_enabled: self.opts.auto_compaction,
            message_count: agent.store.session.context(None).messages.len(),
            pending_message_count: agent.queue.pending_count(),
            sandbox: agent
                .ext
                .limits
                .sandbox
                .is_on()
                .then(|| agent.ext.limits.sandbox.state()),
        }
    }

    fn models(&self, agent: &Agent) -> Vec<crate::format::model::Model> {
        models(self.opts.registry.as_deref(), agent)
    }

    fn thinking_map(&self, agent: &Agent) -> Option<Map<String, Value>> {
        thinking_map(self.opts.registry.as_deref(), agent)
    }

    fn levels(&self, agent: &Agent) -> Vec<ThinkingLevel> {
        levels(self.opts.registry.as_deref(), agent)
    }

    fn append(&self, agent: &mut Agent, e: Entry) -> Result<Entry, String> {
        agent
            .store
            .append(e)
            .map_err(|e| format!("cannot write session: {e}"))
    }

    /// Switches to `model` (pi appends `model_change` even when unchanged)
    /// and clamps the thinking level to it.
    fn switch_model(
        &self,
        agent: &mut Agent,
        model: crate::format::model::Model,
    ) -> Result<(), String> {
        let (model, key) = match &self.opts.registry {
            Some(r) => {
                let key = r
                    .api_key(&model.provider, None)
                    .map_err(|e| e.to_string())?;
                let m = r
                    .resolve_headers(&model, key.as_deref())
                    .map_err(|e| e.to_string())?;
                (m, key)
            }
            None => (model, agent.opts.api_key.clone()),
        };
        let e = agent.store.model_change_entry(&model.provider, &model.id);
        self.append(agent, e)?;
        agent.opts.model = model;
        agent.opts.api_key = key;
        let level = agent.opts.thinking;
        self.set_level(agent, level)?;
        Ok(())
    }

    /// Sets the (clamped) level: an entry and `thinking_level_changed`
    /// only when the effective level changes.
    fn set_level(&self, agent: &mut Agent, level: ThinkingLevel) -> Result<ThinkingLevel, String> {
        let map = self.thinking_map(agent);
        let eff = crate::model::select::clamp_thinking(&agent.opts.model, map.as_ref(), level);
        if eff != agent.opts.thinking {
            agent.opts.thinking = eff;
            let e = agent.store.thinking_entry(eff.as_str());
            self.append(agent, e)?;
            self.out
                .record(&json!({"type": "thinking_level_changed", "level": eff.as_str()}));
        }
        Ok(eff)
    }

    /// A command while no run streams.
    fn idle(&mut self, agent: &mut Agent, cmd: RpcCommand) -> Result<Option<Value>, String> {
        if let Some(r) = read_answer(self.opts.registry.as_deref(), agent, &cmd) {
            return r;
        }
        let queue = Arc::clone(&agent.queue);
        match cmd {
            RpcCommand::Prompt { .. } | RpcCommand::Bash { .. } => Ok(None),
            RpcCommand::Steer { message, images } => {
                self.queue_command(&queue, QueueKind::Steering, &message, &images)
            }
            RpcCommand::FollowUp { message, images } => {
                self.queue_command(&queue, QueueKind::FollowUp, &message, &images)
            }
            RpcCommand::Abort | RpcCommand::AbortRetry => Ok(None),
            RpcCommand::AbortBash => {
                if let Some(c) = &self.bash_cancel {
                    c.cancel();
                }
                Ok(None)
            }
            RpcCommand::ClearQueue => Ok(self.clear_queue(&queue)),
            RpcCommand::GetState => {
                Ok(serde_json::to_value(self.state(agent, self.streaming)).ok())
            }
            RpcCommand::SetSteeringMode { mode } => {
                self.set_mode(&queue, QueueKind::Steering, &mode)
            }
            RpcCommand::SetFollowUpMode { mode } => {
                self.set_mode(&queue, QueueKind::FollowUp, &mode)
            }
            RpcCommand::SetAutoCompaction { enabled } => {
                persist_setting(
                    &self.opts.agent_dir,
                    &["compaction", "enabled"],
                    enabled.into(),
                )?;
                self.opts.auto_compaction = enabled;
                agent.auto_compaction = enabled;
                Ok(None)
            }
            RpcCommand::SetAutoRetry { enabled } => {
                persist_setting(&self.opts.agent_dir, &["retry", "enabled"], enabled.into())?;
                agent.opts.retry.enabled = enabled;
                Ok(None)
            }
            RpcCommand::SetModel { provider, model_id } => {
                let m = self
                    .models(agent)
                    .into_iter()
                    .find(|m| m.provider == provider && m.id == model_id)
                    .ok_or_else(|| format!("Model not found: {provider}/{model_id}"))?;
                self.switch_model(agent, m)?;
                Ok(self.model_json(agent))
            }
            RpcCommand::CycleModel => {
                let models = self.models(agent);
                if models.len() <= 1 {
                    return Ok(Some(Value::Null));
                }
                let cur = &agent.opts.model;
                let pos = models
                    .iter()
                    .position(|m| m.provider == cur.provider && m.id == cur.id)
                    .map_or(0, |p| (p + 1) % models.len());
                self.switch_model(agent, models[pos].clone())?;
                Ok(Some(json!({
                    "model": self.model_json(agent),
                    "thinkingLevel": agent.opts.thinking.as_str(),
                    "isScoped": false,
                })))
            }
            RpcCommand::SetThinkingLevel { level } => {
                let l = ThinkingLevel::parse(&level)
                    .ok_or_else(|| format!("Invalid thinking level: {level}"))?;
                self.set_level(agent, l)?;
                Ok(None)
            }
            RpcCommand::CycleThinkingLevel => {
                if !agent.opts.model.reasoning {
                    return Ok(Some(Value::Null));
                }
                let levels = self.levels(agent);
                let pos = levels
                    .iter()
                    .position(|&l| l == agent.opts.thinking)
                    .map_or(0, |p| (p + 1) % levels.len());
                let l = self.set_level(agent, levels[pos])?;
                Ok(Some(json!({ "level": l.as_str() })))
            }
            RpcCommand::GetMessages => {
                let ctx = agent.store.session.context(None);
                let msgs: Vec<&AgentMessage> = ctx.messages.iter().map(|(_, m)| &**m).collect();
                Ok(Some(json!({ "messages": msgs })))
            }
            RpcCommand::GetLastAssistantText => {
                let ctx = agent.store.session.context(None);
                Ok(Some(last_assistant_text(
                    ctx.messages.iter().map(|(_, m)| &**m),
                )))
            }
            RpcCommand::SetSessionName { name } => {
                let name = name.trim();
                if name.is_empty() {
                    return Err("Session name cannot be empty".into());
                }
                self.out
                    .record(&json!({"type": "session_info_changed", "name": name}));
                let e = agent.store.session.new_session_info(name);
                self.append(agent, e)?;
                Ok(None)
            }
            // (Answered by `read_answer`.)
            RpcCommand::GetAvailableModels
            | RpcCommand::GetAvailableThinkingLevels
            | RpcCommand::GetEntries { .. }
            | RpcCommand::GetTree
            | RpcCommand::GetForkMessages
            | RpcCommand::GetSessionStats => Ok(None),
            RpcCommand::GetCommands => Ok(Some(json!({ "commands": self.opts.commands }))),
            RpcCommand::ExportHtml { output_path } => self.export_html(agent, output_path),
            // Answered in the command loop (they await the model or the
            // extensions).
            RpcCommand::Compact { .. }
            | RpcCommand::NewSession { .. }
            | RpcCommand::SwitchSession { .. }
            | RpcCommand::Fork { .. }
            | RpcCommand::Clone => Ok(None),
        }
    }
}

fn models(registry: Option<&ModelRegistry>, agent: &Agent) -> Vec<crate::format::model::Model> {
    match registry {
        Some(r) => r.available().into_iter().cloned().collect(),
        None => vec![agent.opts.model.clone()],
    }
}

fn thinking_map(registry: Option<&ModelRegistry>, agent: &Agent) -> Option<Map<String, Value>> {
    registry.and_then(|r| r.thinking_level_map(&agent.opts.model).cloned())
}

fn levels(registry: Option<&ModelRegistry>, agent: &Agent) -> Vec<ThinkingLevel> {
    let map = thinking_map(registry, agent);
    if !agent.opts.model.reasoning {
        return vec![ThinkingLevel::Off];
    }
    ThinkingLevel::ALL
        .into_iter()
        .filter(|&l| crate::model::select::clamp_thinking(&agent.opts.model, map.as_ref(), l) == l)
        .collect()
}

/// The commands that only read the agent's state and answer the same
/// idle or mid-run (pi answers them at once while a run streams); `None`
/// for every other command.
pub(crate) fn read_answer(
    registry: Option<&ModelRegistry>,
    agent: &Agent,
    cmd: &RpcCommand,
) -> Option<Result<Option<Value>, String>> {
    Some(match cmd {
        RpcCommand::GetAvailableModels => {
            let models: Vec<Value> = models(registry, agent)
                .iter()
                .filter_map(|m| match registry.and_then(|r| r.pi_json(m)) {
                    Some(raw) => Some(Value::Object(raw)),
                    None => serde_json::to_value(m).ok(),
                })
                .collect();
            Ok(Some(json!({ "models": models })))
        }
        RpcCommand::GetAvailableThinkingLevels => {
            let levels: Vec<&str> = levels(registry, agent).iter().map(|l| l.as_str()).collect();
            Ok(Some(json!({ "levels": levels })))
        }
        RpcCommand::GetEntries { since } => {
            let entries = &agent.store.session.entries;
            let start = match since {
                None => Some(0),
                Some(id) => entries
                    .iter()
                    .position(|e| e.id() == id.as_str())
                    .map(|p| p + 1),
            };
            match start {
                Some(start) => Ok(Some(json!({
                    "entries": &entries[start..],
                    "leafId": agent.store.session.leaf_id(),
                }))),
                None => Err(format!(
                    "Entry not found: {}",
                    since.as_deref().unwrap_or("")
                )),
            }
        }
        RpcCommand::GetTree => Ok(Some(tree(&agent.store))),
        RpcCommand::GetForkMessages => {
            let msgs: Vec<Value> = agent
                .store
                .session
                .entries
                .iter()
                .filter_map(|e| match (e, e.message()) {
                    (Entry::Message(m), Some(AgentMessage::User(u))) => {
                        Some(json!({"entryId": m.id, "text": u.content.joined_text("")}))
                    }
                    _ => None,
                })
                .collect();
            Ok(Some(json!({ "messages": msgs })))
        }
        RpcCommand::GetSessionStats => Ok(serde_json::to_value(stats(agent)).ok()),
        _ => return None,
    })
}

/// `get_last_assistant_text` over the context's messages: the last
/// assistant text, skipping blank ones that did not stop normally; `{}`
/// when there is none.
fn last_assistant_text<'a>(messages: impl DoubleEndedIterator<Item = &'a AgentMessage>) -> Value {
    for m in messages.rev() {
        if let AgentMessage::Assistant(a) = m {
            let text = crate::format::message::blocks_text(&a.content, "");
            if text.trim().is_empty() && a.stop_reason != "stop" {
                continue;
            }
            return json!({ "text": text });
        }
    }
    json!({})
}

/// The `get_commands` entry of pi's built-in `/mcp` command (listed after
/// the extensions' commands while MCP is on; [`crate::mcp::status`]
/// answers it).
pub fn builtin_mcp_command() -> Value {
    json!({
        "name": crate::mcp::status::COMMAND_NAME,
        "description": crate::mcp::status::COMMAND_DESCRIPTION,
        "source": "extension",
        "sourceInfo": {"path": "builtin:mcp", "source": "builtin", "scope": "temporary", "origin": "top-level"},
    })
}

/// `get_commands`' list: extension commands, then prompt templates, then
/// skills as `skill:<name>`, each with pi's `sourceInfo`.
pub fn command_list(
    ext_commands: &[(String, crate::format::extension::CommandSpec)],
    resources: &crate::resources::Resources,
) -> Vec<Value> {
    let info =
        |path: &std::path::Path, source: &Value, scope: &Value, base: Option<&std::path::Path>| {
            let mut m = Map::new();
            m.insert("path".into(), path.display().to_string().into());
            m.insert("source".into(), source.clone());
            m.insert("scope".into(), scope.clone());
            m.insert("origin".into(), "top-level".into());
            if let Some(b) = base {
                m.insert("baseDir".into(), b.display().to_string().into());
            }
            Value::Object(m)
        };
    // pi names auto-discovered resources (the project's `.pi/` and the
    // agent dir) `auto`, with the folder holding `prompts/` or `skills/`
    // as `baseDir` (observed); other origins keep this toolkit's name.
    let origin = |source: crate::format::resources::Source, path: &std::path::Path, dir: &str| {
        use crate::format::resources::Source;
        match source {
            Source::Project | Source::User => {
                let base = path
                    .ancestors()
                    .find(|a| a.file_name().is_some_and(|n| n == dir))
                    .and_then(|a| a.parent())
                    .map(std::path::Path::to_path_buf);
                (Value::String("auto".into()), base)
            }
            other => (
                serde_json::to_value(other).unwrap_or(Value::Null),
                path.parent().map(std::path::Path::to_path_buf),
            ),
        }
    };
    // An extension's command: `-e` ones are pi's `cli`/`temporary` without
    // a `baseDir` (capture 06, 09); discovered ones as the resources above.
    let ext_info = |path: &std::path::Path| {
        use crate::format::resources::Source;
        let found = resources
            .extensions
            .iter()
            .find(|e| path == e.path || path.starts_with(&e.path));
        match found {
            Some(e) if matches!(e.source, Source::Project | Source::User) => {
                let (src, base) = origin(e.source, path, "extensions");
                let scope = serde_json::to_value(e.scope).unwrap_or(Value::Null);
                info(path, &src, &scope, base.as_deref())
            }
            _ => info(path, &"cli".into(), &"temporary".into(), None),
        }
    };
    let mut out = Vec::new();
    for (path, c) in ext_commands {
        let mut m = Map::new();
        m.insert("name".into(), c.name.clone().into());
        if let Some(d) = &c.description {
            m.insert("description".into(), d.clone().into());
        }
        m.insert("source".into(), "extension".into());
        m.insert("sourceInfo".into(), ext_info(std::path::Path::new(path)));
        out.push(Value::Object(m));
    }
    for t in &resources.prompts {
        let (src, base) = origin(t.source, &t.path, "prompts");
        let scope = serde_json::to_value(t.scope).unwrap_or(Value::Null);
        let mut m = Map::new();
        m.insert("name".into(), t.name.clone().into());
        if !t.description.is_empty() {
            m.insert("description".into(), t.description.clone().into());
        }
        m.insert("source".into(), "prompt".into());
        m.insert(
            "sourceInfo".into(),
            info(&t.path, &src, &scope, base.as_deref()),
        );
        out.push(Value::Object(m));
    }
    for sk in &resources.skills {
        let (src, base) = origin(sk.source, &sk.path, "skills");
        let scope = serde_json::to_value(sk.scope).unwrap_or(Value::Null);
        let mut m = Map::new();
        m.insert("name".into(), format!("skill:{}", sk.name).into());
        if !sk.description.is_empty() {
            m.insert("description".into(), sk.description.clone().into());
        }
        m.insert("source".into(), "skill".into());
        m.insert(
            "sourceInfo".into(),
            info(&sk.path, &src, &scope, base.as_deref()),
        );
        out.push(Value::Object(m));
    }
    out
}

/// `get_tree`: `{tree:[{entry, children, label?}], leafId}`.
fn tree(store: &SessionStore) -> Value {
    let s = &store.session;
    let (roots, kids) = s.children();
    let labels = s.labels();
    fn node(
        s: &crate::session::Session,
        kids: &crate::session::tree::Children,
        labels: &std::collections::HashMap<String, String>,
        i: usize,
    ) -> Value {
        let e = &s.entries[i];
        let mut m = Map::new();
        m.insert(
            "entry".into(),
            serde_json::to_value(e).unwrap_or(Value::Null),
        );
        let children: Vec<Value> = kids
            .of(i)
            .iter()
            .map(|&c| node(s, kids, labels, c as usize))
            .collect();
        m.insert("children".into(), Value::Array(children));
        if let Some(l) = labels.get(e.id()) {
            m.insert("label".into(), Value::String(l.clone()));
        }
        Value::Object(m)
    }
    let tree: Vec<Value> = roots.iter().map(|&r| node(s, &kids, &labels, r)).collect();
    json!({ "tree": tree, "leafId": s.leaf_id() })
}

/// `get_session_stats`: every entry of the file counts; the context usage
/// is the last answered request's tokens on the branch (none after a
/// compaction).
fn stats(agent: &Agent) -> RpcSessionStats {
    let st = agent.store.session.stats();
    let count = |r: &str| st.messages.get(r).copied().unwrap_or(0);
    let ctx = agent.store.session.context(None);
    // The last valid usage plus an estimate of what came after it (pi:
    // mid-run the prompt's user message counts).
    let mut tokens = None;
    let mut after = 0u64;
    for (_, m) in ctx.messages.iter().rev() {
        match &**m {
            AgentMessage::Assistant(a)
                if a.stop_reason != "error" && a.stop_reason != "aborted" =>
            {
                let u = &a.usage;
                let t = u.total_tokens.as_u64();
                tokens = Some(if t > 0 {
                    t
                } else {
                    u.input.as_u64()
                        + u.output.as_u64()
                        + u.cache_read.as_u64()
                        + u.cache_write.as_u64()
                });
                break;
            }
            other => after += crate::session::compact::estimate_tokens(other),
        }
    }
    let tokens = tokens.map(|t| t + after);
    let compacted = agent.store.session.projection(None).usage_is_stale();
    let window = agent.opts.model.context_window;
    let context_usage = if window == 0 {
        None
    } else if compacted {
        Some(RpcContextUsage {
            tokens: None,
            context_window: window,
            percent: None,
        })
    } else {
        let t = tokens.unwrap_or(0);
        Some(RpcContextUsage {
            tokens: Some(t),
            context_window: window,
            percent: Some(t as f64 / window as f64 * 100.0),
        })
    };
    RpcSessionStats {
        session_file: agent.store.path().map(|p| p.display().to_string()),
        session_id: agent.store.session.id().to_string(),
        user_messages: count("user"),
        assistant_messages: count("assistant"),
        tool_calls: st.tool_calls,
        tool_results: count("toolResult"),
        total_messages: st.messages.values().sum(),
        tokens: RpcTokens {
            input: st.total.input,
            output: st.total.output,
            cache_read: st.total.cache_read,
            cache_write: st.total.cache_write,
            total: st.total.total_tokens,
        },
        cost: st.total.cost,
        context_usage,
    }
}

/// Sets `path` in the global `settings.json` (created when missing), as
/// pi persists queue modes and the auto-compaction/retry switches. A file
/// that does not parse is left alone and named in the error.
pub fn persist_setting(
    agent_dir: &std::path::Path,
    path: &[&str],
    value: Value,
) -> Result<(), String> {
    let file = agent_dir.join("settings.json");
    let mut root = if file.exists() {
        crate::settings::read_file(&file).map_err(|e| e.to_string())?
    } else {
        Map::new()
    };
    let mut cur = &mut root;
    for (i, k) in path.iter().enumerate() {
        if i + 1 == path.len() {
            cur.insert((*k).to_string(), value);
            break;
        }
        let slot = cur
            .entry((*k).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(next) = slot else {
            return Ok(());
        };
        cur = next;
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(root))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    text.push('\n');
    std::fs::create_dir_all(agent_dir).map_err(|e| format!("{}: {e}", agent_dir.display()))?;
    crate::session::write::write_atomic(&file, text.as_bytes(), true)
        .map_err(|e| format!("{}: {e}", file.display()))
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
