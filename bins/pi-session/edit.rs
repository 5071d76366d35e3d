//! Commands that write: `fork`, `branch`, `label`, `name`, `select-tool`,
//! `migrate`, and `export` (which writes a new document, never the session).
//!
//! Every check runs before anything is written, so a refused command leaves
//! the session file untouched. Session files only ever get whole lines
//! appended; new files are written atomically.

use std::path::PathBuf;

use pi_lib::cli::{resolve_format, warn, CliError, OutputFormat, EXIT_OK};
use pi_lib::format::Entry;
use pi_lib::session::export::{terminal_target, to_html, to_markdown, write_export};
use pi_lib::session::fork::fork_file;
use pi_lib::session::tool_selection::ToolSelection;
use pi_lib::session::Session;
use serde_json::{json, Value};

use crate::cli::ExportFormat;
use crate::out::{io_err, Out};
use crate::{Ctx, PROG};

/// The `entry_appended` records of entries written to `s`.
pub(crate) fn record_appended(
    out: &mut Out,
    s: &Session,
    entries: &[Entry],
) -> Result<(), CliError> {
    for e in entries {
        out.record(&json!({
            "type": "entry_appended",
            "sessionId": s.id(),
            "path": s.path.display().to_string(),
            "entry": e,
        }))?;
    }
    Ok(())
}

/// Prints what was appended: a record per entry, or a sentence.
pub(crate) fn report_appended(
    s: &Session,
    entries: &[Entry],
    text: &str,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => record_appended(&mut out, s, entries)?,
        OutputFormat::Text => out.line(text)?,
    }
    out.flush()?;
    Ok(EXIT_OK)
}

pub(crate) fn cannot_append(s: &Session, e: impl std::fmt::Display) -> CliError {
    CliError::input(format!("{}: cannot append: {e}", s.path.display()))
}

/// A file still in an old format version is rewritten as version 3 before
/// anything is appended to it (the library decides; this says so).
fn migrate_before_append(s: &mut Session) -> Result<(), CliError> {
    if let Some(m) = s.migrate_for_append().map_err(|e| cannot_append(s, e))? {
        warn(PROG, &m.to_string());
    }
    Ok(())
}

/// Appends entries as children of the file's current leaf (decided under
/// the file's lock), durably.
fn append(s: &mut Session, entries: Vec<Entry>) -> Result<Vec<Entry>, CliError> {
    migrate_before_append(s)?;
    s.append_children(entries, true)
        .map_err(|e| cannot_append(s, e))
}

pub fn fork(s: &Session, at: Option<&str>, format: Option<OutputFormat>) -> Result<i32, CliError> {
    let at_id = match at {
        Some(a) => s.find_entry(a).map_err(CliError::input)?.id().to_string(),
        None => s
            .leaf_id()
            .ok_or_else(|| {
                CliError::input(format!(
                    "{}: the session has no entries to fork",
                    s.path.display()
                ))
            })?
            .to_string(),
    };
    let forked = fork_file(s, &at_id).map_err(|e| CliError::input(e.to_string()))?;
    let id = forked.session.id();
    let path = forked
        .path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let parent = forked
        .session
        .header
        .parent_session
        .as_deref()
        .unwrap_or("");
    let entries = forked.session.entries.len();
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => out.record(&json!({
            "type": "forked",
            "id": id,
            "path": path,
            "parentSession": parent,
            "at": at_id,
            "entries": entries,
        }))?,
        OutputFormat::Text => out.line(&format!(
            "forked {} at {at_id} → {id} ({entries} entries)\n{path}",
            s.id(),
        ))?,
    }
    out.flush()?;
    Ok(EXIT_OK)
}

pub fn branch(
    mut s: Session,
    to: &str,
    summary: Option<String>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let target = s.find_entry(to).map_err(CliError::input)?.id().to_string();
    if summary.as_ref().is_some_and(|t| t.trim().is_empty()) {
        return Err(CliError::input("--summary text is empty"));
    }
    migrate_before_append(&mut s)?;
    let written = s
        .branch_to(&target, summary.as_deref())
        .map_err(|e| cannot_append(&s, e))?;
    if written.is_empty() {
        return report_appended(
            &s,
            &[],
            &format!("the leaf is already {target}; nothing written"),
            format,
        );
    }
    report_appended(&s, &written, &format!("leaf moved to {target}"), format)
}

pub fn label(
    mut s: Session,
    entry: &str,
    label: Option<String>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let target = s
        .find_entry(entry)
        .map_err(CliError::input)?
        .id()
        .to_string();
    let label = label.map(|l| l.trim().to_string());
    if label.as_deref() == Some("") {
        return Err(
            CliError::input("label text is empty").with_hint("use --clear to remove a label")
        );
    }
    let e = s.new_label(&target, label.clone());
    let written = append(&mut s, vec![e])?;
    let text = match &label {
        Some(l) => format!("labelled {target}: {l}"),
        None => format!("cleared the label of {target}"),
    };
    report_appended(&s, &written, &text, format)
}

pub fn name(mut s: Session, name: &str, format: Option<OutputFormat>) -> Result<i32, CliError> {
    if name.trim().is_empty() {
        return Err(CliError::input("session name cannot be empty"));
    }
    let e = s.new_session_info(name);
    let written = append(&mut s, vec![e])?;
    report_appended(
        &s,
        &written,
        &format!("named {}: {}", s.id(), name.trim()),
        format,
    )
}

pub fn export(
    s: &Session,
    format: Option<ExportFormat>,
    output: Option<PathBuf>,
) -> Result<i32, CliError> {
    let format = format.unwrap_or_else(|| match &output {
        Some(p) if p.extension().is_some_and(|e| e == "md" || e == "markdown") => ExportFormat::Md,
        _ => ExportFormat::Html,
    });
    let doc = match format {
        ExportFormat::Html => to_html(s),
        ExportFormat::Md => to_markdown(s),
    };
    match output {
        Some(p) => {
            write_export(s, &p, &doc).map_err(CliError::input)?;
            pi_lib::cli::note(PROG, &format!("wrote {}", p.display()));
        }
        // A page is for a browser: on a terminal it goes to a file (Markdown
        // is shown, cleaned of control characters).
        None if format == ExportFormat::Html
            && std::io::IsTerminal::is_terminal(&std::io::stdout()) =>
        {
            let cwd = std::env::current_dir()
                .map_err(|e| CliError::input(format!("current directory: {e}")))?;
            let p = terminal_target(s, "html", &cwd);
            write_export(s, &p, &doc).map_err(CliError::input)?;
            let mut out = Out::new();
            out.line(&p.display().to_string())?;
            out.flush()?;
        }
        None => {
            let mut out = Out::new();
            out.raw(&doc)?;
            out.flush()?;
        }
    }
    Ok(EXIT_OK)
}

fn selection_record(s: &Session) -> Value {
    let r = s.tool_selection();
    let (state, tools) = match &r.selection {
        ToolSelection::Legacy => ("legacy", Value::Null),
        ToolSelection::ChatOnly => ("chat_only", json!([])),
        ToolSelection::Tools(t) => ("tools", json!(t)),
    };
    json!({
        "type": "tool_selection",
        "sessionId": s.id(),
        "path": s.path.display().to_string(),
        "state": state,
        "tools": tools,
        "entryId": r.entry_id,
    })
}

pub fn select_tool(
    mut s: Session,
    change: Option<Option<Vec<String>>>,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    for (id, why) in s.tool_selection().skipped {
        warn(
            PROG,
            &format!(
                "{}: tool selection entry {id} is invalid ({why}); skipped",
                s.path.display()
            ),
        );
    }
    if let Some(change) = change {
        let entry = s
            .new_tool_selection(change.as_deref())
            .map_err(|e| CliError::input(format!("{}: {e}", s.path.display())))?;
        append(&mut s, vec![entry])?;
    }
    let rec = selection_record(&s);
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => out.record(&rec)?,
        OutputFormat::Text => {
            let line = match s.tool_selection().selection {
                ToolSelection::Legacy => "legacy: no tool selection stored (pi's default tools: read, bash, edit, write)".to_string(),
                ToolSelection::ChatOnly => "chat only: an empty tool selection (no tools, no resources, context files as the whole system prompt)".to_string(),
                ToolSelection::Tools(t) => format!("tools: {}", t.join(", ")),
            };
            out.line(&line)?;
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}

pub fn migrate(ctx: &Ctx, reference: &str, format: Option<OutputFormat>) -> Result<i32, CliError> {
    let mut s = ctx.load(reference)?;
    let mut out = Out::new();
    let fmt = resolve_format(format);
    let Some(from) = s.migrated_from else {
        match fmt {
            OutputFormat::Jsonl => out.record(&json!({"type": "migrated", "path": s.path.display().to_string(), "from": 3, "to": 3, "changed": false}))?,
            OutputFormat::Text => out.line(&format!("{}: already version 3; nothing to do", s.path.display()))?,
        }
        out.flush()?;
        return Ok(EXIT_OK);
    };
    let damaged = s.diagnostics.len();
    let backup = s
        .migrate_on_disk()
        .map_err(|e| CliError::input(format!("{}: {e}", s.path.display())))?
        .unwrap_or_else(|| s.migration_backup(from));
    if damaged > 0 {
        warn(
            PROG,
            &format!(
                "{damaged} damaged line(s) are not carried over; they stay in {}",
                backup.display()
            ),
        );
    }
    match fmt {
        OutputFormat::Jsonl => out.record(&json!({"type": "migrated", "path": s.path.display().to_string(), "from": from, "to": 3, "changed": true, "backup": backup.display().to_string()}))?,
        OutputFormat::Text => out.line(&format!("{}: migrated version {from} → 3 (old file kept as {})", s.path.display(), backup.display()))?,
    }
    out.flush().map_err(|e| {
        if e.code == 0 {
            e
        } else {
            io_err(std::io::Error::other(e.message))
        }
    })?;
    Ok(EXIT_OK)
}
