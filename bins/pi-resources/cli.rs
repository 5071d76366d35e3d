//! Command-line definition of `pi-resources` (clap derive). The man page
//! and shell completions are generated from this, so the help texts here
//! are the documentation.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use pi_lib::cli::{Generate, OutputFormat};

use crate::agents_cmd::AgentsArgs;
use crate::mcp_cmd::McpArgs;
use crate::trust_cmd::TrustArgs;

pub const AFTER_HELP: &str = concat!(
    "\
Resources are listed in precedence order: CLI paths (-e, --skill,
--prompt-template, --theme), project settings paths, project
auto-discovery (.pi/, .agents/skills up to the git root), user settings
paths, user auto-discovery (<agentDir>/, ~/.agents/skills), then pi
packages. The first resource of a name wins; each loser is a `collision` diagnostic naming the winner. The same real file
reached twice (symlinks) is listed once. Project resources load only when
the project is trusted; context files always load.

Output: one JSON object per line when piped (or --format jsonl), tagged by
`type`: trust (first), tool_set (the tools a run with the same flags and
settings declares: the same resolver as pi-run and pi-prompt), mcp_server
(each server of <agentDir>/mcp.json and .pi/mcp.json: source, scope,
status loaded/disabled/skipped when untrusted, transport, exposure), extension,
skill, prompt, theme, context_file, system_prompt, diagnostic. A grouped
listing on a terminal. With --chat-only, what a Chat-only run loads: the
context files only.

Examples:
  pi-resources                              what applies here, and why
  pi-resources -a --format jsonl | jq -r 'select(.type==\"skill\") | .path'
  pi-resources --cwd ~/src/app -na          as an untrusted project
  pi-resources --skill ./my-skill --no-skills   only that skill
  pi-resources -t 'gr*,read' -xt grep          the tool set of those flags
  pi-resources | jq 'select(.type==\"diagnostic\")'
  pi-resources trust --help                 show or change saved trust
  pi-resources agents --help                the built-in subagents' switch and profiles
  pi-resources mcp login <server>           OAuth sign-in to an HTTP MCP server
  pi-resources mcp logout <server>          drop that server's stored tokens

",
    pi_lib::exit_status_table!(),
    "
In pi-resources:
  0    also with diagnostics about single resources
  1    stdout could not be written (a full disk)
  2    a corrupt settings.json (named with line and column), an unreadable
       trust.json, a missing --cwd directory
A closed stdout (| head) ends quietly with 0.

Environment:
  PI_CODING_AGENT_DIR  pi's agent directory (default ~/.pi/agent): global
                       resources, settings.json, trust.json, mcp.json and
                       mcp-auth.json (OAuth tokens)
  HOME                 ~/.agents/skills and `~` in settings paths"
);

/// Discover pi's resources and decide project trust.
///
/// Tells you — and every later stage of a pipeline — exactly which
/// extensions, skills, prompt templates, themes, context files and
/// system-prompt files pi 1.6.0 would load in a directory, where each came
/// from, what lost a name collision, and whether the project is trusted
/// and why. Nothing is executed or installed (except the extensions, with
/// --inspect).
#[derive(Parser, Debug)]
#[command(name = "pi-resources", version, after_help = AFTER_HELP, args_override_self = true)]
pub struct Cli {
    /// Directory to resolve for [default: the current directory].
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub cwd: Option<PathBuf>,

    #[command(flatten)]
    pub resource_args: pi_lib::cli::ResourceArgs,

    #[command(flatten)]
    pub tool_args: pi_lib::cli::ToolArgs,

    /// Trust the project for this run (nothing is saved).
    #[arg(short = 'a', long, overrides_with = "no_approve")]
    pub approve: bool,

    /// Treat the project as untrusted for this run (alias `-na`).
    #[arg(long, overrides_with = "approve")]
    pub no_approve: bool,

    /// Start each extension that would load (trusted ones only, as pi-run
    /// starts them) and add what it registered, at load and in its
    /// `session_start` handlers, to its record: `registered: {tools,
    /// commands, flags}`; stopped right after. Likewise connect each MCP
    /// server that would start and list its tools (`tools`, or `error`).
    #[arg(long)]
    pub inspect: bool,

    /// Output format [default: text on a terminal, jsonl otherwise].
    #[arg(long, value_enum, global = true)]
    pub format: Option<OutputFormat>,

    /// Print a man page or a shell completion script and exit.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub generate: Option<Generate>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show or change saved project-trust decisions (trust.json).
    Trust(TrustArgs),
    /// Show or change the built-in subagents' settings; list the profiles.
    Agents(AgentsArgs),
    /// Sign in to HTTP MCP servers with OAuth, or out (`mcp login|logout <server>`).
    Mcp(McpArgs),
}

/// pi's multi-letter short flags (`-na`, `-nc`, `-ns`, `-np`, `-ne`, `-nt`,
/// `-nbt`, `-xt`) as their long forms.
pub fn rewrite_args(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use clap::CommandFactory;
    pi_lib::cli::rewrite_pi_aliases(args, &Cli::command())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
