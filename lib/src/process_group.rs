//! Process groups this process started and must not leave behind. A child
//! that runs in its own group (an extension process, with whatever it
//! started in the background) is [`register`]ed while its group may hold a
//! process; [`end`] ends a group politely (SIGTERM, then SIGKILL after a
//! grace period); and when this process exits by any path, also
//! `std::process::exit` after a second signal or an early error, an
//! `atexit` handler SIGKILLs every group still registered, so nothing a
//! run started outlives it.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;
use std::time::Duration;

/// How many groups can be registered at once (more are still ended by
/// [`end`], only not by the exit handler).
const SLOTS: usize = 1024;

static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static INSTALL: Once = Once::new();

extern "C" fn kill_registered() {
    for slot in &GROUPS {
        let pgid = slot.swap(0, Ordering::AcqRel);
        if pgid > 1 {
            signal(pgid, libc::SIGKILL);
        }
    }
}

/// Remembers group `pgid` until [`unregister`]; it is killed when this
/// process exits.
pub fn register(pgid: i32) {
    if pgid <= 1 {
        return;
    }
    INSTALL.call_once(|| {
        // SAFETY: atexit(3) takes a plain function that runs once at exit;
        // it only reads atomics and calls kill(2).
        unsafe {
            libc::atexit(kill_registered);
        }
    });
    for slot in &GROUPS {
        if slot
            .compare_exchange(0, pgid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// Forgets group `pgid` (it is gone, or someone else ends it).
pub fn unregister(pgid: i32) {
    for slot in &GROUPS {
        if slot
            .compare_exchange(pgid, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// Sends `sig` to every process of group `pgid`; `false` when the group
/// has no process left (or `pgid` is not a group we may signal).
pub fn signal(pgid: i32, sig: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: kill(2) with a negative pid signals a process group; no
    // memory is involved.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// Whether group `pgid` still holds a process (a zombie counts until it is
/// reaped).
pub fn alive(pgid: i32) -> bool {
    signal(pgid, 0)
}

/// Waits up to `limit` for group `pgid` to empty; whether it did.
pub async fn wait_empty(pgid: i32, limit: Duration) -> bool {
    let start = tokio::time::Instant::now();
    while alive(pgid) {
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Ends group `pgid`: SIGTERM, up to `grace` for every process in it to
/// go, then SIGKILL; unregistered afterwards.
pub async fn end(pgid: i32, grace: Duration) {
    if signal(pgid, libc::SIGTERM) && !wait_empty(pgid, grace).await {
        signal(pgid, libc::SIGKILL);
    }
    unregister(pgid);
}

/// Kills group `pgid` at once (SIGKILL) and forgets it.
pub fn kill(pgid: i32) {
    signal(pgid, libc::SIGKILL);
    unregister(pgid);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    fn spawn_group(script: &str) -> (std::process::Child, i32) {
        let child = std::process::Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id() as i32;
        (child, pgid)
    }

    #[tokio::test]
    async fn end_terms_then_kills_the_whole_group() {
        // A background child that ignores SIGTERM, and a leader that
        // exits on it.
        let (mut child, pgid) = spawn_group("trap '' TERM; sleep 100 & exec sleep 100");
        register(pgid);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let reaper = std::thread::spawn(move || child.wait());
        end(pgid, Duration::from_millis(300)).await;
        let _ = reaper.join();
        assert!(wait_empty(pgid, Duration::from_secs(2)).await, "group left");
        assert!(GROUPS.iter().all(|s| s.load(Ordering::Relaxed) != pgid));
    }
}
