//! The `compaction_start` / `compaction_end` events pi 1.6.0 emits around a
//! compaction (manual, threshold or overflow), typed so every emitter
//! (`pi-session compact`, `pi-run` in JSON and RPC mode) writes the same
//! fields in pi's order: `type, reason` then `result?` (absent on failure),
//! `aborted`, `willRetry`, `errorMessage?`.

use serde::Serialize;
use serde_json::Value;

use super::Usage;

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionReason {
    Manual,
    Threshold,
    Overflow,
}

impl CompactionReason {
    /// The prefix of `compaction_end.errorMessage` for this reason.
    pub fn error_prefix(self) -> &'static str {
        match self {
            CompactionReason::Manual => "Compaction failed: ",
            CompactionReason::Threshold => "Auto-compaction failed: ",
            CompactionReason::Overflow => "Context overflow recovery failed: ",
        }
    }
}

/// Where a retried summary call belongs (`summarization_retry_attempt_start`
/// says `source`, and `reason` for a compaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummarySource {
    Compaction(CompactionReason),
    BranchSummary,
}

/// Progress of a summary call's automatic retries, as pi 1.6.0 reports it:
/// `summarization_retry_scheduled` after a failed attempt (before the
/// wait), `summarization_retry_attempt_start` when the next one starts,
/// `summarization_retry_finished` once a retried call is over (whatever
/// its outcome). A call that succeeds at once reports nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryRetry {
    Scheduled {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    AttemptStart,
    Finished,
}

impl SummaryRetry {
    /// The event record, in pi's field order.
    pub fn record(&self, source: SummarySource) -> Value {
        match self {
            SummaryRetry::Scheduled {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => serde_json::json!({"type": "summarization_retry_scheduled", "attempt": attempt,
                "maxAttempts": max_attempts, "delayMs": delay_ms, "errorMessage": error_message}),
            SummaryRetry::AttemptStart => match source {
                SummarySource::Compaction(reason) => serde_json::json!({
                    "type": "summarization_retry_attempt_start", "source": "compaction", "reason": reason}),
                SummarySource::BranchSummary => serde_json::json!({
                    "type": "summarization_retry_attempt_start", "source": "branchSummary"}),
            },
            SummaryRetry::Finished => serde_json::json!({"type": "summarization_retry_finished"}),
        }
    }
}

/// `{"type":"compaction_start","reason":…}`
#[derive(Debug, Clone, Serialize)]
pub struct CompactionStart {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub reason: CompactionReason,
}

impl CompactionStart {
    pub fn new(reason: CompactionReason) -> Self {
        CompactionStart {
            kind: "compaction_start",
            reason,
        }
    }
}

/// `compaction_end.result`.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionEventResult {
    pub summary: String,
    #[serde(rename = "firstKeptEntryId")]
    pub first_kept_entry_id: String,
    #[serde(rename = "tokensBefore")]
    pub tokens_before: u64,
    #[serde(rename = "estimatedTokensAfter")]
    pub estimated_tokens_after: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// `{"type":"compaction_end",…}`
#[derive(Debug, Clone, Serialize)]
pub struct CompactionEnd {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub reason: CompactionReason,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CompactionEventResult>,
    pub aborted: bool,
    #[serde(rename = "willRetry")]
    pub will_retry: bool,
    #[serde(rename = "errorMessage", skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

impl CompactionEnd {
    /// A successful compaction.
    pub fn success(
        reason: CompactionReason,
        result: CompactionEventResult,
        will_retry: bool,
    ) -> Self {
        CompactionEnd {
            kind: "compaction_end",
            reason,
            result: Some(result),
            aborted: false,
            will_retry,
            error_message: None,
        }
    }

    /// A failed one: `message` gets the reason's prefix.
    pub fn failure(reason: CompactionReason, message: &str) -> Self {
        CompactionEnd {
            kind: "compaction_end",
            reason,
            result: None,
            aborted: false,
            will_retry: false,
            error_message: Some(format!("{}{message}", reason.error_prefix())),
        }
    }

    /// A cancelled one.
    pub fn aborted(reason: CompactionReason) -> Self {
        CompactionEnd {
            kind: "compaction_end",
            reason,
            result: None,
            aborted: true,
            will_retry: false,
            error_message: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_matches_pi() {
        let ok = CompactionEnd::success(
            CompactionReason::Manual,
            CompactionEventResult {
                summary: "S".into(),
                first_kept_entry_id: "c401f9ec".into(),
                tokens_before: 120,
                estimated_tokens_after: 1381,
                usage: None,
                details: Some(serde_json::json!({"readFiles": [], "modifiedFiles": []})),
            },
            false,
        );
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"type":"compaction_end","reason":"manual","result":{"summary":"S","firstKeptEntryId":"c401f9ec","tokensBefore":120,"estimatedTokensAfter":1381,"details":{"readFiles":[],"modifiedFiles":[]}},"aborted":false,"willRetry":false}"#
        );
        let bad = CompactionEnd::failure(CompactionReason::Manual, "Already compacted");
        assert_eq!(
            serde_json::to_string(&bad).unwrap(),
            r#"{"type":"compaction_end","reason":"manual","aborted":false,"willRetry":false,"errorMessage":"Compaction failed: Already compacted"}"#
        );
        assert_eq!(
            serde_json::to_string(&CompactionStart::new(CompactionReason::Threshold)).unwrap(),
            r#"{"type":"compaction_start","reason":"threshold"}"#
        );
    }
}
