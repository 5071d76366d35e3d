//! The agent loop (seed 004): user message → turns → tool calls → results →
//! next turn, until the model answers without tool calls.
//!
//! Each run: the system prompt sections are diffed against what the branch
//! already records and a patch is appended when they changed; the user
//! message is appended; then each turn streams one assistant message,
//! validates and runs its tool calls in parallel (results emitted in call
//! order), and appends everything to the session the moment it exists.
//! Transient provider errors are retried with pi's backoff; `--max-turns`
//! and cancellation (SIGINT) end the run early.

pub mod convert;
pub mod events;
pub mod retry;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::format::entry::ContextEditEntry;
use crate::format::message::{AssistantMessage, ToolCallBlock, ToolResultMessage};
use crate::format::model::{Model, ThinkingLevel};
use crate::format::{AgentMessage, ContentBlock, Entry, Num};
use crate::prompt::{diff, PromptState, PromptTool};
use crate::provider::{self, Request, StreamEvent};
use crate::session::store::SessionStore;
use crate::timefmt::{now_iso, now_ms};
use crate::tools::{Tool, ToolContext, ToolOutput};

pub use retry::RetrySettings;

/// Receives every event of the run as a JSON object.
pub type Emit<'a> = &'a mut dyn FnMut(&Value);

/// How the agent runs.
pub struct AgentOptions {
    pub model: Model,
    pub api_key: Option<String>,
    pub thinking: ThinkingLevel,
    /// Active tools, in order.
    pub tools: Vec<Arc<dyn Tool>>,
    pub cwd: PathBuf,
    /// The desired system-prompt sections (see `prompt::plan`); diffed
    /// against what the branch records before each run and turn.
    pub sections: Vec<(String, String)>,
    /// A whole prompt replacing the sectioned one in requests (never
    /// recorded), e.g. `pi-prompt system | pi-run --system-from -`.
    pub forced_prompt: Option<String>,
    pub max_turns: Option<u32>,
    pub idle_timeout: Duration,
    /// `images.autoResize` (default true).
    pub auto_resize_images: bool,
    pub retry: RetrySettings,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The last assistant message.
    pub last: Option<AssistantMessage>,
    /// Why the run failed (`None` on success).
    pub error: Option<String>,
    pub aborted: bool,
}

/// The agent: a session, the tools, a model.
pub struct Agent {
    pub opts: AgentOptions,
    pub store: SessionStore,
    pub cancel: CancellationToken,
}

fn io_error(e: std::io::Error, store: &SessionStore) -> String {
    match store.path() {
        Some(p) => format!("{}: cannot write session: {e}", p.display()),
        None => format!("cannot write session: {e}"),
    }
}

impl Agent {
    fn tool_values(&self) -> Vec<Value> {
        self.opts
            .tools
            .iter()
            .filter_map(|t| serde_json::to_value(t.definition()).ok())
            .collect()
    }

    /// Appends the model / thinking-level entries a run needs: pi writes
    /// `model_change` when the branch's model differs (always for a new
    /// session) and `thinking_level_change` when the level differs or the
    /// branch has none.
    pub fn prepare_session(&mut self) -> Result<(), String> {
        let (model, level) = {
            let ctx = self.store.session.context(None);
            (ctx.model, ctx.thinking_level)
        };
        let m = &self.opts.model;
        if model.as_ref() != Some(&(m.provider.clone(), m.id.clone())) {
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

    fn append(&mut self, entry: Entry, emit: Option<&mut dyn FnMut(&Value)>) -> Result<(), String> {
        // The store decides the parent under the file's lock; report the
        // entry as written.
        let entry = self
            .store
            .append(entry)
            .map_err(|e| io_error(e, &self.store))?;
        if let Some(emit) = emit {
            emit(&json!({ "type": "entry_appended", "entry": entry }));
        }
        Ok(())
    }

    fn append_message(&mut self, m: AgentMessage) -> Result<(), String> {
        let e = self.store.message_entry(m);
        self.append(e, None)
    }

    /// Appends a system patch when the desired prompt differs from the one
    /// the branch records; emits its message events.
    fn sync_system_prompt(
        &mut self,
        emit: Emit<'_>,
        new_messages: &mut Vec<AgentMessage>,
    ) -> Result<(), String> {
        let state = {
            let ctx = self.store.session.context(None);
            PromptState::replay(ctx.messages.iter().map(|(_, m)| &**m))
        };
        if let Some(patch) = diff(&state, &self.opts.sections, &self.tool_values(), now_ms()) {
            let msg = AgentMessage::System(Box::new(patch));
            emit(&events::message("message_start", &msg));
            emit(&events::message("message_end", &msg));
            self.append_message(msg.clone())?;
            new_messages.push(msg);
        }
        Ok(())
    }

    /// Runs one prompt to the end (turns, tools, retries).
    pub async fn run(&mut self, user: AgentMessage, emit: Emit<'_>) -> RunOutcome {
        let mut new_messages: Vec<AgentMessage> = Vec::new();
        let mut attempt: u32 = 0;
        let mut first_run = true;
        let mut retrying = false;
        loop {
            emit(&events::simple("agent_start"));
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
            emit(&events::agent_end(&new_messages, will_retry));
            if let Some((err, info)) = retry_error {
                if will_retry {
                    attempt += 1;
                    let delay = self.opts.retry.delay_for(attempt, info.as_ref());
                    emit(
                        &json!({"type": "auto_retry_start", "attempt": attempt, "maxAttempts": self.opts.retry.max_retries, "delayMs": delay, "errorMessage": err}),
                    );
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
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(delay)) => {}
                            _ = self.cancel.cancelled() => {
                                emit(&json!({"type": "auto_retry_end", "success": false, "attempt": attempt, "finalError": "Retry cancelled"}));
                                emit(&json!({"type": "agent_settled", "aborted": true}));
                                return RunOutcome { last: last_assistant(&new_messages), error: Some("Retry cancelled".into()), aborted: true };
                            }
                        }
                        new_messages.clear();
                        retrying = true;
                        continue;
                    }
                } else if attempt > 0 {
                    emit(
                        &json!({"type": "auto_retry_end", "success": false, "attempt": attempt, "finalError": err}),
                    );
                }
            }
            let aborted = self.cancel.is_cancelled() || matches!(result, TurnsEnd::Aborted);
            emit(&json!({"type": "agent_settled", "aborted": aborted}));
            let last = last_assistant(&new_messages);
            let error = match result {
                TurnsEnd::Done => None,
                TurnsEnd::ModelError(e, _) | TurnsEnd::Failed(e) => Some(e),
                TurnsEnd::Aborted => Some("Request was aborted".into()),
                TurnsEnd::MaxTurns(n) => Some(format!(
                    "stopped after {n} turns (--max-turns) while the model still had tool calls"
                )),
            };
            return RunOutcome {
                last,
                error,
                aborted,
            };
        }
    }

    async fn turns(
        &mut self,
        user: &AgentMessage,
        first_run: bool,
        emit: Emit<'_>,
        new_messages: &mut Vec<AgentMessage>,
        retry_attempt: Option<u32>,
    ) -> TurnsEnd {
        let mut turn = 0u32;
        loop {
            turn += 1;
            emit(&events::simple("turn_start"));
            if turn == 1 && first_run {
                if let Err(e) = self.sync_system_prompt(emit, new_messages) {
                    return TurnsEnd::Failed(e);
                }
                emit(&events::message("message_start", user));
                emit(&events::message("message_end", user));
                if let Err(e) = self.append_message(user.clone()) {
                    return TurnsEnd::Failed(e);
                }
                new_messages.push(user.clone());
            } else if turn > 1 {
                if let Err(e) = self.sync_system_prompt(emit, new_messages) {
                    return TurnsEnd::Failed(e);
                }
            }
            let (assistant, failure) = self.stream_assistant(emit).await;
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
                    emit(&json!({"type": "auto_retry_end", "success": true, "attempt": attempt}));
                }
            }
            if assistant.stop_reason == "error" || assistant.stop_reason == "aborted" {
                emit(&events::turn_end(&msg, &[]));
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
                emit(&events::turn_end(&msg, &[]));
                return TurnsEnd::Done;
            }
            let results = match self.run_tools(&calls, emit).await {
                Ok(r) => r,
                Err(e) => return TurnsEnd::Failed(e),
            };
            new_messages.extend(results.iter().cloned());
            emit(&events::turn_end(&msg, &results));
            if self.cancel.is_cancelled() {
                return TurnsEnd::Aborted;
            }
            if let Some(max) = self.opts.max_turns {
                if turn >= max {
                    return TurnsEnd::MaxTurns(max);
                }
            }
        }
    }

    async fn stream_assistant(
        &mut self,
        emit: Emit<'_>,
    ) -> (AssistantMessage, Option<provider::FailureInfo>) {
        let ctx = self.store.session.context(None);
        let llm = convert::to_llm(ctx.messages.iter().map(|(_, m)| &**m));
        let req = Request {
            model: self.opts.model.clone(),
            system_prompt: self.opts.forced_prompt.clone().or(llm.system_prompt),
            messages: llm.messages,
            tools: llm.tools,
            api_key: self.opts.api_key.clone(),
            thinking: self.opts.thinking,
            max_tokens: None,
            headers: Vec::new(),
            idle_timeout: self.opts.idle_timeout,
            cancel: self.cancel.clone(),
            session_id: Some(self.store.session.id().to_string()),
        };
        let started = Instant::now();
        let mut started_emitted = false;
        let mut sink = |ev: &StreamEvent, partial: &AssistantMessage| match ev {
            StreamEvent::Start => {
                started_emitted = true;
                emit(&events::message(
                    "message_start",
                    &AgentMessage::Assistant(Box::new(partial.clone())),
                ));
            }
            StreamEvent::Done { .. } | StreamEvent::Error { .. } => {}
            other => {
                if !started_emitted {
                    started_emitted = true;
                    emit(&events::message(
                        "message_start",
                        &AgentMessage::Assistant(Box::new(partial.clone())),
                    ));
                }
                emit(&events::message_update(other, partial));
            }
        };
        let provider::Streamed {
            message: mut msg,
            failure,
        } = provider::stream_detailed(req, &mut sink).await;
        msg.extra.insert(
            "durationMs".into(),
            (started.elapsed().as_millis() as u64).into(),
        );
        msg.extra
            .insert("thinkingLevel".into(), self.opts.thinking.as_str().into());
        let as_agent = AgentMessage::Assistant(Box::new(msg.clone()));
        if !started_emitted {
            emit(&events::message("message_start", &as_agent));
        }
        emit(&events::message("message_end", &as_agent));
        (msg, failure)
    }

    /// Validates and runs tool calls: all starts first, failures answered at
    /// once, the rest concurrently; ends and results in call order.
    async fn run_tools(
        &mut self,
        calls: &[ToolCallBlock],
        emit: Emit<'_>,
    ) -> Result<Vec<AgentMessage>, String> {
        let by_name: HashMap<String, Arc<dyn Tool>> = self
            .opts
            .tools
            .iter()
            .map(|t| (t.definition().name, Arc::clone(t)))
            .collect();
        // Finished results by call index: immediate failures now, the rest
        // as their tasks report back.
        let mut done: Vec<Option<(ToolOutput, Option<u64>)>> = vec![None; calls.len()];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(
            usize,
            Option<ToolOutput>,
            Option<(ToolOutput, u64)>,
        )>();
        let mut running = 0usize;
        for (i, call) in calls.iter().enumerate() {
            emit(&events::tool_start(&call.id, &call.name, &call.arguments));
            let arguments_error = call.extra.get("argumentsError").and_then(Value::as_str);
            let prepared = match (by_name.get(&call.name), arguments_error) {
                (None, _) => Err(format!("Tool {} not found", call.name)),
                // Arguments that were not JSON are never repaired and run
                // (pi 1.6.0's wording; the provider recorded why).
                (Some(_), Some(e)) => {
                    Err(format!("Invalid arguments for tool \"{}\": {e}", call.name))
                }
                (Some(tool), None) => crate::tools::validate::validate_args(
                    &call.name,
                    &tool.definition().parameters,
                    &tool.prepare_arguments(call.arguments.clone()),
                )
                .map(|args| (Arc::clone(tool), args)),
            };
            let (tool, args) = match prepared {
                Ok(p) => p,
                Err(text) => {
                    // A call that fails before running ends right after its start.
                    let out = with_empty_details(ToolOutput::error(text));
                    emit(&events::tool_end(&call.id, &call.name, &out, None));
                    done[i] = Some((out, None));
                    continue;
                }
            };
            running += 1;
            let tx = tx.clone();
            let ctx = ToolContext {
                cwd: self.opts.cwd.clone(),
                cancel: self.cancel.clone(),
                auto_resize_images: self.opts.auto_resize_images,
            };
            tokio::spawn(async move {
                let started = Instant::now();
                let utx = tx.clone();
                let sink = Box::new(move |partial: ToolOutput| {
                    let _ = utx.send((i, Some(partial), None));
                });
                let out = tool.execute(args, ctx, sink).await;
                let _ = tx.send((i, None, Some((out, started.elapsed().as_millis() as u64))));
            });
        }
        drop(tx);
        // Ends come as tools finish; the result messages follow in call
        // order, as pi 1.6.0 does.
        while running > 0 {
            let Some((i, update, finished)) = rx.recv().await else {
                break;
            };
            if let Some(p) = update {
                emit(&events::tool_update(
                    &calls[i].id,
                    &calls[i].name,
                    &calls[i].arguments,
                    &p,
                ));
            }
            if let Some((out, ms)) = finished {
                emit(&events::tool_end(
                    &calls[i].id,
                    &calls[i].name,
                    &out,
                    Some(ms),
                ));
                done[i] = Some((out, Some(ms)));
                running -= 1;
            }
        }
        let mut results = Vec::with_capacity(calls.len());
        for (i, d) in done.into_iter().enumerate() {
            let (out, ms) =
                d.unwrap_or_else(|| (ToolOutput::error("Tool execution did not complete"), None));
            let msg = tool_result_message(&calls[i], &out, ms);
            emit(&events::message("message_start", &msg));
            emit(&events::message("message_end", &msg));
            self.append_message(msg.clone())?;
            results.push(msg);
        }
        Ok(results)
    }
}

/// pi answers a call that fails before running with `details: {}`.
fn with_empty_details(mut out: ToolOutput) -> ToolOutput {
    out.details = Some(Value::Object(Map::new()));
    out
}

fn tool_result_message(
    call: &ToolCallBlock,
    out: &ToolOutput,
    duration_ms: Option<u64>,
) -> AgentMessage {
    AgentMessage::ToolResult(Box::new(ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: out.content.clone(),
        details: out.details.clone(),
        is_error: out.is_error,
        duration_ms: duration_ms.map(Num::int),
        timestamp: Num::signed(now_ms()),
        extra: Map::new(),
    }))
}

fn last_assistant(msgs: &[AgentMessage]) -> Option<AssistantMessage> {
    msgs.iter().rev().find_map(|m| match m {
        AgentMessage::Assistant(a) => Some(a.as_ref().clone()),
        _ => None,
    })
}

/// How the turns of one attempt ended.
#[derive(Debug, Clone, PartialEq)]
enum TurnsEnd {
    Done,
    ModelError(String, Option<provider::FailureInfo>),
    Aborted,
    MaxTurns(u32),
    Failed(String),
}

/// The prompt view of tools (name, snippet, guidelines).
pub fn prompt_tools(tools: &[Arc<dyn Tool>]) -> Vec<PromptTool> {
    tools
        .iter()
        .map(|t| PromptTool {
            name: t.definition().name,
            snippet: t.prompt_snippet(),
            guidelines: t.prompt_guidelines(),
        })
        .collect()
}
