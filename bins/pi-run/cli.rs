//! Command-line definition of `pi-run` (clap derive); the man page and
//! completions are generated from it.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use pi_lib::cli::Generate;

pub const AFTER_HELP: &str = "\
Examples:
  pi-run -p \"fix the failing test\"              answer on stdout
  pi-run --no-approve --mode json \"task\" > events.jsonl
  git diff | pi-run -p \"review this change\"     stdin is prepended to the prompt
  pi-run -p @src/main.rs \"explain this file\"
  pi-run -c -p \"and now the docs\"              continue the latest session here
  pi-run --model anthropic/claude-sonnet-4-5:high -p \"plan the refactor\"
  pi-run --provider faux --model demo.jsonl -p \"hi\"   scripted, offline
  pi-run --list-models sonnet

Exit status:
  0    the run ended with an answer
  1    the run failed: model or provider error (also in --mode json),
       --max-turns reached with tool calls pending, or a session write failed
  2    usage, configuration or input error (unknown model, missing API key,
       malformed models.json or settings.json, unreadable @file, bad flag)
  130  interrupted (SIGINT); the partial message is saved as aborted

Environment:
  PI_CODING_AGENT_DIR   pi's agent directory (default ~/.pi/agent): models.json,
                        auth.json, settings.json, sessions/
  ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, ...   provider keys";

/// Run the pi agent loop on a task.
///
/// Sends the prompt to the model, runs the tool calls it makes (read, bash,
/// edit, write by default), feeds the results back, and repeats until the
/// model answers. The session is written in pi's format as it happens, so
/// the real pi can open and continue it. Output: the final answer (text
/// mode) or pi's JSON event stream (`--mode json`).
#[derive(Parser, Debug)]
#[command(name = "pi-run", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Prompts, sent one after the other; `@path` arguments include a file in
    /// the first prompt.
    #[arg(value_name = "MESSAGE")]
    pub messages: Vec<String>,

    /// Run the prompts, print the final answer, exit (the default when not
    /// on a terminal; this toolkit has no interactive UI).
    #[arg(short = 'p', long)]
    pub print: bool,

    /// Output: `text` (final answer) or `json` (pi's event stream).
    #[arg(long, value_enum, default_value_t = Mode::Text)]
    pub mode: Mode,

    /// Provider of the model (restricts --model lookup).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,

    /// Model id, `provider/id`, with an optional `:thinking` suffix.
    #[arg(long, value_name = "PATTERN")]
    pub model: Option<String>,

    /// API key for this run only.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,

    /// Thinking level: off, minimal, low, medium, high, xhigh, max (clamped
    /// to what the model supports).
    #[arg(long, value_name = "LEVEL")]
    pub thinking: Option<String>,

    /// List the available models (optionally filtered) and exit.
    #[arg(long, value_name = "SEARCH", num_args = 0..=1, default_missing_value = "")]
    pub list_models: Option<String>,

    /// Active tools, comma-separated (read, bash, edit, write, grep, find,
    /// ls). Plain names are a selection: pinned in the session the first
    /// time (seed 000), and a session's existing pin wins over it (change it
    /// with `pi-session select-tool`). `+name` / `-name` entries only change
    /// the default set for this run.
    #[arg(short = 't', long, value_delimiter = ',', value_name = "LIST")]
    pub tools: Option<Vec<String>>,

    /// No tools at all (alias `-nt`); the rest of the prompt stays.
    #[arg(long)]
    pub no_tools: bool,

    /// Chat only (seed 000): an empty tool selection, pinned in the session;
    /// no skills, templates or base prompt — the context files are the whole
    /// system prompt. Undo with `pi-session select-tool --clear`.
    #[arg(long, conflicts_with_all = ["tools", "no_tools"])]
    pub chat_only: bool,

    /// Load a skill file or folder (repeatable).
    #[arg(long, value_name = "PATH")]
    pub skill: Vec<std::path::PathBuf>,

    /// Load a prompt template file or folder (repeatable).
    #[arg(long, value_name = "PATH")]
    pub prompt_template: Vec<std::path::PathBuf>,

    /// Do not discover skills (explicit --skill paths still load).
    #[arg(long)]
    pub no_skills: bool,

    /// Do not discover prompt templates (explicit paths still load).
    #[arg(long)]
    pub no_prompt_templates: bool,

    /// Use this system prompt exactly: `pi-prompt system` output (JSONL
    /// sections, or plain text) from a file, or `-` for stdin.
    #[arg(long, value_name = "FILE|-", conflicts_with_all = ["system_prompt", "append_system_prompt"])]
    pub system_from: Option<String>,

    /// Continue the most recent session of this directory.
    #[arg(short = 'c', long = "continue")]
    pub continue_: bool,

    /// Continue this session (path or id prefix); a new path is created.
    #[arg(long, value_name = "PATH|ID", conflicts_with_all = ["continue_", "fork", "no_session"])]
    pub session: Option<String>,

    /// Fork this session (path or id prefix) into a new one here.
    #[arg(long, value_name = "PATH|ID", conflicts_with_all = ["continue_", "no_session"])]
    pub fork: Option<String>,

    /// Keep the session in memory only.
    #[arg(long)]
    pub no_session: bool,

    /// Store and look up sessions in this folder.
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,

    /// Display name of the session.
    #[arg(short = 'n', long, value_name = "NAME")]
    pub name: Option<String>,

    /// Replace the default system prompt (text, or a file path).
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,

    /// Append to the system prompt (text or file path; repeatable).
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Vec<String>,

    /// Do not load AGENTS.md / CLAUDE.md context files.
    #[arg(long)]
    pub no_context_files: bool,

    /// Trust the project for this run: load its .pi/ settings and resources.
    #[arg(short = 'a', long, conflicts_with = "no_approve")]
    pub approve: bool,

    /// Treat the project as untrusted for this run: no project .pi/ content
    /// (alias `-na`). Without either, trust.json and defaultProjectTrust
    /// decide, as in pi (never a prompt: pi-run is non-interactive).
    #[arg(long)]
    pub no_approve: bool,

    /// Stop after N turns if the model still wants to call tools (exit 1);
    /// N is at least 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// Give up on a model response after this many seconds without data.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub idle_timeout: u64,

    /// Render a man page or a completion script on stdout.
    #[arg(long, value_enum, hide = true, value_name = "WHAT")]
    pub generate: Option<Generate>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The final answer on stdout.
    Text,
    /// pi's JSON event stream: the session header, then one event per line.
    Json,
}

/// pi's multi-letter short options, rewritten before clap sees them.
pub fn normalize_args(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    pi_lib::cli::rewrite_short_aliases(
        args,
        &[
            ("-na", "--no-approve"),
            ("-nt", "--no-tools"),
            ("-ns", "--no-skills"),
            ("-np", "--no-prompt-templates"),
            ("-nc", "--no-context-files"),
        ],
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
