//! OpenAI Responses (`openai-responses`): OpenAI's newer API, used for the
//! gpt-5 family (also Copilot and OpenCode).
//!
//! Follows providers.md §2.3. Reasoning items travel as their full JSON in
//! the thinking signature so they can be replayed verbatim; tool-call ids are
//! `<call_id>|<item id>`. Deliberate fix of a pi gap: `response.incomplete`
//! (max_output_tokens) ends with `length` and its usage instead of `stop`
//! with zero usage.

use std::collections::HashMap;

use serde::Serialize;

use serde_json::{json, Map, Value};

use super::body::Body;
use super::sse::{self, Failure};
use super::transform::{responses_id, same_model, transform_messages};
use super::{default_max_tokens, EventSink, Out, Request, Streamed};
use crate::format::message::UserContent;
use crate::format::model::ThinkingLevel;
use crate::format::{AgentMessage, ContentBlock};

/// Streams one assistant message.
pub async fn stream(req: Request<'_>, on_event: EventSink<'_>) -> Streamed {
    let out = Out::new(&req.model, on_event);
    let body = build_body(&req).into_bytes();
    // pi 1.6.0 names the session in two headers on this API only.
    let session: Vec<(String, String)> = req
        .session_id
        .iter()
        .flat_map(|sid| {
            [
                ("session-id".to_string(), sid.clone()),
                ("x-client-request-id".to_string(), sid.clone()),
            ]
        })
        .collect();
    let stream = match sse::open_openai(&req, "/responses", body, session).await {
        Ok(s) => s,
        Err(f) => return out.fail(f),
    };
    read_stream(stream, out).await
}

/// A tool as the Responses API declares it, written from the definition
/// in place.
#[derive(Serialize)]
struct ResponsesTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    function: super::FunctionDecl<'a>,
}

/// The request body (providers.md §2.3).
pub(crate) fn build_body(req: &Request) -> Body {
    let model = &req.model;
    // Already clamped to the model by `model::select::clamp_thinking`.
    let level = req.thinking;
    let mut body = Body::new();
    body.insert("model", &model.id);
    body.insert("input", &convert_input(req, level));
    body.insert("stream", &true);
    if let Some(sid) = &req.session_id {
        body.insert("prompt_cache_key", sid);
    }
    body.insert("store", &false);
    let supports_max = model
        .compat_value("supportsMaxOutputTokens")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    if let Some(mt) = default_max_tokens(req).filter(|_| supports_max) {
        // The Responses API takes no fewer than 16 output tokens.
        body.insert("max_output_tokens", &mt.max(16));
    }
    let strict = model
        .compat_value("supportsStrictMode")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // `--output-schema`: strict structured output where the model does
    // strict mode and the schema fits it (else it is validated locally).
    if let Some(rs) = req
        .response_schema
        .as_ref()
        .filter(|rs| strict && rs.openai.is_ok())
    {
        body.insert("text", &json!({"format": rs.openai_responses_format()}));
    }
    if !req.tools.is_empty() {
        let tools: Vec<ResponsesTool> = req
            .tools
            .iter()
            .map(|t| ResponsesTool {
                kind: "function",
                function: super::FunctionDecl::of(t, strict),
            })
            .collect();
        body.insert("tools", &tools);
    }
    if model.reasoning && level != ThinkingLevel::Off {
        body.insert(
            "reasoning",
            &json!({"effort": level.as_str(), "summary": "auto"}),
        );
        body.insert("include", &json!(["reasoning.encrypted_content"]));
    }
    body
}

fn convert_input(req: &Request, level: ThinkingLevel) -> Vec<Value> {
    let model = &req.model;
    let vision = model.input.iter().any(|i| i == "image");
    let mut out = Vec::new();
    let dev = model
        .compat_value("supportsDeveloperRole")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let sys_role = if model.reasoning && dev {
        "developer"
    } else {
        "system"
    };
    if let Some(sp) = &req.system_prompt {
        out.push(json!({"role": sys_role, "content": sp}));
    }
    if model.reasoning && level == ThinkingLevel::Off && model.name.starts_with("gpt-5") {
        out.push(json!({"role": "developer", "content": "# Juice: 0 !important"}));
    }
    let messages = transform_messages(&req.messages, model, &|id: &str| responses_id(id, model));
    for (msg_index, m) in messages.iter().enumerate() {
        match &**m {
            AgentMessage::User(u) => {
                let parts: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({"type": "input_text", "text": s})],
                    UserContent::Blocks(b) => b
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text(t) => {
                                Some(json!({"type": "input_text", "text": t.text}))
                            }
                            ContentBlock::Image(im) if vision => Some(json!({
                                "type": "input_image", "detail": "auto",
                                "image_url": format!("data:{};base64,{}", im.mime_type, im.data)
                            })),
                            _ => None,
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    out.push(json!({"role": "user", "content": parts}));
                }
            }
            AgentMessage::Assistant(a) => {
                let same = same_model(a, model);
                let same_api_other_model =
                    !same && a.provider == model.provider && a.api == model.api;
                for b in &a.content {
                    match b {
                        ContentBlock::Thinking(t) => {
                            if let Some(sig) =
                                t.extra.get("thinkingSignature").and_then(Value::as_str)
                            {
                                if let Ok(item @ Value::Object(_)) =
                                    serde_json::from_str::<Value>(sig)
                                {
                                    out.push(item);
                                }
                            }
                        }
                        ContentBlock::Text(t) => {
                            let (id, phase) = text_signature(t.extra.get("textSignature"));
                            let mut id = id.unwrap_or_else(|| format!("msg_{msg_index}"));
                            if id.len() > 64 {
                                id = format!("msg_{}", short_hash(&id));
                            }
                            let mut item = Map::new();
                            item.insert("type".into(), "message".into());
                            item.insert("role".into(), "assistant".into());
                            item.insert(
                                "content".into(),
                                json!([{"type": "output_text", "text": t.text, "annotations": []}]),
                            );
                            item.insert("status".into(), "completed".into());
                            item.insert("id".into(), id.into());
                            if let Some(p) = phase {
                                item.insert("phase".into(), p.into());
                            }
                            out.push(Value::Object(item));
                        }
                        ContentBlock::ToolCall(tc) => {
                            let (call_id, item_id) = match tc.id.split_once('|') {
                                Some((c, i)) => (c.to_string(), Some(i.to_string())),
                                None => (tc.id.clone(), None),
                            };
                            let args = serde_json::to_string(&tc.arguments)
                                .unwrap_or_else(|_| "{}".into());
                            let mut item = Map::new();
                            item.insert("type".into(), "function_call".into());
                            if let Some(iid) =
                                item_id.filter(|i| !(same_api_other_model && i.starts_with("fc_")))
                            {
                                item.insert("id".into(), iid.into());
                            }
                            item.insert("call_id".into(), call_id.into());
                            item.insert("name".into(), tc.name.clone().into());
                            item.insert("arguments".into(), args.into());
                            out.push(Value::Object(item));
                        }
                        _ => {}
                    }
                }
            }
            AgentMessage::ToolResult(r) => {
                let call_id = r.tool_call_id.split('|').next().unwrap_or("").to_string();
                let has_image = r
                    .content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::Image(_)));
                let output = if has_image && vision {
                    let parts: Vec<Value> = r
                        .content
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text(t) => {
                                Some(json!({"type": "input_text", "text": t.text}))
                            }
                            ContentBlock::Image(im) => Some(json!({
                                "type": "input_image", "detail": "auto",
                                "image_url": format!("data:{};base64,{}", im.mime_type, im.data)
                            })),
                            _ => None,
                        })
                        .collect();
                    Value::Array(parts)
                } else {
                    Value::String(super::tool_result_text(&r.content))
                };
                out.push(
                    json!({"type": "function_call_output", "call_id": call_id, "output": output}),
                );
            }
            _ => {}
        }
    }
    out
}

/// `(id, phase)` of a text signature: JSON `{"v":1,"id":…,"phase":…}` or a
/// bare legacy id.
fn text_signature(sig: Option<&Value>) -> (Option<String>, Option<String>) {
    let Some(s) = sig.and_then(Value::as_str).filter(|s| !s.is_empty()) else {
        return (None, None);
    };
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(o)) => (
            o.get("id").and_then(Value::as_str).map(str::to_string),
            o.get("phase").and_then(Value::as_str).map(str::to_string),
        ),
        _ => (Some(s.to_string()), None),
    }
}

fn short_hash(s: &str) -> String {
    // FNV-1a, 64 bit: stable and dependency-free.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn text_of_parts(item: &Value) -> String {
    item.get("content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| {
                    p.get("text")
                        .or_else(|| p.get("refusal"))
                        .and_then(Value::as_str)
                })
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

async fn read_stream(mut stream: sse::SseStream, mut out: Out<'_>) -> Streamed {
    out.start();
    // output_index -> content index
    let mut items: HashMap<u64, usize> = HashMap::new();
    let mut has_part: HashMap<u64, bool> = HashMap::new();
    let mut saw_event = false;
    loop {
        let ev = match stream.next().await {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(f) => return out.fail(f),
        };
        let text = ev.data.trim();
        if text.is_empty() || text == "[DONE]" {
            continue;
        }
        // A malformed event is an error, never skipped: skipping can lose a
        // whole function call.
        let Ok(data) = serde_json::from_str::<Value>(text) else {
            return out.fail(Failure::Transport(sse::OPENAI_MALFORMED.into()));
        };
        saw_event = true;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str())
            .to_string();
        let oi = data
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let current = items.get(&oi).copied();
        match kind.as_str() {
            "response.created" => {
                // pi 1.6.0 records no responseModel for this API.
                out.set_response(
                    super::at(&data, &["response", "id"]).and_then(Value::as_str),
                    None,
                );
            }
            "response.output_item.added" => {
                let item = &data["item"];
                let i = match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => out.push_thinking(None),
                    Some("message") => out.push_text(),
                    Some("function_call") => {
                        let call = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                        let iid = item.get("id").and_then(Value::as_str).unwrap_or("");
                        let name = item.get("name").and_then(Value::as_str).unwrap_or("");
                        let args = item.get("arguments").and_then(Value::as_str).unwrap_or("");
                        out.push_tool(&format!("{call}|{iid}"), name, args)
                    }
                    _ => continue,
                };
                items.insert(oi, i);
            }
            "response.reasoning_summary_text.delta" => {
                if let Some(i) = current {
                    out.delta(i, data.get("delta").and_then(Value::as_str).unwrap_or(""));
                }
            }
            "response.reasoning_summary_part.done" => {
                if let Some(i) = current {
                    out.delta(i, "\n\n");
                }
            }
            "response.content_part.added" => {
                has_part.insert(oi, true);
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let (Some(i), Some(true)) = (current, has_part.get(&oi)) {
                    out.delta(i, data.get("delta").and_then(Value::as_str).unwrap_or(""));
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(i) = current {
                    out.tool_delta(i, data.get("delta").and_then(Value::as_str).unwrap_or(""));
                }
            }
            "response.function_call_arguments.done" => {
                if let (Some(i), Some(a)) = (current, data.get("arguments").and_then(Value::as_str))
                {
                    out.set_tool_args(i, a);
                }
            }
            "response.output_item.done" => {
                let Some(i) = current else { continue };
                let item = &data["item"];
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        let summary: Vec<&str> = item
                            .get("summary")
                            .and_then(Value::as_array)
                            .map(|s| {
                                s.iter()
                                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                                    .collect()
                            })
                            .unwrap_or_default();
                        if let Some(ContentBlock::Thinking(t)) = out.msg.content.get_mut(i) {
                            t.thinking = summary.join("\n\n");
                            t.extra
                                .insert("thinkingSignature".into(), item.to_string().into());
                        }
                    }
                    Some("message") => {
                        let text = text_of_parts(item);
                        let mut sig = Map::new();
                        sig.insert("v".into(), 1.into());
                        sig.insert("id".into(), item.get("id").cloned().unwrap_or(Value::Null));
                        if let Some(p) = item.get("phase").filter(|p| p.is_string()) {
                            sig.insert("phase".into(), p.clone());
                        }
                        if let Some(ContentBlock::Text(t)) = out.msg.content.get_mut(i) {
                            t.text = text;
                            t.extra.insert(
                                "textSignature".into(),
                                Value::Object(sig).to_string().into(),
                            );
                        }
                    }
                    Some("function_call") => {
                        if let Some(a) = item.get("arguments").and_then(Value::as_str) {
                            out.set_tool_args(i, a);
                        }
                    }
                    _ => {}
                }
                out.end(i);
                items.remove(&oi);
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let resp = &data["response"];
                out.set_response(resp.get("id").and_then(Value::as_str), None);
                if let Some(u) = resp.get("usage").filter(|u| u.is_object()) {
                    let get = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
                    let cached = get("/input_tokens_details/cached_tokens");
                    let input = get("/input_tokens").saturating_sub(cached);
                    let output = get("/output_tokens");
                    let total = u
                        .get("total_tokens")
                        .and_then(Value::as_u64)
                        .unwrap_or(input + output + cached);
                    out.set_usage(input, output, cached, 0, total);
                }
                let status = resp
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("completed");
                if kind == "response.failed" || status == "failed" || status == "cancelled" {
                    let msg = match resp.get("error").filter(|e| e.is_object()) {
                        Some(e) => format!(
                            "{}: {}",
                            e.get("code").and_then(Value::as_str).unwrap_or("unknown"),
                            e.get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("no message")
                        ),
                        None => match super::at(resp, &["incomplete_details", "reason"])
                            .and_then(Value::as_str)
                        {
                            Some(r) => format!("incomplete: {r}"),
                            None => "Unknown error (no error details in response)".into(),
                        },
                    };
                    return out.fail(Failure::Error(msg));
                }
                out.msg.extra.insert("rawStopReason".into(), status.into());
                let reason = if status == "incomplete" {
                    "length"
                } else if out.has_tool_calls() {
                    "toolUse"
                } else {
                    "stop"
                };
                return out.done(reason);
            }
            "error" => {
                let code = data.get("code").map(|c| match c {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
                let message = data
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("Unknown error");
                return out.fail(Failure::Error(format!(
                    "Error Code {}: {message}",
                    code.unwrap_or_else(|| "unknown".into())
                )));
            }
            _ => {}
        }
    }
    if !saw_event {
        if let Some(e) = stream.foreign_body_error() {
            return out.fail(Failure::Error(e));
        }
    }
    out.fail(Failure::Transport(
        "OpenAI Responses stream ended before a terminal response event".into(),
    ))
}
