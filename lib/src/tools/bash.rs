//! `bash`: runs `bash -c <command>` in the session cwd in its own process
//! group, stdout and stderr interleaved in one pipe, streaming the growing
//! tail to the UI; tail-truncated at 2000 lines / 50 KiB with the full output
//! saved to `<tmp>/pi-bash-<16 hex>.log`. Under a sandbox the shell (and
//! everything it starts) is confined by the run's
//! [`crate::sandbox::Sandbox`], and loses the secret-looking variables.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::truncate::{
    format_size, js_number, truncate_tail, TruncatedBy, Truncation, DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
};
use super::util::{invalid_args, num_arg, str_arg, thrown};
use super::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};
use crate::format::tool::ToolDefinition;
use crate::format::ContentBlock;

/// The `bash` tool.
pub struct BashTool;

impl Tool for BashTool {
    fn output_schema(&self) -> Option<Value> {
        Some(
            serde_json::json!({"type": "object", "required": ["output", "truncated", "exit_code", "wall_time_seconds"], "properties": {
                "output": {"type": "string", "description": "Combined stdout and stderr, possibly truncated"},
                "truncated": {"type": "boolean"},
                "full_output_path": {"type": "string", "description": "Full output, when truncated"},
                "exit_code": {"type": "number"},
                "wall_time_seconds": {"type": "number"}
            }}),
        )
    }
    fn name(&self) -> std::borrow::Cow<'_, str> {
        "bash".into()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "bash".into(),
            description: "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last 2000 lines or 50KB (whichever is hit first). If truncated, full output is saved to a temp file. Optionally provide a timeout in seconds.".into(),
            parameters: json!({
                "type": "object",
                "required": ["command"],
                "properties": {
                    "command": {"type": "string", "description": "Shell command to execute"},
                    "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"}
                }
            }),
            extra: super::util::constrained_sampling(),
        }
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some("Execute bash commands (ls, grep, find, etc.)".into())
    }

    fn prompt_guidelines(&self) -> Vec<String> {
        vec![
            "You can inspect PI_* environment variables for current model and session details."
                .into(),
        ]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move { bash(&args, &ctx, on_update).await })
    }
}

/// Output beyond which pi 1.6.0 keeps only a rolling window of the end
/// (200 KiB): the shown tail is then cut from that window, starting after
/// its first newline (observed: `p-210000` vs `p-200000` in FINDINGS.md).
const WINDOW_BYTES: usize = 200 * 1024;

/// The output seen so far: a bounded tail plus counts over everything.
#[derive(Default)]
struct Output {
    /// The end of the output: at most `2 * WINDOW_BYTES`, at least the last
    /// `WINDOW_BYTES` once that much has arrived.
    tail: Vec<u8>,
    total_bytes: usize,
    newlines: usize,
    /// Bytes since the last newline: the length of the last line, however
    /// long (pi's "line is N" counts the whole line).
    line_len: usize,
    temp: Option<(PathBuf, tokio::fs::File)>,
}

impl Output {
    async fn push(&mut self, chunk: &[u8]) {
        self.total_bytes += chunk.len();
        self.newlines += memchr::memchr_iter(b'\n', chunk).count();
        self.line_len = match memchr::memrchr(b'\n', chunk) {
            Some(i) => chunk.len() - i - 1,
            None => self.line_len + chunk.len(),
        };
        if self.temp.is_none() && self.total_bytes > DEFAULT_MAX_BYTES {
            self.open_temp().await;
        }
        if let Some((_, f)) = &mut self.temp {
            // The full log is best effort; the tool result does not depend on it.
            let _ = f.write_all(chunk).await;
        }
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > 2 * WINDOW_BYTES {
            let drop = self.tail.len() - WINDOW_BYTES;
            self.tail.drain(..drop);
        }
    }

    /// The output is longer than the window: only its end is known.
    fn cut(&self) -> bool {
        self.total_bytes > WINDOW_BYTES
    }

    async fn open_temp(&mut self) {
        let path = std::env::temp_dir().join(format!(
            "pi-bash-{}.log",
            &uuid::Uuid::new_v4().simple().to_string()[..16]
        ));
        if let Ok(mut f) = tokio::fs::File::create(&path).await {
            if f.write_all(&self.tail).await.is_ok() {
                self.temp = Some((path, f));
            }
        }
    }

    /// pi's tail truncation of the output. Past the window, the window
    /// starts after its first newline (the partial line is dropped) unless
    /// that newline ends it: then the one long last line is kept and cut.
    fn truncation(&self) -> Truncation {
        if !self.cut() {
            return truncate_tail(
                &String::from_utf8_lossy(&self.tail),
                DEFAULT_MAX_LINES,
                DEFAULT_MAX_BYTES,
            );
        }
        let window = &self.tail[self.tail.len().saturating_sub(WINDOW_BYTES)..];
        let window = match memchr::memchr(b'\n', window) {
            Some(i) if i + 1 < window.len() => &window[i + 1..],
            _ => window,
        };
        let mut t = truncate_tail(
            &String::from_utf8_lossy(window),
            DEFAULT_MAX_LINES,
            DEFAULT_MAX_BYTES,
        );
        let ends_nl = self.tail.last() == Some(&b'\n');
        t.total_lines = self.newlines + 1 - usize::from(ends_nl);
        t.total_bytes = self.total_bytes;
        t.truncated = true;
        t.truncated_by.get_or_insert(TruncatedBy::Bytes);
        t
    }

    /// The text shown to the model (with pi's notice when truncated) and
    /// the success details.
    async fn render(&mut self) -> (String, Option<Value>) {
        let t = self.truncation();
        if !t.truncated {
            let text = String::from_utf8_lossy(&self.tail).into_owned();
            return (
                if text.is_empty() {
                    "(no output)".into()
                } else {
                    text
                },
                None,
            );
        }
        if self.temp.is_none() {
            self.open_temp().await;
        }
        if let Some((_, f)) = &mut self.temp {
            let _ = f.flush().await;
        }
        let path = self
            .temp
            .as_ref()
            .map_or_else(|| "undefined".to_string(), |(p, _)| p.display().to_string());
        let end = t.total_lines;
        let start = end + 1 - t.output_lines.max(1);
        let notice = if t.last_line_partial {
            // pi's quirk, kept: output ending in a newline has a last line
            // of 0B.
            format!(
                "[Showing last {} of line {end} (line is {}). Full output: {path}]",
                format_size(t.output_bytes),
                format_size(self.line_len)
            )
        } else if t.truncated_by == Some(TruncatedBy::Lines) {
            format!(
                "[Showing lines {start}-{end} of {}. Full output: {path}]",
                t.total_lines
            )
        } else {
            format!(
                "[Showing lines {start}-{end} of {} ({} limit). Full output: {path}]",
                t.total_lines,
                format_size(DEFAULT_MAX_BYTES)
            )
        };
        let mut details = Map::new();
        details.insert("truncation".into(), t.to_json());
        details.insert("fullOutputPath".into(), json!(path));
        (
            format!("{}\n\n{notice}", t.content),
            Some(Value::Object(details)),
        )
    }

    fn raw_text(&self) -> String {
        String::from_utf8_lossy(&self.tail).into_owned()
    }
}

/// The shell pi uses: `/bin/bash`, else `bash` on PATH, else `sh`.
pub fn shell() -> PathBuf {
    if Path::new("/bin/bash").exists() {
        return PathBuf::from("/bin/bash");
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("bash");
            if p.exists() {
                return p;
            }
        }
    }
    PathBuf::from("sh")
}

/// Kills the whole process group `pgid` (the shell and everything it
/// started, background jobs included) with SIGKILL.
async fn kill_group(pgid: u32) {
    if let Ok(pgid @ 1..) = libc::pid_t::try_from(pgid) {
        // SAFETY: kill(2) with a negative pid signals a process group; no
        // memory is involved.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Largest timeout in milliseconds: what a JavaScript timer holds
/// (2^31 - 1), so pi's limit of 2147483.647 seconds.
pub const MAX_TIMEOUT_MS: f64 = 2_147_483_647.0;

/// The `timeout` argument checked as pi 1.6.0 checks it: absent (or null)
/// means none; otherwise a positive, finite number of seconds up to
/// 2147483.647, else pi's error text. Returns the duration and the number
/// as given (for the "timed out after" message).
fn timeout_arg(args: &Value) -> Result<Option<(Duration, f64)>, String> {
    const NOT_FINITE: &str = "Invalid timeout: must be a finite number of seconds";
    match args.get("timeout") {
        None | Some(Value::Null) => return Ok(None),
        Some(_) => {}
    }
    let t = num_arg(args, "timeout").unwrap_or(f64::NAN);
    if !t.is_finite() || t <= 0.0 {
        return Err(NOT_FINITE.into());
    }
    if t * 1000.0 > MAX_TIMEOUT_MS {
        return Err(format!(
            "Invalid timeout: maximum is {} seconds",
            js_number(MAX_TIMEOUT_MS / 1000.0)
        ));
    }
    Duration::try_from_secs_f64(t)
        .map(|d| Some((d, t)))
        .map_err(|_| NOT_FINITE.into())
}

enum End {
    Exited(Option<i32>),
    TimedOut,
    Aborted,
}

async fn bash(args: &Value, ctx: &ToolContext, mut on_update: UpdateSink) -> ToolOutput {
    let started = std::time::Instant::now();
    // pi announces the run with an empty partial result first.
    on_update(ToolOutput::default());
    let Some(command) = str_arg(args, "command") else {
        return invalid_args(&BashTool.definition(), args);
    };
    let timeout = match timeout_arg(args) {
        Ok(t) => t,
        Err(msg) => return thrown(msg),
    };
    if !ctx.cwd.is_dir() {
        return thrown(format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            ctx.cwd.display()
        ));
    }
    let (tx, mut rx) = match tokio::net::unix::pipe::pipe() {
        Ok(p) => p,
        Err(e) => return thrown(format!("Failed to create pipe: {e}")),
    };
    let writer: OwnedFd = match tx.into_blocking_fd() {
        Ok(fd) => fd,
        Err(e) => return thrown(format!("Failed to create pipe: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(fd) => fd,
        Err(e) => return thrown(format!("Failed to create pipe: {e}")),
    };
    let mut cmd = tokio::process::Command::new(shell());
    cmd.arg("-c")
        .arg(command)
        .current_dir(&ctx.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer2))
        .process_group(0)
        .kill_on_drop(true);
    cmd.envs(ctx.env.iter().map(|(k, v)| (k, v)));
    let bin = crate::paths::agent_dir().join("bin");
    if bin.is_dir() {
        let mut paths = vec![bin];
        if let Some(p) = std::env::var_os("PATH") {
            paths.extend(std::env::split_paths(&p));
        }
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env("PATH", joined);
        }
    }
    // The run's sandbox, installed in the child between fork and exec.
    if let Err(e) = ctx.sandbox.confine(cmd.as_std_mut(), &ctx.cwd) {
        return thrown(format!("Failed to start shell: sandbox: {e}"));
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return thrown(format!(
                "Failed to start shell: {}",
                ctx.sandbox.spawn_error(&e)
            ))
        }
    };
    // The Command still holds the write ends; drop it so EOF can arrive.
    drop(cmd);
    let pgid = child.id();
    let mut out = Output::default();
    // Filled by `read_buf` from its spare capacity: only the pages a read
    // writes are ever touched (a zeroed buffer would touch all sixteen).
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let deadline = timeout.and_then(|(d, _)| tokio::time::Instant::now().checked_add(d));
    let mut exited: Option<Option<i32>> = None;
    let mut eof = false;
    let end = loop {
        if eof {
            if let Some(code) = exited {
                break End::Exited(code);
            }
        }
        buf.clear();
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = rx.read_buf(&mut buf), if !eof => match r {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => {
                    out.push(&buf[..n]).await;
                    let t = out.truncation();
                    on_update(ToolOutput {
                        content: vec![ContentBlock::text(t.content.clone())],
                        details: t.truncated.then(|| json!({ "truncation": t.to_json() })),
                        is_error: false,
                        ..Default::default()
                    });
                }
            },
            status = child.wait(), if exited.is_none() => {
                exited = Some(status.ok().and_then(|s| s.code()));
                if !eof {
                    // Background processes may keep the pipe open: drain
                    // what is there, briefly, then stop waiting.
                    let grace = tokio::time::sleep(Duration::from_millis(100));
                    tokio::pin!(grace);
                    loop {
                        buf.clear();
                        tokio::select! {
                            r = rx.read_buf(&mut buf) => match r {
                                Ok(0) | Err(_) => break,
                                Ok(n) => out.push(&buf[..n]).await,
                            },
                            _ = &mut grace => break,
                        }
                    }
                    eof = true;
                }
            },
            _ = sleep => {
                if let Some(id) = pgid { kill_group(id).await; }
                let _ = child.start_kill();
                break End::TimedOut;
            },
            _ = ctx.cancel.cancelled() => {
                if let Some(id) = pgid { kill_group(id).await; }
                let _ = child.start_kill();
                break End::Aborted;
            },
        }
    };
    if !matches!(end, End::Exited(_)) {
        let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
    }
    let raw = out.raw_text();
    let (mut text, details) = out.render().await;
    // What the sandbox undid after the command (a planted git `commondir`).
    for line in ctx.sandbox.sweep() {
        text.push_str(&format!("\n\n{line}"));
    }
    match end {
        End::Exited(Some(0)) => ToolOutput {
            structured: Some(structured(&text, details.is_some(), Some(0), started)),
            content: vec![ContentBlock::text(text)],
            details,
            is_error: false,
            ..Default::default()
        },
        End::Exited(code) => {
            let shown = code.map_or_else(|| "null".to_string(), |c| c.to_string());
            ToolOutput {
                structured: Some(structured(&text, details.is_some(), code, started)),
                content: vec![ContentBlock::text(format!(
                    "{text}\n\nCommand exited with code {shown}"
                ))],
                details,
                is_error: true,
                flag_error: true,
            }
        }
        End::TimedOut | End::Aborted => {
            let msg = match end {
                End::TimedOut => format!(
                    "Command timed out after {} seconds",
                    js_number(timeout.map_or(0.0, |(_, secs)| secs))
                ),
                _ => "Command aborted".to_string(),
            };
            if raw.is_empty() {
                thrown(msg)
            } else {
                thrown(format!("{text}\n\n{msg}"))
            }
        }
    }
}

/// pi 1.6.0's `structuredContent` of a finished command.
fn structured(
    output: &str,
    truncated: bool,
    code: Option<i32>,
    started: std::time::Instant,
) -> Value {
    json!({
        "output": output,
        "truncated": truncated,
        "exit_code": code,
        "wall_time_seconds": started.elapsed().as_secs(),
    })
}
