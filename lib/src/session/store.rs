//! A session being written by a run: the in-memory session plus pi's lazy
//! persistence. A new session exists only in memory until its first `user`
//! or `assistant` message (or an entry an extension appends on purpose);
//! then the header and everything buffered are written in one go, and from
//! then on each entry is appended as one line the moment it exists — a
//! crash loses at most the message in flight.
//!
//! Other processes may write the same file meanwhile (`pi-session label`,
//! `branch`, another run). Every append goes through
//! [`Session::append_children`], which takes the file's lock, reads what
//! they added (a moved leaf included) into this copy, and only then decides
//! the new entry's parent: the file's current leaf. A new file that another
//! process created first is continued, not failed on. A session created
//! for an exact id (`--session-id`) claims that id in its folder: under
//! the folder's lock, a file with that id that another run wrote
//! meanwhile is continued instead of a second file made, so concurrent
//! runs with one new id share one session.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Map;

use crate::format::entry::{
    CustomMessageEntry, MessageEntry, ModelChangeEntry, ThinkingLevelChangeEntry,
};
use crate::format::{AgentMessage, Entry, SessionHeader};
use crate::paths::session_file_name;
use crate::timefmt::now_iso;

use super::file::HeldFile;
use super::ids::new_session_id;
use super::session::{DiskState, Session};
use super::write::create_new_file;

/// The session of a run and where it is written.
#[derive(Debug)]
pub struct SessionStore {
    pub session: Session,
    /// `None` = `--no-session` (memory only).
    path: Option<PathBuf>,
    /// Whether the file exists yet.
    flushed: bool,
    /// The folder and id this new session claims: when the file is first
    /// written, a session with this id already in the folder is continued.
    claim: Option<(PathBuf, String)>,
}

impl SessionStore {
    /// A new session for `cwd`, to be written under `dir` (or nowhere).
    pub fn create(cwd: &str, dir: Option<&Path>, parent: Option<String>) -> SessionStore {
        SessionStore::create_named(cwd, dir, None, parent)
    }

    /// [`SessionStore::create`] with an exact session id (`None`: a new
    /// one); pi names the file `<timestamp>_<id>.jsonl`.
    pub fn create_named(
        cwd: &str,
        dir: Option<&Path>,
        id: Option<&str>,
        parent: Option<String>,
    ) -> SessionStore {
        let id = id.map_or_else(new_session_id, str::to_string);
        let ts = now_iso();
        let path = dir.map(|d| d.join(session_file_name(&ts, &id)));
        let header = SessionHeader::new(id, ts, cwd.to_string(), parent);
        let session = Session::empty(path.clone().unwrap_or_default(), header);
        SessionStore {
            session,
            path,
            flushed: false,
            claim: None,
        }
    }

    /// A new session with the exact id `id` in `dir` that continues the
    /// folder's session with that id if another process writes one first
    /// (`--session-id` for an id not found when the run started).
    pub fn create_claiming(cwd: &str, dir: &Path, id: &str) -> SessionStore {
        let mut s = SessionStore::create_named(cwd, Some(dir), Some(id), None);
        s.claim = Some((dir.to_path_buf(), id.to_string()));
        s
    }

    /// A new session at an exact path (pi's `--session NEW.jsonl`).
    pub fn create_at(cwd: &str, path: PathBuf) -> SessionStore {
        let header = SessionHeader::new(new_session_id(), now_iso(), cwd.to_string(), None);
        SessionStore {
            session: Session::empty(path.clone(), header),
            path: Some(path),
            flushed: false,
            claim: None,
        }
    }

    /// An existing session file, appended to.
    pub fn open(session: Session) -> SessionStore {
        let path = Some(session.path.clone());
        SessionStore {
            session,
            path,
            flushed: true,
            claim: None,
        }
    }

    /// An existing session held in memory only: nothing appended to it is
    /// written (a plan reads a session without touching it).
    pub fn detached(session: Session) -> SessionStore {
        SessionStore {
            session,
            path: None,
            flushed: false,
            claim: None,
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

    /// Writes `text`, the whole session, as the new file at the store's
    /// path (whole or not at all); `AlreadyExists` when a file is there.
    pub(crate) fn write_new(&mut self, text: &str) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let path = self
            .path
            .clone()
            .ok_or_else(|| io::Error::other("the session is kept in memory only"))?;
        let (meta, file) = create_new_file(&path, text.as_bytes())?;
        self.session.held = HeldFile::new(file);
        self.session.disk = Some(DiskState {
            len: text.len() as u64,
            newlines: self.session.entries.len() + 1,
            dev: meta.dev(),
            ino: meta.ino(),
        });
        for (i, line) in self.session.lines.iter_mut().enumerate() {
            *line = i + 2;
        }
        self.flushed = true;
        Ok(())
    }

    /// Writes the buffered session as a new file (nothing without a
    /// path). When another process created the file first, its session is
    /// taken over: its header wins and the buffered entries are appended
    /// below its leaf.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let Some((dir, id)) = self.claim.clone() else {
            return self.write_or_continue(path);
        };
        // The folder's lock is held from the look for the id to the file
        // being in place, so a second claimant finds it.
        std::fs::create_dir_all(&dir)?;
        let lock = std::fs::File::open(&dir)?;
        lock.lock()?;
        let result = match super::open::with_id(&dir, &id) {
            Some(existing) => {
                self.path = Some(existing.clone());
                self.continue_file(existing)
            }
            None => self.write_or_continue(path),
        };
        drop(lock);
        if result.is_ok() {
            self.claim = None;
        }
        result
    }

    /// Writes the new file, or continues it when another process created
    /// it first.
    fn write_or_continue(&mut self, path: PathBuf) -> io::Result<()> {
        match self.write_new(&self.session.to_jsonl()) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self.continue_file(path),
            r => r,
        }
    }

    /// Takes over the session another process wrote at `path`: its header
    /// wins and the buffered entries are appended below its leaf.
    fn continue_file(&mut self, path: PathBuf) -> io::Result<()> {
        let buffered = std::mem::take(&mut self.session.entries);
        self.session = Session::empty(path, self.session.header.clone());
        self.session.append_children(buffered, false)?;
        self.flushed = true;
        Ok(())
    }

    /// Adds an entry as a child of the session's leaf (in memory, then on
    /// disk as pi would). Once the file exists, the parent is decided under
    /// the file's lock from its current leaf, and the id is drawn again if
    /// another writer took it; the entry as written is returned.
    pub fn append(&mut self, entry: Entry) -> io::Result<Entry> {
        self.append_ref(entry).cloned()
    }

    /// [`SessionStore::append`] without a copy: the entry as written, where
    /// it now is in the session.
    pub fn append_ref(&mut self, entry: Entry) -> io::Result<&Entry> {
        let triggers_flush = matches!(
            entry.message(),
            Some(AgentMessage::User(_)) | Some(AgentMessage::Assistant(_))
        );
        if self.flushed && self.path.is_some() {
            self.session.append_children_in_place(vec![entry], false)?;
        } else {
            self.session.push(entry);
            if triggers_flush && !self.flushed {
                self.flush()?;
            }
        }
        self.session
            .entries
            .last()
            .ok_or_else(|| io::Error::other("nothing appended"))
    }

    /// [`SessionStore::append_ref`] for an entry appended on purpose and
    /// reported as written (an extension's `appendEntry`, a session name,
    /// a label): a new session's file is written now, with everything
    /// buffered, instead of at its first message, so the entry is not lost
    /// when the run ends before one (`/note text` as the whole prompt).
    pub fn append_persisted(&mut self, entry: Entry) -> io::Result<&Entry> {
        self.append_ref(entry)?;
        if !self.flushed && self.path.is_some() {
            self.flush()?;
        }
        self.session
            .entries
            .last()
            .ok_or_else(|| io::Error::other("nothing appended"))
    }

    /// The entry recording `message`, child of the leaf: a `message`
    /// entry, except that an extension's `custom` message is recorded as a
    /// `custom_message` entry, as pi records it.
    pub fn message_entry(&self, message: AgentMessage) -> Entry {
        if let AgentMessage::Custom(c) = message {
            return Entry::CustomMessage(Box::new(CustomMessageEntry {
                custom_type: c.custom_type,
                content: c.content,
                display: c.display,
                details: c.details,
                id: self.session.fresh_id(),
                parent_id: self.session.leaf_id().map(str::to_string),
                timestamp: now_iso(),
                extra: Map::new(),
            }));
        }
        Entry::Message(Box::new(MessageEntry {
            id: self.session.fresh_id(),
            parent_id: self.session.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            message,
            extra: Map::new(),
        }))
    }

    /// A `model_change` entry, child of the leaf.
    pub fn model_change_entry(&self, provider: &str, model_id: &str) -> Entry {
        Entry::ModelChange(Box::new(ModelChangeEntry {
            id: self.session.fresh_id(),
            parent_id: self.session.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            provider: provider.to_string(),
            model_id: model_id.to_string(),
            extra: Map::new(),
        }))
    }

    /// A `thinking_level_change` entry, child of the leaf.
    pub fn thinking_entry(&self, level: &str) -> Entry {
        Entry::ThinkingLevelChange(Box::new(ThinkingLevelChangeEntry {
            id: self.session.fresh_id(),
            parent_id: self.session.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            thinking_level: level.to_string(),
            extra: Map::new(),
        }))
    }
}
