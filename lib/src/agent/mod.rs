//! The agent loop (seed 004): user message → turns → tool calls → results →
//! next turn, until the model answers without tool calls.
//!
//! Each run: the system prompt sections are diffed against what the branch
//! already records and a patch is appended when they changed; the user
//! message is appended; then each turn streams one assistant message,
//! validates and runs its tool calls in parallel (results emitted in call
//! order), and appends everything to the session the moment it exists.
//! Transient provider errors are retried with pi's backoff; `--max-turns`,
//! the run's budget ([`budget`]) and cancellation (SIGINT) end the run
//! early.

// The conversion lives with the session (compaction needs it too, and the
// session sits below the agent); the old path stays.
pub use crate::session::llm as convert;
pub mod autocompact;
pub mod budget;
pub mod events;
pub mod hooks;
pub mod nested;
pub mod queue;
mod run_tools;
/// Retry rules live with the providers (summary calls in `session/` use
/// them too); re-exported under their old path.
pub use crate::provider::retry;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::format::entry::ContextEditEntry;
use crate::format::message::{AssistantMessage, ToolCallBlock};
use crate::format::model::{Model, ThinkingLevel};
use crate::format::{AgentMessage, ContentBlock, Entry, Num};
use crate::prompt::{diff, PromptState, PromptTool};
use crate::provider::{self, Request, StreamEvent};
use crate::session::store::SessionStore;
use crate::timefmt::{now_iso, now_ms};
use crate::tools::Tool;

/// The error text of a call stopped by an abort before it ran (pi's).
const ABORTED: &str = "Operation aborted";

/// How long the hooks are waited for, in all, once a run is aborted (see
/// [`Agent::wait`]).
pub const ABORT_GRACE: Duration = Duration::from_secs(1);

pub use hooks::{AgentExt, Hooks};
pub use retry::RetrySettings;

/// Receives every event of the run as a JSON object.
pub type Emit<'a> = &'a mut dyn FnMut(&Value);

/// How the agent runs.
pub struct AgentOptions {
    pub model: Model,
    pub api_key: Option<String>,
    pub thinking: ThinkingLevel,
    /// Active tools, in order.
    pub tools: Vec<Arc<dyn Tool>>,
    pub cwd: PathBuf,
    /// The desired system-prompt sections (see `prompt::plan`); diffed
    /// against what the branch records before each run and turn.
    pub sections: Vec<(String, String)>,
    /// A whole prompt replacing the sectioned one in requests (never
    /// recorded), e.g. `pi-prompt system | pi-run --system-from -`.
    pub forced_prompt: Option<String>,
    pub max_turns: Option<u32>,
    pub idle_timeout: Duration,
    /// `images.autoResize` (default true).
    pub auto_resize_images: bool,
    pub retry: RetrySettings,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The last assistant message.
    pub last: Option<AssistantMessage>,
    /// Why the run failed (`None` on success).
    pub error: Option<String>,
    pub aborted: bool,
    /// The limit that ended it (the turn limit; the budget says which
    /// other limit stopped an aborted run).
    pub limit: Option<budget::Limit>,
}

/// A tool set and its tools' definitions as JSON.
type ToolValues = (Vec<Arc<dyn Tool>>, Vec<Value>);

/// The agent: a session, the tools, a model, and whoever watches it.
pub struct Agent {
    pub opts: AgentOptions,
    pub store: SessionStore,
    pub cancel: CancellationToken,
    /// Hooks, approval gates and the final policy; none by default.
    pub ext: AgentExt,
    /// Steering, follow-up and next-turn messages (extensions' and, later,
    /// an RPC client's), delivered with pi's rules.
    pub queue: Arc<queue::MessageQueue>,
    /// Automatic compaction (`compaction.enabled`; off unless the caller
    /// turns it on) and its settings for this model.
    pub auto_compaction: bool,
    pub compaction: crate::session::compact::CompactionSettings,
    /// Questions answered while a run goes on (see [`hooks::Inquiries`]).
    pub inquiries: Option<Arc<dyn hooks::Inquiries>>,
    /// A compaction is running ([`Agent::compact_now`]; pi's
    /// `isCompacting`).
    pub compacting: bool,
    /// The JSON Schema the final answer must follow, handed to APIs that
    /// can constrain a reply to it (`--output-schema`).
    pub response_schema: Option<Arc<provider::schema::ResponseSchema>>,
    /// This run's whole prompt from `before_agent_start` (sent, never
    /// recorded).
    run_forced: Option<String>,
    /// This run's custom messages from `before_agent_start`, added after
    /// the user message.
    run_extra: Vec<AgentMessage>,
    /// The tools' definitions as JSON and the tool set they were built
    /// from (held, so compared by identity): every turn compares them with
    /// the recorded prompt, and a tool's definition does not change.
    tool_values: Option<ToolValues>,
    /// When the hooks stop being waited for in an aborted run (see
    /// [`Agent::wait`]); set by the first wait after the abort.
    wind_down: Option<tokio::time::Instant>,
}

fn io_error(e: std::io::Error, store: &SessionStore) -> String {
    match store.path() {
        Some(p) => format!("{}: cannot write session: {e}", p.display()),
        None => format!("cannot write session: {e}"),
    }
}

/// Puts an [`Agent`] together: what it watches with, its message queue
/// and its compaction settings are given here, before the first run.
pub struct AgentBuilder {
    agent: Agent,
}

impl AgentBuilder {
    /// The hooks, approval gates, final policy and late tools.
    pub fn ext(mut self, ext: AgentExt) -> Self {
        self.agent.ext = ext;
        self
    }

    /// The steering and follow-up queue (shared with whoever feeds it).
    pub fn queue(mut self, queue: Arc<queue::MessageQueue>) -> Self {
        self.agent.queue = queue;
        self
    }

    /// Compaction settings; automatic compaction follows their `enabled`.
    pub fn compaction(mut self, c: crate::session::compact::CompactionSettings) -> Self {
        self.agent.auto_compaction = c.enabled;
        self.agent.compaction = c;
        self
    }

    pub fn build(self) -> Agent {
        self.agent
    }
}

impl Agent {
    /// An agent with no hooks, gates or compaction (see [`Agent::builder`]).
    pub fn new(opts: AgentOptions, store: SessionStore, cancel: CancellationToken) -> Agent {
        Agent::builder(opts, store, cancel).build()
    }

    /// Starts putting an agent together.
    pub fn builder(
        opts: AgentOptions,
        store: SessionStore,
        cancel: CancellationToken,
    ) -> AgentBuilder {
        AgentBuilder {
            agent: Agent::bare(opts, store, cancel),
        }
    }

    fn bare(opts: AgentOptions, store: SessionStore, cancel: CancellationToken) -> Agent {
        Agent {
            opts,
            store,
            cancel,
            ext: AgentExt::default(),
            queue: Arc::default(),
            auto_compaction: false,
            compaction: Default::default(),
            inquiries: None,
            compacting: false,
            response_schema: None,
            run_forced: None,
            run_extra: Vec::new(),
            tool_values: None,
            wind_down: None,
        }
    }

    /// The hooks, when they handle `event`.
    fn hooks_for(&self, event: &str) -> Option<Arc<dyn Hooks>> {
        let h = self.ext.hooks.as_ref().filter(|h| h.handles(event))?;
        h.set_state(self.snapshot());
        Some(Arc::clone(h))
    }

    /// The variables a tool's processes get (the bash tool's guideline
    /// points the model at them), as pi 1.6.0 sets them: no session file
    /// without one on disk (`--no-session`).
    fn tool_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("PI_CODING_AGENT".to_string(), "true".to_string()),
            ("PI_PROVIDER".to_string(), self.opts.model.provider.clone()),
            ("PI_MODEL".to_string(), self.opts.model.id.clone()),
            (
                "PI_REASONING_LEVEL".to_string(),
                self.opts.thinking.as_str().to_string(),
            ),
            (
                "PI_SESSION_ID".to_string(),
                self.store.session.id().to_string(),
            ),
        ];
        if let Some(p) = self.store.path() {
            env.push(("PI_SESSION_FILE".to_string(), p.display().to_string()));
        }
        env
    }

    /// The state a hook's owner may read without asking.
    pub fn snapshot(&self) -> hooks::AgentSnapshot {
        hooks::AgentSnapshot {
            provider: self.opts.model.provider.clone(),
            model: self.opts.model.id.clone(),
            thinking_level: self.opts.thinking.as_str().to_string(),
            session_file: self.store.path().map(|p| p.display().to_string()),
            session_id: self.store.session.id().to_string(),
            leaf_id: self.store.session.leaf_id().map(str::to_string),
            idle: false,
            aborted: self.cancel.is_cancelled(),
        }
    }

    /// Awaits a hook's answer while applying the changes its owner asks
    /// for meanwhile (an extension handler that calls back into the host
    /// and waits for the answer must not wait for the handler).
    ///
    /// An abort never waits for a handler: `None` when the run was
    /// aborted while waiting (the request is dropped, which tells its
    /// owner), and each caller then does the safe thing (a tool call is
    /// blocked). The waits that begin once the run is aborted — the
    /// events that wind it down — share [`ABORT_GRACE`], counted from the
    /// first of them, instead of each handler's full time limit: handlers
    /// that answer still see every event, one that hangs cannot hold the
    /// abort up.
    async fn wait<T>(
        &mut self,
        h: &Arc<dyn Hooks>,
        fut: hooks::BoxFuture<'_, T>,
        emit: Emit<'_>,
    ) -> Option<T> {
        let mut fut = fut;
        let q = self.inquiries.clone();
        let cancel = self.cancel.clone();
        let late = cancel.is_cancelled();
        let until = if late {
            *self
                .wind_down
                .get_or_insert_with(|| tokio::time::Instant::now() + ABORT_GRACE)
        } else {
            self.wind_down = None;
            tokio::time::Instant::now() + Duration::from_secs(86400 * 365)
        };
        let grace = tokio::time::sleep_until(until);
        tokio::pin!(grace);
        loop {
            tokio::select! {
                out = &mut fut => return Some(out),
                _ = cancel.cancelled(), if !late => return None,
                _ = &mut grace, if late => return None,
                _ = h.ops_ready() => self.settle_hook(emit),
                _ = hooks::inquiry_ready(&q) => if let Some(q) = &q { q.serve(self) },
            }
        }
    }

    /// Awaits `fut` (which must not borrow the agent), answering the
    /// client's commands meanwhile.
    async fn serving<F: std::future::Future>(&mut self, fut: F) -> F::Output {
        let Some(q) = self.inquiries.clone() else {
            return fut.await;
        };
        tokio::pin!(fut);
        loop {
            tokio::select! {
                out = &mut fut => return out,
                _ = q.ready() => q.serve(self),
            }
        }
    }

    /// Awaits `fut` (which must not borrow the agent) while the agent is
    /// idle between runs, applying what its hooks' owners ask for
    /// meanwhile and answering the client's commands: a background
    /// subagent child's `tool_call` handler may read the parent's session
    /// while the parent waits for that child.
    pub async fn idle_until<F: std::future::Future>(
        &mut self,
        fut: F,
        emit: Emit<'_>,
    ) -> F::Output {
        let h = self.ext.hooks.clone();
        let q = self.inquiries.clone();
        tokio::pin!(fut);
        loop {
            tokio::select! {
                out = &mut fut => return out,
                _ = hooks::ops_ready(&h) => self.settle_hook(emit),
                _ = hooks::inquiry_ready(&q) => if let Some(q) = &q { q.serve(self) },
            }
        }
    }

    /// Applies what the hooks' owners asked for and emits their records
    /// (pending work after the last prompt).
    pub fn apply_pending(&mut self, emit: Emit<'_>) {
        self.settle_hook(emit);
    }

    /// After a hook returned: its records go on the stream, its changes to
    /// the agent are applied.
    fn settle_hook(&mut self, emit: Emit<'_>) {
        let Some(h) = self.ext.hooks.clone() else {
            return;
        };
        for ev in h.drain_events() {
            emit(&ev);
        }
        for op in h.take_ops() {
            op(self, &mut *emit);
        }
    }

    /// Emits `wire`; the hooks see the event first (`for_hooks`, else the
    /// wire form) when they handle it, as pi's extensions see events before
    /// its clients do.
    async fn dispatch(&mut self, wire: Value, for_hooks: Option<Value>, emit: Emit<'_>) {
        let kind = wire.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(h) = self.hooks_for(kind) {
            let fut = h.notify(for_hooks.unwrap_or_else(|| wire.clone()));
            self.wait(&h, fut, emit).await;
            self.settle_hook(emit);
        }
        emit(&wire);
    }

    /// A `tool_execution_*` event: a subagent child's reaches the hooks
    /// with its `subagent` field (the wire form stays pi's).
    async fn dispatch_tool_event(&mut self, wire: Value, emit: Emit<'_>) {
        let for_hooks = self
            .ext
            .delegation
            .as_ref()
            .map(|d| hooks::Delegation::stamp(Some(d), wire.clone()));
        self.dispatch(wire, for_hooks, emit).await;
    }

    /// `message_start` then `message_end` of a message the loop made; a
    /// `message_end` hook may replace it (same role). Returns the message
    /// as it ended.
    async fn start_end(&mut self, msg: AgentMessage, emit: Emit<'_>) -> AgentMessage {
        self.dispatch(events::message("message_start", &msg), None, emit)
            .await;
        self.end_message(msg, emit).await
    }

    async fn end_message(&mut self, mut msg: AgentMessage, emit: Emit<'_>) -> AgentMessage {
        if let Some(h) = self.hooks_for("message_end") {
            let fut = h.message_end(msg.clone());
            if let Some(Some(r)) = self.wait(&h, fut, emit).await {
                if r.role() == msg.role() {
                    msg = r;
                }
            }
            self.settle_hook(emit);
        }
        emit(&events::message("message_end", &msg));
        msg
    }

    /// pi's `input` event for a prompt (before template expansion); with
    /// no hook for it, `Continue` at once.
    pub async fn input(&mut self, ev: hooks::InputEvent, emit: Emit<'_>) -> hooks::InputOutcome {
        let Some(h) = self.hooks_for("input") else {
            return hooks::InputOutcome::Continue;
        };
        let fut = h.input(ev);
        // Aborted meanwhile: the prompt goes on into the aborted run, which
        // ends at once (the same as when the handlers said continue).
        let out = self.wait(&h, fut, emit).await;
        self.settle_hook(emit);
        out.unwrap_or(hooks::InputOutcome::Continue)
    }

    /// Sends `event` (pi's payload) to the hooks that handle it, serving
    /// their calls and applying what they ask for meanwhile: for events
    /// outside a run while the session is still open (`session_shutdown`,
    /// whose `appendEntry` pi writes).
    pub async fn notify_hooks(&mut self, event: Value, emit: Emit<'_>) {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(h) = self.hooks_for(kind) {
            let fut = h.notify(event);
            self.wait(&h, fut, emit).await;
            self.settle_hook(emit);
        }
    }

    /// The hooks start over for a new session ([`Hooks::reload`]), their
    /// calls served meanwhile; what they change is applied.
    pub async fn reload_hooks(&mut self, emit: Emit<'_>) {
        let Some(h) = self.ext.hooks.clone() else {
            return;
        };
        h.set_state(self.snapshot());
        let fut = h.reload();
        self.wait(&h, fut, emit).await;
        self.settle_hook(emit);
    }

    /// Asks the hooks whether a session replacement (`session_before_*`)
    /// may go on; `true`: a handler cancelled it.
    pub async fn session_before(&mut self, event: Value, emit: Emit<'_>) -> bool {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let Some(h) = self.hooks_for(kind) else {
            return false;
        };
        let fut = h.session_before(event);
        // Aborted meanwhile: the replacement does not happen.
        let cancel = self.wait(&h, fut, emit).await;
        self.settle_hook(emit);
        cancel.unwrap_or(true)
    }

    /// A `session_before_*` event's answer (see
    /// [`Hooks::session_before_answer`]); `None` when no hook has the event.
    pub async fn session_before_answer(&mut self, event: Value, emit: Emit<'_>) -> Option<Value> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let h = self.hooks_for(kind)?;
        let fut = h.session_before_answer(event);
        // Aborted meanwhile: cancelled, as a handler would cancel it.
        let answer = self.wait(&h, fut, emit).await;
        self.settle_hook(emit);
        answer.unwrap_or_else(|| Some(json!({"cancel": true})))
    }

    /// `user_bash` before an RPC `bash` command (see [`Hooks::user_bash`]).
    pub async fn user_bash(
        &mut self,
        event: Value,
        emit: Emit<'_>,
    ) -> Result<Option<Value>, String> {
        let Some(h) = self.hooks_for("user_bash") else {
            return Ok(None);
        };
        let fut = h.user_bash(event);
        let answer = self.wait(&h, fut, emit).await;
        self.settle_hook(emit);
        answer.unwrap_or_else(|| Err(ABORTED.into()))
    }

    /// Whether an extension has handlers for `event`.
    pub fn hooked(&self, event: &str) -> bool {
        self.ext.hooks.as_ref().is_some_and(|h| h.handles(event))
    }

    /// An extension command `/name args`: `false` when no hook has it.
    pub async fn command(&mut self, name: &str, args: &str, emit: Emit<'_>) -> bool {
        let Some(h) = self.ext.hooks.clone() else {
            return false;
        };
        h.set_state(self.snapshot());
        let Some(fut) = h.command(name, args) else {
            return false;
        };
        self.wait(&h, fut, emit).await;
        self.settle_hook(emit);
        self.wait(&h, h.quiesce(), emit).await;
        self.settle_hook(emit);
        true
    }

    /// The tool-call gate of seed 004 after validation: `tool_call` hooks
    /// (rewrite or block), then every approver on the final arguments.
    /// `Ok` holds the arguments to run and the approval ticket the final
    /// policy checks right before execute; `Err` the error result's text.
    async fn gate_call(
        &mut self,
        call: &ToolCallBlock,
        mut args: Value,
        emit: Emit<'_>,
    ) -> Result<(Value, Option<hooks::Ticket>), String> {
        // An aborted run starts no tool: nobody is asked.
        if self.cancel.is_cancelled() {
            return Err(ABORTED.into());
        }
        if let Some(h) = self.hooks_for("tool_call") {
            let fut = h.tool_call(hooks::ToolCallEvent {
                tool_name: call.name.clone(),
                tool_call_id: call.id.clone(),
                input: args.clone(),
                delegation: self.ext.delegation.clone(),
            });
            // Aborted meanwhile: blocked (fail closed), at once.
            let out = self.wait(&h, fut, emit).await;
            self.settle_hook(emit);
            match out {
                Some(hooks::ToolCallOutcome::Continue(Some(a))) => args = a,
                Some(hooks::ToolCallOutcome::Continue(None)) => {}
                Some(hooks::ToolCallOutcome::Block(reason)) => return Err(reason),
                None => return Err(ABORTED.into()),
            }
        }
        if self.ext.limits.gates.is_empty() {
            return Ok((args, None));
        }
        for g in self.ext.limits.gates.clone() {
            let approve = g.approve(hooks::ApprovalRequest {
                tool_name: call.name.clone(),
                tool_call_id: call.id.clone(),
                input: args.clone(),
                cwd: self.opts.cwd.clone(),
                delegation: self.ext.delegation.clone(),
            });
            // An approver is waited for until the run is aborted (then
            // the call is blocked, as a hook's is).
            let cancel = self.cancel.clone();
            let answer = tokio::select! {
                a = approve => a,
                _ = cancel.cancelled() => return Err(ABORTED.into()),
            };
            if let hooks::Approval::Block(reason) = answer {
                return Err(reason);
            }
        }
        let ticket = hooks::Ticket::new(&call.id, &args);
        Ok((args, Some(ticket)))
    }

    /// Tools loaded during the run join the active set (once by name).
    fn take_late_tools(&mut self) {
        let Some(inbox) = &self.ext.late_tools else {
            return;
        };
        let late: Vec<Arc<dyn Tool>> = match inbox.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(_) => return,
        };
        for t in late {
            let name = t.definition().name;
            if !self.opts.tools.iter().any(|x| x.definition().name == name) {
                self.opts.tools.push(t);
            }
        }
    }

    /// Brings [`Agent::tool_values`] up to date: the active tools'
    /// definitions as JSON, built again only when the tool set changed.
    fn refresh_tool_values(&mut self) {
        let same = self.tool_values.as_ref().is_some_and(|(k, _)| {
            k.len() == self.opts.tools.len()
                && k.iter()
                    .zip(&self.opts.tools)
                    .all(|(a, b)| Arc::ptr_eq(a, b))
        });
        if !same {
            let values = self
                .opts
                .tools
                .iter()
                .filter_map(|t| serde_json::to_value(t.definition()).ok())
                .collect();
            self.tool_values = Some((self.opts.tools.clone(), values));
        }
    }

    /// Appends the model / thinking-level entries a run needs: pi writes
    /// `model_change` when the branch's model differs (always for a new
    /// session) and `thinking_level_change` when the level differs or the
    /// branch has none.
    pub fn prepare_session(&mut self) -> Result<(), String> {
        self.prepare_session_with(true)
    }

    /// [`Agent::prepare_session`] for a continued session (`-c`,
    /// `--session FILE`): pi 1.6.0 records no `model_change` for a branch
    /// that already names a model, also when `--model` picked another one
    /// (observed; the next answer's model says it).
    pub fn prepare_continued_session(&mut self) -> Result<(), String> {
        self.prepare_session_with(false)
    }

    fn prepare_session_with(&mut self, model_changes: bool) -> Result<(), String> {
        let (model, level) = {
            let ctx = self.store.session.context(None);
            (ctx.model, ctx.thinking_level)
        };
        let m = &self.opts.model;
        let wanted = model.is_none() || model_changes;
        if wanted && model.as_ref() != Some(&(m.provider.clone(), m.id.clone())) {
            let e = self.store.model_change_entry(&m.provider, &m.id);
            self.append(e, None)?;
        }
        let has_level = self
            .store
            .session
            .branch()
            .iter()
            .any(|&i| matches!(self.store.session.entries[i], Entry::ThinkingLevelChange(_)));
        if !has_level || level != self.opts.thinking.as_str() {
            let e = self.store.thinking_entry(self.opts.thinking.as_str());
            self.append(e, None)?;
        }
        Ok(())
    }

    /// Appends an entry on behalf of a hook's owner (an extension's
    /// `appendEntry`), reported as `entry_appended`. The report says the
    /// entry is in the session file, so a new session's file is written
    /// now (pi 1.6.0 reports it and writes nothing until a message comes).
    pub fn append_entry(&mut self, entry: Entry, emit: Emit<'_>) -> Result<(), String> {
        let entry = match self.store.append_persisted(entry) {
            Ok(e) => e,
            Err(e) => return Err(io_error(e, &self.store)),
        };
        emit(&json!({ "type": "entry_appended", "entry": entry }));
        Ok(())
    }

    /// Appends a message outside a run's flow (an extension's
    /// `sendMessage` while idle): its `message_start`/`message_end`, then
    /// the entry.
    pub fn append_message_now(&mut self, m: AgentMessage, emit: Emit<'_>) -> Result<(), String> {
        emit(&events::message("message_start", &m));
        emit(&events::message("message_end", &m));
        self.append_message(m)
    }

    fn append(&mut self, entry: Entry, emit: Option<&mut dyn FnMut(&Value)>) -> Result<(), String> {
        // The store decides the parent under the file's lock; report the
        // entry as written.
        let entry = match self.store.append_ref(entry) {
            Ok(e) => e,
            Err(e) => return Err(io_error(e, &self.store)),
        };
        if let Some(emit) = emit {
            emit(&json!({ "type": "entry_appended", "entry": entry }));
        }
        Ok(())
    }

    fn append_message(&mut self, m: AgentMessage) -> Result<(), String> {
        let e = self.store.message_entry(m);
        self.append(e, None)
    }

    /// Appends a system patch when the desired prompt differs from the one
    /// the branch records; emits its message events.
    async fn sync_system_prompt(
        &mut self,
        emit: Emit<'_>,
        new_messages: &mut Vec<AgentMessage>,
    ) -> Result<(), String> {
        let state = {
            let ctx = self.store.session.context(None);
            PromptState::replay(ctx.messages.iter().map(|(_, m)| &**m))
        };
        self.refresh_tool_values();
        let tools = self.tool_values.as_ref().map_or(&[][..], |(_, v)| v);
        if let Some(patch) = diff(&state, &self.opts.sections, tools, now_ms()) {
            let msg = AgentMessage::System(Box::new(patch));
            let msg = self.start_end(msg, emit).await;
            self.append_message(msg.clone())?;
            new_messages.push(msg);
        }
        Ok(())
    }

    /// pi's `before_agent_start`: the handlers may add custom messages
    /// (after the user message) and force a whole prompt for this run.
    async fn before_agent_start(&mut self, user: &AgentMessage, emit: Emit<'_>) {
        let Some(h) = self.hooks_for("before_agent_start") else {
            return;
        };
        let mut start = Map::new();
        let (text, images) = match user {
            AgentMessage::User(u) => (
                u.content.joined_text("\n"),
                match &u.content {
                    crate::format::UserContent::Blocks(b) => b
                        .iter()
                        .filter(|b| matches!(b, ContentBlock::Image(_)))
                        .filter_map(|b| serde_json::to_value(b).ok())
                        .collect(),
                    _ => Vec::new(),
                },
            ),
            _ => (String::new(), Vec::new()),
        };
        start.insert("messageType".into(), "user".into());
        start.insert("prompt".into(), text.into());
        start.insert("images".into(), Value::Array(images));
        let system_prompt = self.opts.forced_prompt.clone().unwrap_or_else(|| {
            let parts: Vec<&str> = self
                .opts
                .sections
                .iter()
                .map(|(_, t)| t.as_str())
                .filter(|t| !t.is_empty())
                .collect();
            parts.join("\n\n")
        });
        let options = json!({
            "selectedTools": self.opts.tools.iter().map(|t| t.definition().name).collect::<Vec<_>>(),
            "cwd": self.opts.cwd.display().to_string(),
            "sections": self.opts.sections.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<Map<String, Value>>(),
        });
        let fut = h.before_agent_start(hooks::BeforeAgentStart {
            start,
            system_prompt,
            options,
        });
        let out = self.wait(&h, fut, emit).await.unwrap_or_default();
        self.settle_hook(emit);
        self.run_extra = out.messages;
        self.run_forced = out.system_prompt;
    }

    /// Runs one prompt to the end (turns, tools, retries).
    pub async fn run(&mut self, user: AgentMessage, emit: Emit<'_>) -> RunOutcome {
        self.wind_down = None;
        self.run_forced = None;
        self.run_extra.clear();
        self.compact_before_prompt(emit).await;
        self.before_agent_start(&user, emit).await;
        self.queue.set_streaming(true);
        let out = self.run_inner(user, emit).await;
        self.queue.set_streaming(false);
        self.run_forced = None;
        out
    }

    async fn run_inner(&mut self, user: AgentMessage, emit: Emit<'_>) -> RunOutcome {
        let mut new_messages: Vec<AgentMessage> = Vec::new();
        let mut attempt: u32 = 0;
        let mut first_run = true;
        let mut retrying = false;
        let mut overflow_tried = false;
        loop {
            self.dispatch(events::simple("agent_start"), None, emit)
                .await;
            let mut result = self
                .turns(
                    &user,
                    first_run,
                    emit,
                    &mut new_messages,
                    retrying.then_some(attempt),
                )
                .await;
            first_run = false;
            // Automatic retry of transient provider errors.
            let retry_error = match &result {
                TurnsEnd::ModelError(msg, info) if !self.cancel.is_cancelled() => {
                    Some((msg.clone(), info.clone()))
                }
                _ => None,
            };
            let will_retry = match &retry_error {
                Some((err, info)) => {
                    self.opts.retry.enabled
                        && retry::should_retry(err, info.as_ref())
                        && attempt < self.opts.retry.max_retries
                }
                None => false,
            };
            self.dispatch(
                events::agent_end(&new_messages, will_retry),
                Some(json!({"type": "agent_end", "messages": &new_messages})),
                emit,
            )
            .await;
            if let Some((err, info)) = retry_error {
                if will_retry {
                    attempt += 1;
                    let delay = self.opts.retry.delay_for(attempt, info.as_ref());
                    emit(
                        &json!({"type": "auto_retry_start", "attempt": attempt, "maxAttempts": self.opts.retry.max_retries, "delayMs": delay, "errorMessage": err}),
                    );
                    // The failed message stays in the file but leaves the
                    // model's context.
                    if let Some(leaf) = self.store.session.leaf_id().map(str::to_string) {
                        let edit = Entry::ContextEdit(Box::new(ContextEditEntry {
                            id: self.store.session.fresh_id(),
                            parent_id: Some(leaf.clone()),
                            timestamp: now_iso(),
                            target_id: leaf,
                            replacement: Value::Null,
                            extra: Map::new(),
                        }));
                        if let Err(e) = self.append(edit, Some(&mut *emit)) {
                            result = TurnsEnd::Failed(e);
                        }
                    }
                    if !matches!(result, TurnsEnd::Failed(_)) {
                        // The client's questions are answered meanwhile.
                        let cancel = self.cancel.clone();
                        let slept = self
                            .serving(async {
                                tokio::select! {
                                    _ = tokio::time::sleep(Duration::from_millis(delay)) => true,
                                    _ = cancel.cancelled() => false,
                                }
                            })
                            .await;
                        if !slept {
                            emit(
                                &json!({"type": "auto_retry_end", "success": false, "attempt": attempt, "finalError": "Retry cancelled"}),
                            );
                            emit(&json!({"type": "agent_settled", "aborted": true}));
                            return RunOutcome {
                                last: last_assistant(&new_messages),
                                error: Some("Retry cancelled".into()),
                                aborted: true,
                                limit: None,
                            };
                        }
                        new_messages.clear();
                        retrying = true;
                        continue;
                    }
                } else if attempt > 0 {
                    emit(
                        &json!({"type": "auto_retry_end", "success": false, "attempt": attempt, "finalError": err}),
                    );
                }
            }
            // Overflow recovery or the threshold check; a recovered
            // overflow starts a fresh run.
            if !will_retry {
                let failure = match &result {
                    TurnsEnd::ModelError(_, info) => info.clone(),
                    _ => None,
                };
                let last = last_assistant(&new_messages);
                if self
                    .compact_after_run(last.as_ref(), failure.as_ref(), &mut overflow_tried, emit)
                    .await
                {
                    new_messages.clear();
                    retrying = false;
                    continue;
                }
            }
            let aborted = self.cancel.is_cancelled() || matches!(result, TurnsEnd::Aborted);
            if !aborted {
                let outcome = if matches!(result, TurnsEnd::Done) {
                    "completed"
                } else {
                    "error"
                };
                // A handler's `continue: true` (with a context the model
                // can answer): one more run from the context as it is, no
                // new user message; agent_settled comes once, at the end.
                if self.before_settle(outcome, emit).await {
                    new_messages.clear();
                    retrying = false;
                    continue;
                }
            }
            self.dispatch(
                json!({"type": "agent_settled", "aborted": aborted}),
                None,
                emit,
            )
            .await;
            let last = last_assistant(&new_messages);
            let limit = match result {
                TurnsEnd::MaxTurns(n) => Some(budget::Limit::MaxTurns(n)),
                _ => None,
            };
            let error = match result {
                TurnsEnd::Done => None,
                TurnsEnd::ModelError(e, _) | TurnsEnd::Failed(e) => Some(e),
                TurnsEnd::Aborted => Some("Request was aborted".into()),
                TurnsEnd::MaxTurns(n) => Some(budget::Limit::MaxTurns(n).message()),
            };
            return RunOutcome {
                last,
                error,
                aborted,
                limit,
            };
        }
    }

    async fn turns(
        &mut self,
        user: &AgentMessage,
        first_run: bool,
        emit: Emit<'_>,
        new_messages: &mut Vec<AgentMessage>,
        retry_attempt: Option<u32>,
    ) -> TurnsEnd {
        let mut turn = 0u32;
        // Messages delivered at the start of the next turn.
        let mut deliver: Vec<Pending> = Vec::new();
        loop {
            turn += 1;
            self.dispatch(
                events::simple("turn_start"),
                Some(json!({"type": "turn_start", "turnIndex": turn - 1, "timestamp": now_ms()})),
                emit,
            )
            .await;
            if turn == 1 && first_run {
                if let Err(e) = self.sync_system_prompt(emit, new_messages).await {
                    return TurnsEnd::Failed(e);
                }
                let user = self.start_end(user.clone(), emit).await;
                if let Err(e) = self.append_message(user.clone()) {
                    return TurnsEnd::Failed(e);
                }
                new_messages.push(user);
                // before_agent_start's messages, then next-turn messages,
                // then one steering drain (pi's run-start delivery).
                let mut extra = std::mem::take(&mut self.run_extra);
                extra.extend(self.queue.take_next_turn());
                deliver = extra.into_iter().map(Pending::Now).collect();
                deliver.extend(self.plan_drain(queue::QueueKind::Steering));
            } else if turn > 1 {
                self.take_late_tools();
                if let Err(e) = self.sync_system_prompt(emit, new_messages).await {
                    return TurnsEnd::Failed(e);
                }
            }
            for p in std::mem::take(&mut deliver) {
                let m = match p {
                    Pending::Now(m) => m,
                    Pending::Queued(kind) => match self.queue.pop(kind) {
                        Some(d) => {
                            if d.listed {
                                let (steering, follow_up) = self.queue.listed();
                                emit(&events::queue_update(&steering, &follow_up));
                            }
                            d.message
                        }
                        // Cleared since the drain was planned.
                        None => continue,
                    },
                };
                let m = self.start_end(m, emit).await;
                if let Err(e) = self.append_message(m.clone()) {
                    return TurnsEnd::Failed(e);
                }
                new_messages.push(m);
            }
            let (assistant, failure) = self.stream_assistant(emit).await;
            if let Some(b) = &self.ext.limits.budget {
                b.record(&assistant, self.ext.delegation.as_ref());
                // A limit reached (by this response, a child or the clock)
                // starts nothing more: the run winds down as on a signal.
                if b.tripped().is_some() {
                    self.cancel.cancel();
                }
            }
            let msg = AgentMessage::Assistant(Box::new(assistant.clone()));
            if let Err(e) = self.append_message(msg.clone()) {
                return TurnsEnd::Failed(e);
            }
            new_messages.push(msg.clone());
            if let Some(attempt) = retry_attempt {
                if turn == 1
                    && assistant.stop_reason != "error"
                    && assistant.stop_reason != "aborted"
                {
                    emit(&json!({"type": "auto_retry_end", "success": true, "attempt": attempt}));
                }
            }
            if assistant.stop_reason == "error" || assistant.stop_reason == "aborted" {
                let _ = self.turn_end(turn, &msg, &[], emit).await;
                let err = assistant
                    .error_message
                    .clone()
                    .unwrap_or_else(|| format!("Request {}", assistant.stop_reason));
                return if assistant.stop_reason == "aborted" || self.cancel.is_cancelled() {
                    TurnsEnd::Aborted
                } else {
                    TurnsEnd::ModelError(err, failure)
                };
            }
            let calls: Vec<ToolCallBlock> = assistant
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall(c) => Some(c.clone()),
                    _ => None,
                })
                .collect();
            if calls.is_empty() {
                if let Err(e) = self.end_of_turn(emit, new_messages).await {
                    return TurnsEnd::Failed(e);
                }
                let more = self.turn_end(turn, &msg, &[], emit).await;
                // Where the run would stop: steering, else one follow-up
                // drain, becomes another turn; a boundary handler's
                // `continue` asks for one more request as it is.
                deliver = self.plan_drain(queue::QueueKind::Steering);
                if deliver.is_empty() {
                    deliver = self.plan_drain(queue::QueueKind::FollowUp);
                }
                if (deliver.is_empty() && !more) || self.cancel.is_cancelled() {
                    return TurnsEnd::Done;
                }
                continue;
            }
            let results = match self.run_tools(&calls, emit).await {
                Ok(r) => r,
                Err(e) => return TurnsEnd::Failed(e),
            };
            new_messages.extend(results.iter().cloned());
            if let Err(e) = self.end_of_turn(emit, new_messages).await {
                return TurnsEnd::Failed(e);
            }
            let _ = self.turn_end(turn, &msg, &results, emit).await;
            if self.cancel.is_cancelled() {
                // pi 1.6.0 starts the next turn anyway and ends it with an
                // empty aborted assistant message made without a request
                // (queued messages stay queued).
                turn += 1;
                self.dispatch(
                    events::simple("turn_start"),
                    Some(
                        json!({"type": "turn_start", "turnIndex": turn - 1, "timestamp": now_ms()}),
                    ),
                    emit,
                )
                .await;
                let mut empty = provider::empty_message(&self.opts.model);
                empty.stop_reason = "aborted".into();
                empty.error_message = Some("This operation was aborted".into());
                empty.extra.insert("durationMs".into(), 0.into());
                empty
                    .extra
                    .insert("thinkingLevel".into(), self.opts.thinking.as_str().into());
                let m = self
                    .start_end(AgentMessage::Assistant(Box::new(empty)), emit)
                    .await;
                if let Err(e) = self.append_message(m.clone()) {
                    return TurnsEnd::Failed(e);
                }
                new_messages.push(m.clone());
                let _ = self.turn_end(turn, &m, &[], emit).await;
                return TurnsEnd::Aborted;
            }
            deliver = self.plan_drain(queue::QueueKind::Steering);
            if let Some(max) = self.turn_limit() {
                if turn >= max {
                    return TurnsEnd::MaxTurns(max);
                }
            }
            self.compact_between_turns(emit).await;
        }
    }

    /// The turns this agent may take: its own limit or the run's, the
    /// smaller.
    fn turn_limit(&self) -> Option<u32> {
        let shared = self.ext.limits.budget.as_ref().and_then(|b| b.max_turns());
        match (self.opts.max_turns, shared) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// One drain of a queue at a delivery point: as many messages as its
    /// mode delivers, taken off the queue only when delivered.
    fn plan_drain(&self, kind: queue::QueueKind) -> Vec<Pending> {
        vec![Pending::Queued(kind); self.queue.plan(kind)]
    }

    /// Custom messages sent with `triggerTurn: false` while streaming are
    /// appended when the turn ends.
    async fn end_of_turn(
        &mut self,
        emit: Emit<'_>,
        new_messages: &mut Vec<AgentMessage>,
    ) -> Result<(), String> {
        for m in self.queue.take_end_of_turn() {
            let m = self.start_end(m, emit).await;
            self.append_message(m.clone())?;
            new_messages.push(m);
        }
        Ok(())
    }

    /// `turn_end`, pi's boundary event: the handlers may add entries
    /// (`custom` entries, `custom_message` messages) and ask for one more
    /// request (`true`).
    async fn turn_end(
        &mut self,
        turn: u32,
        msg: &AgentMessage,
        results: &[AgentMessage],
        emit: Emit<'_>,
    ) -> bool {
        let wire = events::turn_end(msg, results);
        let Some(h) = self.hooks_for("turn_end") else {
            emit(&wire);
            return false;
        };
        let payload = json!({"type": "turn_end", "turnIndex": turn - 1, "message": msg, "toolResults": results, "outcome": if self.cancel.is_cancelled() { "aborted" } else { "completed" }, "entries": [], "continue": false, "context": self.boundary_context()});
        let fut = h.boundary(payload);
        let out = self.wait(&h, fut, emit).await.unwrap_or_default();
        self.settle_hook(emit);
        self.append_drafts(out.entries, "turn_end", emit);
        emit(&wire);
        out.continue_run
    }

    /// pi's `agent_before_settle` (after the run's retries and queues, not
    /// for an aborted run): the handlers' entry drafts are appended; `true`
    /// when they asked to continue (`continue: true` with a context the
    /// model can answer: the run goes on with one more request).
    async fn before_settle(&mut self, outcome: &str, emit: Emit<'_>) -> bool {
        let Some(h) = self.hooks_for("agent_before_settle") else {
            return false;
        };
        let payload = json!({"type": "agent_before_settle", "outcome": outcome, "entries": [], "continue": false, "context": self.boundary_context()});
        let fut = h.boundary(payload);
        let out = self.wait(&h, fut, emit).await.unwrap_or_default();
        self.settle_hook(emit);
        self.append_drafts(out.entries, "agent_before_settle", emit);
        out.continue_run
    }

    /// The `context` preview of a boundary event (pi's
    /// `{contextEntries, contextMessages, llmMessages, pendingMessages,
    /// canContinue}`) for the committed branch; the extension runner adds
    /// the proposal's drafts to it before each handler. Built only when a
    /// boundary handler exists.
    fn boundary_context(&self) -> Value {
        let session = &self.store.session;
        let ctx = session.context(None);
        let mut by_entry: HashMap<&str, Vec<Value>> = HashMap::new();
        let mut messages = Vec::with_capacity(ctx.messages.len());
        let mut llm = Vec::with_capacity(ctx.messages.len());
        for (id, m) in &ctx.messages {
            let v = serde_json::to_value(&**m).unwrap_or(Value::Null);
            by_entry.entry(*id).or_default().push(v.clone());
            // pi's llmMessages keep the system message first.
            if matches!(**m, AgentMessage::System(_)) {
                llm.push(v.clone());
            } else if let Some(l) = convert::llm_message(m) {
                llm.push(serde_json::to_value(&*l).unwrap_or(Value::Null));
            }
            messages.push(v);
        }
        let entries: Vec<Value> = session
            .branch()
            .into_iter()
            .map(|i| {
                let e = &session.entries[i];
                json!({"sourceEntry": e, "messages": by_entry.remove(e.id()).unwrap_or_default()})
            })
            .collect();
        let pending = self.queue.pending_count() > 0;
        json!({
            "contextEntries": entries,
            "contextMessages": messages,
            "llmMessages": llm,
            "pendingMessages": [],
            "canContinue": pending || hooks::can_continue(&llm),
        })
    }

    /// Appends a boundary event's drafts: `custom` entries,
    /// `custom_message` messages and `context_edit`s.
    fn append_drafts(&mut self, drafts: Vec<Value>, event: &str, emit: Emit<'_>) {
        for d in drafts {
            let entry = match d.get("type").and_then(Value::as_str) {
                Some("custom") => {
                    let ty = d.get("customType").and_then(Value::as_str).unwrap_or("");
                    let leaf = self.store.session.leaf_id().map(str::to_string);
                    self.store.session.new_custom(
                        leaf.as_deref(),
                        ty,
                        d.get("data").cloned().unwrap_or(Value::Null),
                    )
                }
                Some("custom_message") => {
                    let m = crate::format::message::CustomMessage {
                        custom_type: d
                            .get("customType")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        content: match d.get("content") {
                            Some(Value::String(t)) => crate::format::UserContent::Text(t.clone()),
                            Some(c) => serde_json::from_value(c.clone())
                                .unwrap_or(crate::format::UserContent::Text(String::new())),
                            None => crate::format::UserContent::Text(String::new()),
                        },
                        display: d.get("display").and_then(Value::as_bool).unwrap_or(false),
                        details: d.get("details").cloned(),
                        timestamp: Num::signed(now_ms()),
                        extra: Map::new(),
                    };
                    self.store.message_entry(AgentMessage::Custom(Box::new(m)))
                }
                // (Validated by the runner: the target is on the branch.)
                Some("context_edit") => {
                    Entry::ContextEdit(Box::new(crate::format::entry::ContextEditEntry {
                        id: self.store.session.fresh_id(),
                        parent_id: self.store.session.leaf_id().map(str::to_string),
                        timestamp: crate::timefmt::now_iso(),
                        target_id: d["targetId"].as_str().unwrap_or("").to_string(),
                        replacement: d.get("replacement").cloned().unwrap_or(Value::Null),
                        extra: Map::new(),
                    }))
                }
                _ => continue,
            };
            if let Err(e) = self.append(entry, Some(&mut *emit)) {
                emit(&json!({"type": "extension_error", "event": event, "error": e}));
            }
        }
    }

    /// The messages of the next request, after the `context` hooks: they
    /// see the list without system messages; a changed list keeps the
    /// system head.
    /// The messages a `context` hook changed, or `None` when there is no
    /// hook or it changed nothing: then the request borrows the session's
    /// own messages (no copy of the conversation).
    async fn hooked_request_messages(&mut self, emit: Emit<'_>) -> Option<Vec<AgentMessage>> {
        let h = self.hooks_for("context")?;
        let (system, rest): (Vec<AgentMessage>, Vec<AgentMessage>) = {
            let ctx = self.store.session.context(None);
            ctx.messages
                .iter()
                .map(|(_, m)| (**m).clone())
                .partition(|m| matches!(m, AgentMessage::System(_)))
        };
        let fut = h.context(rest);
        let changed = self.wait(&h, fut, emit).await.flatten();
        self.settle_hook(emit);
        changed.map(|new| system.into_iter().chain(new).collect())
    }

    async fn stream_assistant(
        &mut self,
        emit: Emit<'_>,
    ) -> (AssistantMessage, Option<provider::FailureInfo>) {
        let mut hooked = self.hooked_request_messages(emit).await;
        if hooked.is_none() && self.inquiries.is_some() {
            // A client may change the agent while the reply streams: the
            // request owns its messages then.
            let ctx = self.store.session.context(None);
            hooked = Some(ctx.messages.iter().map(|(_, m)| (**m).clone()).collect());
        }
        let thinking = self.opts.thinking;
        let forced = self.run_forced.clone().or(self.opts.forced_prompt.clone());
        // The request without its conversation (filled in below, from the
        // hooks' or the session's messages).
        let template = Request {
            model: self.opts.model.clone(),
            system_prompt: None,
            messages: Vec::new(),
            tools: Vec::new(),
            api_key: self.opts.api_key.clone(),
            thinking: self.opts.thinking,
            max_tokens: None,
            headers: Vec::new(),
            idle_timeout: self.opts.idle_timeout,
            cancel: self.cancel.clone(),
            session_id: Some(self.store.session.id().to_string()),
            response_schema: self.response_schema.clone(),
        };
        let started = Instant::now();
        let mut started_emitted = false;
        // Extensions that subscribed to message_update get every delta
        // (pi's form: the event with the cumulative `partial`), in order,
        // through one task, so the stream never waits for them. Nobody
        // subscribed: nothing is built.
        let watcher = self.hooks_for("message_update");
        let updates = watcher.clone().map(|h| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
            let task = tokio::spawn(async move {
                while let Some(ev) = rx.recv().await {
                    h.notify(ev).await;
                }
            });
            (tx, task)
        });
        let mut sink = |ev: &StreamEvent, partial: &AssistantMessage| match ev {
            StreamEvent::Start => {
                started_emitted = true;
                emit(&events::message(
                    "message_start",
                    &AgentMessage::Assistant(Box::new(partial.clone())),
                ));
            }
            StreamEvent::Done { .. } | StreamEvent::Error { .. } => {}
            other => {
                if !started_emitted {
                    started_emitted = true;
                    emit(&events::message(
                        "message_start",
                        &AgentMessage::Assistant(Box::new(partial.clone())),
                    ));
                }
                if let Some((tx, _)) = &updates {
                    let message = AgentMessage::Assistant(Box::new(partial.clone()));
                    let mut ame = other.to_json();
                    ame["partial"] = serde_json::to_value(&message).unwrap_or(Value::Null);
                    let _ = tx.send(json!({"type": "message_update", "message": message, "assistantMessageEvent": ame}));
                }
                emit(&events::message_update(other, partial));
            }
        };
        let provider::Streamed {
            message: mut msg,
            failure,
        } = match &hooked {
            // Owned messages: the client's commands are answered (and may
            // change the agent) while the reply streams.
            Some(msgs) => {
                let llm = convert::to_llm(msgs.iter());
                let req = Request {
                    system_prompt: forced.or(llm.system_prompt),
                    messages: llm.messages,
                    tools: llm.tools,
                    ..template
                };
                self.serving(provider::stream_detailed(req, &mut sink))
                    .await
            }
            None => {
                let ctx = self.store.session.context(None);
                let llm = convert::to_llm(ctx.messages.iter().map(|(_, m)| &**m));
                let req = Request {
                    system_prompt: forced.or(llm.system_prompt),
                    messages: llm.messages,
                    tools: llm.tools,
                    ..template
                };
                provider::stream_detailed(req, &mut sink).await
            }
        };
        // Every delta reaches the subscribers before message_end.
        if let (Some((tx, task)), Some(h)) = (updates, watcher) {
            drop(tx);
            let done = Box::pin(async move {
                let _ = task.await;
            });
            self.wait(&h, done, emit).await;
        }
        msg.extra.insert(
            "durationMs".into(),
            (started.elapsed().as_millis() as u64).into(),
        );
        msg.extra
            .insert("thinkingLevel".into(), thinking.as_str().into());
        let as_agent = AgentMessage::Assistant(Box::new(msg.clone()));
        if !started_emitted {
            emit(&events::message("message_start", &as_agent));
        }
        if let AgentMessage::Assistant(m) = self.end_message(as_agent, emit).await {
            msg = *m;
        }
        (msg, failure)
    }
}

fn last_assistant(msgs: &[AgentMessage]) -> Option<AssistantMessage> {
    msgs.iter().rev().find_map(|m| match m {
        AgentMessage::Assistant(a) => Some(a.as_ref().clone()),
        _ => None,
    })
}

/// A message to deliver at the start of a turn: one the loop holds, or
/// the next of a queue (taken when delivered).
#[derive(Debug, Clone)]
enum Pending {
    Now(AgentMessage),
    Queued(queue::QueueKind),
}

/// How the turns of one attempt ended.
#[derive(Debug, Clone, PartialEq)]
enum TurnsEnd {
    Done,
    ModelError(String, Option<provider::FailureInfo>),
    Aborted,
    MaxTurns(u32),
    Failed(String),
}

/// The prompt view of tools (name, snippet, guidelines).
pub fn prompt_tools(tools: &[Arc<dyn Tool>]) -> Vec<PromptTool> {
    tools
        .iter()
        .map(|t| PromptTool {
            name: t.definition().name,
            snippet: t.prompt_snippet(),
            guidelines: t.prompt_guidelines(),
        })
        .collect()
}

#[cfg(test)]
mod gate_tests;
