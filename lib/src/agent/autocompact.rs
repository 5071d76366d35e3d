//! Compaction inside the agent loop, as pi 1.6.0 runs it: the threshold
//! check (`contextTokens > contextWindow − reserveTokens`) before a prompt,
//! between turns and after a run; overflow recovery (a context-overflow
//! error or a recoverable length stop: the failed reply is omitted with
//! `context_edit`s, the branch compacted, and a fresh run started once);
//! and [`Agent::compact_now`], the agent's one entry point (automatic
//! triggers, an RPC `compact` command). The compaction itself — its steps,
//! its events, the summary and the entry — is the one orchestration in
//! `session::compact::run`, below the agent, which `pi-session compact`
//! runs too; this module decides when, and is its host: the records go on
//! the agent's stream, the extensions are asked and told, and the client's
//! questions are served while the model writes.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::{Agent, Emit, Event as Wire};
use crate::format::compaction::{
    CompactionEnd, CompactionEventResult, CompactionReason, CompactionStart, SummaryRetry,
    SummarySource,
};
use crate::format::entry::ContextEditEntry;
use crate::format::message::AssistantMessage;
use crate::format::{AgentMessage, Entry};
use crate::provider::{FailureInfo, FailureKind};
use crate::session::compact::run::{run, Before, Event, Failure, Host, Outcome, Request};
use crate::session::compact::{
    reporting_retries, usage_tokens, Preparation, PrepareError, SummaryModel,
};
use crate::session::Session;
use crate::timefmt::now_iso;

/// `compaction_end.errorMessage` when the retried run overflows again.
pub const OVERFLOW_RETRY_FAILED: &str = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model.";
/// The same for a truncated (length-stopped) reply.
pub const TRUNCATED_RETRY_FAILED: &str =
    "Truncated response recovery failed after one compact-and-retry attempt.";

/// A cancelled compaction (an abort, an extension's `{cancel: true}`).
pub use crate::session::compact::run::CANCELLED;

/// What [`Agent::compact_now`] came to.
#[derive(Debug, Clone)]
pub enum Compacted {
    /// The entry was appended; the `compaction_end` result.
    Done(Box<CompactionEventResult>),
    /// Nothing to compact (`Already compacted`, `Nothing to compact …`):
    /// an automatic compaction emits nothing then.
    Nothing(String),
    /// The summary call failed or was cancelled (the bare message).
    Failed(String),
}

/// Whether a provider error says the prompt did not fit the context window
/// (pi's overflow patterns, an HTTP 413), and is not a rate limit.
pub fn is_overflow_error(message: &str, failure: Option<&FailureInfo>) -> bool {
    static RE: OnceLock<Option<(Regex, Regex)>> = OnceLock::new();
    let re = RE.get_or_init(|| {
        let yes = Regex::new(
            r"(?i)prompt (is )?too long|exceeds? the context window|context[_ ]length[_ ]exceeded|maximum context length|context window (is )?exceeded|too many tokens|token limit exceeded|input is too long|request too large|exceeds the maximum (number of )?tokens|exceeds the available context size",
        )
        .ok()?;
        let no = Regex::new(r"(?i)rate limit|too many requests|^(Throttling error|Service unavailable):")
            .ok()?;
        Some((yes, no))
    });
    let Some((yes, no)) = re else {
        return false;
    };
    if no.is_match(message) {
        return false;
    }
    let status_413 = matches!(failure.map(|f| &f.kind), Some(FailureKind::Http(413)))
        || message.starts_with("413");
    status_413 || yes.is_match(message)
}

/// How a run's last reply asks for an overflow compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Overflow {
    /// Omit the reply, compact, retry once (`truncated`: a length stop).
    Retry { truncated: bool },
    /// The reply stays; compact without retrying (its input already
    /// exceeded the window).
    CompactOnly,
}

/// What overflow recovery or the threshold check did after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterRun {
    /// The failed reply was hidden and the branch compacted: run again.
    Retry,
    /// The failed reply was hidden, but the compaction found nothing to
    /// summarise (a branch under `keepRecentTokens`) or failed: no retry,
    /// and the run ends without an answer.
    Hidden,
    /// The last reply stays as it was.
    Kept,
}

impl Agent {
    fn over_threshold(&self, tokens: u64) -> bool {
        let window = self.opts.model.context_window;
        window > 0 && tokens > window.saturating_sub(self.compaction.reserve_tokens)
    }

    fn same_model(&self, a: &AssistantMessage) -> bool {
        a.provider == self.opts.model.provider && a.model == self.opts.model.id
    }

    /// Whether the run's last reply calls for overflow recovery.
    pub(super) fn overflow_kind(
        &self,
        last: &AssistantMessage,
        failure: Option<&FailureInfo>,
    ) -> Option<Overflow> {
        if !self.same_model(last) {
            return None;
        }
        let window = self.opts.model.context_window;
        let u = &last.usage;
        let input = u.input.as_u64() + u.cache_read.as_u64();
        match last.stop_reason.as_str() {
            "error" => last
                .error_message
                .as_deref()
                .is_some_and(|m| is_overflow_error(m, failure))
                .then_some(Overflow::Retry { truncated: false }),
            "length" => {
                let full = u.output.as_u64() == 0 && window > 0 && input * 100 >= window * 99;
                let recoverable = u.output.as_u64() < self.opts.model.max_tokens;
                (full || recoverable).then_some(Overflow::Retry { truncated: !full })
            }
            "stop" if window > 0 && input > window => Some(Overflow::CompactOnly),
            _ => None,
        }
    }

    /// The threshold test on the branch's last assistant reply (after a
    /// run, and before a prompt with `include_aborted`): skipped for an
    /// aborted reply (unless included), another model's, or one the latest
    /// compaction already covers. The reply's usage counts, or the estimate
    /// for an error, a zero usage, or a branch with context edits.
    pub(super) fn last_reply_over_threshold(&self, include_aborted: bool) -> bool {
        let s = &self.store.session;
        let path = s.leaf_id().map(|l| s.path_to(l)).unwrap_or_default();
        let (mut compaction, mut edits, mut last) = (None, false, None);
        for (pos, &i) in path.iter().enumerate() {
            match &s.entries[i] {
                Entry::Compaction(_) => compaction = Some(pos),
                Entry::ContextEdit(_) => edits = true,
                Entry::Message(m) => {
                    if let AgentMessage::Assistant(a) = &m.message {
                        last = Some((pos, &**a));
                    }
                }
                _ => {}
            }
        }
        let Some((pos, a)) = last else {
            return false;
        };
        if compaction.is_some_and(|c| pos < c)
            || (!include_aborted && a.stop_reason == "aborted")
            || !self.same_model(a)
        {
            return false;
        }
        let used = usage_tokens(&a.usage);
        let tokens = if a.stop_reason == "error" || used == 0 || edits {
            s.projection(None).estimate_tokens()
        } else {
            used
        };
        self.over_threshold(tokens)
    }

    /// The between-turns test: the projected context of the next request.
    pub(super) fn projected_over_threshold(&self) -> bool {
        self.over_threshold(self.store.session.projection(None).estimate_tokens())
    }

    /// Hides the branch's last assistant reply and the tool results after
    /// it from the model (one `context_edit` each, reported as
    /// `entry_appended`); the entries stay in the file.
    pub(super) fn omit_last_reply(&mut self, emit: Emit<'_>) -> Result<(), String> {
        let targets: Vec<String> = {
            let s = &self.store.session;
            let path = s.leaf_id().map(|l| s.path_to(l)).unwrap_or_default();
            let is_assistant = |i: usize| matches!(&s.entries[i], Entry::Message(m) if matches!(m.message, AgentMessage::Assistant(_)));
            match path.iter().rposition(|&i| is_assistant(i)) {
                None => Vec::new(),
                Some(at) => path[at..]
                    .iter()
                    .filter(|&&i| {
                        is_assistant(i)
                            || matches!(&s.entries[i], Entry::Message(m) if matches!(m.message, AgentMessage::ToolResult(_)))
                    })
                    .map(|&i| s.entries[i].id().to_string())
                    .collect(),
            }
        };
        for target in targets {
            let edit = Entry::ContextEdit(Box::new(ContextEditEntry {
                id: self.store.session.fresh_id(),
                parent_id: self.store.session.leaf_id().map(str::to_string),
                timestamp: now_iso(),
                target_id: target,
                replacement: Value::Null,
                extra: Map::new(),
            }));
            self.append(edit, Some(&mut *emit))?;
        }
        Ok(())
    }

    /// Compacts the branch now, keeping `compaction.keepRecentTokens`:
    /// `compaction_start`, the summary calls, the `compaction` entry, then
    /// `compaction_end` (with `will_retry` on success). A manual compaction
    /// that finds nothing to do reports it as a failure; an automatic one
    /// emits nothing then. Usable whether or not automatic compaction is on
    /// (RPC `compact`).
    ///
    /// While it runs [`Agent::compacting`] is true (pi's `isCompacting`) and
    /// the client's questions are answered ([`super::hooks::Inquiries`]).
    pub async fn compact_now(
        &mut self,
        reason: CompactionReason,
        instructions: Option<&str>,
        will_retry: bool,
        emit: Emit<'_>,
    ) -> Compacted {
        let was = std::mem::replace(&mut self.compacting, true);
        // Boxed: the compaction's state (some 40 KB: the summary request,
        // its retries, the questions served meanwhile) would otherwise sit
        // inside every future that may compact (the turn loop, a run, a
        // prompt), and each of those is copied whole on the stack when it
        // starts. A compaction is rare; one allocation when it happens is
        // cheaper than touching those pages on every run.
        let done = Box::pin(self.compact_inner(reason, instructions, will_retry, emit)).await;
        self.compacting = was;
        done
    }

    async fn compact_inner(
        &mut self,
        reason: CompactionReason,
        instructions: Option<&str>,
        will_retry: bool,
        emit: Emit<'_>,
    ) -> Compacted {
        let prep = self
            .store
            .session
            .prepare_compaction(None, self.compaction.keep_recent_tokens)
            .map(|p| p.into_owned());
        let prep = match prep {
            Ok(p) => p,
            Err(e) => {
                let msg = e.to_string();
                if reason == CompactionReason::Manual {
                    emit(&Wire::Value(&to_value(&CompactionStart::new(reason))));
                    emit(&Wire::Value(&to_value(&CompactionEnd::failure(
                        reason, &msg,
                    ))));
                }
                debug_assert!(matches!(
                    e,
                    PrepareError::AlreadyCompacted | PrepareError::NothingToCompact
                ));
                return Compacted::Nothing(msg);
            }
        };
        let mut model = SummaryModel {
            model: self.opts.model.clone(),
            api_key: self.opts.api_key.clone(),
            thinking: self.opts.thinking,
            idle_timeout: self.opts.idle_timeout,
            cancel: self.cancel.clone(),
            retry: self.opts.retry,
            retry_events: None,
        };
        let req = Request {
            reason,
            instructions,
            will_retry,
        };
        let mut host = AgentHost { agent: self, emit };
        match run(&mut host, prep, &mut model, req).await {
            Outcome::Done { result, .. } => {
                // The summary was paid for: the run's budget counts it.
                let a = &host.agent;
                if let (Some(b), Some(u)) = (&a.ext.limits.budget, &result.usage) {
                    b.record_usage(u, a.ext.delegation.as_ref());
                }
                Compacted::Done(result)
            }
            Outcome::Failed(Failure::Cancelled) => Compacted::Failed(CANCELLED.into()),
            Outcome::Failed(Failure::Summary(e) | Failure::Write(e)) => Compacted::Failed(e),
        }
    }

    /// `session_before_compact`'s payload: the plan (with the compaction
    /// settings), the branch's entries, the instructions, the reason and
    /// whether a run is retried after (pi's `signal` cannot cross to an
    /// extension, so it is left out).
    fn before_compact_event(
        &self,
        prep: &Preparation<'_>,
        reason: CompactionReason,
        instructions: Option<&str>,
        will_retry: bool,
    ) -> Value {
        let s = &self.store.session;
        let branch: Vec<&Entry> = s
            .leaf_id()
            .map(|l| s.path_to(l).into_iter().map(|i| &s.entries[i]).collect())
            .unwrap_or_default();
        let set = |v: &std::collections::BTreeSet<String>| v.iter().cloned().collect::<Vec<_>>();
        serde_json::json!({
            "type": "session_before_compact",
            "preparation": {
                "firstKeptEntryId": prep.first_kept_entry_id,
                "messagesToSummarize": prep.messages_to_summarize,
                "turnPrefixMessages": prep.turn_prefix_messages,
                "isSplitTurn": prep.split_turn,
                "tokensBefore": prep.tokens_before,
                "previousSummary": prep.previous_summary,
                "fileOps": {"read": set(&prep.file_ops.read), "written": set(&prep.file_ops.written),
                    "edited": set(&prep.file_ops.edited)},
                "settings": {"enabled": self.compaction.enabled,
                    "reserveTokens": self.compaction.reserve_tokens,
                    "keepRecentTokens": self.compaction.keep_recent_tokens},
            },
            "branchEntries": branch,
            "customInstructions": instructions,
            "reason": reason,
            "willRetry": will_retry,
        })
    }

    /// `session_compact_failed` to the extensions after a failed or
    /// cancelled compaction's `compaction_end`.
    async fn compact_failed(
        &mut self,
        reason: CompactionReason,
        error: Option<String>,
        aborted: bool,
        will_retry: bool,
        emit: Emit<'_>,
    ) {
        if self.hooked("session_compact_failed") {
            let ev = serde_json::json!({"type": "session_compact_failed", "reason": reason,
                "errorMessage": error, "aborted": aborted, "willRetry": will_retry,
                "fromExtension": false});
            self.notify_hooks(ev, emit).await;
        }
    }

    /// The threshold check before a prompt run (the last reply, aborted
    /// ones included).
    pub(super) async fn compact_before_prompt(&mut self, emit: Emit<'_>) {
        if self.auto_compaction && self.last_reply_over_threshold(true) {
            self.compact_now(CompactionReason::Threshold, None, false, emit)
                .await;
        }
    }

    /// After a run (its `agent_end` emitted): overflow recovery, else the
    /// threshold check. [`AfterRun::Retry`]: start a fresh run (the failed
    /// reply is omitted and the branch compacted). `tried` remembers that
    /// this prompt already had its one compact-and-retry.
    pub(super) async fn compact_after_run(
        &mut self,
        last: Option<&AssistantMessage>,
        failure: Option<&FailureInfo>,
        tried: &mut bool,
        emit: Emit<'_>,
    ) -> AfterRun {
        if !self.auto_compaction || self.cancel.is_cancelled() {
            return AfterRun::Kept;
        }
        let overflow = last.and_then(|l| self.overflow_kind(l, failure));
        match overflow {
            Some(Overflow::Retry { truncated }) => {
                if *tried {
                    let msg = if truncated {
                        TRUNCATED_RETRY_FAILED
                    } else {
                        OVERFLOW_RETRY_FAILED
                    };
                    let mut end = CompactionEnd::failure(CompactionReason::Overflow, "");
                    end.error_message = Some(msg.to_string());
                    emit(&Wire::Value(&to_value(&end)));
                    return AfterRun::Kept;
                }
                *tried = true;
                if let Err(e) = self.omit_last_reply(emit) {
                    emit(&Wire::Value(&to_value(&CompactionEnd::failure(
                        CompactionReason::Overflow,
                        &e,
                    ))));
                    return AfterRun::Kept;
                }
                match self
                    .compact_now(CompactionReason::Overflow, None, true, emit)
                    .await
                {
                    Compacted::Done(_) => AfterRun::Retry,
                    Compacted::Nothing(_) | Compacted::Failed(_) => AfterRun::Hidden,
                }
            }
            Some(Overflow::CompactOnly) => {
                self.compact_now(CompactionReason::Overflow, None, false, emit)
                    .await;
                AfterRun::Kept
            }
            None => {
                if self.last_reply_over_threshold(false) {
                    self.compact_now(CompactionReason::Threshold, None, false, emit)
                        .await;
                }
                AfterRun::Kept
            }
        }
    }

    /// Between turns (tool results appended, the run going on): compacts
    /// when the next request would pass the threshold.
    pub(super) async fn compact_between_turns(&mut self, emit: Emit<'_>) {
        if self.auto_compaction && !self.cancel.is_cancelled() && self.projected_over_threshold() {
            self.compact_now(CompactionReason::Threshold, None, false, emit)
                .await;
        }
    }
}

/// The agent as the compaction's host: records go on the agent's stream,
/// the extensions are asked before (`session_before_compact`) and told
/// after (`session_compact`, `session_compact_failed`), the client's
/// questions are served while the model writes, and the entry is appended
/// through the session store.
struct AgentHost<'a, 'e> {
    agent: &'a mut Agent,
    emit: Emit<'e>,
}

impl Host for AgentHost<'_, '_> {
    type WriteError = String;

    fn session(&self) -> &Session {
        &self.agent.store.session
    }

    fn event(&mut self, ev: Event<'_>) {
        (self.emit)(&Wire::Value(&ev.record()));
    }

    async fn before(&mut self, prep: &Preparation<'_>, req: &Request<'_>) -> Before {
        if !self.agent.hooked("session_before_compact") {
            return Before::Proceed;
        }
        let event =
            self.agent
                .before_compact_event(prep, req.reason, req.instructions, req.will_retry);
        let answer = self.agent.session_before_answer(event, self.emit).await;
        if answer
            .as_ref()
            .and_then(|v| v.get("cancel"))
            .and_then(Value::as_bool)
            == Some(true)
        {
            return Before::Cancel;
        }
        // The extension may write the summary itself.
        match answer
            .and_then(|v| v.get("compaction").cloned())
            .filter(|c| c.get("summary").is_some_and(Value::is_string))
        {
            Some(c) => Before::Own(c),
            None => Before::Proceed,
        }
    }

    async fn wait<T>(
        &mut self,
        job: impl std::future::Future<Output = T>,
        retries: &mut UnboundedReceiver<SummaryRetry>,
        source: SummarySource,
    ) -> T {
        let emit = &mut *self.emit;
        let job = reporting_retries(job, retries, |r| emit(&Wire::Value(&r.record(source))));
        self.agent.serving(job).await
    }

    fn append(&mut self, make: &mut dyn FnMut(&Session) -> Entry) -> Result<Vec<Entry>, String> {
        let store = &mut self.agent.store;
        let entry = make(&store.session);
        match store.append_ref(entry) {
            Ok(e) => Ok(vec![e.clone()]),
            Err(e) => Err(super::io_error(e, store)),
        }
    }

    async fn failed(&mut self, req: &Request<'_>, error: Option<String>, aborted: bool) {
        self.agent
            .compact_failed(req.reason, error, aborted, req.will_retry, self.emit)
            .await;
    }

    async fn compacted(&mut self, req: &Request<'_>, entry: &Entry, from_host: bool) {
        if self.agent.hooked("session_compact") {
            let ev = serde_json::json!({"type": "session_compact", "compactionEntry": entry,
                "fromExtension": from_host, "reason": req.reason, "willRetry": req.will_retry});
            self.agent.notify_hooks(ev, self.emit).await;
        }
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_patterns() {
        for m in [
            r#"400: {"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}"#,
            "This model's maximum context length is 8192 tokens",
            "Your input exceeds the context window of this model",
            "context_length_exceeded",
            "too many tokens in request",
            r#"400: {"code":400,"message":"request (9000 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error"}"#,
        ] {
            assert!(is_overflow_error(m, None), "{m}");
        }
        for m in [
            "rate limit: too many tokens per minute",
            "Too Many Requests",
            "Service unavailable: prompt is too long",
            "500 internal error",
        ] {
            assert!(!is_overflow_error(m, None), "{m}");
        }
        let http413 = FailureInfo {
            kind: FailureKind::Http(413),
            retry_after: None,
        };
        assert!(is_overflow_error("payload", Some(&http413)));
    }
}
