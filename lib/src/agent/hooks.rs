//! The gates the agent loop passes through, for whoever wants to watch or
//! steer a run (extensions, a CI policy) without the loop knowing who that
//! is: [`Hooks`] is called at every point pi 1.6.0 dispatches an extension
//! event, [`Gate`] is the approval step, and
//! [`AgentOp`] lets a hook's owner read or change the agent's state (the
//! session, the active tools) while the loop waits for it.
//!
//! With no hooks and no gates the loop takes none of these paths: nothing
//! is built, nothing is awaited (`Agent::ext` is all `None`/empty).
//!
//! The tool-call gate, in this order: validation → `tool_call` hooks
//! (rewrite or block; a hook that fails blocks: fail closed) → approval on
//! the final canonical arguments (every [`Gate`] must allow) → the final
//! policy right before execute ([`FinalPolicy`]: the arguments are
//! byte-identical to the approved ones, the approval is used once, paths
//! stay in the workspace where that is asked for) → execute → `tool_result`
//! patches.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use serde_json::Value;

use crate::format::AgentMessage;
use crate::tools::ToolOutput;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A future that is ready at once.
pub fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

/// The `input` event (pi: prompt text before template expansion).
#[derive(Debug, Clone, PartialEq)]
pub struct InputEvent {
    pub text: String,
    /// Image blocks as JSON.
    pub images: Vec<Value>,
    /// `interactive`, `rpc` or `extension`.
    pub source: String,
    /// `steer` / `followUp` while a run streams; `None` when idle.
    pub streaming_behavior: Option<String>,
}

/// What the `input` handlers decided.
#[derive(Debug, Clone, PartialEq)]
pub enum InputOutcome {
    Continue,
    /// The text (and images) after the transform chain.
    Transform {
        text: String,
        images: Vec<Value>,
    },
    /// A handler took the input: no run.
    Handled,
}

/// The `before_agent_start` event.
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeAgentStart {
    /// `{messageType:"user", prompt, images}` or `{messageType:"custom",
    /// message}`: the keys that come first in pi's payload.
    pub start: serde_json::Map<String, Value>,
    /// The prompt as it would be sent.
    pub system_prompt: String,
    /// pi's `systemPromptOptions` (see [`crate::prompt::PromptInputs::options_value`]).
    pub options: Value,
}

/// What the `before_agent_start` handlers returned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BeforeAgentStartOutcome {
    /// Custom messages to add after the prompt's own messages, in order.
    pub messages: Vec<AgentMessage>,
    /// A whole prompt sent instead of the sectioned one for this run
    /// (never recorded; the last handler's wins).
    pub system_prompt: Option<String>,
    /// `systemPromptOptions` after the handlers changed it, when they did.
    pub options: Option<Value>,
}

/// Which delegated run an agent is: a subagent child started by its
/// parent's `Agent` call. The tool events of such an agent reach its
/// parent's watchers (hooks and gates) with this as their `subagent`
/// field, so they can tell the child's calls from the parent's (tool call
/// ids are the model's and may repeat between the two).
#[derive(Debug, Clone, PartialEq)]
pub struct Delegation {
    /// The child's session id.
    pub session_id: String,
    /// The profile it runs (`explore`, …).
    pub profile: String,
    /// The parent's `Agent` call that started (or resumed) it.
    pub parent_tool_call_id: String,
}

impl Delegation {
    /// The `subagent` field: `{sessionId, profile, parentToolCallId}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "sessionId": self.session_id,
            "profile": self.profile,
            "parentToolCallId": self.parent_tool_call_id,
        })
    }

    /// `event` (an object) with the `subagent` field added.
    pub fn stamp(d: Option<&Delegation>, mut event: Value) -> Value {
        if let (Some(d), Some(m)) = (d, event.as_object_mut()) {
            m.insert("subagent".into(), d.to_json());
        }
        event
    }
}

/// A `tool_call` event.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallEvent {
    pub tool_name: String,
    pub tool_call_id: String,
    /// The validated arguments.
    pub input: Value,
    /// Set when the call is a subagent child's.
    pub delegation: Option<Delegation>,
}

/// What the `tool_call` hooks decided.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCallOutcome {
    /// Run the call, with rewritten arguments when `Some`.
    Continue(Option<Value>),
    /// Do not run it; the text is the error result (pi: the block reason,
    /// `Tool execution was blocked`, or a failing handler's message).
    Block(String),
}

/// A `tool_result` event: the call and what it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultEvent {
    pub tool_name: String,
    pub tool_call_id: String,
    pub input: Value,
    pub output: ToolOutput,
    /// Set when the call is a subagent child's.
    pub delegation: Option<Delegation>,
}

/// The outcome of a boundary event (`turn_end`, `agent_before_settle`):
/// entry drafts to append and whether to continue.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BoundaryOutcome {
    /// Drafts as pi's handlers return them (`custom`, `custom_message`, …).
    pub entries: Vec<Value>,
    pub continue_run: bool,
}

/// Whether the model can answer a context (pi's `canContinue` of a
/// boundary preview): its last model message is a user or tool result
/// message, not the assistant's.
pub fn can_continue(llm_messages: &[Value]) -> bool {
    llm_messages
        .last()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        .is_some_and(|r| r != "assistant" && r != "system")
}

/// A boundary event's `context` (built by the agent for the committed
/// branch) with the proposal's entry drafts added, as pi rebuilds it
/// before each handler: each draft becomes a `contextEntries` item (the
/// draft with an `id`, `parentId` and `timestamp`), a `custom_message`
/// draft also a custom message in `contextMessages` and a user message in
/// `llmMessages`; `canContinue` follows. `ids` gives each draft's id.
pub fn boundary_preview(
    base: &Value,
    drafts: &[Value],
    now_ms: i64,
    now_iso: &str,
    mut ids: impl FnMut() -> String,
) -> Value {
    let list = |k: &str| {
        base.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (mut entries, mut messages, mut llm) = (
        list("contextEntries"),
        list("contextMessages"),
        list("llmMessages"),
    );
    let mut parent = entries
        .last()
        .and_then(|e| e["sourceEntry"]["id"].as_str())
        .map(str::to_string);
    for d in drafts {
        let mut source = d.as_object().cloned().unwrap_or_default();
        let id = ids();
        source.insert("id".into(), id.clone().into());
        source.insert(
            "parentId".into(),
            parent.clone().map_or(Value::Null, Value::String),
        );
        source.insert("timestamp".into(), now_iso.into());
        parent = Some(id);
        let mut made = Vec::new();
        if d.get("type").and_then(Value::as_str) == Some("custom_message") {
            let content = d.get("content").cloned().unwrap_or(Value::Null);
            let mut m = serde_json::Map::new();
            m.insert("role".into(), "custom".into());
            for k in ["customType", "content", "display", "details"] {
                if let Some(v) = d.get(k) {
                    m.insert(k.into(), v.clone());
                }
            }
            m.insert("timestamp".into(), now_ms.into());
            let blocks = match content {
                Value::String(t) => serde_json::json!([{"type": "text", "text": t}]),
                other => other,
            };
            llm.push(serde_json::json!({"role": "user", "content": blocks, "timestamp": now_ms}));
            messages.push(Value::Object(m.clone()));
            made.push(Value::Object(m));
        }
        entries.push(serde_json::json!({"sourceEntry": source, "messages": made}));
    }
    let pending = base
        .get("pendingMessages")
        .cloned()
        .unwrap_or_else(|| Value::Array(Vec::new()));
    let waiting = pending.as_array().is_some_and(|p| !p.is_empty());
    let base_can = base.get("canContinue").and_then(Value::as_bool) == Some(true);
    let can = can_continue(&llm) || (drafts.is_empty() && base_can) || waiting;
    serde_json::json!({
        "contextEntries": entries,
        "contextMessages": messages,
        "llmMessages": llm,
        "pendingMessages": pending,
        "canContinue": can,
    })
}

/// The agent's state, for the `ctx` snapshot handlers read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentSnapshot {
    pub provider: String,
    pub model: String,
    pub thinking_level: String,
    pub session_file: Option<String>,
    pub session_id: String,
    pub leaf_id: Option<String>,
    pub idle: bool,
    pub aborted: bool,
}

/// Everything the loop tells or asks its watchers. Every method has a
/// default that does nothing and changes nothing; [`Hooks::handles`] lets
/// the loop skip building an event nobody handles.
pub trait Hooks: Send + Sync {
    /// Whether anyone handles `event` (pi's event name).
    fn handles(&self, event: &str) -> bool;

    /// The agent's current state (called before events are dispatched).
    fn set_state(&self, _state: AgentSnapshot) {}

    /// Records to put on the event stream now (`extension_error`,
    /// `entry_appended`), in order; the loop emits them before the event
    /// that caused them.
    fn drain_events(&self) -> Vec<Value> {
        Vec::new()
    }

    /// An extension command `/name args`: `None` when no extension has
    /// one by that name. Handler failures are reported by the hooks.
    fn command(&self, _name: &str, _args: &str) -> Option<BoxFuture<'_, ()>> {
        None
    }

    fn input(&self, _ev: InputEvent) -> BoxFuture<'_, InputOutcome> {
        ready(InputOutcome::Continue)
    }

    fn before_agent_start(&self, _ev: BeforeAgentStart) -> BoxFuture<'_, BeforeAgentStartOutcome> {
        ready(BeforeAgentStartOutcome::default())
    }

    /// The messages of the next request without system messages; a new
    /// list when a handler changed it.
    fn context(&self, _messages: Vec<AgentMessage>) -> BoxFuture<'_, Option<Vec<AgentMessage>>> {
        ready(None)
    }

    fn tool_call(&self, _ev: ToolCallEvent) -> BoxFuture<'_, ToolCallOutcome> {
        ready(ToolCallOutcome::Continue(None))
    }

    /// The patched result, when a handler patched it.
    fn tool_result(&self, _ev: ToolResultEvent) -> BoxFuture<'_, Option<ToolOutput>> {
        ready(None)
    }

    /// A replacement message (same role), when a handler returned one.
    fn message_end(&self, _message: AgentMessage) -> BoxFuture<'_, Option<AgentMessage>> {
        ready(None)
    }

    /// `turn_end` / `agent_before_settle`: `payload` is pi's event with
    /// `entries: []` and `continue: false`; handlers see the proposal so
    /// far.
    fn boundary(&self, _payload: Value) -> BoxFuture<'_, BoundaryOutcome> {
        ready(BoundaryOutcome::default())
    }

    /// `session_before_switch` / `session_before_fork` (pi's payload):
    /// `true` when a handler cancels (`{cancel: true}`). Never by default.
    fn session_before(&self, _event: Value) -> BoxFuture<'_, bool> {
        ready(false)
    }

    /// `user_bash` (an RPC `bash` command, before it runs): `Ok(None)` runs
    /// it here, `Ok(Some(result))` is the handler's own
    /// `{output, exitCode, cancelled, truncated}`, `Err` fails the command
    /// (a handler threw or answered nonsense; reported already).
    fn user_bash(&self, _event: Value) -> BoxFuture<'_, Result<Option<Value>, String>> {
        ready(Ok(None))
    }

    /// A `session_before_*` event whose answer carries more than a cancel
    /// (`session_before_compact`'s own `compaction`): the last answer, or
    /// the first `{cancel: true}` (later handlers are not asked).
    fn session_before_answer(&self, _event: Value) -> BoxFuture<'_, Option<Value>> {
        ready(None)
    }

    /// Any other event (pi's payload); awaited, the answer ignored.
    fn notify(&self, _event: Value) -> BoxFuture<'_, ()> {
        ready(())
    }

    /// A session replacement: the owners start over for the new session
    /// (pi 1.6.0 calls every extension's factory again); changes to the
    /// agent (its tool set) come as operations. Nothing by default.
    fn reload(&self) -> BoxFuture<'_, ()> {
        ready(())
    }

    /// Changes to the agent its watchers asked for while the loop waited
    /// (an extension appending an entry); applied in order right after the
    /// hook call returns.
    fn take_ops(&self) -> Vec<AgentOp> {
        Vec::new()
    }

    /// Ready when operations (or records) wait to be taken: the loop
    /// applies them while it waits for a hook or a tool. Never ready by
    /// default.
    fn ops_ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }

    /// Resolves once the follow-up work a hook's calls started is done
    /// (e.g. the `thinking_level_select` event `setThinkingLevel` fires),
    /// so the next command or prompt sees its effects. Ready by default.
    fn quiesce(&self) -> BoxFuture<'_, ()> {
        ready(())
    }
}

/// Commands a client sends while the agent runs (RPC's `get_entries`,
/// `get_session_stats`, `set_model`, …): the loop answers them with its
/// current state at every point where it waits (the model's stream, tools,
/// hooks), so they need not wait for the run to settle. A change (a model,
/// a thinking level) takes effect from the next request.
pub trait Inquiries: Send + Sync {
    /// Resolves when commands wait.
    fn ready(&self) -> BoxFuture<'_, ()>;
    /// Answers every waiting command.
    fn serve(&self, agent: &mut super::Agent);
}

/// Resolves when `h`'s owners asked for changes; never without hooks.
pub async fn ops_ready(h: &Option<std::sync::Arc<dyn Hooks>>) {
    match h {
        Some(h) => h.ops_ready().await,
        None => std::future::pending().await,
    }
}

/// Resolves when `q` has questions; never without one.
pub async fn inquiry_ready(q: &Option<std::sync::Arc<dyn Inquiries>>) {
    match q {
        Some(q) => q.ready().await,
        None => std::future::pending().await,
    }
}

/// What limits an agent besides its hooks: the approvers, the final policy
/// and the sandbox for its tool calls, and the run's budget (money, turns,
/// wall clock; what was spent). An agent hands this on whole to every agent it
/// delegates to (see [`AgentExt::for_child`]), so whatever limit is added
/// here binds subagent children too.
#[derive(Default, Clone)]
pub struct Limits {
    /// Every gate must allow a call (`pi-run --gate`, repeatable).
    pub gates: Vec<std::sync::Arc<dyn Gate>>,
    pub policy: FinalPolicy,
    /// The sandbox every tool call runs in (unconfined by default): the
    /// bash tool's processes and the file tools' paths.
    pub sandbox: std::sync::Arc<crate::sandbox::Sandbox>,
    /// The run's budget, shared (not copied) with every child.
    pub budget: Option<std::sync::Arc<super::budget::Budget>>,
}

/// The watchers of one agent: its hooks, its limits (approvers and final
/// policy), and — for a subagent child — which delegated run it is. The
/// default has none of them, and then the loop is exactly the plain loop.
#[derive(Default, Clone)]
pub struct AgentExt {
    pub hooks: Option<std::sync::Arc<dyn Hooks>>,
    pub limits: Limits,
    /// Tools loaded while the run goes on (see [`crate::tools::ToolInbox`]).
    pub late_tools: Option<crate::tools::ToolInbox>,
    /// Set for a subagent child: its tool events carry it to the hooks
    /// and gates (see [`Delegation`]).
    pub delegation: Option<Delegation>,
}

impl AgentExt {
    /// Whether the loop has anything to ask at the tool-call gate.
    pub fn gates_tools(&self) -> bool {
        !self.limits.gates.is_empty()
            || self.limits.policy.workspace_paths
            || self.hooks.as_ref().is_some_and(|h| h.handles("tool_call"))
    }

    /// The watchers of an agent this one delegates to (a subagent child):
    /// the same [`Limits`], whole, and this agent's hooks, asked only at
    /// the child's tool events; none of this agent's own late tools. The
    /// child's tool calls pass exactly the gate this agent's calls pass,
    /// and no setting of the child can take a part of it away.
    pub fn for_child(&self, delegation: Delegation) -> AgentExt {
        // Every field is named, so a new one cannot be forgotten here.
        let AgentExt {
            hooks,
            limits,
            late_tools: _,
            delegation: _,
        } = self;
        AgentExt {
            hooks: hooks.clone().map(|h| {
                std::sync::Arc::new(DelegatedHooks { inner: h }) as std::sync::Arc<dyn Hooks>
            }),
            limits: limits.clone(),
            late_tools: None,
            delegation: Some(delegation),
        }
    }

    /// The watchers of the agent that runs the tool call `ctx` belongs to
    /// (the agent loop hands them to every tool it runs); `None` outside
    /// an agent's loop.
    pub fn of_caller(ctx: &crate::tools::ToolContext) -> Option<AgentExt> {
        ctx.caller
            .as_ref()
            .and_then(|c| c.0.downcast_ref::<AgentExt>())
            .cloned()
    }

    /// This agent's watchers as the opaque value a tool receives.
    pub fn as_caller(&self) -> crate::tools::Caller {
        crate::tools::Caller(std::sync::Arc::new(self.clone()))
    }
}

/// The events a delegated agent's hooks are asked about.
const DELEGATED_EVENTS: [&str; 5] = [
    "tool_call",
    "tool_result",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
];

/// The hooks of a subagent child: its parent's, asked only at the tool
/// gate (`tool_call` may rewrite or block, `tool_result` may patch) and
/// told of its `tool_execution_*`, each event with its `subagent` field.
/// Everything else about the child (its prompt, messages, turns, session)
/// is its own and reaches no hook. The hooks' owner keeps the parent's
/// state: what a handler asks for meanwhile (records, entries, tool
/// changes) is applied by the parent's loop, to the parent.
struct DelegatedHooks {
    inner: std::sync::Arc<dyn Hooks>,
}

impl Hooks for DelegatedHooks {
    fn handles(&self, event: &str) -> bool {
        DELEGATED_EVENTS.contains(&event) && self.inner.handles(event)
    }
    fn tool_call(&self, ev: ToolCallEvent) -> BoxFuture<'_, ToolCallOutcome> {
        self.inner.tool_call(ev)
    }
    fn tool_result(&self, ev: ToolResultEvent) -> BoxFuture<'_, Option<ToolOutput>> {
        self.inner.tool_result(ev)
    }
    fn notify(&self, event: Value) -> BoxFuture<'_, ()> {
        self.inner.notify(event)
    }
}

/// A tool call at the approval step: the final canonical arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub tool_name: String,
    pub tool_call_id: String,
    pub input: Value,
    pub cwd: PathBuf,
    /// Set when the call is a subagent child's.
    pub delegation: Option<Delegation>,
}

/// One approver's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Approval {
    Allow,
    /// The error result's text.
    Block(String),
}

/// The approval step: `pi-run --gate CMD`, or anything
/// else that must allow each call.
pub trait Gate: Send + Sync {
    fn approve(&self, req: ApprovalRequest) -> BoxFuture<'_, Approval>;
}

/// What was approved: the canonical bytes of the arguments, used once.
#[derive(Debug)]
pub struct Ticket {
    tool_call_id: String,
    canonical: String,
    used: bool,
}

impl Ticket {
    /// A ticket for the arguments as approved.
    pub fn new(tool_call_id: &str, input: &Value) -> Ticket {
        Ticket {
            tool_call_id: tool_call_id.to_string(),
            canonical: canonical_json(input),
            used: false,
        }
    }
}

/// JSON with object keys sorted, so equal arguments have equal bytes
/// whatever order their keys came in.
pub fn canonical_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(v)).unwrap_or_default()
}

/// The last check before a tool runs (approval is not
/// the final permission).
#[derive(Debug, Clone, Default)]
pub struct FinalPolicy {
    /// Paths given to the file tools (`path` of read, write, edit, ls,
    /// grep, find) must resolve inside the workspace.
    pub workspace_paths: bool,
}

/// The tools whose `path` argument names a file or folder.
const PATH_TOOLS: &[&str] = &["read", "write", "edit", "ls", "grep", "find"];

/// `p` made absolute against `cwd` and normalised (`.`/`..` removed, the
/// longest existing prefix resolved through symlinks).
fn resolve_in(cwd: &Path, p: &str) -> PathBuf {
    let joined = cwd.join(p);
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    // Resolve the existing part through symlinks (a link out of the
    // workspace counts as outside).
    let mut existing = out.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match existing.file_name() {
            Some(n) => {
                rest.push(n.to_os_string());
                existing.pop();
            }
            None => break,
        }
    }
    let mut real = std::fs::canonicalize(&existing).unwrap_or(existing);
    for n in rest.into_iter().rev() {
        real.push(n);
    }
    real
}

impl FinalPolicy {
    /// Checks a call right before it runs: `Err` is the error result.
    pub fn check(
        &self,
        ticket: Option<&mut Ticket>,
        tool_name: &str,
        tool_call_id: &str,
        input: &Value,
        cwd: &Path,
    ) -> Result<(), String> {
        if let Some(t) = ticket {
            if t.used {
                return Err(format!(
                    "Blocked: the approval for tool call {tool_call_id} was already used"
                ));
            }
            if t.tool_call_id != tool_call_id || t.canonical != canonical_json(input) {
                return Err(format!(
                    "Blocked: the arguments of tool call {tool_call_id} changed after approval"
                ));
            }
            t.used = true;
        }
        if self.workspace_paths && PATH_TOOLS.contains(&tool_name) {
            if let Some(p) = input.get("path").and_then(Value::as_str) {
                let root = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
                if !resolve_in(&root, p).starts_with(&root) {
                    return Err(format!(
                        "Blocked: {p} is outside the workspace {}",
                        root.display()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A change to the agent made on behalf of a hook's owner while the loop
/// waits (an extension appending an entry, reading the session, changing
/// the active tools). Applied between two steps of the loop, never during
/// one.
pub type AgentOp = Box<dyn FnOnce(&mut super::Agent, super::Emit<'_>) + Send>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn approval_is_used_once_on_identical_arguments() {
        let cwd = std::env::temp_dir();
        let p = FinalPolicy::default();
        let args = json!({"command": "ls", "timeout": 3});
        let mut t = Ticket::new("c1", &args);
        let reordered = json!({"timeout": 3, "command": "ls"});
        assert_eq!(
            p.check(Some(&mut t), "bash", "c1", &reordered, &cwd),
            Ok(())
        );
        let again = p.check(Some(&mut t), "bash", "c1", &args, &cwd);
        assert!(again.unwrap_err().contains("already used"));
        let mut t = Ticket::new("c1", &args);
        let changed = json!({"command": "rm -rf /", "timeout": 3});
        let e = p.check(Some(&mut t), "bash", "c1", &changed, &cwd);
        assert!(e.unwrap_err().contains("changed after approval"));
        let mut t = Ticket::new("c1", &args);
        assert!(p.check(Some(&mut t), "bash", "c2", &args, &cwd).is_err());
    }

    #[test]
    fn workspace_paths_stay_inside() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::os::unix::fs::symlink(t.path(), ws.join("out")).unwrap();
        let p = FinalPolicy {
            workspace_paths: true,
        };
        let ok = |path: &str| p.check(None, "read", "c", &json!({ "path": path }), &ws);
        assert_eq!(ok("sub/new.txt"), Ok(()));
        assert_eq!(ok("./a/../b"), Ok(()));
        assert!(ok("../x").is_err());
        assert!(ok("/etc/passwd").is_err());
        assert!(ok("out/x").is_err(), "a symlink out of the workspace");
        // Tools without a path, and a policy that is off, are not checked.
        assert_eq!(
            p.check(None, "bash", "c", &json!({"path": "/etc"}), &ws),
            Ok(())
        );
        let off = FinalPolicy::default();
        assert_eq!(
            off.check(None, "read", "c", &json!({"path": "/etc"}), &ws),
            Ok(())
        );
    }
}
