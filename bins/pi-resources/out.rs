//! Printing: JSONL records (the trust record first, then resources in
//! precedence order, then diagnostics) or a grouped listing for people. A
//! closed stdout (`| head`) ends quietly.

use std::io::Write;
use std::path::Path;

use pi_lib::cli::{CliError, OutputFormat, EXIT_OK};
use pi_lib::format::resources::{
    McpServerRecord, ResourceRecord, Scope, Source, ToolSetRecord, TrustRecord,
};
use pi_lib::resources::Resources;

/// An output error: a closed pipe ends quietly (code 0), others exit 1
/// (see [`pi_lib::cli::stdout_error`]).
pub fn io_err(e: std::io::Error) -> CliError {
    pi_lib::cli::stdout_error(e)
}

/// Prints everything in `format`.
pub fn print(
    trust: &TrustRecord,
    tools: &ToolSetRecord,
    res: &Resources,
    mcp: &[McpServerRecord],
    format: OutputFormat,
) -> Result<i32, CliError> {
    let mut w = pi_lib::cli::Stdout::new();
    match format {
        OutputFormat::Jsonl => jsonl(&mut w, trust, tools, res, mcp),
        OutputFormat::Text => text(&mut w, trust, tools, res).and_then(|()| mcp_text(&mut w, mcp)),
    }
    .map_err(io_err)?;
    w.finish()?;
    Ok(EXIT_OK)
}

fn jsonl(
    w: &mut dyn Write,
    trust: &TrustRecord,
    tools: &ToolSetRecord,
    res: &Resources,
    mcp: &[McpServerRecord],
) -> std::io::Result<()> {
    let mut line = |r: &ResourceRecord| -> std::io::Result<()> {
        serde_json::to_writer(&mut *w, r)?;
        w.write_all(b"\n")
    };
    line(&ResourceRecord::Trust(trust.clone()))?;
    line(&ResourceRecord::ToolSet(tools.clone()))?;
    for m in mcp {
        line(&ResourceRecord::McpServer(m.clone()))?;
    }
    for r in res.records() {
        line(&r)?;
    }
    Ok(())
}

/// The MCP servers, after the grouped listing.
fn mcp_text(w: &mut dyn Write, mcp: &[McpServerRecord]) -> std::io::Result<()> {
    if mcp.is_empty() {
        return Ok(());
    }
    writeln!(w, "MCP servers:")?;
    for m in mcp {
        writeln!(
            w,
            "  {} ({}, {}, {}) {} [{}]",
            m.name,
            m.transport,
            m.exposure,
            m.status,
            m.source.display(),
            m.scope
        )?;
        if let Some(e) = &m.error {
            writeln!(w, "    error: {e}")?;
        }
        for t in m.tools.iter().flatten() {
            writeln!(w, "    {} ({})", t.name, t.exposure)?;
        }
    }
    Ok(())
}

fn source_label(source: Source, scope: Scope, package: Option<&str>) -> String {
    let s = match source {
        Source::Cli => "cli",
        Source::ProjectSettings => "project settings",
        Source::Project => "project",
        Source::UserSettings => "user settings",
        Source::User => "user",
        Source::Package => {
            let scope = if scope == Scope::Project {
                "project"
            } else {
                "user"
            };
            return format!("{scope} package {}", package.unwrap_or("?"));
        }
        Source::Builtin => "built-in",
    };
    s.to_string()
}

fn section(
    w: &mut dyn Write,
    title: &str,
    rows: &[(String, String, String)],
) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(w, "\n{title} ({})", rows.len())?;
    let width = rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(0)
        .min(32);
    for (name, path, src) in rows {
        writeln!(w, "  {name:<width$}  {path}  [{src}]")?;
    }
    Ok(())
}

fn disp(p: &Path) -> String {
    p.display().to_string()
}

fn text(
    w: &mut dyn Write,
    trust: &TrustRecord,
    tools: &ToolSetRecord,
    res: &Resources,
) -> std::io::Result<()> {
    write!(
        w,
        "Project: {} ({})",
        trust.decision,
        trust.reason.replace('_', " ")
    )?;
    if let Some(p) = &trust.saved_path {
        write!(w, ", saved for {}", p.display())?;
    }
    writeln!(w)?;
    for p in &trust.protected_paths {
        writeln!(w, "  protected: {}", p.display())?;
    }
    let list = if tools.tools.is_empty() {
        "(none)".to_string()
    } else {
        tools.tools.join(", ")
    };
    let chat = if tools.chat_only { ", Chat only" } else { "" };
    writeln!(w, "Tools: {list} ({}{chat})", tools.source)?;
    let ext: Vec<_> = res
        .extensions
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                disp(&e.path),
                source_label(e.source, e.scope, e.package.as_deref()),
            )
        })
        .collect();
    section(w, "Extensions", &ext)?;
    let skills: Vec<_> = res
        .skills
        .iter()
        .map(|s| {
            let mut src = source_label(s.source, s.scope, s.package.as_deref());
            if s.disable_model_invocation {
                src.push_str(", /skill only");
            }
            (s.name.clone(), disp(&s.path), src)
        })
        .collect();
    section(w, "Skills", &skills)?;
    let prompts: Vec<_> = res
        .prompts
        .iter()
        .map(|p| {
            (
                format!("/{}", p.name),
                disp(&p.path),
                source_label(p.source, p.scope, p.package.as_deref()),
            )
        })
        .collect();
    section(w, "Prompt templates", &prompts)?;
    let themes: Vec<_> = res
        .themes
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                disp(&t.path),
                source_label(t.source, t.scope, t.package.as_deref()),
            )
        })
        .collect();
    section(w, "Themes", &themes)?;
    let ctx: Vec<_> = res
        .context_files
        .iter()
        .map(|c| (c.scope.clone(), disp(&c.path), format!("{} bytes", c.bytes)))
        .collect();
    section(w, "Context files", &ctx)?;
    let sys: Vec<_> = res
        .system_prompt
        .iter()
        .chain(&res.append_system_prompt)
        .map(|s| {
            let name = if s.kind == "system" {
                "SYSTEM.md"
            } else {
                "APPEND_SYSTEM.md"
            };
            (name.to_string(), disp(&s.path), s.scope.clone())
        })
        .collect();
    section(w, "System prompt files", &sys)?;
    if !res.diagnostics.is_empty() {
        writeln!(w, "\nDiagnostics ({})", res.diagnostics.len())?;
        for d in &res.diagnostics {
            let at = d.path.as_deref().map(disp).unwrap_or_default();
            match &d.winner {
                Some(win) => writeln!(
                    w,
                    "  {} {}: {} {at} (kept {})",
                    d.kind,
                    d.resource_type,
                    d.message,
                    win.display()
                )?,
                None => writeln!(w, "  {} {}: {} {at}", d.kind, d.resource_type, d.message)?,
            }
        }
    }
    Ok(())
}
