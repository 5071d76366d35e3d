//! Writing a prepared compaction's summary (the history, updating the
//! previous summary; the split turn's prefix; the file lists) and the
//! `compaction` entry with its system checkpoint exactly as pi writes it.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::format::compaction::CompactionEventResult;
use crate::format::entry::CompactionEntry;
use crate::format::message::SystemMessage;
use crate::format::{AgentMessage, Entry, Num, Usage};
use crate::timefmt::iso_from_ms;

use super::cut::Preparation;
use super::prompts::{INITIAL_PROMPT, TURN_PREFIX_PROMPT, UPDATE_PROMPT};
use super::serialize::serialize_conversation;
use super::summarize::{summarize, SummaryModel};

fn owned(msgs: &[Cow<'_, AgentMessage>]) -> Vec<AgentMessage> {
    msgs.iter().map(|m| m.as_ref().clone()).collect()
}

fn add_usage(a: &mut Usage, b: &Usage) {
    let add = |x: &mut Num, y: &Num| *x = Num::int(x.as_u64() + y.as_u64());
    add(&mut a.input, &b.input);
    add(&mut a.output, &b.output);
    add(&mut a.cache_read, &b.cache_read);
    add(&mut a.cache_write, &b.cache_write);
    add(&mut a.total_tokens, &b.total_tokens);
    if let Some(r) = &b.reasoning {
        let mut sum = a.reasoning.clone().unwrap_or_default();
        add(&mut sum, r);
        a.reasoning = Some(sum);
    }
    let addf = |x: &mut Num, y: &Num| *x = Num::float(x.as_f64() + y.as_f64());
    addf(&mut a.cost.input, &b.cost.input);
    addf(&mut a.cost.output, &b.cost.output);
    addf(&mut a.cost.cache_read, &b.cost.cache_read);
    addf(&mut a.cost.cache_write, &b.cost.cache_write);
    addf(&mut a.cost.total, &b.cost.total);
    if a.cost.total_from_provider.is_none() {
        a.cost.total_from_provider = b.cost.total_from_provider.clone();
    }
}

/// A finished compaction, ready to become an entry.
#[derive(Debug, Clone)]
pub struct CompactionResult {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub details: Value,
    pub usage: Usage,
    pub system: Option<SystemMessage>,
}

/// Writes the summary of a prepared compaction: the history (updating the
/// previous summary when there is one), then, for a split turn, the turn
/// prefix, then the file lists. `instructions` adds a focus to both calls.
pub async fn compact(
    prep: &Preparation<'_>,
    m: &SummaryModel,
    instructions: Option<&str>,
) -> Result<CompactionResult, String> {
    let focus = instructions
        .filter(|s| !s.is_empty())
        .map(|s| format!("\n\nAdditional focus: {s}"))
        .unwrap_or_default();
    let mut usage = Usage::default();
    let history = if prep.messages_to_summarize.is_empty() {
        prep.previous_summary
            .clone()
            .unwrap_or_else(|| "No prior history.".into())
    } else {
        let mut user = format!(
            "<conversation>\n{}\n</conversation>\n\n",
            serialize_conversation(&owned(&prep.messages_to_summarize))
        );
        let prompt = match &prep.previous_summary {
            Some(prev) => {
                user.push_str(&format!(
                    "<previous-summary>\n{prev}\n</previous-summary>\n\n"
                ));
                UPDATE_PROMPT
            }
            None => INITIAL_PROMPT,
        };
        user.push_str(prompt);
        user.push_str(&focus);
        let s = summarize(m, user, "Summarization").await?;
        add_usage(&mut usage, &s.usage);
        s.text
    };
    let mut summary = history;
    if prep.split_turn && !prep.turn_prefix_messages.is_empty() {
        let user = format!(
            "# Conversation\n{}\n\n# Instructions\n{TURN_PREFIX_PROMPT}{focus}",
            serialize_conversation(&owned(&prep.turn_prefix_messages))
        );
        let s = summarize(m, user, "Turn prefix summarization").await?;
        add_usage(&mut usage, &s.usage);
        summary = format!(
            "{summary}\n\n---\n\n**Turn Context (split turn):**\n\n{}",
            s.text
        );
    }
    summary.push_str(&prep.file_ops.suffix());
    Ok(CompactionResult {
        summary,
        first_kept_entry_id: prep.first_kept_entry_id.clone(),
        tokens_before: prep.tokens_before,
        details: prep.file_ops.details(),
        usage,
        system: prep.system.clone(),
    })
}

impl CompactionResult {
    /// A summary the caller supplied itself (an extension's `compaction`
    /// answer: `summary`, and optionally `firstKeptEntryId`,
    /// `tokensBefore`, `details`), the missing fields from the plan.
    pub fn from_own(c: &Value, prep: &Preparation<'_>) -> CompactionResult {
        CompactionResult {
            summary: c["summary"].as_str().unwrap_or("").to_string(),
            first_kept_entry_id: c["firstKeptEntryId"]
                .as_str()
                .unwrap_or(&prep.first_kept_entry_id)
                .to_string(),
            tokens_before: c["tokensBefore"].as_u64().unwrap_or(prep.tokens_before),
            details: c.get("details").cloned().unwrap_or(Value::Null),
            usage: Default::default(),
            system: prep.system.clone(),
        }
    }

    /// The `compaction_end` result, given the estimate of the rebuilt
    /// context (`estimatedTokensAfter`: the projection once the entry is
    /// written).
    pub fn event_result(&self, estimated_tokens_after: u64) -> CompactionEventResult {
        CompactionEventResult {
            summary: self.summary.clone(),
            first_kept_entry_id: self.first_kept_entry_id.clone(),
            tokens_before: self.tokens_before,
            estimated_tokens_after,
            usage: Some(self.usage.clone()),
            details: Some(self.details.clone()),
        }
    }

    /// The `compaction` entry pi 1.6.0 writes (child of `parent`), with the
    /// system checkpoint stamped with the compaction time.
    pub fn entry(&self, id: String, parent: Option<String>, now_ms: i64) -> Entry {
        let system = self.system.clone().map(|mut s| {
            s.timestamp = Num::signed(now_ms);
            AgentMessage::System(Box::new(s))
        });
        Entry::Compaction(Box::new(CompactionEntry {
            id,
            parent_id: parent,
            timestamp: iso_from_ms(now_ms),
            summary: self.summary.clone(),
            first_kept_entry_id: self.first_kept_entry_id.clone(),
            tokens_before: Num::int(self.tokens_before),
            details: Some(self.details.clone()),
            usage: Some(self.usage.clone()),
            from_hook: Some(false),
            system_message: system,
            extra: Map::new(),
        }))
    }
}
