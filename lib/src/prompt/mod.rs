//! The system prompt as named sections (pi ≥ 0.86), recorded in the session
//! as `system`-role messages: a full one first, then patches.
//!
//! Sections, in order, each omitted when empty: `preamble` (untagged),
//! `tools`, `rules`, `docs` (these three only without a custom prompt),
//! `addendum`, `project_context`, `skills`, `cwd`. Every section but the
//! preamble is stored wrapped as `<name>\n…\n</name>`. There is no date.

pub use crate::resources::context_files;
pub mod expand;
pub mod plan;
pub mod skills;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::format::message::SystemMessage;
use crate::format::tool::ToolDefinition;
use crate::format::{AgentMessage, Num, UserContent};

pub use context_files::ContextFile;

/// pi's default preamble.
pub const DEFAULT_PREAMBLE: &str = "You are a coding assistant running inside pi, a coding agent harness. Help users inspect files, run commands, and modify code.";

/// A tool as the prompt sees it.
#[derive(Debug, Clone)]
pub struct PromptTool {
    pub name: String,
    pub snippet: Option<String>,
    pub guidelines: Vec<String>,
}

/// Everything the sections are built from.
#[derive(Debug, Clone, Default)]
pub struct PromptInputs {
    pub cwd: String,
    /// `--system-prompt` / SYSTEM.md: replaces the preamble and drops the
    /// tools, rules and docs sections.
    pub custom_prompt: Option<String>,
    /// `--append-system-prompt` values and APPEND_SYSTEM.md.
    pub append: Vec<String>,
    pub tools: Vec<PromptTool>,
    pub context_files: Vec<ContextFile>,
    /// The `docs` section body (without tags); `None` omits it.
    pub docs: Option<String>,
    /// The `skills` section body (see [`skills::skills_section`]).
    pub skills: Option<String>,
}

/// Wraps a section body in its tag.
pub fn wrap(name: &str, body: &str) -> String {
    format!("<{name}>\n{body}\n</{name}>")
}

/// The `docs` section pointing the model at this toolkit's documentation.
pub fn toolkit_docs() -> String {
    let man = ["pi-run", "pi-session", "pi-resources", "pi-prompt"]
        .iter()
        .map(|b| format!("`man {b}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "pi toolkit documentation (read only when the user asks about the harness itself):\n- Manual pages: {man}\n- Every command explains itself with --help"
    )
}

/// Builds the desired sections, in order.
pub fn build_sections(inp: &PromptInputs) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let custom = inp.custom_prompt.as_deref().filter(|p| !p.is_empty());
    out.push((
        "preamble".into(),
        custom.unwrap_or(DEFAULT_PREAMBLE).to_string(),
    ));
    if custom.is_none() {
        let lines: Vec<String> = inp
            .tools
            .iter()
            .filter_map(|t| t.snippet.as_ref().map(|s| format!("- {}: {s}", t.name)))
            .collect();
        let body = if lines.is_empty() {
            "(none)".to_string()
        } else {
            lines.join("\n")
        };
        out.push((
            "tools".into(),
            wrap(
                "tools",
                &format!("{body}\n\nAdditional tools may be available."),
            ),
        ));
        let names: Vec<&str> = inp.tools.iter().map(|t| t.name.as_str()).collect();
        let mut rules: Vec<String> = Vec::new();
        let has = |n: &str| names.contains(&n);
        if has("bash") && !has("grep") && !has("find") && !has("ls") {
            rules.push("Use bash for file operations like ls, rg, find".into());
        }
        for t in &inp.tools {
            rules.extend(t.guidelines.iter().cloned());
        }
        rules.push("Be concise in your responses".into());
        rules.push("Show file paths clearly when working with files".into());
        let mut seen = std::collections::HashSet::new();
        rules.retain(|r| seen.insert(r.clone()));
        let body: Vec<String> = rules.iter().map(|r| format!("- {r}")).collect();
        out.push(("rules".into(), wrap("rules", &body.join("\n"))));
        if let Some(d) = &inp.docs {
            out.push(("docs".into(), wrap("docs", d)));
        }
    }
    let append: Vec<&str> = inp
        .append
        .iter()
        .map(String::as_str)
        .filter(|a| !a.is_empty())
        .collect();
    if !append.is_empty() {
        out.push(("addendum".into(), wrap("addendum", &append.join("\n\n"))));
    }
    if !inp.context_files.is_empty() {
        let blocks: Vec<String> = inp
            .context_files
            .iter()
            .map(|f| {
                format!(
                    "<project_instructions path=\"{}\">\n{}\n</project_instructions>",
                    f.path.display(),
                    f.content
                )
            })
            .collect();
        out.push((
            "project_context".into(),
            wrap(
                "project_context",
                &format!(
                    "Project-specific instructions and guidelines:\n\n{}",
                    blocks.join("\n\n")
                ),
            ),
        ));
    }
    if let Some(sk) = &inp.skills {
        out.push(("skills".into(), wrap("skills", sk)));
    }
    out.push(("cwd".into(), wrap("cwd", &inp.cwd.replace('\\', "/"))));
    out
}

/// Values by name in insertion order (an update keeps the position),
/// borrowed from the system messages they were replayed from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Named<'a>(Vec<(&'a str, &'a Value)>);

impl<'a> Named<'a> {
    fn insert(&mut self, name: &'a str, v: &'a Value) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 = v,
            None => self.0.push((name, v)),
        }
    }

    fn remove(&mut self, name: &str) {
        if let Some(i) = self.0.iter().position(|(n, _)| *n == name) {
            self.0.remove(i);
        }
    }

    /// The value called `name`.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// The names, in order.
    pub fn keys(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.0.iter().map(|(n, _)| *n)
    }

    /// The values, in order.
    pub fn values(&self) -> impl Iterator<Item = &'a Value> + '_ {
        self.0.iter().map(|(_, v)| *v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// An owned JSON object of the same entries, in order.
    pub fn to_map(&self) -> Map<String, Value> {
        self.0
            .iter()
            .map(|(n, v)| ((*n).to_string(), (*v).clone()))
            .collect()
    }
}

/// The prompt and tool set replayed from a branch's system messages (the
/// sections and tools borrowed from them: a replay copies nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptState<'a> {
    /// Concatenated non-empty `content` of the system messages.
    pub content: Vec<String>,
    /// Sections in insertion order (an update keeps the position).
    pub sections: Named<'a>,
    /// Tools by name, in declaration order.
    pub tools: Named<'a>,
}

impl<'a> PromptState<'a> {
    /// Replays system messages in order.
    pub fn replay(messages: impl IntoIterator<Item = &'a AgentMessage>) -> PromptState<'a> {
        let mut st = PromptState::default();
        for m in messages {
            if let AgentMessage::System(s) = m {
                st.apply(s);
            }
        }
        st
    }

    /// Applies one system message.
    pub fn apply(&mut self, s: &'a SystemMessage) {
        let c = s.content.joined_text("\n");
        if !c.is_empty() {
            self.content.push(c);
        }
        if let Some(secs) = &s.sections {
            for (k, v) in secs {
                if v.is_null() {
                    self.sections.remove(k);
                } else {
                    self.sections.insert(k, v);
                }
            }
        }
        for r in s.tools_removed.iter().flatten() {
            if let Some(n) = r.get("name").and_then(Value::as_str) {
                self.tools.remove(n);
            }
        }
        for a in s.tools_added.iter().flatten() {
            if let Some(n) = a.get("name").and_then(Value::as_str) {
                self.tools.insert(n, a);
            }
        }
    }

    /// The full prompt text: content, then non-empty section values, joined
    /// by a blank line.
    pub fn render(&self) -> String {
        let mut parts: Vec<&str> = self.content.iter().map(String::as_str).collect();
        parts.extend(self.sections.values().filter_map(Value::as_str));
        parts.retain(|p| !p.is_empty());
        parts.join("\n\n")
    }

    /// The tool definitions, in order. Read from the stored values in
    /// place: only what a definition keeps is copied.
    pub fn tool_definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .values()
            .filter_map(|v| ToolDefinition::deserialize(v).ok())
            .collect()
    }
}

/// The system patch that turns `current` into the desired sections and
/// tools, or `None` when nothing changed. Changed or new sections come in
/// desired order, then `name: null` for vanished ones; a redefined tool is
/// removed and added in the same message.
pub fn diff(
    current: &PromptState<'_>,
    desired: &[(String, String)],
    tools: &[Value],
    timestamp_ms: i64,
) -> Option<SystemMessage> {
    let mut sections = Map::new();
    for (k, v) in desired {
        if current.sections.get(k).and_then(Value::as_str) != Some(v.as_str()) {
            sections.insert(k.clone(), Value::String(v.clone()));
        }
    }
    for k in current.sections.keys() {
        if !desired.iter().any(|(d, _)| d == k) {
            sections.insert(k.to_string(), Value::Null);
        }
    }
    let mut added = Vec::new();
    let mut removed = Vec::new();
    for t in tools {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        match current.tools.get(name) {
            Some(old) if old == t => {}
            Some(_) => {
                removed.push(serde_json::json!({ "name": name }));
                added.push(t.clone());
            }
            None => added.push(t.clone()),
        }
    }
    for name in current.tools.keys() {
        if !tools
            .iter()
            .any(|t| t.get("name").and_then(Value::as_str) == Some(name))
        {
            removed.push(serde_json::json!({ "name": name }));
        }
    }
    if sections.is_empty() && added.is_empty() && removed.is_empty() {
        return None;
    }
    Some(SystemMessage {
        content: UserContent::Text(String::new()),
        sections: (!sections.is_empty()).then_some(sections),
        timestamp: Num::signed(timestamp_ms),
        tools_added: (!added.is_empty()).then_some(added),
        tools_removed: (!removed.is_empty()).then_some(removed),
        extra: Map::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_diff_and_replay() {
        let inp = PromptInputs {
            cwd: "/p".into(),
            tools: vec![PromptTool {
                name: "read".into(),
                snippet: Some("Read file contents".into()),
                guidelines: vec!["Use read.".into()],
            }],
            ..Default::default()
        };
        let secs = build_sections(&inp);
        let names: Vec<&str> = secs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["preamble", "tools", "rules", "cwd"]);
        assert_eq!(secs[3].1, "<cwd>\n/p\n</cwd>");
        let tools = vec![serde_json::json!({"name": "read", "description": "d", "parameters": {}})];
        let first = diff(&PromptState::default(), &secs, &tools, 1).unwrap();
        assert_eq!(first.sections.as_ref().unwrap().len(), 4);
        let mut st = PromptState::default();
        st.apply(&first);
        assert!(
            diff(&st, &secs, &tools, 2).is_none(),
            "nothing changed, no patch"
        );
        let mut secs2 = secs.clone();
        secs2[3].1 = wrap("cwd", "/q");
        let patch = diff(&st, &secs2, &[], 3).unwrap();
        assert_eq!(patch.sections.as_ref().unwrap().len(), 1);
        assert_eq!(patch.tools_removed.as_ref().unwrap().len(), 1);
        st.apply(&patch);
        assert!(st.render().ends_with("<cwd>\n/q\n</cwd>"));
        assert!(st.tools.is_empty());
    }
}
