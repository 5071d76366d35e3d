//! How the handlers of every extension answer one agent event together, as
//! pi 1.6.0 composes them: `input` transforms chain and the first
//! `handled` wins; `before_agent_start` messages accumulate and the last
//! `systemPrompt` wins; `context` lists chain; `tool_call` rewrites chain
//! and the first block wins, while an error, a timeout or a dead extension
//! blocks (fail closed); `tool_result` patches chain; `message_end`
//! replacements chain (same role only); every other throw is reported and
//! the chain goes on.

use super::*;

/// An id for a draft in a boundary preview (8 hex digits, as pi's entry
/// ids; only handlers see it, nothing is recorded under it).
pub(super) fn draft_id() -> String {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    let mut x = (t ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    format!("{:08x}", x as u32)
}

/// A patch from `tool_result` applied to `out` (pi's partial patch).
pub(super) fn apply_result_patch(out: &mut ToolOutput, v: &Value) -> Result<(), String> {
    let Value::Object(p) = v else {
        return Ok(());
    };
    if let Some(c) = p.get("content") {
        out.content = serde_json::from_value::<Vec<ContentBlock>>(c.clone())
            .map_err(|e| format!("invalid content in tool_result patch: {e}"))?;
        if !p.contains_key("structuredContent") {
            out.structured = None;
        }
    }
    if let Some(d) = p.get("details") {
        out.details = Some(d.clone());
    }
    if let Some(s) = p.get("structuredContent") {
        out.structured = Some(s.clone());
    }
    if let Some(e) = p.get("isError").and_then(Value::as_bool) {
        out.is_error = e;
    }
    Ok(())
}

pub(super) fn result_event(ev: &ToolResultEvent, out: &ToolOutput) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), "tool_result".into());
    m.insert("toolName".into(), ev.tool_name.clone().into());
    m.insert("toolCallId".into(), ev.tool_call_id.clone().into());
    m.insert("input".into(), ev.input.clone());
    m.insert(
        "content".into(),
        serde_json::to_value(&out.content).unwrap_or(Value::Null),
    );
    m.insert("details".into(), out.details.clone().unwrap_or(Value::Null));
    if let Some(s) = &out.structured {
        m.insert("structuredContent".into(), s.clone());
    }
    m.insert("isError".into(), out.is_error.into());
    Delegation::stamp(ev.delegation.as_ref(), Value::Object(m))
}

/// A `{customType, content, display, details?}` from an extension as a
/// custom message.
pub fn custom_message(v: &Value) -> Result<CustomMessage, String> {
    let custom_type = v
        .get("customType")
        .and_then(Value::as_str)
        .ok_or("a message needs a string customType")?
        .to_string();
    let content = match v.get("content") {
        Some(Value::String(s)) => UserContent::Text(s.clone()),
        Some(c @ Value::Array(_)) => serde_json::from_value(c.clone())
            .map_err(|e| format!("invalid message content: {e}"))?,
        _ => UserContent::Text(String::new()),
    };
    Ok(CustomMessage {
        custom_type,
        content,
        display: v.get("display").and_then(Value::as_bool).unwrap_or(false),
        details: v.get("details").cloned(),
        timestamp: Num::signed(crate::timefmt::now_ms()),
        extra: Map::new(),
    })
}

impl Hooks for Runner {
    fn handles(&self, event: &str) -> bool {
        self.absorb_more();
        lock(&self.events).contains(event)
    }

    fn set_state(&self, state: AgentSnapshot) {
        lock(&self.shared).state = state;
    }

    fn drain_events(&self) -> Vec<Value> {
        std::mem::take(&mut lock(&self.errors))
    }

    fn reload(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.reload_all())
    }

    fn take_ops(&self) -> Vec<AgentOp> {
        // Tools registered during the hook that just returned join now.
        self.absorb_more();
        std::mem::take(&mut lock(&self.ops))
    }

    fn ops_ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.ops_ready.notified())
    }

    fn quiesce(&self) -> BoxFuture<'_, ()> {
        let mut rx = self.followups.subscribe();
        Box::pin(async move {
            let _ = rx.wait_for(|n| *n == 0).await;
        })
    }

    fn command(&self, name: &str, args: &str) -> Option<BoxFuture<'_, ()>> {
        let (_, e, spec) = self
            .command_table()
            .into_iter()
            .find(|(invoke, _, _)| invoke == name)?;
        // The extension knows the command by the name it registered.
        let ev = json!({"type": "command", "name": spec.name, "args": args});
        let name = name.to_string();
        Some(Box::pin(async move {
            match self.send(&e, &ev).await.0 {
                Ok(_) | Err(HostError::Aborted) => {}
                Err(HostError::Failed(m)) => self.report(&format!("command:{name}"), "command", &m),
                Err(HostError::Timeout) => self.report(
                    &format!("command:{name}"),
                    "command",
                    "did not answer within the extension timeout",
                ),
                Err(HostError::Dead(m)) => self.report(&format!("command:{name}"), "command", &m),
            }
        }))
    }

    fn input(&self, ev: InputEvent) -> BoxFuture<'_, InputOutcome> {
        Box::pin(async move {
            let (mut text, mut images) = (ev.text.clone(), ev.images.clone());
            let mut changed = false;
            for e in self.handlers("input", false) {
                let mut payload =
                    json!({"type": "input", "text": text, "images": images, "source": ev.source});
                // pi omits it when idle.
                if let Some(b) = &ev.streaming_behavior {
                    payload["streamingBehavior"] = b.clone().into();
                }
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                match v.get("action").and_then(Value::as_str) {
                    Some("handled") => return InputOutcome::Handled,
                    Some("transform") => {
                        if let Some(t) = v.get("text").and_then(Value::as_str) {
                            text = t.to_string();
                        }
                        if let Some(i) = v.get("images").and_then(Value::as_array) {
                            images = i.clone();
                        }
                        changed = true;
                    }
                    _ => {}
                }
            }
            if changed {
                InputOutcome::Transform { text, images }
            } else {
                InputOutcome::Continue
            }
        })
    }

    fn before_agent_start(&self, ev: BeforeAgentStart) -> BoxFuture<'_, BeforeAgentStartOutcome> {
        Box::pin(async move {
            let mut payload = ev.start.clone();
            payload.insert("type".into(), "before_agent_start".into());
            payload.insert("systemPromptOptions".into(), ev.options.clone());
            payload.insert("systemPrompt".into(), ev.system_prompt.clone().into());
            let payload = Value::Object(payload);
            let mut out = BeforeAgentStartOutcome::default();
            for e in self.handlers("before_agent_start", false) {
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                // One handler's `message`, or several handlers' `messages`
                // of one extension (the Node host), in order.
                let one = v.get("message").filter(|m| m.is_object()).into_iter();
                let many = v
                    .get("messages")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                for m in one.chain(many) {
                    match custom_message(m) {
                        Ok(c) => out.messages.push(AgentMessage::Custom(Box::new(c))),
                        Err(err) => self.report(&e.path, "before_agent_start", &err),
                    }
                }
                if let Some(p) = v.get("systemPrompt").and_then(Value::as_str) {
                    out.system_prompt = Some(p.to_string());
                }
            }
            out
        })
    }

    fn context(&self, messages: Vec<AgentMessage>) -> BoxFuture<'_, Option<Vec<AgentMessage>>> {
        Box::pin(async move {
            let mut list = messages;
            let mut changed = false;
            for e in self.handlers("context", false) {
                let payload = json!({"type": "context", "messages": list});
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                if let Some(m) = v.get("messages") {
                    match serde_json::from_value::<Vec<AgentMessage>>(m.clone()) {
                        Ok(new) => {
                            list = new;
                            changed = true;
                        }
                        Err(err) => {
                            self.report(&e.path, "context", &format!("invalid messages: {err}"))
                        }
                    }
                }
            }
            changed.then_some(list)
        })
    }

    fn tool_call(&self, ev: ToolCallEvent) -> BoxFuture<'_, ToolCallOutcome> {
        Box::pin(async move {
            let mut input = ev.input.clone();
            let mut changed = false;
            for e in self.handlers("tool_call", true) {
                let payload = Delegation::stamp(
                    ev.delegation.as_ref(),
                    json!({"type": "tool_call", "toolName": ev.tool_name, "toolCallId": ev.tool_call_id, "input": input}),
                );
                let (answer, errors) = self.send(&e, &payload).await;
                for err in &errors {
                    self.report(&e.path, "tool_call", err);
                }
                match answer {
                    Ok(v) => match tool_call_answer(&v) {
                        Ok(ToolCallAnswer::Block(reason)) => return ToolCallOutcome::Block(reason),
                        Ok(ToolCallAnswer::Input(i)) => {
                            input = i;
                            changed = true;
                        }
                        Ok(ToolCallAnswer::Nothing) => {}
                        Err(why) => {
                            eprintln!(
                                "{}: extension {}: {why}; blocking {}",
                                self.cfg.prog, e.path, ev.tool_name
                            );
                            return ToolCallOutcome::Block(format!(
                                "Extension {} {why}; blocking execution",
                                e.path
                            ));
                        }
                    },
                    // Fail closed, with the thrown text (pi: no
                    // extension_error for these).
                    Err(HostError::Failed(msg)) => return ToolCallOutcome::Block(msg),
                    Err(HostError::Timeout) => {
                        return ToolCallOutcome::Block(format!(
                            "Extension {} did not answer tool_call within {} s; blocking execution",
                            e.path,
                            self.cfg.event_timeout.as_secs_f64()
                        ))
                    }
                    Err(HostError::Dead(_)) => {
                        return ToolCallOutcome::Block(format!(
                            "Extension {} is not running; blocking execution",
                            e.path
                        ))
                    }
                    Err(HostError::Aborted) => {
                        return ToolCallOutcome::Block("Operation aborted".into())
                    }
                }
            }
            ToolCallOutcome::Continue(changed.then_some(input))
        })
    }

    fn tool_result(&self, ev: ToolResultEvent) -> BoxFuture<'_, Option<ToolOutput>> {
        Box::pin(async move {
            let mut out = ev.output.clone();
            let mut changed = false;
            for e in self.handlers("tool_result", false) {
                let payload = result_event(&ev, &out);
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                if v.is_object() {
                    match apply_result_patch(&mut out, &v) {
                        Ok(()) => changed = true,
                        Err(err) => self.report(&e.path, "tool_result", &err),
                    }
                }
            }
            changed.then_some(out)
        })
    }

    fn message_end(&self, message: AgentMessage) -> BoxFuture<'_, Option<AgentMessage>> {
        Box::pin(async move {
            let mut msg = message;
            let mut changed = false;
            for e in self.handlers("message_end", false) {
                let payload = json!({"type": "message_end", "message": msg});
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                let Some(m) = v.get("message") else { continue };
                match serde_json::from_value::<AgentMessage>(m.clone()) {
                    Ok(new) if new.role() == msg.role() => {
                        msg = new;
                        changed = true;
                    }
                    Ok(_) => self.report(
                        &e.path,
                        "message_end",
                        "message_end handlers must return a message with the same role",
                    ),
                    Err(err) => {
                        self.report(&e.path, "message_end", &format!("invalid message: {err}"))
                    }
                }
            }
            changed.then_some(msg)
        })
    }

    fn notify(&self, event: Value) -> BoxFuture<'_, ()> {
        Box::pin(self.notify_all(event))
    }

    /// The first `{cancel: true}` cancels; later handlers are not asked.
    fn session_before(&self, event: Value) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let v = self.session_before_answer(event).await;
            v.is_some_and(|v| v.get("cancel").and_then(Value::as_bool) == Some(true))
        })
    }

    /// The first handler that throws fails the command (pi: its message is
    /// the RPC error); the first `{result}` answers it.
    fn user_bash(&self, event: Value) -> BoxFuture<'_, Result<Option<Value>, String>> {
        Box::pin(async move {
            for e in self.handlers("user_bash", false) {
                let (answer, errors) = self.send(&e, &event).await;
                for err in &errors {
                    self.report(&e.path, "user_bash", err);
                }
                if let Some(first) = errors.first() {
                    return Err(first.clone());
                }
                match answer {
                    Ok(v) => {
                        if let Some(r) = v.get("result").filter(|r| r.is_object()) {
                            return Ok(Some(r.clone()));
                        }
                    }
                    Err(HostError::Failed(msg)) => {
                        self.report(&e.path, "user_bash", &msg);
                        return Err(msg);
                    }
                    Err(_) => {}
                }
            }
            Ok(None)
        })
    }

    fn session_before_answer(&self, event: Value) -> BoxFuture<'_, Option<Value>> {
        Box::pin(async move {
            let kind = event["type"].as_str().unwrap_or("").to_string();
            let mut last = None;
            for e in self.handlers(&kind, false) {
                let Some(v) = self.send_reported(&e, &event).await else {
                    continue;
                };
                if v.is_null() {
                    continue;
                }
                let cancel = v.get("cancel").and_then(Value::as_bool) == Some(true);
                last = Some(v);
                if cancel {
                    break;
                }
            }
            last
        })
    }

    /// pi's boundary chain: each handler sees the proposal so far; a
    /// returned `entries` or `continue` replaces that field. Drafts that
    /// are not `custom` / `custom_message` objects are reported and the
    /// proposal is dropped (pi: `Invalid boundary entries`).
    fn boundary(&self, payload: Value) -> BoxFuture<'_, crate::agent::hooks::BoundaryOutcome> {
        Box::pin(async move {
            let kind = payload["type"].as_str().unwrap_or("turn_end").to_string();
            let mut ev = payload;
            // The committed context; each handler sees it with the drafts
            // proposed so far (pi rebuilds the preview before each one).
            let base = ev.get("context").cloned();
            let preview = |drafts: &Value| {
                base.as_ref().map(|b| {
                    let drafts = drafts.as_array().map(Vec::as_slice).unwrap_or(&[]);
                    crate::agent::hooks::boundary_preview(
                        b,
                        drafts,
                        crate::timefmt::now_ms(),
                        &crate::timefmt::now_iso(),
                        draft_id,
                    )
                })
            };
            // Who proposed the drafts (an invalid proposal is theirs).
            let mut proposer = String::from("boundary");
            for e in self.handlers(&kind, false) {
                if let Some(p) = preview(&ev["entries"]) {
                    ev["context"] = p;
                }
                let Some(v) = self.send_reported(&e, &ev).await else {
                    continue;
                };
                if let Some(entries) = v.get("entries").filter(|x| x.is_array()) {
                    ev["entries"] = entries.clone();
                    proposer = e.path.clone();
                }
                if let Some(c) = v.get("continue").and_then(Value::as_bool) {
                    ev["continue"] = c.into();
                }
            }
            let entries = ev["entries"].as_array().cloned().unwrap_or_default();
            // A `context_edit` must name an entry of the branch.
            let known: std::collections::HashSet<&str> = base
                .as_ref()
                .and_then(|b| b["contextEntries"].as_array())
                .map(|l| {
                    l.iter()
                        .filter_map(|x| x["sourceEntry"]["id"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            let bad = entries.iter().find_map(|d| {
                let custom = || d.get("customType").and_then(Value::as_str).is_some();
                match d.get("type").and_then(Value::as_str) {
                    Some("custom") | Some("custom_message") if custom() => None,
                    Some("context_edit") => match d.get("targetId").and_then(Value::as_str) {
                        Some(t) if known.contains(t) => {
                            let r = d.get("replacement").unwrap_or(&Value::Null);
                            (!(r.is_null() || r.get("content").is_some()))
                                .then(|| format!("invalid replacement for {t}"))
                        }
                        Some(t) => Some(format!("Entry {t} not found")),
                        None => Some("context_edit needs a targetId".to_string()),
                    },
                    _ => Some(format!("unsupported draft {d}")),
                }
            });
            if let Some(msg) = bad {
                self.report(
                    &proposer,
                    &kind,
                    &format!("Invalid boundary entries: {msg}"),
                );
                return crate::agent::hooks::BoundaryOutcome::default();
            }
            let mut continue_run = ev["continue"].as_bool() == Some(true);
            let runnable =
                preview(&ev["entries"]).is_none_or(|p| p["canContinue"].as_bool() == Some(true));
            if continue_run && !runnable {
                // pi 1.6.0 (observed): this line on stderr in every mode,
                // and the run settles.
                eprintln!(
                    "Extension error (<boundary>): {kind} requested continuation without runnable model context"
                );
                continue_run = false;
            }
            crate::agent::hooks::BoundaryOutcome {
                entries,
                continue_run,
            }
        })
    }
}
