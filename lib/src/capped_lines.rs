//! Reading lines from a pipe another program writes, without trusting it:
//! a line is held only up to a cap, so a writer that never sends a newline
//! (300 MB of output on one line) costs at most the cap in memory, and the
//! reader learns that the line was too long instead of growing without
//! end.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line (its newline, and a `\r` before it, removed) is in the
    /// buffer. The last line of the stream may have no newline.
    Text,
    /// The line is longer than the cap: the buffer holds its first `cap`
    /// bytes and the rest is still unread ([`skip_line`] drops it).
    TooLong,
    /// The stream ended.
    Eof,
}

/// Reads one line into `buf` (cleared first), holding at most `cap` bytes.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    buf.clear();
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(if buf.is_empty() {
                Line::Eof
            } else {
                Line::Text
            });
        }
        let (take, newline) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (avail.len(), false),
        };
        let room = cap.saturating_sub(buf.len());
        if take > room {
            buf.extend_from_slice(&avail[..room]);
            r.consume(room);
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(&avail[..take]);
        r.consume(take + usize::from(newline));
        if newline {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Line::Text);
        }
    }
}

/// Drops the rest of the current line (up to and including its newline)
/// without holding it; the number of bytes dropped.
pub async fn skip_line<R: AsyncBufRead + Unpin>(r: &mut R) -> std::io::Result<u64> {
    let mut dropped = 0u64;
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(dropped);
        }
        match avail.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(dropped + i as u64);
            }
            None => {
                let n = avail.len();
                r.consume(n);
                dropped += n as u64;
            }
        }
    }
}

/// `n` bytes as a size people read (`16 MiB`, `64 KiB`, `900 B`).
pub fn size_text(n: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_capped_and_the_rest_can_be_skipped() {
        let data: &[u8] = b"one\r\ntwo\n0123456789abcdef\nlast";
        // A tiny internal buffer, so lines span several fills.
        let mut r = tokio::io::BufReader::with_capacity(3, data);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::Text);
        assert_eq!(buf, b"one");
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::Text);
        assert_eq!(buf, b"two");
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::TooLong);
        assert_eq!(buf, b"01234567");
        assert_eq!(skip_line(&mut r).await.unwrap(), 8);
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::Text);
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::Eof);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_cap_fits() {
        let mut r = tokio::io::BufReader::new(&b"12345678\n"[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Line::Text);
        assert_eq!(buf, b"12345678");
    }

    #[test]
    fn sizes() {
        assert_eq!(size_text(16 * 1024 * 1024), "16 MiB");
        assert_eq!(size_text(64 * 1024), "64 KiB");
        assert_eq!(size_text(900), "900 B");
    }
}
