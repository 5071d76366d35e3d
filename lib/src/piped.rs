//! Piped stdin for a prompt (`make 2>&1 | pi-run -p "why did this fail"`):
//! read to its end, as pi 1.6.0 does, however slowly it comes — without
//! ever hanging on a stdin that is open but fed by nobody (a CI runner's
//! pipe, a calling program that never writes or closes it).
//!
//! The rule: a terminal is not read. Otherwise stdin is read until it
//! ends once anything at all has arrived, or as long as a producer is at
//! work: a process that is not pi-run or one of its ancestors holds the
//! pipe's write end (a command earlier in the same pipeline, however long
//! it stays silent). When nothing arrives within [`GRACE`] and no such
//! producer is seen — the writer is the caller itself, or cannot be seen —
//! stdin is ignored with a warning. The producer is looked for in `/proc`
//! (Linux); where it cannot be seen, only the grace period applies.

use std::io::{IsTerminal, Read};
use std::time::Duration;

use crate::cli::CliError;

/// How long a silent stdin with no producer in sight is waited for.
pub const GRACE: Duration = Duration::from_secs(2);

/// What the reader thread reports.
enum Msg {
    /// The first bytes arrived.
    Started,
    /// Stdin ended (or `max + 1` bytes were read, or a read failed).
    Done(Vec<u8>),
}

/// Reads piped stdin for the first prompt (see the module comment): the
/// text, `None` for a terminal or an ignored silent pipe (warned about
/// under `prog`). More than `max` bytes is an input error.
pub fn read_for_prompt(prog: &str, max: u64) -> Result<Option<String>, CliError> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    let producer = || stdin_has_producer(libc::STDIN_FILENO);
    let got = if ends_by_itself(libc::STDIN_FILENO) {
        // Nothing to wait for: read here, without a reader thread (a
        // failed read ends the input, as on the thread).
        let mut buf = Vec::new();
        let _ = std::io::stdin().take(max + 1).read_to_end(&mut buf);
        Some(buf)
    } else {
        read_from(std::io::stdin(), max, GRACE, producer)
    };
    match got {
        Some(buf) if buf.len() as u64 > max => Err(CliError::input(format!(
            "stdin: more than the {} limit of piped input",
            crate::tools::truncate::format_size(max as usize)
        ))),
        Some(buf) => Ok(Some(String::from_utf8_lossy(&buf).into_owned())),
        None => {
            crate::cli::warn(
                prog,
                &format!(
                    "stdin is an open pipe with no input after {} s and no command \
                     feeding it; ignored (</dev/null skips this wait)",
                    GRACE.as_secs()
                ),
            );
            Ok(None)
        }
    }
}

/// Reads `reader` to its end (at most `max + 1` bytes) on a thread of its
/// own; `None` when nothing came within `grace` and `producer()` says
/// nobody is at work on it.
fn read_from<R: Read + Send + 'static>(
    reader: R,
    max: u64,
    grace: Duration,
    producer: impl FnOnce() -> bool,
) -> Option<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = reader.take(max + 1);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match r.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    if buf.is_empty() {
                        let _ = tx.send(Msg::Started);
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(Msg::Done(buf));
    });
    let first = match rx.recv_timeout(grace) {
        Ok(m) => m,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Some(Vec::new()),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            if !producer() {
                return None;
            }
            rx.recv().ok()?
        }
    };
    match first {
        Msg::Done(buf) => Some(buf),
        Msg::Started => loop {
            match rx.recv() {
                Ok(Msg::Done(buf)) => return Some(buf),
                Ok(Msg::Started) => {}
                Err(_) => return Some(Vec::new()),
            }
        },
    }
}

/// Whether `fd` ends by itself without anyone feeding it: a regular file
/// (`< notes.txt`) or `/dev/null` (what CI jobs and `</dev/null` give).
fn ends_by_itself(fd: libc::c_int) -> bool {
    // SAFETY: fstat fills the zeroed struct it is given.
    let st = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return false;
        }
        st
    };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => true,
        libc::S_IFCHR => libc::major(st.st_rdev) == 1 && libc::minor(st.st_rdev) == 3,
        _ => false,
    }
}

/// Whether `fd` is a pipe (or FIFO) whose write end some process other
/// than this one and its ancestors holds open: a producer that will write
/// or close it. `false` when `/proc` cannot tell.
fn stdin_has_producer(fd: libc::c_int) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: fstat fills the zeroed struct it is given.
    let (dev, ino) = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 || st.st_mode & libc::S_IFMT != libc::S_IFIFO {
            return false;
        }
        (st.st_dev as u64, st.st_ino as u64)
    };
    let mine = ancestors();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if mine.contains(&pid) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for f in fds.flatten() {
            let same = std::fs::metadata(f.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino);
            if same && opened_for_writing(pid, &f.file_name()) {
                return true;
            }
        }
    }
    false
}

/// Whether descriptor `fd` of `pid` is open for writing (its `fdinfo`
/// flags).
fn opened_for_writing(pid: u32, fd: &std::ffi::OsStr) -> bool {
    let path = std::path::Path::new("/proc")
        .join(pid.to_string())
        .join("fdinfo")
        .join(fd);
    let Ok(info) = std::fs::read_to_string(path) else {
        return false;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32)
}

/// This process and its ancestors, by pid.
fn ancestors() -> Vec<u32> {
    let mut out = vec![std::process::id()];
    while out.len() < 4096 {
        let Some(&pid) = out.last() else { break };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            break;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        match ppid {
            Some(pp) if pp > 0 && !out.contains(&pp) => out.push(pp),
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn slow_input_is_read_to_its_end_once_it_started() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        std::thread::spawn(move || {
            writer.write_all(b"FIRST\n").unwrap();
            std::thread::sleep(Duration::from_millis(300));
            writer.write_all(b"LAST\n").unwrap();
        });
        let got = read_from(reader, 100, Duration::from_millis(100), || false);
        assert_eq!(got.as_deref(), Some(&b"FIRST\nLAST\n"[..]));
    }

    #[test]
    fn a_silent_pipe_is_ignored_unless_a_producer_holds_it() {
        let (reader, writer) = std::io::pipe().unwrap();
        let t = std::time::Instant::now();
        assert_eq!(
            read_from(reader, 100, Duration::from_millis(100), || false),
            None
        );
        assert!(t.elapsed() < Duration::from_secs(5));
        // With a producer at work, its late data is waited for.
        let (reader, mut late) = std::io::pipe().unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            late.write_all(b"late").unwrap();
        });
        let got = read_from(reader, 100, Duration::from_millis(100), || true);
        assert_eq!(got.as_deref(), Some(&b"late"[..]));
        drop(writer);
    }

    #[test]
    fn files_and_dev_null_end_by_themselves_pipes_and_other_devices_may_not() {
        use std::os::fd::AsRawFd;
        let f = tempfile::tempfile().unwrap();
        assert!(ends_by_itself(f.as_raw_fd()));
        let null = std::fs::File::open("/dev/null").unwrap();
        assert!(ends_by_itself(null.as_raw_fd()));
        let zero = std::fs::File::open("/dev/zero").unwrap();
        assert!(!ends_by_itself(zero.as_raw_fd()));
        let (reader, _writer) = std::io::pipe().unwrap();
        assert!(!ends_by_itself(reader.as_raw_fd()));
        assert!(!ends_by_itself(-1));
    }

    #[test]
    fn input_over_the_limit_stops_at_one_byte_more() {
        let got = read_from(std::io::repeat(b'x'), 10, Duration::from_secs(5), || false);
        assert_eq!(got.map(|b| b.len()), Some(11));
        let empty = read_from(std::io::empty(), 10, Duration::from_secs(5), || false);
        assert_eq!(empty, Some(Vec::new()));
    }

    #[test]
    fn the_callers_own_pipe_has_no_producer_but_a_child_writer_is_one() {
        use std::os::fd::AsRawFd;
        let (reader, writer) = std::io::pipe().unwrap();
        // Only this process (an ancestor of itself) holds the write end.
        assert!(!stdin_has_producer(reader.as_raw_fd()));
        // A child holding it (a command earlier in the pipeline) is one.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdout(writer)
            .spawn()
            .unwrap();
        let found = stdin_has_producer(reader.as_raw_fd());
        let _ = child.kill();
        let _ = child.wait();
        assert!(found, "the child writer is a producer");
        // Not a pipe: nothing to find.
        let f = tempfile::tempfile().unwrap();
        assert!(!stdin_has_producer(f.as_raw_fd()));
    }
}
