//! What every binary's command line shares: output format choice (text on
//! a terminal, JSONL in a pipe), error reporting and exit codes, stdout that
//! never panics (a closed pipe ends quietly, a full disk is an error, never
//! a silent success), `--generate` for man pages and shell completions
//! ([`generate`]), unknown long options ([`unknown`]), pi's tool and
//! resource options ([`ToolArgs`], [`ResourceArgs`]) and pi's multi-letter
//! short forms ([`rewrite_pi_aliases`]).

mod generate;
mod unknown;

pub use generate::{generate, render_man, Generate};
pub use unknown::{closest, split_unknown_options, Pending};

use std::io::{IsTerminal, Write};

/// Exit status: success (warnings allowed).
pub const EXIT_OK: i32 = 0;
/// Exit status: the command ran but did not succeed (e.g. no match).
pub const EXIT_FAILED: i32 = 1;
/// Exit status: usage, configuration or input error.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: a limit of the run was reached (`--max-turns`,
/// `--max-cost`, `--timeout`); what ran is saved.
pub const EXIT_LIMIT: i32 = 3;
/// Exit status: the final answer did not match `--output-schema` after the
/// retries.
pub const EXIT_OUTPUT_SCHEMA: i32 = 4;
/// Exit status: the requested sandbox could not be set up (pi-run fails
/// closed before any model request).
pub const EXIT_SANDBOX: i32 = 5;
/// Exit status: interrupted (SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit status: hung up (SIGHUP), 128 + 1.
pub const EXIT_HANGUP: i32 = 129;
/// Exit status: terminated (SIGTERM), 128 + 15.
pub const EXIT_TERMINATED: i32 = 143;
/// Exit status: a run stopped because its stdout was closed (the reader
/// went away), 128 + SIGPIPE like a process killed by it.
pub const EXIT_CLOSED_STDOUT: i32 = 141;

/// The exit-status table every binary prints in its `--help` and man
/// page, word for word: one meaning per code across the toolkit. A string
/// literal, so a binary's help text can `concat!` it.
#[macro_export]
macro_rules! exit_status_table {
    () => {
        "Exit status: one table for pi-run, pi-session, pi-resources and pi-prompt
  0    success (warnings allowed)
  1    failed: the command ran but did not succeed (a model or provider
       error, a failed write, nothing found, stdout could not be written)
  2    usage, configuration or input error (bad flag, unknown model,
       missing or malformed file); for pi-run: before any model request
  3    a limit was reached (--max-turns, --max-cost, --timeout); what ran
       is saved (pi-run)
  4    the final answer did not match --output-schema after
       --output-retries retries (pi-run)
  5    the sandbox could not be set up (--sandbox); nothing ran (pi-run)
  129  hung up (SIGHUP)
  130  interrupted (SIGINT)
  141  stdout was closed while pi-run ran (the others end quietly with 0)
  143  terminated (SIGTERM)"
    };
}

/// `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Tables and trees for people.
    Text,
    /// One JSON object per line.
    Jsonl,
}

/// Resolves `--format`: explicit wins, else text on a terminal, JSONL otherwise.
pub fn resolve_format(explicit: Option<OutputFormat>) -> OutputFormat {
    explicit.unwrap_or_else(|| {
        if std::io::stdout().is_terminal() {
            OutputFormat::Text
        } else {
            OutputFormat::Jsonl
        }
    })
}

/// An error for the user: a one-line message, optional hint, and exit code.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub hint: Option<String>,
    pub code: i32,
}

impl CliError {
    /// A usage / input error (exit 2).
    pub fn input(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            hint: None,
            code: EXIT_USAGE,
        }
    }

    /// A "ran but failed" error (exit 1).
    pub fn failed(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            hint: None,
            code: EXIT_FAILED,
        }
    }

    /// The sandbox could not be set up (exit 5).
    pub fn sandbox(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            hint: None,
            code: EXIT_SANDBOX,
        }
    }

    /// An error that ends the command with `code` and prints nothing (a
    /// closed stdout).
    pub fn quiet(code: i32) -> Self {
        CliError {
            message: String::new(),
            hint: None,
            code,
        }
    }

    /// Adds a `hint:` line.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::input(e.to_string())
    }
}

/// Whether an I/O error is a closed pipe (`| head`), which ends quietly.
pub fn is_broken_pipe(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

/// A failed write to stdout as an error for the user: a closed pipe (the
/// reader had enough, `| head`) ends quietly with 0; anything else (a full
/// disk, `>/dev/full`) is `cannot write to stdout: …` with exit 1, so lost
/// output never looks like success.
pub fn stdout_error(e: std::io::Error) -> CliError {
    if is_broken_pipe(&e) {
        CliError::quiet(EXIT_OK)
    } else {
        CliError::failed(format!("cannot write to stdout: {e}"))
    }
}

/// Stdout for a command's output. `print!`/`println!` panic on a closed
/// pipe (Rust ignores SIGPIPE) and a `BufWriter` dropped unflushed swallows
/// the last error, so every binary writes through this: buffered, errors
/// returned, and [`Stdout::finish`] flushes and classifies them with
/// [`stdout_error`].
pub struct Stdout {
    w: std::io::BufWriter<std::io::Stdout>,
}

impl Default for Stdout {
    fn default() -> Self {
        Self::new()
    }
}

impl Stdout {
    pub fn new() -> Self {
        Stdout {
            w: std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout()),
        }
    }

    /// Writes one JSON value as a line and flushes it (event streams: each
    /// line is out as soon as it exists, and a closed reader is noticed at
    /// once).
    pub fn record<T: serde::Serialize + ?Sized>(&mut self, v: &T) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.w, v)?;
        self.w.write_all(b"\n")?;
        self.w.flush()
    }

    /// Flushes everything; the error as [`stdout_error`] words it.
    pub fn finish(mut self) -> Result<(), CliError> {
        self.w.flush().map_err(stdout_error)
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.w.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.w.write_all(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// Parses the command line like `C::parse_from`, but prints `--help` and
/// `--version` through [`stdout_error`]'s rules (clap exits 0 even when
/// the text could not be written) and usage errors on stderr with exit 2.
pub fn parse_or_exit<C: clap::Parser>(
    prog: &str,
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> C {
    parse_with_or_exit(prog, &mut C::command(), args)
}

/// [`parse_or_exit`] with a command built already (a program that looks at
/// its command before parsing builds it once: a large command takes a
/// noticeable part of a short run to build).
pub fn parse_with_or_exit<C: clap::FromArgMatches>(
    prog: &str,
    cmd: &mut clap::Command,
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> C {
    let parsed = cmd
        .try_get_matches_from_mut(args)
        .and_then(|mut m| C::from_arg_matches_mut(&mut m).map_err(|e| e.format(cmd)));
    match parsed {
        Ok(c) => c,
        Err(e) if e.use_stderr() => e.exit(),
        Err(e) => {
            let mut out = Stdout::new();
            let text = if std::io::stdout().is_terminal() {
                e.render().ansi().to_string()
            } else {
                e.render().to_string()
            };
            let written = out
                .write_all(text.as_bytes())
                .map_err(stdout_error)
                .and_then(|_| out.finish());
            let code = match written {
                Ok(()) => EXIT_OK,
                Err(err) => report(prog, &err),
            };
            std::process::exit(code)
        }
    }
}

/// Prints `prog: error: …` (and the hint) on stderr and returns the code;
/// a quiet error (see [`CliError::quiet`]) prints nothing.
pub fn report(prog: &str, err: &CliError) -> i32 {
    let mut stderr = std::io::stderr().lock();
    let mut lines = err.message.lines();
    if let Some(first) = lines.next() {
        let _ = writeln!(stderr, "{prog}: error: {first}");
    }
    for l in lines {
        let _ = writeln!(stderr, "{l}");
    }
    if let Some(h) = &err.hint {
        let _ = writeln!(stderr, "hint: {h}");
    }
    err.code
}

/// Prints `prog: message` on stderr (never panics, unlike `eprintln!`).
pub fn note(prog: &str, message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{prog}: {message}");
}

/// Prints a warning line on stderr.
pub fn warn(prog: &str, message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{prog}: warning: {message}");
}

/// pi 1.6.0's multi-letter short options and the long options they stand
/// for. clap's short options are one letter, so these are rewritten
/// before clap sees them ([`rewrite_pi_aliases`]).
pub const PI_SHORT_ALIASES: &[(&str, &str)] = &[
    ("-na", "--no-approve"),
    ("-nt", "--no-tools"),
    ("-nbt", "--no-builtin-tools"),
    ("-xt", "--exclude-tools"),
    ("-ne", "--no-extensions"),
    ("-ns", "--no-skills"),
    ("-np", "--no-prompt-templates"),
    ("-nc", "--no-context-files"),
];

/// Rewrites pi's multi-letter short options ([`PI_SHORT_ALIASES`]) to
/// their long forms, for every alias whose long option `cmd` (or one of
/// its subcommands) has — so every binary accepts pi's short form of each
/// flag it shares with pi. The value of an option is never rewritten
/// (`--name -nt` names the session "-nt", as in pi), and nothing after
/// `--` is.
pub fn rewrite_pi_aliases(
    args: impl Iterator<Item = std::ffi::OsString>,
    cmd: &clap::Command,
) -> Vec<std::ffi::OsString> {
    fn all_args(cmd: &clap::Command) -> Vec<&clap::Arg> {
        let mut v: Vec<&clap::Arg> = cmd.get_arguments().collect();
        for s in cmd.get_subcommands() {
            v.extend(all_args(s));
        }
        v
    }
    let known = all_args(cmd);
    let takes_one_value = |a: &&clap::Arg| {
        a.get_num_args()
            .is_some_and(|n| n.min_values() >= 1 && n.takes_values())
            || (a.get_num_args().is_none()
                && matches!(
                    a.get_action(),
                    clap::ArgAction::Set | clap::ArgAction::Append
                ))
    };
    let value_option = |s: &str| -> bool {
        if let Some(long) = s.strip_prefix("--") {
            return !long.contains('=')
                && known
                    .iter()
                    .filter(|a| a.get_long() == Some(long))
                    .any(takes_one_value);
        }
        let mut chars = s.chars();
        match (chars.next(), chars.next(), chars.next()) {
            (Some('-'), Some(c), None) => known
                .iter()
                .filter(|a| a.get_short() == Some(c))
                .any(takes_one_value),
            _ => false,
        }
    };
    let aliases: Vec<(&str, &str)> = PI_SHORT_ALIASES
        .iter()
        .filter(|(_, long)| {
            known
                .iter()
                .any(|a| a.get_long() == long.strip_prefix("--"))
        })
        .copied()
        .collect();
    let mut out = Vec::new();
    let mut rest = false;
    let mut value_next = false;
    for (i, a) in args.enumerate() {
        if i == 0 || rest || value_next {
            value_next = false;
            out.push(a);
            continue;
        }
        if a == "--" {
            rest = true;
            out.push(a);
            continue;
        }
        let rewritten = aliases
            .iter()
            .find(|(short, _)| a == *short)
            .map(|(_, long)| std::ffi::OsString::from(*long));
        let a = rewritten.unwrap_or(a);
        value_next = a.to_str().is_some_and(value_option);
        out.push(a);
    }
    out
}

/// The tool options of pi 1.6.0, shared by pi-run, pi-prompt and
/// pi-resources (resolved by [`crate::tools::select::resolve`]).
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolArgs {
    /// Active tools, comma-separated: names (read, bash, edit, write, grep,
    /// find, ls) or `*` patterns (`gr*`), replacing the defaults; or only
    /// `+name` / `-name` entries, which change the defaults (read, bash,
    /// edit, write, or settings.json `defaultTools`). Plain names and `+/-`
    /// entries cannot be mixed. A value starting with `-` is a value
    /// (`--tools -bash`). Repeated: the last one counts. Unknown names are
    /// warned about and ignored. pi-run pins a plain list in a session that
    /// has no pin yet, and a session's pin wins over every tool
    /// option and `defaultTools` (pi-run, pi-prompt diff; change it with
    /// `pi-session select-tool`).
    #[arg(
        short = 't',
        long,
        value_name = "LIST",
        allow_hyphen_values = true,
        overrides_with = "tools"
    )]
    pub tools: Option<String>,

    /// Remove these tools (comma-separated names or `*` patterns) after
    /// every other tool option (alias `-xt`).
    #[arg(
        long,
        value_name = "PATTERNS",
        allow_hyphen_values = true,
        overrides_with = "exclude_tools"
    )]
    pub exclude_tools: Option<String>,

    /// Start with no tools at all (alias `-nt`); `--tools` can still name
    /// some. The rest of the prompt stays.
    #[arg(long)]
    pub no_tools: bool,

    /// Start with no built-in tools (alias `-nbt`), keeping extension and
    /// MCP tools.
    #[arg(long)]
    pub no_builtin_tools: bool,

    /// Chat only: an empty tool selection (pi-run pins it in the
    /// session; undo with `pi-session select-tool --clear`); no extensions,
    /// skills, templates or base prompt — the context files are the whole
    /// system prompt.
    #[arg(long, conflicts_with_all = ["tools", "exclude_tools", "no_tools", "no_builtin_tools"])]
    pub chat_only: bool,
}

impl ToolArgs {
    /// The flags for [`crate::tools::select::resolve`].
    pub fn flags(&self) -> crate::tools::select::ToolFlags {
        crate::tools::select::ToolFlags {
            tools: self.tools.clone(),
            exclude: self.exclude_tools.clone(),
            no_tools: self.no_tools,
            no_builtin_tools: self.no_builtin_tools,
            chat_only: self.chat_only,
        }
    }
}

/// pi 1.6.0's resource options, shared by pi-run, pi-prompt and
/// pi-resources (so the same flags discover the same resources).
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceArgs {
    /// Load an extension file or folder (repeatable; kept with
    /// --no-extensions): pi's TS/JS extensions (run in the Node host) or
    /// an executable process extension (pi-run runs them; pi-resources and
    /// pi-prompt only list them).
    #[arg(
        short = 'e',
        long = "extension",
        value_name = "PATH",
        allow_hyphen_values = true
    )]
    pub extensions: Vec<std::path::PathBuf>,

    /// Do not discover extensions (alias `-ne`; explicit -e paths still
    /// load).
    #[arg(long)]
    pub no_extensions: bool,

    /// Load a skill file or folder (repeatable; kept with --no-skills).
    #[arg(long = "skill", value_name = "PATH", allow_hyphen_values = true)]
    pub skills: Vec<std::path::PathBuf>,

    /// Do not discover skills (alias `-ns`; explicit --skill paths still
    /// load).
    #[arg(long)]
    pub no_skills: bool,

    /// Load a prompt template file or folder (repeatable).
    #[arg(
        long = "prompt-template",
        value_name = "PATH",
        allow_hyphen_values = true
    )]
    pub prompt_templates: Vec<std::path::PathBuf>,

    /// Do not discover prompt templates (alias `-np`; explicit paths still
    /// load).
    #[arg(long)]
    pub no_prompt_templates: bool,

    /// Load a theme file or folder (repeatable). Themes only colour pi's
    /// terminal UI; they are listed, and change nothing in a run.
    #[arg(long = "theme", value_name = "PATH", allow_hyphen_values = true)]
    pub themes: Vec<std::path::PathBuf>,

    /// Do not discover themes (explicit --theme paths still load).
    #[arg(long)]
    pub no_themes: bool,

    /// Do not load AGENTS.md / CLAUDE.md context files (alias `-nc`).
    #[arg(long)]
    pub no_context_files: bool,
}

impl ResourceArgs {
    /// Sets the explicit paths and switches on `opts`.
    pub fn apply(&self, opts: &mut crate::resources::DiscoverOptions) {
        opts.extensions = self.extensions.clone();
        opts.no_extensions = self.no_extensions;
        opts.skills = self.skills.clone();
        opts.no_skills = self.no_skills;
        opts.prompt_templates = self.prompt_templates.clone();
        opts.no_prompt_templates = self.no_prompt_templates;
        opts.themes = self.themes.clone();
        opts.no_themes = self.no_themes;
        opts.no_context_files = self.no_context_files;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn cmd() -> Command {
        Command::new("x")
            .arg(
                Arg::new("no-tools")
                    .long("no-tools")
                    .action(ArgAction::SetTrue),
            )
            .arg(Arg::new("name").long("name").short('n'))
            .arg(Arg::new("m").num_args(0..))
    }

    fn rw(args: &[&str]) -> Vec<String> {
        rewrite_pi_aliases(args.iter().map(std::ffi::OsString::from), &cmd())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn aliases_only_where_the_long_option_exists_and_never_values() {
        assert_eq!(rw(&["x", "-nt", "-ns"]), ["x", "--no-tools", "-ns"]);
        assert_eq!(
            rw(&["x", "--name", "-nt", "-nt"]),
            ["x", "--name", "-nt", "--no-tools"]
        );
        assert_eq!(rw(&["x", "-n", "-nt"]), ["x", "-n", "-nt"]);
        assert_eq!(
            rw(&["x", "--name=a", "-nt"]),
            ["x", "--name=a", "--no-tools"]
        );
        assert_eq!(rw(&["x", "--", "-nt"]), ["x", "--", "-nt"]);
        assert_eq!(rw(&["-nt"]), ["-nt"]);
    }
}
