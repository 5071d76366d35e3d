//! Command-line definition of `pi-session` (clap derive). The man page and
//! shell completions are generated from this, so help texts here are the
//! documentation.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use pi_lib::cli::{Generate, OutputFormat};

pub const AFTER_HELP: &str = concat!(
    "\
Sessions are named by path or by a unique prefix of their id.

Examples:
  pi-session ls                          sessions of the current directory
  pi-session ls --all --format jsonl | jq -r .firstMessage
  pi-session tree 01a2                   the entry tree of a session
  pi-session context 01a2 --leaf 9f3e    what the model sees at entry 9f3e
  pi-session search 'TODO' --all
  pi-session fork 01a2 --at 9f3e         new session from an entry
  pi-session compact 01a2 --dry-run      where a compaction would cut
  pi-session branch 01a2 --to 9f3e --summarize
  pi-session select-tool 01a2 --chat-only
  pi-session export 01a2 -o chat.html

",
    pi_lib::exit_status_table!(),
    "
In pi-session:
  0    also with warnings about damaged lines; compact with nothing to
       compact (too small, or compacted last) writes nothing and says so
  1    the command ran but found nothing (ls, search), the model's
       summary request failed (compact, branch --summarize), or stdout
       could not be written (a full disk)
  2    missing file, bad session, ambiguous id, invalid tool name, ...
A closed stdout (| head) ends quietly with 0.

Environment:
  PI_CODING_AGENT_DIR  pi's agent directory (default ~/.pi/agent); sessions
                       live in its sessions/ folder."
);

pub const COMPACT_HELP: &str = "\
Examples:
  pi-session compact 01a2 --dry-run      where the cut falls, tokens before
  pi-session compact 01a2 --keep-recent-tokens 4000
  pi-session compact 01a2 --instructions 'keep the API decisions'
  pi-session compact run.jsonl --model anthropic/claude-sonnet-4-5

The cut never separates a tool call from its result; when it falls inside
a turn, the start of that turn is summarised separately. An existing
summary is updated, not redone. In a pipe the output is JSONL
(compaction_plan with --dry-run; else compaction_start, compaction_end and
entry_appended, pi's event shapes). A transient failure of a summary
request (408, 429, 5xx, a broken stream) is retried under the retry.*
settings, as pi does, with summarization_retry_* records (text: a warning
on stderr).

Exit status:
  0    compacted (or, with --dry-run, planned)
  1    the model's summary request failed (after any retries), or the
       session changed while the summary was written (nothing is written)
  2    usage, configuration or input error
  130  interrupted (nothing written)
\"Already compacted\" and \"Nothing to compact (session too small)\" are
said on stderr, nothing is written, and the exit status is 0.";

/// Inspect and edit pi coding agent sessions.
///
/// Reads and writes the session files of the real pi (JSONL, format
/// version 3; versions 1 and 2 are migrated on load). Output is a readable
/// table or tree on a terminal and JSONL in a pipe. Edits only ever append
/// whole lines to a session file; `fork` and `migrate` write new files
/// atomically.
#[derive(Parser, Debug)]
#[command(name = "pi-session", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Folder holding the session files, instead of <agentDir>/sessions
    /// (`stats --all`: repeatable, every folder is read).
    #[arg(long, global = true, value_name = "DIR")]
    pub session_dir: Vec<PathBuf>,

    /// Print a man page or a shell completion script and exit.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub generate: Option<Generate>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// `--format text|jsonl`.
#[derive(Args, Debug, Clone)]
pub struct FormatArg {
    /// Output format [default: text on a terminal, jsonl otherwise].
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,
}

/// `stats --all --by`.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum GroupByArg {
    Day,
    Cwd,
    Outcome,
}

/// A session reference.
#[derive(Args, Debug, Clone)]
pub struct SessionArg {
    /// Session file path, or a unique prefix of the session id.
    #[arg(value_name = "SESSION")]
    pub session: String,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List sessions: id, name, cwd, created, modified, messages, first user
    /// message, tokens and cost, newest first; a subagent child is marked
    /// with its parent's id.
    Ls {
        /// Sessions of every working directory, not only the current one.
        #[arg(long, short = 'a')]
        all: bool,
        /// List the sessions of this directory instead of the current one.
        #[arg(long, value_name = "DIR", conflicts_with = "all")]
        cwd: Option<PathBuf>,
        /// Sort order.
        #[arg(long, value_enum, default_value_t = SortBy::Modified)]
        sort: SortBy,
        /// Show at most N sessions.
        #[arg(long, short = 'n', value_name = "N")]
        limit: Option<usize>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Print a session's header and entries (JSONL: exactly as stored,
    /// after migration).
    #[command(alias = "cat")]
    Show {
        #[command(flatten)]
        session: SessionArg,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Draw the entry tree: labels, the active leaf, branch points and the
    /// entries that started or report on a subagent child.
    Tree {
        #[command(flatten)]
        session: SessionArg,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Print the messages the model sees at a leaf (compaction, branch
    /// summaries and context edits applied).
    Context {
        #[command(flatten)]
        session: SessionArg,
        /// Entry to build the context for (default: the session's leaf).
        #[arg(long, value_name = "ID")]
        leaf: Option<String>,
        /// Print the system prompt and tools the recorded system messages
        /// replay to at that point, instead of the messages.
        #[arg(long)]
        prompt: bool,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Search message text across sessions.
    Search {
        /// Text to look for.
        text: String,
        /// Search the sessions of every working directory.
        #[arg(long, short = 'a')]
        all: bool,
        /// Ignore case.
        #[arg(long, short = 'i')]
        ignore_case: bool,
        /// Search only this session (path or id prefix); repeatable.
        #[arg(long, short = 's', value_name = "SESSION")]
        session: Vec<String>,
        /// Stop after N matches.
        #[arg(long, short = 'n', value_name = "N")]
        limit: Option<usize>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Token and cost totals per model, message counts by role; with
    /// --all, the runs pi-run stored in every session of the folders
    /// (--session-dir, repeatable): runs, turns, tokens, cost (subagents
    /// included) and how many ended each way (stopReason), in total or
    /// grouped (--by); JSONL records `run_stats` (`group` null: the total).
    Stats {
        /// Session file path, or a unique prefix of the session id.
        #[arg(
            value_name = "SESSION",
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        session: Option<String>,
        /// Every session of the folders: a report of their runs.
        #[arg(long)]
        all: bool,
        /// Group the runs (with --all): by day (UTC), cwd or outcome.
        #[arg(long, value_enum, requires = "all", value_name = "KEY")]
        by: Option<GroupByArg>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// List a parent session's subagent runs (children started by the
    /// built-in `Agent` tool, or by pi-web): status, profile, description,
    /// duration, tokens and cost, oldest first.
    Agents {
        #[command(flatten)]
        session: SessionArg,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Copy the branch ending at an entry into a new session file whose
    /// header names this one as parentSession.
    Fork {
        #[command(flatten)]
        session: SessionArg,
        /// Last entry to keep (default: the leaf).
        #[arg(long, value_name = "ENTRY")]
        at: Option<String>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Move the session's leaf to an entry, so the next turn continues from
    /// there (appends one entry; nothing is deleted).
    Branch {
        #[command(flatten)]
        session: SessionArg,
        /// Entry to continue from.
        #[arg(long, value_name = "ENTRY")]
        to: String,
        /// Record a branch summary of the abandoned path (a `branch_summary`
        /// entry the model sees) instead of a silent move.
        #[arg(long, value_name = "TEXT", conflicts_with = "summarize")]
        summary: Option<String>,
        /// Have the model summarise the abandoned path (from the old leaf
        /// back to where it meets ENTRY) into the `branch_summary`, as pi's
        /// tree navigation does; when ENTRY is a user (or custom) message,
        /// the leaf goes to its parent, so that message can be sent again.
        #[arg(long)]
        summarize: bool,
        /// Extra focus for the model's summary (with --summarize).
        #[arg(long, value_name = "TEXT", requires = "summarize")]
        instructions: Option<String>,
        /// Model for the summary (default: the session's model, else the
        /// settings defaults).
        #[arg(long, value_name = "MODEL", requires = "summarize")]
        model: Option<String>,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Summarise the older part of the session through the model and
    /// append a `compaction` entry (pi 1.6.0's format): the model then sees
    /// the summary and the recent messages only. Nothing is deleted.
    #[command(after_help = COMPACT_HELP)]
    Compact {
        #[command(flatten)]
        session: SessionArg,
        /// Keep about this many tokens of the newest messages verbatim
        /// [default: compaction.keepRecentTokens, 20000].
        #[arg(long, value_name = "N")]
        keep_recent_tokens: Option<u64>,
        /// Extra focus for the summary.
        #[arg(long, value_name = "TEXT")]
        instructions: Option<String>,
        /// Model for the summary (provider/id or a pattern; default: the
        /// session's model, else the settings defaults).
        #[arg(long, value_name = "MODEL")]
        model: Option<String>,
        /// Print where the cut would fall and the token counts, without
        /// calling a model or writing anything.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Set or clear the label of an entry.
    Label {
        #[command(flatten)]
        session: SessionArg,
        /// Entry id or unique prefix.
        entry: String,
        /// The label text.
        #[arg(required_unless_present = "clear")]
        label: Option<String>,
        /// Remove the entry's label.
        #[arg(long, conflicts_with = "label")]
        clear: bool,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Set the session's display name.
    Name {
        #[command(flatten)]
        session: SessionArg,
        /// The new name.
        name: String,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Export the session as one self-contained HTML page (the whole
    /// branch tree, Markdown rendered, tool calls folded, token and cost
    /// totals; works offline) or its current branch as Markdown.
    Export {
        #[command(flatten)]
        session: SessionArg,
        /// Document format [default: from the -o extension, else html].
        #[arg(long, value_enum)]
        format: Option<ExportFormat>,
        /// Write to this file instead of stdout. When stdout is a terminal
        /// and no file is named, an HTML export is written to
        /// pi-session-<session file name>.html in the current directory
        /// and its path printed.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Show or change the session's persisted tool selection (none =
    /// legacy defaults, [] = Chat only, or built-in tools).
    SelectTool {
        #[command(flatten)]
        session: SessionArg,
        /// Pin these built-in tools (comma-separated: read, bash, edit,
        /// write, grep, find, ls).
        #[arg(long, value_delimiter = ',', value_name = "TOOLS", group = "change")]
        tools: Option<Vec<String>>,
        /// Pin an empty selection: Chat only.
        #[arg(long, group = "change")]
        chat_only: bool,
        /// Retract the pin: back to pi's default tools.
        #[arg(long, group = "change")]
        clear: bool,
        #[command(flatten)]
        format: FormatArg,
    },
    /// Rewrite a version 1 or 2 session file as version 3; the old file is
    /// kept next to it as <file>.v<N>.bak.
    Migrate {
        #[command(flatten)]
        session: SessionArg,
        #[command(flatten)]
        format: FormatArg,
    },
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// Last activity, newest first.
    Modified,
    /// Creation time, newest first.
    Created,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One self-contained HTML page.
    Html,
    /// Markdown.
    Md,
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
