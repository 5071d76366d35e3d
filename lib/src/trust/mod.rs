//! Project trust, exactly as pi 1.6.0 decides it: a project folder can
//! carry executable extensions and settings, so nothing project-level
//! may load before this module says the folder is trusted.
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
pub use protected::{
    canonicalize_dir, protected_paths, CONFIG_DIR, PROFILE_DIRS, PROTECTED_PI_ENTRIES,
};
pub use store::{SavedDecision, TrustEntries, TrustStore, TrustUpdate, TRUST_FILE};

use serde::Serialize;

/// `-a/--approve`, `-na/--no-approve`, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliTrust {
    Approve,
    NoApprove,
    Unset,
}

impl CliTrust {
    /// The override the approve flags ask for (clap keeps only the last of
    /// `-a` / `-na`, so at most one is set).
    pub fn from_flags(approve: bool, no_approve: bool) -> CliTrust {
        if approve {
            CliTrust::Approve
        } else if no_approve {
            CliTrust::NoApprove
        } else {
            CliTrust::Unset
        }
    }
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

impl TrustOutcome {
    /// The decision as `pi-resources` and `pi-run --mode json` print it.
    pub fn record(&self) -> crate::format::resources::TrustRecord {
        let reason = serde_json::to_value(&self.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        crate::format::resources::TrustRecord {
            decision: if self.trusted { "trusted" } else { "untrusted" }.into(),
            trusted: self.trusted,
            reason,
            protected_paths: self.protected_paths.clone(),
            saved_path: self.saved_path.clone(),
            error: None,
        }
    }

    /// One line for a log saying what was decided and why — `None` when the
    /// project has no protected resources (nothing was at stake). Paths are
    /// shown relative to `cwd` where they lie under it.
    pub fn notice(&self, cwd: &Path) -> Option<String> {
        if self.protected_paths.is_empty() {
            return None;
        }
        let real = canonicalize_dir(cwd);
        let shown: Vec<String> = self
            .protected_paths
            .iter()
            .map(|p| {
                p.strip_prefix(&real)
                    .or_else(|_| p.strip_prefix(cwd))
                    .map(|r| r.display().to_string())
                    .unwrap_or_else(|_| p.display().to_string())
            })
            .collect();
        let mut paths = shown.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        if shown.len() > 3 {
            paths.push_str(&format!(" and {} more", shown.len() - 3));
        }
        let saved = || {
            self.saved_path
                .as_ref()
                .map(|p| format!(" for {}", p.display()))
                .unwrap_or_default()
        };
        let why = match (&self.reason, self.trusted) {
            (TrustReason::Cli, true) => "-a/--approve".to_string(),
            (TrustReason::Cli, false) => "-na/--no-approve".to_string(),
            (TrustReason::NoProtectedResources, _) => "nothing to protect".to_string(),
            (TrustReason::Hook, _) => "an extension decided".to_string(),
            (TrustReason::Saved, _) => format!("saved in trust.json{}", saved()),
            (TrustReason::DefaultSetting, t) => format!(
                "defaultProjectTrust is \"{}\"",
                if t { "always" } else { "never" }
            ),
            (TrustReason::NonInteractive, _) => "not interactive and no saved decision".to_string(),
            (TrustReason::Prompt, _) => "answered at the prompt".to_string(),
        };
        Some(if self.trusted {
            format!("project trusted ({why}): loading {paths}")
        } else {
            let hint = match self.reason {
                TrustReason::NonInteractive | TrustReason::DefaultSetting => {
                    "; -a trusts it for this run, `pi-resources trust allow` saves that"
                }
                TrustReason::Saved => "; -a trusts it for this run",
                _ => "",
            };
            format!("project untrusted ({why}): ignoring {paths}{hint}")
        })
    }
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
