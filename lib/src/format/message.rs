//! Agent messages and content blocks, as pi stores them inside `message`
//! entries and streams them in JSON-mode events.
//!
//! Roles: `user`, `assistant`, `toolResult`, `bashExecution`, `custom`,
//! `system` (pi ≥ 0.86: the sectioned system prompt recorded as messages),
//! plus the in-memory-only `branchSummary` and `compactionSummary` that
//! context building produces. Anything else is kept as [`AgentMessage::Unknown`].

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::num::Num;

/// Deserialises a present-but-`null` optional field as `Some(Value::Null)`,
/// so that it is written back as `null` instead of disappearing.
pub(crate) fn keep_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Parses `map` (with its tag key already removed) into `T`; on failure
/// gives the map back with the tag restored at the front, for an `Unknown`
/// variant that keeps every byte of meaning.
pub(crate) fn typed_or_raw<T: DeserializeOwned>(
    mut map: Map<String, Value>,
    tag_key: &str,
) -> Result<T, Map<String, Value>> {
    let tag = map.shift_remove(tag_key);
    // Deserialising from a borrowed value copies only what `T` keeps; the
    // map itself is not cloned first.
    let value = Value::Object(map);
    match T::deserialize(&value) {
        Ok(v) => Ok(v),
        Err(_) => {
            let map = match value {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            let mut out = Map::with_capacity(map.len() + 1);
            if let Some(t) = tag {
                out.insert(tag_key.to_string(), t);
            }
            out.extend(map);
            Err(out)
        }
    }
}

pub(crate) use super::tagged::serialize_tagged;

/// Declares a tag-dispatched enum over structs with an `Unknown` catch-all.
macro_rules! tagged_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident tag $tag:literal {
            $( $(#[$vmeta:meta])* $variant:ident($ty:ty) = $value:literal, )*
        }
    ) => {
        $(#[$meta])*
        // Where size matters the declaration boxes the variants (a loaded
        // session holds one `Entry` per line, so `Entry` boxes them all and
        // `AgentMessage` boxes its one large variant, `Assistant`).
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vmeta])* $variant($ty), )*
            /// A variant this version does not know (or could not parse),
            /// kept whole.
            Unknown(Map<String, Value>),
        }

        impl $name {
            /// The tag value (`type` / `role`) of this variant.
            pub fn tag(&self) -> &str {
                match self {
                    $( $name::$variant(_) => $value, )*
                    $name::Unknown(m) => m.get($tag).and_then(Value::as_str).unwrap_or(""),
                }
            }

            /// Builds the variant from a JSON object; never fails for objects.
            pub fn from_map(map: Map<String, Value>) -> Self {
                let tag = map.get($tag).and_then(Value::as_str).unwrap_or("").to_string();
                match tag.as_str() {
                    $( $value => match typed_or_raw::<$ty>(map, $tag) {
                        Ok(v) => $name::$variant(v),
                        Err(raw) => $name::Unknown(raw),
                    }, )*
                    _ => $name::Unknown(map),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( $name::$variant(v) => serialize_tagged(s, $tag, $value, v), )*
                    $name::Unknown(m) => serde::Serialize::serialize(m, s),
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                use serde::de::Error;
                match <Value as serde::Deserialize>::deserialize(d)? {
                    Value::Object(map) => Ok($name::from_map(map)),
                    other => Err(D::Error::custom(format!(
                        "expected a JSON object, found {}",
                        crate::format::message::json_kind(&other)
                    ))),
                }
            }
        }
    };
}
pub(crate) use tagged_enum;

/// A short name of a JSON value's kind, for error messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `{"type":"text","text":…}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    pub text: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"type":"thinking","thinking":…,"thinkingSignature":…}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingBlock {
    pub thinking: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"type":"image","data":<base64>,"mimeType":…}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageBlock {
    pub data: String,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `{"type":"toolCall","id":…,"name":…,"arguments":{…}}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallBlock {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

tagged_enum! {
    /// One content block of a message.
    pub enum ContentBlock tag "type" {
        Text(TextBlock) = "text",
        Thinking(ThinkingBlock) = "thinking",
        Image(ImageBlock) = "image",
        ToolCall(ToolCallBlock) = "toolCall",
    }
}

impl ContentBlock {
    /// A plain text block.
    pub fn text(t: impl Into<String>) -> Self {
        ContentBlock::Text(TextBlock {
            text: t.into(),
            extra: Map::new(),
        })
    }
}

/// User-style content: a bare string or an array of blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl Default for UserContent {
    fn default() -> Self {
        UserContent::Blocks(Vec::new())
    }
}

impl UserContent {
    /// All text of the content, blocks joined by `sep`; images are skipped.
    pub fn joined_text(&self, sep: &str) -> String {
        match self {
            UserContent::Text(s) => s.clone(),
            UserContent::Blocks(b) => blocks_text(b, sep),
        }
    }

    /// The blocks (a bare string becomes one text block).
    pub fn to_blocks(&self) -> Vec<ContentBlock> {
        match self {
            UserContent::Text(s) => vec![ContentBlock::text(s.clone())],
            UserContent::Blocks(b) => b.clone(),
        }
    }
}

/// Text of the text blocks, joined by `sep`.
pub fn blocks_text(blocks: &[ContentBlock], sep: &str) -> String {
    let mut out = String::new();
    let mut first = true;
    for b in blocks {
        if let ContentBlock::Text(t) = b {
            if !first {
                out.push_str(sep);
            }
            out.push_str(&t.text);
            first = false;
        }
    }
    out
}

/// Cost of one response in dollars, by token class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Cost {
    #[serde(default)]
    pub input: Num,
    #[serde(default)]
    pub output: Num,
    #[serde(rename = "cacheRead", default)]
    pub cache_read: Num,
    #[serde(rename = "cacheWrite", default)]
    pub cache_write: Num,
    #[serde(default)]
    pub total: Num,
    /// pi 1.x: whether `total` came from the provider's own bill.
    #[serde(
        rename = "totalFromProvider",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub total_from_provider: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Token usage of one response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Usage {
    #[serde(default)]
    pub input: Num,
    #[serde(default)]
    pub output: Num,
    #[serde(rename = "cacheRead", default)]
    pub cache_read: Num,
    #[serde(rename = "cacheWrite", default)]
    pub cache_write: Num,
    /// pi 1.x: reasoning tokens (part of `output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Num>,
    #[serde(rename = "totalTokens", default)]
    pub total_tokens: Num,
    #[serde(default)]
    pub cost: Cost,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `role: "user"`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    pub content: UserContent,
    #[serde(default)]
    pub timestamp: Num,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `role: "assistant"`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    pub content: Vec<ContentBlock>,
    #[serde(default)]
    pub api: String,
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub usage: Usage,
    #[serde(rename = "stopReason", default)]
    pub stop_reason: String,
    #[serde(default)]
    pub timestamp: Num,
    #[serde(
        rename = "errorMessage",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub error_message: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `role: "toolResult"`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    #[serde(rename = "toolCallId")]
    pub tool_call_id: String,
    #[serde(rename = "toolName", default)]
    pub tool_name: String,
    pub content: Vec<ContentBlock>,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    #[serde(rename = "isError", default)]
    pub is_error: bool,
    /// pi 1.x: how long the tool ran.
    #[serde(
        rename = "durationMs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<Num>,
    #[serde(default)]
    pub timestamp: Num,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `role: "bashExecution"` — a user `!command` and its output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BashExecutionMessage {
    pub command: String,
    #[serde(default)]
    pub output: String,
    #[serde(rename = "exitCode", default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<Num>,
    #[serde(default)]
    pub cancelled: bool,
    #[serde(default)]
    pub truncated: bool,
    #[serde(
        rename = "fullOutputPath",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub full_output_path: Option<String>,
    #[serde(default)]
    pub timestamp: Num,
    #[serde(
        rename = "excludeFromContext",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub exclude_from_context: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `role: "custom"` — an extension message that is part of the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomMessage {
    #[serde(rename = "customType")]
    pub custom_type: String,
    pub content: UserContent,
    #[serde(default)]
    pub display: bool,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    #[serde(default)]
    pub timestamp: Num,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `role: "system"` — the sectioned system prompt (pi ≥ 0.86), a full
/// prompt or a patch of sections and tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemMessage {
    #[serde(default)]
    pub content: UserContent,
    /// Section name → text, or `null` for a removed section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sections: Option<Map<String, Value>>,
    #[serde(default)]
    pub timestamp: Num,
    /// Full tool definitions `{name, description, parameters}`.
    #[serde(
        rename = "toolsAdded",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tools_added: Option<Vec<Value>>,
    /// `{name}` objects.
    #[serde(
        rename = "toolsRemoved",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tools_removed: Option<Vec<Value>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `role: "branchSummary"` — built in memory from a `branch_summary` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BranchSummaryMessage {
    pub summary: String,
    #[serde(rename = "fromId")]
    pub from_id: String,
    pub timestamp: Num,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `role: "compactionSummary"` — built in memory from a `compaction` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionSummaryMessage {
    pub summary: String,
    #[serde(rename = "tokensBefore")]
    pub tokens_before: Num,
    pub timestamp: Num,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

tagged_enum! {
    /// A message of the conversation, tagged by `role`.
    pub enum AgentMessage tag "role" {
        User(UserMessage) = "user",
        Assistant(Box<AssistantMessage>) = "assistant",
        ToolResult(Box<ToolResultMessage>) = "toolResult",
        BashExecution(Box<BashExecutionMessage>) = "bashExecution",
        Custom(Box<CustomMessage>) = "custom",
        System(Box<SystemMessage>) = "system",
        BranchSummary(BranchSummaryMessage) = "branchSummary",
        CompactionSummary(CompactionSummaryMessage) = "compactionSummary",
    }
}

impl AgentMessage {
    /// The role name.
    pub fn role(&self) -> &str {
        self.tag()
    }

    /// Human-readable text of the message (text blocks joined by newlines).
    pub fn text(&self) -> String {
        match self {
            AgentMessage::User(m) => m.content.joined_text("\n"),
            AgentMessage::Assistant(m) => blocks_text(&m.content, "\n"),
            AgentMessage::ToolResult(m) => blocks_text(&m.content, "\n"),
            AgentMessage::BashExecution(m) => format!("$ {}\n{}", m.command, m.output),
            AgentMessage::Custom(m) => m.content.joined_text("\n"),
            AgentMessage::System(m) => {
                let mut parts = vec![m.content.joined_text("\n")];
                if let Some(s) = &m.sections {
                    parts.extend(s.values().filter_map(|v| v.as_str().map(str::to_string)));
                }
                parts.retain(|p| !p.is_empty());
                parts.join("\n\n")
            }
            AgentMessage::BranchSummary(m) => m.summary.clone(),
            AgentMessage::CompactionSummary(m) => m.summary.clone(),
            AgentMessage::Unknown(m) => match m.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(v @ Value::Array(_)) => serde_json::from_value::<Vec<ContentBlock>>(v.clone())
                    .map(|b| blocks_text(&b, "\n"))
                    .unwrap_or_default(),
                _ => String::new(),
            },
        }
    }

    /// The message timestamp (epoch milliseconds), when it has one.
    pub fn timestamp_ms(&self) -> Option<i64> {
        Some(match self {
            AgentMessage::User(m) => m.timestamp.as_i64(),
            AgentMessage::Assistant(m) => m.timestamp.as_i64(),
            AgentMessage::ToolResult(m) => m.timestamp.as_i64(),
            AgentMessage::BashExecution(m) => m.timestamp.as_i64(),
            AgentMessage::Custom(m) => m.timestamp.as_i64(),
            AgentMessage::System(m) => m.timestamp.as_i64(),
            AgentMessage::BranchSummary(m) => m.timestamp.as_i64(),
            AgentMessage::CompactionSummary(m) => m.timestamp.as_i64(),
            AgentMessage::Unknown(m) => return m.get("timestamp").and_then(Value::as_i64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(s: &str) {
        let m: AgentMessage = serde_json::from_str(s).unwrap();
        let back = serde_json::to_string(&m).unwrap();
        let a: Value = serde_json::from_str(s).unwrap();
        let b: Value = serde_json::from_str(&back).unwrap();
        assert_eq!(a, b, "{s}\n{back}");
    }

    #[test]
    fn messages_round_trip_with_unknown_fields() {
        round_trip(r#"{"role":"user","content":"hi","timestamp":1,"mood":"x"}"#);
        round_trip(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"s"},{"type":"text","text":"a"},{"type":"toolCall","id":"c","name":"read","arguments":{"path":"x"}},{"type":"hologram","z":1}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0.1,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.1}},"stopReason":"stop","timestamp":5,"responseId":"r"}"#,
        );
        round_trip(
            r#"{"role":"toolResult","toolCallId":"c","toolName":"read","content":[],"details":null,"isError":false,"timestamp":1}"#,
        );
        round_trip(r#"{"role":"hologram","content":"zzz"}"#);
        round_trip(r#"{"role":"user","content":42}"#);
        round_trip(
            r#"{"role":"system","content":"","sections":{"preamble":"p","skills":null},"timestamp":3,"toolsAdded":[{"name":"read"}]}"#,
        );
    }

    #[test]
    fn serialises_tag_first() {
        let m: AgentMessage =
            serde_json::from_str(r#"{"content":"x","role":"user","timestamp":1}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"user","content":"x","timestamp":1}"#
        );
    }
}

/// A message that is either borrowed (from a loaded session) or owned
/// (made on the way: a summary turned into a message, edited content).
/// Contexts and requests hold these, so a long session is not copied to
/// build them. Reads as an [`AgentMessage`]; serializes as one.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageRef<'a> {
    Borrowed(&'a AgentMessage),
    Owned(Box<AgentMessage>),
}

impl<'a> MessageRef<'a> {
    /// The message itself (a copy when borrowed).
    pub fn into_owned(self) -> AgentMessage {
        match self {
            MessageRef::Borrowed(m) => m.clone(),
            MessageRef::Owned(m) => *m,
        }
    }

    /// As a `Cow`: borrowed stays borrowed.
    pub fn into_cow(self) -> std::borrow::Cow<'a, AgentMessage> {
        match self {
            MessageRef::Borrowed(m) => std::borrow::Cow::Borrowed(m),
            MessageRef::Owned(m) => std::borrow::Cow::Owned(*m),
        }
    }
}

impl std::ops::Deref for MessageRef<'_> {
    type Target = AgentMessage;
    fn deref(&self) -> &AgentMessage {
        match self {
            MessageRef::Borrowed(m) => m,
            MessageRef::Owned(m) => m,
        }
    }
}

impl std::borrow::Borrow<AgentMessage> for MessageRef<'_> {
    fn borrow(&self) -> &AgentMessage {
        self
    }
}

impl From<AgentMessage> for MessageRef<'_> {
    fn from(m: AgentMessage) -> Self {
        MessageRef::Owned(Box::new(m))
    }
}

/// A message read from JSON is owned.
impl<'de> Deserialize<'de> for MessageRef<'_> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        AgentMessage::deserialize(d).map(Into::into)
    }
}

impl Serialize for MessageRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}
