//! `edit`: exact (then whitespace/quote-tolerant) text replacement, one or
//! more disjoint edits per call, keeping the file's BOM and line endings.
//! Details carry pi's numbered `diff`, a unified `patch` and
//! `firstChangedLine`.

use serde_json::{json, Value};
use similar::{DiffOp, TextDiff};

use super::util::{
    errno_text, resolve_path, small_regular, str_arg, text_result, thrown, INLINE_FILE_MAX,
};
use super::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};
use crate::format::tool::ToolDefinition;

/// The `edit` tool.
pub struct EditTool;

impl Tool for EditTool {
    fn name(&self) -> std::borrow::Cow<'_, str> {
        "edit".into()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "edit".into(),
            description: "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping region of the original file. If two changes affect the same block or nearby lines, merge them into one edit instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes.".into(),
            parameters: json!({
                "type": "object",
                "required": ["path", "edits"],
                "properties": {
                    "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
                    "edits": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["oldText", "newText"],
                            "properties": {
                                "oldText": {"type": "string", "description": "Exact text for one targeted replacement. It must be unique in the original file and must not overlap with any other edits[].oldText in the same call."},
                                "newText": {"type": "string", "description": "Replacement text for this targeted edit."}
                            }
                        },
                        "description": "One or more targeted replacements. Each edit is matched against the original file, not incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby lines, merge them into one edit instead."
                    }
                }
            }),
            extra: super::util::constrained_sampling(),
        }
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some("Make precise file edits with exact text replacement, including multiple disjoint edits in one call".into())
    }

    fn prompt_guidelines(&self) -> Vec<String> {
        vec![
            "Use edit for targeted changes. Batch changes to one file in a single call.".into(),
            "Each edits[].oldText must exactly and uniquely match the original file. Keep matches short and non-overlapping; merge nearby changes without including large unchanged regions.".into(),
        ]
    }

    /// The legacy form `{path, oldText, newText}` (pi 1.6.0 still accepts
    /// it) becomes a last entry of `edits`.
    fn prepare_arguments(&self, mut args: Value) -> Value {
        let Value::Object(map) = &mut args else {
            return args;
        };
        if !(map.get("oldText").is_some_and(Value::is_string)
            && map.get("newText").is_some_and(Value::is_string))
        {
            return args;
        }
        let (Some(old), Some(new)) = (map.remove("oldText"), map.remove("newText")) else {
            return args;
        };
        let entry = serde_json::json!({"oldText": old, "newText": new});
        match map.get_mut("edits") {
            Some(Value::Array(list)) => list.push(entry),
            _ => {
                map.insert("edits".into(), Value::Array(vec![entry]));
            }
        }
        args
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move { edit(&args, &ctx).await })
    }
}

/// Lines of context around each change in `details.diff` and the patch.
const CONTEXT: usize = 4;

/// One requested replacement, LF-normalised.
struct Replacement {
    old: String,
    new: String,
}

/// The edits of a call: `edits[]`, or the legacy top-level `oldText`/`newText`.
fn parse_edits(args: &Value) -> Option<Vec<Replacement>> {
    let mut out = Vec::new();
    if let Some(list) = args.get("edits").and_then(Value::as_array) {
        for e in list {
            out.push(Replacement {
                old: str_arg(e, "oldText")?.to_string(),
                new: str_arg(e, "newText")?.to_string(),
            });
        }
    }
    if let (Some(old), Some(new)) = (str_arg(args, "oldText"), str_arg(args, "newText")) {
        out.push(Replacement {
            old: old.to_string(),
            new: new.to_string(),
        });
    }
    Some(out)
}

fn to_lf(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// Maps a character to its fuzzy form: smart quotes to ASCII, Unicode dashes
/// to `-`, special spaces to a space.
fn fuzzy_char(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        c => c,
    }
}

/// The fuzzy form of `text` (trailing whitespace of every line dropped,
/// characters mapped by [`fuzzy_char`]) and, for each of its byte offsets
/// plus the end, the matching byte offset in `text`.
fn fuzzy(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len() + 1);
    let mut line_start = 0;
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            map.push(line_start - 1);
            out.push('\n');
        }
        let kept = line.trim_end();
        for (off, c) in kept.char_indices() {
            let f = fuzzy_char(c);
            for _ in 0..f.len_utf8() {
                map.push(line_start + off);
            }
            out.push(f);
        }
        line_start += line.len() + 1;
    }
    map.push(text.len());
    (out, map)
}

fn count(hay: &str, needle: &str) -> usize {
    if needle.is_empty() {
        return 0;
    }
    hay.matches(needle).count()
}

/// Largest file `edit` loads (it holds the file and its edited copy).
pub const MAX_EDIT_FILE_BYTES: u64 = 256 * 1024 * 1024;

async fn edit(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let Some(path) = str_arg(args, "path") else {
        return thrown("Edit tool input is invalid. path must be a string.");
    };
    let Some(edits) = parse_edits(args) else {
        return thrown("Edit tool input is invalid. Each edit needs oldText and newText strings.");
    };
    if edits.is_empty() {
        return thrown("Edit tool input is invalid. edits must contain at least one replacement.");
    }
    let abs = resolve_path(path, &ctx.cwd);
    if let Err(denied) = ctx.sandbox.check_write(&abs) {
        return thrown(denied);
    }
    // A small file is read on the run's thread, a larger one on the
    // blocking pool (see `INLINE_FILE_MAX`).
    let read = match std::fs::metadata(&abs) {
        Ok(meta) if small_regular(&meta) => Ok(crate::regular_file::read_capped(
            &abs,
            MAX_EDIT_FILE_BYTES,
            Some(&ctx.cancel),
        )),
        _ => {
            let target = abs.clone();
            let cancel = ctx.cancel.clone();
            tokio::task::spawn_blocking(move || {
                crate::regular_file::read_capped(&target, MAX_EDIT_FILE_BYTES, Some(&cancel))
            })
            .await
        }
    };
    let raw = match read {
        Ok(Ok(b)) => b,
        Ok(Err(crate::regular_file::FileError::Io(e))) => {
            let (code, _) = errno_text(&e);
            return thrown(format!("Could not edit file: {path}. Error code: {code}."));
        }
        Ok(Err(crate::regular_file::FileError::NotRegular("directory"))) => {
            return thrown(format!("Could not edit file: {path}. Error code: EISDIR."));
        }
        Ok(Err(crate::regular_file::FileError::NotRegular(kind))) => {
            return thrown(format!(
                "Could not edit file: {path}. It is a {kind}, not a regular file."
            ))
        }
        Ok(Err(e)) => return thrown(format!("Could not edit file: {path}: {e}.")),
        Err(e) => return thrown(format!("edit failed: {e}")),
    };
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (bom, body) = match raw.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", raw.as_str()),
    };
    let crlf = body
        .find('\n')
        .is_some_and(|i| i > 0 && body.as_bytes()[i - 1] == b'\r');
    let content = to_lf(body);
    let multi = edits.len() > 1;
    let (fuzzy_content, map) = fuzzy(&content);

    // (start, end, index) in `content`
    let mut spans: Vec<(usize, usize, usize)> = Vec::new();
    for (i, e) in edits.iter().enumerate() {
        let old = to_lf(&e.old);
        if old.is_empty() {
            return thrown(if multi {
                format!("edits[{i}].oldText must not be empty in {path}.")
            } else {
                format!("oldText must not be empty in {path}.")
            });
        }
        let (fuzzy_old, _) = fuzzy(&old);
        let span = if let Some(s) = content.find(&old) {
            Some((s, s + old.len()))
        } else if fuzzy_old.is_empty() {
            None
        } else {
            fuzzy_content
                .find(&fuzzy_old)
                .map(|s| (map[s], map[s + fuzzy_old.len()]))
        };
        let Some((s, end)) = span else {
            return thrown(if multi {
                format!("Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines.")
            } else {
                format!("Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines.")
            });
        };
        let n = count(&fuzzy_content, &fuzzy_old).max(count(&content, &old));
        if n > 1 {
            return thrown(if multi {
                format!("Found {n} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide more context to make it unique.")
            } else {
                format!("Found {n} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique.")
            });
        }
        spans.push((s, end, i));
    }
    spans.sort();
    for w in spans.windows(2) {
        if w[0].1 > w[1].0 {
            let (a, b) = (w[0].2.min(w[1].2), w[0].2.max(w[1].2));
            return thrown(format!(
                "edits[{a}] and edits[{b}] overlap in {path}. Merge them into one edit or target disjoint regions."
            ));
        }
    }
    let mut updated = content.clone();
    for &(s, end, i) in spans.iter().rev() {
        updated.replace_range(s..end, &to_lf(&edits[i].new));
    }
    if updated == content {
        return thrown(format!("No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."));
    }
    let on_disk = if crlf {
        updated.replace('\n', "\r\n")
    } else {
        updated.clone()
    };
    let text = format!("{bom}{on_disk}");
    let written = if text.len() as u64 <= INLINE_FILE_MAX {
        std::fs::write(&abs, text)
    } else {
        tokio::fs::write(&abs, text).await
    };
    if let Err(e) = written {
        let (code, _) = errno_text(&e);
        return thrown(format!("Could not edit file: {path}. Error code: {code}."));
    }
    let (diff, first_changed) = numbered_diff(&content, &updated);
    let patch = unified_patch(path, &content, &updated);
    let mut details = json!({ "diff": diff, "patch": patch });
    if let (Some(first), Some(obj)) = (first_changed, details.as_object_mut()) {
        obj.insert("firstChangedLine".into(), json!(first));
    }
    text_result(
        format!("Successfully replaced {} block(s) in {path}.", edits.len()),
        Some(details),
    )
}

/// A run of lines that are all context, all removed or all added.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Same,
    Removed,
    Added,
}

/// The diff as runs of (kind, lines without their newline), removals before
/// additions, like jsdiff's `diffLines`.
fn parts<'a>(old: &'a str, new: &'a str) -> Vec<(Kind, Vec<&'a str>)> {
    let diff = TextDiff::from_lines(old, new);
    let old_lines: Vec<&str> = diff.old_slices().to_vec();
    let new_lines: Vec<&str> = diff.new_slices().to_vec();
    let strip = |s: &'a str| s.strip_suffix('\n').unwrap_or(s);
    let mut out: Vec<(Kind, Vec<&str>)> = Vec::new();
    let mut push = |k: Kind, lines: Vec<&'a str>| {
        if lines.is_empty() {
            return;
        }
        match out.last_mut() {
            Some((lk, l)) if *lk == k => l.extend(lines),
            _ => out.push((k, lines)),
        }
    };
    for op in diff.ops() {
        match *op {
            DiffOp::Equal { old_index, len, .. } => push(
                Kind::Same,
                old_lines[old_index..old_index + len]
                    .iter()
                    .map(|s| strip(s))
                    .collect(),
            ),
            DiffOp::Delete {
                old_index, old_len, ..
            } => push(
                Kind::Removed,
                old_lines[old_index..old_index + old_len]
                    .iter()
                    .map(|s| strip(s))
                    .collect(),
            ),
            DiffOp::Insert {
                new_index, new_len, ..
            } => push(
                Kind::Added,
                new_lines[new_index..new_index + new_len]
                    .iter()
                    .map(|s| strip(s))
                    .collect(),
            ),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                push(
                    Kind::Removed,
                    old_lines[old_index..old_index + old_len]
                        .iter()
                        .map(|s| strip(s))
                        .collect(),
                );
                push(
                    Kind::Added,
                    new_lines[new_index..new_index + new_len]
                        .iter()
                        .map(|s| strip(s))
                        .collect(),
                );
            }
        }
    }
    // a removal directly followed by an addition after an earlier addition
    // stays in order; pi never emits added-then-removed, so swap those
    let mut i = 0;
    while i + 1 < out.len() {
        if out[i].0 == Kind::Added && out[i + 1].0 == Kind::Removed {
            out.swap(i, i + 1);
        }
        i += 1;
    }
    out
}

/// pi's `details.diff`: `+N text`, `-N text`, ` N text` lines, numbers
/// right-aligned, [`CONTEXT`] lines around changes, ` <pad> ...` for the
/// rest; and the first changed line of the new file.
pub fn numbered_diff(old: &str, new: &str) -> (String, Option<usize>) {
    let width = old
        .split('\n')
        .count()
        .max(new.split('\n').count())
        .to_string()
        .len();
    let pad = |n: Option<usize>| match n {
        Some(n) => format!("{n:>width$}"),
        None => " ".repeat(width),
    };
    let parts = parts(old, new);
    let mut out: Vec<String> = Vec::new();
    let (mut old_no, mut new_no) = (1usize, 1usize);
    let mut first_changed = None;
    let mut last_was_change = false;
    for (i, (kind, lines)) in parts.iter().enumerate() {
        match kind {
            Kind::Added | Kind::Removed => {
                first_changed.get_or_insert(new_no);
                for l in lines {
                    if *kind == Kind::Added {
                        out.push(format!("+{} {l}", pad(Some(new_no))));
                        new_no += 1;
                    } else {
                        out.push(format!("-{} {l}", pad(Some(old_no))));
                        old_no += 1;
                    }
                }
                last_was_change = true;
            }
            Kind::Same => {
                let next_is_change = parts.get(i + 1).is_some_and(|(k, _)| *k != Kind::Same);
                let n = lines.len();
                let show = |range: std::ops::Range<usize>,
                            out: &mut Vec<String>,
                            old_no: &mut usize,
                            new_no: &mut usize| {
                    for l in &lines[range] {
                        out.push(format!(" {} {l}", pad(Some(*old_no))));
                        *old_no += 1;
                        *new_no += 1;
                    }
                };
                let ellipsis = format!(" {} ...", pad(None));
                if last_was_change && next_is_change {
                    if n <= 2 * CONTEXT {
                        show(0..n, &mut out, &mut old_no, &mut new_no);
                    } else {
                        show(0..CONTEXT, &mut out, &mut old_no, &mut new_no);
                        out.push(ellipsis);
                        old_no += n - 2 * CONTEXT;
                        new_no += n - 2 * CONTEXT;
                        show(n - CONTEXT..n, &mut out, &mut old_no, &mut new_no);
                    }
                } else if last_was_change {
                    let k = n.min(CONTEXT);
                    show(0..k, &mut out, &mut old_no, &mut new_no);
                    if n > k {
                        out.push(ellipsis);
                        old_no += n - k;
                        new_no += n - k;
                    }
                } else if next_is_change {
                    let skip = n.saturating_sub(CONTEXT);
                    if skip > 0 {
                        out.push(ellipsis);
                        old_no += skip;
                        new_no += skip;
                    }
                    show(skip..n, &mut out, &mut old_no, &mut new_no);
                } else {
                    old_no += n;
                    new_no += n;
                }
                last_was_change = false;
            }
        }
    }
    (out.join("\n"), first_changed)
}

/// A unified diff like jsdiff's `createTwoFilesPatch(path, path, …)` with
/// [`CONTEXT`] lines: `--- path`, `+++ path`, hunks, and
/// `\ No newline at end of file` markers.
pub fn unified_patch(path: &str, old: &str, new: &str) -> String {
    let diff = TextDiff::from_lines(old, new);
    let old_lines = diff.old_slices();
    let new_lines = diff.new_slices();
    let old_open = !old.is_empty() && !old.ends_with('\n');
    let new_open = !new.is_empty() && !new.ends_with('\n');
    const MARK: &str = "\\ No newline at end of file\n";
    let mut out = format!("--- {path}\n+++ {path}\n");
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let o = first.old_range().start..last.old_range().end;
        let n = first.new_range().start..last.new_range().end;
        let ostart = if o.is_empty() { o.start } else { o.start + 1 };
        let nstart = if n.is_empty() { n.start } else { n.start + 1 };
        out.push_str(&format!(
            "@@ -{ostart},{} +{nstart},{} @@\n",
            o.len(),
            n.len()
        ));
        for op in &group {
            for change in diff.iter_changes(op) {
                let (sign, marker) = match change.tag() {
                    similar::ChangeTag::Equal => (
                        ' ',
                        change.old_index() == Some(old_lines.len() - 1) && old_open,
                    ),
                    similar::ChangeTag::Delete => (
                        '-',
                        change.old_index() == Some(old_lines.len() - 1) && old_open,
                    ),
                    similar::ChangeTag::Insert => (
                        '+',
                        change.new_index() == Some(new_lines.len() - 1) && new_open,
                    ),
                };
                let v = change.value();
                out.push(sign);
                out.push_str(v.strip_suffix('\n').unwrap_or(v));
                out.push('\n');
                if marker {
                    out.push_str(MARK);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzzy_maps_back_to_original_offsets() {
        let (f, map) = fuzzy("a  \n\u{201C}b\u{201D}\t\n");
        assert_eq!(f, "a\n\"b\"\n");
        assert_eq!(map[f.find('\n').unwrap()], 3);
        assert_eq!(map[f.len()], "a  \n\u{201C}b\u{201D}\t\n".len());
    }

    #[test]
    fn diff_numbers_and_context() {
        let (d, first) = numbered_diff("a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(d, " 1 a\n-2 b\n+2 B\n 3 c");
        assert_eq!(first, Some(2));
    }

    #[test]
    fn patch_marks_missing_final_newline() {
        let p = unified_patch("f", "first\nlast", "first\nLAST\nmore");
        assert_eq!(
            p,
            "--- f\n+++ f\n@@ -1,2 +1,3 @@\n first\n-last\n\\ No newline at end of file\n+LAST\n+more\n\\ No newline at end of file\n"
        );
    }
}
