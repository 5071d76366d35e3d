//! `read`: a text file (line window, head truncation, continuation notices)
//! or an image (detected by magic bytes, fitted to pi's limits by
//! [`super::image`], returned as an image block).
//!
//! Text is streamed in one pass that keeps only what can be returned (a
//! little over 50 KiB of the selected lines) and counts the rest, so a
//! file of any size reads in bounded memory with pi's exact notices; the
//! pass checks for abort between chunks. Only regular files are read: a
//! FIFO or device is refused before anything can block. A small text file
//! is read on the run's thread; larger files and images on the blocking
//! pool.

use serde_json::{json, Value};

use super::truncate::{
    format_size, js_number, truncate_head, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES,
};
use super::util::{
    invalid_args, node_fs_error, num_arg, resolve_path, small_regular, str_arg, text_result, thrown,
};
use super::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};
use crate::format::message::ImageBlock;
use crate::format::tool::ToolDefinition;
use crate::format::ContentBlock;

/// The `read` tool.
pub struct ReadTool;

impl Tool for ReadTool {
    fn output_schema(&self) -> Option<Value> {
        Some(serde_json::json!({"anyOf": [
            {"type": "string"},
            {"type": "object", "required": ["type", "data", "mimeType", "note"], "properties": {
                "type": {"const": "image"},
                "data": {"type": "string"},
                "mimeType": {"type": "string"},
                "note": {"type": "string"}
            }}
        ]}))
    }
    fn name(&self) -> std::borrow::Cow<'_, str> {
        "read".into()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "read".into(),
            description: "Read the contents of a file. Supports text files and images (jpg, png, gif, webp, bmp). Images are sent as attachments. For text files, output is truncated to 2000 lines or 50KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete.".into(),
            parameters: json!({
                "type": "object",
                "required": ["path"],
                "properties": {
                    "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
                    "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
                    "limit": {"type": "number", "description": "Maximum number of lines to read"}
                }
            }),
            extra: super::util::constrained_sampling(),
        }
    }

    fn prompt_snippet(&self) -> Option<String> {
        Some("Read file contents".into())
    }

    fn prompt_guidelines(&self) -> Vec<String> {
        vec!["Use read to examine files instead of cat or sed.".into()]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: ToolContext,
        _on_update: UpdateSink,
    ) -> ToolFuture<'a> {
        Box::pin(async move { read(&args, &ctx).await })
    }
}

/// The MIME type of an image we send as an attachment, from its first bytes
/// (jpeg, png, gif, webp, bmp).
pub fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    super::image::detect_mime(bytes)
}

/// The result for an image file: `[text, image]`, or only the text when the
/// image could not be decoded or made small enough. pi 1.6.0 repeats it as
/// `structuredContent` (`{type, data, mimeType, note}` or the text).
fn image_result(bytes: &[u8], mime: &str, auto_resize: bool) -> ToolOutput {
    let prepared = super::image::prepare(bytes, mime, auto_resize);
    let Some((data, mime_type)) = prepared.image else {
        return with_structured(text_result(prepared.text, None));
    };
    let structured = json!({
        "type": "image",
        "data": data,
        "mimeType": mime_type,
        "note": prepared.text,
    });
    ToolOutput {
        content: vec![
            ContentBlock::text(prepared.text),
            ContentBlock::Image(ImageBlock {
                data,
                mime_type,
                extra: Default::default(),
            }),
        ],
        details: None,
        is_error: false,
        structured: Some(structured),
        ..Default::default()
    }
}

/// Largest image file `read` decodes. pi returns at most 4.5 MiB of base64,
/// but fits larger images into that; past this size the image is omitted
/// with a note instead of being loaded.
pub const MAX_IMAGE_FILE_BYTES: u64 = 64 * 1024 * 1024;

async fn read(args: &Value, ctx: &ToolContext) -> ToolOutput {
    let Some(path_arg) = str_arg(args, "path") else {
        return invalid_args(&ReadTool.definition(), args);
    };
    let abs = resolve_path(path_arg, &ctx.cwd);
    if let Err(denied) = ctx.sandbox.check_read(&abs) {
        return thrown(denied);
    }
    let window = Window::from_args(args);
    let meta = match std::fs::metadata(&abs) {
        Ok(m) => m,
        Err(e) => return thrown(node_fs_error(&e, "access", &abs)),
    };
    let auto_resize = ctx.auto_resize_images;
    // A small text file is read here, on the run's thread (see
    // `INLINE_FILE_MAX`).
    if small_regular(&meta) {
        if let Read::Done(out) = read_text(&abs, path_arg, window, &ctx.cancel) {
            return out;
        }
    }
    // Larger files and images (decoded, maybe resized) are read on the
    // blocking pool, in one hand-off. The task checks the token between
    // chunks; the select answers an abort at once.
    let path_arg = path_arg.to_string();
    let cancel = ctx.cancel.clone();
    let task = tokio::task::spawn_blocking(move || {
        read_file(&abs, &path_arg, window, auto_resize, &cancel)
    });
    tokio::select! {
        r = task => r.unwrap_or_else(|e| thrown(format!("{e}"))),
        _ = ctx.cancel.cancelled() => thrown("Operation aborted"),
    }
}

/// The requested line window: 0-based first line, optional line count.
#[derive(Debug, Clone, Copy)]
struct Window {
    offset: Option<f64>,
    start: usize,
    limit: Option<usize>,
}

impl Window {
    /// `offset` and `limit` as pi reads them (1-based offset, values below
    /// 1 mean the start; fractions round down); any number is safe here.
    fn from_args(args: &Value) -> Self {
        let offset = num_arg(args, "offset");
        let start = match offset {
            Some(o) if o >= 1.0 => (o as usize).saturating_sub(1),
            _ => 0,
        };
        let limit = num_arg(args, "limit")
            .filter(|l| *l >= 0.0)
            .map(|l| l as usize);
        Window {
            offset,
            start,
            limit,
        }
    }

    /// One past the last selected line.
    fn end(&self) -> usize {
        self.limit
            .map_or(usize::MAX, |l| self.start.saturating_add(l))
    }
}

/// Reads `abs` as the `read` tool answers: text, or an image decoded
/// (and maybe resized).
fn read_file(
    abs: &std::path::Path,
    path_arg: &str,
    window: Window,
    auto_resize: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> ToolOutput {
    match read_text(abs, path_arg, window, cancel) {
        Read::Done(out) => out,
        Read::Image(file, head, mime, len) => {
            read_image(abs, file, head, mime, len, auto_resize, cancel)
        }
    }
}

/// What [`read_text`] found: the answer, or an image to decode (the open
/// file, its first chunk, its MIME type and length).
enum Read {
    Done(ToolOutput),
    Image(std::fs::File, Vec<u8>, &'static str, u64),
}

/// An image file's answer: a note past the size limit, else the decoded
/// (and maybe resized) image.
fn read_image(
    abs: &std::path::Path,
    file: std::fs::File,
    head: Vec<u8>,
    mime: &'static str,
    len: u64,
    auto_resize: bool,
    cancel: &tokio_util::sync::CancellationToken,
) -> ToolOutput {
    use crate::regular_file::{self, FileError};
    if len > MAX_IMAGE_FILE_BYTES {
        return with_structured(text_result(
            format!(
                "Read image file [{mime}]\n[Image omitted: the file is {}, over the {} limit for images.]",
                format_size(usize::try_from(len).unwrap_or(usize::MAX)),
                format_size(MAX_IMAGE_FILE_BYTES as usize)
            ),
            None,
        ));
    }
    match regular_file::read_rest_capped(file, head, MAX_IMAGE_FILE_BYTES, Some(cancel)) {
        Ok(bytes) => image_result(&bytes, mime, auto_resize),
        Err(FileError::Cancelled) => thrown("Operation aborted"),
        Err(FileError::Io(e)) => thrown(node_fs_error(&e, "read", abs)),
        Err(e) => thrown(format!("{}: {e}", abs.display())),
    }
}

/// Opens `abs` and reads it as text, unless its first chunk is an image.
fn read_text(
    abs: &std::path::Path,
    path_arg: &str,
    window: Window,
    cancel: &tokio_util::sync::CancellationToken,
) -> Read {
    use crate::regular_file::{self, FileError};
    use std::io::Read as _;
    let done = |out: ToolOutput| Read::Done(out);
    let (mut file, meta) = match regular_file::open(abs) {
        Ok(f) => f,
        Err(FileError::NotRegular("directory")) => {
            return done(thrown("EISDIR: illegal operation on a directory, read"))
        }
        Err(FileError::NotRegular(kind)) => {
            return done(thrown(format!(
                "Cannot read {}: it is a {kind}, not a regular file. Use bash to read from devices, pipes or sockets.",
                abs.display()
            )))
        }
        Err(FileError::Io(e)) => return done(thrown(node_fs_error(&e, "open", abs))),
        Err(e) => return done(thrown(format!("{}: {e}", abs.display()))),
    };
    // The first chunk decides between image and text. Its buffer is sized
    // by the file (a few bytes for a small file, not a zeroed 64 KiB), and
    // `read_to_end` retries interrupted reads itself.
    let hint = usize::try_from(meta.len()).map_or(regular_file::CHUNK, |l| {
        l.saturating_add(1).min(regular_file::CHUNK)
    });
    let mut head = Vec::with_capacity(hint);
    if let Err(e) = (&mut file)
        .take(regular_file::CHUNK as u64)
        .read_to_end(&mut head)
    {
        return done(thrown(node_fs_error(&e, "read", abs)));
    }
    // A head shorter than a chunk ended at the end of the file.
    let more = head.len() == regular_file::CHUNK;
    if let Some(mime) = image_mime(&head) {
        return Read::Image(file, head, mime, meta.len());
    }
    let mut scan = TextScan::new(window);
    let mut decoder = LossyDecoder::default();
    decoder.feed(&head, &mut |s| scan.push(s));
    if more {
        let mut chunk = vec![0u8; regular_file::CHUNK];
        loop {
            if cancel.is_cancelled() {
                return done(thrown("Operation aborted"));
            }
            let k = match file.read(&mut chunk) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return done(thrown(node_fs_error(&e, "read", abs))),
            };
            decoder.feed(&chunk[..k], &mut |s| scan.push(s));
        }
    }
    decoder.finish(&mut |s| scan.push(s));
    scan.finish();
    done(text_output(scan, window, path_arg))
}

/// The text result of a finished scan, with pi's notices.
fn text_output(scan: TextScan, window: Window, path_arg: &str) -> ToolOutput {
    let total = scan.total_lines();
    let start = window.start;
    if start >= total {
        let o = window.offset.map_or_else(|| "0".to_string(), js_number);
        return thrown(format!(
            "Offset {o} is beyond end of file ({total} lines total)"
        ));
    }
    let end = window.end().min(total);
    let mut t = truncate_head(&scan.prefix, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    t.total_lines = scan.selected_lines();
    t.total_bytes = scan.selected_bytes;
    let first = start + 1;
    if t.first_line_exceeds_limit {
        let size = format_size(scan.first_len);
        let msg = format!(
            "[Line {first} is {size}, exceeds {} limit. Use bash: sed -n '{first}p' {path_arg} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES)
        );
        return with_structured(text_result(msg, Some(json!({ "truncation": t.to_json() }))));
    }
    if t.truncated {
        let last = first + t.output_lines - 1;
        let limit_note = if t.truncated_by == Some(super::truncate::TruncatedBy::Bytes) {
            format!(" ({} limit)", format_size(DEFAULT_MAX_BYTES))
        } else {
            String::new()
        };
        let msg = format!(
            "{}\n\n[Showing lines {first}-{last} of {total}{limit_note}. Use offset={} to continue.]",
            t.content,
            last + 1
        );
        return with_structured(text_result(msg, Some(json!({ "truncation": t.to_json() }))));
    }
    if window.limit.is_some() && end < total {
        let remaining = total - end;
        return with_structured(text_result(
            format!(
                "{}\n\n[{remaining} more lines in file. Use offset={} to continue.]",
                t.content,
                end + 1
            ),
            None,
        ));
    }
    with_structured(text_result(t.content, None))
}

/// UTF-8 decoding of a byte stream in chunks with the result of
/// `String::from_utf8_lossy` on the whole (a sequence split between chunks
/// is carried over; each invalid sequence becomes one U+FFFD).
#[derive(Default)]
struct LossyDecoder {
    carry: Vec<u8>,
}

impl LossyDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn FnMut(&str)) {
        let joined;
        let mut rest: &[u8] = if self.carry.is_empty() {
            bytes
        } else {
            self.carry.extend_from_slice(bytes);
            joined = std::mem::take(&mut self.carry);
            &joined
        };
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out(s);
                    return;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    if let Ok(s) = std::str::from_utf8(&rest[..good]) {
                        out(s);
                    }
                    match e.error_len() {
                        Some(bad) => {
                            out("\u{FFFD}");
                            rest = &rest[good + bad..];
                        }
                        None => {
                            // An incomplete sequence at the end: wait for more.
                            self.carry = rest[good..].to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }

    fn finish(&mut self, out: &mut dyn FnMut(&str)) {
        if !self.carry.is_empty() {
            self.carry.clear();
            out("\u{FFFD}");
        }
    }
}

/// One pass over a file's text that keeps only what `read` can return: the
/// start of the selected lines (a little over the byte limit, enough for
/// [`truncate_head`] to decide exactly as on the whole selection) and the
/// counts behind pi's notices. Memory stays bounded whatever the file.
struct TextScan {
    start: usize,
    end: usize,
    /// Index of the current line (`split('\n')` pieces so far, minus one).
    line: usize,
    in_selection: bool,
    /// Bytes of the selected text (lines joined by `\n`).
    selected_bytes: usize,
    /// Length of the current line so far.
    line_len: usize,
    /// Length of the first selected line.
    first_len: usize,
    /// Length of the last selected line (to drop pi's empty last piece).
    last_selected_len: usize,
    prefix: String,
}

/// Bytes of the selection kept: two past the byte limit, so a line that
/// reaches past the kept part never looks as if it fit (even when the cut
/// falls right after a newline).
const PREFIX_BYTES: usize = DEFAULT_MAX_BYTES + 2;

impl TextScan {
    fn new(w: Window) -> Self {
        TextScan {
            start: w.start,
            end: w.end(),
            line: 0,
            in_selection: w.start == 0 && w.end() > 0,
            selected_bytes: 0,
            line_len: 0,
            first_len: 0,
            last_selected_len: 0,
            prefix: String::new(),
        }
    }

    fn keep(&mut self, s: &str) {
        self.selected_bytes += s.len();
        if self.prefix.len() < PREFIX_BYTES {
            let mut cut = (PREFIX_BYTES - self.prefix.len()).min(s.len());
            while !s.is_char_boundary(cut) {
                cut += 1;
            }
            self.prefix.push_str(&s[..cut]);
        }
    }

    fn push(&mut self, mut s: &str) {
        while !s.is_empty() {
            let (piece, newline) = match memchr::memchr(b'\n', s.as_bytes()) {
                Some(i) => (&s[..i], true),
                None => (s, false),
            };
            if self.in_selection {
                self.keep(piece);
            }
            self.line_len += piece.len();
            s = &s[piece.len()..];
            if !newline {
                break;
            }
            s = &s[1..];
            self.end_line();
            // The newline belongs to the selection when the next line does.
            if self.in_selection && self.line < self.end {
                self.keep("\n");
            } else {
                self.in_selection = self.line == self.start && self.line < self.end;
            }
        }
    }

    fn end_line(&mut self) {
        if self.line == self.start {
            self.first_len = self.line_len;
        }
        if self.in_selection {
            self.last_selected_len = self.line_len;
        }
        self.line += 1;
        self.line_len = 0;
    }

    /// Lines of the file as pi counts them for the notices (`split('\n')`).
    fn total_lines(&self) -> usize {
        self.line + 1
    }

    fn selected_pieces(&self) -> usize {
        self.end.min(self.total_lines()).saturating_sub(self.start)
    }

    /// Lines of the selection as `truncate_head` counts them (without the
    /// empty piece after a final newline).
    fn selected_lines(&self) -> usize {
        let pieces = self.selected_pieces();
        if pieces > 1 && self.last_selected_len == 0 {
            pieces - 1
        } else {
            pieces
        }
    }

    /// Closes the last, unterminated line.
    fn finish(&mut self) {
        if self.line == self.start {
            self.first_len = self.line_len;
        }
        if self.in_selection {
            self.last_selected_len = self.line_len;
        }
    }
}

/// pi 1.6.0 repeats a text read's content as `structuredContent`.
fn with_structured(mut out: ToolOutput) -> ToolOutput {
    if let Some(ContentBlock::Text(t)) = out.content.first() {
        out.structured = Some(Value::String(t.text.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole-file computation the streaming scan replaces (pi's
    /// algorithm on the decoded text).
    fn reference(bytes: &[u8], w: Window) -> ToolOutput {
        let text = String::from_utf8_lossy(bytes);
        let all: Vec<&str> = text.split('\n').collect();
        let total = all.len();
        if w.start >= total {
            let o = w.offset.map_or_else(|| "0".to_string(), js_number);
            return thrown(format!(
                "Offset {o} is beyond end of file ({total} lines total)"
            ));
        }
        let end = w.end().min(total);
        let selected = all[w.start..end].join("\n");
        let t = truncate_head(&selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
        let first = w.start + 1;
        if t.first_line_exceeds_limit {
            let msg = format!(
                "[Line {first} is {}, exceeds 50.0KB limit. Use bash: sed -n '{first}p' p | head -c 51200]",
                format_size(all[w.start].len())
            );
            return with_structured(text_result(msg, Some(json!({ "truncation": t.to_json() }))));
        }
        if t.truncated {
            let last = first + t.output_lines - 1;
            let note = if t.truncated_by == Some(super::super::truncate::TruncatedBy::Bytes) {
                " (50.0KB limit)"
            } else {
                ""
            };
            let msg = format!(
                "{}\n\n[Showing lines {first}-{last} of {total}{note}. Use offset={} to continue.]",
                t.content,
                last + 1
            );
            return with_structured(text_result(msg, Some(json!({ "truncation": t.to_json() }))));
        }
        if w.limit.is_some() && end < total {
            return with_structured(text_result(
                format!(
                    "{}\n\n[{} more lines in file. Use offset={} to continue.]",
                    t.content,
                    total - end,
                    end + 1
                ),
                None,
            ));
        }
        with_structured(text_result(t.content, None))
    }

    fn streamed(bytes: &[u8], w: Window, chunk: usize) -> ToolOutput {
        let mut scan = TextScan::new(w);
        let mut d = LossyDecoder::default();
        for c in bytes.chunks(chunk.max(1)) {
            d.feed(c, &mut |s| scan.push(s));
        }
        d.finish(&mut |s| scan.push(s));
        scan.finish();
        text_output(scan, w, "p")
    }

    /// xorshift, so the cases are the same on every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn window(offset: Option<f64>, limit: Option<f64>) -> Window {
        let mut args = serde_json::Map::new();
        if let Some(o) = offset {
            args.insert("offset".into(), json!(o));
        }
        if let Some(l) = limit {
            args.insert("limit".into(), json!(l));
        }
        Window::from_args(&Value::Object(args))
    }

    #[test]
    fn streaming_scan_equals_the_whole_file_computation() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        // Line lengths around the limits, multibyte and invalid UTF-8,
        // with and without a final newline.
        let pieces: [&[u8]; 6] = [
            b"x",
            "é".as_bytes(),
            "😀".as_bytes(),
            &[0xFF],
            &[0xE2, 0x82],
            b"\r",
        ];
        for case in 0..150 {
            let mut bytes = Vec::new();
            let lines = rng.below(if case % 15 == 0 { 2500 } else { 40 });
            for _ in 0..lines {
                let len = match rng.below(6) {
                    0 => 0,
                    1 => rng.below(30),
                    2 => 51_150 + rng.below(100),
                    3 => rng.below(3000),
                    _ => rng.below(200),
                };
                let mut n = 0;
                while n < len {
                    if rng.below(8) == 0 {
                        let p = pieces[rng.below(6) as usize];
                        bytes.extend_from_slice(p);
                        n += p.len() as u64;
                    } else {
                        let run = (1 + rng.below(5000)).min(len - n);
                        bytes.extend(std::iter::repeat_n(b'x', run as usize));
                        n += run;
                    }
                }
                if rng.below(10) != 0 {
                    bytes.push(b'\n');
                }
            }
            let offset = match rng.below(4) {
                0 => None,
                1 => Some(rng.below(lines + 3) as f64),
                2 => Some(1e20),
                _ => Some(-3.0),
            };
            let limit = match rng.below(4) {
                0 => None,
                1 => Some(rng.below(lines + 3) as f64),
                2 => Some(1e300),
                _ => Some(2.5),
            };
            let w = window(offset, limit);
            let want = reference(&bytes, w);
            let small = if bytes.len() < 50_000 {
                1 + rng.below(7)
            } else {
                997
            };
            for chunk in [small as usize, 4096, 1 << 20] {
                assert_eq!(
                    streamed(&bytes, w, chunk),
                    want,
                    "case {case}: {} bytes, offset {offset:?}, limit {limit:?}, chunk {chunk}",
                    bytes.len()
                );
            }
        }
    }

    /// The file as a whole goes through the reader: its first chunk (sized
    /// by the file) and the chunks after it, at sizes around the chunk.
    #[test]
    fn files_around_the_chunk_size_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        let chunk = crate::regular_file::CHUNK;
        for size in [0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk + 5] {
            // Short lines, so nothing is cut by the tool's line limit
            // before the end; the last line has no newline.
            let bytes: Vec<u8> = (0..size)
                .map(|i| {
                    if i % 50 == 49 {
                        b'\n'
                    } else {
                        b'a' + (i % 26) as u8
                    }
                })
                .collect();
            let path = dir.path().join(format!("f{size}"));
            std::fs::write(&path, &bytes).unwrap();
            for w in [window(None, None), window(Some(2000.0), Some(40.0))] {
                let got = read_file(&path, "f", w, false, &cancel);
                assert_eq!(got, reference(&bytes, w), "{size} bytes, {w:?}");
            }
        }
    }

    #[test]
    fn huge_numbers_are_safe() {
        let text = b"a\nb\nc\n";
        let out = streamed(text, window(Some(2.0), Some(1e300)), 3);
        assert_eq!(out.content, vec![ContentBlock::text("b\nc\n")]);
        let out = streamed(text, window(Some(1e20), None), 3);
        assert_eq!(
            out.content,
            vec![ContentBlock::text(
                "Offset 100000000000000000000 is beyond end of file (4 lines total)"
            )]
        );
    }
}
