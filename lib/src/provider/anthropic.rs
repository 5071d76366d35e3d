//! Anthropic Messages (`anthropic-messages`): Anthropic and compatible
//! endpoints (Kimi coding, MiniMax, gateways).
//!
//! The request carries the system prompt as cached text blocks, budget or
//! adaptive thinking by model, prompt-cache markers on the system prompt, the
//! last tool and the last user turn, consecutive tool results merged into
//! one user message; the stream is tracked by the server's block `index`.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::body::Body;
use super::sse::{self, Failure, HttpCall};
use super::transform::{anthropic_id, transform_messages};
use super::{
    default_max_tokens, join_url, model_and_call_headers, EventSink, Out, Request, Streamed,
};
use crate::format::message::UserContent;
use crate::format::model::{Model, ThinkingLevel};
use crate::format::{AgentMessage, ContentBlock};

/// Streams one assistant message.
pub async fn stream(req: Request<'_>, on_event: EventSink<'_>) -> Streamed {
    let mut out = Out::new(&req.model, on_event);
    // pi's Anthropic path announces the message before the HTTP answer.
    out.start();
    let body = build_body(&req);
    let call = HttpCall {
        // pi 1.6.0 posts to the beta endpoint on every Anthropic request.
        url: join_url(&req.model.base_url, "/v1/messages?beta=true"),
        headers: headers(&req),
        body: body.into_bytes(),
        idle_timeout: req.idle_timeout,
        cancel: &req.cancel,
        http_error: sse::plain_http_error,
    };
    let stream = match sse::open(call).await {
        Ok(s) => s,
        Err(f) => return out.fail(f),
    };
    read_stream(stream, out).await
}

/// Adaptive thinking only where the model's compat asks for it: pi 1.6.0
/// does not guess from the id (a custom `claude-sonnet-4-6` gets budget
/// thinking; the built-in one has `forceAdaptiveThinking`).
fn is_adaptive(model: &Model) -> bool {
    model
        .compat_value("forceAdaptiveThinking")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Whether this request thinks with a token budget (not adaptive).
fn budget_thinking(req: &Request) -> bool {
    req.model.reasoning && req.thinking != ThinkingLevel::Off && !is_adaptive(&req.model)
}

fn is_oauth(req: &Request) -> bool {
    req.api_key
        .as_deref()
        .is_some_and(|k| k.contains("sk-ant-oat"))
}

/// Request headers: auth, version, betas, then model and call headers.
pub fn headers(req: &Request) -> Vec<(String, String)> {
    let mut h = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".into(), "application/json".into()),
        ("anthropic-version".into(), "2023-06-01".into()),
        (
            "anthropic-dangerous-direct-browser-access".into(),
            "true".into(),
        ),
    ];
    // Tool input streams through `eager_input_streaming` on each tool, so
    // the only beta left is interleaved thinking, and only with a budget.
    let mut betas = Vec::new();
    if budget_thinking(req) {
        betas.push("interleaved-thinking-2025-05-14");
    }
    match &req.api_key {
        Some(k) if is_oauth(req) => {
            h.push(("authorization".into(), format!("Bearer {k}")));
            betas.insert(0, "oauth-2025-04-20");
            betas.insert(0, "claude-code-20250219");
            h.push(("x-app".into(), "cli".into()));
        }
        Some(k) => h.push(("x-api-key".into(), k.clone())),
        None => {}
    }
    if !betas.is_empty() {
        h.push(("anthropic-beta".into(), betas.join(",")));
    }
    h.extend(model_and_call_headers(req));
    h
}

fn cache_control(model: &Model) -> Value {
    let long = std::env::var("PI_CACHE_RETENTION").is_ok_and(|v| v == "long");
    if long && model.base_url.contains("api.anthropic.com") {
        json!({"type": "ephemeral", "ttl": "1h"})
    } else {
        json!({"type": "ephemeral"})
    }
}

fn budget_for(level: ThinkingLevel) -> u64 {
    match level {
        ThinkingLevel::Off => 0,
        ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium => 8192,
        ThinkingLevel::High | ThinkingLevel::Xhigh | ThinkingLevel::Max => 16384,
    }
}

/// The system prompt block, the text borrowed.
#[derive(Serialize)]
struct SystemText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    cache_control: &'a Value,
}

/// A tool as the Messages API declares it, written from the definition in
/// place.
#[derive(Serialize)]
struct AnthropicTool<'a> {
    name: &'a str,
    description: &'a str,
    eager_input_streaming: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
    input_schema: InputSchema<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<&'a Value>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum InputSchema<'a> {
    Strict(Value),
    Object {
        #[serde(rename = "type")]
        kind: &'static str,
        properties: &'a Value,
        required: &'a Value,
    },
}

/// The request body, as pi 1.6.0 sends it to the Messages API.
pub(crate) fn build_body(req: &Request) -> Body {
    let model = &req.model;
    let cc = cache_control(model);
    // Already clamped to the model by `model::select::clamp_thinking`.
    let level = req.thinking;
    let thinking_on = model.reasoning && level != ThinkingLevel::Off;
    let mut max_tokens = default_max_tokens(req).unwrap_or(if model.max_tokens > 0 {
        model.max_tokens / 3
    } else {
        4096
    });
    let mut body = Body::new();
    body.insert("model", &model.id);
    body.insert("messages", &convert_messages(req, &cc));
    let mut thinking = None;
    if thinking_on {
        if is_adaptive(model) {
            let effort = match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                ThinkingLevel::Max => "max",
                ThinkingLevel::Xhigh
                    if model.id.contains("opus-4-6") || model.id.contains("opus-4.6") =>
                {
                    "max"
                }
                _ => "high",
            };
            thinking = Some((
                json!({"type": "adaptive", "display": "summarized"}),
                Some(json!({"effort": effort})),
            ));
        } else {
            let mut budget = budget_for(level);
            let cap = if model.max_tokens > 0 {
                model.max_tokens
            } else {
                u64::MAX
            };
            max_tokens = (max_tokens + budget).min(cap);
            if max_tokens <= budget {
                budget = max_tokens.saturating_sub(1024);
            }
            thinking = Some((
                json!({"type": "enabled", "budget_tokens": budget, "display": "summarized"}),
                None,
            ));
        }
    }
    body.insert("max_tokens", &max_tokens);
    body.insert("stream", &true);
    if let Some(sp) = req.system_prompt.as_ref().filter(|s| !s.is_empty()) {
        body.insert(
            "system",
            &[SystemText {
                kind: "text",
                text: sp,
                cache_control: &cc,
            }],
        );
    }
    if !req.tools.is_empty() {
        let n = req.tools.len();
        let cache_tools = model
            .compat_value("supportsCacheControlOnTools")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let strict = model
            .compat_value("supportsStrictTools")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (no_properties, no_required) = (json!({}), json!([]));
        let tools: Vec<AnthropicTool> = req
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let p = &t.parameters;
                let input_schema = if strict {
                    InputSchema::Strict(super::strict_schema(p))
                } else {
                    InputSchema::Object {
                        kind: "object",
                        properties: p.get("properties").unwrap_or(&no_properties),
                        required: p.get("required").unwrap_or(&no_required),
                    }
                };
                AnthropicTool {
                    name: &t.name,
                    description: &t.description,
                    eager_input_streaming: true,
                    strict: strict.then_some(true),
                    input_schema,
                    cache_control: (cache_tools && i + 1 == n).then_some(&cc),
                }
            })
            .collect();
        body.insert("tools", &tools);
    }
    if let Some((t, effort)) = thinking {
        body.insert("thinking", &t);
        if let Some(e) = effort {
            body.insert("output_config", &e);
        }
    }
    body
}

fn image_block(data: &str, mime: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
}

fn convert_messages(req: &Request, cc: &Value) -> Vec<Value> {
    let model = &req.model;
    let vision = model.input.iter().any(|i| i == "image");
    let messages = transform_messages(&req.messages, model, &anthropic_id);
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        match &*messages[i] {
            AgentMessage::User(u) => match &u.content {
                UserContent::Text(s) => {
                    if !s.trim().is_empty() {
                        out.push(json!({"role": "user", "content": s}));
                    }
                }
                UserContent::Blocks(blocks) => {
                    let parts: Vec<Value> = blocks
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text(t) if !t.text.trim().is_empty() => {
                                Some(json!({"type": "text", "text": t.text}))
                            }
                            ContentBlock::Image(im) if vision => {
                                Some(image_block(&im.data, &im.mime_type))
                            }
                            _ => None,
                        })
                        .collect();
                    if !parts.is_empty() {
                        out.push(json!({"role": "user", "content": parts}));
                    }
                }
            },
            AgentMessage::Assistant(a) => {
                let mut parts = Vec::new();
                for b in &a.content {
                    match b {
                        ContentBlock::Text(t) if !t.text.trim().is_empty() => {
                            parts.push(json!({"type": "text", "text": t.text}));
                        }
                        ContentBlock::Thinking(t) => {
                            let sig = t
                                .extra
                                .get("thinkingSignature")
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            if t.extra.get("redacted").and_then(Value::as_bool) == Some(true) {
                                parts.push(json!({"type": "redacted_thinking", "data": sig}));
                            } else if t.thinking.trim().is_empty() {
                            } else if sig.is_empty() {
                                parts.push(json!({"type": "text", "text": t.thinking}));
                            } else {
                                parts.push(json!({"type": "thinking", "thinking": t.thinking, "signature": sig}));
                            }
                        }
                        ContentBlock::ToolCall(tc) => {
                            let input = if tc.arguments.is_object() {
                                tc.arguments.clone()
                            } else {
                                json!({})
                            };
                            parts.push(json!({"type": "tool_use", "id": tc.id, "name": tc.name, "input": input}));
                        }
                        _ => {}
                    }
                }
                if !parts.is_empty() {
                    out.push(json!({"role": "assistant", "content": parts}));
                }
            }
            AgentMessage::ToolResult(_) => {
                let mut results = Vec::new();
                while let Some(AgentMessage::ToolResult(r)) = messages.get(i).map(|m| &**m) {
                    let has_image = r
                        .content
                        .iter()
                        .any(|b| matches!(b, ContentBlock::Image(_)));
                    let content = if has_image {
                        let mut blocks = Vec::new();
                        let has_text = r.content.iter().any(|b| matches!(b, ContentBlock::Text(_)));
                        if !has_text {
                            blocks.push(json!({"type": "text", "text": "(see attached image)"}));
                        }
                        for b in &r.content {
                            match b {
                                ContentBlock::Text(t) => {
                                    blocks.push(json!({"type": "text", "text": t.text}))
                                }
                                ContentBlock::Image(im) => {
                                    blocks.push(image_block(&im.data, &im.mime_type))
                                }
                                _ => {}
                            }
                        }
                        Value::Array(blocks)
                    } else {
                        Value::String(crate::format::message::blocks_text(&r.content, "\n"))
                    };
                    results.push(json!({"type": "tool_result", "tool_use_id": r.tool_call_id, "content": content, "is_error": r.is_error}));
                    i += 1;
                }
                out.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Cache marker on the last block of a final user turn.
    if let Some(last) = out.last_mut() {
        if last["role"] == "user" {
            if let Value::String(s) = &last["content"] {
                last["content"] = json!([{"type": "text", "text": s}]);
            }
            if let Some(Value::Object(b)) =
                last["content"].as_array_mut().and_then(|a| a.last_mut())
            {
                b.insert("cache_control".into(), cc.clone());
            }
        }
    }
    out
}

/// pi 1.6.0's error for an event whose data is not JSON: the event name,
/// `JSON.parse`'s reason, the data, and the raw lines (newlines as `\n`).
fn malformed(ev: &sse::SseEvent, reason: &str) -> Failure {
    let mut raw: Vec<String> = Vec::new();
    if !ev.event.is_empty() {
        raw.push(format!("event: {}", ev.event));
    }
    raw.extend(ev.data.split('\n').map(|l| format!("data: {l}")));
    Failure::Transport(format!(
        "Could not parse Anthropic SSE event {}: {reason}; data={}; raw={}",
        ev.event,
        ev.data,
        raw.join("\\n")
    ))
}

async fn read_stream(mut stream: sse::SseStream, mut out: Out<'_>) -> Streamed {
    // server block index -> content index
    let mut blocks: HashMap<u64, usize> = HashMap::new();
    let mut stop: Option<String> = None;
    let mut saw_event = false;
    let mut saw_message_stop = false;
    let mut usage = [0u64; 4]; // input, output, cacheRead, cacheWrite
    loop {
        let ev = match stream.next().await {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(f) => return out.fail(f),
        };
        let data = match super::json_parse::parse(&ev.data) {
            Ok(d) => d,
            Err(reason) => return out.fail(malformed(&ev, &reason)),
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str())
            .to_string();
        saw_event = true;
        if ev.event == "error" || kind == "error" {
            return out.fail(Failure::Error(ev.data.clone()));
        }
        let idx = data.get("index").and_then(Value::as_u64);
        match kind.as_str() {
            "message_start" => {
                out.set_response(
                    super::at(&data, &["message", "id"]).and_then(Value::as_str),
                    super::at(&data, &["message", "model"]).and_then(Value::as_str),
                );
                if let Some(u) = super::at(&data, &["message", "usage"]) {
                    merge_usage(&mut usage, u);
                    out.set_usage(usage[0], usage[1], usage[2], usage[3], usage.iter().sum());
                }
            }
            "content_block_start" => {
                let Some(idx) = idx else { continue };
                let cb = &data["content_block"];
                let i = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let i = out.push_text();
                        if let Some(t) = cb
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.delta(i, t);
                        }
                        i
                    }
                    Some("thinking") => out.push_thinking(Some("")),
                    Some("redacted_thinking") => {
                        let sig = cb.get("data").and_then(Value::as_str).unwrap_or("");
                        let i = out.push_thinking(Some(sig));
                        if let Some(ContentBlock::Thinking(t)) = out.msg.content.get_mut(i) {
                            t.thinking = "[Reasoning redacted]".into();
                            t.extra.insert("redacted".into(), true.into());
                        }
                        i
                    }
                    Some("tool_use") => {
                        let id = cb.get("id").and_then(Value::as_str).unwrap_or("");
                        let name = cb.get("name").and_then(Value::as_str).unwrap_or("");
                        let i = out.push_tool(id, name, "");
                        if let Some(input) = cb
                            .get("input")
                            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                        {
                            if let Some(tc) = out.tool_mut(i) {
                                tc.arguments = input.clone();
                            }
                        }
                        i
                    }
                    _ => continue,
                };
                blocks.insert(idx, i);
            }
            "content_block_delta" => {
                let Some(&i) = idx.and_then(|x| blocks.get(&x)) else {
                    continue;
                };
                let d = &data["delta"];
                match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        out.delta(i, d.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some("thinking_delta") => {
                        out.delta(i, d.get("thinking").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some("input_json_delta") => {
                        out.tool_delta(
                            i,
                            d.get("partial_json").and_then(Value::as_str).unwrap_or(""),
                        );
                    }
                    Some("signature_delta") => {
                        if let Some(ContentBlock::Thinking(t)) = out.msg.content.get_mut(i) {
                            let mut s = t
                                .extra
                                .get("thinkingSignature")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string();
                            s.push_str(d.get("signature").and_then(Value::as_str).unwrap_or(""));
                            t.extra.insert("thinkingSignature".into(), s.into());
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(i) = idx.and_then(|x| blocks.remove(&x)) {
                    out.end(i);
                }
            }
            "message_stop" => {
                saw_message_stop = true;
                break;
            }
            "message_delta" => {
                if let Some(r) = super::at(&data, &["delta", "stop_reason"]).and_then(Value::as_str)
                {
                    stop = Some(r.to_string());
                }
                if let Some(u) = data.get("usage") {
                    merge_usage(&mut usage, u);
                    out.set_usage(usage[0], usage[1], usage[2], usage[3], usage.iter().sum());
                }
            }
            _ => {}
        }
    }
    if !saw_event {
        if let Some(e) = stream.foreign_body_error() {
            return out.fail(Failure::Error(e));
        }
    }
    if !saw_message_stop {
        return out.fail(Failure::Transport(
            "Anthropic stream ended before message_stop".into(),
        ));
    }
    let Some(stop) = stop else {
        return out.done("stop");
    };
    out.msg
        .extra
        .insert("rawStopReason".into(), stop.clone().into());
    match stop.as_str() {
        "end_turn" | "pause_turn" | "stop_sequence" => out.done("stop"),
        "max_tokens" => out.done("length"),
        "tool_use" => out.done("toolUse"),
        "refusal" | "sensitive" => out.fail(Failure::Error("An unknown error occurred".into())),
        other => out.fail(Failure::Error(format!("Unhandled stop reason: {other}"))),
    }
}

/// Overwrites the counts present (and non-null) in an Anthropic usage object.
fn merge_usage(usage: &mut [u64; 4], u: &Value) {
    let keys = [
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ];
    for (slot, k) in usage.iter_mut().zip(keys) {
        if let Some(n) = u.get(k).and_then(Value::as_u64) {
            *slot = n;
        }
    }
}
