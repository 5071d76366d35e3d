//! The provider layer: one streaming call to a model over its wire API,
//! normalised into pi's assistant-message event stream.
//!
//! Contract (pi's): after [`stream`] is called, every failure is an event —
//! the returned message has `stopReason` `error` or `aborted` and an
//! `errorMessage`; nothing is thrown. Exactly one terminal event (`Done` or
//! `Error`) is emitted, and the returned message equals the final partial.
//! Retrying is the agent loop's business, not the provider's.

pub mod anthropic;
pub mod faux;
pub mod google;
pub mod openai_completions;
pub mod openai_responses;
pub mod partial_json;
pub mod sse;
pub mod transform;

use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::format::message::{AssistantMessage, ToolCallBlock};
use crate::format::model::{Model, ThinkingLevel};
use crate::format::tool::ToolDefinition;
use crate::format::{AgentMessage, Cost, Num, Usage};

/// One request to a model.
#[derive(Debug, Clone)]
pub struct Request {
    pub model: Model,
    /// The leading system prompt (already rendered and collapsed).
    pub system_prompt: Option<String>,
    /// Conversation in LLM form: `user`, `assistant` and `toolResult`
    /// messages only (the agent converts custom/summary/bash messages first).
    pub messages: Vec<AgentMessage>,
    pub tools: Vec<ToolDefinition>,
    pub api_key: Option<String>,
    pub thinking: ThinkingLevel,
    /// Max output tokens (default: the model's, capped at 32000).
    pub max_tokens: Option<u64>,
    /// Extra headers (model headers are added by the provider).
    pub headers: Vec<(String, String)>,
    /// Give up when no byte arrives for this long (connect included).
    pub idle_timeout: Duration,
    /// Cancelling ends the stream with `stopReason: "aborted"`.
    pub cancel: CancellationToken,
    /// A stable id for prompt caching (pi's `sessionId`).
    pub session_id: Option<String>,
}

/// One event of the assistant-message stream (pi's `assistantMessageEvent`).
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    Start,
    TextStart {
        content_index: usize,
    },
    TextDelta {
        content_index: usize,
        delta: String,
    },
    TextEnd {
        content_index: usize,
        content: String,
    },
    ThinkingStart {
        content_index: usize,
    },
    ThinkingDelta {
        content_index: usize,
        delta: String,
    },
    ThinkingEnd {
        content_index: usize,
        content: String,
    },
    ToolCallStart {
        content_index: usize,
        id: String,
        tool_name: String,
    },
    ToolCallDelta {
        content_index: usize,
        delta: String,
    },
    ToolCallEnd {
        content_index: usize,
        tool_call: ToolCallBlock,
    },
    /// Terminal: `reason` is `stop`, `length` or `toolUse`.
    Done {
        reason: String,
    },
    /// Terminal: `reason` is `error` or `aborted`.
    Error {
        reason: String,
    },
}

impl StreamEvent {
    /// pi's `type` of the event.
    pub fn kind(&self) -> &'static str {
        match self {
            StreamEvent::Start => "start",
            StreamEvent::TextStart { .. } => "text_start",
            StreamEvent::TextDelta { .. } => "text_delta",
            StreamEvent::TextEnd { .. } => "text_end",
            StreamEvent::ThinkingStart { .. } => "thinking_start",
            StreamEvent::ThinkingDelta { .. } => "thinking_delta",
            StreamEvent::ThinkingEnd { .. } => "thinking_end",
            StreamEvent::ToolCallStart { .. } => "toolcall_start",
            StreamEvent::ToolCallDelta { .. } => "toolcall_delta",
            StreamEvent::ToolCallEnd { .. } => "toolcall_end",
            StreamEvent::Done { .. } => "done",
            StreamEvent::Error { .. } => "error",
        }
    }

    /// The event as pi 1.6.0 writes it in `message_update.assistantMessageEvent`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), self.kind().into());
        match self {
            StreamEvent::Start => {}
            StreamEvent::TextStart { content_index }
            | StreamEvent::ThinkingStart { content_index } => {
                m.insert("contentIndex".into(), (*content_index).into());
            }
            StreamEvent::TextDelta {
                content_index,
                delta,
            }
            | StreamEvent::ThinkingDelta {
                content_index,
                delta,
            }
            | StreamEvent::ToolCallDelta {
                content_index,
                delta,
            } => {
                m.insert("contentIndex".into(), (*content_index).into());
                m.insert("delta".into(), delta.clone().into());
            }
            StreamEvent::TextEnd {
                content_index,
                content,
            }
            | StreamEvent::ThinkingEnd {
                content_index,
                content,
            } => {
                m.insert("contentIndex".into(), (*content_index).into());
                m.insert("content".into(), content.clone().into());
            }
            StreamEvent::ToolCallStart {
                content_index,
                id,
                tool_name,
            } => {
                m.insert("contentIndex".into(), (*content_index).into());
                m.insert("id".into(), id.clone().into());
                m.insert("toolName".into(), tool_name.clone().into());
            }
            StreamEvent::ToolCallEnd {
                content_index,
                tool_call,
            } => {
                m.insert("contentIndex".into(), (*content_index).into());
                let mut tc =
                    serde_json::to_value(crate::format::ContentBlock::ToolCall(tool_call.clone()))
                        .unwrap_or(Value::Null);
                if let Value::Object(o) = &mut tc {
                    o.shift_remove("partialJson");
                }
                m.insert("toolCall".into(), tc);
            }
            StreamEvent::Done { reason } | StreamEvent::Error { reason } => {
                m.insert("reason".into(), reason.clone().into());
            }
        }
        Value::Object(m)
    }
}

/// Receives each event with the message as built so far.
pub type EventSink<'a> = &'a mut (dyn FnMut(&StreamEvent, &AssistantMessage) + Send);

/// A fresh, empty assistant message for `model` (`stopReason: "pending"`
/// until the stream ends, as pi's `message_start` shows).
pub fn empty_message(model: &Model) -> AssistantMessage {
    AssistantMessage {
        content: Vec::new(),
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        usage: Usage::default(),
        stop_reason: "pending".into(),
        timestamp: Num::signed(crate::timefmt::now_ms()),
        error_message: None,
        extra: Map::new(),
    }
}

/// Fills in `usage.cost` from token counts and the model's prices ($/M).
pub fn apply_cost(model: &Model, usage: &mut Usage) {
    let price = |per_m: f64, tokens: &Num| per_m / 1e6 * tokens.as_u64() as f64;
    let input = price(model.cost.input, &usage.input);
    let output = price(model.cost.output, &usage.output);
    let cache_read = price(model.cost.cache_read, &usage.cache_read);
    let cache_write = price(model.cost.cache_write, &usage.cache_write);
    usage.cost = Cost {
        input: Num::float(input),
        output: Num::float(output),
        cache_read: Num::float(cache_read),
        cache_write: Num::float(cache_write),
        total: Num::float(input + output + cache_read + cache_write),
        extra: std::mem::take(&mut usage.cost.extra),
    };
}

/// Streams one assistant message from `req.model` over its API.
pub async fn stream(req: Request, on_event: EventSink<'_>) -> AssistantMessage {
    match req.model.api.as_str() {
        "openai-completions" => openai_completions::stream(req, on_event).await,
        "anthropic-messages" => anthropic::stream(req, on_event).await,
        "openai-responses" => openai_responses::stream(req, on_event).await,
        "google-generative-ai" => google::stream(req, on_event).await,
        "faux" => faux::stream(req, on_event).await,
        other => {
            let mut m = empty_message(&req.model);
            m.stop_reason = "error".into();
            m.error_message = Some(format!(
                "Unsupported API \"{other}\" for model {}/{}",
                req.model.provider, req.model.id
            ));
            on_event(
                &StreamEvent::Error {
                    reason: "error".into(),
                },
                &m,
            );
            m
        }
    }
}
