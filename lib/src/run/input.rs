//! The prompts of a run: piped stdin prepended to the first prompt, `@file`
//! arguments included in it (pi's `<file name="…">` blocks), then each
//! message as its own prompt. Piped stdin is read to its end as pi does;
//! an open pipe nobody feeds never blocks the run ([`crate::piped`]).

use std::path::Path;

use serde_json::Map;

use crate::cli::CliError;
use crate::format::message::{ImageBlock, UserMessage};
use crate::format::{AgentMessage, ContentBlock, Num, UserContent};

/// Largest `@file` and piped stdin (16 MiB): more than any model's context
/// window holds.
pub const AT_FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;

pub(crate) fn user(text: String) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![ContentBlock::text(text)]),
        timestamp: Num::signed(crate::timefmt::now_ms()),
        extra: Map::new(),
    })
}

/// Builds the prompts from the messages given. An `@file` holding an
/// image (known by its first bytes, as `read` knows it) goes to the first
/// prompt as an image block, converted and fitted as `read` does when
/// `auto_resize` (settings `images.autoResize`); its `<file>` tag stays
/// in the text, and the fitting's notes end the text, as pi 1.6.0 sends
/// them. A model without image input gets a placeholder instead (the
/// provider layer's job: the session keeps the image).
pub fn prompts(
    given: &[String],
    cwd: &Path,
    prog: &str,
    auto_resize: bool,
) -> Result<Vec<AgentMessage>, CliError> {
    let mut files = String::new();
    let mut images: Vec<ContentBlock> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut messages: Vec<String> = Vec::new();
    for m in given {
        if let Some(rel) = m.strip_prefix('@').filter(|r| !r.is_empty()) {
            let path = cwd.join(rel);
            // Regular files only (a FIFO would block, /dev/zero never ends),
            // and at most AT_FILE_MAX_BYTES.
            let bytes =
                crate::regular_file::read_capped(&path, AT_FILE_MAX_BYTES, None).map_err(|e| {
                    CliError::input(format!("{}: cannot read @file: {e}", path.display()))
                })?;
            if let Some(mime) = crate::tools::image::detect_mime(&bytes) {
                let a = crate::tools::image::prepare_attachment(&bytes, mime, auto_resize);
                files.push_str(&format!(
                    "<file name=\"{}\">{}</file>\n",
                    path.display(),
                    a.conversion_note.unwrap_or_default()
                ));
                notes.extend(a.resize_note);
                if let Some((data, mime_type)) = a.image {
                    images.push(ContentBlock::Image(ImageBlock {
                        data,
                        mime_type,
                        extra: Map::new(),
                    }));
                }
                continue;
            }
            let text = String::from_utf8(bytes).map_err(|_| {
                CliError::input(format!(
                    "{}: @file is neither UTF-8 text nor an image (jpg, png, gif, webp, bmp)",
                    path.display()
                ))
            })?;
            files.push_str(&format!(
                "<file name=\"{}\">\n{}\n</file>\n",
                path.display(),
                text
            ));
        } else {
            messages.push(m.clone());
        }
    }
    let piped = crate::piped::read_for_prompt(prog, AT_FILE_MAX_BYTES)?
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let mut first = String::new();
    if let Some(p) = piped {
        first.push_str(&p);
    }
    first.push_str(&files);
    let mut out = Vec::new();
    let mut rest = messages.into_iter();
    if let Some(m) = rest.next() {
        first.push_str(&m);
    }
    if !notes.is_empty() {
        first.push_str("\n\n");
        first.push_str(&notes.join("\n"));
    }
    if !first.is_empty() || !images.is_empty() {
        let mut blocks = vec![ContentBlock::text(first)];
        blocks.extend(images);
        out.push(AgentMessage::User(UserMessage {
            content: UserContent::Blocks(blocks),
            timestamp: Num::signed(crate::timefmt::now_ms()),
            extra: Map::new(),
        }));
    }
    out.extend(rest.map(user));
    Ok(out)
}

/// The `--then` follow-ups, in order (plain text: no stdin or `@file`).
pub fn then_prompts(then: &[String]) -> Vec<AgentMessage> {
    then.iter().cloned().map(user).collect()
}

/// pi refuses prompts on the command line in RPC mode: they come on stdin.
pub fn check_rpc_args(messages: &[String], then: &[String]) -> Result<(), CliError> {
    if messages.iter().any(|m| m.starts_with('@')) {
        return Err(CliError::input(
            "@file arguments are not supported in RPC mode",
        ));
    }
    if !messages.is_empty() || !then.is_empty() {
        return Err(CliError::input("--mode rpc takes no prompt arguments")
            .with_hint("send {\"type\":\"prompt\",\"message\":…} on stdin"));
    }
    Ok(())
}

/// The sections of a `--system-from` prompt, and whether the prompt says
/// it was made for a trusted project (its `trust` record; `None` without
/// one, as in plain text).
pub type SectionsFrom = (Vec<(String, String)>, Option<bool>);

/// Sections from `--system-from`: `pi-prompt system` JSONL, or plain text
/// as the whole prompt.
pub fn sections_from(src: &str, prog: &str) -> Result<SectionsFrom, CliError> {
    // Bounded like every outside input: a FIFO or /dev/zero is refused,
    // and stdin is read as piped prompt text is (never hanging on a pipe
    // nobody feeds).
    let text = if src == "-" {
        crate::piped::read_for_prompt(prog, AT_FILE_MAX_BYTES)?.unwrap_or_default()
    } else {
        let bytes = crate::regular_file::read_capped(Path::new(src), AT_FILE_MAX_BYTES, None)
            .map_err(|e| CliError::input(format!("{src}: {e}")))?;
        String::from_utf8(bytes).map_err(|_| CliError::input(format!("{src}: not UTF-8 text")))?
    };
    let mut sections = Vec::new();
    let mut trusted = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) if v.get("type").is_some() => {
                if v["type"] == "section" {
                    let (Some(name), Some(body)) = (v["name"].as_str(), v["text"].as_str()) else {
                        return Err(CliError::input(format!(
                            "{src}:{}: section record needs name and text",
                            i + 1
                        )));
                    };
                    sections.push((name.to_string(), body.to_string()));
                } else if v["type"] == "trust" {
                    trusted = v["trusted"].as_bool();
                }
            }
            // Not JSONL: the whole text is the prompt.
            _ => {
                let sections = if text.is_empty() {
                    Vec::new()
                } else {
                    vec![("preamble".to_string(), text)]
                };
                return Ok((sections, None));
            }
        }
    }
    Ok((sections, trusted))
}

/// `pi-resources` records piped on stdin (`None` when stdin is a terminal,
/// carries nothing, or is a pipe nobody feeds; at most 16 MiB); a line
/// that is not a record is an input error naming it.
pub fn piped_records(
    prog: &str,
) -> Result<Option<Vec<crate::format::resources::ResourceRecord>>, CliError> {
    let Some(text) = crate::piped::read_for_prompt(prog, AT_FILE_MAX_BYTES)? else {
        return Ok(None);
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r = serde_json::from_str(line).map_err(|e| {
            CliError::input(format!("stdin:{}: not a pi-resources record: {e}", i + 1))
        })?;
        records.push(r);
    }
    Ok(Some(records))
}
