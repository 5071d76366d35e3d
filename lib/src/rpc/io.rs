//! The RPC transport: stdin lines in (pi's framing: LF-split, one trailing
//! `\r` dropped, no splitting on U+2028/2029; a line longer than
//! [`MAX_LINE_BYTES`] is answered with a parse error and skipped, never
//! held whole), signals, a stdout whose reader went away, and the one
//! writer every record goes through.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::cli::EXIT_CLOSED_STDOUT;
use crate::format::rpc::RpcResponse;
use crate::interrupt::StopReason;

/// The longest command line read (64 MiB, the newline not counted): room
/// for a prompt whose images come inline as base64 — more than a provider
/// accepts in one request — while a client that never sends a newline
/// cannot make the process hold more than this.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// What arrives from outside.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// One command line (framing removed).
    Line(String),
    /// A line passed [`MAX_LINE_BYTES`]; the rest of it, up to its
    /// newline, is skipped.
    TooLong,
    /// Stdin closed (or could not be read).
    Eof,
    /// SIGTERM / SIGHUP, or stdout closed: exit with this code.
    Signal(i32),
}

/// Reads `reader` on its own thread: each line, then `Eof`.
pub fn spawn_reader<R: std::io::Read + Send + 'static>(
    reader: R,
    tx: UnboundedSender<Input>,
) -> std::thread::JoinHandle<()> {
    spawn_reader_capped(reader, tx, MAX_LINE_BYTES)
}

fn spawn_reader_capped<R: std::io::Read + Send + 'static>(
    reader: R,
    tx: UnboundedSender<Input>,
    max: usize,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = std::io::BufReader::with_capacity(64 * 1024, reader);
        let mut buf: Vec<u8> = Vec::new();
        // Inside a line that passed the limit: bytes are dropped until its
        // newline.
        let mut skipping = false;
        loop {
            let chunk = match r.fill_buf() {
                Ok([]) => break,
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let (part, ends) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..i], true),
                None => (chunk, false),
            };
            let used = part.len() + usize::from(ends);
            if !skipping {
                if buf.len() + part.len() > max {
                    skipping = true;
                    buf = Vec::new();
                    if tx.send(Input::TooLong).is_err() {
                        return;
                    }
                } else {
                    buf.extend_from_slice(part);
                }
            }
            r.consume(used);
            if ends {
                if !skipping && tx.send(Input::Line(line(&mut buf))).is_err() {
                    return;
                }
                skipping = false;
            }
        }
        // The last line may lack its newline.
        if !skipping && !buf.is_empty() && tx.send(Input::Line(line(&mut buf))).is_err() {
            return;
        }
        let _ = tx.send(Input::Eof);
    })
}

/// The line in `buf` (taken, not copied), one trailing `\r` dropped.
fn line(buf: &mut Vec<u8>) -> String {
    let mut b = std::mem::take(buf);
    if b.last() == Some(&b'\r') {
        b.pop();
    }
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Stdin, SIGTERM (143), SIGHUP (129) and a stdout whose reader went away
/// (141, with its line on stderr) as one input stream (call inside a tokio
/// runtime), and a sender for other reasons to stop (a limit of the run).
/// A second signal while shutting down exits at once.
pub fn stdin_and_signals() -> Result<(UnboundedSender<Input>, UnboundedReceiver<Input>), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = unbounded_channel();
    for (kind, code, name) in [
        (SignalKind::terminate(), 143, "SIGTERM"),
        (SignalKind::hangup(), 129, "SIGHUP"),
    ] {
        let mut stream = signal(kind).map_err(|e| format!("cannot handle {name}: {e}"))?;
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut seen = false;
            while stream.recv().await.is_some() {
                if seen {
                    std::process::exit(code);
                }
                seen = true;
                let _ = tx.send(Input::Signal(code));
            }
        });
    }
    let closed = tx.clone();
    crate::interrupt::on_stdout_closed(move || {
        let _ = closed.send(Input::Signal(EXIT_CLOSED_STDOUT));
    });
    spawn_reader(std::io::stdin(), tx.clone());
    Ok((tx, rx))
}

/// The response to a line over [`MAX_LINE_BYTES`] (a parse error, as for
/// any line that is not a command).
pub fn too_long() -> RpcResponse {
    RpcResponse::err(
        None,
        "parse",
        format!(
            "Failed to parse command: line longer than {} MiB; skipped up to its newline",
            MAX_LINE_BYTES / (1024 * 1024)
        ),
    )
}

/// The server's view of its input: lines, EOF once, signals. A line over
/// the limit is answered here and never reaches the caller. After EOF only
/// signals come (and nothing ever, once no sender is left), so a loop
/// that keeps asking after EOF waits instead of spinning.
pub struct Inbox {
    rx: UnboundedReceiver<Input>,
    out: Out,
    ended: bool,
}

impl Inbox {
    pub fn new(rx: UnboundedReceiver<Input>, out: Out) -> Inbox {
        Inbox {
            rx,
            out,
            ended: false,
        }
    }

    /// Whether stdin has ended.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The next input (cancel-safe: usable in `select!`).
    pub async fn recv(&mut self) -> Input {
        loop {
            let next = self.rx.recv().await;
            if self.ended {
                match next {
                    Some(Input::Signal(code)) => return Input::Signal(code),
                    Some(_) => continue,
                    None => return std::future::pending().await,
                }
            }
            match next {
                Some(Input::TooLong) => {
                    self.out.record(&too_long());
                }
                Some(Input::Eof) | None => {
                    self.ended = true;
                    return Input::Eof;
                }
                Some(i) => return i,
            }
        }
    }
}

/// The protocol writer: one JSON record per line, flushed at once. Shared
/// by the event stream and the command handler so records never
/// interleave. A failed write marks it broken (with why); later records
/// are dropped.
#[derive(Clone)]
pub struct Out {
    inner: Arc<Mutex<Writer>>,
}

/// The writer and, once a write failed, why.
type Writer = (Box<dyn Write + Send>, Option<StopReason>);

impl Out {
    pub fn new(w: Box<dyn Write + Send>) -> Out {
        Out {
            inner: Arc::new(Mutex::new((w, None))),
        }
    }

    pub fn stdout() -> Out {
        Out::new(Box::new(std::io::stdout()))
    }

    /// Writes one record; `false` once the output is broken.
    pub fn record<T: Serialize + ?Sized>(&self, v: &T) -> bool {
        let mut line = match serde_json::to_vec(v) {
            Ok(l) => l,
            Err(_) => return true,
        };
        line.push(b'\n');
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.1.is_some() {
            return false;
        }
        match g.0.write_all(&line).and_then(|_| g.0.flush()) {
            Ok(()) => true,
            Err(e) => {
                g.1 = Some(StopReason::from_write_error(&e));
                false
            }
        }
    }

    pub fn broken(&self) -> bool {
        self.failure().is_some()
    }

    /// Why a write failed: a closed reader (141) or another error (1).
    pub fn failure(&self) -> Option<StopReason> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn framing_strips_one_cr_and_ends_with_eof() {
        let (tx, mut rx) = unbounded_channel();
        let data = b"{\"a\":1}\r\n\r\r\nlast \xe2\x80\xa8 line".to_vec();
        spawn_reader(std::io::Cursor::new(data), tx);
        let mut got = Vec::new();
        while let Some(i) = rx.recv().await {
            got.push(i);
        }
        assert_eq!(
            got,
            vec![
                Input::Line("{\"a\":1}".into()),
                Input::Line("\r".into()),
                Input::Line("last \u{2028} line".into()),
                Input::Eof
            ]
        );
    }

    /// A reader handing out a few bytes at a time (lines split across
    /// reads, as a pipe delivers them).
    struct Trickle(std::io::Cursor<Vec<u8>>);

    impl std::io::Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(3);
            self.0.read(&mut buf[..n])
        }
    }

    #[tokio::test]
    async fn an_overlong_line_is_reported_once_and_skipped_to_its_newline() {
        let (tx, mut rx) = unbounded_channel();
        let mut data = b"short\n".to_vec();
        data.extend(std::iter::repeat_n(b'x', 40));
        data.extend(b"\r\nexactly10\nnext\n0123456789A");
        spawn_reader_capped(Trickle(std::io::Cursor::new(data)), tx, 10);
        let mut got = Vec::new();
        while let Some(i) = rx.recv().await {
            got.push(i);
        }
        assert_eq!(
            got,
            vec![
                Input::Line("short".into()),
                Input::TooLong,
                Input::Line("exactly10".into()),
                Input::Line("next".into()),
                Input::TooLong,
                Input::Eof
            ]
        );
    }

    #[tokio::test]
    async fn the_inbox_answers_overlong_lines_and_waits_after_eof() {
        let (tx, rx) = unbounded_channel();
        let buf: Arc<Mutex<Vec<u8>>> = Arc::default();
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut inbox = Inbox::new(rx, Out::new(Box::new(Shared(Arc::clone(&buf)))));
        tx.send(Input::TooLong).unwrap();
        tx.send(Input::Line("a".into())).unwrap();
        tx.send(Input::Eof).unwrap();
        tx.send(Input::Line("ignored".into())).unwrap();
        tx.send(Input::Signal(143)).unwrap();
        assert_eq!(inbox.recv().await, Input::Line("a".into()));
        assert_eq!(inbox.recv().await, Input::Eof);
        assert!(inbox.ended());
        assert_eq!(inbox.recv().await, Input::Signal(143));
        drop(tx);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), inbox.recv()).await;
        assert!(waited.is_err(), "after EOF with no sender left: waits");
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["command"], "parse");
        assert_eq!(v["success"], false);
        assert!(v["error"].as_str().unwrap().contains("64 MiB"), "{v}");
    }
}
