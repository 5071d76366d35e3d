//! The one reader for text resources — context files (AGENTS.md /
//! CLAUDE.md / AGENTS.override.md), SKILL.md, prompt templates, themes,
//! SYSTEM.md / APPEND_SYSTEM.md and `--system-prompt` /
//! `--append-system-prompt` files. pi 1.6.0 reads all of them the same way
//! (checked with the oracle): one leading UTF-8 byte-order mark is dropped
//! (a second one, or one later in the file, is content), and invalid UTF-8
//! becomes U+FFFD instead of failing the file. Reading them all here keeps
//! what reaches the model, what is recorded and what `pi-resources` reports
//! in agreement. Only a regular file of at most [`CAP`] is read (a FIFO or
//! device in a cloned project is refused instead of hanging the run).

use std::path::Path;

/// Decodes file bytes as pi does: lossy UTF-8, one leading BOM removed.
pub fn decode(bytes: &[u8]) -> String {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

/// The largest text resource read: 16 MiB, as `@file` arguments.
pub const CAP: u64 = 16 << 20;

/// Reads a text resource (see the module docs).
pub fn read(path: &Path) -> std::io::Result<String> {
    crate::regular_file::read_capped(path, CAP, None)
        .map(|b| decode(&b))
        .map_err(std::io::Error::from)
}

/// Splits a file the way pi reads SKILL.md and prompt templates (text as
/// [`crate::resources::text`] read it, leading BOM already dropped):
/// `\r\n` and lone `\r` made `\n`; when the text starts with
/// `---` and a later line starts with `---`, the part between is the
/// frontmatter (returned raw, YAML not parsed) and the rest of the text
/// after those three dashes, trimmed, is the body. Otherwise there is no
/// frontmatter and the body is the whole normalised text, untrimmed.
pub fn split_frontmatter(raw: &str) -> (Option<String>, String) {
    let text = raw.replace("\r\n", "\n").replace('\r', "\n");
    if let Some(after) = text.strip_prefix("---") {
        if let Some(end) = after.find("\n---") {
            let front = after[..end].trim_start_matches('\n').to_string();
            let body = js_trim(&after[end + 4..]).to_string();
            return (Some(front), body);
        }
    }
    (None, text)
}

/// JavaScript's `\s` (what pi splits and trims on): ASCII whitespace, NBSP,
/// the Unicode space separators, line/paragraph separators and the BOM.
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// JavaScript's `String.prototype.trim`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_leading_bom_is_dropped_and_bad_utf8_is_replaced() {
        assert_eq!(decode(b"\xef\xbb\xbfrules\n"), "rules\n");
        assert_eq!(decode(b"\xef\xbb\xbf\xef\xbb\xbfx"), "\u{feff}x");
        assert_eq!(decode(b"a\xef\xbb\xbfb"), "a\u{feff}b");
        assert_eq!(decode(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(decode(b""), "");
        assert_eq!(decode(b"\xef\xbb"), "\u{fffd}");
    }
}
