//! Opening files that a model or a user names, without hanging or running out
//! of memory: only regular files are read. A FIFO, a device, a socket or a
//! directory is refused before any read can block (the open itself is
//! non-blocking and the type is checked on the opened descriptor, so a path
//! swapped for a FIFO between a check and the open cannot hang either), and
//! whole-file reads stop at a byte cap. The read tool, the image path,
//! `pi-run`'s `@file` arguments and every configuration file the toolkit
//! reads ([`read_config`]: settings, models, credentials, MCP, trust) open
//! files through here.

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

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for FileError {
    fn from(e: std::io::Error) -> Self {
        FileError::Io(e)
    }
}

/// For callers that report `std::io::Error`s: a filesystem error stays
/// itself (its kind and text), the others say what was refused.
impl From<FileError> for std::io::Error {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Io(e) => e,
            FileError::NotRegular(_) => std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
            FileError::TooLarge { .. } => std::io::Error::new(std::io::ErrorKind::FileTooLarge, e),
            FileError::Cancelled => std::io::Error::new(std::io::ErrorKind::Interrupted, e),
        }
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
    // The size said now, and one byte more to see the end.
    let size = usize::try_from(meta.len()).unwrap_or(0);
    read_rest_capped(
        file,
        Vec::with_capacity(size.saturating_add(1)),
        cap,
        cancel,
    )
}

/// The cap of a configuration file read whole ([`read_config`]): 8 MiB,
/// hundreds of times a real `settings.json`, `models.json`, `auth.json`,
/// `mcp.json`, `trust.json` or `mcp-auth.json`.
pub const CONFIG_CAP: u64 = 8 << 20;

/// Reads a configuration file whole, as text: `Ok(None)` when it does not
/// exist. Anything but a regular file (a FIFO, `/dev/zero`, a directory)
/// is refused without blocking, and a file over `cap` bytes is refused
/// (see [`CONFIG_CAP`]); text that is not UTF-8 is the error
/// `std::fs::read_to_string` gives.
pub fn read_config(path: &Path, cap: u64) -> Result<Option<String>, FileError> {
    match read_config_bytes(path, cap)? {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            FileError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            ))
        }),
    }
}

/// [`read_config`] as bytes (for readers that decode leniently).
pub fn read_config_bytes(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, FileError> {
    match read_capped(path, cap, None) {
        Ok(b) => Ok(Some(b)),
        Err(FileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Appends the rest of `file` to `buf`, up to `cap` bytes in all. Reads
/// straight into `buf`'s spare room (nothing is zeroed first), at most
/// [`CHUNK`] bytes between checks of the cap and of `cancel`.
pub fn read_rest_capped(
    mut file: File,
    mut buf: Vec<u8>,
    cap: u64,
    cancel: Option<&CancellationToken>,
) -> Result<Vec<u8>, FileError> {
    loop {
        if cancel.is_some_and(CancellationToken::is_cancelled) {
            return Err(FileError::Cancelled);
        }
        // `read_to_end` retries interrupted reads itself.
        match (&mut file).take(CHUNK as u64).read_to_end(&mut buf) {
            Ok(0) => return Ok(buf),
            Ok(_) => {}
            Err(e) => return Err(FileError::Io(e)),
        }
        if buf.len() as u64 > cap {
            return Err(FileError::TooLarge {
                size: buf.len() as u64,
                cap,
            });
        }
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

    /// Configuration files: missing is `None`; a FIFO, `/dev/zero` behind
    /// a symlink and a file over the cap are refused at once.
    #[test]
    fn config_reads_are_regular_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("settings.json");
        assert!(matches!(read_config(&p, 10), Ok(None)));
        std::fs::write(&p, "{}").unwrap();
        assert_eq!(read_config(&p, 10).unwrap().as_deref(), Some("{}"));
        std::fs::write(&p, "{\"a\": 12345}").unwrap();
        let e = read_config(&p, 10).unwrap_err();
        assert_eq!(e.to_string(), "it is 12B, larger than the 10B limit");
        std::fs::write(&p, b"\xff").unwrap();
        let e = read_config(&p, 10).unwrap_err();
        assert_eq!(e.to_string(), "stream did not contain valid UTF-8");
        assert_eq!(read_config_bytes(&p, 10).unwrap(), Some(vec![0xff]));
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        let e = read_config(&p, CONFIG_CAP).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a character device, not a regular file"
        );
        let fifo = dir.path().join("mcp.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_config(&fifo, CONFIG_CAP).unwrap_err();
        assert_eq!(e.to_string(), "it is a FIFO, not a regular file");
        let io: std::io::Error = e.into();
        assert_eq!(io.to_string(), "it is a FIFO, not a regular file");
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
