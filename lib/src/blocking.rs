//! File work handed to the async runtime's blocking threads, counted.
//!
//! Tools read and write files on the runtime's blocking threads, so a slow
//! disk never stalls the agent loop. A tool that is aborted stops waiting
//! for its file work, but the work itself runs to its end: a write half
//! done would leave the user's file cut short. [`spawn`] counts that work
//! while it runs, and the end of a run asks [`in_flight`]: with none left,
//! the runtime is let go without joining its idle threads (a thread's exit
//! costs a short run more than the last tool did); with some left, the run
//! waits for it as before.

use std::sync::atomic::{AtomicUsize, Ordering};

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Runs `work` on the current runtime's blocking threads, counted until it
/// returns (or is dropped unrun).
pub fn spawn<F, R>(work: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    spawn_counted(&IN_FLIGHT, work)
}

/// How many pieces of work from [`spawn`] have not yet returned.
pub fn in_flight() -> usize {
    IN_FLIGHT.load(Ordering::SeqCst)
}

fn spawn_counted<F, R>(count: &'static AtomicUsize, work: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    count.fetch_add(1, Ordering::SeqCst);
    let running = Running(count);
    tokio::task::spawn_blocking(move || {
        let _running = running;
        work()
    })
}

/// One counted piece of work; uncounted when dropped.
struct Running(&'static AtomicUsize);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_is_counted_until_it_returns() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let task = spawn_counted(&COUNT, move || go_rx.recv().is_ok());
        assert_eq!(COUNT.load(Ordering::SeqCst), 1);
        // The waiting side gives up: the work still runs, and still counts.
        drop(task);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(COUNT.load(Ordering::SeqCst), 1);
        go_tx.send(()).unwrap();
        for _ in 0..400 {
            if COUNT.load(Ordering::SeqCst) == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("the work was never uncounted");
    }
}
