//! How many output tokens a request may ask for: the model's `maxTokens`,
//! lowered to what its context window leaves once the request's input and a
//! fixed reserve are counted, never below one token (as pi 1.6.0 sends it on
//! every API). The input is estimated, not tokenized: about 3.5 characters
//! (UTF-16 units) a token, rounded up separately for the system prompt, each
//! message and the tool list. When the clamp leaves almost nothing, a warning
//! goes to stderr once per process, since the answer will be cut at once.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::format::message::{AgentMessage, ContentBlock};
use crate::format::tool::ToolDefinition;

use super::Request;

/// Tokens kept free of both input and output.
const RESERVE: u64 = 4096;
/// Characters a tool adds to the estimate besides its name, description
/// and parameter schema (as measured against pi 1.6.0).
const PER_TOOL_CHARS: u64 = 63;
/// Below this many tokens the clamped answer is useless, and we say so.
const USELESS_BELOW: u64 = 16;

static WARNED: AtomicBool = AtomicBool::new(false);

/// Rounded-up tokens of `chars` characters at 3.5 characters a token.
fn tokens(chars: u64) -> u64 {
    (chars * 2).div_ceil(7)
}

/// UTF-16 code units of the characters in UTF-8 `bytes`: one for each
/// character (each byte that is not a continuation byte) and one more for
/// each character outside the basic plane (each 4-byte lead byte).
fn utf16_units(bytes: &[u8]) -> u64 {
    if bytes.is_ascii() {
        return bytes.len() as u64;
    }
    bytes
        .iter()
        .map(|&b| u64::from((b as i8) >= -0x40) + u64::from(b >= 0xF0))
        .sum()
}

/// Length the way JavaScript counts it (UTF-16 code units).
fn js_len(s: &str) -> u64 {
    utf16_units(s.as_bytes())
}

/// The length [`js_len`] gives `v`'s compact JSON text, counted as it is
/// written instead of building the text.
fn json_len(v: &serde_json::Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            // Counted byte by byte: a character split across writes counts once.
            self.0 += utf16_units(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a value to a counter cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

fn blocks_chars(blocks: &[ContentBlock]) -> u64 {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => js_len(&t.text),
            ContentBlock::Thinking(t) => js_len(&t.thinking),
            ContentBlock::ToolCall(c) => js_len(&c.name) + json_len(&c.arguments),
            _ => 0,
        })
        .sum()
}

fn message_chars(m: &AgentMessage) -> u64 {
    match m {
        AgentMessage::Assistant(a) => blocks_chars(&a.content),
        AgentMessage::ToolResult(r) => blocks_chars(&r.content),
        other => js_len(&other.text()),
    }
}

fn tools_chars(tools: &[ToolDefinition]) -> u64 {
    if tools.is_empty() {
        return 0;
    }
    let each: u64 = tools
        .iter()
        .map(|t| {
            js_len(&t.name) + js_len(&t.description) + json_len(&t.parameters) + PER_TOOL_CHARS + 1
        })
        .sum();
    each + 1
}

/// Estimated input tokens of a request.
pub(crate) fn input_tokens(req: &Request) -> u64 {
    let system = req
        .system_prompt
        .as_deref()
        .map_or(0, |s| tokens(js_len(s)));
    let messages: u64 = req.messages.iter().map(|m| tokens(message_chars(m))).sum();
    system + messages + tokens(tools_chars(&req.tools))
}

/// `max_tokens` lowered to what the context window leaves (at least 1).
/// A model without a context window is not clamped.
pub(crate) fn clamp(req: &Request, max_tokens: u64) -> u64 {
    let window = req.model.context_window;
    if window == 0 {
        return max_tokens;
    }
    let input = input_tokens(req);
    let left = window.saturating_sub(RESERVE).saturating_sub(input).max(1);
    let out = max_tokens.min(left);
    if out < max_tokens.min(USELESS_BELOW) && !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!(
            "warning: model {} has a {window}-token context window; about {input} tokens of input and \
             {RESERVE} reserved leave {out} output token{} (as pi does), so the answer will be cut short",
            req.model.id,
            if out == 1 { "" } else { "s" }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_at_three_and_a_half_characters() {
        assert_eq!(tokens(0), 0);
        assert_eq!(tokens(1), 1);
        assert_eq!(tokens(7), 2);
        assert_eq!(tokens(8), 3);
        assert_eq!(tokens(3500), 1000);
        assert_eq!(tokens(1616), 462);
    }

    #[test]
    fn lengths_count_utf16_units() {
        for s in [
            "",
            "abc",
            "h\u{e9}llo",
            "\u{20ac}\u{1f600}x",
            "\u{10ffff}\u{7f}\u{80}",
        ] {
            assert_eq!(js_len(s), s.encode_utf16().count() as u64, "{s:?}");
        }
        let v = serde_json::json!({"a": "\u{1f600}\"\n", "b": [1.5, null, "\u{e9}"]});
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(json_len(&v), text.encode_utf16().count() as u64);
    }

    #[test]
    fn tool_list_counts_each_schema_plus_overhead() {
        let t = |n: &str, len: usize| ToolDefinition {
            name: n.into(),
            description: "d".repeat(len),
            parameters: serde_json::json!({}),
            extra: Default::default(),
        };
        assert_eq!(tools_chars(&[]), 0);
        // name 4 + description 10 + "{}" 2 + 63 + 1, then the closing 1
        assert_eq!(tools_chars(&[t("read", 10)]), 81);
        assert_eq!(tools_chars(&[t("read", 10), t("bash", 10)]), 161);
    }
}
