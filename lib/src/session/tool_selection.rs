//! A session's persisted tool selection (the tools a run of it may use,
//! kept across runs and read before any resource loads), stored as
//! `{"type":"custom","customType":"pi-web:tool-selection","data":{"version":1,"tools":[…]}}`.
//!
//! Three states that must never be confused: no valid entry = legacy session
//! (pi's default tools); `[]` = Chat only; non-empty = those built-in tools.
//! Reading scans from the end and the latest *valid* entry wins; a later
//! `{"version":1,"cleared":true}` retracts the pin (back to legacy).

use serde_json::{json, Value};

use crate::format::Entry;

use super::Session;

/// The custom entry type of a tool selection.
pub const TOOL_SELECTION_TYPE: &str = "pi-web:tool-selection";
/// The custom entry type marking a subagent session (its profile fixes tools).
pub const SUBAGENT_TYPE: &str = "pi-web:subagent";

/// The built-in tool names a selection may contain.
pub fn builtin_tools() -> &'static [&'static str] {
    if cfg!(windows) {
        &[
            "read",
            "bash",
            "edit",
            "write",
            "grep",
            "find",
            "ls",
            "powershell",
        ]
    } else {
        &["read", "bash", "edit", "write", "grep", "find", "ls"]
    }
}

/// The resolved selection of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSelection {
    /// No valid entry (or the latest valid one is `cleared`): pi's defaults.
    Legacy,
    /// An explicitly empty selection: Chat only.
    ChatOnly,
    /// These built-in tools, de-duplicated, in order.
    Tools(Vec<String>),
}

impl ToolSelection {
    /// The tool list (`None` for legacy).
    pub fn tools(&self) -> Option<Vec<String>> {
        match self {
            ToolSelection::Legacy => None,
            ToolSelection::ChatOnly => Some(Vec::new()),
            ToolSelection::Tools(t) => Some(t.clone()),
        }
    }
}

/// Where the resolved selection came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSelection {
    pub selection: ToolSelection,
    /// Id of the deciding entry (`None` when no valid entry exists).
    pub entry_id: Option<String>,
    /// Ids of newer entries that were skipped as invalid, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// Checks and de-duplicates a list of tool names for writing.
pub fn validate(tools: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for t in tools {
        let t = t.trim();
        if t.is_empty() {
            continue;
        }
        if !builtin_tools().contains(&t) {
            return Err(format!(
                "unknown tool \"{t}\": a selection may only name built-in tools ({})",
                builtin_tools().join(", ")
            ));
        }
        if !out.iter().any(|o| o == t) {
            out.push(t.to_string());
        }
    }
    Ok(out)
}

/// Interprets one entry's `data`; `Err` says why it is invalid.
fn parse_data(data: Option<&Value>) -> Result<ToolSelection, String> {
    let Some(Value::Object(d)) = data else {
        return Err("data is not an object".into());
    };
    if d.get("version").and_then(Value::as_u64) != Some(1) {
        return Err(format!(
            "unsupported version {}",
            d.get("version")
                .map(Value::to_string)
                .unwrap_or_else(|| "(none)".into())
        ));
    }
    if d.get("cleared").and_then(Value::as_bool) == Some(true) {
        return Ok(ToolSelection::Legacy);
    }
    let Some(Value::Array(items)) = d.get("tools") else {
        return Err("tools is not an array".into());
    };
    let mut names = Vec::new();
    for it in items {
        match it.as_str() {
            Some(s) => names.push(s.to_string()),
            None => return Err("tools holds a non-string".into()),
        }
    }
    let tools = validate(&names)?;
    Ok(if tools.is_empty() {
        ToolSelection::ChatOnly
    } else {
        ToolSelection::Tools(tools)
    })
}

impl Session {
    /// Resolves the persisted tool selection (latest valid entry wins).
    pub fn tool_selection(&self) -> ResolvedSelection {
        let mut skipped = Vec::new();
        for e in self.entries.iter().rev() {
            let Entry::Custom(c) = e else { continue };
            if c.custom_type != TOOL_SELECTION_TYPE {
                continue;
            }
            match parse_data(c.data.as_ref()) {
                Ok(selection) => {
                    return ResolvedSelection {
                        selection,
                        entry_id: Some(c.id.clone()),
                        skipped,
                    }
                }
                Err(why) => skipped.push((c.id.clone(), why)),
            }
        }
        ResolvedSelection {
            selection: ToolSelection::Legacy,
            entry_id: None,
            skipped,
        }
    }

    /// Whether this is a subagent session (its tools are fixed by a profile).
    pub fn is_subagent(&self) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e, Entry::Custom(c) if c.custom_type == SUBAGENT_TYPE))
    }

    /// Builds the entry persisting `tools` (validated), or a `cleared` entry.
    pub fn new_tool_selection(&self, tools: Option<&[String]>) -> Result<Entry, String> {
        if self.is_subagent() {
            return Err(
                "tool selection is fixed by its profile (this is a subagent session)".into(),
            );
        }
        let data = match tools {
            Some(t) => json!({"version": 1, "tools": validate(t)?}),
            None => json!({"version": 1, "cleared": true}),
        };
        Ok(self.new_custom(self.leaf_id(), TOOL_SELECTION_TYPE, data))
    }
}

/// The persisted tool policy of a run, read before any resource loads:
/// subagent snapshot > the session's latest valid selection >
/// none (then [`crate::tools::select::resolve`] decides from the flags and
/// settings, and says what to persist).
#[derive(Debug, Clone, PartialEq)]
pub struct RunSelection {
    /// The pinned tools; `None` = nothing pinned (legacy session).
    pub tools: Option<Vec<String>>,
    /// Chat only: no tools, no resources, context files as the prompt.
    pub chat_only: bool,
    /// A subagent's recorded exact system prompt (Chat-only children).
    pub exact_prompt: Option<String>,
    /// Whether context files are part of the prompt (not for subagents).
    pub context_files: bool,
    /// `subagent`, `session` or `default`.
    pub from: &'static str,
}

impl RunSelection {
    /// The pin for the tool-set resolver, when there is one.
    pub fn pinned(&self) -> Option<crate::tools::select::Pinned> {
        use crate::tools::select::{PinSource, Pinned};
        let source = match self.from {
            "subagent" => PinSource::Subagent,
            "session" => PinSource::Session,
            _ => return None,
        };
        Some(Pinned {
            tools: self.tools.clone()?,
            chat_only: self.chat_only,
            source,
        })
    }
}

impl Session {
    /// A subagent's `resourceSnapshot`, when this is a subagent session.
    pub fn subagent_snapshot(&self) -> Option<&Value> {
        self.entries.iter().rev().find_map(|e| match e {
            Entry::Custom(c) if c.custom_type == SUBAGENT_TYPE => {
                c.data.as_ref()?.get("resourceSnapshot")
            }
            _ => None,
        })
    }

    /// Reads a run's persisted tool policy.
    pub fn run_selection(&self) -> RunSelection {
        if let Some(snap) = self.subagent_snapshot() {
            let tools = crate::format::string_list(snap.get("tools"));
            let flag = |k: &str| snap.get(k).and_then(Value::as_bool).unwrap_or(false);
            let chat_only = tools.is_empty() && !flag("loadSkills") && !flag("loadExtensions");
            return RunSelection {
                chat_only,
                exact_prompt: snap
                    .get("exactSystemPrompt")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                context_files: !chat_only,
                tools: Some(tools),
                from: "subagent",
            };
        }
        let resolved = self.tool_selection();
        if let Some(tools) = resolved.selection.tools() {
            return RunSelection {
                chat_only: tools.is_empty(),
                tools: Some(tools),
                exact_prompt: None,
                context_files: true,
                from: "session",
            };
        }
        RunSelection {
            tools: None,
            chat_only: false,
            exact_prompt: None,
            context_files: true,
            from: "default",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn with(datas: &[&str]) -> Session {
        let mut text =
            String::from(r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/p"}"#);
        let mut parent = "null".to_string();
        for (i, d) in datas.iter().enumerate() {
            text.push_str(&format!(
                "\n{{\"type\":\"custom\",\"customType\":\"pi-web:tool-selection\",\"data\":{d},\"id\":\"e{i}\",\"parentId\":{parent},\"timestamp\":\"t\"}}"
            ));
            parent = format!("\"e{i}\"");
        }
        Session::parse(Path::new("t"), text.as_bytes()).unwrap()
    }

    #[test]
    fn three_states() {
        assert_eq!(with(&[]).tool_selection().selection, ToolSelection::Legacy);
        assert_eq!(
            with(&[r#"{"version":1,"tools":[]}"#])
                .tool_selection()
                .selection,
            ToolSelection::ChatOnly
        );
        assert_eq!(
            with(&[r#"{"version":1,"tools":["read","read","bash"]}"#])
                .tool_selection()
                .selection,
            ToolSelection::Tools(vec!["read".into(), "bash".into()])
        );
    }

    #[test]
    fn invalid_entries_are_skipped_and_cleared_retracts() {
        let s = with(&[
            r#"{"version":1,"tools":[]}"#,
            r#"{"version":2,"tools":["read"]}"#,
            r#"{"version":1,"tools":["myext"]}"#,
        ]);
        let r = s.tool_selection();
        assert_eq!(r.selection, ToolSelection::ChatOnly);
        assert_eq!(r.skipped.len(), 2);
        let s = with(&[
            r#"{"version":1,"tools":[]}"#,
            r#"{"version":1,"cleared":true}"#,
        ]);
        assert_eq!(s.tool_selection().selection, ToolSelection::Legacy);
    }

    #[test]
    fn writing_validates() {
        let s = with(&[]);
        assert!(s
            .new_tool_selection(Some(&["nonexistent".to_string()]))
            .is_err());
        let e = s
            .new_tool_selection(Some(&["ls".into(), "ls".into()]))
            .unwrap();
        assert!(e
            .to_line()
            .contains(r#""data":{"version":1,"tools":["ls"]}"#));
    }
}
