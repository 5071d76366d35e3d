//! `pi-run --gate CMD` (beyond pi): an approval step that runs `sh -c CMD`
//! once per tool call with `{"toolName","toolCallId","input","cwd"}` on
//! stdin (plus `"subagent"` for a subagent child's call). Exit 0 allows; exit 1 blocks with the first line of stdout as the
//! reason (else `blocked by --gate`); any other exit, a failure to start,
//! a signal, a timeout or more than [`MAX_GATE_OUTPUT`] on stdout blocks
//! too (fail closed), and the gate's whole process group is killed.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::agent::hooks::{Approval, ApprovalRequest, BoxFuture, Delegation, Gate};

/// The most a gate may print on stdout (only its first line is used).
pub const MAX_GATE_OUTPUT: usize = 1024 * 1024;

pub struct CommandGate {
    pub command: String,
    pub timeout: Duration,
}

async fn run(cmd: &str, input: String, timeout: Duration, cwd: &std::path::Path) -> Approval {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return Approval::Block(format!("--gate {cmd:?} could not start: {e}")),
    };
    let pgid = child.id().and_then(|p| i32::try_from(p).ok());
    if let Some(p) = pgid {
        crate::process_group::register(p);
    }
    let verdict = judge(&mut child, pgid, input, timeout).await;
    // Whatever the gate left running in the background goes with it.
    if let Some(p) = pgid {
        crate::process_group::kill(p);
    }
    verdict
}

/// Feeds the gate its input and reads its verdict.
async fn judge(
    child: &mut tokio::process::Child,
    pgid: Option<i32>,
    input: String,
    timeout: Duration,
) -> Approval {
    let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Approval::Block("--gate: cannot open its pipes".into());
    };
    // The input is written while stdout is read: a gate that prints before
    // it reads (or never reads) cannot block the other side.
    let write = async move {
        // A gate that does not read its stdin is fine.
        let _ = stdin.write_all(input.as_bytes()).await;
    };
    let read = async {
        let mut out = Vec::new();
        let cap = u64::try_from(MAX_GATE_OUTPUT).unwrap_or(u64::MAX) + 1;
        let _ = (&mut stdout).take(cap).read_to_end(&mut out).await;
        out
    };
    let work = async {
        let ((), out) = tokio::join!(write, read);
        if out.len() > MAX_GATE_OUTPUT {
            return None;
        }
        Some((child.wait().await, out))
    };
    let kill = || {
        if let Some(pgid) = pgid {
            crate::process_group::kill(pgid);
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(Some((Ok(status), out))) => match status.code() {
            Some(0) => Approval::Allow,
            Some(1) => {
                let text = String::from_utf8_lossy(&out);
                let line = text.lines().next().unwrap_or("").trim();
                Approval::Block(if line.is_empty() {
                    "blocked by --gate".into()
                } else {
                    line.to_string()
                })
            }
            Some(c) => Approval::Block(format!("--gate failed (exit {c}); blocking execution")),
            None => Approval::Block("--gate was killed; blocking execution".into()),
        },
        Ok(Some((Err(e), _))) => Approval::Block(format!("--gate failed: {e}; blocking execution")),
        Ok(None) => {
            kill();
            Approval::Block(format!(
                "--gate printed more than {}; blocking execution",
                crate::capped_lines::size_text(MAX_GATE_OUTPUT)
            ))
        }
        Err(_) => {
            kill();
            Approval::Block(format!(
                "--gate did not answer within {} s; blocking execution",
                timeout.as_secs_f64()
            ))
        }
    }
}

impl Gate for CommandGate {
    fn approve(&self, req: ApprovalRequest) -> BoxFuture<'_, Approval> {
        let input = Delegation::stamp(
            req.delegation.as_ref(),
            json!({"toolName": req.tool_name, "toolCallId": req.tool_call_id, "input": req.input, "cwd": req.cwd.display().to_string()}),
        )
        .to_string();
        Box::pin(async move { run(&self.command, input, self.timeout, &req.cwd).await })
    }
}
