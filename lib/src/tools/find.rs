//! `find`: files and directories matching a glob below a directory,
//! .gitignore-aware (pi shells out to fd; this walks with fd's own `ignore`
//! crate). Directories keep a trailing `/`.

use serde_json::{json, Map, Value};

use super::search::{rel_posix, walk};
use super::truncate::{format_size, truncate_head, DEFAULT_MAX_BYTES, NO_LINE_LIMIT};
use super::util::{invalid_args, num_arg, resolve_path, str_arg, text_result, thrown};
use super::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};
use crate::format::tool::ToolDefinition;

/// The `find` tool.
pub struct FindTool;

/// Results returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 1000;

impl Tool for FindTool {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        "find".into()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "find".into(),
            description: "Search for files by glob pattern. Returns matching file paths relative to the search directory. Respects .gitignore. Output is truncated to 1000 results or 50KB (whichever is hit first).".into(),
            parameters: json!({
                "type": "object",
                "required": ["pattern"],
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern relative to the search directory, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
                    "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
                    "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"}
                }
            }),
            extra: Default::default(),
        }
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some("Find files by glob pattern (respects .gitignore)".into())
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        super::util::run_blocking("find", args, ctx, find)
    }
}

fn find(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let Some(pattern) = str_arg(args, "pattern") else {
        return invalid_args(&FindTool.definition(), args);
    };
    let root = resolve_path(str_arg(args, "path").unwrap_or("."), &ctx.cwd);
    if let Err(denied) = ctx.sandbox.check_read(&root) {
        return thrown(denied);
    }
    if !root.is_dir() {
        return thrown(format!(
            "[fd error]: Search path '{}' is not a directory.\n[fd error]: No valid search paths given.",
            root.display()
        ));
    }
    let limit = num_arg(args, "limit").map_or(DEFAULT_LIMIT, |l| (l as usize).max(1));
    let full_path = pattern.contains('/');
    let matcher = match globset::GlobBuilder::new(pattern)
        .literal_separator(full_path)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(e) => return thrown(format!("[fd error]: {e}")),
    };
    let entries = match walk(&root, false, None, &ctx.sandbox) {
        Ok(e) => e,
        Err(e) => return thrown(e),
    };
    let mut results = Vec::new();
    for (path, is_dir) in entries {
        let rel = rel_posix(&path, &root);
        let hit = if full_path {
            matcher.is_match(&rel)
        } else {
            path.file_name().is_some_and(|n| matcher.is_match(n))
        };
        if hit {
            results.push(if is_dir { format!("{rel}/") } else { rel });
        }
    }
    if results.is_empty() {
        return text_result("No files found matching pattern", None);
    }
    let limit_reached = results.len() > limit;
    results.truncate(limit);
    let t = truncate_head(&results.join("\n"), NO_LINE_LIMIT, DEFAULT_MAX_BYTES);
    let mut text = t.content.clone();
    let mut notices = Vec::new();
    let mut details = Map::new();
    if limit_reached {
        notices.push(format!(
            "{limit} results limit reached. Use limit={} for more, or refine pattern",
            limit.saturating_mul(2)
        ));
        details.insert("resultLimitReached".into(), json!(limit));
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
