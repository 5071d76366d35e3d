//! Output helpers: a buffered stdout that turns a closed pipe into a quiet
//! exit, JSONL records, and terminal-width text truncation.

use std::io::Write;

use pi_lib::cli::CliError;
pub use pi_lib::terminal::{clean_for_terminal, clip};

/// Buffered stdout. Text written to a terminal is cleaned of control
/// characters (see [`clean_for_terminal`]), so session content cannot send
/// escape sequences to the user's terminal; JSON records and pipes get it
/// verbatim.
pub struct Out {
    w: pi_lib::cli::Stdout,
    terminal: bool,
}

/// Maps a write error on stdout: a closed pipe ends quietly (exit 0),
/// others exit 1 (see [`pi_lib::cli::stdout_error`]).
pub fn io_err(e: std::io::Error) -> CliError {
    pi_lib::cli::stdout_error(e)
}

impl Out {
    pub fn new() -> Self {
        use std::io::IsTerminal;
        Out {
            w: pi_lib::cli::Stdout::new(),
            terminal: std::io::stdout().is_terminal(),
        }
    }

    fn text<'a>(&self, s: &'a str) -> std::borrow::Cow<'a, str> {
        if self.terminal {
            clean_for_terminal(s)
        } else {
            std::borrow::Cow::Borrowed(s)
        }
    }

    /// Writes one JSON record and a newline.
    pub fn record<T: serde::Serialize>(&mut self, r: &T) -> Result<(), CliError> {
        serde_json::to_writer(&mut self.w, r).map_err(|e| io_err(e.into()))?;
        self.w.write_all(b"\n").map_err(io_err)
    }

    /// Writes a line of text.
    pub fn line(&mut self, s: &str) -> Result<(), CliError> {
        let s = self.text(s);
        self.w.write_all(s.as_bytes()).map_err(io_err)?;
        self.w.write_all(b"\n").map_err(io_err)
    }

    /// Writes raw text.
    pub fn raw(&mut self, s: &str) -> Result<(), CliError> {
        let s = self.text(s);
        self.w.write_all(s.as_bytes()).map_err(io_err)
    }

    pub fn flush(&mut self) -> Result<(), CliError> {
        self.w.flush().map_err(io_err)
    }
}

/// The terminal width (`$COLUMNS`, else the terminal's size, else 120).
pub fn term_width() -> usize {
    pi_lib::terminal::width(120)
}

/// Pads or clips to exactly `w` characters.
pub fn cell(s: &str, w: usize) -> String {
    let c = clip(s, w);
    let n = c.chars().count();
    format!("{c}{}", " ".repeat(w.saturating_sub(n)))
}
