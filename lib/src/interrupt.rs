//! Stopping a run from outside. SIGINT, SIGTERM and SIGHUP, a stdout
//! nobody can write to any more, and a limit of the run (its budget) all
//! end a run the same way: the first
//! cause is recorded and the run's cancellation token fires, so the agent
//! aborts the request or kills the running tools' process groups, saves the
//! partial message as aborted, and returns; the binary then exits with the
//! cause's code. A second signal while the run winds down exits at once.
//! A stdout pipe or socket whose reader went away is noticed the moment it
//! happens ([`on_stdout_closed`]), not at the next write, so a run whose
//! tool prints nothing for an hour still stops at once.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::cli::{
    EXIT_CLOSED_STDOUT, EXIT_FAILED, EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_LIMIT, EXIT_TERMINATED,
};

/// Why a run was stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum StopReason {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, a CI job's timeout).
    Terminate,
    /// SIGHUP (the terminal or the ssh session went away).
    Hangup,
    /// Writing to stdout failed with a closed pipe: nobody reads the output.
    StdoutClosed,
    /// Writing to stdout failed otherwise (a full disk); the error text.
    StdoutFailed(String),
    /// A limit of the run was reached (`--max-cost`, `--timeout`,
    /// `--max-turns`).
    Limit(crate::agent::budget::Limit),
}

impl StopReason {
    /// The exit status: 130 / 143 / 129 for the signals (128 + number),
    /// 141 for a closed stdout, 1 for another write error, 3 for a limit.
    pub fn exit_code(&self) -> i32 {
        match self {
            StopReason::Interrupt => EXIT_INTERRUPTED,
            StopReason::Terminate => EXIT_TERMINATED,
            StopReason::Hangup => EXIT_HANGUP,
            StopReason::StdoutClosed => EXIT_CLOSED_STDOUT,
            StopReason::StdoutFailed(_) => EXIT_FAILED,
            StopReason::Limit(_) => EXIT_LIMIT,
        }
    }

    /// The line for stderr.
    pub fn message(&self) -> String {
        match self {
            StopReason::Interrupt => "interrupted".into(),
            StopReason::Terminate => "terminated (SIGTERM)".into(),
            StopReason::Hangup => "hung up (SIGHUP)".into(),
            StopReason::StdoutClosed => "stopped: stdout was closed".into(),
            StopReason::StdoutFailed(e) => format!("stopped: cannot write to stdout: {e}"),
            StopReason::Limit(l) => l.message(),
        }
    }

    /// The cause of a failed write to stdout.
    pub fn from_write_error(e: &std::io::Error) -> Self {
        if crate::cli::is_broken_pipe(e) {
            StopReason::StdoutClosed
        } else {
            StopReason::StdoutFailed(e.to_string())
        }
    }
}

/// Records the first reason a run is stopped and cancels its token.
#[derive(Clone)]
pub struct Stopper {
    cancel: CancellationToken,
    reason: Arc<Mutex<Option<StopReason>>>,
}

impl Stopper {
    /// A stopper for the run that `cancel` aborts.
    pub fn new(cancel: CancellationToken) -> Self {
        Stopper {
            cancel,
            reason: Arc::new(Mutex::new(None)),
        }
    }

    /// Stops the run (the first reason wins) and tells whether this was
    /// the first.
    pub fn stop(&self, reason: StopReason) -> bool {
        let first = {
            let mut r = self.reason.lock().unwrap_or_else(|p| p.into_inner());
            if r.is_none() {
                *r = Some(reason);
                true
            } else {
                false
            }
        };
        self.cancel.cancel();
        first
    }

    /// Why the run was stopped, if it was.
    pub fn reason(&self) -> Option<StopReason> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops the run (141) the moment stdout's reader goes away, even while
    /// nothing is written ([`on_stdout_closed`]).
    pub fn watch_stdout(&self) {
        let me = self.clone();
        on_stdout_closed(move || {
            me.stop(StopReason::StdoutClosed);
        });
    }

    /// Handles SIGINT, SIGTERM and SIGHUP from now on (call inside a tokio
    /// runtime): the first stops the run, a second one exits at once with
    /// the first one's code. The error names a signal that could not be
    /// taken over.
    pub fn watch_signals(&self) -> Result<(), String> {
        use tokio::signal::unix::{signal, SignalKind};
        for (kind, reason, name) in [
            (SignalKind::interrupt(), StopReason::Interrupt, "SIGINT"),
            (SignalKind::terminate(), StopReason::Terminate, "SIGTERM"),
            (SignalKind::hangup(), StopReason::Hangup, "SIGHUP"),
        ] {
            let mut stream = signal(kind).map_err(|e| format!("cannot handle {name}: {e}"))?;
            let me = self.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    if !me.stop(reason.clone()) {
                        let code = me.reason().map_or(reason.exit_code(), |r| r.exit_code());
                        std::process::exit(code);
                    }
                }
            });
        }
        Ok(())
    }
}

/// Calls `closed` once, from a thread of its own, as soon as stdout's
/// reader is gone: a pipe whose read end was closed reports `POLLERR`, a
/// socket whose peer closed reports `POLLHUP` (`poll` with no events asked
/// waits for exactly these). Nothing is watched when stdout is a terminal,
/// a file or not open: those have no reader to lose.
pub fn on_stdout_closed(closed: impl FnOnce() + Send + 'static) {
    watch_closed(libc::STDOUT_FILENO, closed);
}

fn watch_closed(fd: libc::c_int, closed: impl FnOnce() + Send + 'static) {
    // SAFETY: fstat writes into the zeroed struct it is given; `fd` is only
    // inspected.
    let kind = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return;
        }
        st.st_mode & libc::S_IFMT
    };
    if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
        return;
    }
    std::thread::spawn(move || loop {
        let mut p = libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd, waited on without a time limit.
        let n = unsafe { libc::poll(&mut p, 1, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if p.revents & libc::POLLNVAL != 0 {
            return;
        }
        if p.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            closed();
            return;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_wins_and_cancels() {
        let cancel = CancellationToken::new();
        let s = Stopper::new(cancel.clone());
        assert_eq!(s.reason(), None);
        assert!(s.stop(StopReason::Terminate));
        assert!(cancel.is_cancelled());
        assert!(!s.stop(StopReason::Interrupt));
        assert_eq!(s.reason(), Some(StopReason::Terminate));
        assert_eq!(s.reason().unwrap().exit_code(), 143);
    }

    #[test]
    fn codes_and_write_errors() {
        assert_eq!(StopReason::Interrupt.exit_code(), 130);
        assert_eq!(StopReason::Hangup.exit_code(), 129);
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(
            StopReason::from_write_error(&pipe),
            StopReason::StdoutClosed
        );
        assert_eq!(StopReason::StdoutClosed.exit_code(), 141);
        let full = std::io::Error::from_raw_os_error(28);
        let r = StopReason::from_write_error(&full);
        assert_eq!(r.exit_code(), 1);
        assert!(r.message().contains("No space left"), "{}", r.message());
    }

    #[test]
    fn a_pipe_whose_reader_closes_is_noticed_without_a_write() {
        let (reader, writer) = std::io::pipe().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        use std::os::fd::AsRawFd;
        watch_closed(writer.as_raw_fd(), move || {
            let _ = tx.send(());
        });
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_err());
        drop(reader);
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .expect("the closed reader is noticed");
        drop(writer);
        // A regular file has no reader to lose: nothing is watched.
        let f = tempfile::tempfile().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        watch_closed(f.as_raw_fd(), move || {
            let _ = tx.send(());
        });
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(100))
            .is_err());
    }
}
