//! The messages the model sees for a leaf, built the way pi 1.6.0's
//! `buildSessionContext` does: walk leaf → root, apply the latest compaction
//! (its system checkpoint, the summary, the kept tail, everything after),
//! turn `custom_message` and `branch_summary` entries into messages, skip
//! `custom`, `label`, `session_info`, `usage` and settings entries, and apply
//! `context_edit` replacements.
//!
//! The context borrows the session's messages ([`MessageRef::Borrowed`]);
//! only messages made for the context (summaries, custom messages, edited
//! ones) are built, so a context of a million messages costs a pointer
//! each, not a second copy of the session.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::format::message::{
    BranchSummaryMessage, CompactionSummaryMessage, CustomMessage, MessageRef,
};
use crate::format::{AgentMessage, ContentBlock, Entry, Num, UserContent};
use crate::timefmt::parse_iso_ms;

use super::Session;

/// The model context of one leaf (borrowing from its session).
#[derive(Debug, Clone)]
pub struct SessionContext<'a> {
    /// `(source entry id, message)` in order.
    pub messages: Vec<(&'a str, MessageRef<'a>)>,
    /// The last thinking level on the branch (`"off"` when none).
    pub thinking_level: String,
    /// `(provider, modelId)` from the last model change or assistant message.
    pub model: Option<(String, String)>,
}

impl Session {
    /// Builds the context for `leaf` (default: the session's leaf).
    pub fn context<'s>(&'s self, leaf: Option<&str>) -> SessionContext<'s> {
        let leaf = leaf.or_else(|| self.leaf_id());
        let path = leaf.map(|l| self.path_to(l)).unwrap_or_default();
        let (model, thinking_level) = self.model_on_path(&path);
        let mut compaction = None;
        let mut edits: HashMap<&str, &Value> = HashMap::new();
        for (pos, &i) in path.iter().enumerate() {
            match &self.entries[i] {
                Entry::Compaction(_) => compaction = Some(pos),
                Entry::ContextEdit(c) => {
                    edits.insert(c.target_id.as_str(), &c.replacement);
                }
                _ => {}
            }
        }
        let mut messages = Vec::new();
        let emit = |i: usize, skip_system: bool, messages: &mut Vec<(&'s str, MessageRef<'s>)>| {
            let e = &self.entries[i];
            let Some(msg) = entry_message(e) else { return };
            if skip_system && matches!(*msg, AgentMessage::System(_)) {
                return;
            }
            let msg = match edits.get(e.id()) {
                Some(Value::Null) => return,
                Some(Value::Object(r)) => match r.get("content") {
                    Some(c) => MessageRef::Owned(Box::new(replace_content((*msg).clone(), c))),
                    None => msg,
                },
                _ => msg,
            };
            messages.push((e.id(), msg));
        };
        match compaction {
            None => {
                for &i in &path {
                    emit(i, false, &mut messages);
                }
            }
            Some(cpos) => {
                let Entry::Compaction(c) = &self.entries[path[cpos]] else {
                    unreachable!("compaction position holds a compaction entry")
                };
                if let Some(sys) = &c.system_message {
                    messages.push((c.id.as_str(), MessageRef::Borrowed(sys)));
                }
                messages.push((
                    c.id.as_str(),
                    MessageRef::Owned(Box::new(AgentMessage::CompactionSummary(
                        CompactionSummaryMessage {
                            summary: c.summary.clone(),
                            tokens_before: c.tokens_before.clone(),
                            timestamp: Num::signed(parse_iso_ms(&c.timestamp).unwrap_or(0)),
                            extra: Map::new(),
                        },
                    ))),
                ));
                let start = path[..cpos]
                    .iter()
                    .position(|&i| self.entries[i].id() == c.first_kept_entry_id);
                if let Some(start) = start {
                    for &i in &path[start..cpos] {
                        emit(i, true, &mut messages);
                    }
                }
                for &i in &path[cpos + 1..] {
                    emit(i, false, &mut messages);
                }
            }
        }
        SessionContext {
            messages,
            thinking_level,
            model,
        }
    }
}

impl Session {
    /// `(provider, modelId)` of the last model change or assistant message
    /// on `path` (entry positions, root first), and the last thinking level
    /// (`"off"` when none), without building any message.
    pub fn model_on_path(&self, path: &[usize]) -> (Option<(String, String)>, String) {
        let mut thinking_level = None;
        let mut model = None;
        for &i in path.iter().rev() {
            match &self.entries[i] {
                Entry::ThinkingLevelChange(t) if thinking_level.is_none() => {
                    thinking_level = Some(t.thinking_level.clone())
                }
                Entry::ModelChange(m) if model.is_none() => {
                    model = Some((m.provider.clone(), m.model_id.clone()))
                }
                Entry::Message(m) if model.is_none() => {
                    if let AgentMessage::Assistant(a) = &m.message {
                        model = Some((a.provider.clone(), a.model.clone()));
                    }
                }
                _ => {}
            }
            if model.is_some() && thinking_level.is_some() {
                break;
            }
        }
        (model, thinking_level.unwrap_or_else(|| "off".into()))
    }
}

/// The context message an entry contributes, if any.
pub(crate) fn entry_message(e: &Entry) -> Option<MessageRef<'_>> {
    let built = |m| Some(MessageRef::Owned(Box::new(m)));
    match e {
        Entry::Message(m) => Some(MessageRef::Borrowed(&m.message)),
        Entry::CustomMessage(c) => built(AgentMessage::Custom(Box::new(CustomMessage {
            custom_type: c.custom_type.clone(),
            content: c.content.clone(),
            display: c.display,
            details: c.details.clone(),
            timestamp: Num::signed(parse_iso_ms(&c.timestamp).unwrap_or(0)),
            extra: Map::new(),
        }))),
        Entry::BranchSummary(b) if !b.summary.is_empty() => {
            built(AgentMessage::BranchSummary(BranchSummaryMessage {
                summary: b.summary.clone(),
                from_id: b.from_id.clone(),
                timestamp: Num::signed(parse_iso_ms(&b.timestamp).unwrap_or(0)),
                extra: Map::new(),
            }))
        }
        _ => None,
    }
}

/// Applies a `context_edit` content replacement, keeping role and metadata.
pub(crate) fn replace_content(msg: AgentMessage, content: &Value) -> AgentMessage {
    let as_user = || serde_json::from_value::<UserContent>(content.clone()).ok();
    let as_blocks = || match content {
        Value::String(s) => Some(vec![ContentBlock::text(s.clone())]),
        other => serde_json::from_value::<Vec<ContentBlock>>(other.clone()).ok(),
    };
    match msg {
        AgentMessage::User(mut m) => {
            if let Some(c) = as_user() {
                m.content = c;
            }
            AgentMessage::User(m)
        }
        AgentMessage::Custom(mut m) => {
            if let Some(c) = as_user() {
                m.content = c;
            }
            AgentMessage::Custom(m)
        }
        AgentMessage::Assistant(mut m) => {
            if let Some(b) = as_blocks() {
                m.content = b;
            }
            AgentMessage::Assistant(m)
        }
        AgentMessage::ToolResult(mut m) => {
            if let Some(b) = as_blocks() {
                m.content = b;
            }
            AgentMessage::ToolResult(m)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn session(lines: &[&str]) -> Session {
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
        );
        for l in lines {
            text.push('\n');
            text.push_str(l);
        }
        text.push('\n');
        Session::parse(Path::new("t.jsonl"), text.as_bytes()).unwrap()
    }

    fn roles(s: &Session, leaf: Option<&str>) -> Vec<String> {
        s.context(leaf)
            .messages
            .iter()
            .map(|(id, m)| format!("{id}:{}:{}", m.role(), m.text()))
            .collect()
    }

    #[test]
    fn compaction_keeps_tail_and_after() {
        let s = session(&[
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}"#,
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"two","timestamp":2}}"#,
            r#"{"type":"custom","customType":"x","data":1,"id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z"}"#,
            r#"{"type":"compaction","id":"d","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z","summary":"S","firstKeptEntryId":"b","tokensBefore":9}"#,
            r#"{"type":"custom_message","customType":"x","content":"cm","display":true,"id":"e","parentId":"d","timestamp":"2026-01-01T00:00:05.000Z"}"#,
            r#"{"type":"thinking_level_change","id":"f","parentId":"e","timestamp":"2026-01-01T00:00:06.000Z","thinkingLevel":"high"}"#,
        ]);
        assert_eq!(
            roles(&s, None),
            ["d:compactionSummary:S", "b:user:two", "e:custom:cm"]
        );
        assert_eq!(s.context(None).thinking_level, "high");
        assert_eq!(roles(&s, Some("a")), ["a:user:one"]);
    }

    #[test]
    fn context_messages_are_the_sessions_own_not_copies() {
        let s = session(&[
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}"#,
            r#"{"type":"branch_summary","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","fromId":"a","summary":"tried"}"#,
            r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"two","timestamp":3}}"#,
        ]);
        let ctx = s.context(None);
        let own = |i: usize| match &s.entries[i] {
            Entry::Message(m) => &m.message as *const AgentMessage,
            _ => unreachable!("entry {i} is a message"),
        };
        assert!(matches!(ctx.messages[0].1, MessageRef::Borrowed(_)));
        assert!(std::ptr::eq(&*ctx.messages[0].1, own(0)));
        assert!(
            matches!(ctx.messages[1].1, MessageRef::Owned(_)),
            "made for the context"
        );
        assert!(std::ptr::eq(&*ctx.messages[2].1, own(2)));
    }

    #[test]
    fn branch_summary_and_context_edit() {
        let s = session(&[
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}"#,
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"abandoned","timestamp":2}}"#,
            r#"{"type":"branch_summary","id":"c","parentId":"a","timestamp":"2026-01-01T00:00:03.000Z","fromId":"b","summary":"tried"}"#,
            r#"{"type":"context_edit","id":"d","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z","targetId":"a","replacement":{"content":"ONE"}}"#,
        ]);
        assert_eq!(roles(&s, None), ["a:user:ONE", "c:branchSummary:tried"]);
    }
}
