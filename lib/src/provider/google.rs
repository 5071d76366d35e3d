//! Google Generative AI (`google-generative-ai`): Gemini over
//! `streamGenerateContent?alt=sse`.
//!
//! Follows providers.md §2.4. Gemini sends whole parts, not deltas: a text
//! part extends the current text or thinking block (a new block on a kind
//! change), a function call arrives complete and becomes start + one delta +
//! end. Deliberate fix of a pi gap: `input` excludes cached tokens
//! (`promptTokenCount − cachedContentTokenCount`).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::body::Body;
use super::sse::{self, Failure, HttpCall};
use super::transform::{same_model, sanitize_id, transform_messages};
use super::{
    default_max_tokens, join_url, model_and_call_headers, EventSink, Out, Request, Streamed,
};
use crate::format::message::UserContent;
use crate::format::model::{Model, ThinkingLevel};
use crate::format::{AgentMessage, ContentBlock};

static CALL_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Streams one assistant message.
pub async fn stream(req: Request<'_>, on_event: EventSink<'_>) -> Streamed {
    let out = Out::new(&req.model, on_event);
    let body = build_body(&req);
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    if let Some(k) = &req.api_key {
        headers.push(("x-goog-api-key".into(), k.clone()));
    }
    headers.extend(model_and_call_headers(&req));
    let call = HttpCall {
        url: join_url(
            &req.model.base_url,
            &format!("/models/{}:streamGenerateContent?alt=sse", req.model.id),
        ),
        headers,
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

fn is_gemini3(model: &Model) -> bool {
    model.id.contains("gemini-3")
}

fn sends_ids(model: &Model) -> bool {
    model.id.starts_with("claude-") || model.id.starts_with("gpt-oss-")
}

fn thinking_config(model: &Model, level: ThinkingLevel) -> Option<Value> {
    if !model.reasoning || level == ThinkingLevel::Off {
        return None;
    }
    let id = model.id.as_str();
    if is_gemini3(model) && (id.contains("pro") || id.contains("flash")) {
        let l = if id.contains("pro") {
            match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "LOW",
                _ => "HIGH",
            }
        } else {
            match level {
                ThinkingLevel::Minimal => "MINIMAL",
                ThinkingLevel::Low => "LOW",
                ThinkingLevel::Medium => "MEDIUM",
                _ => "HIGH",
            }
        };
        return Some(json!({"includeThoughts": true, "thinkingLevel": l}));
    }
    let table: Option<[i64; 4]> = if id.contains("2.5-pro") {
        Some([128, 2048, 8192, 32768])
    } else if id.contains("2.5-flash") {
        Some([128, 2048, 8192, 24576])
    } else {
        None
    };
    let budget = match table {
        Some(t) => match level {
            ThinkingLevel::Minimal => t[0],
            ThinkingLevel::Low => t[1],
            ThinkingLevel::Medium => t[2],
            _ => t[3],
        },
        None => -1,
    };
    Some(json!({"includeThoughts": true, "thinkingBudget": budget}))
}

/// A tool as Gemini declares it, written from the definition in place.
#[derive(Serialize)]
struct FunctionDeclaration<'a> {
    name: &'a str,
    description: &'a str,
    #[serde(rename = "parametersJsonSchema")]
    parameters_json_schema: &'a Value,
}

/// `{"parts": [{"text": …}]}`, the text borrowed.
#[derive(Serialize)]
struct Parts<'a> {
    parts: [Text<'a>; 1],
}

#[derive(Serialize)]
struct Text<'a> {
    text: &'a str,
}

#[derive(Serialize)]
struct Tools<'a> {
    #[serde(rename = "functionDeclarations")]
    function_declarations: Vec<FunctionDeclaration<'a>>,
}

/// The request body (providers.md §2.4).
pub(crate) fn build_body(req: &Request) -> Body {
    let model = &req.model;
    // Already clamped to the model by `model::select::clamp_thinking`.
    let level = req.thinking;
    let mut body = Body::new();
    body.insert("contents", &convert_contents(req));
    if let Some(sp) = &req.system_prompt {
        body.insert(
            "systemInstruction",
            &Parts {
                parts: [Text { text: sp }],
            },
        );
    }
    let mut gen = Map::new();
    if let Some(mt) = default_max_tokens(req) {
        gen.insert("maxOutputTokens".into(), mt.into());
    }
    if let Some(tc) = thinking_config(model, level) {
        gen.insert("thinkingConfig".into(), tc);
    }
    // `--output-schema`: a JSON response to the schema, when it is in
    // Gemini's subset and the request declares no tools (Gemini refuses
    // function calling with a JSON response type); else validated locally.
    if let Some(rs) = req
        .response_schema
        .as_ref()
        .filter(|rs| rs.gemini.is_ok() && req.tools.is_empty())
    {
        gen.insert("responseMimeType".into(), "application/json".into());
        gen.insert("responseJsonSchema".into(), rs.wire.clone());
    }
    if !gen.is_empty() {
        body.insert("generationConfig", &gen);
    }
    if !req.tools.is_empty() {
        let decls: Vec<FunctionDeclaration> = req
            .tools
            .iter()
            .map(|t| FunctionDeclaration {
                name: &t.name,
                description: &t.description,
                parameters_json_schema: &t.parameters,
            })
            .collect();
        body.insert(
            "tools",
            &[Tools {
                function_declarations: decls,
            }],
        );
    }
    body
}

fn base64_like(s: &str) -> bool {
    !s.is_empty() && s.len().is_multiple_of(4)
}

fn convert_contents(req: &Request) -> Vec<Value> {
    let model = &req.model;
    let vision = model.input.iter().any(|i| i == "image");
    let messages = transform_messages(&req.messages, model, &|id: &str| sanitize_id(id, 64));
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        match &*messages[i] {
            AgentMessage::User(u) => {
                let parts: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({"text": s})],
                    UserContent::Blocks(b) => b
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text(t) => Some(json!({"text": t.text})),
                            ContentBlock::Image(im) if vision => Some(
                                json!({"inlineData": {"mimeType": im.mime_type, "data": im.data}}),
                            ),
                            _ => None,
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    out.push(json!({"role": "user", "parts": parts}));
                }
            }
            AgentMessage::Assistant(a) => {
                let same = same_model(a, model);
                let sig_of = |extra: &Map<String, Value>, key: &str| -> Option<String> {
                    extra
                        .get(key)
                        .and_then(Value::as_str)
                        .filter(|s| same && base64_like(s))
                        .map(str::to_string)
                };
                let mut parts = Vec::new();
                for b in &a.content {
                    match b {
                        ContentBlock::Text(t) if !t.text.trim().is_empty() => {
                            let mut p = Map::new();
                            p.insert("text".into(), t.text.clone().into());
                            if let Some(s) = sig_of(&t.extra, "textSignature") {
                                p.insert("thoughtSignature".into(), s.into());
                            }
                            parts.push(Value::Object(p));
                        }
                        ContentBlock::Thinking(t) if !t.thinking.trim().is_empty() => {
                            let mut p = Map::new();
                            if same {
                                p.insert("thought".into(), true.into());
                            }
                            p.insert("text".into(), t.thinking.clone().into());
                            if let Some(s) = sig_of(&t.extra, "thinkingSignature") {
                                p.insert("thoughtSignature".into(), s.into());
                            }
                            parts.push(Value::Object(p));
                        }
                        ContentBlock::ToolCall(tc) => {
                            let mut fc = Map::new();
                            fc.insert("name".into(), tc.name.clone().into());
                            fc.insert("args".into(), tc.arguments.clone());
                            if sends_ids(model) {
                                fc.insert("id".into(), tc.id.clone().into());
                            }
                            let mut p = Map::new();
                            p.insert("functionCall".into(), Value::Object(fc));
                            match sig_of(&tc.extra, "thoughtSignature") {
                                Some(s) => {
                                    p.insert("thoughtSignature".into(), s.into());
                                }
                                None if is_gemini3(model) => {
                                    p.insert(
                                        "thoughtSignature".into(),
                                        "skip_thought_signature_validator".into(),
                                    );
                                }
                                None => {}
                            }
                            parts.push(Value::Object(p));
                        }
                        _ => {}
                    }
                }
                if !parts.is_empty() {
                    out.push(json!({"role": "model", "parts": parts}));
                }
            }
            AgentMessage::ToolResult(_) => {
                let mut parts = Vec::new();
                let mut images = Vec::new();
                while let Some(AgentMessage::ToolResult(r)) = messages.get(i).map(|m| &**m) {
                    let text = super::tool_result_text(&r.content);
                    let key = if r.is_error { "error" } else { "output" };
                    let mut fr = Map::new();
                    fr.insert("name".into(), r.tool_name.clone().into());
                    fr.insert("response".into(), json!({ key: text }));
                    let imgs: Vec<Value> = r
                        .content
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Image(im) if vision => Some(
                                json!({"inlineData": {"mimeType": im.mime_type, "data": im.data}}),
                            ),
                            _ => None,
                        })
                        .collect();
                    if is_gemini3(model) && !imgs.is_empty() {
                        fr.insert("parts".into(), Value::Array(imgs));
                    } else {
                        images.extend(imgs);
                    }
                    if sends_ids(model) {
                        fr.insert("id".into(), r.tool_call_id.clone().into());
                    }
                    parts.push(json!({"functionResponse": Value::Object(fr)}));
                    i += 1;
                }
                out.push(json!({"role": "user", "parts": parts}));
                if !images.is_empty() {
                    let mut p = vec![json!({"text": "Tool result image:"})];
                    p.extend(images);
                    out.push(json!({"role": "user", "parts": p}));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

async fn read_stream(mut stream: sse::SseStream, mut out: Out<'_>) -> Streamed {
    out.start();
    // (content index, is thinking) of the open text/thinking block
    let mut open: Option<(usize, bool)> = None;
    let mut finish: Option<String> = None;
    let mut saw_event = false;
    let mut ids: Vec<String> = Vec::new();
    loop {
        let ev = match stream.next().await {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(f) => return out.fail(f),
        };
        if ev.data.trim().is_empty() {
            continue;
        }
        // A malformed chunk is an error (pi 1.6.0: `JSON.parse`'s message).
        let chunk = match super::json_parse::parse(&ev.data) {
            Ok(c) => c,
            Err(reason) => return out.fail(Failure::Transport(reason)),
        };
        saw_event = true;
        if let Some(err) = chunk.get("error").filter(|e| e.is_object()) {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            // An error chunk carries the HTTP status it stands for.
            return out.fail(match err.get("code").and_then(Value::as_u64) {
                Some(c) => Failure::Http {
                    status: u16::try_from(c).unwrap_or(0),
                    message: format!("{c} {msg}"),
                    retry_after: None,
                },
                None => Failure::Error(msg),
            });
        }
        // pi 1.6.0 records no responseModel (modelVersion) for this API.
        out.set_response(chunk.get("responseId").and_then(Value::as_str), None);
        if let Some(u) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            let get = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            let cached = get("cachedContentTokenCount");
            let input = get("promptTokenCount").saturating_sub(cached);
            let output = get("candidatesTokenCount") + get("thoughtsTokenCount");
            let total = u
                .get("totalTokenCount")
                .and_then(Value::as_u64)
                .unwrap_or(input + output + cached);
            out.set_usage(input, output, cached, 0, total);
        }
        let Some(cand) = super::at(&chunk, &["candidates", "0"]) else {
            continue;
        };
        if let Some(parts) = super::at(cand, &["content", "parts"]).and_then(Value::as_array) {
            for part in parts {
                let sig = part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
                    let i = match open {
                        Some((i, k)) if k == thought => i,
                        prev => {
                            if let Some((p, _)) = prev {
                                out.end(p);
                            }
                            let i = if thought {
                                out.push_thinking(None)
                            } else {
                                out.push_text()
                            };
                            open = Some((i, thought));
                            i
                        }
                    };
                    out.delta(i, text);
                    if let Some(s) = sig {
                        let key = if thought {
                            "thinkingSignature"
                        } else {
                            "textSignature"
                        };
                        match out.msg.content.get_mut(i) {
                            Some(ContentBlock::Thinking(t)) => {
                                t.extra.insert(key.into(), s.into());
                            }
                            Some(ContentBlock::Text(t)) => {
                                t.extra.insert(key.into(), s.into());
                            }
                            _ => {}
                        }
                    }
                } else if let Some(fc) = part.get("functionCall") {
                    if let Some((p, _)) = open.take() {
                        out.end(p);
                    }
                    let name = fc.get("name").and_then(Value::as_str).unwrap_or("");
                    let given = fc
                        .get("id")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty());
                    let id = match given {
                        Some(id) if !ids.iter().any(|x| x == id) => id.to_string(),
                        _ => format!(
                            "{name}_{}_{}",
                            crate::timefmt::now_ms(),
                            CALL_COUNTER.fetch_add(1, Ordering::Relaxed) + 1
                        ),
                    };
                    ids.push(id.clone());
                    let args = fc
                        .get("args")
                        .filter(|a| a.is_object())
                        .cloned()
                        .unwrap_or_else(|| json!({}));
                    let i = out.push_tool(&id, name, "");
                    if let Some(s) = sig {
                        if let Some(tc) = out.tool_mut(i) {
                            tc.extra.insert("thoughtSignature".into(), s.into());
                        }
                    }
                    out.tool_delta(i, &args.to_string());
                    out.end(i);
                }
            }
        }
        if let Some(fr) = cand.get("finishReason").and_then(Value::as_str) {
            finish = Some(fr.to_string());
        }
    }
    if !saw_event {
        if let Some(e) = stream.foreign_body_error() {
            return out.fail(Failure::Error(e));
        }
    }
    let Some(fr) = finish else {
        return out.fail(Failure::Transport(
            "Google stream ended without a finish reason".into(),
        ));
    };
    if let Some((p, _)) = open.take() {
        out.end(p);
    }
    out.msg
        .extra
        .insert("rawStopReason".into(), fr.clone().into());
    match fr.as_str() {
        _ if out.has_tool_calls() && (fr == "STOP" || fr == "MAX_TOKENS") => out.done("toolUse"),
        "STOP" => out.done("stop"),
        "MAX_TOKENS" => out.done("length"),
        other => out.fail(Failure::Error(format!("Provider finish reason: {other}"))),
    }
}
