//! Session files on disk: what a path is, and opening one without blocking.
//!
//! A sessions folder can hold anything a user, a tool or a crash put there:
//! a FIFO named `x.jsonl`, a device, a dangling or looping symlink, a
//! folder. Opening a FIFO for reading blocks until a writer appears, so every
//! reader of session files (listing, id lookup, loading, appending) opens
//! through [`open_regular`], which never blocks and refuses anything that is
//! not a regular file, and listings sort folder entries with [`regular_or_why`]
//! before touching them. Every refusal says what the path is.

use std::fs::{File, FileType, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A session file's handle kept open between appends. A clone of the
/// session gets none (it opens its own): `flock` locks belong to an open
/// file, so two copies sharing one handle would not exclude each other.
#[derive(Debug, Default)]
pub(crate) struct HeldFile(Option<File>);

impl Clone for HeldFile {
    fn clone(&self) -> Self {
        HeldFile(None)
    }
}

impl HeldFile {
    /// Holds `f`, the (unlocked) file of the session.
    pub(crate) fn new(f: File) -> HeldFile {
        HeldFile(Some(f))
    }

    /// Keeps `f`, unlocked, for the next append; a file that will not
    /// unlock is closed instead (which releases its lock).
    pub(crate) fn keep(f: File) -> HeldFile {
        match f.unlock() {
            Ok(()) => HeldFile(Some(f)),
            Err(_) => HeldFile(None),
        }
    }

    /// The held file, if any, leaving none.
    pub(crate) fn take(&mut self) -> Option<File> {
        self.0.take()
    }

    /// Whether a file is held.
    #[cfg(test)]
    pub(crate) fn is_open(&self) -> bool {
        self.0.is_some()
    }
}

/// A file left out of a listing or lookup, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: skipped: {}", self.path.display(), self.reason)
    }
}

/// What kind of file this is, as a phrase (`a FIFO (named pipe)`).
pub fn kind_name(ft: &FileType) -> &'static str {
    if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn not_a_session_file(ft: &FileType) -> String {
    format!("is {}, not a session file", kind_name(ft))
}

/// Says what went wrong reaching a session path, in words that name the
/// cause (`is a symbolic link loop`) rather than the errno.
pub fn describe_error(e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return "is a symbolic link loop (too many levels of symbolic links)".into();
    }
    match e.kind() {
        io::ErrorKind::NotADirectory => {
            "cannot be reached: a parent of it is not a directory".into()
        }
        io::ErrorKind::IsADirectory => "is a directory, not a session file".into(),
        io::ErrorKind::NotFound => "no such file".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Opens a session file for reading (and appending when `append`), without
/// blocking: a FIFO, device, socket or folder is refused with an error that
/// says what it is.
pub fn open_regular(path: &Path, append: bool) -> io::Result<File> {
    open_regular_meta(path, append).map(|(f, _)| f)
}

/// [`open_regular`], with the metadata it fetched to check the file's
/// type (a reader needing the size or mtime asks the kernel only once).
pub fn open_regular_meta(path: &Path, append: bool) -> io::Result<(File, std::fs::Metadata)> {
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(libc::O_NONBLOCK);
    if append {
        o.append(true);
    }
    let f = o
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), describe_error(&e)))?;
    let meta = f.metadata()?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            not_a_session_file(&ft),
        ));
    }
    Ok((f, meta))
}

/// Whether a folder entry of type `ft` is a regular file (through a
/// symlink too); otherwise what it is instead. Costs a `stat` only for
/// symlinks.
pub fn regular_or_why(path: &Path, ft: FileType) -> Result<(), String> {
    if ft.is_file() {
        return Ok(());
    }
    if ft.is_symlink() {
        return match std::fs::metadata(path) {
            Ok(m) if m.is_file() => Ok(()),
            Ok(m) => Err(format!(
                "is a symbolic link to {}, not a session file",
                kind_name(&m.file_type())
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err("is a dangling symbolic link".into())
            }
            Err(e) => Err(describe_error(&e)),
        };
    }
    Err(not_a_session_file(&ft))
}

/// A session path given by the user: `Ok(true)` a regular file, `Ok(false)`
/// nothing there (a new session may be created), `Err` what it is instead.
pub fn probe(path: &Path) -> Result<bool, String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(true),
        Ok(m) => Err(not_a_session_file(&m.file_type())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Err("is a dangling symbolic link".into()),
            // Something appeared since the first look (another run created
            // the session this very moment): look again.
            Ok(_) => match std::fs::metadata(path) {
                Ok(m) if m.is_file() => Ok(true),
                Ok(m) => Err(not_a_session_file(&m.file_type())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(describe_error(&e)),
            },
            Err(_) => Ok(false),
        },
        Err(e) => Err(describe_error(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(p: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mkfifo {}", p.display());
    }

    #[test]
    fn a_file_appearing_while_probed_is_never_a_dangling_link() {
        // Another run links its new session into place while this one
        // looks: between the two looks the path goes from nothing to a
        // file, which is no symbolic link.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.jsonl");
        let tmp = dir.path().join("tmp");
        std::fs::write(&tmp, "x").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flipper = {
            let (path, tmp, stop) = (path.clone(), tmp.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::hard_link(&tmp, &path);
                    let _ = std::fs::remove_file(&path);
                }
            })
        };
        let mut bad = None;
        for _ in 0..200_000 {
            if let Err(e) = probe(&path) {
                bad = Some(e);
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        flipper.join().unwrap();
        assert_eq!(bad, None);
    }

    #[test]
    fn refuses_fifos_and_folders_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.jsonl");
        mkfifo(&fifo);
        let e = open_regular(&fifo, false).unwrap_err().to_string();
        assert_eq!(e, "is a FIFO (named pipe), not a session file");
        assert_eq!(
            open_regular(dir.path(), false).unwrap_err().to_string(),
            "is a directory, not a session file"
        );
        assert_eq!(
            probe(&fifo).unwrap_err(),
            "is a FIFO (named pipe), not a session file"
        );
        let loop_a = dir.path().join("a.jsonl");
        std::os::unix::fs::symlink(dir.path().join("b.jsonl"), &loop_a).unwrap();
        std::os::unix::fs::symlink(&loop_a, dir.path().join("b.jsonl")).unwrap();
        assert!(probe(&loop_a).unwrap_err().contains("symbolic link loop"));
        let plain = dir.path().join("p");
        std::fs::write(&plain, "x").unwrap();
        assert!(probe(&plain.join("s.jsonl"))
            .unwrap_err()
            .contains("a parent of it is not a directory"));
        assert_eq!(probe(&dir.path().join("new.jsonl")), Ok(false));
        assert_eq!(probe(&plain), Ok(true));
        let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(regular_or_why(&fifo, ft).unwrap_err().contains("FIFO"));
    }
}
