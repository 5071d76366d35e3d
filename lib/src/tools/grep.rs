//! `grep`: regex (or literal) search over files, .gitignore-aware, in
//! process (pi shells out to ripgrep; the `ignore` and `regex` crates are
//! ripgrep's own walker and engine). Output `path:n: text` for matches and
//! `path-n- text` for context, pi's limits and notices.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::search::{rel_posix, walk};
use super::truncate::{
    format_size, truncate_head, truncate_line, DEFAULT_MAX_BYTES, NO_LINE_LIMIT,
};
use super::util::{bool_arg, invalid_args, num_arg, resolve_path, str_arg, text_result, thrown};
use super::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};
use crate::format::tool::ToolDefinition;

/// The `grep` tool.
pub struct GrepTool;

/// Matches returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 100;

impl Tool for GrepTool {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        "grep".into()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "grep".into(),
            description: "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore. Output is truncated to 100 matches or 50KB (whichever is hit first). Long lines are truncated to 500 chars.".into(),
            parameters: json!({
                "type": "object",
                "required": ["pattern"],
                "properties": {
                    "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
                    "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
                    "glob": {"type": "string", "description": "Filter files by glob pattern relative to path, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
                    "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
                    "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
                    "context": {"type": "number", "description": "Number of lines to show before and after each match (default: 0)"},
                    "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"}
                }
            }),
            extra: Default::default(),
        }
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some("Search file contents for patterns (respects .gitignore)".into())
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        super::util::run_blocking("grep", args, ctx, grep)
    }
}

fn grep(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let Some(pattern) = str_arg(args, "pattern") else {
        return invalid_args(&GrepTool.definition(), args);
    };
    let root = resolve_path(str_arg(args, "path").unwrap_or("."), &ctx.cwd);
    if let Err(denied) = ctx.sandbox.check_read(&root) {
        return thrown(denied);
    }
    let meta = match std::fs::metadata(&root) {
        Ok(m) => m,
        Err(_) => return thrown(format!("Path not found: {}", root.display())),
    };
    if !meta.is_dir() && !meta.is_file() {
        return thrown(format!(
            "Cannot search {}: it is a {}, not a regular file or directory",
            root.display(),
            crate::regular_file::kind(&meta)
        ));
    }
    let source = if bool_arg(args, "literal") {
        regex::escape(pattern)
    } else {
        pattern.to_string()
    };
    let re = match regex::RegexBuilder::new(&source)
        .case_insensitive(bool_arg(args, "ignoreCase"))
        .build()
    {
        Ok(r) => r,
        Err(e) => return thrown(e.to_string()),
    };
    let context = num_arg(args, "context")
        .filter(|c| *c > 0.0)
        .map_or(0, |c| c as usize);
    let limit = num_arg(args, "limit").map_or(DEFAULT_LIMIT, |l| (l as usize).max(1));

    let files: Vec<(std::path::PathBuf, String)> = if meta.is_dir() {
        match walk(&root, true, str_arg(args, "glob"), &ctx.sandbox) {
            Ok(entries) => entries
                .into_iter()
                .filter(|(_, d)| !d)
                .map(|(p, _)| {
                    let rel = rel_posix(&p, &root);
                    (p, rel)
                })
                .collect(),
            Err(e) => return thrown(e),
        }
    } else {
        let name = root
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        vec![(root.clone(), name)]
    };

    let mut out: Vec<String> = Vec::new();
    let mut matches = 0usize;
    let mut limit_reached = false;
    let mut lines_truncated = false;
    'files: for (path, rel) in &files {
        // Only regular files: a FIFO in the tree would block the read forever.
        let Ok(bytes) = crate::regular_file::open(path).and_then(|(mut f, _)| {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut b)?;
            Ok(b)
        }) else {
            continue;
        };
        if memchr::memchr(0, &bytes).is_some() {
            continue; // binary, as ripgrep skips it
        }
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = super::truncate::split_lines(&text)
            .into_iter()
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        // line index -> is a match
        let mut shown: BTreeMap<usize, bool> = BTreeMap::new();
        // First line not yet in `shown`: each line is added once, however
        // large `context` is.
        let mut next = 0usize;
        for (i, line) in lines.iter().enumerate() {
            if !re.is_match(line) {
                continue;
            }
            matches += 1;
            let hi = i.saturating_add(context).min(lines.len() - 1);
            for j in i.saturating_sub(context).max(next)..=hi {
                shown.entry(j).or_insert(false);
            }
            next = next.max(hi + 1);
            shown.insert(i, true);
            if matches >= limit {
                limit_reached = true;
            }
            if limit_reached {
                emit(&mut out, rel, &lines, &shown, &mut lines_truncated);
                break 'files;
            }
        }
        emit(&mut out, rel, &lines, &shown, &mut lines_truncated);
    }
    if matches == 0 {
        return text_result("No matches found", None);
    }
    let joined = out.join("\n");
    let t = truncate_head(&joined, NO_LINE_LIMIT, DEFAULT_MAX_BYTES);
    let mut text = t.content.clone();
    let mut notices = Vec::new();
    let mut details = Map::new();
    if limit_reached {
        notices.push(format!(
            "{limit} matches limit reached. Use limit={} for more, or refine pattern",
            limit.saturating_mul(2)
        ));
        details.insert("matchLimitReached".into(), json!(limit));
    }
    if t.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
        details.insert("truncation".into(), t.to_json());
    }
    if lines_truncated {
        notices.push(format!(
            "Some lines truncated to {} chars. Use read tool to see full lines",
            super::truncate::GREP_MAX_LINE_LENGTH
        ));
        details.insert("linesTruncated".into(), json!(true));
    }
    if !notices.is_empty() {
        text.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    text_result(
        text,
        (!details.is_empty()).then_some(Value::Object(details)),
    )
}

fn emit(
    out: &mut Vec<String>,
    rel: &str,
    lines: &[&str],
    shown: &BTreeMap<usize, bool>,
    lines_truncated: &mut bool,
) {
    for (&i, &is_match) in shown {
        let (line, cut) = truncate_line(lines[i]);
        *lines_truncated |= cut;
        let n = i + 1;
        out.push(if is_match {
            format!("{rel}:{n}: {line}")
        } else {
            format!("{rel}-{n}- {line}")
        });
    }
}
