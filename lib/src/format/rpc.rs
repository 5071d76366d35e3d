//! The records of `pi-run --mode rpc` (pi 1.6.0's RPC protocol): the
//! commands a client writes on stdin, one JSON object a line, and the
//! `response` records written back, in pi's key order.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One client command (`{"type": …, "id"?: …, …}`); fields pi does not
/// know are ignored, as pi ignores them.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RpcCommand {
    Prompt {
        message: String,
        #[serde(default)]
        images: Vec<Value>,
        #[serde(rename = "streamingBehavior", default)]
        streaming_behavior: Option<String>,
    },
    Steer {
        message: String,
        #[serde(default)]
        images: Vec<Value>,
    },
    FollowUp {
        message: String,
        #[serde(default)]
        images: Vec<Value>,
    },
    Abort,
    ClearQueue,
    NewSession {
        #[serde(rename = "parentSession", default)]
        parent_session: Option<String>,
    },
    GetState,
    SetModel {
        provider: String,
        #[serde(rename = "modelId")]
        model_id: String,
    },
    CycleModel,
    GetAvailableModels,
    SetThinkingLevel {
        level: String,
    },
    CycleThinkingLevel,
    GetAvailableThinkingLevels,
    SetSteeringMode {
        mode: String,
    },
    SetFollowUpMode {
        mode: String,
    },
    Compact {
        #[serde(rename = "customInstructions", default)]
        custom_instructions: Option<String>,
    },
    SetAutoCompaction {
        enabled: bool,
    },
    SetAutoRetry {
        enabled: bool,
    },
    AbortRetry,
    Bash {
        command: String,
        #[serde(rename = "excludeFromContext", default)]
        exclude_from_context: Option<bool>,
    },
    AbortBash,
    GetSessionStats,
    ExportHtml {
        #[serde(rename = "outputPath", default)]
        output_path: Option<String>,
    },
    SwitchSession {
        #[serde(rename = "sessionPath")]
        session_path: String,
    },
    Fork {
        #[serde(rename = "entryId")]
        entry_id: String,
    },
    Clone,
    GetForkMessages,
    GetEntries {
        #[serde(default)]
        since: Option<String>,
    },
    GetTree,
    GetLastAssistantText,
    SetSessionName {
        name: String,
    },
    GetMessages,
    GetCommands,
}

/// Every command type pi 1.6.0 knows (anything else is `Unknown command`).
pub const COMMANDS: &[&str] = &[
    "prompt",
    "steer",
    "follow_up",
    "abort",
    "clear_queue",
    "new_session",
    "get_state",
    "set_model",
    "cycle_model",
    "get_available_models",
    "set_thinking_level",
    "cycle_thinking_level",
    "get_available_thinking_levels",
    "set_steering_mode",
    "set_follow_up_mode",
    "compact",
    "set_auto_compaction",
    "set_auto_retry",
    "abort_retry",
    "bash",
    "abort_bash",
    "get_session_stats",
    "export_html",
    "switch_session",
    "fork",
    "clone",
    "get_fork_messages",
    "get_entries",
    "get_tree",
    "get_last_assistant_text",
    "set_session_name",
    "get_messages",
    "get_commands",
];

/// `{id?, type:"response", command, success, data?, error?}`. `data:
/// Some(Value::Null)` writes `"data":null` (the `cycle_*` null answers);
/// `None` omits it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RpcResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub command: String,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RpcResponse {
    pub fn ok(id: Option<Value>, command: &str, data: Option<Value>) -> RpcResponse {
        RpcResponse {
            id,
            kind: "response",
            command: command.to_string(),
            success: true,
            data,
            error: None,
        }
    }

    pub fn err(id: Option<Value>, command: &str, error: impl Into<String>) -> RpcResponse {
        RpcResponse {
            id,
            kind: "response",
            command: command.to_string(),
            success: false,
            data: None,
            error: Some(error.into()),
        }
    }
}

/// `get_state`'s data.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RpcState {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Value>,
    #[serde(rename = "thinkingLevel")]
    pub thinking_level: String,
    #[serde(rename = "isStreaming")]
    pub is_streaming: bool,
    #[serde(rename = "isCompacting")]
    pub is_compacting: bool,
    #[serde(rename = "steeringMode")]
    pub steering_mode: &'static str,
    #[serde(rename = "followUpMode")]
    pub follow_up_mode: &'static str,
    #[serde(rename = "sessionFile", skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    #[serde(rename = "sessionName", skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    #[serde(rename = "autoCompactionEnabled")]
    pub auto_compaction_enabled: bool,
    #[serde(rename = "messageCount")]
    pub message_count: usize,
    #[serde(rename = "pendingMessageCount")]
    pub pending_message_count: usize,
    /// The run's sandbox (beyond pi; absent without one, as pi has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
}

/// `get_session_stats`' token totals.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RpcTokens {
    pub input: u64,
    pub output: u64,
    #[serde(rename = "cacheRead")]
    pub cache_read: u64,
    #[serde(rename = "cacheWrite")]
    pub cache_write: u64,
    pub total: u64,
}

/// `get_session_stats`' `contextUsage` (`null` token counts right after a
/// compaction).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RpcContextUsage {
    pub tokens: Option<u64>,
    #[serde(rename = "contextWindow")]
    pub context_window: u64,
    pub percent: Option<f64>,
}

/// `get_session_stats`' data.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RpcSessionStats {
    #[serde(rename = "sessionFile", skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    #[serde(rename = "userMessages")]
    pub user_messages: u64,
    #[serde(rename = "assistantMessages")]
    pub assistant_messages: u64,
    #[serde(rename = "toolCalls")]
    pub tool_calls: u64,
    #[serde(rename = "toolResults")]
    pub tool_results: u64,
    #[serde(rename = "totalMessages")]
    pub total_messages: u64,
    pub tokens: RpcTokens,
    pub cost: f64,
    #[serde(rename = "contextUsage", skip_serializing_if = "Option::is_none")]
    pub context_usage: Option<RpcContextUsage>,
}

/// `bash`'s data.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RpcBashResult {
    pub output: String,
    #[serde(rename = "exitCode", skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(rename = "fullOutputPath", skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_responses_keep_pi_key_order() {
        let c: RpcCommand = serde_json::from_str(
            r#"{"id":"q4","type":"prompt","message":"P","streamingBehavior":"followUp"}"#,
        )
        .unwrap();
        assert!(
            matches!(c, RpcCommand::Prompt { streaming_behavior: Some(ref b), .. } if b == "followUp")
        );
        let c: RpcCommand = serde_json::from_str(r#"{"type":"get_state"}"#).unwrap();
        assert!(matches!(c, RpcCommand::GetState));
        let r = RpcResponse::ok(Some("x".into()), "cycle_model", Some(Value::Null));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"id":"x","type":"response","command":"cycle_model","success":true,"data":null}"#
        );
        let r = RpcResponse::err(None, "parse", "bad");
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"type":"response","command":"parse","success":false,"error":"bad"}"#
        );
    }
}
