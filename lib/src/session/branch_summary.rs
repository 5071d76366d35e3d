//! Branch summaries, as pi 1.6.0's tree navigation writes them: when the
//! leaf moves to another entry, the abandoned path (from the old leaf back
//! to the deepest common ancestor, compactions included) is summarised
//! through the model within a token budget, and a `branch_summary` entry
//! (`fromId` = the old leaf) records it below the new position. The model
//! call, the prompts and the file as a host are shared with compaction
//! (`session::compact`).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::format::compaction::SummarySource;
use crate::format::entry::BranchSummaryEntry;
use crate::format::message::{CompactionSummaryMessage, MessageRef};
use crate::format::{AgentMessage, Entry, Num, Usage};
use crate::timefmt::{iso_from_ms, now_ms, parse_iso_ms};

use super::compact::command::{FileHost, WriteError};
use super::compact::run::{Failure, Host};
use super::compact::{
    estimate_tokens, serialize_conversation, summarize, FileOps, SummaryModel, BRANCH_PROMPT,
};
use super::Session;

/// `branchSummary.reserveTokens` default.
pub const DEFAULT_BRANCH_RESERVE_TOKENS: u64 = 16384;
/// The context window assumed for a model that states none.
const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// The text every branch summary starts with (pi's).
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n";

/// What a branch summary covers.
#[derive(Debug, Clone)]
pub struct BranchPreparation {
    /// The leaf being left (`"root"` for an empty session).
    pub from_id: String,
    /// Where the leaf goes, and so the summary's parent: the target, or
    /// its parent when the target is a user message or a custom message
    /// (`None`: before the first entry).
    pub new_leaf: Option<String>,
    /// The text of a user/custom message target, which pi puts back into
    /// the editor.
    pub editor_text: Option<String>,
    /// The messages summarised, oldest first.
    pub messages: Vec<AgentMessage>,
    pub file_ops: FileOps,
}

/// `branchSummary.reserveTokens` from merged settings (non-negative
/// integer; anything else is an error naming the key).
pub fn reserve_tokens(settings: &crate::settings::Settings) -> Result<u64, String> {
    match settings
        .values
        .get("branchSummary")
        .and_then(|b| b.get("reserveTokens"))
    {
        None => Ok(DEFAULT_BRANCH_RESERVE_TOKENS),
        Some(v) => super::compact::safe_int(v).ok_or_else(|| {
            format!(
                "settings: \"branchSummary.reserveTokens\" must be a non-negative integer, got {v}"
            )
        }),
    }
}

impl Session {
    /// Where navigating to `target` puts the leaf, as pi's tree navigation
    /// does: a user message or a `custom_message` is re-entered rather than
    /// kept, so the leaf goes to its parent and its text is returned for the
    /// editor; any other entry becomes the leaf.
    pub fn navigation_target(&self, target: &str) -> (Option<String>, Option<String>) {
        let Some(e) = self.entries.iter().find(|e| e.id() == target) else {
            return (Some(target.to_string()), None);
        };
        let text = match e {
            Entry::Message(m) => match &m.message {
                AgentMessage::User(u) => Some(u.content.joined_text("")),
                _ => None,
            },
            Entry::CustomMessage(c) => Some(c.content.joined_text("")),
            _ => None,
        };
        match text {
            Some(t) => (e.parent_id().map(str::to_string), Some(t)),
            None => (Some(target.to_string()), None),
        }
    }

    /// The entries abandoned when the leaf moves from the current leaf to
    /// `target`: the old path after the deepest common ancestor, oldest
    /// first, turned into messages newest-first until `budget` tokens are
    /// used (tool results left out; a compaction or branch summary may
    /// still go in while under 90 % of the budget). `None` when the leaf
    /// does not move.
    pub fn prepare_branch_summary(&self, target: &str, budget: u64) -> Option<BranchPreparation> {
        let old_leaf = self.leaf_id()?.to_string();
        if old_leaf == target {
            return None;
        }
        let old_path = self.path_to(&old_leaf);
        let target_path = self.path_to(target);
        let common = old_path
            .iter()
            .zip(&target_path)
            .take_while(|(a, b)| a == b)
            .count();
        let abandoned = &old_path[common..];
        // Context edits on the abandoned path (and before it) apply.
        let mut edits: HashMap<&str, &Value> = HashMap::new();
        for &i in &old_path {
            if let Entry::ContextEdit(c) = &self.entries[i] {
                edits.insert(c.target_id.as_str(), &c.replacement);
            }
        }
        let mut file_ops = FileOps::default();
        let mut picked = Vec::new();
        let mut total = 0u64;
        for &i in abandoned.iter().rev() {
            let e = &self.entries[i];
            let msg = match e {
                Entry::Compaction(c) => {
                    Some(AgentMessage::CompactionSummary(CompactionSummaryMessage {
                        summary: c.summary.clone(),
                        tokens_before: c.tokens_before.clone(),
                        timestamp: Num::signed(parse_iso_ms(&c.timestamp).unwrap_or(0)),
                        extra: Map::new(),
                    }))
                }
                _ => super::context::entry_message(e).map(MessageRef::into_owned),
            };
            let msg = match (edits.get(e.id()), msg) {
                (Some(Value::Null), _) | (_, None) => continue,
                (Some(Value::Object(r)), Some(m)) => match r.get("content") {
                    Some(c) => super::context::replace_content(m, c),
                    None => m,
                },
                (_, Some(m)) => m,
            };
            if matches!(msg, AgentMessage::ToolResult(_) | AgentMessage::System(_)) {
                continue;
            }
            let t = estimate_tokens(&msg);
            let is_summary = matches!(
                msg,
                AgentMessage::CompactionSummary(_) | AgentMessage::BranchSummary(_)
            );
            if total + t > budget {
                if is_summary && (total as f64) < 0.9 * budget as f64 {
                    picked.push(msg);
                }
                break;
            }
            total += t;
            picked.push(msg);
        }
        picked.reverse();
        for &i in abandoned {
            if let Entry::BranchSummary(b) = &self.entries[i] {
                if b.from_hook != Some(true) {
                    file_ops.absorb(b.details.as_ref());
                }
            }
        }
        for m in &picked {
            file_ops.track(m);
        }
        let (new_leaf, editor_text) = self.navigation_target(target);
        Some(BranchPreparation {
            from_id: old_leaf,
            new_leaf,
            editor_text,
            messages: picked,
            file_ops,
        })
    }
}

/// A written branch summary, ready to become an entry.
#[derive(Debug, Clone)]
pub struct BranchSummaryResult {
    pub from_id: String,
    pub summary: String,
    pub details: Value,
    pub usage: Usage,
}

/// Summarises a prepared branch through the model; `instructions` adds a
/// focus. `No content to summarize` when nothing is left to summarise.
pub async fn summarize_branch(
    prep: &BranchPreparation,
    m: &SummaryModel,
    instructions: Option<&str>,
) -> Result<BranchSummaryResult, String> {
    if prep.messages.is_empty() {
        return Err("No content to summarize".into());
    }
    let mut user = format!(
        "<conversation>\n{}\n</conversation>\n\n{BRANCH_PROMPT}",
        serialize_conversation(&prep.messages)
    );
    if let Some(c) = instructions.filter(|c| !c.is_empty()) {
        user.push_str(&format!("\n\nAdditional focus: {c}"));
    }
    let s = summarize(m, user, "Branch summarization").await?;
    Ok(BranchSummaryResult {
        from_id: prep.from_id.clone(),
        summary: format!(
            "{BRANCH_SUMMARY_PREFIX}{}{}",
            s.text,
            prep.file_ops.suffix()
        ),
        details: prep.file_ops.details(),
        usage: s.usage,
    })
}

impl BranchSummaryResult {
    /// The `branch_summary` entry pi 1.6.0 writes below `parent`.
    pub fn entry(&self, id: String, parent: Option<String>, now_ms: i64) -> Entry {
        Entry::BranchSummary(Box::new(BranchSummaryEntry {
            id,
            parent_id: parent,
            timestamp: iso_from_ms(now_ms),
            from_id: self.from_id.clone(),
            summary: self.summary.clone(),
            details: Some(self.details.clone()),
            usage: Some(self.usage.clone()),
            from_hook: Some(false),
            extra: Map::new(),
        }))
    }
}

/// Writes the branch summary of `prep` into the session file of `host`
/// (`pi-session branch --summarize`): the summary call, its retries
/// reported as they come, then the `branch_summary` entry below the new
/// position, appended only while the leaf has not moved. The result and
/// the entries written.
pub async fn write_branch_summary(
    host: &mut FileHost<'_>,
    prep: &BranchPreparation,
    model: &mut SummaryModel,
    instructions: Option<&str>,
) -> Result<(BranchSummaryResult, Vec<Entry>), Failure<WriteError>> {
    let mut retries = model.report_retries();
    let job = summarize_branch(prep, model, instructions);
    let result = match host
        .wait(job, &mut retries, SummarySource::BranchSummary)
        .await
    {
        Ok(r) => r,
        Err(_) if model.cancel.is_cancelled() => return Err(Failure::Cancelled),
        Err(msg) => return Err(Failure::Summary(msg)),
    };
    let written = host
        .append(&mut |s: &Session| result.entry(s.fresh_id(), prep.new_leaf.clone(), now_ms()))
        .map_err(Failure::Write)?;
    Ok((result, written))
}

/// The token budget of a branch summary for a model with `context_window`.
pub fn budget(context_window: u64, reserve_tokens: u64) -> u64 {
    let w = if context_window == 0 {
        DEFAULT_CONTEXT_WINDOW
    } else {
        context_window
    };
    w.saturating_sub(reserve_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn abandoned_path_and_entry_shape() {
        let head = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;
        let lines = [
            head,
            r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"common","timestamp":1}}"#,
            r#"{"type":"message","id":"u2","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"explore","timestamp":2}}"#,
            r#"{"type":"message","id":"a2","parentId":"u2","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"looked"},{"type":"toolCall","id":"c","name":"read","arguments":{"path":"f.rs"}}],"stopReason":"toolUse","timestamp":3}}"#,
            r#"{"type":"message","id":"t2","parentId":"a2","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"toolResult","toolCallId":"c","toolName":"read","content":[{"type":"text","text":"body"}],"isError":false,"timestamp":4}}"#,
        ];
        let s = Session::parse(Path::new("t.jsonl"), (lines.join("\n") + "\n").as_bytes()).unwrap();
        assert!(s.prepare_branch_summary("t2", 1000).is_none());
        let p = s.prepare_branch_summary("u1", 1000).unwrap();
        assert_eq!(p.from_id, "t2");
        let texts: Vec<String> = p.messages.iter().map(|m| m.text()).collect();
        assert_eq!(texts, ["explore", "looked"]);
        assert_eq!(p.file_ops.lists().0, ["f.rs"]);
        // The walk goes newest first and stops at the first message that does
        // not fit (the reply costs 7 tokens, the user message 2 more).
        let p2 = s.prepare_branch_summary("u1", 7).unwrap();
        assert_eq!(p2.messages.len(), 1);
        let r = BranchSummaryResult {
            from_id: p.from_id.clone(),
            summary: "S".into(),
            details: p.file_ops.details(),
            usage: Usage::default(),
        };
        let v: Value =
            serde_json::from_str(&r.entry("x".into(), Some("u1".into()), 0).to_line()).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "type",
                "id",
                "parentId",
                "timestamp",
                "fromId",
                "summary",
                "details",
                "usage",
                "fromHook"
            ]
        );
        assert_eq!(budget(0, 16384), 128_000 - 16384);
    }
}
