//! The JSONL records `pi-session` prints. Each is one flat object tagged by
//! `type`; consumers must ignore fields they do not know.

use serde::Serialize;
use serde_json::Value;

/// `{"type":"session",…}` — one row of `pi-session ls` / `search`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    pub path: String,
    pub cwd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "parentSession", skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// A built-in subagent's child: its parent's session id.
    #[serde(rename = "subagentOf", skip_serializing_if = "Option::is_none")]
    pub subagent_of: Option<String>,
    pub created: String,
    pub modified: String,
    #[serde(rename = "messageCount")]
    pub message_count: u64,
    #[serde(rename = "firstMessage")]
    pub first_message: String,
    pub tokens: u64,
    pub cost: f64,
    pub bytes: u64,
    /// How the session's last `pi-run` run ended (its stored outcome).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeRecord>,
    /// How many runs stored an outcome in the session.
    #[serde(skip_serializing_if = "is_zero")]
    pub runs: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The stored outcome of a session's last run, as `ls` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct OutcomeRecord {
    #[serde(rename = "stopReason")]
    pub stop_reason: String,
    #[serde(rename = "exitCode")]
    pub exit_code: i32,
    /// The run's cost, its subagent children included (US dollars).
    pub cost: f64,
    pub turns: u64,
    #[serde(rename = "durationMs")]
    pub duration_ms: u64,
}

/// `{"type":"diagnostic",…}` — a warning or error tied to a file and line.
#[derive(Debug, Clone, Serialize)]
pub struct DiagnosticRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub severity: &'static str,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub message: String,
}

/// `{"type":"match",…}` — one hit of `pi-session search`.
#[derive(Debug, Clone, Serialize)]
pub struct MatchRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    pub path: String,
    #[serde(rename = "entryId")]
    pub entry_id: String,
    pub line: usize,
    pub role: String,
    pub text: String,
}

/// `{"type":"tree_node",…}` — one entry of `pi-session tree`.
#[derive(Debug, Clone, Serialize)]
pub struct TreeNodeRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    #[serde(rename = "parentId")]
    pub parent_id: Option<String>,
    #[serde(rename = "entryType")]
    pub entry_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub depth: usize,
    pub children: usize,
    #[serde(rename = "onBranch")]
    pub on_branch: bool,
    pub leaf: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The subagent child this entry started or reports on (an `Agent`
    /// tool result, a background completion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
    pub summary: String,
    pub timestamp: String,
}

/// `{"type":"context",…}` — header record of `pi-session context`.
#[derive(Debug, Clone, Serialize)]
pub struct ContextRecord {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    #[serde(rename = "leafId")]
    pub leaf_id: Option<String>,
    #[serde(rename = "thinkingLevel")]
    pub thinking_level: String,
    pub model: Value,
    pub messages: usize,
}

/// `{"type":"context_message",…}` — one message of `pi-session context`.
#[derive(Debug, Clone, Serialize)]
pub struct ContextMessageRecord<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(rename = "entryId")]
    pub entry_id: &'a str,
    pub message: &'a crate::format::AgentMessage,
}
