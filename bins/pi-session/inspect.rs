//! Read-only commands on one session: `show`, `tree`, `context`, `stats`
//! (what they show comes from `pi_lib::session`; this prints it).

use pi_lib::cli::{resolve_format, CliError, OutputFormat, EXIT_OK};
use pi_lib::format::records::{ContextMessageRecord, ContextRecord, TreeNodeRecord};
use pi_lib::format::{AgentMessage, ContentBlock};
use pi_lib::session::describe::describe;
use pi_lib::session::Session;
use serde_json::json;

use crate::out::{clip, term_width, Out};

use pi_lib::session::stored::Line;

pub fn show(s: &Session, format: Option<OutputFormat>) -> Result<i32, CliError> {
    let mut out = Out::new();
    match resolve_format(format) {
        // Exactly as stored: the file's own lines, not a re-serialization.
        OutputFormat::Jsonl => pi_lib::session::stored::for_each_line(s, |l| match l {
            Line::Header(t) | Line::Entry(_, t) => out.line(&t),
        })?,
        OutputFormat::Text => {
            out.line(&format!(
                "session {}  v{}  cwd {}  created {}",
                s.id(),
                s.header.version(),
                s.header.cwd,
                s.header.timestamp
            ))?;
            if let Some(p) = &s.header.parent_session {
                out.line(&format!("forked from {p}"))?;
            }
            let w = term_width().saturating_sub(34);
            for (e, line) in s.entries.iter().zip(&s.lines) {
                out.line(&format!(
                    "{:>5} {:<8} {:<8} {}",
                    line,
                    clip(e.id(), 8),
                    clip(e.parent_id().unwrap_or("-"), 8),
                    clip(&describe(e), w)
                ))?;
            }
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

pub fn tree(s: &Session, format: Option<OutputFormat>) -> Result<i32, CliError> {
    let labels = s.labels();
    let rows = s.tree_rows();
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => {
            for r in &rows {
                let e = &s.entries[r.index];
                out.record(&TreeNodeRecord {
                    kind: "tree_node",
                    id: e.id().to_string(),
                    parent_id: e.parent_id().map(str::to_string),
                    entry_type: e.kind().to_string(),
                    role: e.message().map(|m| m.role().to_string()),
                    depth: r.depth,
                    children: r.children,
                    on_branch: r.on_branch,
                    leaf: r.is_leaf,
                    label: labels.get(e.id()).cloned(),
                    subagent: pi_lib::subagents::runs::child_named_by(e),
                    summary: clip(&describe(e), 200),
                    timestamp: e.timestamp().to_string(),
                })?;
            }
        }
        OutputFormat::Text => {
            let width = term_width();
            for r in &rows {
                let e = &s.entries[r.index];
                let mut marks = String::new();
                if r.is_leaf {
                    marks.push_str(" ◀ leaf");
                }
                if r.children > 1 {
                    marks.push_str(&format!(" ⑂ {} branches", r.children));
                }
                if let Some(l) = labels.get(e.id()) {
                    marks.push_str(&format!(" [{l}]"));
                }
                if let Some(c) = pi_lib::subagents::runs::child_named_by(e) {
                    marks.push_str(&format!(" ⇢ subagent {c}"));
                }
                let bullet = if r.on_branch { "●" } else { "○" };
                let head = format!("{}{bullet} {} ", r.prefix, e.id());
                let room = width
                    .saturating_sub(head.chars().count() + marks.chars().count())
                    .max(10);
                out.line(&format!("{head}{}{marks}", clip(&describe(e), room)))?;
            }
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// The entry `--leaf` names (an id or unique prefix), else the leaf.
fn leaf_of(s: &Session, leaf: Option<&str>) -> Result<Option<String>, CliError> {
    Ok(match leaf {
        Some(l) => Some(s.find_entry(l).map_err(CliError::input)?.id().to_string()),
        None => s.leaf_id().map(str::to_string),
    })
}

pub fn context(
    s: &Session,
    leaf: Option<&str>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let leaf_id = leaf_of(s, leaf)?;
    let ctx = s.context(leaf_id.as_deref());
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => {
            out.record(&ContextRecord {
                kind: "context",
                session_id: s.id().to_string(),
                leaf_id: leaf_id.clone(),
                thinking_level: ctx.thinking_level.clone(),
                model: match &ctx.model {
                    Some((p, m)) => json!({"provider": p, "modelId": m}),
                    None => serde_json::Value::Null,
                },
                messages: ctx.messages.len(),
            })?;
            for (id, m) in &ctx.messages {
                out.record(&ContextMessageRecord {
                    kind: "context_message",
                    entry_id: id,
                    message: m,
                })?;
            }
        }
        OutputFormat::Text => {
            let model = ctx
                .model
                .as_ref()
                .map(|(p, m)| format!("{p}/{m}"))
                .unwrap_or_else(|| "(none)".into());
            out.line(&format!(
                "context of {} at {}: {} messages, model {model}, thinking {}",
                s.id(),
                leaf_id.as_deref().unwrap_or("(empty)"),
                ctx.messages.len(),
                ctx.thinking_level
            ))?;
            for (id, m) in &ctx.messages {
                out.line(&format!("\n── {} [{id}]", m.role()))?;
                let mut text = m.text();
                if let AgentMessage::Assistant(a) = &**m {
                    for b in &a.content {
                        if let ContentBlock::ToolCall(c) = b {
                            text.push_str(&format!("\n→ {}({})", c.name, c.arguments));
                        }
                    }
                }
                out.line(&text)?;
            }
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

pub fn stats(s: &Session, format: Option<OutputFormat>) -> Result<i32, CliError> {
    let st = s.stats();
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => {
            for rec in st.records(s) {
                out.record(&rec)?;
            }
        }
        OutputFormat::Text => {
            out.line(&format!("session {}  {}", s.id(), s.path.display()))?;
            let roles: Vec<String> = st
                .messages
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            out.line(&format!(
                "entries {}  messages: {}  tool calls {}",
                st.entries,
                roles.join(", "),
                st.tool_calls
            ))?;
            out.line("")?;
            out.line(&format!(
                "{:<40} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10}",
                "MODEL", "RESP", "INPUT", "OUTPUT", "CACHE R", "CACHE W", "COST"
            ))?;
            let mut rows: Vec<(&str, &pi_lib::session::stats::Totals)> =
                st.per_model.iter().map(|(k, v)| (k.as_str(), v)).collect();
            rows.push(("total", &st.total));
            for (m, t) in rows {
                out.line(&format!(
                    "{:<40} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10}",
                    clip(m, 40),
                    t.responses,
                    t.input,
                    t.output,
                    t.cache_read,
                    t.cache_write,
                    format!("${:.4}", t.cost)
                ))?;
            }
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

/// `context --prompt`: the system prompt and tools replayed from the
/// recorded system messages at a leaf — what the model was given there.
pub fn prompt(
    s: &Session,
    leaf: Option<&str>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let leaf_id = leaf_of(s, leaf)?;
    let ctx = s.context(leaf_id.as_deref());
    let state = pi_lib::prompt::PromptState::replay(ctx.messages.iter().map(|(_, m)| &**m));
    let text = state.render();
    let tools: Vec<String> = state.tools.keys().map(str::to_string).collect();
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => out.record(&json!({
            "type": "prompt",
            "sessionId": s.id(),
            "leafId": leaf_id,
            "text": text,
            "sections": state.sections.to_map(),
            "tools": state.tools.values().collect::<Vec<_>>(),
        }))?,
        OutputFormat::Text => {
            if text.is_empty() {
                out.line("(no system prompt recorded on this branch)")?;
            } else {
                out.line(&text)?;
            }
            out.line(&format!(
                "\n── tools: {}",
                if tools.is_empty() {
                    "(none)".to_string()
                } else {
                    tools.join(", ")
                }
            ))?;
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}
