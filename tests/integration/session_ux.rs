//! `pi-session` as a person at a terminal meets it: tables as wide as the
//! terminal, id prefixes that name one session, completions that complete.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use crate::common::*;

/// Runs `cmd` with stdout and stderr on a new pseudo-terminal of `cols`
/// columns; what the terminal showed, `\r\n` made `\n`.
pub fn on_pty(mut cmd: Command, cols: u16) -> String {
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: 50,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors we then own.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(r, 0, "openpty");
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let out = slave.try_clone().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("spawn on a pty");
    // The child holds the terminal now; reading ends (EIO) when it exits.
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(master);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match f.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf
    });
    let status = child.wait().unwrap();
    // Our copies of the slave side are gone (moved into the child's
    // Stdio and dropped by spawn), so the reader sees the end.
    drop(cmd);
    let buf = reader.join().unwrap();
    let text = String::from_utf8_lossy(&buf).replace("\r\n", "\n");
    assert!(status.success(), "exit {status:?}\n{text}");
    text
}

/// At a 200-column terminal (no `$COLUMNS`: shells do not export it) the
/// table uses the width: the first message is not cut short.
#[test]
fn ls_uses_the_terminal_width() {
    let sb = Sandbox::with_fixtures();
    let mut cmd = sb.cmd("pi-session");
    cmd.args(["ls", "--all"]);
    let wide = on_pty(cmd, 200);
    assert!(wide.starts_with("ID"), "{wide}");
    assert!(
        wide.contains("What is in notes.txt? Then run echo hi."),
        "{wide}"
    );
    assert!(wide.lines().all(|l| l.chars().count() <= 200), "{wide}");
    // A narrow terminal gets a narrow table.
    let mut cmd = sb.cmd("pi-session");
    cmd.args(["ls", "--all"]);
    let narrow = on_pty(cmd, 100);
    assert!(!narrow.contains("Then run echo hi."), "{narrow}");
    // $COLUMNS, when set, wins over the terminal's size.
    let mut cmd = sb.cmd("pi-session");
    cmd.args(["ls", "--all"]).env("COLUMNS", "100");
    let set = on_pty(cmd, 200);
    assert_eq!(set, narrow);
}
