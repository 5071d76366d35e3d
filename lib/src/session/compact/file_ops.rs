//! The files a summarised stretch of conversation read and changed: the
//! paths of its `read`, `write` and `edit` tool calls plus the lists of a
//! previous summary, appended to the summary as `<read-files>` and
//! `<modified-files>` blocks and stored as the entry's `details`.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::format::{AgentMessage, ContentBlock};

/// Files the summarised messages read and changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileOps {
    pub read: BTreeSet<String>,
    pub written: BTreeSet<String>,
    pub edited: BTreeSet<String>,
}

impl FileOps {
    /// Records the `read`/`write`/`edit` tool calls of an assistant message.
    pub(crate) fn track(&mut self, m: &AgentMessage) {
        let AgentMessage::Assistant(a) = m else {
            return;
        };
        for b in &a.content {
            let ContentBlock::ToolCall(c) = b else {
                continue;
            };
            let Some(p) = c.arguments.get("path").and_then(Value::as_str) else {
                continue;
            };
            let set = match c.name.as_str() {
                "read" => &mut self.read,
                "write" => &mut self.written,
                "edit" => &mut self.edited,
                _ => continue,
            };
            set.insert(p.to_string());
        }
    }

    /// Adds a previous summary's `details` (`readFiles`, `modifiedFiles`).
    pub(crate) fn absorb(&mut self, details: Option<&Value>) {
        let list = |k: &str| {
            details
                .and_then(|d| d.get(k))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        self.read.extend(list("readFiles"));
        self.edited.extend(list("modifiedFiles"));
    }

    /// `(readFiles, modifiedFiles)`: files only read, and files edited or
    /// written, each sorted.
    pub fn lists(&self) -> (Vec<String>, Vec<String>) {
        let modified: BTreeSet<&String> = self.edited.iter().chain(&self.written).collect();
        let read = self
            .read
            .iter()
            .filter(|f| !modified.contains(f))
            .cloned()
            .collect();
        (read, modified.into_iter().cloned().collect())
    }

    /// The `<read-files>` / `<modified-files>` blocks appended to a summary.
    pub fn suffix(&self) -> String {
        let (read, modified) = self.lists();
        let mut parts = Vec::new();
        if !read.is_empty() {
            parts.push(format!("<read-files>\n{}\n</read-files>", read.join("\n")));
        }
        if !modified.is_empty() {
            parts.push(format!(
                "<modified-files>\n{}\n</modified-files>",
                modified.join("\n")
            ));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("\n\n{}", parts.join("\n\n"))
        }
    }

    /// `details` as pi stores it.
    pub fn details(&self) -> Value {
        let (read, modified) = self.lists();
        json!({ "readFiles": read, "modifiedFiles": modified })
    }
}
