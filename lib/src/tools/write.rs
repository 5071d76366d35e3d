//! `write`: create or overwrite a file, making parent directories.

use serde_json::{json, Value};

use super::util::{node_fs_error, resolve_path, str_arg, text_result, thrown, INLINE_FILE_MAX};
use super::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};
use crate::format::tool::ToolDefinition;

/// The `write` tool.
pub struct WriteTool;

impl Tool for WriteTool {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        "write".into()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "write".into(),
            description: "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.".into(),
            parameters: json!({
                "type": "object",
                "required": ["path", "content"],
                "properties": {
                    "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
                    "content": {"type": "string", "description": "Content to write to the file"}
                }
            }),
            extra: super::util::constrained_sampling(),
        }
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some("Create or overwrite files".into())
    }

    fn prompt_guidelines(&self) -> Vec<String> {
        vec!["Use write only for new files or complete rewrites.".into()]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move { write(&args, &ctx).await })
    }
}

async fn write(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let (Some(path_arg), Some(content)) = (str_arg(args, "path"), str_arg(args, "content")) else {
        return thrown(
            "Validation failed for tool \"write\": path and content are required strings",
        );
    };
    let abs = resolve_path(path_arg, &ctx.cwd);
    if let Err(denied) = ctx.sandbox.check_write(&abs) {
        return thrown(denied);
    }
    // Small content is written on the run's thread, larger content on the
    // blocking pool (see `INLINE_FILE_MAX`).
    let small = content.len() as u64 <= INLINE_FILE_MAX;
    if let Some(parent) = abs.parent() {
        let made = if small {
            std::fs::create_dir_all(parent)
        } else {
            tokio::fs::create_dir_all(parent).await
        };
        if let Err(e) = made {
            return thrown(node_fs_error(&e, "mkdir", parent));
        }
    }
    fn write_file(
        target: &std::path::Path,
        bytes: &[u8],
    ) -> Result<(), crate::regular_file::FileError> {
        use crate::regular_file::{create, FileError};
        let mut f = create(target)?;
        std::io::Write::write_all(&mut f, bytes).map_err(FileError::Io)
    }
    let written = if small {
        Ok(write_file(&abs, content.as_bytes()))
    } else {
        let target = abs.clone();
        let bytes = content.as_bytes().to_vec();
        tokio::task::spawn_blocking(move || write_file(&target, &bytes)).await
    };
    match written {
        Ok(Ok(())) => text_result(format!("Successfully wrote to {path_arg}"), None),
        Ok(Err(crate::regular_file::FileError::Io(e))) => thrown(node_fs_error(&e, "open", &abs)),
        Ok(Err(e)) => thrown(format!("Cannot write {}: {e}", abs.display())),
        Err(e) => thrown(format!("write failed: {e}")),
    }
}
