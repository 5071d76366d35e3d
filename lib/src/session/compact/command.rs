//! Compactions and branch summaries that a command runs on a session file
//! (`pi-session compact`, `pi-session branch --summarize`), outside any
//! run: the project's settings as pi would trust them without asking, the
//! model that writes the summary (the flag, else the session's own model
//! at its leaf, else the settings defaults, with pi's selection, auth and
//! thinking rules), and the file as the host of the one orchestration
//! ([`super::run`]): no extensions, and the entry is appended under the
//! file's lock only while the leaf is still where the summary was
//! prepared.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::format::Entry;
use crate::model::select::{resolve_selection, SelectionDefaults, SelectionRequest};
use crate::model::ModelRegistry;
use crate::session::write::{AppendError, Migrated};
use crate::session::Session;
use crate::settings::Settings;

use super::run::{Event, Host};
use super::settings::CompactionSettings;
use super::summarize::SummaryModel;

/// The settings of the project in `cwd`, its own file read only when pi
/// would trust the project without asking.
pub fn project_settings(agent_dir: &Path, cwd: &Path) -> Result<Settings, String> {
    let trust = crate::trust::decide(cwd, agent_dir, crate::trust::CliTrust::Unset, None, false)
        .map_err(|e| e.to_string())?;
    Settings::load(agent_dir, cwd, trust.trusted).map_err(|e| e.to_string())
}

/// `keepRecentTokens` for a compaction: `flag`, else the settings for
/// `model` (`"provider/id"`).
pub fn keep_recent_tokens(
    settings: &Settings,
    model: Option<&str>,
    flag: Option<u64>,
) -> Result<u64, String> {
    let cs = CompactionSettings::from_settings(settings, model)?;
    Ok(flag.unwrap_or(cs.keep_recent_tokens))
}

/// The session's model at its leaf as `"provider/id"`, if any.
pub fn session_model(s: &Session) -> Option<String> {
    let path = s.leaf_id().map(|l| s.path_to(l)).unwrap_or_default();
    s.model_on_path(&path).0.map(|(p, id)| format!("{p}/{id}"))
}

/// The model that writes a summary of `s`: `model` (a flag), else the
/// session's model at its leaf, else the settings defaults; thinking is
/// the session's level. Also the selection's warnings, for the user.
pub fn summary_model(
    s: &Session,
    agent_dir: &Path,
    settings: &Settings,
    model: Option<&str>,
) -> Result<(SummaryModel, Vec<String>), String> {
    let registry = ModelRegistry::load(agent_dir).map_err(|e| e.to_string())?;
    let path = s.leaf_id().map(|l| s.path_to(l)).unwrap_or_default();
    let (session_model, thinking_level) = s.model_on_path(&path);
    let (provider, model) = match (model, &session_model) {
        (Some(m), _) => (None, Some(m.to_string())),
        (None, Some((p, id))) => (Some(p.clone()), Some(id.clone())),
        (None, None) => (None, None),
    };
    let req = SelectionRequest {
        provider,
        model,
        thinking: Some(thinking_level),
        api_key: None,
        scope: None,
        continuing: true,
    };
    let sel = resolve_selection(&registry, &req, &SelectionDefaults::from_settings(settings))
        .map_err(|e| e.to_string())?;
    let model = registry
        .resolve_headers(&sel.model, sel.api_key.as_deref())
        .map_err(|e| e.to_string())?;
    let m = SummaryModel {
        model,
        api_key: sel.api_key,
        thinking: sel.thinking,
        idle_timeout: settings
            .http_idle_timeout()
            .unwrap_or(Duration::from_secs(24 * 3600)),
        cancel: CancellationToken::new(),
        retry: settings.retry(),
        retry_events: None,
    };
    Ok((m, sel.warnings))
}

/// Why a command's summary entry was not written.
#[derive(Debug)]
pub enum WriteError {
    /// Another process moved the leaf while the model wrote (the file).
    LeafMoved(PathBuf),
    /// Reading or writing the file failed (the message names it).
    Io(String),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::LeafMoved(p) => write!(
                f,
                "{}: the session's leaf moved while the summary was written (another process appended); nothing written, run the command again",
                p.display()
            ),
            WriteError::Io(m) => f.write_str(m),
        }
    }
}

/// A session file as the host of a command's compaction or branch
/// summary. Events go to `on_event`; a file in an old format version is
/// migrated on disk before the append (reported to `on_migrated`); the
/// entry is appended durably, under the file's lock, only when the leaf is
/// still the one the summary was prepared at.
pub struct FileHost<'s> {
    session: &'s mut Session,
    leaf_before: Option<String>,
    on_event: Box<dyn FnMut(Event<'_>) + 's>,
    on_migrated: Box<dyn FnMut(&Migrated) + 's>,
}

impl<'s> FileHost<'s> {
    /// `session` as it is now: its leaf is the one the summary is
    /// prepared at.
    pub fn new(
        session: &'s mut Session,
        on_event: impl FnMut(Event<'_>) + 's,
        on_migrated: impl FnMut(&Migrated) + 's,
    ) -> FileHost<'s> {
        let leaf_before = session.leaf_id().map(str::to_string);
        FileHost {
            session,
            leaf_before,
            on_event: Box::new(on_event),
            on_migrated: Box::new(on_migrated),
        }
    }
}

impl Host for FileHost<'_> {
    type WriteError = WriteError;

    fn session(&self) -> &Session {
        self.session
    }

    fn event(&mut self, ev: Event<'_>) {
        (self.on_event)(ev)
    }

    fn append(
        &mut self,
        make: &mut dyn FnMut(&Session) -> Entry,
    ) -> Result<Vec<Entry>, WriteError> {
        let path = self.session.path.clone();
        let io =
            |e: std::io::Error| WriteError::Io(format!("{}: cannot append: {e}", path.display()));
        if let Some(m) = self.session.migrate_for_append().map_err(io)? {
            (self.on_migrated)(&m);
        }
        let before = &self.leaf_before;
        self.session
            .append_with(true, |s: &Session| {
                if s.leaf_id() != before.as_deref() {
                    return Err(());
                }
                Ok(vec![make(s)])
            })
            .map_err(|e| match e {
                AppendError::Refused(()) => WriteError::LeafMoved(path.clone()),
                AppendError::Io(e) => io(e),
            })
    }
}
