//! The token estimate pi uses where no usage stands for the context: a
//! message's characters (as JavaScript counts them) / 4, rounded up, an
//! image counting as 4,800 characters; and the context size a response's
//! usage reports.

use crate::format::{AgentMessage, ContentBlock, Usage, UserContent};

/// The characters an image counts for in the estimate.
const IMAGE_CHARS: u64 = 4800;
/// Length as JavaScript counts it (UTF-16 code units).
pub(crate) fn js_len(s: &str) -> u64 {
    s.encode_utf16().count() as u64
}

fn blocks_chars(blocks: &[ContentBlock]) -> u64 {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => js_len(&t.text),
            ContentBlock::Image(_) => IMAGE_CHARS,
            _ => 0,
        })
        .sum()
}

fn user_chars(c: &UserContent) -> u64 {
    match c {
        UserContent::Text(s) => js_len(s),
        UserContent::Blocks(b) => blocks_chars(b),
    }
}

/// The estimated tokens of one message: its characters / 4, rounded up.
pub fn estimate_tokens(m: &AgentMessage) -> u64 {
    let chars = match m {
        AgentMessage::User(u) => user_chars(&u.content),
        AgentMessage::Assistant(a) => a
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::Text(t) => js_len(&t.text),
                ContentBlock::Thinking(t) => js_len(&t.thinking),
                ContentBlock::ToolCall(c) => {
                    js_len(&c.name)
                        + js_len(&serde_json::to_string(&c.arguments).unwrap_or_default())
                }
                _ => 0,
            })
            .sum(),
        AgentMessage::ToolResult(t) => blocks_chars(&t.content),
        AgentMessage::Custom(c) => user_chars(&c.content),
        AgentMessage::BashExecution(b) => js_len(&b.command) + js_len(&b.output),
        AgentMessage::BranchSummary(b) => js_len(&b.summary),
        AgentMessage::CompactionSummary(c) => js_len(&c.summary),
        AgentMessage::System(s) => {
            let mut n = user_chars(&s.content);
            for v in s.sections.iter().flat_map(|m| m.values()) {
                if let Some(t) = v.as_str() {
                    n += js_len(t);
                }
            }
            if let Some(t) = &s.tools_added {
                n += js_len(&serde_json::to_string(t).unwrap_or_default());
            }
            n
        }
        AgentMessage::Unknown(_) => 0,
    };
    chars.div_ceil(4)
}

/// The context tokens a response's usage reports (`totalTokens`, else the
/// sum of its parts).
pub fn usage_tokens(u: &Usage) -> u64 {
    match u.total_tokens.as_u64() {
        0 => u.input.as_u64() + u.output.as_u64() + u.cache_read.as_u64() + u.cache_write.as_u64(),
        t => t,
    }
}

/// The usage of an assistant message that can stand for the context size
/// (not aborted, not an error, non-zero).
pub(crate) fn valid_usage(m: &AgentMessage) -> Option<u64> {
    match m {
        AgentMessage::Assistant(a) if a.stop_reason != "aborted" && a.stop_reason != "error" => {
            Some(usage_tokens(&a.usage)).filter(|&t| t > 0)
        }
        _ => None,
    }
}
