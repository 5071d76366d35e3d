//! A stdio server's process, from start to end. It runs in its own process
//! group, so whatever it starts (`sh -c "helper & exec server"`) is in
//! that group too. Its stdout is read through a line cap: a message over
//! [`MAX_MESSAGE`] ends the connection at once and is reported, naming the
//! server and the cap, instead of being dropped while its request waits
//! out the timeout. [`Process::end`] ends the whole group: stdin is closed
//! first (the transport's close), then the server has [`EOF_GRACE`] to
//! exit, then every process still in the group gets SIGTERM and
//! [`TERM_GRACE`] to go, then SIGKILL — so neither a background child nor
//! a server that ignores EOF and SIGTERM outlives the run. A process that
//! is dropped without being ended gets SIGKILL to its group.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::RoleClient;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use crate::process_group::signal;

/// The largest message a server may send: 16 MiB, the SDK's own cap for
/// stdio lines and streamable HTTP events.
pub const MAX_MESSAGE: usize = 16 << 20;

/// How long a server has to exit after its stdin closes.
pub const EOF_GRACE: Duration = Duration::from_secs(2);

/// How long the group has after SIGTERM before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(2);

/// The transport over a server's stdin and (capped) stdout.
pub type Transport = AsyncRwTransport<RoleClient, CappedLines<ChildStdout>, ChildStdin>;

/// Set once a server's message went over [`MAX_MESSAGE`] and its
/// connection was closed for it (a stdio line here, an SSE event in
/// [`super::http`]).
#[derive(Clone, Default)]
pub struct Oversize(Arc<AtomicBool>);

impl Oversize {
    /// Whether a message went over the cap (the connection is then closed).
    pub fn hit(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    pub(super) fn note(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// The error of the server `name` once [`Oversize::hit`] (`closed`), or
    /// of one answer over the cap.
    pub fn error(name: &str, closed: bool) -> String {
        format!(
            "MCP server \"{name}\" sent a message larger than the {} MiB limit{}",
            MAX_MESSAGE >> 20,
            if closed {
                "; its connection was closed"
            } else {
                ""
            }
        )
    }
}

/// A reader that fails (with `InvalidData`) as soon as a line grows past
/// [`MAX_MESSAGE`] bytes without a newline, noting it in [`Oversize`].
pub struct CappedLines<R> {
    inner: R,
    line: usize,
    over: Oversize,
}

impl<R: AsyncRead + Unpin> AsyncRead for CappedLines<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.over.hit() {
            return Poll::Ready(Err(too_long()));
        }
        let start = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                for &b in &buf.filled()[start..] {
                    if b == b'\n' {
                        this.line = 0;
                    } else {
                        this.line += 1;
                    }
                }
                if this.line > MAX_MESSAGE {
                    this.over.note();
                    // A failed read hands over no bytes.
                    buf.set_filled(start);
                    return Poll::Ready(Err(too_long()));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

fn too_long() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("a message over the {} MiB limit", MAX_MESSAGE >> 20),
    )
}

/// A started server: the transport to hand the SDK, its stderr, its
/// process, and the oversize flag of its stdout.
pub struct Started {
    pub transport: Transport,
    pub stderr: Option<ChildStderr>,
    pub process: Process,
    pub oversize: Oversize,
}

/// Starts `command` in its own process group with piped stdio.
pub fn start(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&PathBuf>,
) -> std::io::Result<Started> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn()?;
    let pgid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.start_kill();
        return Err(std::io::Error::other("the server's stdio was not piped"));
    };
    let oversize = Oversize::default();
    let reader = CappedLines {
        inner: stdout,
        line: 0,
        over: oversize.clone(),
    };
    Ok(Started {
        // The cap is ours (above); the SDK's own would drop the line and
        // keep waiting.
        transport: AsyncRwTransport::new_client(reader, stdin)
            .with_max_line_length(MAX_MESSAGE + 2),
        stderr: child.stderr.take(),
        process: Process {
            child: Some(child),
            pgid,
        },
        oversize,
    })
}

/// A server process and its group.
pub struct Process {
    child: Option<Child>,
    pgid: i32,
}

impl Process {
    /// The process group (the server's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Ends the server and everything in its group (see the module docs);
    /// call once its stdin is closed. Dropped half-way (the runtime ends),
    /// the group gets SIGKILL.
    pub async fn end(mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = tokio::time::timeout(EOF_GRACE, child.wait()).await;
            end_group(self.pgid, TERM_GRACE).await;
            // Reap the server if the signals ended it.
            let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
        }
        self.child = None;
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.child.take().is_some() {
            signal(self.pgid, libc::SIGKILL);
        }
    }
}

/// Whether group `pgid` holds a process that is not a zombie. A zombie has
/// ended; where nobody reaps orphans (a container's init) it would stay in
/// the group for good.
pub fn has_live_process(pgid: i32) -> bool {
    if !signal(pgid, 0) {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.flatten().any(|e| {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold anything.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            return false;
        };
        let mut f = rest.split(' ');
        let state = f.next().unwrap_or("");
        let pgrp = f.nth(1).and_then(|g| g.parse::<i32>().ok());
        pgrp == Some(pgid) && !matches!(state, "Z" | "X")
    })
}

/// Ends group `pgid`: SIGTERM when a process is left, up to `grace` for
/// all of them to go, then SIGKILL.
pub async fn end_group(pgid: i32, grace: Duration) {
    if !has_live_process(pgid) {
        return;
    }
    signal(pgid, libc::SIGTERM);
    let start = tokio::time::Instant::now();
    while has_live_process(pgid) {
        if start.elapsed() >= grace {
            signal(pgid, libc::SIGKILL);
            // SIGKILL takes effect when the kernel next schedules each
            // process (a moment on a loaded machine): wait for that, so an
            // ended group has no live process left when this returns.
            let killed = tokio::time::Instant::now();
            while has_live_process(pgid) && killed.elapsed() < Duration::from_secs(1) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kills group `pgid` at once (a server still connecting when the run
/// ends).
pub fn kill_group(pgid: i32) {
    signal(pgid, libc::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A background child and a leader that ignores EOF and SIGTERM: both
    /// are gone after `end`, within the two grace periods.
    #[tokio::test]
    async fn end_leaves_nothing_of_the_group() {
        let s = start(
            "sh",
            &[
                "-c".into(),
                "trap '' TERM; sleep 100 & while :; do sleep 0.05; done".into(),
            ],
            &BTreeMap::new(),
            None,
        )
        .unwrap();
        let pgid = s.process.pgid();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(has_live_process(pgid));
        drop(s.transport);
        let t = std::time::Instant::now();
        s.process.end().await;
        assert!(!has_live_process(pgid), "the group is empty");
        assert!(t.elapsed() < EOF_GRACE + TERM_GRACE + Duration::from_secs(2));
    }

    /// A server that exits on EOF leaves its background child: that one
    /// gets SIGTERM at once, without waiting out a grace period.
    #[tokio::test]
    async fn a_background_child_of_a_server_that_exits_is_ended() {
        let s = start(
            "sh",
            &["-c".into(), "sleep 100 & exec cat".into()],
            &BTreeMap::new(),
            None,
        )
        .unwrap();
        let pgid = s.process.pgid();
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(s.transport);
        let t = std::time::Instant::now();
        s.process.end().await;
        assert!(!has_live_process(pgid));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[tokio::test]
    async fn a_line_over_the_cap_fails_the_read_and_is_noted() {
        let over = Oversize::default();
        let data = vec![b'x'; MAX_MESSAGE + 1];
        let mut r = CappedLines {
            inner: &data[..],
            line: 0,
            over: over.clone(),
        };
        let mut sink = Vec::new();
        let e = r.read_to_end(&mut sink).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(over.hit());
        // Exactly the cap, and many lines, are fine.
        let mut data = vec![b'x'; MAX_MESSAGE];
        data.push(b'\n');
        data.extend(std::iter::repeat_n(b'y', MAX_MESSAGE));
        let over = Oversize::default();
        let mut r = CappedLines {
            inner: &data[..],
            line: 0,
            over: over.clone(),
        };
        let mut sink = Vec::new();
        r.read_to_end(&mut sink).await.unwrap();
        assert!(!over.hit());
    }
}
