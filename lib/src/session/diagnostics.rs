//! The problems found while reading a session file (a damaged line, a
//! dangling parent, a duplicate id), each tied to its file and line, kept
//! up to a small number per file and counted beyond it.

use std::fmt;
use std::path::{Path, PathBuf};

/// A problem found while reading, tied to a file and line. The command still
/// serves the rest of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub path: PathBuf,
    /// 1-based line number; 0 when the problem is not tied to a line.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
        } else {
            write!(f, "{}: {}", self.path.display(), self.message)
        }
    }
}

/// How many problems of one file are kept (and shown); the rest are counted.
pub const MAX_KEPT_DIAGNOSTICS: usize = 20;

/// The problems of one file: the first [`MAX_KEPT_DIAGNOSTICS`], and how
/// many there were in all. Every command reports them through
/// [`Diagnostics::warn`], so a file of a million bad lines costs a few lines
/// of stderr and no memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnostics {
    kept: Vec<Diagnostic>,
    total: usize,
}

impl Diagnostics {
    /// Records a problem (kept if there is room, counted always).
    pub fn push(&mut self, d: Diagnostic) {
        self.total += 1;
        if self.kept.len() < MAX_KEPT_DIAGNOSTICS {
            self.kept.push(d);
        }
    }

    /// The kept problems, in the order found.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.kept.iter()
    }

    /// How many problems there were (kept or not).
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Names the file in every kept problem.
    pub fn set_path(&mut self, path: &Path) {
        for d in &mut self.kept {
            d.path = path.to_path_buf();
        }
    }

    /// The warnings to show: the kept problems, then one line counting
    /// the others.
    pub fn messages(&self) -> Vec<String> {
        let mut out: Vec<String> = self.kept.iter().map(|d| d.to_string()).collect();
        let more = self.total - self.kept.len();
        if more > 0 {
            let path = self.kept.first().map(|d| d.path.display().to_string());
            out.push(format!(
                "{}: {more} more problem(s) not shown (only the first {} are)",
                path.unwrap_or_default(),
                self.kept.len()
            ));
        }
        out
    }

    /// Prints [`Diagnostics::messages`] as warnings of `prog`.
    pub fn warn(&self, prog: &str) {
        for m in self.messages() {
            crate::cli::warn(prog, &m);
        }
    }
}
