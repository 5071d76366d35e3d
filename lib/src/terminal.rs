//! Text shown on a terminal. Session files hold whatever a model, a tool or
//! a user wrote, escape sequences included; printed raw they could move
//! the cursor, retitle the window or worse. Every text `pi-session` prints
//! for a person, and every snippet it puts in a record, goes through here:
//! control characters are shown as visible symbols, and one-line clips
//! flatten newlines and mark a cut with an ellipsis. It also knows how
//! wide that terminal is, so tables use the room there is.

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

/// The width text is laid out for: `$COLUMNS` when it holds a number
/// (a user's or a script's explicit choice), else the size of the terminal
/// on stdout, else on stderr (`| less` with `--format text`), else
/// `fallback`. Widths under 40 columns are taken as 40.
pub fn width(fallback: usize) -> usize {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&w| w > 0);
    from_env
        .or_else(|| tty_columns(libc::STDOUT_FILENO))
        .or_else(|| tty_columns(libc::STDERR_FILENO))
        .unwrap_or(fallback)
        .max(40)
}

/// The column count of the terminal on `fd`, when it is one and knows
/// its size.
fn tty_columns(fd: libc::c_int) -> Option<usize> {
    // SAFETY: TIOCGWINSZ only writes a `winsize` into the struct we pass;
    // on a descriptor that is not a terminal it fails with ENOTTY.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_and_clips_are_one_line() {
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
