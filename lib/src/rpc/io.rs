//! The RPC transport: stdin lines in (pi's framing: LF-split, one trailing
//! `\r` dropped, no splitting on U+2028/2029), signals, and the one writer
//! every record goes through.

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What arrives from outside.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// One command line (framing removed).
    Line(String),
    /// Stdin closed (or could not be read).
    Eof,
    /// SIGTERM / SIGHUP: exit with this code.
    Signal(i32),
}

/// Reads `reader` on its own thread: each line, then `Eof`.
pub fn spawn_reader<R: std::io::Read + Send + 'static>(
    reader: R,
    tx: UnboundedSender<Input>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = std::io::BufReader::new(reader);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    if buf.last() == Some(&b'\r') {
                        buf.pop();
                    }
                    let line = String::from_utf8_lossy(&buf).into_owned();
                    if tx.send(Input::Line(line)).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Input::Eof);
    })
}

/// Stdin, SIGTERM (143) and SIGHUP (129) as one input stream (call inside
/// a tokio runtime). A second signal while shutting down exits at once.
pub fn stdin_and_signals() -> Result<UnboundedReceiver<Input>, String> {
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
    spawn_reader(std::io::stdin(), tx);
    Ok(rx)
}

/// The protocol writer: one JSON record per line, flushed at once. Shared
/// by the event stream and the command handler so records never
/// interleave. A failed write marks it broken; later records are dropped.
#[derive(Clone)]
pub struct Out {
    inner: Arc<Mutex<(Box<dyn Write + Send>, bool)>>,
}

impl Out {
    pub fn new(w: Box<dyn Write + Send>) -> Out {
        Out {
            inner: Arc::new(Mutex::new((w, false))),
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
        if g.1 {
            return false;
        }
        let ok = g.0.write_all(&line).and_then(|_| g.0.flush()).is_ok();
        if !ok {
            g.1 = true;
        }
        ok
    }

    pub fn broken(&self) -> bool {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).1
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
}
