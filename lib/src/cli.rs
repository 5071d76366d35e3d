//! What every binary's command line shares: output format choice (text on
//! a terminal, JSONL in a pipe), error reporting and exit codes, quiet exit
//! on a closed stdout, and the hidden `--generate` for man pages and shell
//! completions.

use std::io::{IsTerminal, Write};

/// Exit status: success (warnings allowed).
pub const EXIT_OK: i32 = 0;
/// Exit status: the command ran but did not succeed (e.g. no match).
pub const EXIT_FAILED: i32 = 1;
/// Exit status: usage, configuration or input error.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: interrupted (SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;

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
        Generate::Man => clap_mangen::Man::new(cmd).render(out),
        Generate::CompleteBash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, name, out);
            Ok(())
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

/// Prints `prog: error: …` (and the hint) on stderr and returns the code.
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

/// Prints a warning line on stderr.
pub fn warn(prog: &str, message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{prog}: warning: {message}");
}
