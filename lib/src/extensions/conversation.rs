//! What the tasks serving one extension process share, and how they read
//! what it writes. Records come on stdout, or on the records pipe (fd 3,
//! announced in `PI_EXT_RECORDS_FD`): whichever carries `register` is the
//! protocol's from then on. An extension that writes its records to fd 3
//! leaves its stdout (and its children's, which inherit it) to free text,
//! forwarded like stderr, so nothing a child prints can pass for an answer.
//! Every line is read under [`MAX_RECORD`], stderr lines under
//! [`MAX_STDERR_LINE`].

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio::io::{AsyncRead, BufReader};
use tokio::sync::{mpsc, oneshot, watch};

use super::host::CallHandler;
use super::wire::{is_dialog, lock, write_line, MAX_RECORD, MAX_STDERR_LINE};
use crate::capped_lines::{self, Line};
use crate::format::extension::{ExtRecord, HostRecord, Register, RegisterMore};

/// The file descriptor an extension may write its records to.
pub const RECORDS_FD: i32 = 3;

/// Where a line from the extension came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Source {
    Stdout = 1,
    RecordsFd = 2,
}

/// [`Shared::channel`] before `register`.
pub(super) const UNDECIDED: u8 = 0;

/// The records pipe: the read end stays here, the write end becomes the
/// child's fd 3.
pub(super) struct RecordsPipe {
    pub(super) read: OwnedFd,
    pub(super) write: OwnedFd,
}

/// A new records pipe (both ends close-on-exec here; the child's fd 3 is a
/// copy without that flag), or `None` if the system refuses one.
pub(super) fn records_pipe() -> Option<RecordsPipe> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2(2) fills two new descriptors we own from here on.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if r != 0 {
        return None;
    }
    // SAFETY: both descriptors were just created and are owned by nobody
    // else.
    Some(unsafe {
        RecordsPipe {
            read: OwnedFd::from_raw_fd(fds[0]),
            write: OwnedFd::from_raw_fd(fds[1]),
        }
    })
}

/// Makes `write` the child's [`RECORDS_FD`] (run in the child, after fork).
pub(super) fn give_records_fd(cmd: &mut tokio::process::Command, write: &OwnedFd) {
    let fd = write.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and calls
    // only dup2(2) and fcntl(2), which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if fd == RECORDS_FD {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, RECORDS_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Reads one output of the extension (stdout, or the records pipe) until it
/// ends: records while this output is (or may be) the protocol's channel;
/// once the other one is, stdout lines are free text forwarded like stderr
/// and records-pipe lines are ignored.
pub(super) async fn read_output<R: AsyncRead + Unpin>(sh: Arc<Shared>, from: Source, out: R) {
    let mut r = BufReader::new(out);
    let mut buf = Vec::new();
    loop {
        let got = capped_lines::read_line(&mut r, &mut buf, MAX_RECORD).await;
        let chosen = sh.channel.load(Ordering::Acquire);
        let ours = chosen == UNDECIDED || chosen == from as u8;
        match got {
            Ok(Line::Eof) => break,
            Ok(Line::Text) if !ours => {
                if from == Source::Stdout {
                    eprintln!(
                        "{}: extension {}: {}",
                        sh.prog,
                        sh.display,
                        String::from_utf8_lossy(&buf)
                    );
                }
            }
            Ok(Line::TooLong) if !ours => {
                let cut = capped_lines::skip_line(&mut r).await.unwrap_or(0);
                if from == Source::Stdout {
                    buf.truncate(MAX_STDERR_LINE);
                    eprintln!(
                        "{}: extension {}: {} [line cut: {} more bytes dropped]",
                        sh.prog,
                        sh.display,
                        String::from_utf8_lossy(&buf),
                        cut + (MAX_RECORD - MAX_STDERR_LINE) as u64
                    );
                }
            }
            Ok(Line::Text) => {
                let line = String::from_utf8_lossy(&buf);
                if !line.trim().is_empty() && !sh.take(&line, from, &sh) {
                    break;
                }
            }
            Ok(Line::TooLong) => {
                sh.die(format!(
                    "broke the protocol: a record is longer than {} (the limit)",
                    capped_lines::size_text(MAX_RECORD)
                ));
                sh.kill();
                break;
            }
            Err(e) => {
                if ours {
                    sh.die(format!("broke the protocol: {e}"));
                    sh.kill();
                }
                break;
            }
        }
    }
    sh.ended.send_modify(|(stdout, fd)| match from {
        Source::Stdout => *stdout = true,
        Source::RecordsFd => *fd = true,
    });
}

/// Waits until the protocol's channel has ended (both outputs, while
/// neither carried `register`): every answer written before an exit is
/// read by then.
pub(super) async fn protocol_ended(sh: &Shared) {
    let mut ended = sh.ended.subscribe();
    let _ = ended
        .wait_for(|(stdout, fd)| match sh.channel.load(Ordering::Acquire) {
            c if c == Source::Stdout as u8 => *stdout,
            c if c == Source::RecordsFd as u8 => *fd,
            _ => *stdout && *fd,
        })
        .await;
}

/// An answer: the outcome, and the messages of handlers that threw without
/// ending the chain.
pub(super) type Answer = (Result<Value, String>, Vec<String>);

pub(super) struct Pending {
    pub(super) tx: oneshot::Sender<Answer>,
    pub(super) updates: Option<mpsc::UnboundedSender<Value>>,
}

/// What the conversation's tasks and the [`Host`] share.
pub(super) struct Shared {
    pub(super) display: String,
    pub(super) prog: String,
    pub(super) pgid: Option<i32>,
    pub(super) stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    /// The writes started without waiting (`cancel` records), which the
    /// end awaits before its `bye`: a spawned write runs only when the
    /// runtime gets to it, and must not find stdin already closed.
    pub(super) later: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    pub(super) pending: Mutex<HashMap<u64, Pending>>,
    /// Why the process is dead (the whole diagnostic), once it is.
    pub(super) dead: Mutex<Option<String>>,
    /// The same without the extension's name.
    pub(super) cause: Mutex<Option<String>>,
    /// `register` arrived: from now on a death is reported on stderr (before,
    /// it is the start's error).
    pub(super) registered: AtomicBool,
    pub(super) handler: OnceLock<Arc<dyn CallHandler>>,
    pub(super) more: Mutex<Vec<RegisterMore>>,
    /// How many dialogs (`ui.confirm` …) the extension is waiting for.
    pub(super) dialogs: watch::Sender<usize>,
    /// The extension being loaded (`loading` records), for the handshake.
    pub(super) loading: watch::Sender<Option<usize>>,
    /// Who gets `register` (taken by the first one).
    pub(super) reg_tx: Mutex<Option<oneshot::Sender<Register>>>,
    /// Where the records come from: [`UNDECIDED`] until `register`
    /// arrives, then the [`Source`] that carried it.
    pub(super) channel: AtomicU8,
    /// Which of the outputs ended: `(stdout, records fd)`.
    pub(super) ended: watch::Sender<(bool, bool)>,
}

impl Shared {
    /// Marks the host dead (the first cause wins), reports it once (after
    /// registration) and fails every outstanding request.
    pub(super) fn die(&self, cause: String) {
        {
            let mut d = lock(&self.dead);
            if d.is_some() {
                return;
            }
            let reason = format!("extension {} {cause}", self.display);
            if self.registered.load(Ordering::Acquire) {
                eprintln!("{}: {reason}", self.prog);
            }
            *d = Some(reason);
            *lock(&self.cause) = Some(cause);
        }
        lock(&self.pending).clear();
    }

    pub(super) fn kill(&self) {
        if let Some(pgid) = self.pgid {
            crate::process_group::kill(pgid);
        }
    }

    /// Serves one record from the extension; `false` ends the conversation.
    fn take(&self, line: &str, from: Source, me: &Arc<Shared>) -> bool {
        let rec = match ExtRecord::parse(line) {
            Ok(r) => r,
            Err(e) => {
                self.die(format!("broke the protocol: {e}"));
                self.kill();
                return false;
            }
        };
        match rec {
            ExtRecord::Register(r) => {
                if let Some(tx) = lock(&self.reg_tx).take() {
                    // The channel that carried `register` is the
                    // protocol's from now on.
                    let _ = self.channel.compare_exchange(
                        UNDECIDED,
                        from as u8,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    let _ = tx.send(r);
                }
            }
            ExtRecord::Loading { ext, .. } => {
                self.loading.send_replace(Some(ext));
            }
            ExtRecord::RegisterMore(m) => lock(&self.more).push(m),
            ExtRecord::Result {
                id,
                outcome,
                errors,
            } => {
                if let Some(p) = lock(&self.pending).remove(&id) {
                    let _ = p.tx.send((outcome, errors));
                }
            }
            ExtRecord::ExtensionError { ext, event, error } => match self.handler.get() {
                Some(h) => h.extension_error(&self.display, ext, &event, &error),
                None => eprintln!(
                    "{}: extension {}: {event}: {error}",
                    self.prog, self.display
                ),
            },
            ExtRecord::Update { id, partial } => {
                if let Some(u) = lock(&self.pending).get(&id).and_then(|p| p.updates.clone()) {
                    let _ = u.send(partial);
                }
            }
            ExtRecord::Call {
                id,
                ext,
                method,
                params,
            } => {
                // Started here, in line order (a call's effect precedes the
                // answers read after it); awaited apart, so a slow answer
                // blocks nothing.
                let dialog = is_dialog(&method);
                if dialog {
                    self.dialogs.send_modify(|n| *n += 1);
                }
                let fut = match self.handler.get() {
                    Some(h) => h.call(ext, method, params),
                    None => Box::pin(std::future::ready(Err(format!(
                        "pi-toolkit host: {method} is not available during loading"
                    )))),
                };
                let me = Arc::clone(me);
                tokio::spawn(async move {
                    let r = fut.await;
                    if dialog {
                        me.dialogs.send_modify(|n| *n = n.saturating_sub(1));
                    }
                    let (result, error) = match r {
                        Ok(v) => (Some(v), None),
                        Err(e) => (None, Some(e)),
                    };
                    write_line(
                        &me.stdin,
                        HostRecord::Return { id, result, error }.to_line(),
                    )
                    .await;
                });
            }
            ExtRecord::Unknown(_) => {}
        }
        true
    }
}

/// Forwards the extension's stderr line by line, each cut at
/// [`MAX_STDERR_LINE`].
pub(super) async fn forward_stderr(
    prog: String,
    display: String,
    stderr: tokio::process::ChildStderr,
) {
    let mut r = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        match capped_lines::read_line(&mut r, &mut buf, MAX_STDERR_LINE).await {
            Ok(Line::Text) => {
                eprintln!(
                    "{prog}: extension {display}: {}",
                    String::from_utf8_lossy(&buf)
                )
            }
            Ok(Line::TooLong) => {
                let cut = capped_lines::skip_line(&mut r).await.unwrap_or(0);
                eprintln!(
                    "{prog}: extension {display}: {} [line cut at {}: {cut} more bytes dropped]",
                    String::from_utf8_lossy(&buf),
                    capped_lines::size_text(MAX_STDERR_LINE)
                );
            }
            Ok(Line::Eof) | Err(_) => return,
        }
    }
}

/// How a process ended, for people.
pub(super) fn exit_text(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(c), _) => format!("code {c}"),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => "unknown status".into(),
        },
        Err(e) => e.to_string(),
    }
}
