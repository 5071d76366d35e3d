//! The provider layer: one streaming call to a model over its wire API,
//! normalised into pi's assistant-message event stream.
//!
//! Contract (pi's): after [`stream`] is called, every failure is an event —
//! the returned message has `stopReason` `error` or `aborted` and an
//! `errorMessage`; nothing is thrown. Exactly one terminal event (`Done` or
//! `Error`) is emitted, and the returned message equals the final partial.
//! Retrying is the agent loop's business, not the provider's.

pub mod anthropic;
mod body;
pub mod faux;
pub mod google;
pub mod json_parse;
pub mod openai_completions;
pub mod openai_responses;
pub mod partial_json;
pub mod retry;
pub mod schema;
mod tool_decl;
pub(crate) use tool_decl::{strict_schema, FunctionDecl};
pub mod sse;
pub mod transform;
mod window;

use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::format::message::{AssistantMessage, MessageRef, ToolCallBlock};
use crate::format::model::{Model, ThinkingLevel};
use crate::format::tool::ToolDefinition;
use crate::format::{Cost, Num, Usage};

/// One request to a model.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub model: Model,
    /// The leading system prompt (already rendered and collapsed).
    pub system_prompt: Option<String>,
    /// Conversation in LLM form: `user`, `assistant` and `toolResult`
    /// messages only (the agent converts custom/summary/bash messages first).
    /// Borrowed from the session where they can be (a long session is not
    /// copied to make a request).
    pub messages: Vec<MessageRef<'a>>,
    pub tools: Vec<ToolDefinition>,
    pub api_key: Option<String>,
    pub thinking: ThinkingLevel,
    /// Max output tokens (default: the model's `maxTokens`).
    pub max_tokens: Option<u64>,
    /// Extra headers (model headers are added by the provider).
    pub headers: Vec<(String, String)>,
    /// Give up when no byte arrives for this long (connect included).
    pub idle_timeout: Duration,
    /// Cancelling ends the stream with `stopReason: "aborted"`.
    pub cancel: CancellationToken,
    /// A stable id for prompt caching (pi's `sessionId`).
    pub session_id: Option<String>,
    /// The schema the final answer must follow, for APIs that can
    /// constrain a reply to it ([`schema`]).
    pub response_schema: Option<std::sync::Arc<schema::ResponseSchema>>,
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
pub type EventSink<'a> = &'a mut dyn FnMut(&StreamEvent, &AssistantMessage);

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
        total_from_provider: usage.cost.total_from_provider.take(),
        extra: std::mem::take(&mut usage.cost.extra),
    };
}

/// What kind of failure ended a stream (see [`sse::Failure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureKind {
    /// Cancelled.
    Aborted,
    /// Reported by the provider in a well-formed answer: the text decides.
    Reported,
    /// A non-2xx answer with this status.
    Http(u16),
    /// Connection, idle timeout, a cut-off or corrupted body.
    Transport,
}

/// Why a stream failed, for the retry rule; not part of the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureInfo {
    pub kind: FailureKind,
    /// The delay the server asked for (`retry-after-ms` / `Retry-After`).
    pub retry_after: Option<Duration>,
}

impl FailureInfo {
    fn of(f: &sse::Failure) -> FailureInfo {
        let (kind, retry_after) = match f {
            sse::Failure::Aborted | sse::Failure::AbortedBeforeAnswer => {
                (FailureKind::Aborted, None)
            }
            sse::Failure::Error(_) => (FailureKind::Reported, None),
            sse::Failure::Http {
                status,
                retry_after,
                ..
            } => (FailureKind::Http(*status), *retry_after),
            sse::Failure::Transport(_) => (FailureKind::Transport, None),
        };
        FailureInfo { kind, retry_after }
    }
}

/// A finished stream: the message, and on failure what kind it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Streamed {
    pub message: AssistantMessage,
    pub failure: Option<FailureInfo>,
}

impl From<AssistantMessage> for Streamed {
    /// A message from a source that gives no failure details (the text of
    /// `errorMessage` is all there is).
    fn from(message: AssistantMessage) -> Self {
        Streamed {
            message,
            failure: None,
        }
    }
}

/// Streams one assistant message from `req.model` over its API.
pub async fn stream(req: Request<'_>, on_event: EventSink<'_>) -> AssistantMessage {
    stream_detailed(req, on_event).await.message
}

/// [`stream`], also telling what kind of failure ended it.
pub async fn stream_detailed(req: Request<'_>, on_event: EventSink<'_>) -> Streamed {
    match req.model.api.as_str() {
        "openai-completions" => openai_completions::stream(req, on_event).await,
        "anthropic-messages" => anthropic::stream(req, on_event).await,
        "openai-responses" => openai_responses::stream(req, on_event).await,
        "google-generative-ai" => google::stream(req, on_event).await,
        "faux" => faux::stream(req, on_event).await.into(),
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
            m.into()
        }
    }
}

/// Builds the assistant message block by block and emits the matching
/// events; shared by the wire APIs so their event protocol is identical.
pub(crate) struct Out<'a> {
    /// The message as built so far.
    pub msg: AssistantMessage,
    sink: EventSink<'a>,
    model: Model,
    started: bool,
}

impl<'a> Out<'a> {
    /// A builder over an empty message for `model`.
    pub fn new(model: &Model, sink: EventSink<'a>) -> Self {
        Out {
            msg: empty_message(model),
            sink,
            model: model.clone(),
            started: false,
        }
    }

    fn emit(&mut self, ev: StreamEvent) {
        (self.sink)(&ev, &self.msg);
    }

    /// Emits `start` (once).
    pub fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.emit(StreamEvent::Start);
        }
    }

    /// Appends an empty text block; returns its index.
    pub fn push_text(&mut self) -> usize {
        self.start();
        let i = self.msg.content.len();
        self.msg.content.push(crate::format::ContentBlock::text(""));
        self.emit(StreamEvent::TextStart { content_index: i });
        i
    }

    /// Appends an empty thinking block (with a signature when given).
    pub fn push_thinking(&mut self, signature: Option<&str>) -> usize {
        self.start();
        let i = self.msg.content.len();
        let mut extra = Map::new();
        if let Some(s) = signature {
            extra.insert("thinkingSignature".into(), s.into());
        }
        self.msg.content.push(crate::format::ContentBlock::Thinking(
            crate::format::message::ThinkingBlock {
                thinking: String::new(),
                extra,
            },
        ));
        self.emit(StreamEvent::ThinkingStart { content_index: i });
        i
    }

    /// Appends a tool call with empty arguments.
    pub fn push_tool(&mut self, id: &str, name: &str, raw_args: &str) -> usize {
        self.start();
        let i = self.msg.content.len();
        let mut extra = Map::new();
        extra.insert("partialJson".into(), raw_args.into());
        self.msg
            .content
            .push(crate::format::ContentBlock::ToolCall(ToolCallBlock {
                id: id.to_string(),
                name: name.to_string(),
                arguments: partial_json::parse_arguments(raw_args),
                extra,
            }));
        self.emit(StreamEvent::ToolCallStart {
            content_index: i,
            id: id.to_string(),
            tool_name: name.to_string(),
        });
        i
    }

    /// Appends `delta` to the text or thinking block `i` and emits it.
    pub fn delta(&mut self, i: usize, delta: &str) {
        let ev = match self.msg.content.get_mut(i) {
            Some(crate::format::ContentBlock::Text(t)) => {
                t.text.push_str(delta);
                StreamEvent::TextDelta {
                    content_index: i,
                    delta: delta.to_string(),
                }
            }
            Some(crate::format::ContentBlock::Thinking(t)) => {
                t.thinking.push_str(delta);
                StreamEvent::ThinkingDelta {
                    content_index: i,
                    delta: delta.to_string(),
                }
            }
            _ => return,
        };
        self.emit(ev);
    }

    /// The tool call at `i`, if that block is one.
    pub fn tool_mut(&mut self, i: usize) -> Option<&mut ToolCallBlock> {
        match self.msg.content.get_mut(i) {
            Some(crate::format::ContentBlock::ToolCall(t)) => Some(t),
            _ => None,
        }
    }

    /// Appends a raw argument fragment to tool call `i`, re-parses, emits.
    pub fn tool_delta(&mut self, i: usize, delta: &str) {
        let Some(tc) = self.tool_mut(i) else { return };
        let mut raw = tc
            .extra
            .get("partialJson")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        raw.push_str(delta);
        tc.arguments = partial_json::parse_arguments(&raw);
        tc.extra.insert("partialJson".into(), raw.into());
        self.emit(StreamEvent::ToolCallDelta {
            content_index: i,
            delta: delta.to_string(),
        });
    }

    /// Replaces the raw arguments of tool call `i` (no event).
    pub fn set_tool_args(&mut self, i: usize, raw: &str) {
        if let Some(tc) = self.tool_mut(i) {
            tc.arguments = partial_json::parse_arguments(raw);
            tc.extra.insert("partialJson".into(), raw.into());
        }
    }

    /// Ends block `i` with the matching `*_end` event.
    pub fn end(&mut self, i: usize) {
        let ev = match self.msg.content.get_mut(i) {
            Some(crate::format::ContentBlock::Text(t)) => StreamEvent::TextEnd {
                content_index: i,
                content: t.text.clone(),
            },
            Some(crate::format::ContentBlock::Thinking(t)) => StreamEvent::ThinkingEnd {
                content_index: i,
                content: t.thinking.clone(),
            },
            Some(crate::format::ContentBlock::ToolCall(t)) => {
                if let Some(Value::String(raw)) = t.extra.shift_remove("partialJson") {
                    // The live previews were lenient; the final arguments
                    // are parsed strictly and never repaired (pi 1.6.0).
                    if !raw.trim().is_empty() {
                        match final_arguments(&raw) {
                            Ok(v) => t.arguments = v,
                            Err(e) => {
                                t.arguments = Value::Object(Map::new());
                                t.extra.insert(
                                    "argumentsError".into(),
                                    format!("{e}\n\nReceived arguments:\n{raw}").into(),
                                );
                            }
                        }
                    }
                }
                if !t.arguments.is_object() {
                    t.arguments = Value::Object(Map::new());
                }
                StreamEvent::ToolCallEnd {
                    content_index: i,
                    tool_call: t.clone(),
                }
            }
            _ => return,
        };
        self.emit(ev);
    }

    /// Records the provider's response id and, when it differs from the
    /// model asked for, the model that answered (`responseModel`, right
    /// after `responseId`, as pi 1.6.0 writes it: e.g. a router or proxy
    /// serving another model). Either may be absent from a chunk.
    pub fn set_response(&mut self, id: Option<&str>, model: Option<&str>) {
        let extra = &mut self.msg.extra;
        if let Some(id) = id {
            extra.insert("responseId".into(), id.into());
        }
        if let Some(m) = model.filter(|m| !m.is_empty() && *m != self.msg.model) {
            if extra.get("responseModel").and_then(Value::as_str) != Some(m) {
                extra.shift_remove("responseModel");
                extra.insert("responseModel".into(), m.into());
            }
        }
    }

    /// Sets the token counts and recomputes the cost.
    pub fn set_usage(
        &mut self,
        input: u64,
        output: u64,
        cache_read: u64,
        cache_write: u64,
        total: u64,
    ) {
        let u = &mut self.msg.usage;
        u.input = Num::int(input);
        u.output = Num::int(output);
        u.cache_read = Num::int(cache_read);
        u.cache_write = Num::int(cache_write);
        u.total_tokens = Num::int(total);
        apply_cost(&self.model, u);
    }

    /// True when the message holds a tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.msg
            .content
            .iter()
            .any(|b| matches!(b, crate::format::ContentBlock::ToolCall(_)))
    }

    fn strip_partials(&mut self) {
        for b in &mut self.msg.content {
            if let crate::format::ContentBlock::ToolCall(t) = b {
                t.extra.shift_remove("partialJson");
            }
        }
    }

    /// Ends the stream normally (`stop`, `length`, `toolUse`).
    pub fn done(mut self, reason: &str) -> Streamed {
        self.start();
        self.strip_partials();
        self.msg.stop_reason = reason.to_string();
        self.emit(StreamEvent::Done {
            reason: reason.to_string(),
        });
        self.msg.into()
    }

    /// Ends the stream with `error` (or `aborted`); open blocks get no end.
    pub fn fail(mut self, failure: sse::Failure) -> Streamed {
        self.strip_partials();
        let aborted = matches!(
            failure,
            sse::Failure::Aborted | sse::Failure::AbortedBeforeAnswer
        );
        let reason = if aborted { "aborted" } else { "error" };
        self.msg.stop_reason = reason.to_string();
        self.msg.error_message = Some(failure.message().to_string());
        self.emit(StreamEvent::Error {
            reason: reason.to_string(),
        });
        Streamed {
            message: self.msg,
            failure: Some(FailureInfo::of(&failure)),
        }
    }
}

/// The final arguments of a tool call: strict JSON that must be an object;
/// `Err` is pi 1.6.0's reason (V8's `JSON.parse` message).
fn final_arguments(raw: &str) -> Result<Value, String> {
    match json_parse::parse(raw)? {
        v @ Value::Object(_) => Ok(v),
        _ => Err("Tool arguments must be a JSON object".into()),
    }
}

/// Max output tokens to send: the caller's, else the model's `maxTokens`
/// lowered to what the context window leaves (`None` when the model does
/// not say).
pub(crate) fn default_max_tokens(req: &Request) -> Option<u64> {
    req.max_tokens.or(if req.model.max_tokens > 0 {
        Some(window::clamp(req, req.model.max_tokens))
    } else {
        None
    })
}

/// Model headers, then the caller's headers, as `(name, value)` pairs.
pub(crate) fn model_and_call_headers(req: &Request) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(h) = &req.model.headers {
        for (k, v) in h {
            if let Some(s) = v.as_str() {
                out.push((k.clone(), s.to_string()));
            }
        }
    }
    out.extend(req.headers.iter().cloned());
    out
}

/// The value at `path` below `v`, as `Value::pointer` finds it (an object
/// member by name, an array item by its decimal index), without parsing a
/// pointer string on each look-up.
pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| match cur {
        Value::Object(m) => m.get(*key),
        Value::Array(a) => {
            // Plain decimal digits without a leading zero, as for a pointer.
            let plain = key.bytes().all(|b| b.is_ascii_digit())
                && (key.len() == 1 || !key.starts_with('0'));
            plain
                .then(|| key.parse::<usize>().ok())
                .flatten()
                .and_then(|i| a.get(i))
        }
        _ => None,
    })
}

/// `base` with one trailing `/` removed, then `path`.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!("{}{}", base.trim_end_matches('/'), path)
}

/// A tool result's text for APIs that take a string: text blocks joined by
/// `\n`, or `(see attached image)` when there are only images.
pub(crate) fn tool_result_text(content: &[crate::format::ContentBlock]) -> String {
    let text = crate::format::message::blocks_text(content, "\n");
    let has_text = content
        .iter()
        .any(|b| matches!(b, crate::format::ContentBlock::Text(_)));
    let has_image = content
        .iter()
        .any(|b| matches!(b, crate::format::ContentBlock::Image(_)));
    if !has_text && has_image {
        "(see attached image)".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_finds_what_a_pointer_finds() {
        let v = serde_json::json!({"a": [{"b": 1}, {"0": 2}], "c": {"0": 3, "01": 4}});
        for p in [
            "/a/0/b", "/a/1/0", "/a/01", "/a/+1", "/a/", "/a/9", "/c/0", "/c/01", "/x", "/a/0/b/c",
        ] {
            let keys: Vec<&str> = p[1..].split('/').collect();
            assert_eq!(at(&v, &keys), v.pointer(p), "{p}");
        }
    }
}
