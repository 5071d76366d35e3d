//! `pi-resources agents`: show and change the built-in subagents' switch and
//! concurrency limit in `<agentDir>/agents/settings.json`, and list the
//! subagent profiles with where each came from. `pi_lib::subagents` reads,
//! decides and writes; this module parses flags and prints.

use std::io::Write;
use std::path::Path;

use pi_lib::cli::{CliError, OutputFormat, EXIT_OK};
use pi_lib::subagents::profiles::{self, ProfileSources};
use pi_lib::subagents::settings::{self as sa, SubagentSettingsError};
use serde_json::json;

/// Show or change the built-in subagents (`<agentDir>/agents/settings.json`)
/// and list the subagent profiles.
///
/// The built-in subagents (the `Agent`, `get_subagent_result` and
/// `steer_subagent` tools) are off unless `builtInEnabled` is the JSON
/// literal `true`; a damaged settings file keeps them off and is reported,
/// never rewritten. Profiles come from the built-ins, `<agentDir>/agents/*.md`,
/// `<cwd>/.agents/agents/*.md` and `<cwd>/.pi/agents/*.md` (the last two only
/// when the project is trusted: use `pi-resources -a agents` to see them as a
/// trusted project would); a later folder replaces a same-named profile.
#[derive(Debug, Clone, clap::Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct AgentsArgs {
    /// Turn the built-in subagents on (`builtInEnabled: true`).
    #[arg(long, conflicts_with = "disable")]
    pub enable: bool,

    /// Turn the built-in subagents off (`builtInEnabled: false`).
    #[arg(long)]
    pub disable: bool,

    /// Set how many children of one parent session run at once (1-32;
    /// more wait in a FIFO queue). Default when unset: 10.
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<String>,
}

const AFTER_HELP: &str = "\
Examples:
  pi-resources agents                     switch, limit and effective profiles
  pi-resources agents --enable            turn the built-in subagents on
  pi-resources agents --max-concurrent 4
  pi-resources -a agents --format jsonl | jq 'select(.type==\"subagent_profile\")'

Output: text on a terminal; otherwise JSONL records:
  {\"type\":\"subagent_settings\",\"path\",\"builtInEnabled\",\"maxConcurrent\",\"changed\"}
  {\"type\":\"subagent_profile\",\"name\",\"displayName\",\"description\",\"tools\",...,
   \"enabled\",\"scope\":\"builtin|global|workspace|project\",\"path\"?,\"effective\",
   \"shadowedBy\"?}  (every source, lowest precedence first)
  {\"type\":\"diagnostic\",\"path\",\"message\"}  (a skipped profile file or folder)

Writes keep every other key of the file, set \"version\": 1, and replace the
file atomically (mode 0600).

Exit status:
  0  done
  1  the settings file cannot be written
  2  a bad --max-concurrent, or a damaged settings file (bad JSON, not an
     object, not a regular file): it is never rewritten

Environment:
  PI_CODING_AGENT_DIR  the agent directory (default ~/.pi/agent)";

/// Runs the command for `cwd` (real, absolute) with the project's trust.
pub fn run(
    args: AgentsArgs,
    format: Option<OutputFormat>,
    agent_dir: &Path,
    cwd: &Path,
    trusted: bool,
) -> Result<i32, CliError> {
    let path = sa::settings_path(agent_dir);
    let damaged = |e: SubagentSettingsError| match e {
        SubagentSettingsError::MaxConcurrent => CliError::input(e.to_string()),
        SubagentSettingsError::Io { .. } if path.is_file() || !path.exists() => {
            CliError::failed(e.to_string())
        }
        _ => CliError::input(e.to_string())
            .with_hint("fix or remove the file; it is never rewritten"),
    };
    // Validate the value before touching anything.
    let max = match &args.max_concurrent {
        Some(text) => Some(
            text.trim()
                .parse::<f64>()
                .map_err(|_| SubagentSettingsError::MaxConcurrent)
                .and_then(sa::check_max_concurrent)
                .map_err(damaged)?,
        ),
        None => None,
    };
    let mut changed = Vec::new();
    if args.enable || args.disable {
        sa::write_enabled(&path, args.enable).map_err(damaged)?;
        changed.push("builtInEnabled");
    }
    if let Some(n) = max {
        sa::write_max_concurrent(&path, f64::from(n)).map_err(damaged)?;
        changed.push("maxConcurrent");
    }
    let settings = sa::read(&path).map_err(damaged)?;
    let sources = profiles::list_sources(agent_dir, cwd, trusted);
    let mut out = pi_lib::cli::Stdout::new();
    let written = match pi_lib::cli::resolve_format(format) {
        OutputFormat::Jsonl => write_jsonl(&mut out, &path, &settings, &changed, &sources),
        OutputFormat::Text => write_text(&mut out, &path, &settings, &sources),
    };
    written.map_err(pi_lib::cli::stdout_error)?;
    out.finish()?;
    Ok(EXIT_OK)
}

/// The scope of the source that replaces source `i`, if any.
fn shadowed_by(sources: &ProfileSources, i: usize) -> Option<&'static str> {
    let name = &sources.profiles.get(i)?.name;
    sources.profiles[i + 1..]
        .iter()
        .rev()
        .find(|q| q.name.eq_ignore_ascii_case(name))
        .map(|q| q.scope.as_str())
}

fn write_jsonl(
    out: &mut dyn Write,
    path: &Path,
    s: &sa::SubagentSettings,
    changed: &[&str],
    sources: &ProfileSources,
) -> std::io::Result<()> {
    let rec = json!({
        "type": "subagent_settings",
        "path": path,
        "builtInEnabled": s.built_in_enabled,
        "maxConcurrent": s.max_concurrent,
        "changed": changed,
    });
    writeln!(out, "{rec}")?;
    for (i, p) in sources.profiles.iter().enumerate() {
        let mut v = serde_json::to_value(p).map_err(std::io::Error::other)?;
        if let Some(m) = v.as_object_mut() {
            m.shift_insert(0, "type".into(), json!("subagent_profile"));
            let by = shadowed_by(sources, i);
            m.insert("effective".into(), json!(by.is_none()));
            if let Some(by) = by {
                m.insert("shadowedBy".into(), json!(by));
            }
        }
        writeln!(out, "{v}")?;
    }
    for d in &sources.diagnostics {
        let rec = json!({"type": "diagnostic", "path": d.path, "message": d.message});
        writeln!(out, "{rec}")?;
    }
    Ok(())
}

fn write_text(
    out: &mut dyn Write,
    path: &Path,
    s: &sa::SubagentSettings,
    sources: &ProfileSources,
) -> std::io::Result<()> {
    writeln!(out, "Settings: {}", path.display())?;
    let on = if s.built_in_enabled { "on" } else { "off" };
    writeln!(out, "  built-in subagents: {on}")?;
    writeln!(out, "  maxConcurrent: {}", s.max_concurrent)?;
    writeln!(out, "Profiles (effective):")?;
    for p in sources.effective() {
        let tools = if p.tools.is_empty() {
            "none".to_string()
        } else {
            p.tools.join(", ")
        };
        let state = if p.enabled { "" } else { " (disabled)" };
        let from = p
            .path
            .as_ref()
            .map_or(String::new(), |f| format!(" {}", f.display()));
        writeln!(
            out,
            "  {}{state}: {} [tools: {tools}] — {}{from}",
            p.name,
            p.description,
            p.scope.as_str()
        )?;
    }
    for (i, p) in sources.profiles.iter().enumerate() {
        if let Some(by) = shadowed_by(sources, i) {
            let from = p
                .path
                .as_ref()
                .map_or(String::new(), |f| format!(" {}", f.display()));
            writeln!(
                out,
                "  shadowed: {} — {}{from} (replaced by {by})",
                p.name,
                p.scope.as_str()
            )?;
        }
    }
    for d in &sources.diagnostics {
        writeln!(out, "  skipped: {}: {}", d.path.display(), d.message)?;
    }
    Ok(())
}
