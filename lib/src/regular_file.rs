//! Opening files that a model or a user names, without hanging or running out
//! of memory: only regular files are read. A FIFO, a device, a socket or a
//! directory is refused before any read can block (the open itself is
//! non-blocking and the type is checked on the opened descriptor, so a path
//! swapped for a FIFO between a check and the open cannot hang either), and
//! whole-file reads stop at a byte cap. The read tool, the image path and
//! `pi-run`'s `@file` arguments all open files through here.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use tokio_util::sync::CancellationToken;

/// Why a file could not be opened or read.
#[derive(Debug)]
pub enum FileError {
    /// The filesystem said no (missing, permission, …).
    Io(std::io::Error),
    /// Not a regular file; the kind, e.g. `"FIFO"` or `"character device"`.
    NotRegular(&'static str),
    /// Larger than the cap of a whole-file read.
    TooLarge { size: u64, cap: u64 },
    /// The cancellation token fired while reading.
    Cancelled,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Io(e) => write!(f, "{e}"),
            FileError::NotRegular(kind) => write!(f, "it is a {kind}, not a regular file"),
            FileError::TooLarge { size, cap } => write!(
                f,
                "it is {}, larger than the {} limit",
                crate::sizefmt::format_size(usize::try_from(*size).unwrap_or(usize::MAX)),
                crate::sizefmt::format_size(usize::try_from(*cap).unwrap_or(usize::MAX))
            ),
            FileError::Cancelled => write!(f, "reading was aborted"),
        }
    }
}

impl From<std::io::Error> for FileError {
    fn from(e: std::io::Error) -> Self {
        FileError::Io(e)
    }
}

/// A file type in words (`"FIFO"`, `"character device"`, …).
pub fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        "regular file"
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// Opens `path` (following symlinks) for reading if it is a regular file.
/// Never blocks on a FIFO: the open is non-blocking and the type is checked
/// on the descriptor.
pub fn open(path: &Path) -> Result<(File, Metadata), FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind(&meta)));
    }
    Ok((file, meta))
}

/// Creates or truncates `path` for writing if it is (or will be) a regular
/// file. Never blocks on a FIFO: the open is non-blocking (a FIFO without a
/// reader fails, one with a reader is refused by type).
pub fn create(path: &Path) -> Result<File, FileError> {
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() && !meta.is_dir() {
            return Err(FileError::NotRegular(kind(&meta)));
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind(&meta)));
    }
    Ok(file)
}

/// Chunk size of streaming reads.
pub const CHUNK: usize = 64 * 1024;

/// Reads a whole regular file of at most `cap` bytes, checking `cancel`
/// between chunks. A file that grows past the cap while being read is
/// refused too.
pub fn read_capped(
    path: &Path,
    cap: u64,
    cancel: Option<&CancellationToken>,
) -> Result<Vec<u8>, FileError> {
    let (file, meta) = open(path)?;
    if meta.len() > cap {
        return Err(FileError::TooLarge {
            size: meta.len(),
            cap,
        });
    }
    read_rest_capped(file, Vec::new(), cap, cancel)
}

/// Appends the rest of `file` to `buf`, up to `cap` bytes in all.
pub fn read_rest_capped(
    mut file: File,
    mut buf: Vec<u8>,
    cap: u64,
    cancel: Option<&CancellationToken>,
) -> Result<Vec<u8>, FileError> {
    let mut chunk = vec![0u8; CHUNK];
    loop {
        if cancel.is_some_and(CancellationToken::is_cancelled) {
            return Err(FileError::Cancelled);
        }
        let n = match file.read(&mut chunk) {
            Ok(0) => return Ok(buf),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FileError::Io(e)),
        };
        if buf.len() as u64 + n as u64 > cap {
            return Err(FileError::TooLarge {
                size: buf.len() as u64 + n as u64,
                cap,
            });
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_fifos_and_devices_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would hang here.
        assert!(matches!(open(&fifo), Err(FileError::NotRegular("FIFO"))));
        assert!(matches!(
            open(Path::new("/dev/zero")),
            Err(FileError::NotRegular("character device"))
        ));
        assert!(matches!(
            open(dir.path()),
            Err(FileError::NotRegular("directory"))
        ));
        assert!(matches!(
            open(&dir.path().join("missing")),
            Err(FileError::Io(_))
        ));
    }

    #[test]
    fn whole_reads_stop_at_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        std::fs::write(&p, vec![b'x'; 1000]).unwrap();
        assert_eq!(read_capped(&p, 1000, None).unwrap().len(), 1000);
        let e = read_capped(&p, 999, None).unwrap_err();
        assert!(matches!(
            e,
            FileError::TooLarge {
                size: 1000,
                cap: 999
            }
        ));
        assert_eq!(e.to_string(), "it is 1000B, larger than the 999B limit");
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(matches!(
            read_capped(&p, 1000, Some(&cancel)),
            Err(FileError::Cancelled)
        ));
    }
}
