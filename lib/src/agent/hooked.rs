//! The agent's side of its hooks: every event dispatched to them (tool
//! events with a subagent's attribution), what a hook asked for applied
//! when it returns, the `input`, command, session-replacement and user-bash
//! hooks, and the tool-call gate between validation and execution
//! (`tool_call` hooks, then every approver, then the approval ticket the
//! final policy checks right before the tool runs).

use super::*;

impl Agent {
    /// After a hook returned: its records go on the stream, its changes to
    /// the agent are applied.
    pub(super) fn settle_hook(&mut self, emit: Emit<'_>) {
        let Some(h) = self.ext.hooks.clone() else {
            return;
        };
        for ev in h.drain_events() {
            emit(&Event::Value(&ev));
        }
        for op in h.take_ops() {
            op(self, &mut *emit);
        }
    }

    /// Emits `wire`; the hooks see the event first (`for_hooks`, else the
    /// wire form) when they handle it, as pi's extensions see events before
    /// its clients do.
    pub(super) async fn dispatch(
        &mut self,
        wire: Event<'_>,
        for_hooks: impl FnOnce() -> Option<Value>,
        emit: Emit<'_>,
    ) {
        if let Some(h) = self.hooks_for(wire.kind()) {
            let fut = h.notify(for_hooks().unwrap_or_else(|| wire.to_value().into_owned()));
            self.wait(&h, fut, emit).await;
            self.settle_hook(emit);
        }
        emit(&wire);
    }

    /// A `tool_execution_*` event: a subagent child's reaches the hooks
    /// with its `subagent` field (the wire form stays pi's).
    pub(super) async fn dispatch_tool_event(&mut self, wire: Value, emit: Emit<'_>) {
        let delegation = self.ext.delegation.clone();
        let for_hooks = || {
            delegation
                .as_ref()
                .map(|d| hooks::Delegation::stamp(Some(d), wire.clone()))
        };
        self.dispatch(Event::Value(&wire), for_hooks, emit).await;
    }

    /// `message_start` then `message_end` of a message the loop made; a
    /// `message_end` hook may replace it (same role). Returns the message
    /// as it ended.
    pub(super) async fn start_end(&mut self, msg: AgentMessage, emit: Emit<'_>) -> AgentMessage {
        let start = Event::Message {
            kind: "message_start",
            message: &msg,
        };
        self.dispatch(start, || None, emit).await;
        self.end_message(msg, emit).await
    }

    pub(super) async fn end_message(
        &mut self,
        mut msg: AgentMessage,
        emit: Emit<'_>,
    ) -> AgentMessage {
        if let Some(h) = self.hooks_for("message_end") {
            let fut = h.message_end(msg.clone());
            if let Some(Some(r)) = self.wait(&h, fut, emit).await {
                if r.role() == msg.role() {
                    msg = r;
                }
            }
            self.settle_hook(emit);
        }
        emit(&Event::Message {
            kind: "message_end",
            message: &msg,
        });
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

    /// The tool-call gate after validation: `tool_call` hooks
    /// (rewrite or block), then every approver on the final arguments.
    /// `Ok` holds the arguments to run and the approval ticket the final
    /// policy checks right before execute; `Err` the error result's text.
    pub(super) async fn gate_call(
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
}
