//! Output truncation shared by the tools: pi 1.6.0's `truncateHead` (keep the
//! start: read, grep, find, ls) and `truncateTail` (keep the end: bash), the
//! 500-character grep line cap, and `formatSize` for the notices.
//!
//! Lines are `text.split("\n")` with the empty piece after a final newline
//! dropped, which is how pi counts `totalLines` in `details.truncation`.

use serde_json::{json, Value};

/// Most lines a tool returns (read, bash).
pub const DEFAULT_MAX_LINES: usize = 2000;
/// Most bytes (UTF-8) a tool returns: 50 KiB, printed as `50.0KB`.
pub const DEFAULT_MAX_BYTES: usize = 51200;
/// grep cuts each output line to this many characters.
pub const GREP_MAX_LINE_LENGTH: usize = 500;
/// JavaScript's `Number.MAX_SAFE_INTEGER`: the line limit grep, find and ls
/// pass when only bytes should count.
pub const NO_LINE_LIMIT: usize = 9_007_199_254_740_991;

/// Which limit cut the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncatedBy {
    Lines,
    Bytes,
}

/// The result of [`truncate_head`] / [`truncate_tail`]; serialises to pi's
/// `details.truncation` object (see [`Truncation::to_json`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The kept text (lines joined by `\n`, no final newline when truncated).
    pub content: String,
    pub truncated: bool,
    pub truncated_by: Option<TruncatedBy>,
    pub total_lines: usize,
    pub total_bytes: usize,
    pub output_lines: usize,
    pub output_bytes: usize,
    /// Tail only: the kept text is the end of one line longer than the limit.
    pub last_line_partial: bool,
    /// Head only: the first line alone is over the byte limit (content empty).
    pub first_line_exceeds_limit: bool,
    pub max_lines: usize,
    pub max_bytes: usize,
}

impl Truncation {
    /// pi's key order: `content, truncated, truncatedBy, totalLines, totalBytes,
    /// outputLines, outputBytes, lastLinePartial, firstLineExceedsLimit,
    /// maxLines, maxBytes`.
    pub fn to_json(&self) -> Value {
        json!({
            "content": self.content,
            "truncated": self.truncated,
            "truncatedBy": match self.truncated_by {
                Some(TruncatedBy::Lines) => Value::from("lines"),
                Some(TruncatedBy::Bytes) => Value::from("bytes"),
                None => Value::Null,
            },
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
            "lastLinePartial": self.last_line_partial,
            "firstLineExceedsLimit": self.first_line_exceeds_limit,
            "maxLines": self.max_lines,
            "maxBytes": self.max_bytes,
        })
    }
}

/// The lines of `text` as pi counts them: split on `\n`, without the empty
/// piece a final newline leaves.
pub fn split_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.len() > 1 && lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

fn untruncated(text: &str, lines: usize, max_lines: usize, max_bytes: usize) -> Truncation {
    Truncation {
        content: text.to_string(),
        truncated: false,
        truncated_by: None,
        total_lines: lines,
        total_bytes: text.len(),
        output_lines: lines,
        output_bytes: text.len(),
        last_line_partial: false,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// Keeps whole lines from the start while both limits hold.
pub fn truncate_head(text: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines = split_lines(text);
    let total_bytes = text.len();
    if lines.len() <= max_lines && total_bytes <= max_bytes {
        return untruncated(text, lines.len(), max_lines, max_bytes);
    }
    let mut t = untruncated("", lines.len(), max_lines, max_bytes);
    t.total_bytes = total_bytes;
    t.truncated = true;
    if lines.first().map_or(0, |l| l.len()) > max_bytes {
        t.truncated_by = Some(TruncatedBy::Bytes);
        t.first_line_exceeds_limit = true;
        t.output_lines = 0;
        t.output_bytes = 0;
        return t;
    }
    let mut bytes = 0;
    let mut count = 0;
    let mut by = TruncatedBy::Lines;
    for (i, line) in lines.iter().enumerate() {
        if i >= max_lines {
            by = TruncatedBy::Lines;
            break;
        }
        let add = line.len() + usize::from(i > 0);
        if bytes + add > max_bytes {
            by = TruncatedBy::Bytes;
            break;
        }
        bytes += add;
        count += 1;
    }
    t.content = lines[..count].join("\n");
    t.truncated_by = Some(by);
    t.output_lines = count;
    t.output_bytes = bytes;
    t
}

/// Keeps whole lines from the end while both limits hold; when even the last
/// line is over the byte limit, keeps its last `max_bytes` bytes (moved
/// forward to a character boundary).
pub fn truncate_tail(text: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines = split_lines(text);
    let total_bytes = text.len();
    if lines.len() <= max_lines && total_bytes <= max_bytes {
        return untruncated(text, lines.len(), max_lines, max_bytes);
    }
    let mut t = untruncated("", lines.len(), max_lines, max_bytes);
    t.total_bytes = total_bytes;
    t.truncated = true;
    let mut bytes = 0;
    let mut count = 0;
    let mut by = TruncatedBy::Lines;
    for (i, line) in lines.iter().rev().enumerate() {
        if i >= max_lines {
            by = TruncatedBy::Lines;
            break;
        }
        let add = line.len() + usize::from(i > 0);
        if bytes + add > max_bytes {
            by = TruncatedBy::Bytes;
            if i == 0 {
                let mut start = line.len() - max_bytes;
                while !line.is_char_boundary(start) {
                    start += 1;
                }
                let part = &line[start..];
                t.content = part.to_string();
                t.truncated_by = Some(by);
                t.output_lines = 1;
                t.output_bytes = part.len();
                t.last_line_partial = true;
                return t;
            }
            break;
        }
        bytes += add;
        count += 1;
    }
    t.content = lines[lines.len() - count..].join("\n");
    t.truncated_by = Some(by);
    t.output_lines = count;
    t.output_bytes = bytes;
    t
}

/// pi's `formatSize` (shared with the file helpers below the tools).
pub use crate::sizefmt::format_size;

/// Cuts a grep line to [`GREP_MAX_LINE_LENGTH`] characters plus
/// `... [truncated]`; the flag says whether it was cut.
pub fn truncate_line(line: &str) -> (String, bool) {
    truncate_line_to(line, GREP_MAX_LINE_LENGTH)
}

/// [`truncate_line`] with another limit. Counts UTF-16 code units like
/// JavaScript's `String.length`, never splitting a character.
pub fn truncate_line_to(line: &str, max: usize) -> (String, bool) {
    let mut units = 0;
    for (i, c) in line.char_indices() {
        units += c.len_utf16();
        if units > max {
            return (format!("{}... [truncated]", &line[..i]), true);
        }
    }
    (line.to_string(), false)
}

/// A JavaScript number as `String(n)` prints it: `1`, `1.5`,
/// `100000000000000000000`, `1e+21`, `1e-7`, `NaN`, `Infinity`.
pub fn js_number(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if n == 0.0 {
        return "0".into();
    }
    let a = n.abs();
    if (1e-6..1e21).contains(&a) {
        // Rust prints the shortest round-trip digits without an exponent.
        return format!("{n}");
    }
    let e = format!("{n:e}");
    match e.split_once('e') {
        Some((m, x)) if !x.starts_with('-') => format!("{m}e+{x}"),
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_keeps_short_text_whole() {
        let t = truncate_head("a\nb\n", 2000, 51200);
        assert!(!t.truncated);
        assert_eq!(t.content, "a\nb\n");
        assert_eq!(t.total_lines, 2);
    }

    #[test]
    fn head_cuts_by_lines_and_bytes() {
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        let t = truncate_head(&text, 3, 51200);
        assert_eq!(t.content, "line 1\nline 2\nline 3");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!((t.total_lines, t.output_lines, t.output_bytes), (10, 3, 20));
        let t = truncate_head(&text, 2000, 14);
        assert_eq!(t.content, "line 1\nline 2");
        assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
    }

    #[test]
    fn head_first_line_too_long() {
        let t = truncate_head(&"x".repeat(100), 2000, 10);
        assert!(t.first_line_exceeds_limit);
        assert_eq!(t.content, "");
        assert_eq!(t.output_lines, 0);
    }

    #[test]
    fn tail_keeps_end() {
        let text: String = (1..=10).map(|n| format!("{n}\n")).collect();
        let t = truncate_tail(&text, 3, 51200);
        assert_eq!(t.content, "8\n9\n10");
        assert_eq!(t.output_lines, 3);
    }

    #[test]
    fn tail_partial_last_line_on_char_boundary() {
        let text = format!("{}é", "a".repeat(10));
        let t = truncate_tail(&text, 2000, 1);
        assert!(t.last_line_partial);
        assert_eq!(t.content, "");
        let t = truncate_tail(&text, 2000, 2);
        assert_eq!(t.content, "é");
    }

    #[test]
    fn grep_lines_cut_at_500() {
        let (s, cut) = truncate_line(&"z".repeat(600));
        assert!(cut);
        assert_eq!(s, format!("{}... [truncated]", "z".repeat(500)));
        assert_eq!(truncate_line("short"), ("short".to_string(), false));
    }

    #[test]
    fn js_numbers() {
        assert_eq!(js_number(1.0), "1");
        assert_eq!(js_number(1.5), "1.5");
        assert_eq!(js_number(-2.0), "-2");
        assert_eq!(js_number(1e20), "100000000000000000000");
        assert_eq!(js_number(1e21), "1e+21");
        assert_eq!(js_number(1.5e300), "1.5e+300");
        assert_eq!(js_number(1e-9), "1e-9");
        assert_eq!(js_number(0.000001), "0.000001");
        assert_eq!(js_number(2147483.647), "2147483.647");
        assert_eq!(js_number(f64::NAN), "NaN");
    }
}
