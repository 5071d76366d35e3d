//! Output helpers: a buffered stdout that turns a closed pipe into a quiet
//! exit, JSONL records, and terminal-width text truncation.

use std::io::Write;

use pi_lib::cli::CliError;

/// Buffered stdout. Text written to a terminal is cleaned of control
/// characters (see [`clean_for_terminal`]), so session content cannot send
/// escape sequences to the user's terminal; JSON records and pipes get it
/// verbatim.
pub struct Out {
    w: pi_lib::cli::Stdout,
    terminal: bool,
}

/// Maps a write error on stdout: a closed pipe ends quietly (exit 0),
/// others exit 1 (see [`pi_lib::cli::stdout_error`]).
pub fn io_err(e: std::io::Error) -> CliError {
    pi_lib::cli::stdout_error(e)
}

impl Out {
    pub fn new() -> Self {
        use std::io::IsTerminal;
        Out {
            w: pi_lib::cli::Stdout::new(),
            terminal: std::io::stdout().is_terminal(),
        }
    }

    fn text<'a>(&self, s: &'a str) -> std::borrow::Cow<'a, str> {
        if self.terminal {
            clean_for_terminal(s)
        } else {
            std::borrow::Cow::Borrowed(s)
        }
    }

    /// Writes one JSON record and a newline.
    pub fn record<T: serde::Serialize>(&mut self, r: &T) -> Result<(), CliError> {
        serde_json::to_writer(&mut self.w, r).map_err(|e| io_err(e.into()))?;
        self.w.write_all(b"\n").map_err(io_err)
    }

    /// Writes a line of text.
    pub fn line(&mut self, s: &str) -> Result<(), CliError> {
        let s = self.text(s);
        self.w.write_all(s.as_bytes()).map_err(io_err)?;
        self.w.write_all(b"\n").map_err(io_err)
    }

    /// Writes raw text.
    pub fn raw(&mut self, s: &str) -> Result<(), CliError> {
        let s = self.text(s);
        self.w.write_all(s.as_bytes()).map_err(io_err)
    }

    pub fn flush(&mut self) -> Result<(), CliError> {
        self.w.flush().map_err(io_err)
    }
}

/// The terminal width (`$COLUMNS`, else 120).
pub fn term_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&w: &usize| w >= 40)
        .unwrap_or(120)
}

/// Text safe to print on a terminal: every control character except
/// newline and tab (ESC, CR, BEL, backspace, DEL, the C1 range) is shown as
/// a visible symbol instead of being sent (ESC as `␛`, BEL as `␇`, C1 codes
/// as `�`). Borrowed when there is nothing to clean.
pub fn clean_for_terminal(s: &str) -> std::borrow::Cow<'_, str> {
    let dirty = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.contains(dirty) || (!s.replace("\r\n", "\n").contains(dirty)) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(match c {
            // A CRLF line end is harmless.
            '\r' if chars.peek() == Some(&'\n') => c,
            c if !dirty(c) => c,
            '\u{7f}' => '\u{2421}',
            c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
            _ => '\u{fffd}',
        });
    }
    std::borrow::Cow::Owned(out)
}

/// One line of at most `max` characters: newlines and tabs become spaces,
/// other control characters are cleaned as [`clean_for_terminal`] does, an
/// ellipsis marks a cut.
pub fn clip(s: &str, max: usize) -> String {
    let flat: String = clean_for_terminal(s)
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\t' | '\r') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        return flat.to_string();
    }
    let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Pads or clips to exactly `w` characters.
pub fn cell(s: &str, w: usize) -> String {
    let c = clip(s, w);
    let n = c.chars().count();
    format!("{c}{}", " ".repeat(w.saturating_sub(n)))
}

/// The shortest prefix length (at least `min`) that tells each id apart
/// from every other id in the list, like git's abbreviated hashes. UUID v7
/// session ids share their leading time bits, so 8 characters rarely do.
pub fn unique_prefix_len(ids: &[&str], min: usize) -> usize {
    let mut sorted: Vec<&str> = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut len = min;
    for pair in sorted.windows(2) {
        let common = pair[0]
            .bytes()
            .zip(pair[1].bytes())
            .take_while(|(a, b)| a == b)
            .count();
        len = len.max(common + 1);
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_tell_ids_apart() {
        assert_eq!(
            unique_prefix_len(&["01a228a9-8a19", "01a228a9-8bbe"], 8),
            11
        );
        assert_eq!(unique_prefix_len(&["abc", "xyz"], 8), 8);
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("a\u{1b}[31mb", 10), "a␛[31mb");
        assert_eq!(clip("a\r\nb", 10), "a  b");
        assert_eq!(clean_for_terminal("a\r\nb"), "a\r\nb");
        assert_eq!(
            clean_for_terminal("x\u{1b}]0;title\u{7}\r\u{9b}2J\ny\tz\u{7f}"),
            "x␛]0;title␇␍\u{fffd}2J\ny\tz␡"
        );
        assert!(matches!(
            clean_for_terminal("plain\ntext"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
