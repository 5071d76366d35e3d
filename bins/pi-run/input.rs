//! The prompts of a run: piped stdin prepended to the first prompt, `@file`
//! arguments included in it (pi's `<file name="…">` blocks), then each
//! message as its own prompt. Piped stdin is read to its end as pi does;
//! an open pipe nobody feeds never blocks the run ([`pi_lib::piped`]).

use std::path::Path;

use pi_lib::cli::CliError;
use pi_lib::format::message::UserMessage;
use pi_lib::format::{AgentMessage, ContentBlock, Num, UserContent};
use serde_json::Map;

use crate::cli::Cli;

/// Largest `@file` and piped stdin (16 MiB): more than any model's context
/// window holds.
pub const AT_FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;

fn user(text: String) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![ContentBlock::text(text)]),
        timestamp: Num::signed(pi_lib::timefmt::now_ms()),
        extra: Map::new(),
    })
}

/// Builds the prompts.
pub fn prompts(cli: &Cli, cwd: &Path) -> Result<Vec<AgentMessage>, CliError> {
    let mut files = String::new();
    let mut messages: Vec<String> = Vec::new();
    for m in &cli.messages {
        if let Some(rel) = m.strip_prefix('@').filter(|r| !r.is_empty()) {
            let path = cwd.join(rel);
            // Regular files only (a FIFO would block, /dev/zero never ends),
            // and at most AT_FILE_MAX_BYTES.
            let text =
                pi_lib::regular_file::read_capped(&path, AT_FILE_MAX_BYTES, None).map_err(|e| {
                    CliError::input(format!("{}: cannot read @file: {e}", path.display()))
                })?;
            let text = String::from_utf8(text).map_err(|_| {
                CliError::input(format!("{}: @file is not UTF-8 text", path.display()))
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
    let piped = pi_lib::piped::read_for_prompt(crate::PROG, AT_FILE_MAX_BYTES)?
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
    if !first.is_empty() {
        out.push(user(first));
    }
    out.extend(rest.map(user));
    Ok(out)
}

/// The `--then` follow-ups, in order (plain text: no stdin or `@file`).
pub fn then_prompts(cli: &Cli) -> Vec<AgentMessage> {
    cli.then.iter().cloned().map(user).collect()
}
