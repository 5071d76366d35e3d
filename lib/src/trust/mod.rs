//! Project trust, exactly as pi 1.6.0 decides it (being written: this is
//! the contract other modules build on; see `reference/pi-v1x.md` §1).

use std::path::{Path, PathBuf};

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
    /// For `Saved`: the trust.json key that decided.
    #[serde(rename = "savedPath", skip_serializing_if = "Option::is_none")]
    pub saved_path: Option<PathBuf>,
}

/// What an extension answers to `project_trust` (the seam for the
/// extensions stage): `Some((trusted, remember))` or `None` (undecided).
pub type TrustHook<'a> = &'a mut dyn FnMut(&Path) -> Option<(bool, bool)>;

/// Errors reading or writing trust state.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{0}")]
    Message(String),
}

/// Decides whether `cwd` is trusted (non-interactive unless `interactive`).
pub fn decide(
    _cwd: &Path,
    _agent_dir: &Path,
    _cli: CliTrust,
    _hook: Option<TrustHook<'_>>,
    _interactive: bool,
) -> Result<TrustOutcome, TrustError> {
    Err(TrustError::Message("project trust is not implemented yet".into()))
}
