//! Cross-provider history transformation, run before every request
//! (pi's `transformMessages`).
//!
//! A conversation may mix models: thinking signatures, text signatures and
//! tool-call ids from one vendor are meaningless (or rejected) by another.
//! Pass 1 rewrites assistant content from other models and renames their
//! tool-call ids through the target API's rules; pass 2 drops failed
//! assistant turns and answers tool calls that never got a result, because
//! every API rejects a tool call without its result.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::format::message::{AssistantMessage, TextBlock, ToolResultMessage};
use crate::format::model::Model;
use crate::format::{AgentMessage, ContentBlock, Num, UserContent};

/// Text of the synthetic result given to a tool call that has none.
pub const NO_RESULT: &str = "No result provided";

/// What a model without image input gets instead of a user message's
/// images (one placeholder for each run of adjacent images).
pub const IMAGE_OMITTED: &str = "(image omitted: model does not support images)";
/// The same for a tool result's images.
pub const TOOL_IMAGE_OMITTED: &str = "(tool image omitted: model does not support images)";

/// `blocks` with each run of adjacent images replaced by one `placeholder`
/// text block.
fn without_images(blocks: &[ContentBlock], placeholder: &str) -> Vec<ContentBlock> {
    let mut out: Vec<ContentBlock> = Vec::with_capacity(blocks.len());
    let mut in_run = false;
    for b in blocks {
        if matches!(b, ContentBlock::Image(_)) {
            if !in_run {
                out.push(ContentBlock::text(placeholder));
            }
            in_run = true;
        } else {
            out.push(b.clone());
            in_run = false;
        }
    }
    out
}

/// Renames a tool-call id from another model for the target API.
pub type IdNormalizer<'a> = &'a dyn Fn(&str) -> String;

/// True when `m` was produced by exactly `model` (provider, API and id).
pub fn same_model(m: &AssistantMessage, model: &Model) -> bool {
    m.provider == model.provider && m.api == model.api && m.model == model.id
}

/// Replaces every character outside `[A-Za-z0-9_-]` by `_` and keeps at
/// most `max` characters.
pub fn sanitize_id(id: &str, max: usize) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(max)
        .collect()
}

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn extra_str<'a>(extra: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    extra.get(key).and_then(Value::as_str)
}

/// Whether pass 1 drops a thinking block of a message from the target
/// model itself: one that is blank, unsigned and not redacted.
fn drops_thinking(blocks: &[ContentBlock]) -> bool {
    blocks.iter().any(|b| match b {
        ContentBlock::Thinking(t) => {
            t.extra.get("redacted").and_then(Value::as_bool) != Some(true)
                && extra_str(&t.extra, "thinkingSignature").is_none_or(str::is_empty)
                && is_blank(&t.thinking)
        }
        _ => false,
    })
}

/// The conversation as the target `model` should see it.
///
/// Messages that need no change are borrowed, not copied: a long
/// conversation with the same model costs no copy per request.
pub fn transform_messages<'a, M: std::borrow::Borrow<AgentMessage>>(
    messages: &'a [M],
    model: &Model,
    normalize_id: IdNormalizer<'_>,
) -> Vec<Cow<'a, AgentMessage>> {
    // Pass 1: content of other models, id renames, images a model cannot
    // see.
    let vision = model.input.iter().any(|i| i == "image");
    let has_image = |blocks: &[ContentBlock]| {
        !vision && blocks.iter().any(|b| matches!(b, ContentBlock::Image(_)))
    };
    let mut renamed: HashMap<String, String> = HashMap::new();
    let mut pass1 = Vec::with_capacity(messages.len());
    for msg in messages {
        let msg: &AgentMessage = msg.borrow();
        match msg {
            AgentMessage::Assistant(a) if same_model(a, model) && !drops_thinking(&a.content) => {
                pass1.push(Cow::Borrowed(msg));
            }
            AgentMessage::Assistant(a) => {
                let same = same_model(a, model);
                let mut out = a.clone();
                out.content = Vec::with_capacity(a.content.len());
                for block in &a.content {
                    match block {
                        ContentBlock::Thinking(t) => {
                            let redacted =
                                t.extra.get("redacted").and_then(Value::as_bool) == Some(true);
                            let signed = extra_str(&t.extra, "thinkingSignature")
                                .is_some_and(|s| !s.is_empty());
                            if redacted {
                                if same {
                                    out.content.push(block.clone());
                                }
                            } else if same && signed {
                                out.content.push(block.clone());
                            } else if is_blank(&t.thinking) {
                            } else if same {
                                out.content.push(block.clone());
                            } else {
                                out.content.push(ContentBlock::text(t.thinking.clone()));
                            }
                        }
                        ContentBlock::Text(t) => {
                            if same {
                                out.content.push(block.clone());
                            } else {
                                let mut extra = t.extra.clone();
                                extra.shift_remove("textSignature");
                                out.content.push(ContentBlock::Text(TextBlock {
                                    text: t.text.clone(),
                                    extra,
                                }));
                            }
                        }
                        ContentBlock::ToolCall(tc) if !same => {
                            let mut tc = tc.clone();
                            tc.extra.shift_remove("thoughtSignature");
                            let new_id = normalize_id(&tc.id);
                            if new_id != tc.id {
                                renamed.insert(tc.id.clone(), new_id.clone());
                                tc.id = new_id;
                            }
                            out.content.push(ContentBlock::ToolCall(tc));
                        }
                        other => out.content.push(other.clone()),
                    }
                }
                pass1.push(Cow::Owned(AgentMessage::Assistant(out)));
            }
            AgentMessage::ToolResult(r)
                if !renamed.contains_key(&r.tool_call_id) && !has_image(&r.content) =>
            {
                pass1.push(Cow::Borrowed(msg));
            }
            AgentMessage::ToolResult(r) => {
                let mut r = r.clone();
                if let Some(n) = renamed.get(&r.tool_call_id) {
                    r.tool_call_id = n.clone();
                }
                if has_image(&r.content) {
                    r.content = without_images(&r.content, TOOL_IMAGE_OMITTED);
                }
                pass1.push(Cow::Owned(AgentMessage::ToolResult(r)));
            }
            AgentMessage::User(u) => match &u.content {
                UserContent::Blocks(blocks) if has_image(blocks) => {
                    let mut u = u.clone();
                    u.content = UserContent::Blocks(without_images(blocks, IMAGE_OMITTED));
                    pass1.push(Cow::Owned(AgentMessage::User(u)));
                }
                _ => pass1.push(Cow::Borrowed(msg)),
            },
            other => pass1.push(Cow::Borrowed(other)),
        }
    }

    // Pass 2: failed turns out, orphaned tool calls answered.
    let mut out = Vec::with_capacity(pass1.len());
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let flush = |pending: &mut Vec<(String, String)>,
                 answered: &mut HashSet<String>,
                 out: &mut Vec<Cow<'a, AgentMessage>>| {
        for (id, name) in pending.drain(..) {
            if !answered.contains(&id) {
                out.push(Cow::Owned(AgentMessage::ToolResult(Box::new(
                    ToolResultMessage {
                        tool_call_id: id,
                        tool_name: name,
                        content: vec![ContentBlock::text(NO_RESULT)],
                        details: None,
                        is_error: true,
                        duration_ms: None,
                        timestamp: Num::signed(crate::timefmt::now_ms()),
                        extra: Map::new(),
                    },
                ))));
            }
        }
        answered.clear();
    };
    for msg in pass1 {
        match &*msg {
            AgentMessage::Assistant(a) => {
                flush(&mut pending, &mut answered, &mut out);
                if a.stop_reason == "error" || a.stop_reason == "aborted" {
                    continue;
                }
                for b in &a.content {
                    if let ContentBlock::ToolCall(tc) = b {
                        pending.push((tc.id.clone(), tc.name.clone()));
                    }
                }
                out.push(msg);
            }
            AgentMessage::ToolResult(r) => {
                answered.insert(r.tool_call_id.clone());
                out.push(msg);
            }
            AgentMessage::User(_) => {
                flush(&mut pending, &mut answered, &mut out);
                out.push(msg);
            }
            _ => out.push(msg),
        }
    }
    out
}

/// Anthropic: `[A-Za-z0-9_-]`, at most 64 characters.
pub fn anthropic_id(id: &str) -> String {
    sanitize_id(id, 64)
}

/// Chat Completions: a Responses-style `call|item` id keeps its call part
/// (sanitised, ≤ 40); OpenAI itself also caps ids at 40.
pub fn completions_id(id: &str, model: &Model) -> String {
    if let Some((call, _)) = id.split_once('|') {
        return sanitize_id(call, 40);
    }
    if model.provider == "openai" {
        return id.chars().take(40).collect();
    }
    id.to_string()
}

/// Responses (OpenAI, Codex, OpenCode): both halves of `call|item`
/// sanitised, the item prefixed `fc_` unless it starts `fc`, each ≤ 64
/// without trailing `_`.
pub fn responses_id(id: &str, model: &Model) -> String {
    let targets = ["openai", "openai-codex", "opencode"];
    if !targets.contains(&model.provider.as_str()) {
        return id.to_string();
    }
    let Some((call, item)) = id.split_once('|') else {
        return id.to_string();
    };
    let clean = |s: &str| {
        let s: String = sanitize_id(s, 64);
        s.trim_end_matches('_').to_string()
    };
    let call = clean(call);
    let mut item = sanitize_id(item, 64);
    if !item.starts_with("fc") {
        item = format!("fc_{item}");
    }
    let item = clean(&item);
    format!("{call}|{item}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model(provider: &str, api: &str, id: &str) -> Model {
        serde_json::from_value(
            json!({"id":id,"name":id,"api":api,"provider":provider,"baseUrl":"http://x"}),
        )
        .unwrap()
    }

    fn msg(v: Value) -> AgentMessage {
        serde_json::from_value(v).unwrap()
    }

    fn assistant(provider: &str, api: &str, id: &str, content: Value, stop: &str) -> AgentMessage {
        msg(
            json!({"role":"assistant","content":content,"api":api,"provider":provider,"model":id,"stopReason":stop,"timestamp":1}),
        )
    }

    #[test]
    fn images_a_model_cannot_see_become_one_placeholder_per_run() {
        let img = json!({"type":"image","data":"AAAA","mimeType":"image/png"});
        let history = vec![
            msg(
                json!({"role":"user","content":[{"type":"text","text":"a"},img,img,{"type":"text","text":"b"},img],"timestamp":1}),
            ),
            msg(
                json!({"role":"toolResult","toolCallId":"c","toolName":"read","content":[{"type":"text","text":"Read image file [image/png]"},img],"isError":false,"timestamp":1}),
            ),
        ];
        let text_only = model("mock", "openai-completions", "m");
        let out = serde_json::to_value(transform_messages(&history, &text_only, &|id: &str| {
            id.to_string()
        }))
        .unwrap();
        let texts = |v: &Value| -> Vec<String> {
            v["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["text"].as_str().unwrap_or("IMAGE").to_string())
                .collect()
        };
        assert_eq!(texts(&out[0]), ["a", IMAGE_OMITTED, "b", IMAGE_OMITTED]);
        assert_eq!(
            texts(&out[1]),
            ["Read image file [image/png]", TOOL_IMAGE_OMITTED]
        );
        let mut vision = text_only.clone();
        vision.input = vec!["text".into(), "image".into()];
        let out = serde_json::to_value(transform_messages(&history, &vision, &|id: &str| {
            id.to_string()
        }))
        .unwrap();
        assert_eq!(texts(&out[0]), ["a", "IMAGE", "IMAGE", "b", "IMAGE"]);
    }

    #[test]
    fn foreign_thinking_becomes_text_and_ids_are_renamed() {
        let target = model("anthropic", "anthropic-messages", "claude");
        let history = vec![
            msg(json!({"role":"user","content":"hi","timestamp":1})),
            assistant(
                "openai",
                "openai-responses",
                "gpt-5",
                json!([
                    {"type":"thinking","thinking":"plan","thinkingSignature":"{}"},
                    {"type":"thinking","thinking":"  "},
                    {"type":"text","text":"ok","textSignature":"sig"},
                    {"type":"toolCall","id":"call_1|fc_1+x","name":"read","arguments":{},"thoughtSignature":"s"}
                ]),
                "toolUse",
            ),
            msg(
                json!({"role":"toolResult","toolCallId":"call_1|fc_1+x","toolName":"read","content":[],"isError":false,"timestamp":1}),
            ),
        ];
        let out = transform_messages(&history, &target, &anthropic_id);
        let v = serde_json::to_value(&out).unwrap();
        assert_eq!(
            v[1]["content"],
            json!([
                {"type":"text","text":"plan"},
                {"type":"text","text":"ok"},
                {"type":"toolCall","id":"call_1_fc_1_x","name":"read","arguments":{}}
            ])
        );
        assert_eq!(v[2]["toolCallId"], "call_1_fc_1_x");
    }

    #[test]
    fn same_model_keeps_signatures() {
        let target = model("anthropic", "anthropic-messages", "claude");
        let history = vec![assistant(
            "anthropic",
            "anthropic-messages",
            "claude",
            json!([{"type":"thinking","thinking":"","thinkingSignature":"abc"},{"type":"thinking","thinking":"x","thinkingSignature":"r","redacted":true}]),
            "stop",
        )];
        let out = transform_messages(&history, &target, &anthropic_id);
        assert!(
            matches!(out[0], Cow::Borrowed(_)),
            "nothing to change: not copied"
        );
        let out: Vec<AgentMessage> = out.into_iter().map(Cow::into_owned).collect();
        assert_eq!(out, history);
        // A blank unsigned thinking block is dropped: a changed copy.
        let blank = vec![assistant(
            "anthropic",
            "anthropic-messages",
            "claude",
            json!([{"type":"thinking","thinking":" "},{"type":"text","text":"t"}]),
            "stop",
        )];
        let out = transform_messages(&blank, &target, &anthropic_id);
        assert!(matches!(out[0], Cow::Owned(_)));
        assert_eq!(
            serde_json::to_value(&out[0]).unwrap()["content"],
            json!([{"type":"text","text":"t"}])
        );
    }

    #[test]
    fn errors_dropped_and_orphans_answered() {
        let target = model("p", "openai-completions", "m");
        let history = vec![
            msg(json!({"role":"user","content":"hi","timestamp":1})),
            assistant(
                "p",
                "openai-completions",
                "m",
                json!([{"type":"toolCall","id":"a","name":"read","arguments":{}},{"type":"toolCall","id":"b","name":"ls","arguments":{}}]),
                "toolUse",
            ),
            msg(
                json!({"role":"toolResult","toolCallId":"a","toolName":"read","content":[],"isError":false,"timestamp":1}),
            ),
            assistant(
                "p",
                "openai-completions",
                "m",
                json!([{"type":"text","text":"half"}]),
                "error",
            ),
            msg(json!({"role":"user","content":"again","timestamp":2})),
            assistant(
                "p",
                "openai-completions",
                "m",
                json!([{"type":"toolCall","id":"c","name":"read","arguments":{}}]),
                "toolUse",
            ),
        ];
        let out = transform_messages(&history, &target, &|s: &str| s.to_string());
        let roles: Vec<&str> = out.iter().map(|m| m.role()).collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "toolResult",
                "toolResult",
                "user",
                "assistant"
            ]
        );
        let AgentMessage::ToolResult(r) = &*out[3] else {
            panic!()
        };
        assert_eq!(
            (r.tool_call_id.as_str(), r.tool_name.as_str(), r.is_error),
            ("b", "ls", true)
        );
        assert_eq!(r.content, vec![ContentBlock::text(NO_RESULT)]);
    }

    #[test]
    fn id_rules() {
        let oa = model("openai", "openai-responses", "gpt-5");
        assert_eq!(responses_id("call_1|item+1_", &oa), "call_1|fc_item_1");
        assert_eq!(responses_id("call_1|fc_9", &oa), "call_1|fc_9");
        assert_eq!(responses_id("toolu_1", &oa), "toolu_1");
        let cc = model("groq", "openai-completions", "x");
        assert_eq!(completions_id("call_abc|fc_def", &cc), "call_abc");
        assert_eq!(completions_id(&"x".repeat(50), &cc).len(), 50);
        assert_eq!(anthropic_id(&format!("{}!", "y".repeat(70))).len(), 64);
    }
}
