//! The built-in tools: read, bash, edit, write (active by default) and
//! grep, find, ls — same parameters, descriptions, limits, notices and
//! error texts as pi 1.6.0.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::format::tool::ToolDefinition;
use crate::format::ContentBlock;

/// What a tool returns: `content` goes to the model, `details` only to the
/// session and UI (e.g. the edit diff).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    pub content: Vec<ContentBlock>,
    pub details: Option<Value>,
    pub is_error: bool,
    /// pi 1.6.0's `structuredContent` in `tool_execution_end.result` (read's
    /// text, bash's `{output, truncated, exit_code, wall_time_seconds}`).
    pub structured: Option<Value>,
    /// The tool reported the error itself (bash's non-zero exit) rather than
    /// failing: pi then also writes `isError` inside `result`.
    pub flag_error: bool,
}

impl ToolOutput {
    /// An error result with one text block (what pi makes of a thrown error).
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: None,
            is_error: true,
            ..Default::default()
        }
    }
}

/// Where and how a tool runs.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// Cancelled on abort: running processes are killed, the tool returns.
    pub cancel: CancellationToken,
    /// Fit images into the model's limits (pi's `images.autoResize`,
    /// default true).
    pub auto_resize_images: bool,
    /// The model's id for this call (empty outside the agent loop); an
    /// extension's tool receives it as pi's `execute(toolCallId, …)`.
    pub tool_call_id: String,
    /// The calling agent's watchers and limits, for a tool that starts an
    /// agent of its own (a subagent): that agent must obey them. Opaque at
    /// this layer; `crate::agent::hooks::AgentExt::of_caller` reads it.
    pub caller: Option<Caller>,
    /// The run's sandbox: the bash tool confines its shell with it, the
    /// file tools check their paths against it (unconfined:
    /// [`crate::sandbox::Sandbox::none`]).
    pub sandbox: std::sync::Arc<crate::sandbox::Sandbox>,
    /// The way back into the agent loop (nested calls through its gate,
    /// the session's custom entries); `None` outside the loop. Opaque at
    /// this layer (the loop sits above the tools): the loop puts its
    /// `crate::agent::nested::Host` here and codemode takes it out.
    pub host: Option<LoopHost>,
    /// Variables set in the processes a tool starts, as pi sets them for
    /// its shell: `PI_CODING_AGENT`, the model (`PI_PROVIDER`, `PI_MODEL`,
    /// `PI_REASONING_LEVEL`) and the session (`PI_SESSION_ID`,
    /// `PI_SESSION_FILE`).
    pub env: Vec<(String, String)>,
}

/// See [`ToolContext::caller`].
#[derive(Clone)]
pub struct Caller(pub std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Caller(..)")
    }
}

/// See [`ToolContext::host`].
#[derive(Clone)]
pub struct LoopHost(pub std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for LoopHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoopHost(..)")
    }
}

/// Receives partial results while a tool runs (bash's growing output):
/// pi's `tool_execution_update.partialResult`.
pub type UpdateSink = Box<dyn FnMut(ToolOutput) + Send>;

/// Tools that become active during a run (MCP's `tool_search` loads
/// deferred tools here): the agent declares them from the next model call.
pub type ToolInbox = std::sync::Arc<std::sync::Mutex<Vec<std::sync::Arc<dyn Tool>>>>;

/// A boxed future of a tool's output.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>>;

/// A tool the model can call.
pub trait Tool: Send + Sync {
    /// Name, description and JSON Schema of the parameters.
    fn definition(&self) -> ToolDefinition;
    /// The name alone ([`Tool::definition`]'s), without building the rest:
    /// the loop looks tools up by name on every call.
    fn name(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Owned(self.definition().name)
    }
    /// The one-line summary in the system prompt's `tools` section.
    fn prompt_snippet(&self) -> Option<String> {
        None
    }
    /// Bullets this tool adds to the system prompt's `rules` section.
    fn prompt_guidelines(&self) -> Vec<String> {
        Vec::new()
    }
    /// Rewrites the raw arguments before validation (pi's
    /// `prepareArguments`): e.g. edit's legacy top-level `oldText`/`newText`
    /// becomes one `edits` entry. The default leaves them as they are.
    fn prepare_arguments(&self, args: Value) -> Value {
        args
    }
    /// The JSON Schema of the value a script's call resolves to (pi's
    /// `outputSchema`): `None` means the text output (a string).
    fn output_schema(&self) -> Option<Value> {
        None
    }
    /// What the model sees while this tool is declared (pi's
    /// `prepareLoadout`): a tool that runs other tools may change the other
    /// declarations. The default leaves them as they are.
    fn prepare_loadout(
        &self,
        declared: Vec<std::sync::Arc<dyn Tool>>,
    ) -> Vec<std::sync::Arc<dyn Tool>> {
        declared
    }
    /// Runs the tool on already-validated arguments.
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        on_update: UpdateSink,
    ) -> ToolFuture<'a>;
}

/// The declared tools as the tools among them that run others present
/// them ([`Tool::prepare_loadout`], e.g. codemode's `Codemode:` lines).
pub fn present(mut tools: Vec<std::sync::Arc<dyn Tool>>) -> Vec<std::sync::Arc<dyn Tool>> {
    for t in tools.clone() {
        tools = t.prepare_loadout(tools);
    }
    tools
}

pub mod bash;
pub mod builtin;
pub mod edit;
pub mod find;
pub mod grep;
pub mod image;
pub mod ls;
pub mod read;
mod search;
pub mod select;
pub mod truncate;
mod util;
pub mod validate;
pub mod write;

pub use builtin::{all_builtin, builtin, BUILTIN_TOOLS, DEFAULT_TOOLS};
