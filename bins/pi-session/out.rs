//! Output helpers: a buffered stdout that turns a closed pipe into a quiet
//! exit, JSONL records, and terminal-width text truncation.

use std::io::{BufWriter, Stdout, Write};

use pi_lib::cli::{is_broken_pipe, CliError};

/// Buffered stdout.
pub struct Out {
    w: BufWriter<Stdout>,
}

/// Maps an I/O error: a closed pipe ends quietly (exit 0), others are errors.
pub fn io_err(e: std::io::Error) -> CliError {
    if is_broken_pipe(&e) {
        CliError {
            message: String::new(),
            hint: None,
            code: 0,
        }
    } else {
        CliError::input(e.to_string())
    }
}

impl Out {
    pub fn new() -> Self {
        Out {
            w: BufWriter::with_capacity(64 * 1024, std::io::stdout()),
        }
    }

    /// Writes one JSON record and a newline.
    pub fn record<T: serde::Serialize>(&mut self, r: &T) -> Result<(), CliError> {
        serde_json::to_writer(&mut self.w, r).map_err(|e| io_err(e.into()))?;
        self.w.write_all(b"\n").map_err(io_err)
    }

    /// Writes a line of text.
    pub fn line(&mut self, s: &str) -> Result<(), CliError> {
        self.w.write_all(s.as_bytes()).map_err(io_err)?;
        self.w.write_all(b"\n").map_err(io_err)
    }

    /// Writes raw text.
    pub fn raw(&mut self, s: &str) -> Result<(), CliError> {
        self.w.write_all(s.as_bytes()).map_err(io_err)
    }

    pub fn flush(&mut self) -> Result<(), CliError> {
        self.w.flush().map_err(io_err)
    }
}

/// The terminal width (`$COLUMNS`, else 120).
pub fn term_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&w: &usize| w >= 40)
        .unwrap_or(120)
}

/// One line of at most `max` characters: newlines become spaces, an
/// ellipsis marks a cut.
pub fn clip(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        return flat.to_string();
    }
    let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Pads or clips to exactly `w` characters.
pub fn cell(s: &str, w: usize) -> String {
    let c = clip(s, w);
    let n = c.chars().count();
    format!("{c}{}", " ".repeat(w.saturating_sub(n)))
}
