//! OpenAI Chat Completions (`openai-completions`): OpenAI and the many
//! servers that copy its wire format (Ollama, llama.cpp, vLLM, LM Studio,
//! OpenRouter, Groq, xAI, z.ai, …).
//!
//! Body and event order match what pi 1.6.0 sends and emits (observed
//! against the real pi with a mock server): one thinking block and one text
//! block per message that later deltas of the same kind append to, tool calls
//! keyed by their `index`, and every block ended only when the stream ends,
//! in content order. Server quirks are `model.compat` flags (pi's
//! models-configuration.md), with detection by provider / base URL.

use std::collections::HashMap;

use serde::Serialize;

use serde_json::{json, Map, Value};

use super::body::Body;
use super::sse::{self, Failure};
use super::transform::{completions_id, transform_messages};
use super::{default_max_tokens, EventSink, Out, Request, Streamed};
use crate::format::message::{AssistantMessage, MessageRef, UserContent};
use crate::format::model::{Model, ThinkingLevel};
use crate::format::{AgentMessage, ContentBlock};

/// Streams one assistant message.
pub async fn stream(req: Request<'_>, on_event: EventSink<'_>) -> Streamed {
    let out = Out::new(&req.model, on_event);
    let body = build_body(&req).into_bytes();
    let stream = match sse::open_openai(&req, "/chat/completions", body, Vec::new()).await {
        Ok(s) => s,
        Err(f) => return out.fail(f),
    };
    read_stream(stream, out, &req.model).await
}

/// The effective compat settings of a model (explicit flags win over
/// detection by provider and base URL).
#[derive(Debug, Clone)]
pub struct Compat {
    pub supports_store: bool,
    pub supports_developer_role: bool,
    pub supports_reasoning_effort: bool,
    pub supports_usage_in_streaming: bool,
    pub supports_finish_reason: bool,
    pub supports_strict_mode: bool,
    pub max_tokens_field: String,
    pub requires_tool_result_name: bool,
    pub requires_assistant_after_tool_result: bool,
    pub requires_non_null_assistant_content: bool,
    pub requires_tools_with_tool_history: bool,
    pub requires_thinking_as_text: bool,
    pub requires_reasoning_content_on_assistant: bool,
    pub thinking_format: String,
    pub reasoning_effort_map: Map<String, Value>,
    pub open_router_routing: Option<Value>,
    pub vercel_gateway_routing: Option<Value>,
}

impl Compat {
    /// Resolves `model.compat` over the detected defaults.
    pub fn of(model: &Model) -> Compat {
        let url = model.base_url.as_str();
        let p = model.provider.as_str();
        let non_standard = ["cerebras", "xai", "zai", "opencode"].contains(&p)
            || [
                "cerebras.ai",
                "api.x.ai",
                "chutes.ai",
                "deepseek.com",
                "api.z.ai",
                "opencode.ai",
            ]
            .iter()
            .any(|h| url.contains(h));
        let is_zai = p == "zai" || url.contains("api.z.ai");
        let is_xai = p == "xai" || url.contains("api.x.ai");
        let is_openrouter = p == "openrouter" || url.contains("openrouter.ai");
        let flag = |k: &str, d: bool| model.compat_value(k).and_then(Value::as_bool).unwrap_or(d);
        let string = |k: &str, d: &str| {
            model
                .compat_value(k)
                .and_then(Value::as_str)
                .unwrap_or(d)
                .to_string()
        };
        let default_format = if is_zai {
            "zai"
        } else if is_openrouter {
            "openrouter"
        } else {
            "openai"
        };
        let mut effort_map = model
            .compat_value("reasoningEffortMap")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if effort_map.is_empty() && p == "groq" && model.id == "qwen/qwen3-32b" {
            for l in ["minimal", "low", "medium", "high", "xhigh"] {
                effort_map.insert(l.into(), "default".into());
            }
        }
        Compat {
            supports_store: flag("supportsStore", !non_standard),
            supports_developer_role: flag("supportsDeveloperRole", url.contains("api.openai.com")),
            supports_reasoning_effort: flag("supportsReasoningEffort", !(is_xai || is_zai)),
            supports_usage_in_streaming: flag("supportsUsageInStreaming", true),
            supports_finish_reason: flag("supportsFinishReason", true),
            supports_strict_mode: flag("supportsStrictMode", false),
            max_tokens_field: string(
                "maxTokensField",
                if url.contains("chutes.ai") {
                    "max_tokens"
                } else {
                    "max_completion_tokens"
                },
            ),
            requires_tool_result_name: flag("requiresToolResultName", false),
            requires_assistant_after_tool_result: flag("requiresAssistantAfterToolResult", false),
            requires_non_null_assistant_content: flag("requiresNonNullAssistantContent", false),
            requires_tools_with_tool_history: flag("requiresToolsWithToolHistory", false),
            requires_thinking_as_text: flag("requiresThinkingAsText", false),
            requires_reasoning_content_on_assistant: flag(
                "requiresReasoningContentOnAssistantMessages",
                false,
            ),
            thinking_format: string("thinkingFormat", default_format),
            reasoning_effort_map: effort_map,
            open_router_routing: model.compat_value("openRouterRouting").cloned(),
            vercel_gateway_routing: model.compat_value("vercelGatewayRouting").cloned(),
        }
    }
}

fn is_vision(model: &Model) -> bool {
    model.input.iter().any(|i| i == "image")
}

fn image_url(data: &str, mime: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
}

/// A tool as Chat Completions declares it, written from the definition
/// in place (`{"type":"function","function":{name, description,
/// parameters[, strict]}}`).
#[derive(Serialize)]
struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: super::FunctionDecl<'a>,
}

/// The request body pi 1.6.0 sends.
pub(crate) fn build_body(req: &Request) -> Body {
    let model = &req.model;
    let compat = Compat::of(model);
    let mut body = Body::new();
    body.insert("model", &model.id);
    body.insert_raw("messages", convert_messages(req, &compat));
    body.insert("stream", &true);
    if compat.supports_usage_in_streaming {
        body.insert("stream_options", &json!({"include_usage": true}));
    }
    if compat.supports_store {
        body.insert("store", &false);
    }
    if let Some(mt) = default_max_tokens(req) {
        body.insert(&compat.max_tokens_field, &mt);
    }
    if !req.tools.is_empty() {
        let tools: Vec<FunctionTool> = req
            .tools
            .iter()
            .map(|t| FunctionTool {
                kind: "function",
                function: super::FunctionDecl::of(t, compat.supports_strict_mode),
            })
            .collect();
        body.insert("tools", &tools);
    } else if compat.requires_tools_with_tool_history && has_tool_history(&req.messages) {
        body.insert("tools", &json!([]));
    }
    if model.reasoning {
        add_thinking(&mut body, req, &compat);
    }
    // `--output-schema`: strict structured output where the model does
    // strict mode and the schema fits it (else it is validated locally).
    if let Some(rs) = req
        .response_schema
        .as_ref()
        .filter(|rs| compat.supports_strict_mode && rs.openai.is_ok())
    {
        body.insert("response_format", &rs.openai_chat_format());
    }
    if let Some(r) = &compat.open_router_routing {
        body.insert("provider", r);
    }
    if let Some(r) = &compat.vercel_gateway_routing {
        body.insert("providerOptions", &json!({"gateway": r}));
    }
    body
}

fn has_tool_history(messages: &[MessageRef<'_>]) -> bool {
    messages.iter().any(|m| match &**m {
        AgentMessage::ToolResult(_) => true,
        AgentMessage::Assistant(a) => a
            .content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall(_))),
        _ => false,
    })
}

fn add_thinking(body: &mut Body, req: &Request, compat: &Compat) {
    // Already clamped to the model by `model::select::clamp_thinking`.
    let level = req.thinking;
    let on = level != ThinkingLevel::Off;
    let effort = || -> Value {
        compat
            .reasoning_effort_map
            .get(level.as_str())
            .cloned()
            .unwrap_or_else(|| level.as_str().into())
    };
    let with_effort = |body: &mut Body| {
        if on && compat.supports_reasoning_effort {
            body.insert("reasoning_effort", &effort());
        }
    };
    match compat.thinking_format.as_str() {
        "zai" => {
            let t = if on { "enabled" } else { "disabled" };
            body.insert("thinking", &json!({"type": t}));
        }
        "deepseek" => {
            let t = if on { "enabled" } else { "disabled" };
            body.insert("thinking", &json!({"type": t}));
            with_effort(body);
        }
        "qwen" => {
            body.insert("enable_thinking", &on);
            with_effort(body);
        }
        "qwen-chat-template" => {
            body.insert(
                "chat_template_kwargs",
                &json!({"enable_thinking": on, "preserve_thinking": true}),
            );
        }
        "together" => {
            body.insert("reasoning", &json!({"enabled": on}));
            with_effort(body);
        }
        "openrouter" => {
            if on {
                body.insert("reasoning", &json!({"effort": effort()}));
            }
        }
        _ => with_effort(body),
    }
}

/// One message of the body: text written from where it is, or a value
/// built for the rarer shapes.
#[derive(Serialize)]
#[serde(untagged)]
enum Msg<'a> {
    Text {
        role: &'static str,
        content: &'a str,
    },
    ToolResult {
        role: &'static str,
        content: String,
        tool_call_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
    },
    Built(Value),
}

impl Msg<'_> {
    fn is_tool_result(&self) -> bool {
        matches!(self, Msg::ToolResult { .. })
    }
}

const PROCESSED: Msg<'static> = Msg::Text {
    role: "assistant",
    content: "I have processed the tool results.",
};

/// The body's `messages`, serialised.
fn convert_messages(req: &Request, compat: &Compat) -> String {
    let model = &req.model;
    let mut out: Vec<Msg> = Vec::new();
    if let Some(sp) = &req.system_prompt {
        let role = if model.reasoning && compat.supports_developer_role {
            "developer"
        } else {
            "system"
        };
        out.push(Msg::Text { role, content: sp });
    }
    let messages = transform_messages(&req.messages, model, &|id: &str| completions_id(id, model));
    let vision = is_vision(model);
    let mut i = 0;
    while i < messages.len() {
        match &*messages[i] {
            AgentMessage::User(u) => {
                if compat.requires_assistant_after_tool_result
                    && out.last().is_some_and(Msg::is_tool_result)
                {
                    out.push(PROCESSED);
                }
                match &u.content {
                    UserContent::Text(s) => out.push(Msg::Text {
                        role: "user",
                        content: s,
                    }),
                    UserContent::Blocks(blocks) => {
                        let parts: Vec<Value> = blocks
                            .iter()
                            .filter_map(|b| match b {
                                ContentBlock::Text(t) => {
                                    Some(json!({"type": "text", "text": t.text}))
                                }
                                ContentBlock::Image(im) if vision => {
                                    Some(image_url(&im.data, &im.mime_type))
                                }
                                _ => None,
                            })
                            .collect();
                        if !parts.is_empty() {
                            out.push(Msg::Built(json!({"role": "user", "content": parts})));
                        }
                    }
                }
            }
            AgentMessage::Assistant(a) => {
                if let Some(v) = convert_assistant(a, compat, req.thinking != ThinkingLevel::Off) {
                    out.push(Msg::Built(v));
                }
            }
            AgentMessage::ToolResult(_) => {
                let mut images = Vec::new();
                while let Some(AgentMessage::ToolResult(r)) = messages.get(i).map(|m| &**m) {
                    out.push(Msg::ToolResult {
                        role: "tool",
                        content: super::tool_result_text(&r.content),
                        tool_call_id: &r.tool_call_id,
                        name: compat
                            .requires_tool_result_name
                            .then_some(r.tool_name.as_str()),
                    });
                    if vision {
                        for b in &r.content {
                            if let ContentBlock::Image(im) = b {
                                images.push(image_url(&im.data, &im.mime_type));
                            }
                        }
                    }
                    i += 1;
                }
                if !images.is_empty() {
                    if compat.requires_assistant_after_tool_result {
                        out.push(PROCESSED);
                    }
                    let mut parts = vec![
                        json!({"type": "text", "text": "Attached image(s) from tool result:"}),
                    ];
                    parts.extend(images);
                    out.push(Msg::Built(json!({"role": "user", "content": parts})));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Strings and values always serialise.
    serde_json::to_string(&out).unwrap_or_else(|_| "[]".into())
}

fn convert_assistant(a: &AssistantMessage, compat: &Compat, thinking_on: bool) -> Option<Value> {
    let mut text: String = a
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) if !t.text.trim().is_empty() => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let thinking: Vec<&crate::format::message::ThinkingBlock> = a
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Thinking(t) if !t.thinking.trim().is_empty() => Some(t),
            _ => None,
        })
        .collect();
    let mut reasoning_field: Option<(String, String)> = None;
    if !thinking.is_empty() {
        if compat.requires_thinking_as_text {
            let joined: Vec<String> = thinking
                .iter()
                .map(|t| format!("<thinking>\n{}\n</thinking>", t.thinking))
                .collect();
            let joined = joined.join("\n\n");
            text = if text.is_empty() {
                joined
            } else {
                format!("{joined}\n\n{text}")
            };
        } else if let Some(sig) = thinking[0]
            .extra
            .get("thinkingSignature")
            .and_then(Value::as_str)
        {
            if ["reasoning_content", "reasoning", "reasoning_text"].contains(&sig) {
                let all: Vec<&str> = thinking.iter().map(|t| t.thinking.as_str()).collect();
                reasoning_field = Some((sig.to_string(), all.join("\n")));
            }
        }
    }
    let mut tool_calls = Vec::new();
    let mut details = Vec::new();
    for b in &a.content {
        if let ContentBlock::ToolCall(tc) = b {
            let args = serde_json::to_string(&tc.arguments).unwrap_or_else(|_| "{}".into());
            tool_calls.push(json!({"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": args}}));
            if let Some(sig) = tc.extra.get("thoughtSignature").and_then(Value::as_str) {
                if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(sig) {
                    details.push(v);
                }
            }
        }
    }
    if text.is_empty() && tool_calls.is_empty() && reasoning_field.is_none() {
        return None;
    }
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    let content = if !text.is_empty() {
        Value::String(text)
    } else if compat.requires_assistant_after_tool_result
        || compat.requires_non_null_assistant_content
    {
        Value::String(String::new())
    } else {
        Value::Null
    };
    m.insert("content".into(), content);
    match reasoning_field {
        Some((field, text)) => {
            m.insert(field, text.into());
        }
        None if compat.requires_reasoning_content_on_assistant && thinking_on => {
            m.insert("reasoning_content".into(), "".into());
        }
        None => {}
    }
    if !tool_calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    if !details.is_empty() {
        m.insert("reasoning_details".into(), Value::Array(details));
    }
    Some(Value::Object(m))
}

fn u64_at(v: &Value, path: &[&str]) -> u64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_u64().unwrap_or(0)
}

async fn read_stream(mut stream: sse::SseStream, mut out: Out<'_>, model: &Model) -> Streamed {
    out.start();
    let compat = Compat::of(model);
    let mut text_block: Option<usize> = None;
    let mut thinking_block: Option<usize> = None;
    // tool-call `index` (or id) -> content index
    let mut tools: HashMap<String, usize> = HashMap::new();
    let mut last_tool: Option<usize> = None;
    let mut finish: Option<String> = None;
    let mut saw_data = false;
    loop {
        let ev = match stream.next().await {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(f) => return out.fail(f),
        };
        let data = ev.data.trim();
        if data == "[DONE]" {
            saw_data = true;
            stream.finish().await;
            break;
        }
        if data.is_empty() {
            continue;
        }
        // A malformed event is an error, never skipped: skipping loses a
        // word of the answer or a piece of a tool call.
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return out.fail(Failure::Transport(sse::OPENAI_MALFORMED.into()));
        };
        saw_data = true;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let mut msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            if let Some(raw) = super::at(err, &["metadata", "raw"]).and_then(Value::as_str) {
                msg.push('\n');
                msg.push_str(raw);
            }
            return out.fail(Failure::Error(msg));
        }
        let id = chunk
            .get("id")
            .and_then(Value::as_str)
            .filter(|_| !out.msg.extra.contains_key("responseId"));
        out.set_response(id, chunk.get("model").and_then(Value::as_str));
        let usage = chunk
            .get("usage")
            .filter(|u| u.is_object())
            .or_else(|| super::at(&chunk, &["choices", "0", "usage"]).filter(|u| u.is_object()));
        if let Some(u) = usage {
            let prompt = u64_at(u, &["prompt_tokens"]);
            let cached = u64_at(u, &["prompt_tokens_details", "cached_tokens"]);
            let output = u64_at(u, &["completion_tokens"]);
            let input = prompt.saturating_sub(cached);
            let reasoning = u64_at(u, &["completion_tokens_details", "reasoning_tokens"]);
            out.msg.usage.reasoning = Some(crate::format::Num::int(reasoning));
            out.msg.usage.cost.total_from_provider = Some(Value::Bool(false));
            out.set_usage(input, output, cached, 0, input + output + cached);
        }
        let Some(choice) = super::at(&chunk, &["choices", "0"]) else {
            continue;
        };
        if let Some(fr) = choice.get("finish_reason").and_then(Value::as_str) {
            finish = Some(fr.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            continue;
        };
        for field in ["reasoning_content", "reasoning", "reasoning_text"] {
            if let Some(t) = delta
                .get(field)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                let i = match thinking_block {
                    Some(i) => i,
                    None => {
                        let i = out.push_thinking(Some(field));
                        thinking_block = Some(i);
                        i
                    }
                };
                out.delta(i, t);
                break;
            }
        }
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            let i = match text_block {
                Some(i) => i,
                None => {
                    let i = out.push_text();
                    text_block = Some(i);
                    i
                }
            };
            out.delta(i, t);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let key = match call.get("index").and_then(Value::as_u64) {
                    Some(n) => format!("#{n}"),
                    None => match id {
                        Some(id) => format!("id:{id}"),
                        None => match last_tool {
                            Some(i) => tools
                                .iter()
                                .find(|(_, v)| **v == i)
                                .map(|(k, _)| k.clone())
                                .unwrap_or_default(),
                            None => "#0".into(),
                        },
                    },
                };
                let name = super::at(call, &["function", "name"]).and_then(Value::as_str);
                let args = super::at(call, &["function", "arguments"])
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let i = match tools.get(&key) {
                    Some(&i) => {
                        if let Some(tc) = out.tool_mut(i) {
                            if let Some(id) = id {
                                tc.id = id.to_string();
                            }
                            if let Some(n) = name.filter(|n| !n.is_empty()) {
                                tc.name = n.to_string();
                            }
                        }
                        i
                    }
                    None => {
                        let i = out.push_tool(id.unwrap_or(""), name.unwrap_or(""), "");
                        tools.insert(key, i);
                        i
                    }
                };
                last_tool = Some(i);
                out.tool_delta(i, args);
            }
        }
        if let Some(details) = delta.get("reasoning_details").and_then(Value::as_array) {
            for d in details {
                if d.get("type").and_then(Value::as_str) != Some("reasoning.encrypted") {
                    continue;
                }
                let Some(id) = d.get("id").and_then(Value::as_str) else {
                    continue;
                };
                let sig = d.to_string();
                for &i in tools.values() {
                    if let Some(tc) = out.tool_mut(i) {
                        if tc.id == id {
                            tc.extra
                                .insert("thoughtSignature".into(), sig.clone().into());
                        }
                    }
                }
            }
        }
    }
    if !saw_data {
        if let Some(e) = stream.foreign_body_error() {
            return out.fail(Failure::Error(format!(
                "Stream ended without finish_reason: {e}"
            )));
        }
    }
    for i in 0..out.msg.content.len() {
        out.end(i);
    }
    let reason = match finish.as_deref() {
        Some(fr) => {
            out.msg.extra.insert("rawStopReason".into(), fr.into());
            match fr {
                "stop" | "end" => "stop",
                "length" => "length",
                "tool_calls" | "function_call" => "toolUse",
                other => {
                    return out.fail(Failure::Error(format!("Provider finish_reason: {other}")))
                }
            }
        }
        None if !compat.supports_finish_reason => {
            if out.has_tool_calls() {
                "toolUse"
            } else {
                "stop"
            }
        }
        None => {
            return out.fail(Failure::Transport(
                "Stream ended without finish_reason".into(),
            ))
        }
    };
    out.done(reason)
}
