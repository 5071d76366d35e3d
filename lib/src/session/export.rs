//! Exporting a session: its current branch as Markdown, or the whole tree
//! as one self-contained HTML page ([`super::html`]), written next to the
//! session or where asked, never over it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::format::{AgentMessage, ContentBlock, Entry};

pub use super::html::{escape_html, to_html};
use super::Session;

fn code_fence(text: &str) -> String {
    let mut fence = "```".to_string();
    while text.contains(&fence) {
        fence.push('`');
    }
    format!("{fence}\n{text}\n{fence}")
}

/// Writes an export `doc` of `s` to `target` atomically (replacing a file
/// there), never over the session file itself. The error names the file.
pub fn write_export(s: &Session, target: &Path, doc: &str) -> Result<(), String> {
    if target == s.path {
        return Err(format!(
            "{}: refusing to overwrite the session itself",
            target.display()
        ));
    }
    crate::atomic_file::write_atomic(target, doc.as_bytes(), true)
        .map_err(|e| format!("{}: {e}", target.display()))
}

/// The name pi gives an export of session file `file`:
/// `pi-session-<file stem>.<ext>`.
pub fn default_name(file: &Path, ext: &str) -> PathBuf {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    PathBuf::from(format!("pi-session-{stem}.{ext}"))
}

/// Where `pi-session export` writes when no file is named and its output
/// is a terminal (a page is for a browser, not for the screen): the
/// default name in `cwd`.
pub fn terminal_target(s: &Session, ext: &str, cwd: &Path) -> PathBuf {
    cwd.join(default_name(&s.path, ext))
}

/// pi's `--export FILE [OUTPUT]`: the session file `file` (relative to
/// `cwd`) as one HTML page at `output`, by default
/// `pi-session-<file stem>.html` in `cwd`. Returns the output as named (as
/// pi reports it).
pub fn export_html_file(file: &Path, output: Option<&Path>, cwd: &Path) -> Result<PathBuf, String> {
    let file = cwd.join(file);
    if !file.is_file() {
        return Err(format!("File not found: {}", file.display()));
    }
    let s = Session::load(&file).map_err(|e| e.to_string())?;
    let out = match output {
        Some(o) => o.to_path_buf(),
        None => default_name(&file, "html"),
    };
    write_export(&s, &cwd.join(&out), &to_html(&s))?;
    Ok(out)
}

/// Markdown of the current branch.
pub fn to_markdown(s: &Session) -> String {
    let mut out = String::new();
    let title = s.name().unwrap_or_else(|| format!("Session {}", s.id()));
    let _ = writeln!(out, "# {title}\n");
    let _ = writeln!(out, "- id: `{}`", s.id());
    let _ = writeln!(out, "- cwd: `{}`", s.header.cwd);
    let _ = writeln!(out, "- created: {}", s.header.timestamp);
    if let Some(p) = &s.header.parent_session {
        let _ = writeln!(out, "- forked from: `{p}`");
    }
    out.push('\n');
    for i in s.branch() {
        let e = &s.entries[i];
        match e {
            Entry::Message(m) => md_message(&mut out, &m.message),
            Entry::CustomMessage(c) => {
                let _ = writeln!(
                    out,
                    "## Extension message ({})\n\n{}\n",
                    c.custom_type,
                    c.content.joined_text("\n")
                );
            }
            Entry::Compaction(c) => {
                let _ = writeln!(out, "## Compaction summary\n\n{}\n", c.summary);
            }
            Entry::BranchSummary(b) => {
                let _ = writeln!(out, "## Branch summary\n\n{}\n", b.summary);
            }
            Entry::ModelChange(m) => {
                let _ = writeln!(out, "_Model: {}/{}_\n", m.provider, m.model_id);
            }
            Entry::ThinkingLevelChange(t) => {
                let _ = writeln!(out, "_Thinking level: {}_\n", t.thinking_level);
            }
            _ => {}
        }
    }
    out
}

fn md_message(out: &mut String, m: &AgentMessage) {
    match m {
        AgentMessage::User(u) => {
            let _ = writeln!(out, "## User\n\n{}\n", u.content.joined_text("\n"));
        }
        AgentMessage::Assistant(a) => {
            let _ = writeln!(out, "## Assistant ({})\n", a.model);
            for b in &a.content {
                match b {
                    ContentBlock::Text(t) => {
                        let _ = writeln!(out, "{}\n", t.text);
                    }
                    ContentBlock::Thinking(t) => {
                        let quoted: Vec<String> =
                            t.thinking.lines().map(|l| format!("> {l}")).collect();
                        let _ = writeln!(out, "> **Thinking**\n>\n{}\n", quoted.join("\n"));
                    }
                    ContentBlock::ToolCall(c) => {
                        let args = serde_json::to_string_pretty(&c.arguments).unwrap_or_default();
                        let _ = writeln!(
                            out,
                            "**Tool call `{}`** (`{}`)\n\n{}\n",
                            c.name,
                            c.id,
                            code_fence(&args)
                        );
                    }
                    _ => {}
                }
            }
            if let Some(err) = &a.error_message {
                let _ = writeln!(out, "**Error:** {err}\n");
            }
        }
        AgentMessage::ToolResult(r) => {
            let status = if r.is_error { " — error" } else { "" };
            let text = crate::format::message::blocks_text(&r.content, "\n");
            let _ = writeln!(
                out,
                "### Tool result `{}`{status}\n\n{}\n",
                r.tool_name,
                code_fence(&text)
            );
        }
        AgentMessage::BashExecution(b) => {
            let _ = writeln!(out, "### `$ {}`\n\n{}\n", b.command, code_fence(&b.output));
        }
        AgentMessage::System(_) => {
            let _ = writeln!(
                out,
                "<details><summary>System prompt update</summary>\n\n{}\n\n</details>\n",
                code_fence(&m.text())
            );
        }
        other => {
            let _ = writeln!(out, "## {}\n\n{}\n", other.role(), other.text());
        }
    }
}
