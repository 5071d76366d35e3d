//! What every binary's command line shares: output format choice (text on
//! a terminal, JSONL in a pipe), error reporting and exit codes, stdout that
//! never panics (a closed pipe ends quietly, a full disk is an error, never
//! a silent success), `--generate` for man pages and shell
//! completions, pi's tool and resource options ([`ToolArgs`],
//! [`ResourceArgs`]) and pi's multi-letter short forms
//! ([`rewrite_pi_aliases`]).

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

/// What `--generate` can render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generate {
    /// roff man page on stdout.
    Man,
    /// bash completion script.
    CompleteBash,
    /// zsh completion script.
    CompleteZsh,
    /// fish completion script.
    CompleteFish,
}

/// Renders a man page or completion script for `cmd` to `out`.
pub fn generate(
    mut cmd: clap::Command,
    what: Generate,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let name = cmd.get_name().to_string();
    match what {
        Generate::Man => render_man(cmd, out),
        Generate::CompleteBash => {
            let mut script = Vec::new();
            clap_complete::generate(
                clap_complete::Shell::Bash,
                &mut cmd,
                name.clone(),
                &mut script,
            );
            out.write_all(fix_bash_completion(&String::from_utf8_lossy(&script), &name).as_bytes())
        }
        Generate::CompleteZsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, name, out);
            Ok(())
        }
        Generate::CompleteFish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, name, out);
            Ok(())
        }
    }
}

/// Repairs clap_complete's bash script for a program whose name holds a
/// `-`. The script walks the words typed into a state named after the
/// program with `-` made `__` (`pi__session__subcmd__ls`), but it names
/// the `case` arms that offer each subcommand's options with `-` made
/// `__subcmd__` (`pi__subcmd__session__subcmd__ls`), so no arm ever
/// matches and subcommand options are never completed. The arms are
/// renamed to the state names.
fn fix_bash_completion(script: &str, bin: &str) -> String {
    if !bin.contains('-') {
        return script.to_string();
    }
    let wrong = bin.replace('-', "__subcmd__");
    let right = bin.replace('-', "__");
    script
        .lines()
        .map(|line| {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            match body.strip_prefix(&wrong) {
                Some(rest)
                    if rest.ends_with(')') && (rest == ")" || rest.starts_with("__subcmd__")) =>
                {
                    format!("{indent}{right}{rest}\n")
                }
                _ => format!("{line}\n"),
            }
        })
        .collect()
}

/// Escapes text for roff.
fn roff(s: &str) -> String {
    let mut out = s.replace('\\', "\\e").replace('-', "\\-");
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// Renders one man page for a command and all its subcommands: the usual
/// sections from clap_mangen, a COMMANDS section with every subcommand's
/// usage and options, and the after-help text (examples, exit status,
/// environment) verbatim.
pub fn render_man(mut cmd: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    let name = cmd.get_name().to_string();
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if !subs.is_empty() {
        writeln!(out, ".SH COMMANDS")?;
        for sub in subs {
            let mut sub = sub.clone();
            let usage = sub.render_usage().to_string();
            let usage = usage.trim_start_matches("Usage: ").to_string();
            writeln!(out, ".SS \"{} {}\"", name, sub.get_name())?;
            writeln!(out, "\\fB{}\\fR", roff(&usage))?;
            if let Some(about) = sub.get_long_about().or(sub.get_about()) {
                writeln!(out, ".PP")?;
                writeln!(out, "{}", roff(&about.to_string()))?;
            }
            for arg in sub
                .get_arguments()
                .filter(|a| !a.is_hide_set() && a.get_id() != "help")
            {
                let mut flag = Vec::new();
                if let Some(s) = arg.get_short() {
                    flag.push(format!("\\fB\\-{s}\\fR"));
                }
                if let Some(l) = arg.get_long() {
                    flag.push(format!("\\fB\\-\\-{}\\fR", roff(l)));
                }
                let value = arg
                    .get_value_names()
                    .map(|v| {
                        v.iter()
                            .map(|n| format!("<{n}>"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
                let head = if flag.is_empty() {
                    format!(
                        "\\fI{}\\fR",
                        roff(&format!("<{}>", arg.get_id()).to_uppercase())
                    )
                } else if takes_value {
                    format!(
                        "{} {}",
                        flag.join(", "),
                        roff(if value.is_empty() { "<VALUE>" } else { &value })
                    )
                } else {
                    flag.join(", ")
                };
                writeln!(out, ".TP")?;
                writeln!(out, "{head}")?;
                let mut help = arg
                    .get_long_help()
                    .or(arg.get_help())
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                let values: Vec<String> = arg
                    .get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                    .map(|v| v.get_name().to_string())
                    .collect();
                if !values.is_empty() && takes_value {
                    help.push_str(&format!(" [possible values: {}]", values.join(", ")));
                }
                writeln!(out, "{}", roff(&help))?;
            }
            if let Some(after) = sub.get_after_long_help().or(sub.get_after_help()) {
                writeln!(out, ".PP")?;
                verbatim(&after.to_string(), out)?;
            }
        }
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let sections = after_help_sections(&after.to_string());
        // man-pages(7) order: EXIT STATUS, ENVIRONMENT, NOTES, EXAMPLES.
        for title in ["EXIT STATUS", "ENVIRONMENT", "NOTES", "EXAMPLES"] {
            let text: Vec<&str> = sections
                .iter()
                .filter(|(t, _)| *t == title)
                .map(|(_, body)| body.as_str())
                .collect();
            if text.is_empty() {
                continue;
            }
            writeln!(out, ".SH {title}")?;
            verbatim(&text.join("\n\n"), out)?;
        }
    }
    man.render_version_section(out)
}

/// The after-help text split into man page sections: each blank-line
/// separated paragraph that opens with `Examples:`, `Exit status:` or
/// `Environment:` goes (without that heading word; the rest of its line
/// stays) to EXAMPLES, EXIT STATUS or ENVIRONMENT; every other paragraph
/// to NOTES. `--help` shows the same
/// text in one piece.
fn after_help_sections(after: &str) -> Vec<(&'static str, String)> {
    let mut sections: Vec<(&'static str, String)> = Vec::new();
    for para in after.split("\n\n") {
        let para = para.trim_matches('\n');
        if para.is_empty() {
            continue;
        }
        let (head, rest) = para.split_once('\n').unwrap_or((para, ""));
        let Some((title, tail)) = [
            ("Examples:", "EXAMPLES"),
            ("Exit status:", "EXIT STATUS"),
            ("Environment:", "ENVIRONMENT"),
        ]
        .iter()
        .find_map(|(h, t)| Some((*t, head.trim_end().strip_prefix(h)?.trim()))) else {
            sections.push(("NOTES", para.to_string()));
            continue;
        };
        // A heading line may go on ("Exit status: one table for …"): that
        // rest of the line opens the section.
        let body = match tail.chars().next() {
            None => rest.to_string(),
            Some(first) => format!(
                "{}{}\n{rest}",
                first.to_uppercase(),
                &tail[first.len_utf8()..]
            ),
        };
        sections.push((title, body));
    }
    sections
}

/// Writes text as a no-fill roff block (lines kept as written).
fn verbatim(text: &str, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, ".nf")?;
    for line in text.lines() {
        writeln!(out, "{}", roff(line))?;
    }
    writeln!(out, ".fi")
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
    match C::try_parse_from(args) {
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
    /// has no pin yet (seed 000), and a session's pin wins over every tool
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

    /// Chat only (seed 000): an empty tool selection (pi-run pins it in the
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

/// One unknown long option, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub name: String,
    /// `--name=value`.
    pub inline: Option<String>,
    /// The token after `--name`, when it was not an option.
    pub next: Option<String>,
    /// How many arguments clap got before this one (to put `next` back).
    pub at: usize,
    /// The command's own option closest to `name`, when one is close (a
    /// typo of a built-in option, unless an extension registers `name`).
    pub near: Option<String>,
}

/// The name among `candidates` closest to `name`, when it is close
/// enough to be the one meant (Jaro similarity, clap's measure and bar).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro(name, c), c))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Splits `args` (program name first) into what clap parses and the
/// long options `cmd` does not know (extension flags, resolved once the
/// extensions registered theirs): each set aside with the token after it
/// when that is not an option (it may be the flag's value or a message).
pub fn split_unknown_options(
    args: Vec<std::ffi::OsString>,
    cmd: &clap::Command,
) -> (Vec<std::ffi::OsString>, Vec<Pending>) {
    let mut longs: Vec<(String, bool)> = Vec::new();
    let mut shorts: Vec<(char, bool)> = Vec::new();
    for a in cmd.get_arguments() {
        let takes = a.get_action().takes_values();
        if let Some(l) = a.get_long() {
            longs.push((l.to_string(), takes));
        }
        for l in a.get_all_aliases().unwrap_or_default() {
            longs.push((l.to_string(), takes));
        }
        if let Some(s) = a.get_short() {
            shorts.push((s, takes));
        }
    }
    longs.push(("help".into(), false));
    let visible: Vec<String> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(str::to_string))
        .chain(["help".to_string()])
        .collect();
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let mut it = args.into_iter().peekable();
    if let Some(p) = it.next() {
        out.push(p);
    }
    while let Some(a) = it.next() {
        let Some(s) = a.to_str().map(str::to_string) else {
            out.push(a);
            continue;
        };
        if s == "--" {
            out.push(a);
            out.extend(it);
            break;
        }
        if let Some(body) = s.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (body.to_string(), None),
            };
            match longs.iter().find(|(l, _)| *l == name) {
                Some((_, takes)) => {
                    out.push(a);
                    if *takes && inline.is_none() {
                        if let Some(v) = it.next() {
                            out.push(v);
                        }
                    }
                }
                None => {
                    let next = if inline.is_none() {
                        match it.peek().and_then(|n| n.to_str()) {
                            Some(n) if !n.starts_with('-') => {
                                it.next().and_then(|n| n.into_string().ok())
                            }
                            _ => None,
                        }
                    } else {
                        None
                    };
                    let near =
                        closest(&name, visible.iter().map(String::as_str)).map(str::to_string);
                    pending.push(Pending {
                        name,
                        inline,
                        next,
                        at: out.len(),
                        near,
                    });
                }
            }
            continue;
        }
        // A known short option's value is not a message.
        let takes_short = s.len() == 2
            && s.starts_with('-')
            && shorts
                .iter()
                .any(|(c, t)| *t && s.chars().nth(1) == Some(*c));
        out.push(a);
        if takes_short {
            if let Some(v) = it.next() {
                out.push(v);
            }
        }
    }
    (out, pending)
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
