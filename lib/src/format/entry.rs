//! Session file lines: the header and the entry types of pi's session
//! format version 3 (plus `usage` and `context_edit`, added by pi 1.x).
//!
//! Key order follows what pi writes, type by type (each struct declares
//! its fields in the order pi writes them), so a line read and written
//! back is unchanged.
//! Unknown entry types, and entries of a known type that fail to parse, are
//! kept whole as [`Entry::Unknown`]; they still take part in the tree when
//! they carry `id` / `parentId`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::message::{
    keep_null, serialize_tagged, tagged_enum, typed_or_raw, AgentMessage, Usage, UserContent,
};
use super::num::Num;

/// The session format version this toolkit writes.
pub const CURRENT_SESSION_VERSION: u64 = 3;

/// The first line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Absent in version 1 files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Num>,
    pub id: String,
    #[serde(default)]
    pub timestamp: String,
    /// Working directory the session was started in (empty in old files).
    #[serde(default)]
    pub cwd: String,
    /// Path of the session this one was forked from.
    #[serde(
        rename = "parentSession",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub parent_session: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SessionHeader {
    /// The format version (1 when absent).
    pub fn version(&self) -> u64 {
        self.version.as_ref().map(Num::as_u64).unwrap_or(1)
    }

    /// A new version-3 header.
    pub fn new(id: String, timestamp: String, cwd: String, parent: Option<String>) -> Self {
        SessionHeader {
            version: Some(Num::int(CURRENT_SESSION_VERSION)),
            id,
            timestamp,
            cwd,
            parent_session: parent,
            extra: Map::new(),
        }
    }

    /// Parses a header object (`type` must be `"session"`).
    pub fn from_map(mut map: Map<String, Value>) -> Result<Self, String> {
        match map.get("type").and_then(Value::as_str) {
            Some("session") => {}
            Some(t) => return Err(format!("first line has type \"{t}\", expected \"session\"")),
            None => return Err("first line has no \"type\" field".into()),
        }
        map.shift_remove("type");
        if !map.get("id").is_some_and(Value::is_string) {
            return Err("session header has no string \"id\"".into());
        }
        header_version(map.get("version")).map_err(|e| e.to_string())?;
        serde_json::from_value(Value::Object(map)).map_err(|e| format!("session header: {e}"))
    }
}

/// Why a header's `version` cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VersionError {
    /// A well-formed version newer than this toolkit knows.
    #[error("unsupported session version {0} (this toolkit reads versions 1 to {max})", max = CURRENT_SESSION_VERSION)]
    Unsupported(String),
    /// Not a version at all: a string, a fraction, zero or negative.
    #[error("invalid session version {0} (expected the number 1, 2 or 3)")]
    Invalid(String),
}

/// The format version a header's `version` value declares, checked the same
/// way by every reader (loader, listing, id lookup): absent or `null` is 1
/// (pi's rule), an integer 1 to 3 is itself, a larger number (`4`, `1e300`)
/// is unsupported, and anything else (`"3"`, `-1`, `0`, `2.5`) is invalid.
/// pi 1.6.0 is laxer (it treats `"3"` and `1e300` as current and migrates
/// `-1` as version 1); a file that says something this odd is refused here
/// rather than guessed at or rewritten.
pub fn header_version(v: Option<&Value>) -> Result<u64, VersionError> {
    let n = match v {
        None | Some(Value::Null) => return Ok(1),
        Some(Value::Number(n)) => n,
        Some(other) => return Err(VersionError::Invalid(other.to_string())),
    };
    match n.as_u64() {
        Some(v @ 1..=CURRENT_SESSION_VERSION) => Ok(v),
        Some(0) => Err(VersionError::Invalid(n.to_string())),
        Some(_) => Err(VersionError::Unsupported(n.to_string())),
        None => match n.as_f64() {
            Some(f) if f > CURRENT_SESSION_VERSION as f64 => {
                Err(VersionError::Unsupported(n.to_string()))
            }
            _ => Err(VersionError::Invalid(n.to_string())),
        },
    }
}

impl SessionHeader {
    /// The header as one JSON line (without the newline).
    pub fn to_line(&self) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::new(&mut out);
        // Serialising a map of strings and numbers cannot fail.
        let _ = serialize_tagged(&mut ser, "type", "session", self);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// `message` — one [`AgentMessage`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    pub message: AgentMessage,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `thinking_level_change`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingLevelChangeEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(rename = "thinkingLevel")]
    pub thinking_level: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `model_change`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelChangeEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    pub provider: String,
    #[serde(rename = "modelId")]
    pub model_id: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `compaction` — a summary replacing the entries before `firstKeptEntryId`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    pub summary: String,
    #[serde(rename = "firstKeptEntryId", default)]
    pub first_kept_entry_id: String,
    #[serde(rename = "tokensBefore", default)]
    pub tokens_before: Num,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// pi 1.x: usage of the summarisation call (pi writes it before
    /// `fromHook`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(rename = "fromHook", default, skip_serializing_if = "Option::is_none")]
    pub from_hook: Option<bool>,
    /// pi 1.x: the replayed system prompt and tools at the compaction point.
    #[serde(
        rename = "systemMessage",
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "checkpoint_order"
    )]
    pub system_message: Option<AgentMessage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Writes a compaction's system checkpoint in pi's key order: `role,
/// content, sections, toolsAdded, timestamp` (a session's own system
/// messages put `timestamp` before `toolsAdded`), then anything else.
fn checkpoint_order<S: serde::Serializer>(
    m: &Option<AgentMessage>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let Some(m) = m else {
        return s.serialize_none();
    };
    let Ok(Value::Object(mut obj)) = serde_json::to_value(m) else {
        return m.serialize(s);
    };
    if obj.get("role").and_then(Value::as_str) != Some("system") {
        return m.serialize(s);
    }
    let mut out = s.serialize_map(Some(obj.len()))?;
    for k in ["role", "content", "sections", "toolsAdded", "timestamp"] {
        if let Some(v) = obj.shift_remove(k) {
            out.serialize_entry(k, &v)?;
        }
    }
    for (k, v) in &obj {
        out.serialize_entry(k, v)?;
    }
    out.end()
}

/// `branch_summary` — a summary of an abandoned branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BranchSummaryEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(rename = "fromId", default)]
    pub from_id: String,
    pub summary: String,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub details: Option<Value>,
    /// pi 1.6.0 writes `usage` before `fromHook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(rename = "fromHook", default, skip_serializing_if = "Option::is_none")]
    pub from_hook: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `custom` — extension state; never part of the model context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomEntry {
    #[serde(rename = "customType")]
    pub custom_type: String,
    #[serde(
        default,
        deserialize_with = "keep_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<Value>,
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `custom_message` — an extension message that is part of the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomMessageEntry {
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
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `label` — a bookmark on another entry; no `label` key clears it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(rename = "targetId")]
    pub target_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `session_info` — the session's display name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfoEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `usage` (pi 1.x) — model usage that is not an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub model: String,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `context_edit` (pi 1.x) — replaces or omits one earlier entry's content
/// in the future model context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextEditEntry {
    pub id: String,
    #[serde(rename = "parentId", default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub timestamp: String,
    #[serde(rename = "targetId")]
    pub target_id: String,
    /// `null` omits the target; `{content}` replaces its content.
    #[serde(default)]
    pub replacement: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

tagged_enum! {
    /// One entry line of a session file.
    pub enum Entry tag "type" {
        Message(Box<MessageEntry>) = "message",
        ThinkingLevelChange(Box<ThinkingLevelChangeEntry>) = "thinking_level_change",
        ModelChange(Box<ModelChangeEntry>) = "model_change",
        Compaction(Box<CompactionEntry>) = "compaction",
        BranchSummary(Box<BranchSummaryEntry>) = "branch_summary",
        Custom(Box<CustomEntry>) = "custom",
        CustomMessage(Box<CustomMessageEntry>) = "custom_message",
        Label(Box<LabelEntry>) = "label",
        SessionInfo(Box<SessionInfoEntry>) = "session_info",
        Usage(Box<UsageEntry>) = "usage",
        ContextEdit(Box<ContextEditEntry>) = "context_edit",
    }
}

macro_rules! each_known {
    ($self:expr, $e:ident => $body:expr, $unknown:ident => $ubody:expr) => {
        match $self {
            Entry::Message($e) => $body,
            Entry::ThinkingLevelChange($e) => $body,
            Entry::ModelChange($e) => $body,
            Entry::Compaction($e) => $body,
            Entry::BranchSummary($e) => $body,
            Entry::Custom($e) => $body,
            Entry::CustomMessage($e) => $body,
            Entry::Label($e) => $body,
            Entry::SessionInfo($e) => $body,
            Entry::Usage($e) => $body,
            Entry::ContextEdit($e) => $body,
            Entry::Unknown($unknown) => $ubody,
        }
    };
}

impl Entry {
    /// The entry type name.
    pub fn kind(&self) -> &str {
        self.tag()
    }

    /// The entry id (empty for an unknown entry without one).
    pub fn id(&self) -> &str {
        each_known!(self, e => &e.id, m => m.get("id").and_then(Value::as_str).unwrap_or(""))
    }

    /// The parent entry id; `None` for a root.
    pub fn parent_id(&self) -> Option<&str> {
        each_known!(self, e => e.parent_id.as_deref(), m => m.get("parentId").and_then(Value::as_str))
    }

    /// Gives the entry another id (a drawn id that another writer took first).
    pub fn set_id(&mut self, id: String) {
        each_known!(self, e => e.id = id, m => {
            m.insert("id".into(), Value::String(id));
        })
    }

    /// Re-parents the entry (used by fork and migration).
    pub fn set_parent_id(&mut self, parent: Option<String>) {
        each_known!(self, e => e.parent_id = parent, m => {
            m.insert("parentId".into(), parent.map(Value::String).unwrap_or(Value::Null));
        })
    }

    /// The ISO-8601 entry timestamp.
    pub fn timestamp(&self) -> &str {
        each_known!(self, e => &e.timestamp, m => m.get("timestamp").and_then(Value::as_str).unwrap_or(""))
    }

    /// The message, for `message` entries.
    pub fn message(&self) -> Option<&AgentMessage> {
        match self {
            Entry::Message(m) => Some(&m.message),
            _ => None,
        }
    }

    /// The entry as one JSON line (without the newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(s: &str) -> String {
        let e: Entry = serde_json::from_str(s).unwrap();
        let out = e.to_line();
        let a: Value = serde_json::from_str(s).unwrap();
        let b: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(a, b);
        out
    }

    #[test]
    fn numbers_survive_a_round_trip_digit_for_digit() {
        // pi writes costs as JavaScript prints sums; a parser that is not
        // correctly rounded reads a neighbouring float and writes it back
        // shorter (0.0218885): serde_json's float_roundtrip feature.
        let line = r#"{"type":"usage","id":"u","parentId":null,"timestamp":"t","kind":"k","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0.040370249999999996,"output":0.022981750000000002,"cacheRead":0,"cacheWrite":0,"total":0.021888499999999998}}}"#;
        let e: Entry = serde_json::from_str(line).unwrap();
        assert_eq!(e.to_line(), line);
    }

    #[test]
    fn custom_entry_keeps_pi_key_order() {
        let out = rt(
            r#"{"type":"custom","id":"a","parentId":null,"timestamp":"t","customType":"x","data":{"v":1}}"#,
        );
        assert_eq!(
            out,
            r#"{"type":"custom","customType":"x","data":{"v":1},"id":"a","parentId":null,"timestamp":"t"}"#
        );
    }

    #[test]
    fn unknown_and_broken_entries_round_trip() {
        rt(r#"{"type":"hologram","id":"a","parentId":"b","timestamp":"t","beam":[1,2]}"#);
        // A known type missing a required field is kept raw.
        let e: Entry =
            serde_json::from_str(r#"{"type":"label","id":"a","parentId":null,"timestamp":"t"}"#)
                .unwrap();
        assert!(matches!(e, Entry::Unknown(_)));
        assert_eq!(e.id(), "a");
        rt(r#"{"type":"label","id":"a","parentId":null,"timestamp":"t"}"#);
        rt(
            r#"{"type":"context_edit","id":"a","parentId":"b","timestamp":"t","targetId":"c","replacement":null}"#,
        );
        rt(
            r#"{"type":"compaction","id":"a","parentId":"b","timestamp":"t","summary":"s","firstKeptEntryId":"c","tokensBefore":10,"details":{"readFiles":[]},"fromHook":false,"newThing":1}"#,
        );
    }

    #[test]
    fn header_round_trip() {
        let s = r#"{"type":"session","version":3,"id":"u","timestamp":"t","cwd":"/x","extraField":true}"#;
        let Value::Object(m) = serde_json::from_str::<Value>(s).unwrap() else {
            panic!()
        };
        let h = SessionHeader::from_map(m).unwrap();
        assert_eq!(h.to_line(), s);
    }
}
