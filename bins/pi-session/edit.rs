//! Commands that write: `fork`, `branch`, `label`, `name`, `select-tool`,
//! `migrate`, and `export` (which writes a new document, never the session).
//!
//! Every check runs before anything is written, so a refused command leaves
//! the session file untouched. Session files only ever get whole lines
//! appended; new files are written atomically.

use std::collections::HashSet;
use std::path::PathBuf;

use pi_lib::cli::{resolve_format, warn, CliError, OutputFormat, EXIT_OK};
use pi_lib::format::entry::BranchSummaryEntry;
use pi_lib::format::{Entry, SessionHeader};
use pi_lib::paths::session_file_name;
use pi_lib::session::export::{to_html, to_markdown};
use pi_lib::session::ids::{new_entry_id, new_session_id};
use pi_lib::session::tool_selection::ToolSelection;
use pi_lib::session::write::write_atomic;
use pi_lib::session::Session;
use pi_lib::timefmt::now_iso;
use serde_json::{json, Map, Value};

use crate::cli::ExportFormat;
use crate::out::{io_err, Out};
use crate::{Ctx, PROG};

/// Prints what was appended: a record per entry, or a sentence.
pub(crate) fn report_appended(
    s: &Session,
    entries: &[Entry],
    text: &str,
    format: Option<OutputFormat>,
) -> Result<i32, CliError> {
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => {
            for e in entries {
                out.record(&json!({
                    "type": "entry_appended",
                    "sessionId": s.id(),
                    "path": s.path.display().to_string(),
                    "entry": e,
                }))?;
            }
        }
        OutputFormat::Text => out.line(text)?,
    }
    out.flush()?;
    Ok(EXIT_OK)
}

pub(crate) fn cannot_append(s: &Session, e: impl std::fmt::Display) -> CliError {
    CliError::input(format!("{}: cannot append: {e}", s.path.display()))
}

/// A file still in an old format version is rewritten as version 3 before
/// anything is appended to it (as pi does when it opens one), so the entry
/// ids `show` printed are the ones on disk; the old file is kept.
pub(crate) fn migrate_before_append(s: &mut Session) -> Result<(), CliError> {
    let Some(from) = s.migrated_from else {
        return Ok(());
    };
    let backup = s.migrate_on_disk().map_err(|e| cannot_append(s, e))?;
    if let Some(b) = backup {
        warn(
            PROG,
            &format!(
                "{}: migrated version {from} → 3 before writing (old file kept as {})",
                s.path.display(),
                b.display()
            ),
        );
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
    // Copy the path without its label entries (re-linked), then re-create
    // the labels of the kept entries at the end, as pi's /fork does.
    // Each kept entry is copied from its stored line, with only `parentId`
    // changed: fields pi left out stay out, unknown ones stay where they are.
    let path_ix: Vec<usize> = s
        .path_to(&at_id)
        .into_iter()
        .filter(|&i| !matches!(s.entries[i], Entry::Label(_)))
        .collect();
    let wanted: HashSet<usize> = path_ix.iter().copied().collect();
    let mut stored: std::collections::HashMap<usize, String> = Default::default();
    pi_lib::session::stored::for_each_line(s, |l| {
        if let pi_lib::session::stored::Line::Entry(i, t) = l {
            if wanted.contains(&i) {
                stored.insert(i, t);
            }
        }
        Ok::<(), std::convert::Infallible>(())
    })
    .ok();
    let mut kept: Vec<Entry> = Vec::new();
    let mut kept_lines: Vec<String> = Vec::new();
    for i in path_ix {
        let mut e = s.entries[i].clone();
        let parent = kept.last().map(|p: &Entry| p.id().to_string());
        e.set_parent_id(parent.clone());
        let line = stored
            .remove(&i)
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|mut v| {
                let o = v.as_object_mut()?;
                o.insert("parentId".into(), parent.map_or(Value::Null, Value::from));
                Some(v.to_string())
            })
            .unwrap_or_else(|| e.to_line());
        kept.push(e);
        kept_lines.push(line);
    }
    let mut taken: HashSet<String> = HashSet::new();
    let kept_ids: HashSet<String> = kept.iter().map(|e| e.id().to_string()).collect();
    let mut labels: Vec<(String, String)> = s
        .labels()
        .into_iter()
        .filter(|(t, _)| kept_ids.contains(t))
        .collect();
    labels.sort();
    for (target, text) in labels {
        let id = new_entry_id(|id| s.has_id(id) || taken.contains(id));
        taken.insert(id.clone());
        let parent = kept.last().map(|p| p.id().to_string());
        let label = Entry::Label(Box::new(pi_lib::format::entry::LabelEntry {
            id,
            parent_id: parent,
            timestamp: now_iso(),
            target_id: target,
            label: Some(text),
            extra: Map::new(),
        }));
        kept_lines.push(label.to_line());
        kept.push(label);
    }
    let id = new_session_id();
    let ts = now_iso();
    let source = s.path.canonicalize().unwrap_or_else(|_| s.path.clone());
    let header = SessionHeader::new(
        id.clone(),
        ts.clone(),
        s.header.cwd.clone(),
        Some(source.display().to_string()),
    );
    let dir = source
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let path = dir.join(session_file_name(&ts, &id));
    let mut text = header.to_line();
    text.push('\n');
    for line in &kept_lines {
        text.push_str(line);
        text.push('\n');
    }
    write_atomic(&path, text.as_bytes(), false)
        .map_err(|e| CliError::input(format!("{}: cannot write fork: {e}", path.display())))?;
    let mut out = Out::new();
    match resolve_format(format) {
        OutputFormat::Jsonl => out.record(&json!({
            "type": "forked",
            "id": id,
            "path": path.display().to_string(),
            "parentSession": source.display().to_string(),
            "at": at_id,
            "entries": kept.len(),
        }))?,
        OutputFormat::Text => out.line(&format!(
            "forked {} at {at_id} → {} ({} entries)\n{}",
            s.id(),
            id,
            kept.len(),
            path.display()
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
    // The leaf the branch moves away from is read under the file's lock,
    // after whatever other writers appended.
    let written = s
        .append_with(true, |s: &Session| {
            let old_leaf = s.leaf_id().map(str::to_string);
            let entry = match &summary {
                Some(text) => Entry::BranchSummary(Box::new(BranchSummaryEntry {
                    id: s.fresh_id(),
                    parent_id: Some(target.clone()),
                    timestamp: now_iso(),
                    from_id: old_leaf.unwrap_or_else(|| "root".into()),
                    summary: text.clone(),
                    details: None,
                    from_hook: None,
                    usage: None,
                    extra: Map::new(),
                })),
                None if old_leaf.as_deref() == Some(target.as_str()) => return Ok(Vec::new()),
                None => s.new_custom(
                    Some(&target),
                    "pi-session:branch",
                    json!({"from": old_leaf}),
                ),
            };
            Ok::<_, std::convert::Infallible>(vec![entry])
        })
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
            if p == s.path {
                return Err(CliError::input(format!(
                    "{}: refusing to overwrite the session itself",
                    p.display()
                )));
            }
            write_atomic(&p, doc.as_bytes(), true)
                .map_err(|e| CliError::input(format!("{}: {e}", p.display())))?;
            pi_lib::cli::note(PROG, &format!("wrote {}", p.display()));
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
