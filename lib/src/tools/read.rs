//! `read`: a text file (line window, head truncation, continuation notices)
//! or an image (detected by magic bytes, fitted to pi's limits by
//! [`super::image`], returned as an image block).

use serde_json::{json, Value};

use super::truncate::{
    format_size, js_number, truncate_head, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES,
};
use super::util::{
    invalid_args, node_fs_error, num_arg, resolve_path, str_arg, text_result, thrown,
};
use super::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};
use crate::format::message::ImageBlock;
use crate::format::tool::ToolDefinition;
use crate::format::ContentBlock;

/// The `read` tool.
pub struct ReadTool;

impl Tool for ReadTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "read".into(),
            description: "Read the contents of a file. Supports text files and images (jpg, png, gif, webp, bmp). Images are sent as attachments. For text files, output is truncated to 2000 lines or 50KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete.".into(),
            parameters: json!({
                "type": "object",
                "required": ["path"],
                "properties": {
                    "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
                    "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
                    "limit": {"type": "number", "description": "Maximum number of lines to read"}
                }
            }),
            extra: super::util::constrained_sampling(),
        }
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some("Read file contents".into())
    }

    fn prompt_guidelines(&self) -> Vec<String> {
        vec!["Use read to examine files instead of cat or sed.".into()]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move { read(&args, &ctx).await })
    }
}

/// The MIME type of an image we send as an attachment, from its first bytes
/// (jpeg, png, gif, webp, bmp).
pub fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    super::image::detect_mime(bytes)
}

/// The result for an image file: `[text, image]`, or only the text when the
/// image could not be decoded or made small enough. pi 1.6.0 repeats it as
/// `structuredContent` (`{type, data, mimeType, note}` or the text).
fn image_result(bytes: &[u8], mime: &str, auto_resize: bool) -> ToolOutput {
    let prepared = super::image::prepare(bytes, mime, auto_resize);
    let Some((data, mime_type)) = prepared.image else {
        return with_structured(text_result(prepared.text, None));
    };
    let structured = json!({
        "type": "image",
        "data": data,
        "mimeType": mime_type,
        "note": prepared.text,
    });
    ToolOutput {
        content: vec![
            ContentBlock::text(prepared.text),
            ContentBlock::Image(ImageBlock {
                data,
                mime_type,
                extra: Default::default(),
            }),
        ],
        details: None,
        is_error: false,
        structured: Some(structured),
        ..Default::default()
    }
}

async fn read(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let Some(path_arg) = str_arg(args, "path") else {
        return invalid_args("read", args);
    };
    let abs = resolve_path(path_arg, &ctx.cwd);
    if let Err(e) = tokio::fs::metadata(&abs).await {
        return thrown(node_fs_error(&e, "access", &abs));
    }
    let bytes = match tokio::fs::read(&abs).await {
        Ok(b) => b,
        Err(e) if e.raw_os_error() == Some(21) => {
            return thrown("EISDIR: illegal operation on a directory, read")
        }
        Err(e) => return thrown(node_fs_error(&e, "open", &abs)),
    };
    if let Some(mime) = image_mime(&bytes) {
        // decoding and re-encoding take a while: off the async workers
        let auto_resize = ctx.auto_resize_images;
        return match tokio::task::spawn_blocking(move || image_result(&bytes, mime, auto_resize))
            .await
        {
            Ok(out) => out,
            Err(e) => thrown(format!("{e}")),
        };
    }
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.split('\n').collect();
    let total = all.len();
    let offset = num_arg(args, "offset");
    let start = match offset {
        Some(o) if o >= 1.0 => (o as usize).saturating_sub(1),
        _ => 0,
    };
    if start >= total {
        let o = offset.map_or_else(|| "0".to_string(), js_number);
        return thrown(format!(
            "Offset {o} is beyond end of file ({total} lines total)"
        ));
    }
    let limit = num_arg(args, "limit")
        .filter(|l| *l >= 0.0)
        .map(|l| l as usize);
    let end = limit.map_or(total, |l| (start + l).min(total));
    let selected = all[start..end].join("\n");
    let t = truncate_head(&selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    let first = start + 1;
    if t.first_line_exceeds_limit {
        let size = format_size(all[start].len());
        let msg = format!(
            "[Line {first} is {size}, exceeds {} limit. Use bash: sed -n '{first}p' {path_arg} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES)
        );
        return with_structured(text_result(msg, Some(json!({ "truncation": t.to_json() }))));
    }
    if t.truncated {
        let last = first + t.output_lines - 1;
        let limit_note = if t.truncated_by == Some(super::truncate::TruncatedBy::Bytes) {
            format!(" ({} limit)", format_size(DEFAULT_MAX_BYTES))
        } else {
            String::new()
        };
        let msg = format!(
            "{}\n\n[Showing lines {first}-{last} of {total}{limit_note}. Use offset={} to continue.]",
            t.content,
            last + 1
        );
        return with_structured(text_result(msg, Some(json!({ "truncation": t.to_json() }))));
    }
    if limit.is_some() && end < total {
        let remaining = total - end;
        return with_structured(text_result(
            format!(
                "{}\n\n[{remaining} more lines in file. Use offset={} to continue.]",
                t.content,
                end + 1
            ),
            None,
        ));
    }
    with_structured(text_result(t.content, None))
}

/// pi 1.6.0 repeats a text read's content as `structuredContent`.
fn with_structured(mut out: ToolOutput) -> ToolOutput {
    if let Some(ContentBlock::Text(t)) = out.content.first() {
        out.structured = Some(Value::String(t.text.clone()));
    }
    out
}
