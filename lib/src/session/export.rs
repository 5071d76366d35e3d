//! Exporting a session's current branch as Markdown or as one
//! self-contained HTML file (inline CSS, images as data URIs, no scripts, no
//! network).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::format::{AgentMessage, ContentBlock, Entry};

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
        None => {
            let stem = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            PathBuf::from(format!("pi-session-{stem}.html"))
        }
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

/// HTML-escapes text.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f;background:#fafafa}\
header{border-bottom:1px solid #ddd;margin-bottom:1rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{font-weight:600}\
.msg{border-radius:8px;padding:.6rem 1rem;margin:.8rem 0;background:#fff;border:1px solid #e3e3e3}.role{font-size:.8rem;text-transform:uppercase;letter-spacing:.05em;color:#666}\
.user{border-left:4px solid #2f6feb}.assistant{border-left:4px solid #2da44e}.toolResult{border-left:4px solid #8250df}.error{border-left:4px solid #cf222e}\
.system,.meta{border-left:4px solid #999;font-size:.9rem}pre{white-space:pre-wrap;word-break:break-word;background:#f4f4f4;padding:.5rem;border-radius:4px;overflow:auto}\
details summary{cursor:pointer;color:#555}.thinking{color:#555;font-style:italic}img{max-width:100%}";

/// A self-contained HTML page of the current branch.
pub fn to_html(s: &Session) -> String {
    let mut out = String::new();
    let title = escape_html(&s.name().unwrap_or_else(|| format!("Session {}", s.id())));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
<title>{title}</title><style>{CSS}</style></head><body>\n<header><h1>{title}</h1><dl><dt>id</dt><dd><code>{}</code></dd><dt>cwd</dt><dd><code>{}</code></dd><dt>created</dt><dd>{}</dd>",
        escape_html(s.id()),
        escape_html(&s.header.cwd),
        escape_html(&s.header.timestamp)
    );
    if let Some(p) = &s.header.parent_session {
        let _ = write!(
            out,
            "<dt>forked from</dt><dd><code>{}</code></dd>",
            escape_html(p)
        );
    }
    out.push_str("</dl></header>\n<main>\n");
    for i in s.branch() {
        let e = &s.entries[i];
        let id = escape_html(e.id());
        match e {
            Entry::Message(m) => html_message(&mut out, &id, &m.message),
            Entry::CustomMessage(c) => {
                let _ = writeln!(out, "<section class=\"msg meta\" id=\"{id}\"><div class=\"role\">extension message · {}</div><pre>{}</pre></section>", escape_html(&c.custom_type), escape_html(&c.content.joined_text("\n")));
            }
            Entry::Compaction(c) => {
                let _ = writeln!(out, "<section class=\"msg meta\" id=\"{id}\"><div class=\"role\">compaction summary</div><pre>{}</pre></section>", escape_html(&c.summary));
            }
            Entry::BranchSummary(b) => {
                let _ = writeln!(out, "<section class=\"msg meta\" id=\"{id}\"><div class=\"role\">branch summary</div><pre>{}</pre></section>", escape_html(&b.summary));
            }
            Entry::ModelChange(m) => {
                let _ = writeln!(
                    out,
                    "<p class=\"role\" id=\"{id}\">model: {}/{}</p>",
                    escape_html(&m.provider),
                    escape_html(&m.model_id)
                );
            }
            _ => {}
        }
    }
    out.push_str("</main>\n</body></html>\n");
    out
}

fn html_blocks(out: &mut String, blocks: &[ContentBlock]) {
    for b in blocks {
        match b {
            ContentBlock::Text(t) => {
                let _ = write!(out, "<pre>{}</pre>", escape_html(&t.text));
            }
            ContentBlock::Thinking(t) => {
                let _ = write!(out, "<details class=\"thinking\"><summary>thinking</summary><pre>{}</pre></details>", escape_html(&t.thinking));
            }
            ContentBlock::Image(img) => {
                let _ = write!(
                    out,
                    "<img alt=\"image\" src=\"data:{};base64,{}\">",
                    escape_html(&img.mime_type),
                    escape_html(&img.data)
                );
            }
            ContentBlock::ToolCall(c) => {
                let args = serde_json::to_string_pretty(&c.arguments).unwrap_or_default();
                let _ = write!(out, "<details open><summary>tool call <b>{}</b> <code>{}</code></summary><pre>{}</pre></details>", escape_html(&c.name), escape_html(&c.id), escape_html(&args));
            }
            ContentBlock::Unknown(_) => {}
        }
    }
}

fn html_message(out: &mut String, id: &str, m: &AgentMessage) {
    let (class, label) = match m {
        AgentMessage::Assistant(a) if a.stop_reason == "error" || a.stop_reason == "aborted" => (
            "error",
            format!("assistant · {} · {}", a.model, a.stop_reason),
        ),
        AgentMessage::Assistant(a) => ("assistant", format!("assistant · {}", a.model)),
        AgentMessage::ToolResult(r) if r.is_error => {
            ("error", format!("tool result · {} · error", r.tool_name))
        }
        AgentMessage::ToolResult(r) => ("toolResult", format!("tool result · {}", r.tool_name)),
        other => (other.role(), other.role().to_string()),
    };
    let _ = write!(
        out,
        "<section class=\"msg {}\" id=\"{id}\"><div class=\"role\">{}</div>",
        escape_html(class),
        escape_html(&label)
    );
    match m {
        AgentMessage::User(u) => html_blocks(out, &u.content.to_blocks()),
        AgentMessage::Custom(c) => html_blocks(out, &c.content.to_blocks()),
        AgentMessage::Assistant(a) => {
            html_blocks(out, &a.content);
            if let Some(e) = &a.error_message {
                let _ = write!(out, "<p><b>error:</b> {}</p>", escape_html(e));
            }
        }
        AgentMessage::ToolResult(r) => html_blocks(out, &r.content),
        AgentMessage::System(_) => {
            let _ = write!(
                out,
                "<details><summary>system prompt</summary><pre>{}</pre></details>",
                escape_html(&m.text())
            );
        }
        other => {
            let _ = write!(out, "<pre>{}</pre>", escape_html(&other.text()));
        }
    }
    out.push_str("</section>\n");
}
