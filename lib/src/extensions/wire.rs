//! The small pieces of an extension conversation that do not depend on
//! who is on the other end: the size caps of what an extension may send,
//! writing one record line, and a request limit whose clock stands still
//! while the extension waits for a person.

use std::sync::Mutex;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

/// The longest protocol record an extension may send (one line): a
/// longer one is a protocol error that ends the extension.
pub const MAX_RECORD: usize = 16 * 1024 * 1024;

/// The longest stderr line of an extension that is forwarded; the rest of
/// a longer line is dropped (and counted).
pub const MAX_STDERR_LINE: usize = 64 * 1024;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The UI calls that wait for a person.
pub(crate) fn is_dialog(method: &str) -> bool {
    matches!(
        method,
        "ui.confirm" | "ui.select" | "ui.input" | "ui.editor"
    )
}

/// `fut` with a limit whose clock runs only while no dialog is open
/// (`dialogs` is 0); `None` when the limit ran out.
pub(crate) async fn paused_timeout<F: std::future::Future>(
    limit: Duration,
    fut: F,
    mut dialogs: watch::Receiver<usize>,
) -> Option<F::Output> {
    tokio::pin!(fut);
    let mut left = limit;
    loop {
        let open = *dialogs.borrow_and_update();
        if open > 0 {
            tokio::select! {
                out = &mut fut => return Some(out),
                gone = async { dialogs.wait_for(|n| *n == 0).await.is_err() } => if gone {
                    // No sender any more: nothing can pause the clock.
                    return tokio::time::timeout(left, fut).await.ok();
                },
            }
            continue;
        }
        let start = tokio::time::Instant::now();
        tokio::select! {
            out = &mut fut => return Some(out),
            _ = tokio::time::sleep(left) => return None,
            gone = async { dialogs.wait_for(|n| *n > 0).await.is_err() } => {
                left = left.saturating_sub(start.elapsed());
                if gone {
                    return tokio::time::timeout(left, fut).await.ok();
                }
            }
        }
    }
}

/// Writes one record line; `false` once stdin is closed or broken.
pub(crate) async fn write_line(
    stdin: &tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    mut line: String,
) -> bool {
    line.push('\n');
    let mut g = stdin.lock().await;
    let Some(w) = g.as_mut() else {
        return false;
    };
    if w.write_all(line.as_bytes()).await.is_err() || w.flush().await.is_err() {
        g.take();
        return false;
    }
    true
}
