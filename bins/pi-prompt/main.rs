//! `pi-prompt` — the sectioned system prompt and input expansion as a
//! pipeline step. Reads `pi-resources` JSONL on stdin when piped (else
//! discovers resources itself with the same library code), and prints the
//! sections (`system`), an expanded input (`expand`) or the system patch a
//! session would get now (`diff`). `pi-run` builds its prompt through the
//! very same `pi_lib::prompt::plan`.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};
use pi_lib::cli::{report, resolve_format, CliError, Generate, OutputFormat, EXIT_OK};
use pi_lib::prompt::expand::{expand_input, NoHooks};
use pi_lib::prompt::{diff, PromptState};
use pi_lib::run::{Mode, Plan, RunOptions};
use pi_lib::trust::CliTrust;
use serde_json::{json, Value};

const PROG: &str = "pi-prompt";

const AFTER_HELP: &str = concat!(
    "\
Examples:
  pi-prompt system                               the prompt for this directory
  pi-resources | pi-prompt system | pi-run --system-from - \"task\"
  pi-prompt system --chat-only --format text     context files only (Chat only)
  pi-prompt expand '/review src/main.rs \"be strict\"'
  pi-prompt diff --session 01a2                  what pi-run would append now

",
    pi_lib::exit_status_table!(),
    "
In pi-prompt:
  0    `diff`: also when nothing would change
  1    stdout could not be written (a full disk)
  2    bad resource records, unreadable prompt file, corrupt settings.json
       or trust.json, bad session
A closed stdout (| head) ends quietly with 0."
);

/// Build the sectioned system prompt and expand user input, exactly as
/// pi-run does.
#[derive(Parser, Debug)]
#[command(
    name = "pi-prompt",
    version,
    after_help = AFTER_HELP,
    args_override_self = true
)]
struct Cli {
    /// Print a man page or a shell completion script and exit.
    #[arg(long, value_enum, value_name = "WHAT")]
    generate: Option<Generate>,

    #[command(subcommand)]
    command: Option<Command>,
}

/// Where resources come from, and the prompt flags `pi-run` also has.
#[derive(Args, Debug, Clone)]
struct Common {
    /// Working directory [default: current].
    #[arg(long, value_name = "DIR", global = true)]
    cwd: Option<PathBuf>,
    /// Trust the project (load its .pi/ resources).
    #[arg(short = 'a', long, global = true, overrides_with = "no_approve")]
    approve: bool,
    /// Do not trust the project (alias `-na`).
    #[arg(long, global = true, overrides_with = "approve")]
    no_approve: bool,
    #[command(flatten)]
    tool_args: pi_lib::cli::ToolArgs,
    #[command(flatten)]
    resource_args: pi_lib::cli::ResourceArgs,
    /// Replace the default system prompt (text, or a file path).
    #[arg(long, value_name = "TEXT", global = true, allow_hyphen_values = true)]
    system_prompt: Option<String>,
    /// Append to the system prompt (text or file path; repeatable).
    #[arg(long, value_name = "TEXT", global = true, allow_hyphen_values = true)]
    append_system_prompt: Vec<String>,
    /// Ignore stdin even when piped; discover resources here.
    #[arg(long, global = true)]
    no_stdin: bool,
    /// Output format [default: text on a terminal, jsonl otherwise].
    #[arg(long, value_enum, global = true)]
    format: Option<OutputFormat>,
    /// Start no MCP server (as pi-run --no-mcp): the prompt has no MCP
    /// tools and no mcp_servers section.
    #[arg(long, global = true)]
    no_mcp: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the system prompt: the `trust` record it was planned under
    /// (as `pi-resources` prints it), one `section` record per section and
    /// one `tool` record per tool (JSONL), or the rendered prompt (text).
    /// `pi-run --system-from` refuses a trusted project's prompt unless it
    /// trusts the project too (`-a`).
    System {
        #[command(flatten)]
        common: Common,
    },
    /// Expand user input: `/skill:name args`, `/template args`, else as is.
    Expand {
        /// The input text.
        input: String,
        #[command(flatten)]
        common: Common,
    },
    /// Print the system patch a session would get if a run started now
    /// (nothing when the recorded prompt is current).
    Diff {
        /// Session file or id prefix.
        #[arg(long, value_name = "PATH|ID")]
        session: String,
        #[command(flatten)]
        common: Common,
    },
}

fn main() {
    let mut command = Cli::command();
    let args = pi_lib::cli::rewrite_pi_aliases(std::env::args_os(), &command);
    let cli: Cli = pi_lib::cli::parse_with_or_exit(PROG, &mut command, args);
    let code = match run(cli) {
        Ok(c) => c,
        Err(e) if e.code == 0 => 0,
        Err(e) => report(PROG, &e),
    };
    std::process::exit(code);
}

/// A write error on stdout (see [`pi_lib::cli::stdout_error`]).
fn out_err(e: std::io::Error) -> CliError {
    pi_lib::cli::stdout_error(e)
}

/// What a run with these flags would send first, from the library's one
/// assembly (`pi-run` builds its run through the same): resources from
/// piped `pi-resources` JSONL (with its trust decision and `tool_set`,
/// unless tool options are given here), else discovered here.
fn plan(c: &Common, cwd: PathBuf, session: Option<String>) -> Result<Plan, CliError> {
    let mut opts = RunOptions::new(PROG, Mode::Plan, cwd);
    opts.session.flags.session = session;
    opts.trust = CliTrust::from_flags(c.approve, c.no_approve);
    opts.tool_flags = c.tool_args.flags();
    opts.resource_args = c.resource_args.clone();
    opts.system_prompt = c.system_prompt.clone();
    opts.append_system_prompt = c.append_system_prompt.clone();
    opts.no_mcp = c.no_mcp;
    if !c.no_stdin {
        opts.resource_records = pi_lib::run::input::piped_records(PROG)?;
    }
    pi_lib::run::plan(opts)
}

fn cwd_of(c: &Common) -> Result<PathBuf, CliError> {
    match &c.cwd {
        Some(d) => d
            .canonicalize()
            .map_err(|e| CliError::input(format!("{}: {e}", d.display()))),
        None => {
            std::env::current_dir().map_err(|e| CliError::input(format!("current directory: {e}")))
        }
    }
}

fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(what) = cli.generate {
        let mut out = pi_lib::cli::Stdout::new();
        pi_lib::cli::generate(Cli::command(), what, &mut out).map_err(out_err)?;
        out.finish()?;
        return Ok(EXIT_OK);
    }
    let Some(command) = cli.command else {
        let _ = Cli::command().print_help();
        return Ok(pi_lib::cli::EXIT_USAGE);
    };
    let mut out = pi_lib::cli::Stdout::new();
    match command {
        Command::System { common } => {
            let cwd = cwd_of(&common)?;
            let Plan {
                sections: secs,
                tools,
                trust,
                ..
            } = plan(&common, cwd, None)?;
            match resolve_format(common.format) {
                OutputFormat::Jsonl => {
                    // The trust decision first: `pi-run --system-from`
                    // refuses a trusted project's prompt it does not trust.
                    if let Some(t) = trust {
                        let r = pi_lib::format::resources::ResourceRecord::Trust(t);
                        let v = serde_json::to_value(r).unwrap_or(Value::Null);
                        writeln!(out, "{v}").map_err(out_err)?;
                    }
                    for (name, text) in &secs {
                        writeln!(
                            out,
                            "{}",
                            json!({"type": "section", "name": name, "text": text})
                        )
                        .map_err(out_err)?;
                    }
                    for t in &tools {
                        let mut v = serde_json::to_value(t.definition()).unwrap_or(Value::Null);
                        if let Value::Object(m) = &mut v {
                            m.shift_insert(0, "type".into(), "tool".into());
                        }
                        writeln!(out, "{v}").map_err(out_err)?;
                    }
                }
                OutputFormat::Text => {
                    let text: Vec<&str> = secs
                        .iter()
                        .map(|(_, t)| t.as_str())
                        .filter(|t| !t.is_empty())
                        .collect();
                    writeln!(out, "{}", text.join("\n\n")).map_err(out_err)?;
                }
            }
        }
        Command::Expand { input, common } => {
            let cwd = cwd_of(&common)?;
            // An expansion needs no tools: no MCP server is started.
            let quiet = Common {
                no_mcp: true,
                ..common.clone()
            };
            let res = plan(&quiet, cwd, None)?.resources;
            let e = expand_input(&input, &res.skills, &res.prompts, &mut NoHooks);
            if let Some(w) = &e.warning {
                pi_lib::cli::warn(PROG, w);
            }
            match resolve_format(common.format) {
                OutputFormat::Jsonl => {
                    let mut v = json!({"type": "expansion", "text": e.text});
                    if let (Value::Object(m), Ok(Value::Object(k))) =
                        (&mut v, serde_json::to_value(&e.kind))
                    {
                        for (key, val) in k {
                            m.insert(key, val);
                        }
                    }
                    writeln!(out, "{v}").map_err(out_err)?;
                }
                OutputFormat::Text => {
                    writeln!(out, "{}", e.text.unwrap_or_default()).map_err(out_err)?
                }
            }
        }
        Command::Diff { session, common } => {
            let cwd = cwd_of(&common)?;
            let Plan {
                sections: secs,
                tools,
                session: s,
                ..
            } = plan(&common, cwd, Some(session))?;
            let ctx = s.context(None);
            let state = PromptState::replay(ctx.messages.iter().map(|(_, m)| &**m));
            let values: Vec<Value> = tools
                .iter()
                .filter_map(|t| serde_json::to_value(t.definition()).ok())
                .collect();
            let patch = diff(&state, &secs, &values, pi_lib::timefmt::now_ms());
            match (resolve_format(common.format), patch) {
                (OutputFormat::Jsonl, Some(p)) => {
                    writeln!(out, "{}", json!({"type": "system_patch", "sessionId": s.id(), "message": pi_lib::format::AgentMessage::System(Box::new(p))})).map_err(out_err)?;
                }
                (OutputFormat::Text, Some(p)) => {
                    for (k, v) in p.sections.iter().flatten() {
                        match v.as_str() {
                            Some(t) => writeln!(out, "section {k} (new or changed):\n{t}\n")
                                .map_err(out_err)?,
                            None => writeln!(out, "section {k}: removed\n").map_err(out_err)?,
                        }
                    }
                    for t in p.tools_added.iter().flatten() {
                        writeln!(out, "tool added: {}", t["name"].as_str().unwrap_or("?"))
                            .map_err(out_err)?;
                    }
                    for t in p.tools_removed.iter().flatten() {
                        writeln!(out, "tool removed: {}", t["name"].as_str().unwrap_or("?"))
                            .map_err(out_err)?;
                    }
                }
                (OutputFormat::Jsonl, None) => {}
                (OutputFormat::Text, None) => {
                    writeln!(out, "no change: the session records the current prompt")
                        .map_err(out_err)?
                }
            }
        }
    }
    out.flush().map_err(out_err)?;
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
