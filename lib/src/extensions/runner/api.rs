//! What an extension may ask of pi-run while it runs (`appendEntry`,
//! `sendMessage`, `setActiveTools`, `getActiveTools`, `ui.*`, `exec`, …):
//! answered at once from the runner's state, or queued as operations the
//! agent applies when the current hook returns.

use super::*;

impl CallHandler for Runner {
    fn call(
        &self,
        _ext: usize,
        method: String,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let entries = |agent: &crate::agent::Agent, idx: Vec<usize>| {
            Value::Array(
                idx.into_iter()
                    .filter_map(|i| serde_json::to_value(&agent.store.session.entries[i]).ok())
                    .collect(),
            )
        };
        match method.as_str() {
            "session.getEntries" => self.ask(move |a| {
                let n = a.store.session.entries.len();
                Ok(entries(a, (0..n).collect()))
            }),
            "session.getBranch" => {
                let from = params
                    .get("fromId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.ask(move |a| {
                    let idx = match &from {
                        Some(id) if a.store.session.index_of(id).is_none() => {
                            return Err(format!("Entry {id} not found"))
                        }
                        Some(id) => a.store.session.path_to(id),
                        None => a.store.session.branch(),
                    };
                    Ok(entries(a, idx))
                })
            }
            // pi's estimate: the last answer's total tokens against the
            // model's window (`undefined` before any answer).
            "getContextUsage" => self.ask(|a| {
                let session = &a.store.session;
                let tokens = session.branch().into_iter().rev().find_map(|i| {
                    match session.entries[i].message() {
                        Some(m @ AgentMessage::Assistant(_)) => serde_json::to_value(m)
                            .ok()
                            .map(|v| v["usage"]["totalTokens"].clone())
                            .filter(Value::is_number),
                        _ => None,
                    }
                });
                let window = a.opts.model.context_window;
                Ok(match tokens {
                    Some(t) if window > 0 => json!({
                        "percent": t.as_f64().unwrap_or(0.0) / window as f64 * 100.0,
                        "tokens": t,
                        "contextWindow": window,
                    }),
                    _ => Value::Null,
                })
            }),
            "session.getHeader" => self
                .ask(|a| serde_json::to_value(&a.store.session.header).map_err(|e| e.to_string())),
            "session.getLeafId" => self.ask(|a| {
                Ok(a.store
                    .session
                    .leaf_id()
                    .map(|s| Value::String(s.to_string()))
                    .unwrap_or(Value::Null))
            }),
            "setActiveTools" => {
                let names = crate::format::string_list(params.get("names"));
                let pool = lock(&self.pool).clone();
                // Unknown names are ignored, as pi does.
                let chosen: Vec<Arc<dyn crate::tools::Tool>> = names
                    .iter()
                    .filter_map(|n| pool.iter().find(|t| t.name().into_owned() == *n).cloned())
                    .collect();
                {
                    let mut s = lock(&self.shared);
                    s.active_tools = chosen.iter().map(|t| t.name().into_owned()).collect();
                }
                if !self.attached() {
                    // Before the agent exists (session_start): the names
                    // decide the tool set the run starts with, resolved
                    // once tools registered meanwhile have joined.
                    lock(&self.shared).pending_active = Some(names);
                    return ready(Ok(Value::Null));
                }
                let builder = lock(&self.prompt).clone();
                let me = self.me.clone();
                self.ask(move |a| {
                    if let Some(me) = me.upgrade() {
                        me.retool(a, chosen, builder);
                    }
                    Ok(Value::Null)
                })
            }
            // A client that answers (RPC mode): dialogs go to it and
            // wait for its answer; notices are sent on.
            m if m.starts_with("ui.") && lock(&self.ui).is_some() => {
                let ui = lock(&self.ui).clone();
                match ui {
                    Some(ui)
                        if matches!(m, "ui.confirm" | "ui.select" | "ui.input" | "ui.editor") =>
                    {
                        ui.dialog(m, params)
                    }
                    Some(ui) => {
                        ui.notify(m, params);
                        ready(Ok(Value::Null))
                    }
                    None => ready(self.answer(&method, &params)),
                }
            }
            "setModel" | "setThinkingLevel" => {
                let Some(me) = self.me.upgrade() else {
                    return ready(Err("pi-toolkit host: the run is over".into()));
                };
                let p = |k: &str| {
                    params
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                if method == "setModel" {
                    me.set_model(p("provider"), p("id"))
                } else {
                    me.set_thinking(p("level"))
                }
            }
            _ => ready(self.answer(&method, &params)),
        }
    }

    fn extension_error(&self, host: &str, ext: usize, event: &str, error: &str) {
        let path = self
            .extensions()
            .into_iter()
            .find(|e| e.ext == ext && e.host.display == host)
            .map(|e| e.path.clone())
            .unwrap_or_else(|| host.to_string());
        self.report(&path, event, error);
    }
}

impl Runner {
    /// Answers one call from an extension. Changes to the agent are queued
    /// as operations the loop applies when the current hook returns.
    fn answer(&self, method: &str, p: &Value) -> Result<Value, String> {
        let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
        match method {
            "appendEntry" => {
                let ty = s("customType").ok_or("appendEntry needs a customType")?;
                let data = p.get("data").cloned().unwrap_or(Value::Null);
                self.push_op(Box::new(move |agent, emit| {
                    let leaf = agent.store.session.leaf_id().map(str::to_string);
                    let e = agent.store.session.new_custom(leaf.as_deref(), &ty, data);
                    if let Err(err) = agent.append_entry(e, emit) {
                        eprintln!("pi-run: appendEntry: {err}");
                    }
                }));
                Ok(Value::Null)
            }
            "setSessionName" => {
                let name = s("name").ok_or("setSessionName needs a name")?;
                lock(&self.shared).session_name = Some(name.trim().to_string());
                self.push_op(Box::new(move |agent, emit| {
                    let e = agent.store.session.new_session_info(&name);
                    if let Err(err) = agent.append_entry(e, emit) {
                        eprintln!("pi-run: setSessionName: {err}");
                    }
                }));
                Ok(Value::Null)
            }
            "setLabel" => {
                let target = s("entryId").ok_or("setLabel needs an entryId")?;
                let label = s("label")
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty());
                self.push_op(Box::new(move |agent, emit| {
                    if agent.store.session.index_of(&target).is_none() {
                        eprintln!("pi-run: setLabel: Entry {target} not found");
                        return;
                    }
                    let e = agent.store.session.new_label(&target, label);
                    if let Err(err) = agent.append_entry(e, emit) {
                        eprintln!("pi-run: setLabel: {err}");
                    }
                }));
                Ok(Value::Null)
            }
            // Commands run while the agent is idle (pi-run's preflight).
            "waitForIdle" => Ok(Value::Null),
            "getSessionName" => Ok(lock(&self.shared)
                .session_name
                .clone()
                .map(Value::String)
                .unwrap_or(Value::Null)),
            "sendMessage" => {
                use crate::agent::queue::DeliverAs;
                let msg = custom_message(p.get("message").unwrap_or(&Value::Null))?;
                let opts = p.get("options");
                let trigger = opts
                    .and_then(|o| o.get("triggerTurn"))
                    .and_then(Value::as_bool);
                let deliver = DeliverAs::parse(
                    opts.and_then(|o| o.get("deliverAs"))
                        .and_then(Value::as_str),
                )?;
                let queue = lock(&self.queue).clone();
                match queue {
                    // Idle without a trigger: appended at once.
                    Some(q)
                        if q.is_streaming()
                            || trigger == Some(true)
                            || deliver == Some(DeliverAs::NextTurn) =>
                    {
                        q.send_custom(msg, trigger, deliver)
                    }
                    _ => self.push_op(Box::new(move |agent, emit| {
                        if let Err(err) =
                            agent.append_message_now(AgentMessage::Custom(Box::new(msg)), emit)
                        {
                            eprintln!("pi-run: sendMessage: {err}");
                        }
                    })),
                }
                Ok(Value::Null)
            }
            "sendUserMessage" => {
                use crate::agent::queue::DeliverAs;
                let text = match p.get("content") {
                    Some(Value::String(t)) => t.clone(),
                    Some(c @ Value::Array(_)) => serde_json::from_value::<UserContent>(c.clone())
                        .map(|u| u.joined_text("\n"))
                        .map_err(|e| format!("invalid content: {e}"))?,
                    _ => return Err("sendUserMessage needs content".into()),
                };
                let deliver = DeliverAs::parse(
                    p.get("options")
                        .and_then(|o| o.get("deliverAs"))
                        .and_then(Value::as_str),
                )?;
                let Some(q) = lock(&self.queue).clone() else {
                    return Err("pi-toolkit host: sendUserMessage is not available".into());
                };
                let message = AgentMessage::User(crate::format::message::UserMessage {
                    content: UserContent::Blocks(vec![ContentBlock::text(text.clone())]),
                    timestamp: Num::signed(crate::timefmt::now_ms()),
                    extra: Map::new(),
                });
                q.send_user(message, text, deliver)?;
                Ok(Value::Null)
            }
            "getActiveTools" => Ok(json!(lock(&self.shared).active_tools)),
            "getAllTools" => Ok(Value::Array(lock(&self.shared).all_tools.clone())),
            // `ctx.modelRegistry` of the Node host: every model, as pi's
            // objects (none without a registry: the faux provider).
            "modelRegistry.getAll" => Ok(match self.registry() {
                Ok(reg) => Value::Array(reg.all().iter().map(|m| model_json(&reg, m)).collect()),
                Err(_) => Value::Array(Vec::new()),
            }),
            "getCommands" => {
                let mut out = Vec::new();
                for (name, e, c) in self.command_table() {
                    {
                        let mut m = Map::new();
                        m.insert("name".into(), name.into());
                        if let Some(d) = &c.description {
                            m.insert("description".into(), d.clone().into());
                        }
                        m.insert("source".into(), "extension".into());
                        m.insert("sourceInfo".into(), json!({"path": e.path}));
                        out.push(Value::Object(m));
                    }
                }
                Ok(Value::Array(out))
            }
            "getThinkingLevel" => Ok(lock(&self.shared).state.thinking_level.clone().into()),
            "getSettings" => Ok(self.cfg.settings.clone()),
            "getSystemPrompt" => Ok(lock(&self.shared).system_prompt.clone().into()),
            "hasPendingMessages" => Ok(lock(&self.queue)
                .as_ref()
                .is_some_and(|q| q.has_pending())
                .into()),
            "shutdown" => {
                self.shutdown_requested.store(true, Ordering::Relaxed);
                Ok(Value::Null)
            }
            "abort" => {
                self.cancel.cancel();
                Ok(Value::Null)
            }
            // No person to ask (pi-run is non-interactive): pi's defaults.
            "ui.confirm" => Ok(false.into()),
            "ui.select" | "ui.input" | "ui.editor" => Ok(Value::Null),
            m if m.starts_with("ui.") => Ok(Value::Null),
            other => Err(format!("Unknown method: {other}")),
        }
    }
}
