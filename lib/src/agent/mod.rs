//! The agent loop: user message → turns → tool calls → results →
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
mod hooked;
pub mod hooks;
pub mod nested;
pub mod queue;
mod record;
mod run_tools;
mod stream;
mod turns;
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

/// Receives every event of the run (see [`Event`]).
pub type Emit<'a> = &'a mut dyn FnMut(&Event<'_>);

pub use events::Event;

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
    /// The last reply failed (a length stop or an overflow error) and was
    /// hidden from later context with a `context_edit`, but the branch had
    /// nothing to compact, so nothing was retried: the run has no answer
    /// (pi 1.6.0 prints nothing for it).
    pub hidden: bool,
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
}

/// The prompt view of tools (name, snippet, guidelines).
pub fn prompt_tools(tools: &[Arc<dyn Tool>]) -> Vec<PromptTool> {
    tools
        .iter()
        .map(|t| PromptTool {
            name: t.name().into_owned(),
            snippet: t.prompt_snippet(),
            guidelines: t.prompt_guidelines(),
        })
        .collect()
}

#[cfg(test)]
mod gate_tests;
