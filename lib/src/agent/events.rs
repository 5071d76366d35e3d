//! The events of a run, as pi 1.6.0 writes them in `--mode json` (key order
//! as emitted; absent values omitted), and [`Event`], the form the loop hands
//! them to its consumer in: the busy events (messages, streaming updates,
//! turn and agent ends) borrow the loop's own data and become JSON only
//! when a consumer reads them, written straight to its output or built into
//! a value, so a consumer that ignores them (text mode, a subagent child)
//! pays nothing for them.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

use crate::format::message::AssistantMessage;
use crate::format::AgentMessage;
use crate::provider::StreamEvent;
use crate::tools::ToolOutput;

/// One event of a run as its consumer receives it (see the module comment).
#[derive(Clone, Copy)]
pub enum Event<'a> {
    /// Any event already built as JSON.
    Value(&'a Value),
    /// `message_start` / `message_end`.
    Message {
        kind: &'static str,
        message: &'a AgentMessage,
    },
    /// `message_update` (see [`message_update`]).
    Update {
        event: &'a StreamEvent,
        partial: &'a AssistantMessage,
    },
    /// `turn_end`.
    TurnEnd {
        message: &'a AgentMessage,
        tool_results: &'a [AgentMessage],
    },
    /// `agent_end`.
    AgentEnd {
        messages: &'a [AgentMessage],
        will_retry: bool,
    },
}

impl<'a> From<&'a Value> for Event<'a> {
    fn from(v: &'a Value) -> Self {
        Event::Value(v)
    }
}

impl Event<'_> {
    /// The event's `type`.
    pub fn kind(&self) -> &str {
        match self {
            Event::Value(v) => v.get("type").and_then(Value::as_str).unwrap_or(""),
            Event::Message { kind, .. } => kind,
            Event::Update { .. } => "message_update",
            Event::TurnEnd { .. } => "turn_end",
            Event::AgentEnd { .. } => "agent_end",
        }
    }

    /// The event as JSON (built now unless it already is).
    pub fn to_value(&self) -> Cow<'_, Value> {
        match self {
            Event::Value(v) => Cow::Borrowed(v),
            other => Cow::Owned(serde_json::to_value(other).unwrap_or(Value::Null)),
        }
    }
}

/// Serialises exactly as the built value would (same keys, same order).
impl Serialize for Event<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Event::Value(v) => v.serialize(s),
            Event::Message { kind, message } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", kind)?;
                m.serialize_entry("message", message)?;
                m.end()
            }
            Event::Update { event, partial } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "message_update")?;
                m.serialize_entry("usage", &partial.usage)?;
                m.serialize_entry("assistantMessageEvent", &event.to_json())?;
                m.end()
            }
            Event::TurnEnd {
                message,
                tool_results,
            } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "turn_end")?;
                m.serialize_entry("message", message)?;
                m.serialize_entry("toolResults", tool_results)?;
                m.end()
            }
            Event::AgentEnd {
                messages,
                will_retry,
            } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "agent_end")?;
                m.serialize_entry("messages", messages)?;
                m.serialize_entry("willRetry", will_retry)?;
                m.end()
            }
        }
    }
}

/// `{type}` only.
pub fn simple(kind: &str) -> Value {
    json!({ "type": kind })
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

/// `queue_update`: both client-visible queues in full.
pub fn queue_update(steering: &[String], follow_up: &[String]) -> Value {
    json!({ "type": "queue_update", "steering": steering, "followUp": follow_up })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages of every role with every kind of block, parsed from
    /// session-shaped JSON (so unknown fields ride along as they do).
    fn messages() -> Vec<AgentMessage> {
        let lines = [
            json!({"role": "user", "content": [{"type": "text", "text": "hi \"there\""}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}], "timestamp": 1}),
            json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"}, {"type": "text", "text": "ok\n"}, {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a", "z": 1, "b": [1.5, null]}}], "api": "openai-completions", "provider": "p", "model": "m", "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3, "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.30000000000000004}}, "stopReason": "toolUse", "timestamp": 2, "durationMs": 7}),
            json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"type": "text", "text": "x"}], "details": {"k": [1, 2]}, "isError": false, "timestamp": 3}),
        ];
        lines
            .into_iter()
            .map(|v| serde_json::from_value(v).expect("sample message"))
            .collect()
    }

    /// Each borrowed event writes the very bytes its built value does,
    /// and `to_value` builds that value.
    #[test]
    fn borrowed_events_serialise_as_the_built_values() {
        let ms = messages();
        let AgentMessage::Assistant(partial) = &ms[1] else {
            panic!("the second sample is the assistant's");
        };
        let delta = StreamEvent::TextDelta {
            content_index: 1,
            delta: "ok".into(),
        };
        let cases: Vec<(Event<'_>, Value)> = vec![
            (
                Event::Message {
                    kind: "message_start",
                    message: &ms[0],
                },
                json!({"type": "message_start", "message": &ms[0]}),
            ),
            (
                Event::Message {
                    kind: "message_end",
                    message: &ms[1],
                },
                json!({"type": "message_end", "message": &ms[1]}),
            ),
            (
                Event::Update {
                    event: &delta,
                    partial,
                },
                json!({"type": "message_update", "usage": partial.usage, "assistantMessageEvent": delta.to_json()}),
            ),
            (
                Event::TurnEnd {
                    message: &ms[1],
                    tool_results: &ms[2..],
                },
                json!({"type": "turn_end", "message": &ms[1], "toolResults": &ms[2..]}),
            ),
            (
                Event::AgentEnd {
                    messages: &ms,
                    will_retry: true,
                },
                json!({"type": "agent_end", "messages": &ms, "willRetry": true}),
            ),
        ];
        for (ev, built) in cases {
            let direct = serde_json::to_string(&ev).expect("serialises");
            assert_eq!(direct, built.to_string(), "{}", ev.kind());
            assert_eq!(*ev.to_value(), built, "{}", ev.kind());
            assert_eq!(Some(ev.kind()), built["type"].as_str());
        }
        let v = json!({"type": "turn_start"});
        assert!(matches!(Event::from(&v).to_value(), Cow::Borrowed(_)));
    }
}
