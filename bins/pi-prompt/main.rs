//! `pi-prompt` — the sectioned system prompt and input expansion as a
//! pipeline step. Reads `pi-resources` JSONL on stdin when piped (else
//! discovers resources itself with the same library code), and prints the
//! sections (`system`), an expanded input (`expand`) or the system patch a
//! session would get now (`diff`). `pi-run` builds its prompt through the
//! very same `pi_lib::prompt::plan`.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, CommandFactory, Parser, Subcommand};
use pi_lib::cli::{report, resolve_format, CliError, Generate, OutputFormat, EXIT_OK};
use pi_lib::format::resources::ResourceRecord;
use pi_lib::prompt::expand::{expand_input, NoHooks};
use pi_lib::prompt::plan::{plan_sections, PlanOptions};
use pi_lib::prompt::{diff, toolkit_docs, PromptState};
use pi_lib::resources::{DiscoverOptions, Resources};
use pi_lib::session::Session;
use pi_lib::settings::Settings;
use pi_lib::tools::select::{self, Pinned, ToolSet, ToolSource};
use pi_lib::tools::Tool;
use pi_lib::trust::CliTrust;
use serde_json::{json, Value};

const PROG: &str = "pi-prompt";

const AFTER_HELP: &str = "\
Examples:
  pi-prompt system                               the prompt for this directory
  pi-resources | pi-prompt system | pi-run --system-from - \"task\"
  pi-prompt system --chat-only --format text     context files only (seed 000)
  pi-prompt expand '/review src/main.rs \"be strict\"'
  pi-prompt diff --session 01a2                  what pi-run would append now

Exit status:
  0    success (`diff`: also when nothing would change)
  1    stdout could not be written (a full disk)
  2    usage, configuration or input error (bad resource records, unreadable
       prompt file, corrupt settings.json or trust.json, bad session)
A closed stdout (| head) ends quietly with 0.";

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
    /// Render a man page or a completion script on stdout.
    #[arg(long, value_enum, hide = true, value_name = "WHAT")]
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
    /// Print the system prompt: one `section` record per section and one
    /// `tool` record per tool (JSONL), or the rendered prompt (text).
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
    let cli: Cli = pi_lib::cli::parse_or_exit(
        PROG,
        pi_lib::cli::rewrite_pi_aliases(std::env::args_os(), &Cli::command()),
    );
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

/// The resources and the tool set a prompt is built from.
struct Loaded {
    res: Resources,
    tools: ToolSet,
    mcp: McpPart,
}

/// What MCP adds, as pi-run's first request has it (its tools followed by
/// the subagent tools, the later tools of the set).
#[derive(Default)]
struct McpPart {
    tools: Vec<Arc<dyn Tool>>,
    section: Option<String>,
}

impl Loaded {
    /// The declared tools: built-ins, then the MCP tools of the set.
    fn declared(&self) -> Vec<Arc<dyn Tool>> {
        pi_lib::mcp::declared_tools(&self.tools.names, &self.mcp.tools)
    }
}

/// Starts the configured MCP servers (through the library path pi-run
/// takes: the same wait, cache, tools and section), then stops them.
fn mcp_part(
    c: &Common,
    cwd: &std::path::Path,
    agent_dir: &std::path::Path,
    trusted: bool,
) -> McpPart {
    if c.no_mcp {
        return McpPart::default();
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            pi_lib::cli::warn(PROG, &format!("MCP servers not started: {e}"));
            return McpPart::default();
        }
    };
    let mcp = {
        let _rt = rt.enter();
        pi_lib::mcp::Mcp::start_cached(
            pi_lib::mcp::config::load(agent_dir, cwd, trusted),
            cwd,
            Some(pi_lib::mcp::cache::Cache::user()),
        )
    };
    let first = rt.block_on(mcp.first_request());
    if let Some(n) = first.notice {
        pi_lib::cli::note(PROG, n);
    }
    for d in &first.diagnostics {
        pi_lib::cli::warn(PROG, d);
    }
    let section = mcp.servers_section();
    rt.block_on(mcp.shutdown());
    McpPart {
        tools: first.tools,
        section,
    }
}

/// Resources from piped `pi-resources` JSONL (with its `tool_set`, unless
/// tool options are given here), else discovered here; the tool set by the
/// library's one resolver, as pi-run and pi-resources decide it.
fn load(c: &Common, cwd: &std::path::Path, pinned: Option<&Pinned>) -> Result<Loaded, CliError> {
    let flags = c.tool_args.flags();
    let agent_dir = pi_lib::paths::agent_dir();
    // As pi-run: a set without tools starts no MCP server; otherwise the
    // servers' tools join what the resolver may pick.
    let resolve = |trusted: bool| -> Result<(ToolSet, McpPart), CliError> {
        let settings =
            Settings::load(&agent_dir, cwd, trusted).map_err(|e| CliError::input(e.to_string()))?;
        let pick = |available: &[select::AvailableTool]| {
            select::resolve(&flags, &settings.default_tools(), pinned, available)
                .map_err(|e| CliError::input(e.to_string()))
        };
        let first = pick(&select::builtin_available())?;
        let mcp = if first.chat_only {
            McpPart::default()
        } else {
            mcp_part(c, cwd, &agent_dir, trusted)
        };
        let mut available = select::builtin_available();
        available.extend(pi_lib::mcp::Mcp::available(&mcp.tools));
        // The subagent tools join after MCP's, as in pi-run.
        let mut mcp = mcp;
        if !first.chat_only {
            let control = pi_lib::subagents::runtime::described_tools(&agent_dir, cwd, trusted);
            available.extend(
                control
                    .iter()
                    .map(|t| select::AvailableTool::extension(&t.definition().name, true)),
            );
            mcp.tools.extend(control);
        }
        let set = pick(&available)?;
        for w in &set.warnings {
            pi_lib::cli::warn(PROG, w);
        }
        Ok((set, mcp))
    };
    let stdin = std::io::stdin();
    if !c.no_stdin && !stdin.is_terminal() {
        let mut text = String::new();
        stdin
            .lock()
            .read_to_string(&mut text)
            .map_err(|e| CliError::input(format!("stdin: {e}")))?;
        if !text.trim().is_empty() {
            let mut records = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let r: ResourceRecord = serde_json::from_str(line).map_err(|e| {
                    CliError::input(format!("stdin:{}: not a pi-resources record: {e}", i + 1))
                })?;
                records.push(r);
            }
            let piped_tools = records.iter().find_map(|r| match r {
                ResourceRecord::ToolSet(t) => Some(t.clone()),
                _ => None,
            });
            let (res, trust) = Resources::from_records(records);
            let trusted = trust.map(|t| t.trusted).unwrap_or(false);
            let (tools, mcp) = match piped_tools {
                Some(t) if !flags.any() && pinned.is_none() => {
                    // Without tool options every MCP tool is active, as
                    // the resolver has it.
                    let mcp = if t.chat_only {
                        McpPart::default()
                    } else {
                        mcp_part(c, cwd, &agent_dir, trusted)
                    };
                    // The listing names the subagent tools it keeps, in
                    // its order; MCP's come after its last built-in.
                    let mut names = t.tools;
                    let at = names
                        .iter()
                        .rposition(|n| pi_lib::tools::BUILTIN_TOOLS.contains(&n.as_str()))
                        .map_or(0, |i| i + 1);
                    let mcp_names: Vec<String> =
                        mcp.tools.iter().map(|t| t.definition().name).collect();
                    names.splice(at..at, mcp_names);
                    let mut mcp = mcp;
                    if !t.chat_only {
                        mcp.tools
                            .extend(pi_lib::subagents::runtime::described_tools(
                                &agent_dir, cwd, trusted,
                            ));
                    }
                    let set = ToolSet {
                        names,
                        chat_only: t.chat_only,
                        source: ToolSource::Default,
                        persist: None,
                        warnings: Vec::new(),
                    };
                    (set, mcp)
                }
                _ => resolve(trusted)?,
            };
            return Ok(Loaded { res, tools, mcp });
        }
    }
    let cli_trust = if c.approve {
        CliTrust::Approve
    } else if c.no_approve {
        CliTrust::NoApprove
    } else {
        CliTrust::Unset
    };
    let trusted = pi_lib::trust::decide(cwd, &agent_dir, cli_trust, None, false)
        .map_err(|e| CliError::input(e.to_string()))?
        .trusted;
    let (tools, mcp) = resolve(trusted)?;
    let mut opts = DiscoverOptions::for_cwd(cwd);
    opts.agent_dir = agent_dir.clone();
    c.resource_args.apply(&mut opts);
    let res = if tools.chat_only {
        pi_lib::resources::discover_chat_only(&opts)
    } else {
        pi_lib::resources::discover(&opts, trusted)
    }
    .map_err(|e| CliError::input(e.to_string()))?;
    Ok(Loaded { res, tools, mcp })
}

fn sections(
    c: &Common,
    cwd: &std::path::Path,
    res: &Resources,
    tools: &[Arc<dyn Tool>],
    chat_only: bool,
    mcp_section: Option<&String>,
) -> Result<Vec<(String, String)>, CliError> {
    let plan = PlanOptions {
        cwd: cwd.display().to_string(),
        tools: pi_lib::agent::prompt_tools(tools),
        system_prompt: c.system_prompt.clone(),
        append: c.append_system_prompt.clone(),
        docs: Some(toolkit_docs()),
        chat_only,
    };
    let mut secs = plan_sections(&plan, res).map_err(CliError::input)?;
    pi_lib::mcp::push_section(&mut secs, mcp_section);
    Ok(secs)
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
            let loaded = load(&common, &cwd, None)?;
            let tools = loaded.declared();
            let secs = sections(
                &common,
                &cwd,
                &loaded.res,
                &tools,
                loaded.tools.chat_only,
                loaded.mcp.section.as_ref(),
            )?;
            match resolve_format(common.format) {
                OutputFormat::Jsonl => {
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
            let Loaded { res, .. } = load(&quiet, &cwd, None)?;
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
            let roots = vec![pi_lib::paths::sessions_root()];
            let path = pi_lib::session::resolve::resolve(&session, &roots, &mut |skip| {
                pi_lib::cli::warn(PROG, &skip.to_string())
            })
            .map_err(|e| CliError::input(e.to_string()))?;
            let s = Session::load(&path).map_err(|e| CliError::input(e.to_string()))?;
            s.diagnostics.warn(PROG);
            let cwd = {
                let c = PathBuf::from(&s.header.cwd);
                if common.cwd.is_none() && c.is_dir() {
                    c
                } else {
                    cwd_of(&common)?
                }
            };
            let sel = s.run_selection();
            let mut c2 = common.clone();
            c2.resource_args.no_context_files |= !sel.context_files;
            let loaded = load(&c2, &cwd, sel.pinned().as_ref())?;
            let tools = loaded.declared();
            let secs = match &sel.exact_prompt {
                Some(p) if !p.is_empty() => vec![("preamble".to_string(), p.clone())],
                Some(_) => Vec::new(),
                None => sections(
                    &c2,
                    &cwd,
                    &loaded.res,
                    &tools,
                    loaded.tools.chat_only,
                    loaded.mcp.section.as_ref(),
                )?,
            };
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
