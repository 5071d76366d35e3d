//! The conversation as plain text for a summary request: `[User]:`,
//! `[Assistant]:`, `[Assistant tool calls]:` and `[Tool result]:` parts
//! separated by blank lines, thinking left out and long tool results cut.

use crate::format::{AgentMessage, ContentBlock};

use super::estimate::js_len;

/// Tool results are cut to this many characters in the summary request.
const TOOL_RESULT_CHARS: usize = 2000;
/// The conversation as plain text for the summary request: `[User]:`,
/// `[Assistant]:`, `[Assistant tool calls]:` and `[Tool result]:` parts
/// separated by blank lines; thinking is left out and long tool results
/// are cut.
pub fn serialize_conversation(messages: &[AgentMessage]) -> String {
    let llm = crate::session::llm::to_llm(messages);
    let mut parts = Vec::new();
    for m in &llm.messages {
        match &**m {
            AgentMessage::User(u) => {
                let t = u.content.joined_text("");
                if !t.is_empty() {
                    parts.push(format!("[User]: {t}"));
                }
            }
            AgentMessage::Assistant(a) => {
                if a.content.iter().any(|b| matches!(b, ContentBlock::Text(_))) {
                    parts.push(format!(
                        "[Assistant]: {}",
                        crate::format::message::blocks_text(&a.content, "\n")
                    ));
                }
                let calls: Vec<String> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some(format!(
                            "{}({})",
                            c.name,
                            c.arguments
                                .as_object()
                                .map(|o| o
                                    .iter()
                                    .map(|(k, v)| format!(
                                        "{k}={}",
                                        serde_json::to_string(v).unwrap_or_default()
                                    ))
                                    .collect::<Vec<_>>()
                                    .join(", "))
                                .unwrap_or_default()
                        )),
                        _ => None,
                    })
                    .collect();
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            AgentMessage::ToolResult(t) => {
                let text = crate::format::message::blocks_text(&t.content, "");
                if !text.is_empty() {
                    parts.push(format!("[Tool result]: {}", truncate_chars(&text)));
                }
            }
            _ => {}
        }
    }
    parts.join("\n\n")
}

/// Cuts text to [`TOOL_RESULT_CHARS`] UTF-16 units, saying how much was cut.
fn truncate_chars(text: &str) -> String {
    let total = js_len(text);
    if total <= TOOL_RESULT_CHARS as u64 {
        return text.to_string();
    }
    let mut units = 0usize;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        if units + c.len_utf16() > TOOL_RESULT_CHARS {
            break;
        }
        units += c.len_utf16();
        end = i + c.len_utf8();
    }
    format!(
        "{}\n\n[... {} more characters truncated]",
        &text[..end],
        total - units as u64
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::compact::FileOps;
    use serde_json::json;

    #[test]
    fn serialization_and_file_lists() {
        let msgs: Vec<AgentMessage> = serde_json::from_value(json!([
            {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}],"timestamp":1},
            {"role":"assistant","content":[{"type":"thinking","thinking":"secret"},{"type":"text","text":"ok"},{"type":"toolCall","id":"c","name":"write","arguments":{"path":"x.txt","content":"a"}}],"stopReason":"toolUse","timestamp":2},
            {"role":"toolResult","toolCallId":"c","toolName":"write","content":[{"type":"text","text":"x".repeat(2005)}],"isError":false,"timestamp":3}
        ]))
        .unwrap();
        let text = serialize_conversation(&msgs);
        assert_eq!(
            text,
            format!(
                "[User]: hi there\n\n[Assistant]: ok\n\n[Assistant tool calls]: write(path=\"x.txt\", content=\"a\")\n\n[Tool result]: {}\n\n[... 5 more characters truncated]",
                "x".repeat(2000)
            )
        );
        let mut ops = FileOps::default();
        ops.track(&msgs[1]);
        ops.read.insert("x.txt".into());
        ops.read.insert("a.txt".into());
        assert_eq!(
            ops.suffix(),
            "\n\n<read-files>\na.txt\n</read-files>\n\n<modified-files>\nx.txt\n</modified-files>"
        );
    }
}
