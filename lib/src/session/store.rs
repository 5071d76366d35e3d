//! A session being written by a run: the in-memory session plus pi's lazy
//! persistence. A new session exists only in memory until its first `user`
//! or `assistant` message; then the header and everything buffered are
//! written in one go, and from then on each entry is appended as one line
//! the moment it exists — a crash loses at most the message in flight.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Map;

use crate::format::entry::{MessageEntry, ModelChangeEntry, ThinkingLevelChangeEntry};
use crate::format::{AgentMessage, Entry, SessionHeader};
use crate::paths::session_file_name;
use crate::timefmt::now_iso;

use super::ids::new_session_id;
use super::write::append_lines_with;
use super::Session;

/// The session of a run and where it is written.
#[derive(Debug)]
pub struct SessionStore {
    pub session: Session,
    /// `None` = `--no-session` (memory only).
    path: Option<PathBuf>,
    /// Whether the file exists yet.
    flushed: bool,
}

impl SessionStore {
    /// A new session for `cwd`, to be written under `dir` (or nowhere).
    pub fn create(cwd: &str, dir: Option<&Path>, parent: Option<String>) -> SessionStore {
        let id = new_session_id();
        let ts = now_iso();
        let header = SessionHeader::new(id.clone(), ts.clone(), cwd.to_string(), parent);
        let path = dir.map(|d| d.join(session_file_name(&ts, &id)));
        let session = Session::empty(path.clone().unwrap_or_default(), header);
        SessionStore {
            session,
            path,
            flushed: false,
        }
    }

    /// A new session at an exact path (pi's `--session NEW.jsonl`).
    pub fn create_at(cwd: &str, path: PathBuf) -> SessionStore {
        let header = SessionHeader::new(new_session_id(), now_iso(), cwd.to_string(), None);
        SessionStore {
            session: Session::empty(path.clone(), header),
            path: Some(path),
            flushed: false,
        }
    }

    /// An existing session file, appended to.
    pub fn open(session: Session) -> SessionStore {
        let path = Some(session.path.clone());
        SessionStore {
            session,
            path,
            flushed: true,
        }
    }

    /// Where the session is (or will be) written.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether the file exists.
    pub fn is_persisted(&self) -> bool {
        self.flushed
    }

    fn write_all_buffered(&mut self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
        f.write_all(self.session.to_jsonl().as_bytes())?;
        self.flushed = true;
        Ok(())
    }

    /// Adds an entry (in memory, then on disk as pi would).
    pub fn append(&mut self, entry: Entry) -> std::io::Result<()> {
        let line = entry.to_line();
        let triggers_flush = matches!(
            entry.message(),
            Some(AgentMessage::User(_)) | Some(AgentMessage::Assistant(_))
        );
        self.session.push(entry);
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        if self.flushed {
            append_lines_with(&path, &[line], false)
        } else if triggers_flush {
            self.write_all_buffered(&path)
        } else {
            Ok(())
        }
    }

    /// A `message` entry for `message`, child of the leaf.
    pub fn message_entry(&self, message: AgentMessage) -> Entry {
        Entry::Message(MessageEntry {
            id: self.session.fresh_id(),
            parent_id: self.session.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            message,
            extra: Map::new(),
        })
    }

    /// A `model_change` entry, child of the leaf.
    pub fn model_change_entry(&self, provider: &str, model_id: &str) -> Entry {
        Entry::ModelChange(ModelChangeEntry {
            id: self.session.fresh_id(),
            parent_id: self.session.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            provider: provider.to_string(),
            model_id: model_id.to_string(),
            extra: Map::new(),
        })
    }

    /// A `thinking_level_change` entry, child of the leaf.
    pub fn thinking_entry(&self, level: &str) -> Entry {
        Entry::ThinkingLevelChange(ThinkingLevelChangeEntry {
            id: self.session.fresh_id(),
            parent_id: self.session.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            thinking_level: level.to_string(),
            extra: Map::new(),
        })
    }
}
