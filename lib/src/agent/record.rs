//! What the agent writes down: the session prepared for a run (the
//! model and thinking level recorded when they changed), entries and
//! messages appended the moment they exist (a new session's file is made
//! with its first message), the system prompt kept in step with the
//! sections, and tools that joined during the run added to the active set
//! and to the prompt's tool list.

use super::*;

impl Agent {
    /// Tools loaded during the run join the active set (once by name).
    pub(super) fn take_late_tools(&mut self) {
        let Some(inbox) = &self.ext.late_tools else {
            return;
        };
        let late: Vec<Arc<dyn Tool>> = match inbox.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(_) => return,
        };
        for t in late {
            let name = t.name();
            if !self.opts.tools.iter().any(|x| x.name() == name) {
                self.opts.tools.push(t);
            }
        }
    }

    /// Brings [`Agent::tool_values`] up to date: the active tools'
    /// definitions as JSON, built again only when the tool set changed.
    pub(super) fn refresh_tool_values(&mut self) {
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

    pub(super) fn prepare_session_with(&mut self, model_changes: bool) -> Result<(), String> {
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
        emit(&Event::Value(
            &json!({ "type": "entry_appended", "entry": entry }),
        ));
        Ok(())
    }

    /// Appends a message outside a run's flow (an extension's
    /// `sendMessage` while idle): its `message_start`/`message_end`, then
    /// the entry.
    pub fn append_message_now(&mut self, m: AgentMessage, emit: Emit<'_>) -> Result<(), String> {
        for kind in ["message_start", "message_end"] {
            emit(&Event::Message { kind, message: &m });
        }
        self.append_message(m)
    }

    pub(super) fn append(&mut self, entry: Entry, emit: Option<Emit<'_>>) -> Result<(), String> {
        // The store decides the parent under the file's lock; report the
        // entry as written.
        let entry = match self.store.append_ref(entry) {
            Ok(e) => e,
            Err(e) => return Err(io_error(e, &self.store)),
        };
        if let Some(emit) = emit {
            emit(&Event::Value(
                &json!({ "type": "entry_appended", "entry": entry }),
            ));
        }
        Ok(())
    }

    pub(super) fn append_message(&mut self, m: AgentMessage) -> Result<(), String> {
        let e = self.store.message_entry(m);
        self.append(e, None)
    }

    /// Appends a system patch when the desired prompt differs from the one
    /// the branch records; emits its message events.
    pub(super) async fn sync_system_prompt(
        &mut self,
        emit: Emit<'_>,
        new_messages: &mut Vec<AgentMessage>,
    ) -> Result<(), String> {
        self.refresh_tool_values();
        let patch = {
            let ctx = self.store.session.context(None);
            let state = PromptState::replay(ctx.messages.iter().map(|(_, m)| &**m));
            let tools = self.tool_values.as_ref().map_or(&[][..], |(_, v)| v);
            diff(&state, &self.opts.sections, tools, now_ms())
        };
        if let Some(patch) = patch {
            let msg = AgentMessage::System(Box::new(patch));
            let msg = self.start_end(msg, emit).await;
            self.append_message(msg.clone())?;
            new_messages.push(msg);
        }
        Ok(())
    }
}
