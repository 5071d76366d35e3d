//! The loop of one run: `before_agent_start`, the user message appended,
//! then turn after turn (an assistant message streamed, its tool calls run,
//! steering and follow-ups delivered at pi's points) until the model
//! answers without tool calls, a limit is reached or the run is aborted;
//! transient provider errors retried with pi's backoff and a context
//! overflow answered by compacting once; `turn_end` and `agent_end` with
//! what extensions appended at each boundary.

use super::autocompact::AfterRun;
use super::*;

impl Agent {
    /// pi's `before_agent_start`: the handlers may add custom messages
    /// (after the user message) and force a whole prompt for this run.
    pub(super) async fn before_agent_start(&mut self, user: &AgentMessage, emit: Emit<'_>) {
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
            "selectedTools": self.opts.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
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

    pub(super) async fn run_inner(&mut self, user: AgentMessage, emit: Emit<'_>) -> RunOutcome {
        let mut new_messages: Vec<AgentMessage> = Vec::new();
        let mut attempt: u32 = 0;
        let mut first_run = true;
        let mut retrying = false;
        let mut overflow_tried = false;
        loop {
            // This run's last reply was hidden without a retry.
            let mut hidden = false;
            let start = events::simple("agent_start");
            self.dispatch(Event::Value(&start), || None, emit).await;
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
            let end = Event::AgentEnd {
                messages: &new_messages,
                will_retry,
            };
            let for_hooks = || Some(json!({"type": "agent_end", "messages": &new_messages}));
            self.dispatch(end, for_hooks, emit).await;
            if let Some((err, info)) = retry_error {
                if will_retry {
                    attempt += 1;
                    let delay = self.opts.retry.delay_for(attempt, info.as_ref());
                    emit(&Event::Value(
                        &json!({"type": "auto_retry_start", "attempt": attempt, "maxAttempts": self.opts.retry.max_retries, "delayMs": delay, "errorMessage": err}),
                    ));
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
                            emit(&Event::Value(
                                &json!({"type": "auto_retry_end", "success": false, "attempt": attempt, "finalError": "Retry cancelled"}),
                            ));
                            emit(&Event::Value(
                                &json!({"type": "agent_settled", "aborted": true}),
                            ));
                            return RunOutcome {
                                last: last_assistant(&new_messages),
                                error: Some("Retry cancelled".into()),
                                aborted: true,
                                limit: None,
                                hidden: false,
                            };
                        }
                        new_messages.clear();
                        retrying = true;
                        continue;
                    }
                } else if attempt > 0 {
                    emit(&Event::Value(
                        &json!({"type": "auto_retry_end", "success": false, "attempt": attempt, "finalError": err}),
                    ));
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
                match self
                    .compact_after_run(last.as_ref(), failure.as_ref(), &mut overflow_tried, emit)
                    .await
                {
                    AfterRun::Retry => {
                        new_messages.clear();
                        retrying = false;
                        continue;
                    }
                    AfterRun::Hidden => hidden = true,
                    AfterRun::Kept => {}
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
            let settled = json!({"type": "agent_settled", "aborted": aborted});
            self.dispatch(Event::Value(&settled), || None, emit).await;
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
                hidden,
            };
        }
    }

    pub(super) async fn turns(
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
            self.turn_start(turn, emit).await;
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
                                emit(&Event::Value(&events::queue_update(&steering, &follow_up)));
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
                    emit(&Event::Value(
                        &json!({"type": "auto_retry_end", "success": true, "attempt": attempt}),
                    ));
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
                self.turn_start(turn, emit).await;
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
    pub(super) fn turn_limit(&self) -> Option<u32> {
        let shared = self.ext.limits.budget.as_ref().and_then(|b| b.max_turns());
        match (self.opts.max_turns, shared) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// One drain of a queue at a delivery point: as many messages as its
    /// mode delivers, taken off the queue only when delivered.
    pub(super) fn plan_drain(&self, kind: queue::QueueKind) -> Vec<Pending> {
        vec![Pending::Queued(kind); self.queue.plan(kind)]
    }

    /// Custom messages sent with `triggerTurn: false` while streaming are
    /// appended when the turn ends.
    pub(super) async fn end_of_turn(
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

    /// `turn_start` (the hooks also get the turn's index and time).
    async fn turn_start(&mut self, turn: u32, emit: Emit<'_>) {
        let wire = events::simple("turn_start");
        let for_hooks =
            || Some(json!({"type": "turn_start", "turnIndex": turn - 1, "timestamp": now_ms()}));
        self.dispatch(Event::Value(&wire), for_hooks, emit).await;
    }

    /// `turn_end`, pi's boundary event: the handlers may add entries
    /// (`custom` entries, `custom_message` messages) and ask for one more
    /// request (`true`).
    pub(super) async fn turn_end(
        &mut self,
        turn: u32,
        msg: &AgentMessage,
        results: &[AgentMessage],
        emit: Emit<'_>,
    ) -> bool {
        let wire = Event::TurnEnd {
            message: msg,
            tool_results: results,
        };
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
    pub(super) async fn before_settle(&mut self, outcome: &str, emit: Emit<'_>) -> bool {
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
    pub(super) fn boundary_context(&self) -> Value {
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
    pub(super) fn append_drafts(&mut self, drafts: Vec<Value>, event: &str, emit: Emit<'_>) {
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
                emit(&Event::Value(
                    &json!({"type": "extension_error", "event": event, "error": e}),
                ));
            }
        }
    }
}

pub(super) fn last_assistant(msgs: &[AgentMessage]) -> Option<AssistantMessage> {
    msgs.iter().rev().find_map(|m| match m {
        AgentMessage::Assistant(a) => Some(a.as_ref().clone()),
        _ => None,
    })
}

/// A message to deliver at the start of a turn: one the loop holds, or
/// the next of a queue (taken when delivered).
#[derive(Debug, Clone)]
pub(super) enum Pending {
    Now(AgentMessage),
    Queued(queue::QueueKind),
}

/// How the turns of one attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum TurnsEnd {
    Done,
    ModelError(String, Option<provider::FailureInfo>),
    Aborted,
    MaxTurns(u32),
    Failed(String),
}
