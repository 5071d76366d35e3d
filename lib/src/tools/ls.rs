//! `ls`: one directory's entries (dotfiles too), sorted like JavaScript's
//! `a.toLowerCase().localeCompare(b.toLowerCase())`, directories with `/`.

use std::cmp::Ordering;

use serde_json::{json, Map, Value};

use super::truncate::{format_size, truncate_head, DEFAULT_MAX_BYTES, NO_LINE_LIMIT};
use super::util::{num_arg, resolve_path, str_arg, text_result, thrown};
use super::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};
use crate::format::tool::ToolDefinition;

/// The `ls` tool.
pub struct LsTool;

/// Entries returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 500;

impl Tool for LsTool {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        "ls".into()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "ls".into(),
            description: "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes dotfiles. Output is truncated to 500 entries or 50KB (whichever is hit first).".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory to list (default: current directory)"},
                    "limit": {"type": "number", "description": "Maximum number of entries to return (default: 500)"}
                }
            }),
            extra: Default::default(),
        }
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some("List directory contents".into())
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        super::util::run_blocking("ls", args, ctx, ls)
    }
}

/// The primary collation weight of a character in ICU's root order
/// (whitespace, punctuation, symbols, digits, letters); other characters sort
/// after ASCII by code point.
fn weight(c: char) -> u32 {
    const ORDER: &str =
        "\t\n\u{b}\u{c}\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz";
    match ORDER.find(c) {
        Some(i) => i as u32,
        None => 0x100 + c as u32,
    }
}

/// Compares two names like `localeCompare` on their lowercase forms
/// (primary strength, which is all that differs once lowercased for ASCII).
pub fn locale_cmp(a: &str, b: &str) -> Ordering {
    let a = a.to_lowercase();
    let b = b.to_lowercase();
    a.chars().map(weight).cmp(b.chars().map(weight))
}

fn ls(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let dir = resolve_path(str_arg(args, "path").unwrap_or("."), &ctx.cwd);
    if let Err(denied) = ctx.sandbox.check_read(&dir) {
        return thrown(denied);
    }
    let meta = match std::fs::metadata(&dir) {
        Ok(m) => m,
        Err(_) => return thrown(format!("Path not found: {}", dir.display())),
    };
    if !meta.is_dir() {
        return thrown(format!("Not a directory: {}", dir.display()));
    }
    let limit = num_arg(args, "limit").map_or(DEFAULT_LIMIT, |l| (l as usize).max(1));
    let rd = match std::fs::read_dir(&dir) {
        Ok(r) => r,
        Err(e) => return thrown(format!("Cannot read directory: {e}")),
    };
    let mut names: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by(|a, b| locale_cmp(a, b));
    let mut lines = Vec::new();
    let mut limit_reached = false;
    for name in names {
        if lines.len() >= limit {
            limit_reached = true;
            break;
        }
        // follows symlinks; entries that cannot be stat'ed are skipped
        let Ok(m) = std::fs::metadata(dir.join(&name)) else {
            continue;
        };
        lines.push(if m.is_dir() { format!("{name}/") } else { name });
    }
    if lines.is_empty() {
        return text_result("(empty directory)", None);
    }
    let t = truncate_head(&lines.join("\n"), NO_LINE_LIMIT, DEFAULT_MAX_BYTES);
    let mut text = t.content.clone();
    let mut notices = Vec::new();
    let mut details = Map::new();
    if limit_reached {
        notices.push(format!(
            "{limit} entries limit reached. Use limit={} for more",
            limit.saturating_mul(2)
        ));
        details.insert("entryLimitReached".into(), json!(limit));
    }
    if t.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
        details.insert("truncation".into(), t.to_json());
    }
    if !notices.is_empty() {
        text.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    text_result(
        text,
        (!details.is_empty()).then_some(Value::Object(details)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_locale_compare() {
        let mut v = vec![
            "b.txt", "Zed", "_u", ".hidden", "9.txt", "10.txt", "A.md", "a.txt",
        ];
        v.sort_by(|a, b| locale_cmp(a, b));
        assert_eq!(
            v,
            ["_u", ".hidden", "10.txt", "9.txt", "A.md", "a.txt", "b.txt", "Zed"]
        );
    }
}
