//! A run, assembled once. `pi-run` (print, JSON and RPC mode) and
//! `pi-prompt` (which prints the prompt a run would send) describe what
//! they want in a [`RunOptions`] — plain data the binaries fill from their
//! flags — and this module puts the run together in one order: the session,
//! the project's trust decision between the two extension passes, settings,
//! MCP servers, the model, the tool set, resources, the extensions' flags
//! and `session_start`, the built-in subagents, the system-prompt sections,
//! and finally the [`Agent`](crate::agent::Agent). What the binaries get
//! back is either a finished run's exit code ([`run`]) or the prompt and
//! tools a run would declare ([`plan`]); both come from the same
//! [`assemble::Assembly`], so they cannot disagree. Run-level features
//! (limits, the sandbox policy, structured output, the outcome record)
//! enter here, once, for every mode.

pub mod assemble;
mod execute;
pub mod extflags;
pub mod input;
pub mod limits;
pub mod model;
mod oneshot;
mod outcome;
pub mod output;
pub mod preflight;
mod progress;
mod rpc;
mod sandbox;
mod sections;
pub mod session;
pub mod tools;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::cli::CliError;
use crate::tools::select::ToolFlags;
use crate::trust::CliTrust;

pub use assemble::Assembly;
pub use sections::Plan;

/// How the run talks to its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The final answer on stdout (`pi-run -p`).
    Text,
    /// pi's JSON event stream on stdout.
    Json,
    /// pi's RPC protocol on stdin and stdout.
    Rpc,
    /// Nothing runs: the prompt and tools a run would declare
    /// (`pi-prompt`). No session is written.
    Plan,
}

impl Mode {
    /// The mode's name as extensions see it (`ctx.mode`; pi calls text
    /// mode `print`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Json => "json",
            Mode::Rpc => "rpc",
            Mode::Text | Mode::Plan => "print",
        }
    }
}

/// Which session a run writes (pi's session options) and its name.
#[derive(Debug, Clone, Default)]
pub struct SessionChoice {
    /// `--session`, `--fork`, `--session-id`, `-c`, `--no-session`,
    /// `--session-dir`.
    pub flags: crate::session::open::SessionFlags,
    /// `-n NAME`: the session's display name.
    pub name: Option<String>,
}

/// What model the run asks for (resolved by [`model::resolve`]).
#[derive(Debug, Clone, Default)]
pub struct ModelChoice {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub api_key: Option<String>,
    /// `--models`: the scope.
    pub scope: Option<String>,
}

/// Everything a binary asks of a run, as plain data.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The program name for diagnostics (`pi-run: warning: …`).
    pub prog: &'static str,
    pub mode: Mode,
    /// The directory the run starts in (a continued session may move it to
    /// the directory it was made in).
    pub cwd: PathBuf,
    pub agent_dir: PathBuf,
    pub session: SessionChoice,
    /// `-a` / `-na`.
    pub trust: CliTrust,
    pub model: ModelChoice,
    pub tool_flags: ToolFlags,
    /// Resource flags (`-e`, `--skill`, `-ns`, …).
    pub resource_args: crate::cli::ResourceArgs,
    pub system_prompt: Option<String>,
    pub append_system_prompt: Vec<String>,
    /// `--system-from FILE|-`: an exact prompt (`pi-prompt system` output).
    pub system_from: Option<String>,
    /// Resources piped from `pi-resources` (`pi-prompt`), instead of
    /// discovering them here.
    pub resource_records: Option<Vec<crate::format::resources::ResourceRecord>>,
    /// `--no-mcp`.
    pub no_mcp: bool,
    pub max_turns: Option<u32>,
    /// `--idle-timeout` seconds (0: none).
    pub idle_timeout: Option<u64>,
    /// `--extension-timeout` seconds.
    pub extension_timeout: Option<u64>,
    /// `--gate` commands.
    pub gates: Vec<String>,
    /// The prompts (`@file` included), in order.
    pub messages: Vec<String>,
    /// Where each message sat among the command-line arguments (to put an
    /// extension boolean flag's following word back in its place).
    pub message_positions: Vec<usize>,
    /// `--then` follow-ups.
    pub then: Vec<String>,
    /// `--drain` (RPC): at stdin EOF the work asked for finishes first.
    pub drain: bool,
    /// `--sandbox`, `--sandbox-network`, `--env-keep`.
    pub sandbox: crate::sandbox::CliSandbox,
    /// Options no built-in flag knows: extension flags, resolved once the
    /// extensions registered theirs.
    pub ext_flags: Vec<extflags::Pending>,
    /// `--max-cost USD`: the run's (and its subagents') cost limit.
    pub max_cost: Option<f64>,
    /// `--timeout`: the whole run's wall clock.
    pub timeout: Option<Duration>,
    /// `--output-schema FILE`: the final answer must validate against it.
    pub output_schema: Option<PathBuf>,
    /// `--output-retries N`: corrections asked for before giving up.
    pub output_retries: u32,
    /// `--output-last-message FILE`: where the final answer is written.
    pub output_last_message: Option<PathBuf>,
    /// `--verbose`: progress and a closing usage line on stderr.
    pub verbose: bool,
    /// When the run started (`--timeout` counts from here).
    pub started: Instant,
}

impl RunOptions {
    /// Options for `prog` in `cwd` with every flag at its default.
    pub fn new(prog: &'static str, mode: Mode, cwd: PathBuf) -> RunOptions {
        RunOptions {
            prog,
            mode,
            cwd,
            agent_dir: crate::paths::agent_dir(),
            session: SessionChoice::default(),
            trust: CliTrust::Unset,
            model: ModelChoice::default(),
            tool_flags: ToolFlags::default(),
            resource_args: Default::default(),
            system_prompt: None,
            append_system_prompt: Vec::new(),
            system_from: None,
            resource_records: None,
            no_mcp: false,
            max_turns: None,
            idle_timeout: None,
            extension_timeout: None,
            gates: Vec::new(),
            messages: Vec::new(),
            message_positions: Vec::new(),
            then: Vec::new(),
            drain: false,
            sandbox: Default::default(),
            ext_flags: Vec::new(),
            max_cost: None,
            timeout: None,
            output_schema: None,
            output_retries: output::DEFAULT_RETRIES,
            output_last_message: None,
            verbose: false,
            started: Instant::now(),
        }
    }
}

/// Runs the prompts of `opts` (text or JSON mode) or serves the RPC
/// protocol, and returns the exit code.
pub fn run(opts: RunOptions) -> Result<i32, CliError> {
    let rt = runtime()?;
    let asm = Assembly::new(opts, &rt)?;
    let (sandbox, prog) = (std::sync::Arc::clone(&asm.sandbox), asm.opts.prog);
    let code = asm.execute(&rt);
    // Nothing confined outlives the run, nor what it planted.
    sandbox.end(&|line| crate::cli::warn(prog, line));
    code
}

/// The system-prompt sections and declared tools a run with `opts` would
/// send first; nothing is run and no session is written.
pub fn plan(opts: RunOptions) -> Result<Plan, CliError> {
    let rt = runtime()?;
    let asm = Assembly::new(opts, &rt)?;
    Ok(asm.into_plan(&rt))
}

/// `--cwd DIR`: the process moves to DIR before anything else, so the run
/// is the one `cd DIR && pi-run …` would make — the project, the sessions
/// folder, the tools' working directory and every relative path on the
/// command line are DIR's. Call it before any thread starts (`$PWD` is
/// set for the tools' shells). Returns DIR, absolute and resolved.
pub fn enter_dir(dir: &std::path::Path) -> Result<PathBuf, CliError> {
    let real = std::fs::canonicalize(dir)
        .map_err(|e| CliError::input(format!("--cwd {}: {e}", dir.display())))?;
    if !real.is_dir() {
        return Err(CliError::input(format!(
            "--cwd {}: not a directory",
            dir.display()
        )));
    }
    std::env::set_current_dir(&real)
        .map_err(|e| CliError::input(format!("--cwd {}: {e}", dir.display())))?;
    std::env::set_var("PWD", &real);
    Ok(real)
}

/// The async runtime a run lives on: one thread, the caller's. A run is
/// mostly waiting (for the model's stream, a tool's process), and its CPU
/// work is short; worker threads would add their start, a hand-off at each
/// wake-up and their joins at the end (0.4–0.9 ms of a four-turn run's
/// wall time, 0.6–0.8 ms of its CPU, in bench/README.md). What must not
/// stall the run is on other threads: tree walks and large files go to
/// tokio's blocking pool (small files are read and written in place, where
/// they take less than the hand-off), and codemode's QuickJS and each
/// subagent child run on threads of their own.
fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::input(format!("cannot start the runtime: {e}")))
}
