//! The way back into the agent loop for a tool that runs other tools (the
//! `codemode` tool's scripts): a [`Host`] in the tool's context asks the
//! loop to run a nested call, and the loop runs it exactly as a call of the
//! model — its own `tool_execution_*` events (with `parentToolCallId`),
//! validation, the `tool_call` hooks, the approval gates, the final policy
//! right before execute, the `tool_result` hooks — then answers with the
//! result and the id it gave the call (`<parent id>/<n>`). The host also
//! reads and appends the branch's `custom` entries of one type (state a tool
//! keeps in the session). Requests travel on the same channel as the
//! parent's partial results, so the events come out in the order the tool
//! made them.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::tools::{Tool, ToolOutput};

/// One nested call: the tool (any tool the parent may reach, declared or
/// not), its raw arguments, and the token that cancels it (the parent
/// cancels it when the call is no longer wanted).
pub struct NestedCall {
    pub tool: Arc<dyn Tool>,
    pub args: Value,
    pub cancel: CancellationToken,
}

/// How a nested call ended: the id the loop gave it and its result (after
/// the `tool_result` hooks), an error result when it was refused.
#[derive(Debug, Clone)]
pub struct NestedResult {
    pub id: String,
    pub output: ToolOutput,
}

/// What a tool asks of the loop (internal to the loop's channel).
pub(crate) enum Request {
    Call(NestedCall, oneshot::Sender<NestedResult>),
    Entries(String, oneshot::Sender<Vec<Value>>),
    Append(String, Value, oneshot::Sender<Result<(), String>>),
}

/// What travels on the loop's channel while tools run.
pub(crate) enum Event {
    /// A partial result of top-level call `i`.
    Update(usize, ToolOutput),
    /// Top-level call `i` finished (result, milliseconds).
    Done(usize, ToolOutput, u64),
    /// Top-level call `i` asks for something.
    Ask(usize, Request),
    /// A partial result of nested call `n`.
    NestedUpdate(usize, ToolOutput),
    /// Nested call `n` finished.
    NestedDone(usize, ToolOutput, u64),
}

/// A running call's way back into the loop.
#[derive(Clone)]
pub struct Host {
    index: usize,
    tx: mpsc::UnboundedSender<Event>,
    /// The agent's active tools when the parent call started.
    active: Arc<Vec<Arc<dyn Tool>>>,
}

const GONE: &str = "The agent loop is no longer running";

impl Host {
    /// The host the loop gave a running tool (`None` outside the loop).
    pub fn of(ctx: &crate::tools::ToolContext) -> Option<Host> {
        ctx.host
            .as_ref()
            .and_then(|h| h.0.downcast_ref::<Host>())
            .cloned()
    }

    pub(crate) fn new(
        index: usize,
        tx: mpsc::UnboundedSender<Event>,
        active: Arc<Vec<Arc<dyn Tool>>>,
    ) -> Host {
        Host { index, tx, active }
    }

    /// The agent's active tools (in order) when this call started.
    pub fn active_tools(&self) -> Arc<Vec<Arc<dyn Tool>>> {
        Arc::clone(&self.active)
    }

    /// Asks the loop to run `call` through its gate, at once (so the
    /// request comes before anything the tool reports after it); the
    /// future resolves when the call ended (an error result when the loop
    /// is gone).
    pub fn call(&self, call: NestedCall) -> impl std::future::Future<Output = NestedResult> {
        let (tx, rx) = oneshot::channel();
        let sent = self
            .tx
            .send(Event::Ask(self.index, Request::Call(call, tx)))
            .is_ok();
        async move {
            let gone = || NestedResult {
                id: String::new(),
                output: ToolOutput::error(GONE),
            };
            if !sent {
                return gone();
            }
            rx.await.unwrap_or_else(|_| gone())
        }
    }

    /// The `data` of the branch's `custom` entries of `custom_type`, oldest
    /// first.
    pub async fn entries(&self, custom_type: &str) -> Vec<Value> {
        let (tx, rx) = oneshot::channel();
        let ask = Request::Entries(custom_type.to_string(), tx);
        if self.tx.send(Event::Ask(self.index, ask)).is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Appends a `custom` entry (reported as `entry_appended`).
    pub async fn append(&self, custom_type: &str, data: Value) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        let ask = Request::Append(custom_type.to_string(), data, tx);
        if self.tx.send(Event::Ask(self.index, ask)).is_err() {
            return Err(GONE.into());
        }
        rx.await.unwrap_or_else(|_| Err(GONE.into()))
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("index", &self.index).finish()
    }
}
