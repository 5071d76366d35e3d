//! A branch as the model sees it, entry by entry: the latest compaction
//! contributes its checkpoint and summary first, then the kept entries
//! before it (without their raw system messages) and everything after it,
//! with `context_edit`s applied throughout; and its estimated size (the
//! last valid usage plus estimates of what follows, or estimates of
//! everything when the branch was rewritten since).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::format::message::{CompactionSummaryMessage, MessageRef, SystemMessage};
use crate::format::{AgentMessage, Entry, Num, UserContent};
use crate::prompt::PromptState;
use crate::session::Session;
use crate::timefmt::parse_iso_ms;

use super::estimate::{estimate_tokens, valid_usage};

/// One entry of the projected branch.
#[derive(Debug, Clone)]
pub struct ProjectedEntry<'a> {
    /// Position in `Session::entries`.
    pub index: usize,
    /// The message it contributes after context edits (`None`: metadata,
    /// or omitted by an edit). For the contributing compaction: its
    /// summary message.
    pub message: Option<Cow<'a, AgentMessage>>,
    /// A `context_edit` omitted it (`replacement: null`).
    pub omitted: bool,
}

/// A branch as the model sees it, entry by entry.
#[derive(Debug, Clone)]
pub struct Projection<'a> {
    pub entries: Vec<ProjectedEntry<'a>>,
    /// The contributing compaction (then `entries[0]`).
    pub compaction: Option<usize>,
    /// The compaction's recorded prompt, replayed before the system
    /// messages after it ([`Projection::system`]).
    compacted_system: Option<&'a SystemMessage>,
    /// The path position (in `Session::path_to`) of the latest compaction
    /// or context edit; a usage before it is stale.
    pub last_rewrite: Option<usize>,
    /// Path position of each projected entry.
    positions: Vec<usize>,
    /// Whether an edit replaces (not omits) an entry that stays visible.
    pub(crate) replaces_visible: bool,
}

impl Session {
    /// The projected branch ending at `leaf` (default: the leaf): the
    /// latest compaction contributes first (its checkpoint and summary),
    /// then the kept entries before it without their raw system messages,
    /// then everything after it; `context_edit`s are applied throughout.
    pub fn projection(&self, leaf: Option<&str>) -> Projection<'_> {
        let leaf = leaf.or_else(|| self.leaf_id());
        let path = leaf.map(|l| self.path_to(l)).unwrap_or_default();
        let mut edits: HashMap<&str, &Value> = HashMap::new();
        let mut cpos = None;
        let mut last_rewrite = None;
        for (pos, &i) in path.iter().enumerate() {
            match &self.entries[i] {
                Entry::Compaction(_) => {
                    cpos = Some(pos);
                    last_rewrite = Some(pos);
                }
                Entry::ContextEdit(c) => {
                    edits.insert(c.target_id.as_str(), &c.replacement);
                    last_rewrite = Some(pos);
                }
                _ => {}
            }
        }
        let mut entries = Vec::new();
        let mut positions = Vec::new();
        // The compaction's recorded prompt comes before every system
        // message after it.
        let mut compacted_system = None;
        let mut replaces_visible = false;
        // Which path positions contribute, and whether their raw system
        // messages are dropped (the kept range before a compaction).
        let mut order: Vec<(usize, bool)> = Vec::with_capacity(path.len());
        let compaction = match cpos {
            None => {
                order.extend((0..path.len()).map(|pos| (pos, false)));
                None
            }
            Some(cpos) => {
                let i = path[cpos];
                let Entry::Compaction(c) = &self.entries[i] else {
                    unreachable!("compaction position holds a compaction entry")
                };
                if let Some(AgentMessage::System(s)) = &c.system_message {
                    compacted_system = Some(&**s);
                }
                entries.push(ProjectedEntry {
                    index: i,
                    message: Some(Cow::Owned(AgentMessage::CompactionSummary(
                        CompactionSummaryMessage {
                            summary: c.summary.clone(),
                            tokens_before: c.tokens_before.clone(),
                            timestamp: Num::signed(parse_iso_ms(&c.timestamp).unwrap_or(0)),
                            extra: Map::new(),
                        },
                    ))),
                    omitted: false,
                });
                positions.push(cpos);
                let start = path[..cpos]
                    .iter()
                    .position(|&j| self.entries[j].id() == c.first_kept_entry_id);
                if let Some(start) = start {
                    order.extend((start..cpos).map(|pos| (pos, true)));
                }
                order.extend((cpos + 1..path.len()).map(|pos| (pos, false)));
                Some(i)
            }
        };
        for (pos, drop_system) in order {
            let i = path[pos];
            let e = &self.entries[i];
            // Message entries are borrowed (no copy of a large session).
            let mut msg = crate::session::context::entry_message(e).map(MessageRef::into_cow);
            if drop_system && matches!(msg.as_deref(), Some(AgentMessage::System(_))) {
                continue;
            }
            let mut omitted = false;
            match (edits.get(e.id()), &msg) {
                (Some(Value::Null), Some(_)) => {
                    omitted = true;
                    msg = None;
                }
                (Some(Value::Object(r)), Some(m)) => {
                    if let Some(c) = r.get("content") {
                        msg = Some(Cow::Owned(crate::session::context::replace_content(
                            m.clone().into_owned(),
                            c,
                        )));
                        replaces_visible = true;
                    }
                }
                _ => {}
            }
            entries.push(ProjectedEntry {
                index: i,
                message: msg,
                omitted,
            });
            positions.push(pos);
        }
        Projection {
            entries,
            compaction,
            compacted_system,
            last_rewrite,
            positions,
            replaces_visible,
        }
    }
}

/// The whole prompt of a replay as one system message (pi's
/// `getCurrentSystemMessage`): non-empty contents joined by a blank line,
/// the sections, the tools.
fn system_message(st: &PromptState<'_>, timestamp_ms: i64) -> SystemMessage {
    SystemMessage {
        content: UserContent::Text(st.content.join("\n\n")),
        sections: (!st.sections.is_empty()).then(|| st.sections.to_map()),
        timestamp: Num::signed(timestamp_ms),
        tools_added: (!st.tools.is_empty()).then(|| st.tools.values().cloned().collect()),
        tools_removed: None,
        extra: Map::new(),
    }
}

impl Projection<'_> {
    /// The replayed system prompt and tools (the compaction's checkpoint,
    /// then the system messages the model sees), as one message; `None`
    /// without any. Built on demand: it copies every tool's schema, and
    /// the check between turns mostly does without it.
    pub fn system(&self) -> Option<SystemMessage> {
        let mut state = PromptState::default();
        let mut has_system = false;
        let shown = self
            .entries
            .iter()
            .filter_map(|e| match e.message.as_deref() {
                Some(AgentMessage::System(s)) => Some(&**s),
                _ => None,
            });
        for s in self.compacted_system.into_iter().chain(shown) {
            state.apply(s);
            has_system = true;
        }
        has_system.then(|| system_message(&state, 0))
    }

    /// Whether the branch was rewritten (a compaction or context edit) after
    /// its last usable assistant usage, so no reply has measured the
    /// context since (pi's `contextUsage` is then unknown).
    pub fn usage_is_stale(&self) -> bool {
        let Some(r) = self.last_rewrite else {
            return false;
        };
        let last = self
            .entries
            .iter()
            .rposition(|e| e.message.as_deref().and_then(valid_usage).is_some());
        last.is_none_or(|k| self.positions[k] <= r)
    }

    /// The estimated context size (pi's `estimateProjectedContextTokens`):
    /// the last valid assistant usage plus estimates of what follows it,
    /// when that usage is newer than the latest compaction or context edit;
    /// otherwise the estimate of the replayed system prompt and every
    /// other message.
    pub fn estimate_tokens(&self) -> u64 {
        let last = self.entries.iter().enumerate().rev().find_map(|(k, e)| {
            let u = valid_usage(e.message.as_deref()?)?;
            Some((k, u))
        });
        if let Some((k, u)) = last {
            let fresh = self.last_rewrite.is_none_or(|r| self.positions[k] > r);
            if fresh {
                let after: u64 = self.entries[k + 1..]
                    .iter()
                    .filter_map(|e| e.message.as_deref())
                    .map(estimate_tokens)
                    .sum();
                return u + after;
            }
        }
        let sys = self
            .system()
            .map(|s| estimate_tokens(&AgentMessage::System(Box::new(s))))
            .unwrap_or(0);
        sys + self
            .entries
            .iter()
            .filter_map(|e| e.message.as_deref())
            .filter(|m| !matches!(m, AgentMessage::System(_)))
            .map(estimate_tokens)
            .sum::<u64>()
    }
}
