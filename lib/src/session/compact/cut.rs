//! Where a compaction cuts, as pi does it, on the projected branch: walk
//! back from the newest entry until `keepRecentTokens` are kept, cut at
//! the next turn start or assistant reply (never between a tool call and
//! its result), step over an omitted failed tail, and when the cut falls
//! inside a turn summarise the turn's start on its own. The preparation
//! carries what is summarised, what is kept, the previous summary and the
//! system checkpoint.

use std::borrow::Cow;

use crate::format::message::SystemMessage;
use crate::format::{AgentMessage, Entry};
use crate::session::Session;

use super::estimate::estimate_tokens;
use super::file_ops::FileOps;

/// Why a branch cannot be compacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    #[error("Already compacted")]
    AlreadyCompacted,
    #[error("Nothing to compact (session too small)")]
    NothingToCompact,
}

/// What a compaction will summarise and keep.
#[derive(Debug, Clone)]
pub struct Preparation<'a> {
    /// The first entry kept verbatim.
    pub first_kept_entry_id: String,
    /// The cut falls inside a turn: its start is summarised separately.
    pub split_turn: bool,
    /// The projected context size before compaction.
    pub tokens_before: u64,
    pub messages_to_summarize: Vec<Cow<'a, AgentMessage>>,
    /// The start of the split turn, up to the cut.
    pub turn_prefix_messages: Vec<Cow<'a, AgentMessage>>,
    pub previous_summary: Option<String>,
    pub file_ops: FileOps,
    /// The replayed system prompt at this point (the entry's checkpoint).
    pub system: Option<SystemMessage>,
}

impl Preparation<'_> {
    /// The same plan owning its messages (so the session may change while
    /// the summary is written).
    pub fn into_owned(self) -> Preparation<'static> {
        let own = |v: Vec<Cow<'_, AgentMessage>>| -> Vec<Cow<'static, AgentMessage>> {
            v.into_iter().map(|m| Cow::Owned(m.into_owned())).collect()
        };
        Preparation {
            first_kept_entry_id: self.first_kept_entry_id,
            split_turn: self.split_turn,
            tokens_before: self.tokens_before,
            messages_to_summarize: own(self.messages_to_summarize),
            turn_prefix_messages: own(self.turn_prefix_messages),
            previous_summary: self.previous_summary,
            file_ops: self.file_ops,
            system: self.system,
        }
    }
}

/// A message that starts a turn (an assistant reply does not).
fn is_turn_start(m: Option<&AgentMessage>) -> bool {
    matches!(
        m,
        Some(
            AgentMessage::User(_)
                | AgentMessage::BashExecution(_)
                | AgentMessage::Custom(_)
                | AgentMessage::BranchSummary(_)
                | AgentMessage::CompactionSummary(_)
        )
    )
}

/// What the cut-point search knows about one projected entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No message (metadata, or an empty branch summary).
    Meta,
    /// A message a `context_edit` omitted (`assistant`: it was a reply).
    Omitted {
        assistant: bool,
    },
    System,
    ToolResult,
    Assistant,
    /// `user`, `bashExecution`, `custom`, `branchSummary`,
    /// `compactionSummary`.
    TurnStart,
    /// Any other message (a role this toolkit does not know).
    Other,
}

impl Kind {
    pub(crate) fn of(m: Option<&AgentMessage>, omitted: bool, assistant_entry: bool) -> Kind {
        if omitted {
            return Kind::Omitted {
                assistant: assistant_entry,
            };
        }
        match m {
            None => Kind::Meta,
            Some(AgentMessage::System(_)) => Kind::System,
            Some(AgentMessage::ToolResult(_)) => Kind::ToolResult,
            Some(AgentMessage::Assistant(_)) => Kind::Assistant,
            m if is_turn_start(m) => Kind::TurnStart,
            Some(_) => Kind::Other,
        }
    }

    fn has_message(self) -> bool {
        !matches!(self, Kind::Meta | Kind::Omitted { .. })
    }

    fn is_cut_point(self) -> bool {
        matches!(self, Kind::Assistant | Kind::TurnStart)
    }

    /// A message that is summarised (system messages never are).
    pub(crate) fn summarised(self) -> bool {
        self.has_message() && self != Kind::System
    }
}

/// Where the kept part starts, and the start of the turn it splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    pub cut: usize,
    pub turn_start: Option<usize>,
}

/// pi's cut-point search over the projected entries `kinds` (the
/// contributing compaction, if any, before `start`): walk back from the
/// newest entry adding `tokens(k)` until `keep` is reached, take the next
/// cut point, step over an omitted failed tail (when the walk reached
/// `keep`), extend back over metadata, and find the turn a cut inside a
/// turn splits. `tokens` is asked only for
/// the entries the walk reaches (newest first), so a caller may compute
/// them lazily.
pub(crate) fn find_cut(
    kinds: &[Kind],
    start: usize,
    keep: u64,
    replaces_visible: bool,
    mut tokens: impl FnMut(usize) -> u64,
) -> Result<Cut, PrepareError> {
    let n = kinds.len();
    let first_cp = (start..n).find(|&k| kinds[k].is_cut_point());
    let last_cp = (start..n).rev().find(|&k| kinds[k].is_cut_point());
    let (Some(first_cp), Some(last_cp)) = (first_cp, last_cp) else {
        return Err(PrepareError::NothingToCompact);
    };
    let mut cut = first_cp;
    let mut acc = 0u64;
    let mut reached = false;
    for k in (start..n).rev() {
        if !kinds[k].has_message() {
            continue;
        }
        let t = tokens(k);
        if t == 0 {
            continue;
        }
        acc += t;
        if acc >= keep {
            reached = true;
            cut = (k..n)
                .find(|&c| c >= start && kinds[c].is_cut_point())
                .unwrap_or(last_cp);
            break;
        }
    }
    // Omitted-suffix advancement: a failed, omitted tail after the cut is
    // summarised with it rather than kept. Only a cut the walk found: a
    // branch smaller than `keep` keeps everything, its hidden failed reply
    // too, and so has nothing to compact (pi 1.6.0 makes no summary
    // request after hiding the one reply of a short session).
    if reached && cut + 1 < n && !replaces_visible {
        let tail = &kinds[cut + 1..];
        let invisible = tail.iter().all(|k| !k.has_message());
        let omitted_assistant = tail.contains(&Kind::Omitted { assistant: true });
        if invisible && omitted_assistant {
            cut += 1;
        }
    }
    while cut > start && kinds[cut - 1] == Kind::Meta {
        cut -= 1;
    }
    let turn_start = if kinds[cut] == Kind::TurnStart {
        None
    } else {
        (start..cut).rev().find(|&k| kinds[k] == Kind::TurnStart)
    };
    Ok(Cut { cut, turn_start })
}

impl Session {
    fn is_assistant_entry(&self, i: usize) -> bool {
        matches!(&self.entries[i], Entry::Message(m) if matches!(m.message, AgentMessage::Assistant(_)))
    }

    /// Prepares the compaction of the branch ending at `leaf` (pi's
    /// `prepareCompaction`), keeping about `keep_recent_tokens` of the
    /// newest context.
    pub fn prepare_compaction(
        &self,
        leaf: Option<&str>,
        keep_recent_tokens: u64,
    ) -> Result<Preparation<'_>, PrepareError> {
        let leaf = leaf.or_else(|| self.leaf_id());
        if let Some(l) = leaf {
            if let Some(&last) = self.path_to(l).last() {
                if matches!(self.entries[last], Entry::Compaction(_)) {
                    return Err(PrepareError::AlreadyCompacted);
                }
            }
        }
        let p = self.projection(leaf);
        let tokens_before = p.estimate_tokens();
        let es = &p.entries;
        let start = usize::from(p.compaction.is_some());
        let kinds: Vec<Kind> = es
            .iter()
            .map(|e| {
                Kind::of(
                    e.message.as_deref(),
                    e.omitted,
                    self.is_assistant_entry(e.index),
                )
            })
            .collect();
        let Cut { cut, turn_start } =
            find_cut(&kinds, start, keep_recent_tokens, p.replaces_visible, |k| {
                es[k].message.as_deref().map(estimate_tokens).unwrap_or(0)
            })?;
        let collect = |from: usize, to: usize| -> Vec<Cow<'_, AgentMessage>> {
            es[from..to]
                .iter()
                .filter_map(|e| e.message.clone())
                .filter(|m| !matches!(**m, AgentMessage::System(_)))
                .collect()
        };
        let messages_to_summarize = collect(start, turn_start.unwrap_or(cut));
        let turn_prefix_messages = turn_start.map(|t| collect(t, cut)).unwrap_or_default();
        if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
            return Err(PrepareError::NothingToCompact);
        }
        let mut file_ops = FileOps::default();
        let mut previous_summary = None;
        if let Some(ci) = p.compaction {
            if let Entry::Compaction(c) = &self.entries[ci] {
                previous_summary = Some(c.summary.clone());
                if c.from_hook != Some(true) {
                    file_ops.absorb(c.details.as_ref());
                }
            }
        }
        for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
            file_ops.track(m);
        }
        Ok(Preparation {
            first_kept_entry_id: self.entries[es[cut].index].id().to_string(),
            split_turn: turn_start.is_some(),
            tokens_before,
            messages_to_summarize,
            turn_prefix_messages,
            previous_summary,
            file_ops,
            system: p.system(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Usage;
    use crate::session::compact::{estimate_tokens, CompactionResult};
    use serde_json::{json, Value};
    use std::path::{Path, PathBuf};

    /// The pi 1.6.0 fixture that was compacted over RPC with
    /// `keepRecentTokens: 1` (see tests/oracle/make-fixtures.sh, scenario d).
    fn fixture() -> (PathBuf, String) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/pi-sessions/sessions/--@FIXTURE_PROJ_ENC@-compaction-160--");
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        (file, text)
    }

    fn session(text: &str) -> Session {
        Session::parse(Path::new("t.jsonl"), text.as_bytes()).unwrap()
    }

    #[test]
    fn cut_point_and_tokens_match_pi_160() {
        let (_, text) = fixture();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.contains(r#""type":"compaction""#))
            .unwrap();
        let written: Value = serde_json::from_str(lines[at]).unwrap();
        let before = session(&(lines[..at].join("\n") + "\n"));
        let prep = before.prepare_compaction(None, 1).unwrap();
        assert_eq!(prep.first_kept_entry_id, written["firstKeptEntryId"]);
        assert_eq!(json!(prep.tokens_before), written["tokensBefore"]);
        assert!(written["summary"]
            .as_str()
            .unwrap()
            .contains("**Turn Context (split turn):**"));
        assert!(prep.split_turn);
        // The entry we would write has pi's keys in pi's order, and the
        // same checkpoint (its timestamp is the compaction time).
        let result = CompactionResult {
            summary: "S".into(),
            first_kept_entry_id: prep.first_kept_entry_id.clone(),
            tokens_before: prep.tokens_before,
            details: prep.file_ops.details(),
            usage: Usage::default(),
            system: prep.system.clone(),
        };
        let ts = written["systemMessage"]["timestamp"].as_i64().unwrap();
        let ours: Value =
            serde_json::from_str(&result.entry("x".into(), Some("p".into()), ts).to_line())
                .unwrap();
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&ours), keys(&written));
        assert_eq!(ours["systemMessage"], written["systemMessage"]);
        assert_eq!(
            keys(&ours["systemMessage"]),
            keys(&written["systemMessage"])
        );
        assert_eq!(ours["details"], written["details"]);
        // The compacted session cannot be compacted again at once.
        let after = session(&(lines[..=at].join("\n") + "\n"));
        assert_eq!(
            after.prepare_compaction(None, 1).unwrap_err(),
            PrepareError::AlreadyCompacted
        );
    }

    #[test]
    fn repeated_compaction_updates_previous_summary() {
        let (_, text) = fixture();
        let s = session(&text);
        let prep = s.prepare_compaction(None, 1).unwrap();
        assert!(prep
            .previous_summary
            .as_deref()
            .unwrap()
            .starts_with("## Goal"));
        // The previously kept assistant reply is summarised again.
        let texts: Vec<String> = prep
            .messages_to_summarize
            .iter()
            .map(|m| m.text())
            .collect();
        assert!(texts[0].starts_with("Step two"), "{texts:?}");
        assert!(prep.split_turn);
    }

    /// A prompt whose only reply was hidden (a cut or refused answer):
    /// under `keep` nothing is compacted; once the walk reaches `keep` the
    /// hidden reply is summarised with the turn it ends.
    #[test]
    fn hidden_failed_reply_moves_the_cut_only_past_keep() {
        let kinds = [
            Kind::Meta,
            Kind::System,
            Kind::TurnStart,
            Kind::Omitted { assistant: true },
            Kind::Meta,
        ];
        let tokens = |k: usize| [0, 1000, 4, 0, 0][k];
        let small = find_cut(&kinds, 0, 20000, false, tokens).unwrap();
        assert_eq!(
            small,
            Cut {
                cut: 2,
                turn_start: None
            }
        );
        let past = find_cut(&kinds, 0, 30, false, tokens).unwrap();
        assert_eq!(
            past,
            Cut {
                cut: 3,
                turn_start: Some(2)
            }
        );
    }

    #[test]
    fn never_cuts_at_a_tool_result() {
        let head = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;
        let lines = [
            head,
            r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"read the file please","timestamp":1}}"#,
            r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"src/a.rs"}}],"stopReason":"toolUse","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0},"timestamp":2}}"#,
            r#"{"type":"message","id":"t1","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"a very long file content that is long enough to pass the budget on its own"}],"isError":false,"timestamp":3}}"#,
            r#"{"type":"message","id":"a2","parentId":"t1","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c2","name":"edit","arguments":{"path":"src/b.rs"}}],"stopReason":"toolUse","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0},"timestamp":4}}"#,
            r#"{"type":"message","id":"t2","parentId":"a2","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"toolResult","toolCallId":"c2","toolName":"edit","content":[{"type":"text","text":"another long tool result text, again long enough to pass the budget"}],"isError":false,"timestamp":5}}"#,
        ];
        let s = session(&(lines.join("\n") + "\n"));
        let prep = s.prepare_compaction(None, 10).unwrap();
        // The budget is reached inside t2; the cut goes forward to no cut
        // point, so back to the last one (a2), never a tool result.
        assert_eq!(prep.first_kept_entry_id, "a2");
        assert!(prep.split_turn);
        assert_eq!(prep.messages_to_summarize.len(), 0);
        assert_eq!(prep.turn_prefix_messages.len(), 3);
        assert_eq!(
            prep.file_ops.lists(),
            (vec!["src/a.rs".to_string()], Vec::<String>::new())
        );
        // Without usage the estimate is the characters / 4 of every message.
        let expected: u64 = s
            .context(None)
            .messages
            .iter()
            .map(|(_, m)| estimate_tokens(m))
            .sum();
        assert_eq!(prep.tokens_before, expected);
    }
}
