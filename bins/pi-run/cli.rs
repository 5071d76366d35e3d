//! Command-line definition of `pi-run` (clap derive); the man page and
//! completions are generated from it.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use pi_lib::cli::Generate;

pub const AFTER_HELP: &str = concat!(
    "\
Examples:
  pi-run -p \"fix the failing test\"              answer on stdout
  pi-run --no-approve --mode json \"task\" > events.jsonl
  git diff | pi-run -p \"review this change\"     stdin is prepended to the prompt
  pi-run -p @src/main.rs \"explain this file\"
  pi-run -c -p \"and now the docs\"              continue the latest session here
  pi-run --model anthropic/claude-sonnet-4-5:high -p \"plan the refactor\"
  pi-run --provider faux --model demo.jsonl -p \"hi\"   scripted, offline
  pi-run --list-models sonnet
  pi-run -t 'gr*,read' -xt grep -p \"review\"   pi's tool options
  pi-run --session-id nightly-42 -p \"go on\"    continue or create that session
  pi-run --cwd services/api -p \"fix the build\"  run there, no cd needed
  pi-run -p \"add it\" --then \"run the tests\"   a follow-up once the task ended
  pi-run --mode rpc                             pi's RPC protocol on stdin/stdout
  pi-run --no-approve --max-cost 2 --timeout 30m --mode json \"task\" > run.jsonl
  pi-run --output-schema verdict.json -p \"review this diff\" | jq .status

Project trust is never silent: when the project has protected resources
(.pi/settings.json, .pi/skills, ...), one stderr line says whether they
load and why, and --mode json adds one record right after the session
header that pi's stream does not have: {\"type\":\"trust\", \"decision\",
\"trusted\", \"reason\", \"protectedPaths\", \"savedPath\"?}, the record
`pi-resources` prints.

Sandbox (beyond pi; docs/sandbox.md): --sandbox read-only|workspace-write
confines the bash tool, RPC bash, subagent children's commands and the
file tools: no writes outside the workspace (none in read-only; git hooks
and config and .pi/ stay read-only), no reads of ~/.ssh, ~/.aws, auth.json
and the other credential stores, no secret-looking variables, no network
(--sandbox-network turns it on). Landlock and seccomp, plus a user
namespace for workspace-write; Linux only. Extensions, MCP servers and
pi-run itself are not confined. Never silent: one stderr line says what is
confined, --mode json adds {\"type\":\"sandbox\", \"mode\", \"network\",
\"workspace\", \"writableRoots\", \"readOnly\", \"hidden\", \"envHidden\",
\"mechanism\"} after the session header (and the trust record), and RPC
get_state has a \"sandbox\" field. It fails closed: exit 5.

Extensions: pi's TS/JS extensions run in the bundled Node host ($PI_NODE or
node on PATH); any executable that speaks the JSONL protocol pi-ext/1 on
stdin and stdout (or fd 3, $PI_EXT_RECORDS_FD) is a process extension
(docs/extensions.md). CLI and user
extensions start first and may answer project_trust; project extensions
start only in a trusted project. Extensions and --gate fail closed: an
extension that fails to load (a throw, a missing file, no Node, a hang, a
crash, process.exit) fails the run with exit 1 before the model is called,
naming it and the cause, as pi does; a tool_call handler that throws, times
out, dies or answers garbage blocks the call (the tool never runs). Other
handler errors are `Extension error (<path>): <msg>` lines on stderr (also
in --mode json, as pi); a notification handler that once timed out is not
waited for again in that run.
`/name args` runs an extension command instead of the agent; extension
flags (--name [value]) are accepted once an extension registers them.
After a session replacement (RPC new_session, fork, clone, switch_session)
each TS/JS extension's factory runs again in the same host, as in pi.

Piped stdin is prepended to the first prompt and read to its end, as pi
does, however slowly it comes: once anything arrived, and while another
command of the pipeline holds its write end. An open pipe fed by nobody
(only the caller holds it, as a CI runner's stdin) is ignored with a
warning after 2 s; </dev/null skips the wait. A terminal is never read.

Codemode (docs/mcp.md): an MCP server at pi's default exposure (codemode)
brings the codemode tool (autoEnableCodemode: false in mcp.json keeps it
away). The model writes JavaScript, run as an async function body in an
embedded QuickJS (no Node, files, network or timers; 256 MB of memory; a
first line `// @options: {\"max_output_tokens\": N, \"timeout_ms\": N}`),
that calls the other tools as `await tools.<name>(args)`; each call passes
the same gate, hooks and --gate as a call of the model. Globals: text(),
image(), console.log(), exit(), store()/load() (kept in the session),
ALL_TOOLS, searchTools(), describeTool(), describeNamespace(), and
`models`, which lists no models here (no classifier or image models).
Settings: codemode.mode (on: other tools get a `Codemode:` line; only:
they are listed in the codemode description instead),
codemode.inlineBudget.

RPC mode (--mode rpc): JSON commands on stdin, responses and events on
stdout (docs/rpc.md). `bash` runs at once, also while a run streams
(after asking any user_bash handler). `abort` never waits for an
extension handler: a tool call it was deciding on is blocked. A command
line holds at most 64 MiB; a longer one is answered with a parse error
and skipped. Stdin EOF stops a running request and exits 0, as in pi, so
`--mode rpc < commands.jsonl` usually ends before the first answer;
--drain lets the work read before EOF finish first. SIGTERM and SIGHUP
exit 143 and 129 with the session saved; a client that stops reading
stdout is noticed at once (exit 141).

",
    pi_lib::exit_status_table!(),
    "
In pi-run:
  0    also when an extension command or input handler took the prompt;
       --mode rpc: stdin ended (--drain: and the work asked for finished)
  1    an extension did not load (nothing was sent to the model), a model
       or provider error (also in --mode json), a session write failed,
       stdout could not be written (a full disk: the run stops)
  2    unknown model, missing API key, malformed models.json or
       settings.json (its \"limits\" too), bad flag (also an unknown --flag
       no extension registered), an interactive-only flag, a missing
       --export file, an @file that is missing, not a regular file or over
       16 MiB, piped stdin over 16 MiB, a missing or invalid
       --output-schema file, --max-cost with a model that has no prices
  3    --max-turns (the model still had tool calls), --max-cost,
       --timeout; in --mode rpc --max-cost and --timeout end the server
       while --max-turns limits each prompt
  5    the --sandbox (or settings `sandbox`) asked for cannot be set up
       (no Landlock ABI 3, seccomp refused, no user namespaces for
       workspace-write, a writableRoots entry that is no directory): one
       line names what is missing; nothing was sent to the model
  141  in JSON and RPC mode at once, even while a tool prints nothing
On a signal, a failed stdout or a limit the request is aborted, running
tools (subagent children's too) are killed with their whole process group,
and the partial message is saved as aborted; a second signal exits at once.
--list-models to a closed stdout ends quietly with 0.

CI: --mode json ends with one record after pi's events, {\"type\":\"run_end\",
\"exitCode\", \"stopReason\" (completed|error|aborted|max_turns|max_cost|
timeout|output_schema), \"error\"?, \"model\", \"usage\" (pi's Usage shape,
subagent children included), \"turns\", \"durationMs\", \"sessionId\",
\"sessionFile\", \"output\"? (the --output-schema document), \"children\":
[{\"id\", \"agent\", \"status\", \"usage\"}]}; the same outcome is appended to
the session as a custom entry (customType \"pi-run:run_end\"), which
`pi-session ls` and `pi-session stats --all` read. A reply cut at the output
token limit (stopReason \"length\") is a warning on stderr in every mode.
Limits also come from settings.json: {\"limits\": {\"maxCost\": 2.5,
\"timeout\": \"30m\", \"maxTurns\": 40}}; a flag wins (docs/ci.md).

Environment:
  PI_CODING_AGENT_DIR   pi's agent directory (default ~/.pi/agent): models.json,
                        auth.json, settings.json, sessions/
  ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, ...   provider keys"
);

/// Run the pi agent loop on a task.
///
/// Sends the prompt to the model, runs the tool calls it makes (read, bash,
/// edit, write by default), feeds the results back, and repeats until the
/// model answers. The session is written in pi's format as it happens, so
/// the real pi can open and continue it. Output: the final answer (text
/// mode) or pi's JSON event stream (`--mode json`). Every non-interactive
/// option of pi 1.6.0 is accepted, so a script written for `pi -p` runs
/// unchanged; the few that have no effect here say so below.
#[derive(Parser, Debug)]
#[command(
    name = "pi-run",
    version,
    disable_version_flag = true,
    args_override_self = true,
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Prompts, sent one after the other; `@path` arguments include a file in
    /// the first prompt (an image — jpg, png, gif, webp, bmp — as an image,
    /// fitted as `read` fits it; a model without image input gets pi's
    /// placeholder).
    #[arg(value_name = "MESSAGE")]
    pub messages: Vec<String>,

    /// Run the prompts, print the final answer, exit (the default when not
    /// on a terminal; this toolkit has no interactive UI).
    #[arg(short = 'p', long)]
    pub print: bool,

    /// Output: `text` (final answer), `json` (pi's event stream) or `rpc`
    /// (pi's RPC protocol on stdin/stdout: prompt, steer, follow_up,
    /// abort, get_state, …; see docs/rpc.md).
    #[arg(long, value_enum, default_value_t = Mode::Text)]
    pub mode: Mode,

    /// A follow-up task for the same run and session (repeatable; beyond
    /// pi): queued as a pi follow-up message, it is sent once the task
    /// before it has ended (the model answered without tool calls), so
    /// `pi-run "do X" --then "verify X"` needs no client program.
    #[arg(long, value_name = "MESSAGE", allow_hyphen_values = true)]
    pub then: Vec<String>,

    /// `--mode rpc` only (beyond pi): at stdin EOF, finish what was asked
    /// — the running prompt with its queued steering and follow-ups, a
    /// running `bash`, every command read before EOF — then exit 0, so
    /// `pi-run --mode rpc --drain < commands.jsonl` runs a command file to
    /// the end. Without it EOF stops a running prompt at once, as pi does.
    #[arg(long)]
    pub drain: bool,

    /// Provider of the model (restricts --model lookup).
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    pub provider: Option<String>,

    /// Model id, `provider/id`, with an optional `:thinking` suffix.
    #[arg(long, value_name = "PATTERN", allow_hyphen_values = true)]
    pub model: Option<String>,

    /// Model scope, comma-separated (ids, `provider/id`, fuzzy names or
    /// `*` globs, each with an optional `:thinking` suffix). Without
    /// --model (and without -c), the run starts on the settings default
    /// model when it is in scope, else on the first model of the scope, as
    /// pi does. pi also cycles through the scope with Ctrl+P; there is no
    /// interactive UI here.
    #[arg(long, value_name = "PATTERNS", allow_hyphen_values = true)]
    pub models: Option<String>,

    /// API key for this run only.
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    pub api_key: Option<String>,

    /// Thinking level: off, minimal, low, medium, high, xhigh, max (clamped
    /// to what the model supports).
    #[arg(long, value_name = "LEVEL", allow_hyphen_values = true)]
    pub thinking: Option<String>,

    /// List the available models (optionally filtered) and exit.
    #[arg(long, value_name = "SEARCH", num_args = 0..=1, default_missing_value = "")]
    pub list_models: Option<String>,

    #[command(flatten)]
    pub tool_args: pi_lib::cli::ToolArgs,

    #[command(flatten)]
    pub resource_args: pi_lib::cli::ResourceArgs,

    /// Start no MCP server: ignore <agentDir>/mcp.json and the trusted
    /// project's .pi/mcp.json, and (RPC) no built-in /mcp command (as pi's
    /// --no-mcp).
    #[arg(long)]
    pub no_mcp: bool,

    /// Use this system prompt exactly: `pi-prompt system` output (JSONL
    /// sections, or plain text) from a file, or `-` for stdin. Trust is
    /// this run's own decision, never read from the prompt: a prompt made
    /// for a trusted project (its `trust` record) is refused (exit 2)
    /// unless this run trusts the project too (`-a`), since its skills and
    /// templates would not expand here.
    #[arg(long, value_name = "FILE|-", conflicts_with_all = ["system_prompt", "append_system_prompt"])]
    pub system_from: Option<String>,

    /// Run in DIR as if started there (beyond pi; `pi-resources` and
    /// `pi-prompt` have it too): the project, its sessions, the tools'
    /// working directory and every relative path on the command line
    /// (`@file`, `-e`, `--session`, …) are DIR's.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub cwd: Option<PathBuf>,

    /// Continue the most recent session of this directory.
    #[arg(short = 'c', long = "continue")]
    pub continue_: bool,

    /// Continue this session (path or id prefix); a new path is created.
    #[arg(long, value_name = "PATH|ID", allow_hyphen_values = true, conflicts_with_all = ["continue_", "fork", "no_session"])]
    pub session: Option<String>,

    /// Continue this directory's session with this exact id, or create it
    /// with that id (letters, digits, `.`, `_`, `-`; starting and ending
    /// with a letter or digit). With --fork: the id of the new session.
    #[arg(long, value_name = "ID", allow_hyphen_values = true, conflicts_with_all = ["continue_", "session"])]
    pub session_id: Option<String>,

    /// Fork this session (path or id prefix) into a new one here.
    #[arg(long, value_name = "PATH|ID", allow_hyphen_values = true, conflicts_with_all = ["continue_", "no_session"])]
    pub fork: Option<String>,

    /// Keep the session in memory only.
    #[arg(long)]
    pub no_session: bool,

    /// Store and look up sessions in this folder.
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    pub session_dir: Option<PathBuf>,

    /// Display name of the session.
    #[arg(short = 'n', long, value_name = "NAME", allow_hyphen_values = true)]
    pub name: Option<String>,

    /// Replace the default system prompt (text, or a file path).
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub system_prompt: Option<String>,

    /// Append to the system prompt (text or file path; repeatable).
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub append_system_prompt: Vec<String>,

    /// Trust the project for this run: load its .pi/ settings and resources.
    #[arg(short = 'a', long, overrides_with = "no_approve")]
    pub approve: bool,

    /// Treat the project as untrusted for this run: no project .pi/ content
    /// (alias `-na`). The last of -a / -na counts, as in pi. Without
    /// either, trust.json and defaultProjectTrust decide, as in pi (never a
    /// prompt: pi-run is non-interactive).
    #[arg(long, overrides_with = "approve")]
    pub no_approve: bool,

    /// Export a session file to HTML and exit, as pi does: to OUTPUT, else
    /// `pi-session-<name>.html` in the current directory.
    #[arg(long, value_names = ["FILE", "OUTPUT"], num_args = 1..=2)]
    pub export: Option<Vec<PathBuf>>,

    /// Disable network operations at start-up. No effect: pi-run never
    /// contacts the network before the first model request (no update
    /// checks, no model catalogue refresh).
    #[arg(long)]
    pub offline: bool,

    /// Progress on stderr as it happens (each turn, each tool call with
    /// its time, retries, with the time since the start), then one line
    /// with the run's turns, tokens, cost (subagents' share) and time
    /// (text and JSON mode; pi's flag forces its start-up banner, which
    /// pi-run does not have).
    #[arg(long)]
    pub verbose: bool,

    /// Interactive only (pi's session picker): an error here; use
    /// --session PATH|ID, --session-id ID or -c.
    #[arg(short = 'r', long)]
    pub resume: bool,

    /// Interactive only (pi's terminal UI mode): an error here.
    #[arg(long, value_name = "MODE")]
    pub tui_mode: Option<String>,

    /// Interactive only (pi's terminal UI theme): an error here.
    #[arg(long, value_name = "NAME")]
    pub use_theme: Option<String>,

    /// Stop after N turns if the model still wants to call tools (exit 3,
    /// stopReason max_turns); N is at least 1. A subagent child never runs
    /// more turns either. Settings: limits.maxTurns.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// Stop the run once its cost reaches USD (exit 3, stopReason
    /// max_cost): counted from the models' prices (catalogue or
    /// models.json), subagent children included; the response that reached
    /// it is paid, nothing after it starts. A model without prices is a
    /// usage error. Settings: limits.maxCost.
    #[arg(long, value_name = "USD", value_parser = pi_lib::run::limits::parse_cost, allow_hyphen_values = true)]
    pub max_cost: Option<f64>,

    /// Wall clock for the whole run (exit 3, stopReason timeout): seconds
    /// or a duration, `90`, `90s`, `10m`, `1h`, `1h30m`. Settings:
    /// limits.timeout.
    #[arg(long, value_name = "DURATION", value_parser = pi_lib::timefmt::parse_duration, allow_hyphen_values = true)]
    pub timeout: Option<std::time::Duration>,

    /// The final answer must be one JSON document valid against this JSON
    /// Schema (draft 2020-12, or the draft its $schema names, e.g. draft-07):
    /// text mode prints the document alone (compact, one line), --mode
    /// json puts it in run_end.output. Passed to the API where it can
    /// constrain the reply (OpenAI strict mode, Gemini), else validated
    /// only. A mismatch is answered with the errors and the schema; after
    /// --output-retries it is exit 4. A missing or invalid file is exit 2.
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    pub output_schema: Option<PathBuf>,

    /// How many times a final answer that does not match --output-schema
    /// is sent back for correction.
    #[arg(long, value_name = "N", default_value_t = pi_lib::run::output::DEFAULT_RETRIES, requires = "output_schema")]
    pub output_retries: u32,

    /// Also write the final answer (with --output-schema: the document) to
    /// FILE, replaced whole, when the run ends with exit 0 (as Codex's
    /// -o); its folder must exist.
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    pub output_last_message: Option<PathBuf>,

    /// Give up on a model response after this many seconds without data;
    /// the attempt is retried like a dropped connection (settings `retry`).
    /// Default: settings `httpIdleTimeoutMs` (300 s, as pi); 0 disables.
    #[arg(long, value_name = "SECS")]
    pub idle_timeout: Option<u64>,

    /// Approve every tool call with CMD (beyond pi; repeatable, all must
    /// allow): `sh -c CMD` gets {"toolName","toolCallId","input","cwd"} on
    /// stdin after the extensions' tool_call handlers (a subagent child's
    /// call too, with "subagent":{"sessionId","profile","parentToolCallId"});
    /// exit 0 allows, exit 1 blocks with the first stdout line as the
    /// reason, anything else (a crash, a timeout of --extension-timeout,
    /// more than 1 MiB on stdout)
    /// blocks.
    #[arg(long, value_name = "CMD", allow_hyphen_values = true)]
    pub gate: Vec<String>,

    /// Seconds an extension may take to answer one event (default 30) and
    /// a --gate command to answer (default 30), and to load (each
    /// extension; default 10, never less); a tool_call that times out is
    /// blocked, an extension that does not load in time fails the run.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub extension_timeout: Option<u64>,

    /// Confine the model's commands and file tools (beyond pi):
    /// `read-only` (no writes), `workspace-write` (writes to the workspace,
    /// the temp dir and settings `writableRoots`; git hooks and config and
    /// .pi/ stay read-only) or `danger-full-access` (no sandbox, the
    /// default). Sandboxed, commands cannot read ~/.ssh and the other
    /// credential stores, see secret-looking variables or open network
    /// sockets. Overrides settings `sandbox` (docs/sandbox.md).
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<SandboxMode>,

    /// Let sandboxed commands open network sockets (`--sandbox-network`
    /// or `=on`) or not (`=off`, the sandbox's default). Overrides settings
    /// `sandbox.network`.
    #[arg(long, value_name = "on|off", num_args = 0..=1, require_equals = true, default_missing_value = "on", value_parser = parse_on_off)]
    pub sandbox_network: Option<bool>,

    /// Pass this variable to sandboxed commands although its name looks
    /// secret (repeatable; settings `sandbox.envKeep`).
    #[arg(long, value_name = "NAME")]
    pub env_keep: Vec<String>,

    /// Print the version.
    #[arg(short = 'v', long, action = clap::ArgAction::Version)]
    pub version: (),

    /// Print a man page or a shell completion script and exit.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub generate: Option<Generate>,
}

impl Cli {
    /// The interactive-only option given, if any (pi-run has no UI), and
    /// what to use instead.
    pub fn interactive_only(&self) -> Option<(&'static str, &'static str)> {
        if self.resume {
            Some((
                "-r/--resume (pi's interactive session picker)",
                "use --session PATH|ID, --session-id ID or -c to pick a session",
            ))
        } else if self.tui_mode.is_some() {
            Some((
                "--tui-mode (pi's terminal UI)",
                "drop it: pi-run prints text or JSON",
            ))
        } else if self.use_theme.is_some() {
            Some((
                "--use-theme (pi's terminal UI theme)",
                "drop it: pi-run prints text or JSON",
            ))
        } else {
            None
        }
    }
}

/// `--sandbox` values.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// Reads everywhere but the credential stores; no writes.
    ReadOnly,
    /// Writes to the workspace, the temp dir and writableRoots.
    WorkspaceWrite,
    /// No sandbox (the default).
    DangerFullAccess,
}

impl SandboxMode {
    /// The library's mode.
    pub fn mode(self) -> pi_lib::sandbox::Mode {
        match self {
            SandboxMode::ReadOnly => pi_lib::sandbox::Mode::ReadOnly,
            SandboxMode::WorkspaceWrite => pi_lib::sandbox::Mode::WorkspaceWrite,
            SandboxMode::DangerFullAccess => pi_lib::sandbox::Mode::DangerFullAccess,
        }
    }
}

/// `on` / `off` (also `true` / `false`).
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err(format!("expected on or off, got {s:?}")),
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The final answer on stdout.
    Text,
    /// pi's JSON event stream: the session header, then one event per line.
    Json,
    /// pi's RPC protocol: JSON commands on stdin, responses and the same
    /// events as `json` on stdout, until stdin ends.
    Rpc,
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
