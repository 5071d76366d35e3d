//! One-line descriptions of entries, for people: the role and text of a
//! message with its tool calls and error, a model or thinking change, a
//! compaction's kept entry and summary, a label, and so on. `pi-session`
//! shows them in `show` and `tree`.

use crate::format::{AgentMessage, ContentBlock, Entry};

/// One-line description of an entry, for humans.
pub fn describe(e: &Entry) -> String {
    match e {
        Entry::Message(m) => match &m.message {
            AgentMessage::Assistant(a) => {
                let calls: Vec<&str> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some(c.name.as_str()),
                        _ => None,
                    })
                    .collect();
                let text = m.message.text();
                let mut s = format!("assistant: {text}");
                if !calls.is_empty() {
                    s = format!("{s} [calls {}]", calls.join(", "));
                }
                if a.stop_reason == "error" || a.stop_reason == "aborted" {
                    s = format!(
                        "{s} [{}: {}]",
                        a.stop_reason,
                        a.error_message.as_deref().unwrap_or("")
                    );
                }
                s
            }
            AgentMessage::ToolResult(r) => format!(
                "toolResult {}{}: {}",
                r.tool_name,
                if r.is_error { " (error)" } else { "" },
                m.message.text()
            ),
            AgentMessage::System(sys) => {
                let sections: Vec<&str> = sys
                    .sections
                    .as_ref()
                    .map(|s| s.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                format!("system: sections [{}]", sections.join(", "))
            }
            other => format!("{}: {}", other.role(), other.text()),
        },
        Entry::ModelChange(m) => format!("model → {}/{}", m.provider, m.model_id),
        Entry::ThinkingLevelChange(t) => format!("thinking → {}", t.thinking_level),
        Entry::Compaction(c) => format!(
            "compaction (kept from {}): {}",
            c.first_kept_entry_id, c.summary
        ),
        Entry::BranchSummary(b) => format!("branch summary: {}", b.summary),
        Entry::Custom(c) => format!(
            "custom {}: {}",
            c.custom_type,
            c.data.as_ref().map(|d| d.to_string()).unwrap_or_default()
        ),
        Entry::CustomMessage(c) => format!(
            "custom_message {}: {}",
            c.custom_type,
            c.content.joined_text(" ")
        ),
        Entry::Label(l) => match &l.label {
            Some(t) => format!("label {} = {t}", l.target_id),
            None => format!("label {} cleared", l.target_id),
        },
        Entry::SessionInfo(i) => format!("name = {}", i.name.as_deref().unwrap_or("")),
        Entry::Usage(u) => format!("usage {} {}/{}", u.kind, u.provider, u.model),
        Entry::ContextEdit(c) => format!("context edit of {}", c.target_id),
        Entry::Unknown(m) => format!(
            "{} (unknown entry type)",
            m.get("type").and_then(|t| t.as_str()).unwrap_or("?")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_metadata_are_described() {
        let e = |v: serde_json::Value| -> Entry { serde_json::from_value(v).unwrap() };
        let reply = e(
            serde_json::json!({"type": "message", "id": "a", "parentId": null,
            "timestamp": "t", "message": {"role": "assistant", "content": [
                {"type": "text", "text": "ok"},
                {"type": "toolCall", "id": "c", "name": "read", "arguments": {}}],
            "stopReason": "error", "errorMessage": "boom", "timestamp": 1}}),
        );
        assert_eq!(describe(&reply), "assistant: ok [calls read] [error: boom]");
        let label = e(
            serde_json::json!({"type": "label", "id": "l", "parentId": "a",
            "timestamp": "t", "targetId": "a"}),
        );
        assert_eq!(describe(&label), "label a cleared");
    }
}
