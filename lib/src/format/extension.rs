//! The extension protocol `pi-ext/1`: the records the toolkit and an
//! extension process exchange, one JSON object per line over the process's
//! stdin (host → extension) and stdout or the records pipe (extension →
//! host; fd 3, named in the environment as `PI_EXT_RECORDS_FD`, is open in
//! every extension process, and whichever of the two carries [`Register`]
//! is the channel from then on; on fd 3, nothing the extension's children
//! print on their stdout can pass for a record).
//!
//! Every record has `"type"`. Unknown record types and unknown fields are
//! ignored by both sides, so either side may grow. Ids: the host numbers
//! its requests with integers (`1, 2, …`), an extension numbers its own
//! calls with strings (`"c1"`), so the two never collide. One process may
//! host several extensions (the Node host runs every TypeScript extension
//! of a run); each record about one of them carries `"ext": <index>`, as
//! given in [`Register`]. A plain process extension has index 0 and may
//! leave `ext` out.
//!
//! The order of a conversation: [`Hello`] → optional
//! [`ExtRecord::Loading`] records (a process hosting several extensions
//! says which one it loads; each restarts the handshake clock) →
//! [`Register`] (within the handshake timeout; any [`LoadError`] in it
//! fails the run) → [`Configure`] per extension → events
//! ([`HostRecord::Event`], answered by [`ExtRecord::Result`]), tool
//! executions ([`HostRecord::Execute`], [`ExtRecord::Update`]s then a
//! result), and at any time calls from the extension
//! ([`ExtRecord::Call`], answered by [`HostRecord::Return`]); after a
//! session replacement a [`HostRecord::Reload`] to a process that said
//! `reloads` (answered by a result holding a new [`Register`]) and
//! [`Configure`] again → at the end the `session_shutdown` event, then
//! [`HostRecord::Bye`] and stdin closes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this toolkit speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// What the host sends first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Always `1` for `pi-ext/1`.
    pub protocol: u64,
    /// `pi-toolkit`.
    pub host: String,
    #[serde(rename = "hostVersion")]
    pub host_version: String,
    /// The session's working directory (the process runs there).
    pub cwd: String,
    /// `print`, `json` or `rpc`.
    pub mode: String,
    /// Whether UI calls reach a person (a terminal or an RPC client).
    #[serde(rename = "hasUI")]
    pub has_ui: bool,
    /// `trust` (the first pass: only CLI and user extensions, which may
    /// answer `project_trust`) or `full` (project extensions, started once
    /// the project is trusted). A process started in the trust pass stays
    /// for the rest of the run; it gets no second hello.
    pub pass: String,
    #[serde(rename = "agentDir")]
    pub agent_dir: String,
    #[serde(rename = "sessionFile")]
    pub session_file: Option<String>,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    /// `null` while the trust pass has not decided yet.
    #[serde(rename = "projectTrusted")]
    pub project_trusted: Option<bool>,
    /// What this process must load, in load order; `ext` indexes follow
    /// it.
    pub load: Vec<LoadEntry>,
    /// The merged settings.json objects.
    pub settings: Value,
    /// How long one extension may take to load, for a process that hosts
    /// several (the Node host); the host fails an extension that takes
    /// longer and loads the next.
    #[serde(
        rename = "loadTimeoutMs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub load_timeout_ms: Option<u64>,
}

/// One extension a process is asked to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadEntry {
    pub path: String,
    /// `cli`, `user`, `project` or `package` (pi's source).
    pub source: String,
    /// `temporary` (CLI), `user` or `project`.
    pub scope: String,
}

/// The extension's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Register {
    #[serde(default)]
    pub protocol: u64,
    #[serde(default)]
    pub extensions: Vec<Registration>,
    /// Extensions that failed to load (a run does not start then).
    #[serde(default)]
    pub errors: Vec<LoadError>,
    /// The process answers [`HostRecord::Reload`] (the Node host does);
    /// one that does not keeps its registration across session
    /// replacements.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reloads: bool,
}

/// What one extension registered.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Registration {
    #[serde(default)]
    pub ext: usize,
    #[serde(default)]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub commands: Vec<CommandSpec>,
    #[serde(default)]
    pub flags: Vec<FlagSpec>,
    /// The events it handles; only these are sent to it.
    #[serde(default)]
    pub events: Vec<String>,
}

/// A load failure reported by a process that hosts several extensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadError {
    #[serde(default)]
    pub path: String,
    pub message: String,
}

/// A tool an extension provides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default)]
    pub description: String,
    /// A JSON Schema object (`type: object`).
    #[serde(default)]
    pub parameters: Value,
    /// The line in the prompt's `tools` section.
    #[serde(
        rename = "promptSnippet",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub prompt_snippet: Option<String>,
    /// Bullets for the prompt's `rules` section.
    #[serde(rename = "promptGuidelines", default)]
    pub prompt_guidelines: Vec<String>,
    /// Active unless the tool selection says otherwise (default true).
    #[serde(
        rename = "defaultActive",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub default_active: Option<bool>,
    /// `sequential`: calls of this tool never run alongside others.
    #[serde(
        rename = "executionMode",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub execution_mode: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `/command` an extension provides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A `--flag` an extension adds to the command line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlagSpec {
    pub name: String,
    /// `boolean` or `string`.
    #[serde(rename = "type", default = "boolean")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn boolean() -> String {
    "boolean".into()
}

/// `register_more`: registrations made after load (pi allows
/// `registerTool` and `on` at any time).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RegisterMore {
    #[serde(default)]
    pub ext: usize,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub commands: Vec<CommandSpec>,
    #[serde(default)]
    pub events: Vec<String>,
}

/// The snapshot every event and execution carries, so a handler can read
/// the run's state without a round trip.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Ctx {
    pub cwd: String,
    pub mode: String,
    #[serde(rename = "hasUI")]
    pub has_ui: bool,
    /// `{provider, id}`.
    pub model: Option<Value>,
    #[serde(rename = "thinkingLevel")]
    pub thinking_level: String,
    #[serde(rename = "sessionFile")]
    pub session_file: Option<String>,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    #[serde(rename = "leafId")]
    pub leaf_id: Option<String>,
    #[serde(rename = "isIdle")]
    pub is_idle: bool,
    #[serde(rename = "projectTrusted")]
    pub project_trusted: Option<bool>,
    #[serde(rename = "signalAborted")]
    pub signal_aborted: bool,
}

/// Host → extension.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostRecord {
    Hello(Hello),
    /// The extension's flag values, parsed from the command line (every
    /// flag it registered, its default when not given).
    Configure {
        ext: usize,
        flags: Map<String, Value>,
    },
    /// An event (pi 1.6.0's payload, keys in pi's order); answered by one
    /// result. A subagent child's `tool_call`, `tool_result` and
    /// `tool_execution_*` add `subagent: {sessionId, profile,
    /// parentToolCallId}` (`ctx` stays the parent's).
    Event {
        id: u64,
        ext: usize,
        event: Value,
        ctx: Ctx,
    },
    /// Runs one of the extension's tools; answered by updates, then one
    /// result.
    Execute {
        id: u64,
        ext: usize,
        tool: String,
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        params: Value,
        ctx: Ctx,
    },
    /// A session replacement (pi 1.6.0 calls every extension's factory
    /// again): the process drops its registrations and loads its
    /// extensions again; answered by one result holding the new
    /// [`Register`] (`extensions`, `errors`). Sent only to a process whose
    /// `register` said `reloads: true`.
    Reload {
        id: u64,
    },
    /// The run was aborted while request `id` was outstanding.
    Cancel {
        id: u64,
    },
    /// The answer to the extension's call `id`.
    Return {
        id: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The end: stdin closes next.
    Bye {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// Extension → host.
#[derive(Debug, Clone, PartialEq)]
pub enum ExtRecord {
    Register(Register),
    RegisterMore(RegisterMore),
    /// The answer to request `id`: the handler's return value (`null` for
    /// none), or the thrown message; `errors` are the messages of handlers
    /// that threw without ending the chain (the Node host's `errors` list;
    /// each is reported as an `extension_error`).
    Result {
        id: u64,
        outcome: Result<Value, String>,
        errors: Vec<String>,
    },
    /// A failure the extension reports on its own (`extension_error`: a
    /// throwing `pi.events` listener, a refused fire-and-forget action).
    ExtensionError {
        ext: usize,
        event: String,
        error: String,
    },
    /// Progress of tool execution `id`.
    Update {
        id: u64,
        partial: Value,
    },
    /// A call to the host (`method` is pi's API name).
    Call {
        id: Value,
        ext: usize,
        method: String,
        params: Value,
    },
    /// A process that hosts several extensions starts loading extension
    /// `ext` (`path`). Optional: it lets the host give each extension its
    /// own load limit and name the one that was loading when the process
    /// hung or died before `register`.
    Loading {
        ext: usize,
        path: String,
    },
    /// A record type this version does not know (ignored).
    Unknown(String),
}

/// Why a line from an extension is not a protocol record.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("a record must be a JSON object with a string \"type\"")]
    NoType,
    #[error("bad {kind} record: {message}")]
    Bad { kind: String, message: String },
}

fn int_id(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
}

impl ExtRecord {
    /// Reads one line from an extension.
    pub fn parse(line: &str) -> Result<ExtRecord, RecordError> {
        let v: Value =
            serde_json::from_str(line).map_err(|e| RecordError::NotJson(e.to_string()))?;
        let Value::Object(mut m) = v else {
            return Err(RecordError::NoType);
        };
        let Some(kind) = m.get("type").and_then(Value::as_str).map(str::to_string) else {
            return Err(RecordError::NoType);
        };
        let bad = |message: String| RecordError::Bad {
            kind: kind.clone(),
            message,
        };
        let ext = m.get("ext").and_then(Value::as_u64).unwrap_or(0) as usize;
        Ok(match kind.as_str() {
            "register" => ExtRecord::Register(
                serde_json::from_value(Value::Object(m)).map_err(|e| bad(e.to_string()))?,
            ),
            "register_more" => ExtRecord::RegisterMore(
                serde_json::from_value(Value::Object(m)).map_err(|e| bad(e.to_string()))?,
            ),
            "result" => {
                let id = int_id(m.get("id")).ok_or_else(|| bad("needs an integer id".into()))?;
                let outcome = match m.remove("error") {
                    Some(Value::Null) | None => Ok(m.remove("result").unwrap_or(Value::Null)),
                    Some(Value::String(s)) => Err(s),
                    Some(other) => Err(other.to_string()),
                };
                let errors = match m.remove("errors") {
                    Some(Value::Array(a)) => a
                        .into_iter()
                        .map(|e| match e {
                            Value::String(s) => s,
                            other => other.to_string(),
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                ExtRecord::Result {
                    id,
                    outcome,
                    errors,
                }
            }
            "extension_error" => {
                let text = |k: &str| match m.get(k) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                ExtRecord::ExtensionError {
                    ext,
                    event: text("event"),
                    error: text("error"),
                }
            }
            "update" => {
                let id = int_id(m.get("id")).ok_or_else(|| bad("needs an integer id".into()))?;
                ExtRecord::Update {
                    id,
                    partial: m.remove("partialResult").unwrap_or(Value::Null),
                }
            }
            "call" => {
                let id = m.remove("id").unwrap_or(Value::Null);
                if !(id.is_string() || id.is_number()) {
                    return Err(bad("needs an id".into()));
                }
                let method = m
                    .get("method")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("needs a method".into()))?
                    .to_string();
                ExtRecord::Call {
                    id,
                    ext,
                    method,
                    params: m.remove("params").unwrap_or(Value::Null),
                }
            }
            "loading" => ExtRecord::Loading {
                ext,
                path: m
                    .get("path")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            },
            other => ExtRecord::Unknown(other.to_string()),
        })
    }
}

impl HostRecord {
    /// The record as one line (without the newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{\"type\":\"invalid\"}".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_every_record_kind() {
        let r = ExtRecord::parse(
            r#"{"type":"register","protocol":1,"extensions":[{"ext":0,"path":"/x","tools":[{"name":"t","description":"d","parameters":{"type":"object"}}],"flags":[{"name":"f"}],"events":["tool_call"]}]}"#,
        )
        .unwrap();
        let ExtRecord::Register(reg) = r else {
            panic!()
        };
        assert_eq!(reg.extensions[0].tools[0].name, "t");
        assert_eq!(reg.extensions[0].flags[0].kind, "boolean");
        assert!(
            !reg.reloads,
            "a process that does not say so does not reload"
        );
        let ExtRecord::Register(reg) =
            ExtRecord::parse(r#"{"type":"register","protocol":1,"reloads":true}"#).unwrap()
        else {
            panic!()
        };
        assert!(reg.reloads);
        assert_eq!(
            ExtRecord::parse(r#"{"type":"result","id":3,"result":null}"#).unwrap(),
            ExtRecord::Result {
                id: 3,
                outcome: Ok(Value::Null),
                errors: vec![]
            }
        );
        assert_eq!(
            ExtRecord::parse(r#"{"type":"result","id":3,"error":"boom"}"#).unwrap(),
            ExtRecord::Result {
                id: 3,
                outcome: Err("boom".into()),
                errors: vec![]
            }
        );
        assert_eq!(
            ExtRecord::parse(
                r#"{"type":"result","id":4,"result":{"message":{}},"errors":["a",{"x":1}]}"#
            )
            .unwrap(),
            ExtRecord::Result {
                id: 4,
                outcome: Ok(json!({"message": {}})),
                errors: vec!["a".into(), r#"{"x":1}"#.into()]
            }
        );
        assert_eq!(
            ExtRecord::parse(
                r#"{"type":"extension_error","ext":2,"event":"events:ch","error":"bad"}"#
            )
            .unwrap(),
            ExtRecord::ExtensionError {
                ext: 2,
                event: "events:ch".into(),
                error: "bad".into()
            }
        );
        assert!(matches!(
            ExtRecord::parse(r#"{"type":"call","id":"c1","method":"getActiveTools"}"#).unwrap(),
            ExtRecord::Call { ext: 0, .. }
        ));
        assert_eq!(
            ExtRecord::parse(r#"{"type":"loading","ext":2,"path":"/x.ts"}"#).unwrap(),
            ExtRecord::Loading {
                ext: 2,
                path: "/x.ts".into()
            }
        );
        assert_eq!(
            ExtRecord::parse(r#"{"type":"future_thing","x":1}"#).unwrap(),
            ExtRecord::Unknown("future_thing".into())
        );
        assert!(ExtRecord::parse("hello").is_err());
        assert!(ExtRecord::parse("[1]").is_err());
        assert!(ExtRecord::parse(r#"{"type":"result","id":"x"}"#).is_err());
    }

    #[test]
    fn host_records_are_tagged_lines() {
        let l = HostRecord::Cancel { id: 4 }.to_line();
        assert_eq!(l, r#"{"type":"cancel","id":4}"#);
        let l = HostRecord::Reload { id: 5 }.to_line();
        assert_eq!(l, r#"{"type":"reload","id":5}"#);
        let l = HostRecord::Return {
            id: Value::String("c1".into()),
            result: Some(Value::Null),
            error: None,
        }
        .to_line();
        assert_eq!(l, r#"{"type":"return","id":"c1","result":null}"#);
    }
}
