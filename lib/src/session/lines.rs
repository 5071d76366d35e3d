//! The byte scanner under the fast readers of session files (the listing,
//! the compaction plan): a file is streamed once through a small reused
//! window, lines are found with `memchr`, and a line longer than the window
//! is gathered on its own. Nothing here knows what a line holds.

use std::io::Read;

/// Bytes read from a session file at a time. Small enough to stay in the
/// CPU cache between the kernel's copy and the scan (reading a whole
/// 100 KB file into one buffer made the copy itself three times slower),
/// large enough that a typical line is found whole.
pub(crate) const CHUNK: usize = 64 * 1024;

/// Reads `r` to its end through `buf` (made `window` bytes long) and hands
/// every line to `each` (1-based number, bytes without `\n` or a trailing
/// `\r`), as [`LineIter`] splits a whole buffer: a last line without `\n`
/// counts, an empty tail does not. Stops early at the first `Err` of
/// `each`. Gives the number of bytes read, or the callback's error; an I/O
/// error is the outer `Err`.
pub(crate) fn stream_lines<R: Read>(
    r: &mut R,
    buf: &mut Vec<u8>,
    window: usize,
    mut each: impl FnMut(usize, &[u8]) -> Result<(), String>,
) -> std::io::Result<Result<u64, String>> {
    let mut no = 0;
    stream_raw_lines(r, buf, window, |_, line, _| {
        no += 1;
        each(no, strip_cr(line))
    })
}

/// [`stream_lines`] for callers that need where each line is: `each` gets
/// the line's byte offset in the stream, its bytes without the `\n` (a
/// `\r` kept) and whether a `\n` ended it (only a last line lacks one).
pub(crate) fn stream_raw_lines<R: Read>(
    r: &mut R,
    buf: &mut Vec<u8>,
    window: usize,
    mut each: impl FnMut(u64, &[u8], bool) -> Result<(), String>,
) -> std::io::Result<Result<u64, String>> {
    if buf.len() != window.max(1) {
        buf.clear();
        buf.resize(window.max(1), 0);
    }
    let mut long: Vec<u8> = Vec::new();
    // `base`: the stream offset of `buf[0]`; `long_at`: of `long`'s start.
    let (mut base, mut long_at) = (0u64, 0u64);
    let (mut start, mut end, mut total) = (0usize, 0usize, 0u64);
    loop {
        if start > 0 {
            buf.copy_within(start..end, 0);
            end -= start;
            base += start as u64;
            start = 0;
        }
        if end == buf.len() {
            // No line end in a full window: this line continues past it.
            if long.is_empty() {
                long_at = base;
            }
            long.extend_from_slice(&buf[..end]);
            base += end as u64;
            end = 0;
        }
        let n = match r.read(&mut buf[end..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        let mut from = end;
        end += n;
        while let Some(i) = memchr::memchr(b'\n', &buf[from..end]) {
            let nl = from + i;
            let res = if long.is_empty() {
                each(base + start as u64, &buf[start..nl], true)
            } else {
                long.extend_from_slice(&buf[start..nl]);
                let res = each(long_at, &long, true);
                long.clear();
                res
            };
            if let Err(e) = res {
                return Ok(Err(e));
            }
            start = nl + 1;
            from = start;
        }
    }
    if !long.is_empty() || start < end {
        if long.is_empty() {
            long_at = base + start as u64;
        }
        long.extend_from_slice(&buf[start..end]);
        if let Err(e) = each(long_at, &long, false) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(total))
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The lines of a whole buffer with their 1-based numbers, without `\n`
/// or a trailing `\r`: a last line without `\n` counts, an empty tail
/// does not.
pub(crate) struct LineIter<'a> {
    bytes: &'a [u8],
    pos: usize,
    no: usize,
}

impl<'a> LineIter<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        LineIter {
            bytes,
            pos: 0,
            no: 0,
        }
    }
}

impl<'a> Iterator for LineIter<'a> {
    type Item = (usize, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let mut line = &rest[..end];
        if line.ends_with(b"\r") {
            line = &line[..line.len() - 1];
        }
        self.pos += end + 1;
        self.no += 1;
        Some((self.no, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out at most `step` bytes per read, and an `Interrupted` error
    /// before every third read.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        calls: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(3) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let n = self.data.len().min(self.step).min(out.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn streamed(data: &[u8], window: usize, step: usize) -> (Vec<(usize, Vec<u8>)>, u64) {
        let mut r = Trickle {
            data,
            step,
            calls: 0,
        };
        let mut lines = Vec::new();
        let mut buf = Vec::new();
        let total = stream_lines(&mut r, &mut buf, window, |no, l| {
            lines.push((no, l.to_vec()));
            Ok(())
        })
        .unwrap()
        .unwrap();
        (lines, total)
    }

    #[test]
    fn streamed_lines_are_the_lines_of_the_whole_buffer() {
        let long = "x".repeat(70_000);
        let inputs: Vec<String> = vec![
            String::new(),
            "\n".into(),
            "a".into(),
            "a\n".into(),
            "a\r\n\r\nbb\r".into(),
            "\n\n\nabc\ndef".into(),
            "one\r\ntwo\nthree\r\n".into(),
            format!("{long}\nshort\n{long}"),
            format!("h\n{long}\r\n\n{long}{long}\n"),
        ];
        for input in &inputs {
            let whole: Vec<(usize, Vec<u8>)> = LineIter::new(input.as_bytes())
                .map(|(n, l)| (n, l.to_vec()))
                .collect();
            for (window, step) in [
                (1, 1),
                (2, 1),
                (3, 2),
                (4, 7),
                (16, 5),
                (CHUNK, 1000),
                (CHUNK, usize::MAX),
            ] {
                let (lines, total) = streamed(input.as_bytes(), window, step);
                assert_eq!(total, input.len() as u64);
                // The raw lines sit at their offsets, `\n` after all but the last.
                let mut r = Trickle {
                    data: input.as_bytes(),
                    step,
                    calls: 0,
                };
                let (mut raw, mut buf) = (Vec::new(), Vec::new());
                stream_raw_lines(&mut r, &mut buf, window, |at, l, nl| {
                    raw.push((at as usize, l.to_vec(), nl));
                    Ok(())
                })
                .unwrap()
                .unwrap();
                assert_eq!(raw.len(), whole.len(), "window {window}, step {step}");
                for (at, l, nl) in &raw {
                    assert_eq!(&input.as_bytes()[*at..at + l.len()], &l[..]);
                    assert_eq!(input.as_bytes().get(at + l.len()) == Some(&b'\n'), *nl);
                }
                assert!(
                    lines == whole,
                    "window {window}, step {step}, input of {} bytes",
                    input.len()
                );
            }
        }
    }
}
