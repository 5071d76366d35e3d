//! Helpers the built-in tools share: resolving a path argument the way pi
//! does, reading typed arguments, and pi's result shapes.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::ToolOutput;
use crate::format::ContentBlock;
use crate::paths::normalize;

/// Resolves a path argument against `cwd` like pi: a leading `@` is
/// dropped, Unicode spaces become ASCII spaces, `~` and `~/` expand to the
/// home directory, relative paths join `cwd`.
pub fn resolve_path(arg: &str, cwd: &Path) -> PathBuf {
    let arg = arg.strip_prefix('@').unwrap_or(arg);
    let arg: String = arg
        .chars()
        .map(|c| match c {
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expanded = match (&home, arg.as_str()) {
        (Some(h), "~") => h.clone(),
        (Some(h), a) if a.starts_with("~/") => h.join(&a[2..]),
        _ => PathBuf::from(&arg),
    };
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    normalize(&joined)
}

/// A string argument, if present.
pub fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A numeric argument, if present (JSON numbers; numeric strings too, as
/// pi's argument coercion accepts them).
pub fn num_arg(args: &Value, key: &str) -> Option<f64> {
    match args.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A boolean argument (`true`/`"true"`).
pub fn bool_arg(args: &Value, key: &str) -> bool {
    match args.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    }
}

/// A thrown error as pi reports it: one text block, `details: {}`.
pub fn thrown(text: impl Into<String>) -> ToolOutput {
    ToolOutput {
        content: vec![ContentBlock::text(text)],
        details: Some(Value::Object(Map::new())),
        is_error: true,
        ..Default::default()
    }
}

/// A successful one-text-block result.
pub fn text_result(text: impl Into<String>, details: Option<Value>) -> ToolOutput {
    ToolOutput {
        content: vec![ContentBlock::text(text)],
        details,
        is_error: false,
        ..Default::default()
    }
}

/// Node's text for a failed filesystem call (`ENOENT: no such file or
/// directory, access '/abs/path'`).
pub fn node_fs_error(err: &std::io::Error, syscall: &str, path: &Path) -> String {
    let (code, msg) = errno_text(err);
    format!("{code}: {msg}, {syscall} '{}'", path.display())
}

/// Node's error code and message for an I/O error.
pub fn errno_text(err: &std::io::Error) -> (&'static str, &'static str) {
    match err.raw_os_error() {
        Some(2) => ("ENOENT", "no such file or directory"),
        Some(13) => ("EACCES", "permission denied"),
        Some(1) => ("EPERM", "operation not permitted"),
        Some(20) => ("ENOTDIR", "not a directory"),
        Some(21) => ("EISDIR", "illegal operation on a directory"),
        Some(30) => ("EROFS", "read-only file system"),
        Some(28) => ("ENOSPC", "no space left on device"),
        Some(40) => ("ELOOP", "too many symbolic links encountered"),
        Some(36) => ("ENAMETOOLONG", "name too long"),
        _ => match err.kind() {
            std::io::ErrorKind::NotFound => ("ENOENT", "no such file or directory"),
            std::io::ErrorKind::PermissionDenied => ("EACCES", "permission denied"),
            _ => ("EIO", "i/o error"),
        },
    }
}

/// The `constrainedSampling` pi 1.6.0 declares on read, bash, edit and write
/// (`{"type":"json_schema","strict":"prefer"}`), as the extra fields of a
/// [`crate::format::tool::ToolDefinition`].
pub fn constrained_sampling() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "constrainedSampling".into(),
        serde_json::json!({"type": "json_schema", "strict": "prefer"}),
    );
    m
}

/// Files up to this size are read, and edited files written, on the run's
/// thread. A regular file this small takes microseconds there; a hand-off
/// to the blocking pool costs more: starting the pool's thread the first
/// time (0.1 ms, and 0.3 MB or more of peak memory for its stack and
/// allocator arena), then two wake-ups per call. Larger files go to the
/// pool, so a big read never stalls the run.
pub const INLINE_FILE_MAX: u64 = 256 << 10;

/// Whether `meta` is a regular file small enough to handle on the run's
/// thread ([`INLINE_FILE_MAX`]).
pub fn small_regular(meta: &std::fs::Metadata) -> bool {
    meta.is_file() && meta.len() <= INLINE_FILE_MAX
}

/// Runs a synchronous, filesystem-bound tool body on the blocking pool, so
/// walking a large tree never stalls the runtime; a panic in it becomes a
/// thrown error naming the tool. An abort answers at once ("Operation
/// aborted"); the walk's thread finishes on its own and is discarded.
pub fn run_blocking<'a>(
    name: &'static str,
    args: Value,
    ctx: super::ToolContext,
    body: fn(&Value, &super::ToolContext) -> super::ToolOutput,
) -> super::ToolFuture<'a> {
    Box::pin(async move {
        let cancel = ctx.cancel.clone();
        let task = tokio::task::spawn_blocking(move || body(&args, &ctx));
        tokio::select! {
            r = task => r.unwrap_or_else(|e| thrown(format!("{name} failed: {e}"))),
            _ = cancel.cancelled() => thrown("Operation aborted"),
        }
    })
}

/// The error for arguments a tool cannot use, in pi's validation wording
/// (`def` is the tool's own definition). The agent validates before
/// executing, so this only answers direct library callers — with the same
/// text the model would get.
pub fn invalid_args(def: &crate::format::tool::ToolDefinition, args: &Value) -> ToolOutput {
    let tool = def.name.as_str();
    let text = match super::validate::validate_args(tool, &def.parameters, args) {
        Err(text) => text,
        Ok(_) => format!(
            "Validation failed for tool \"{tool}\":\n\nReceived arguments:\n{}",
            super::validate::pretty2(args)
        ),
    };
    thrown(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small files are read, edited and written on the caller's thread:
    /// with the blocking pool's only thread held busy, all three still
    /// finish (on the pool they would wait behind the busy task).
    #[test]
    fn small_files_do_not_wait_for_the_blocking_pool() {
        use crate::tools::{edit::EditTool, read::ReadTool, write::WriteTool, Tool, ToolContext};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "hello world\n").unwrap();
        let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let _busy = rt.spawn_blocking(move || {
            held_tx.send(()).unwrap();
            let _ = release_rx.recv();
        });
        held_rx.recv().unwrap();
        let ctx = ToolContext {
            cwd: dir.path().to_path_buf(),
            cancel: tokio_util::sync::CancellationToken::new(),
            auto_resize_images: true,
            tool_call_id: String::new(),
            caller: None,
            sandbox: std::sync::Arc::new(crate::sandbox::Sandbox::none()),
            host: None,
            env: Vec::new(),
        };
        let text = |out: &ToolOutput| match out.content.first() {
            Some(crate::format::ContentBlock::Text(t)) => t.text.clone(),
            other => panic!("not text: {other:?}"),
        };
        rt.block_on(async {
            let call = |tool: &'static dyn Tool, args: Value| {
                let ctx = ctx.clone();
                async move {
                    tokio::time::timeout(
                        std::time::Duration::from_secs(5),
                        tool.execute(args, ctx, Box::new(|_| {})),
                    )
                    .await
                    .expect("the tool waited for the busy blocking pool")
                }
            };
            let read = call(&ReadTool, serde_json::json!({"path": "notes.txt"})).await;
            assert!(!read.is_error);
            assert_eq!(text(&read), "hello world\n");
            let edit = call(
                &EditTool,
                serde_json::json!({"path": "notes.txt", "edits": [{"oldText": "hello", "newText": "goodbye"}]}),
            )
            .await;
            assert!(!edit.is_error, "{}", text(&edit));
            let write = call(
                &WriteTool,
                serde_json::json!({"path": "sub/new.txt", "content": "new\n"}),
            )
            .await;
            assert!(!write.is_error, "{}", text(&write));
        });
        release_tx.send(()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
            "goodbye world\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("sub/new.txt")).unwrap(),
            "new\n"
        );
    }

    #[test]
    fn paths_resolve_like_pi() {
        let cwd = Path::new("/w");
        assert_eq!(resolve_path("@a.txt", cwd), PathBuf::from("/w/a.txt"));
        assert_eq!(resolve_path("/x/../y", cwd), PathBuf::from("/y"));
        assert_eq!(resolve_path("a\u{00A0}b", cwd), PathBuf::from("/w/a b"));
        assert_eq!(resolve_path(".", cwd), PathBuf::from("/w"));
    }

    #[test]
    fn direct_callers_get_pis_validation_text() {
        let out = invalid_args(
            &super::super::Tool::definition(&super::super::read::ReadTool),
            &serde_json::json!({"offset": 2}),
        );
        assert!(out.is_error);
        let text = crate::format::message::blocks_text(&out.content, "");
        assert!(
            text.starts_with(
                "Validation failed for tool \"read\":\n  - path: missing\n\nReceived arguments:\n"
            ),
            "{text}"
        );
    }
}
