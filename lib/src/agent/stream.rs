//! One assistant message from the model: the request's messages after the
//! `context` hooks (borrowed from the session when no hook changed them),
//! and the provider's stream turned into pi's `message_*` events, with the
//! extensions that watch `message_update` served every delta. (Retries and
//! overflow compaction are the turn loop's, in `turns`.)

use super::*;

impl Agent {
    /// The messages of the next request, after the `context` hooks: they
    /// see the list without system messages; a changed list keeps the
    /// system head.
    /// The messages a `context` hook changed, or `None` when there is no
    /// hook or it changed nothing: then the request borrows the session's
    /// own messages (no copy of the conversation).
    pub(super) async fn hooked_request_messages(
        &mut self,
        emit: Emit<'_>,
    ) -> Option<Vec<AgentMessage>> {
        let h = self.hooks_for("context")?;
        let (system, rest): (Vec<AgentMessage>, Vec<AgentMessage>) = {
            let ctx = self.store.session.context(None);
            ctx.messages
                .iter()
                .map(|(_, m)| (**m).clone())
                .partition(|m| matches!(m, AgentMessage::System(_)))
        };
        let fut = h.context(rest);
        let changed = self.wait(&h, fut, emit).await.flatten();
        self.settle_hook(emit);
        changed.map(|new| system.into_iter().chain(new).collect())
    }

    pub(super) async fn stream_assistant(
        &mut self,
        emit: Emit<'_>,
    ) -> (AssistantMessage, Option<provider::FailureInfo>) {
        let mut hooked = self.hooked_request_messages(emit).await;
        if hooked.is_none() && self.inquiries.is_some() {
            // A client may change the agent while the reply streams: the
            // request owns its messages then.
            let ctx = self.store.session.context(None);
            hooked = Some(ctx.messages.iter().map(|(_, m)| (**m).clone()).collect());
        }
        let thinking = self.opts.thinking;
        let forced = self.run_forced.clone().or(self.opts.forced_prompt.clone());
        // The request without its conversation (filled in below, from the
        // hooks' or the session's messages).
        let template = Request {
            model: self.opts.model.clone(),
            system_prompt: None,
            messages: Vec::new(),
            tools: Vec::new(),
            api_key: self.opts.api_key.clone(),
            thinking: self.opts.thinking,
            max_tokens: None,
            headers: Vec::new(),
            idle_timeout: self.opts.idle_timeout,
            cancel: self.cancel.clone(),
            session_id: Some(self.store.session.id().to_string()),
            response_schema: self.response_schema.clone(),
        };
        let started = Instant::now();
        let mut started_emitted = false;
        // Extensions that subscribed to message_update get every delta
        // (pi's form: the event with the cumulative `partial`), in order,
        // through one task, so the stream never waits for them. Nobody
        // subscribed: nothing is built.
        let watcher = self.hooks_for("message_update");
        let updates = watcher.clone().map(|h| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
            let task = tokio::spawn(async move {
                while let Some(ev) = rx.recv().await {
                    h.notify(ev).await;
                }
            });
            (tx, task)
        });
        let mut sink = |ev: &StreamEvent, partial: &AssistantMessage| match ev {
            StreamEvent::Start => {
                started_emitted = true;
                emit(&Event::Message {
                    kind: "message_start",
                    message: &AgentMessage::Assistant(Box::new(partial.clone())),
                });
            }
            StreamEvent::Done { .. } | StreamEvent::Error { .. } => {}
            other => {
                if !started_emitted {
                    started_emitted = true;
                    emit(&Event::Message {
                        kind: "message_start",
                        message: &AgentMessage::Assistant(Box::new(partial.clone())),
                    });
                }
                if let Some((tx, _)) = &updates {
                    let message = AgentMessage::Assistant(Box::new(partial.clone()));
                    let mut ame = other.to_json();
                    ame["partial"] = serde_json::to_value(&message).unwrap_or(Value::Null);
                    let _ = tx.send(json!({"type": "message_update", "message": message, "assistantMessageEvent": ame}));
                }
                emit(&Event::Update {
                    event: other,
                    partial,
                });
            }
        };
        let provider::Streamed {
            message: mut msg,
            failure,
        } = match &hooked {
            // Owned messages: the client's commands are answered (and may
            // change the agent) while the reply streams.
            Some(msgs) => {
                let llm = convert::to_llm(msgs.iter());
                let req = Request {
                    system_prompt: forced.or(llm.system_prompt),
                    messages: llm.messages,
                    tools: llm.tools,
                    ..template
                };
                self.serving(provider::stream_detailed(req, &mut sink))
                    .await
            }
            None => {
                let ctx = self.store.session.context(None);
                let llm = convert::to_llm(ctx.messages.iter().map(|(_, m)| &**m));
                let req = Request {
                    system_prompt: forced.or(llm.system_prompt),
                    messages: llm.messages,
                    tools: llm.tools,
                    ..template
                };
                provider::stream_detailed(req, &mut sink).await
            }
        };
        // Every delta reaches the subscribers before message_end.
        if let (Some((tx, task)), Some(h)) = (updates, watcher) {
            drop(tx);
            let done = Box::pin(async move {
                let _ = task.await;
            });
            self.wait(&h, done, emit).await;
        }
        msg.extra.insert(
            "durationMs".into(),
            (started.elapsed().as_millis() as u64).into(),
        );
        msg.extra
            .insert("thinkingLevel".into(), thinking.as_str().into());
        let as_agent = AgentMessage::Assistant(Box::new(msg.clone()));
        if !started_emitted {
            emit(&Event::Message {
                kind: "message_start",
                message: &as_agent,
            });
        }
        if let AgentMessage::Assistant(m) = self.end_message(as_agent, emit).await {
            msg = *m;
        }
        (msg, failure)
    }
}
