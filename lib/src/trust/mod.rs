//! Project trust, exactly as pi 1.6.0 decides it (`reference/pi-v1x.md`
//! §1): a project folder can carry executable extensions and settings, so
//! nothing project-level may load before this module says the folder is
//! trusted.
//!
//! * [`protected_paths`] — which resources make a decision necessary.
//! * [`TrustStore`] — `<agentDir>/trust.json`, shared with the real pi
//!   (same bytes, same lock).
//! * [`decide`] / [`decide_with`] — pi's decision order, including the
//!   interactive prompt.
//!
//! `tests/trust_matrix.rs` replays every cell of the trust matrix recorded
//! from pi 1.6.0 itself (`tests/fixtures/trust/matrix.json`).

mod decide;
mod protected;
mod store;

use std::path::{Path, PathBuf};

pub use decide::{
    ask_on, decide_with, default_project_trust, is_interactive, terminal_prompt, trust_choices,
    DecideInput, TrustChoice, TrustPrompt, TrustPrompter, PROMPT_MESSAGE, PROMPT_TITLE,
};
pub use protected::{canonicalize_dir, protected_paths, CONFIG_DIR, PROTECTED_PI_ENTRIES};
pub use store::{SavedDecision, TrustEntries, TrustStore, TrustUpdate, TRUST_FILE};

use serde::Serialize;

/// `-a/--approve`, `-na/--no-approve`, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliTrust {
    Approve,
    NoApprove,
    Unset,
}

/// `defaultProjectTrust` from the global settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultTrust {
    Ask,
    Always,
    Never,
}

/// Why the project is (not) trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustReason {
    /// `-a` / `-na`.
    Cli,
    /// Nothing under the cwd needs a decision (and nothing saved says no).
    NoProtectedResources,
    /// An extension answered `project_trust`.
    Hook,
    /// `trust.json` has a decision for this path or an ancestor.
    Saved,
    /// `defaultProjectTrust` is `always` or `never`.
    DefaultSetting,
    /// Not interactive, nothing decided: untrusted.
    NonInteractive,
    /// The user answered the prompt.
    Prompt,
}

/// The decision and how it came about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrustOutcome {
    pub trusted: bool,
    pub reason: TrustReason,
    /// The protected paths that made a decision necessary.
    #[serde(rename = "protectedPaths")]
    pub protected_paths: Vec<PathBuf>,
    /// For `Saved`: the trust.json key that decided. For `Hook` and
    /// `Prompt`: the key the decision was saved under, if it was saved.
    #[serde(rename = "savedPath", skip_serializing_if = "Option::is_none")]
    pub saved_path: Option<PathBuf>,
}

/// What an extension answers to `project_trust` (the seam for the
/// extensions stage): `Some((trusted, remember))` or `None` (undecided).
pub type TrustHook<'a> = &'a mut dyn FnMut(&Path) -> Option<(bool, bool)>;

/// Errors reading or writing trust state. The store variants are worded as
/// pi words them and always name the file.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{0}")]
    Message(String),
    /// Unreadable file (`corrupt: false`) or bad JSON (`corrupt: true`).
    #[error("Failed to read trust store {}: {message}", path.display())]
    Read {
        path: PathBuf,
        message: String,
        corrupt: bool,
    },
    /// Valid JSON of the wrong shape.
    #[error("Invalid trust store {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    /// The lock `trust.json.lock` could not be taken.
    #[error("Failed to lock trust store {}: {message}", path.display())]
    Lock { path: PathBuf, message: String },
    /// The new contents could not be written.
    #[error("Failed to write trust store {}: {message}", path.display())]
    Write { path: PathBuf, message: String },
}

impl TrustError {
    /// The file the error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            TrustError::Message(_) => None,
            TrustError::Read { path, .. }
            | TrustError::Invalid { path, .. }
            | TrustError::Lock { path, .. }
            | TrustError::Write { path, .. } => Some(path),
        }
    }

    /// Whether the store's contents are bad (bad JSON, wrong shape) rather
    /// than the disk or the lock being in the way. Such a file is left
    /// alone until a person fixes it.
    pub fn is_corrupt_store(&self) -> bool {
        match self {
            TrustError::Invalid { .. } => true,
            TrustError::Read { corrupt, .. } => *corrupt,
            _ => false,
        }
    }
}

/// Decides whether `cwd` is trusted, in pi 1.6.0's order (see
/// [`decide_with`]), with the real `$HOME`. When nothing else decides and
/// `interactive` is set (pass [`is_interactive`]), the user is asked on the
/// terminal: a numbered menu on stderr, one line read from stdin.
pub fn decide(
    cwd: &Path,
    agent_dir: &Path,
    cli: CliTrust,
    hook: Option<TrustHook<'_>>,
    interactive: bool,
) -> Result<TrustOutcome, TrustError> {
    let home = crate::paths::home_dir();
    decide_with(DecideInput {
        cwd,
        agent_dir,
        home: &home,
        cli,
        hook,
        interactive,
        prompter: None,
    })
}
