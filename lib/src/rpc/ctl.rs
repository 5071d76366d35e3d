//! The server's own state next to the agent ([`Ctl`]) and what it does with
//! each command: while a job runs (a prompt's run or `compact`), which
//! commands are answered at once, queued as steering or follow-up, or wait
//! until the job settled; and, idle, every command in turn: queue modes and
//! the switches pi persists, model and thinking-level changes, entries,
//! and the read commands [`super::state`] answers.

use super::state::{
    last_assistant_text, levels, models, persist_setting, read_answer, thinking_map,
};
use super::*;
use crate::agent::Event;

/// A `prompt` sent while the `compact` command runs (pi 1.6.0's text).
const COMPACTING: &str =
    "Cannot submit a prompt while compaction is in progress. Wait for compaction to finish and retry.";

/// What the server runs while it goes on reading commands.
pub(super) enum Job {
    /// A prompt's run.
    Prompt(AgentMessage),
    /// The `compact` command (answered when it ends).
    Compact {
        id: Option<Value>,
        instructions: Option<String>,
    },
}

impl Ctl {
    pub(super) fn ui_answer(&self, v: Value) {
        if let Some(ui) = &self.opts.ui {
            ui.answer(v);
        }
    }

    /// The client is gone: open dialogs resolve with their defaults.
    pub(super) fn ui_gone(&self) {
        if let Some(ui) = &self.opts.ui {
            ui.cancel_all();
        }
    }

    pub(super) fn respond(&self, id: Option<Value>, kind: &str, r: Result<Option<Value>, String>) {
        let r = match r {
            Ok(d) => RpcResponse::ok(id, kind, d),
            Err(e) => RpcResponse::err(id, kind, e),
        };
        self.out.record(&r);
    }

    pub(super) fn queue_update(&self, agent_queue: &crate::agent::queue::MessageQueue) {
        let (s, f) = agent_queue.listed();
        self.out.record(&events::queue_update(&s, &f));
    }

    /// `steer` / `follow_up` / a queued `prompt`: listed, reported, queued.
    pub(super) fn enqueue(
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
    pub(super) fn queue_command(
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
    pub(super) async fn run(
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
            let mut emit = move |v: &Event<'_>| {
                let ended = match v {
                    Event::Message {
                        kind: "message_end",
                        message,
                    } => Some((*message).clone()),
                    Event::Value(v)
                        if v.get("type").and_then(Value::as_str) == Some("message_end") =>
                    {
                        v.get("message")
                            .and_then(|m| serde_json::from_value::<AgentMessage>(m.clone()).ok())
                    }
                    _ => None,
                };
                if let Some(m) = ended {
                    if let Ok(mut l) = live.lock() {
                        l.push(m);
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
            let mut emit = |v: &Event<'_>| {
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

    pub(super) fn clear_queue(&self, queue: &crate::agent::queue::MessageQueue) -> Option<Value> {
        let (s, f) = queue.clear();
        self.queue_update(queue);
        Some(json!({"steering": s, "followUp": f}))
    }

    pub(super) fn set_mode(
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

    pub(super) fn model_json(&self, agent: &Agent) -> Option<Value> {
        let m = &agent.opts.model;
        match self.opts.registry.as_ref().and_then(|r| r.pi_json(m)) {
            Some(raw) => Some(Value::Object(raw)),
            None => serde_json::to_value(m).ok(),
        }
    }

    pub(super) fn state(&self, agent: &Agent, streaming: bool) -> RpcState {
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

    pub(super) fn models(&self, agent: &Agent) -> Vec<crate::format::model::Model> {
        models(self.opts.registry.as_deref(), agent)
    }

    pub(super) fn thinking_map(&self, agent: &Agent) -> Option<Map<String, Value>> {
        thinking_map(self.opts.registry.as_deref(), agent)
    }

    pub(super) fn levels(&self, agent: &Agent) -> Vec<ThinkingLevel> {
        levels(self.opts.registry.as_deref(), agent)
    }

    pub(super) fn append(&self, agent: &mut Agent, e: Entry) -> Result<Entry, String> {
        agent
            .store
            .append(e)
            .map_err(|e| format!("cannot write session: {e}"))
    }

    /// Switches to `model` (pi appends `model_change` even when unchanged)
    /// and clamps the thinking level to it.
    pub(super) fn switch_model(
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
    pub(super) fn set_level(
        &self,
        agent: &mut Agent,
        level: ThinkingLevel,
    ) -> Result<ThinkingLevel, String> {
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
    pub(super) fn idle(
        &mut self,
        agent: &mut Agent,
        cmd: RpcCommand,
    ) -> Result<Option<Value>, String> {
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
