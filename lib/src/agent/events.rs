//! The events of a run, as pi 1.6.0 writes them in `--mode json` (key order
//! as emitted; absent values omitted).

use serde_json::{json, Map, Value};

use crate::format::message::AssistantMessage;
use crate::format::AgentMessage;
use crate::provider::StreamEvent;
use crate::tools::ToolOutput;

/// `{type}` only.
pub fn simple(kind: &str) -> Value {
    json!({ "type": kind })
}

/// `message_start` / `message_end`.
pub fn message(kind: &str, m: &AgentMessage) -> Value {
    json!({ "type": kind, "message": m })
}

/// `message_update` (pi ≥ 0.84: no cumulative message, the usage so far).
pub fn message_update(ev: &StreamEvent, partial: &AssistantMessage) -> Value {
    json!({ "type": "message_update", "usage": partial.usage, "assistantMessageEvent": ev.to_json() })
}

/// The `{content, details?, structuredContent?, isError?}` of a tool result.
pub fn tool_result_value(out: &ToolOutput) -> Value {
    let mut m = Map::new();
    m.insert(
        "content".into(),
        serde_json::to_value(&out.content).unwrap_or(Value::Null),
    );
    if let Some(d) = &out.details {
        m.insert("details".into(), d.clone());
    }
    if let Some(s) = &out.structured {
        m.insert("structuredContent".into(), s.clone());
    }
    if out.flag_error {
        m.insert("isError".into(), Value::Bool(true));
    }
    Value::Object(m)
}

/// `tool_execution_start`.
pub fn tool_start(id: &str, name: &str, args: &Value) -> Value {
    json!({ "type": "tool_execution_start", "toolCallId": id, "toolName": name, "args": args })
}

/// `tool_execution_update`.
pub fn tool_update(id: &str, name: &str, args: &Value, partial: &ToolOutput) -> Value {
    json!({ "type": "tool_execution_update", "toolCallId": id, "toolName": name, "args": args, "partialResult": tool_result_value(partial) })
}

/// `tool_execution_end` (`durationMs` only for calls that ran).
pub fn tool_end(id: &str, name: &str, out: &ToolOutput, duration_ms: Option<u64>) -> Value {
    let mut v = json!({ "type": "tool_execution_end", "toolCallId": id, "toolName": name, "result": tool_result_value(out), "isError": out.is_error });
    if let (Some(d), Value::Object(m)) = (duration_ms, &mut v) {
        m.insert("durationMs".into(), d.into());
    }
    v
}

/// `turn_end`.
pub fn turn_end(m: &AgentMessage, tool_results: &[AgentMessage]) -> Value {
    json!({ "type": "turn_end", "message": m, "toolResults": tool_results })
}

/// `agent_end`.
pub fn agent_end(messages: &[AgentMessage], will_retry: bool) -> Value {
    json!({ "type": "agent_end", "messages": messages, "willRetry": will_retry })
}

/// `queue_update`: both client-visible queues in full.
pub fn queue_update(steering: &[String], follow_up: &[String]) -> Value {
    json!({ "type": "queue_update", "steering": steering, "followUp": follow_up })
}
