//! `pi-session search`: the entries of session files whose text holds a
//! string (message texts, thinking, tool call arguments, custom messages,
//! summaries, names and labels), one match per entry text with a one-line
//! snippet around it. A file whose bytes do not hold the string at all is
//! skipped without being parsed, when the string has nothing JSON would
//! escape.

use std::io::Read;
use std::path::PathBuf;

use crate::format::records::MatchRecord;
use crate::format::{AgentMessage, ContentBlock, Entry};
use crate::terminal::clip;

use super::file::open_regular;
use super::Session;

/// What to look for.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub text: &'a str,
    pub ignore_case: bool,
    /// Stop after this many matches.
    pub limit: Option<usize>,
}

/// Searches `files` in order, handing each match to `on_match` as it is
/// found (an error from it ends the search); returns how many there were.
/// Files that cannot be read or are not sessions, and their damaged
/// lines, are reported to `warn` and skipped.
pub fn search<E>(
    files: &[PathBuf],
    q: &Query<'_>,
    warn: &mut dyn FnMut(&str),
    mut on_match: impl FnMut(MatchRecord) -> Result<(), E>,
) -> Result<usize, E> {
    let text = q.text;
    // Raw-byte prefilter: valid when the needle has nothing JSON escapes.
    let plain = !q.ignore_case
        && !text
            .chars()
            .any(|c| c == '"' || c == '\\' || c.is_control());
    let finder = memchr::memmem::Finder::new(text.as_bytes());
    let mut hits = 0usize;
    for path in files {
        if plain {
            let mut bytes = Vec::new();
            match open_regular(path, false).and_then(|mut f| f.read_to_end(&mut bytes)) {
                Ok(_) if finder.find(&bytes).is_none() => continue,
                Ok(_) => {}
                Err(e) => {
                    warn(&format!("{}: skipped: {e}", path.display()));
                    continue;
                }
            }
        }
        let s = match Session::load(path) {
            Ok(s) => s,
            Err(e) => {
                warn(&format!("skipped: {e}"));
                continue;
            }
        };
        for m in s.diagnostics.messages() {
            warn(&m);
        }
        for (e, &line) in s.entries.iter().zip(&s.lines) {
            for (role, t) in entry_texts(e) {
                let Some(at) = find(&t, text, q.ignore_case) else {
                    continue;
                };
                hits += 1;
                on_match(MatchRecord {
                    kind: "match",
                    session_id: s.id().to_string(),
                    path: path.display().to_string(),
                    entry_id: e.id().to_string(),
                    line,
                    role,
                    text: snippet(&t, at, text.len()),
                })?;
                if q.limit.is_some_and(|n| hits >= n) {
                    return Ok(hits);
                }
                break;
            }
        }
    }
    Ok(hits)
}

/// Searchable texts of an entry: `(role or kind, text)`.
fn entry_texts(e: &Entry) -> Vec<(String, String)> {
    let mut v = Vec::new();
    match e {
        Entry::Message(m) => {
            let role = m.message.role().to_string();
            match &m.message {
                AgentMessage::Assistant(a) => {
                    for b in &a.content {
                        match b {
                            ContentBlock::Text(t) => v.push((role.clone(), t.text.clone())),
                            ContentBlock::Thinking(t) => {
                                v.push(("thinking".into(), t.thinking.clone()))
                            }
                            ContentBlock::ToolCall(c) => v.push((
                                format!("toolCall:{}", c.name),
                                serde_json::to_string(&c.arguments).unwrap_or_default(),
                            )),
                            _ => {}
                        }
                    }
                }
                AgentMessage::System(_) => {}
                other => v.push((role, other.text())),
            }
        }
        Entry::CustomMessage(c) => v.push(("custom_message".into(), c.content.joined_text("\n"))),
        Entry::Compaction(c) => v.push(("compaction".into(), c.summary.clone())),
        Entry::BranchSummary(b) => v.push(("branch_summary".into(), b.summary.clone())),
        Entry::SessionInfo(i) => v.push(("name".into(), i.name.clone().unwrap_or_default())),
        Entry::Label(l) => v.push(("label".into(), l.label.clone().unwrap_or_default())),
        _ => {}
    }
    v
}

fn find(hay: &str, needle: &str, ignore_case: bool) -> Option<usize> {
    if ignore_case {
        hay.to_lowercase().find(&needle.to_lowercase())
    } else {
        hay.find(needle)
    }
}

/// Text around byte offset `at`, on one line. `at` may fall inside a
/// character (a case-insensitive match is found in the lowercased text,
/// whose lengths can differ): the character's start is used.
fn snippet(text: &str, at: usize, len: usize) -> String {
    let at = (0..=at.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(40)
        .map(|(i, _)| i)
        .unwrap_or(0);
    let end_target = (at + len + 60).min(text.len());
    let end = (end_target..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    let mut s = String::new();
    if start > 0 {
        s.push('…');
    }
    s.push_str(&clip(&text[start..end], 200));
    if end < text.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_never_cuts_inside_a_character() {
        // A case-insensitive match is found in the lowercased text, whose
        // byte offsets can differ ("İ" is two bytes, lowercased three): the
        // offset of "é" there falls inside the original "é".
        let at = find("İé", "É", true).unwrap();
        assert_eq!(at, 3);
        assert_eq!(snippet("İé", at, 2), "İé");
        assert_eq!(snippet("abc", 99, 1), "abc");
    }
}
