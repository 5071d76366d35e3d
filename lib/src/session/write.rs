//! Writing sessions without ever losing data or breaking the tree.
//!
//! * **Appends** take an exclusive lock on the file, read what other
//!   processes appended since this copy was read, and only then build the
//!   entries — so the parent an entry names (usually the leaf) is the file's
//!   real leaf, not a stale one. Every writer (`pi-session label/name/
//!   branch/select-tool`, `pi-run`) appends this way. Each batch is one
//!   `write` of whole lines, starting with a newline when the file ends
//!   mid-line (a crash), so new entries never merge into a damaged line.
//!   The file stays open between appends (one handle per in-memory copy,
//!   never shared by clones, since a lock belongs to an open file): an
//!   append is a lock, two `stat`s (is the held file still the one at the
//!   path?), the write and the unlock, not an open and a close each time.
//! * **New session files** appear whole or not at all (a temporary file
//!   linked into place), and a process that finds the file already there
//!   continues it instead of failing.
//! * **Rewrites** (migration of an old format version) go through a
//!   temporary file and a rename, and keep the old file as `<file>.v<N>.bak`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::format::entry::{BranchSummaryEntry, CustomEntry, LabelEntry, SessionInfoEntry};
use crate::format::Entry;
use crate::timefmt::now_iso;

use crate::atomic_file::temp_path;
/// The crate's one atomic writer, still reachable here for older callers.
use crate::atomic_file::write_atomic;

use super::file::open_regular;
use super::file::HeldFile;
use super::ids::new_entry_id;
use super::session::{DiskState, Session};

/// Creates `path` holding `contents`, only if nothing is there, so that
/// readers see the whole file or none of it: the bytes go to a temporary
/// file that is then hard-linked into place. `AlreadyExists` when another
/// process created the file first. Returns the new file's metadata and the
/// file, open for reading and appending (kept for the session's appends).
pub fn create_new_file(path: &Path, contents: &[u8]) -> io::Result<(std::fs::Metadata, File)> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let open_new = |p: &Path| {
        OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(p)
    };
    let tmp = temp_path(path);
    let mut f = open_new(&tmp)?;
    let linked = f
        .write_all(contents)
        .and_then(|_| f.metadata())
        .and_then(|meta| std::fs::hard_link(&tmp, path).map(|_| meta));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(meta) => Ok((meta, f)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => {
            // No hard links on this file system: an exclusive create.
            let mut f = open_new(path)?;
            f.write_all(contents)?;
            Ok((f.metadata()?, f))
        }
    }
}

/// A file rewritten in the current format version before an append.
#[derive(Debug, Clone, PartialEq)]
pub struct Migrated {
    pub path: PathBuf,
    /// The version it had.
    pub from: u64,
    /// Where the old file is kept.
    pub backup: PathBuf,
}

impl std::fmt::Display for Migrated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: migrated version {} → 3 before writing (old file kept as {})",
            self.path.display(),
            self.from,
            self.backup.display()
        )
    }
}

/// Why an append did not happen.
#[derive(Debug)]
pub enum AppendError<E> {
    /// Reading or writing the file failed.
    Io(io::Error),
    /// The builder declined (its own error).
    Refused(E),
}

impl<E: std::fmt::Display> std::fmt::Display for AppendError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppendError::Io(e) => write!(f, "{e}"),
            AppendError::Refused(e) => write!(f, "{e}"),
        }
    }
}

impl<E> From<io::Error> for AppendError<E> {
    fn from(e: io::Error) -> Self {
        AppendError::Io(e)
    }
}

/// Locks the file now at `path`, through `held` when that is still the
/// file there, and returns it with its metadata as of the lock. A file
/// replaced meanwhile (an atomic rewrite) is let go and the new one opened
/// and locked. Dropping the returned file closes it, which unlocks it (so
/// an error on the way out never leaves the lock held).
fn lock_current(path: &Path, mut held: HeldFile) -> io::Result<(File, std::fs::Metadata)> {
    let mut next = held.take();
    for _ in 0..100 {
        let f = match next.take() {
            Some(f) => f,
            None => open_regular(path, true)?,
        };
        f.lock()?;
        let held = f.metadata()?;
        let now = std::fs::metadata(path)?;
        if (held.dev(), held.ino()) == (now.dev(), now.ino()) {
            return Ok((f, held));
        }
    }
    Err(io::Error::other(
        "the file keeps being replaced by another process",
    ))
}

impl Session {
    /// A fresh entry id for this session.
    pub fn fresh_id(&self) -> String {
        new_entry_id(|id| self.has_id(id))
    }

    /// Builds a `label` entry on `target` (`None` clears), child of the leaf.
    pub fn new_label(&self, target: &str, label: Option<String>) -> Entry {
        Entry::Label(Box::new(LabelEntry {
            id: self.fresh_id(),
            parent_id: self.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            target_id: target.to_string(),
            label,
            extra: Map::new(),
        }))
    }

    /// Builds a `session_info` entry naming the session, child of the leaf.
    pub fn new_session_info(&self, name: &str) -> Entry {
        Entry::SessionInfo(Box::new(SessionInfoEntry {
            id: self.fresh_id(),
            parent_id: self.leaf_id().map(str::to_string),
            timestamp: now_iso(),
            name: Some(name.trim().to_string()),
            extra: Map::new(),
        }))
    }

    /// Builds a `custom` entry with `parent` as its parent.
    pub fn new_custom(&self, parent: Option<&str>, custom_type: &str, data: Value) -> Entry {
        Entry::Custom(Box::new(CustomEntry {
            custom_type: custom_type.to_string(),
            data: Some(data),
            id: self.fresh_id(),
            parent_id: parent.map(str::to_string),
            timestamp: now_iso(),
            extra: Map::new(),
        }))
    }

    /// Moves the leaf to `target` by appending, under the file's lock, a
    /// `branch_summary` entry holding `summary` (its `fromId` the leaf it
    /// leaves, `root` for none) or, without a summary, a `custom` entry of
    /// type `pi-session:branch` naming the old leaf; nothing when the leaf
    /// already is `target` and there is no summary. The leaf left is read
    /// under the lock, after whatever other writers appended. Returns what
    /// was written.
    pub fn branch_to(&mut self, target: &str, summary: Option<&str>) -> io::Result<Vec<Entry>> {
        let written = self.append_with(true, |s: &Session| {
            let old_leaf = s.leaf_id().map(str::to_string);
            let entry = match summary {
                Some(text) => Entry::BranchSummary(Box::new(BranchSummaryEntry {
                    id: s.fresh_id(),
                    parent_id: Some(target.to_string()),
                    timestamp: now_iso(),
                    from_id: old_leaf.unwrap_or_else(|| "root".into()),
                    summary: text.to_string(),
                    details: None,
                    from_hook: None,
                    usage: None,
                    extra: Map::new(),
                })),
                None if old_leaf.as_deref() == Some(target) => return Ok(Vec::new()),
                None => s.new_custom(Some(target), "pi-session:branch", json!({"from": old_leaf})),
            };
            Ok::<_, std::convert::Infallible>(vec![entry])
        });
        written.map_err(|e| match e {
            AppendError::Io(e) => e,
            AppendError::Refused(never) => match never {},
        })
    }

    /// Appends the entries `build` makes, under the file's exclusive lock.
    ///
    /// `build` runs with the lock held, on this session brought up to date
    /// with everything other processes appended, so the parent it picks (the
    /// leaf, a branch target) is current; an empty result writes nothing.
    /// A file still in an old format version is first migrated on disk
    /// (see [`Session::migrate_on_disk`]). `durable` adds an fsync. Returns
    /// what was written; it is in memory too.
    pub fn append_with<E>(
        &mut self,
        durable: bool,
        build: impl FnOnce(&Session) -> Result<Vec<Entry>, E>,
    ) -> Result<Vec<Entry>, AppendError<E>> {
        let at = self.append_in_place(durable, build)?;
        Ok(self.entries[at..].to_vec())
    }

    /// [`Session::append_with`] without copies of what was written: returns
    /// where the new entries start in `entries` (they run to its end).
    pub(crate) fn append_in_place<E>(
        &mut self,
        durable: bool,
        build: impl FnOnce(&Session) -> Result<Vec<Entry>, E>,
    ) -> Result<usize, AppendError<E>> {
        let (mut f, mut size_before) = self.lock_and_catch_up()?;
        if let Some(from) = self.migrated_from {
            self.migrate_locked(from)?;
            drop(f);
            (f, size_before) = self.lock_and_catch_up()?;
        }
        let entries = match build(self) {
            Ok(e) if e.is_empty() => {
                self.held = HeldFile::keep(f);
                return Ok(self.entries.len());
            }
            Ok(e) => e,
            Err(e) => {
                self.held = HeldFile::keep(f);
                return Err(AppendError::Refused(e));
            }
        };
        // `size_before`: the file's size when the lock was taken; nobody
        // who respects the lock has written since.
        let mut buf = String::new();
        let torn = self.missing_final_newline;
        if torn {
            buf.push('\n');
        }
        for e in &entries {
            buf.push_str(&e.to_line());
            buf.push('\n');
        }
        f.write_all(buf.as_bytes())?;
        if durable {
            f.sync_data()?;
        }
        let end = f.stream_position()?;
        self.held = HeldFile::keep(f);
        let d = self
            .disk
            .ok_or_else(|| io::Error::other("session copy lost track of its file"))?;
        let first_line = d.newlines + 1 + usize::from(torn);
        let count = entries.len();
        let at = self.entries.len();
        for (line, e) in (first_line..).zip(entries) {
            self.push_at(e, line);
        }
        self.missing_final_newline = false;
        // Our bytes start after everything read (the unfinished line, if
        // any, included). A writer that ignores the lock (an older tool) may
        // have written meanwhile: then re-read the whole file next time.
        self.disk = (end == size_before + buf.len() as u64).then_some(DiskState {
            len: end,
            newlines: d.newlines + usize::from(torn) + count,
            ..d
        });
        Ok(at)
    }

    /// Appends `entries` as a chain below the current leaf: under the lock,
    /// the first one's parent becomes the leaf of the file at that moment,
    /// each next one's parent the one before, and an id another writer took
    /// meanwhile is drawn again. Returns the entries as written.
    pub fn append_children(
        &mut self,
        entries: Vec<Entry>,
        durable: bool,
    ) -> io::Result<Vec<Entry>> {
        let at = self.append_children_in_place(entries, durable)?;
        Ok(self.entries[at..].to_vec())
    }

    /// [`Session::append_children`] without copies: returns where the
    /// written entries start in `entries`.
    pub(crate) fn append_children_in_place(
        &mut self,
        entries: Vec<Entry>,
        durable: bool,
    ) -> io::Result<usize> {
        let r = self.append_in_place(durable, |s: &Session| {
            let mut leaf = s.leaf_id().map(str::to_string);
            let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
            for mut e in entries {
                let clash = |id: &str| s.has_id(id) || out.iter().any(|o| o.id() == id);
                if e.id().is_empty() || clash(e.id()) {
                    e.set_id(new_entry_id(clash));
                }
                e.set_parent_id(leaf.take());
                leaf = Some(e.id().to_string());
                out.push(e);
            }
            Ok::<_, io::Error>(out)
        });
        r.map_err(|e| match e {
            AppendError::Io(e) | AppendError::Refused(e) => e,
        })
    }

    /// Rewrites a file that is in an old format version (`migrated_from`)
    /// as the current version, under the lock, keeping the old file as
    /// `<file>.v<N>.bak`. Damaged lines stay only in the backup. Returns the
    /// backup's path, or `None` when the file was already current.
    pub fn migrate_on_disk(&mut self) -> io::Result<Option<PathBuf>> {
        let _locked = self.lock_and_catch_up()?;
        match self.migrated_from {
            Some(from) => self.migrate_locked(from).map(Some),
            None => Ok(None),
        }
    }

    /// Rewrites a file still in an old format version as the current one
    /// before something is appended to it (as pi does when it opens one),
    /// so the entry ids shown before are the ones on disk; the old file is
    /// kept. `None` when the file was current.
    pub fn migrate_for_append(&mut self) -> io::Result<Option<Migrated>> {
        let Some(from) = self.migrated_from else {
            return Ok(None);
        };
        Ok(self.migrate_on_disk()?.map(|backup| Migrated {
            path: self.path.clone(),
            from,
            backup,
        }))
    }

    /// The backup a migration from version `from` keeps.
    pub fn migration_backup(&self, from: u64) -> PathBuf {
        PathBuf::from(format!("{}.v{from}.bak", self.path.display()))
    }

    fn migrate_locked(&mut self, from: u64) -> io::Result<PathBuf> {
        let backup = self.migration_backup(from);
        if let Err(e) = std::fs::hard_link(&self.path, &backup) {
            if e.kind() == io::ErrorKind::AlreadyExists {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "cannot keep the old file: {} already exists",
                        backup.display()
                    ),
                ));
            }
            std::fs::copy(&self.path, &backup).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot keep the old file as {}: {e}", backup.display()),
                )
            })?;
        }
        write_atomic(&self.path, self.to_jsonl().as_bytes(), true)?;
        self.migrated_from = None;
        // The rewrite is a new file: read it afresh at the next append.
        self.disk = None;
        Ok(backup)
    }

    /// Locks the file (through the held handle when it is still the file
    /// at the path) and brings this copy up to date with it. Returns the
    /// locked file and its size when locked.
    fn lock_and_catch_up(&mut self) -> io::Result<(File, u64)> {
        let (mut f, meta) = lock_current(&self.path, std::mem::take(&mut self.held))?;
        self.catch_up(&mut f, &meta)?;
        Ok((f, meta.len()))
    }

    /// Reads what was appended to the (locked) file since this copy was
    /// read; re-reads it whole when it is another file now, got shorter, or
    /// was never read. `meta` is the file's metadata as of the lock.
    fn catch_up(&mut self, f: &mut File, meta: &std::fs::Metadata) -> io::Result<()> {
        let d = match self.disk {
            Some(d) if (d.dev, d.ino) == (meta.dev(), meta.ino()) && meta.len() >= d.len => d,
            _ => {
                let fresh = Session::load_from(&self.path, f)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                *self = fresh;
                return Ok(());
            }
        };
        if meta.len() == d.len {
            self.missing_final_newline = false;
            return Ok(());
        }
        let mut tail = Vec::with_capacity((meta.len() - d.len) as usize);
        f.seek(SeekFrom::Start(d.len))?;
        Read::by_ref(f)
            .take(meta.len() - d.len)
            .read_to_end(&mut tail)?;
        let complete = memchr::memrchr(b'\n', &tail).map_or(0, |i| i + 1);
        self.ingest_tail(&tail, d.newlines + 1);
        self.disk = Some(DiskState {
            len: d.len + complete as u64,
            newlines: d.newlines + memchr::memchr_iter(b'\n', &tail).count(),
            ..d
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;

    fn label_line(id: &str, parent: &str) -> String {
        format!(
            r#"{{"type":"label","id":"{id}","parentId":"{parent}","timestamp":"t","targetId":"a","label":"x"}}"#
        )
    }

    #[test]
    fn append_after_truncated_line_starts_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let a = r#"{"type":"session_info","id":"a","parentId":null,"timestamp":"t","name":"n"}"#;
        std::fs::write(&p, format!("{HDR}\n{a}\n{{\"trunc")).unwrap();
        let mut s = Session::load(&p).unwrap();
        let e = s.new_label("a", Some("x".into()));
        s.append_children(vec![e.clone()], false).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, format!("{HDR}\n{a}\n{{\"trunc\n{}\n", e.to_line()));
        assert_eq!(s.lines.last(), Some(&4));
        assert_eq!(Session::load(&p).unwrap().lines.last(), Some(&4));
    }

    #[test]
    fn appends_see_what_others_wrote_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let a = r#"{"type":"session_info","id":"a","parentId":null,"timestamp":"t","name":"n"}"#;
        std::fs::write(&p, format!("{HDR}\n{a}\n")).unwrap();
        let mut mine = Session::load(&p).unwrap();
        // Another writer appends two entries after we loaded.
        let mut other = Session::load(&p).unwrap();
        let b = other.new_label("a", Some("b".into()));
        other.append_children(vec![b.clone()], false).unwrap();
        let c = other.new_label("a", Some("c".into()));
        other.append_children(vec![c.clone()], false).unwrap();
        // Our entry, built against our stale copy, still lands on the real leaf.
        let stale = mine.new_label("a", Some("mine".into()));
        assert_eq!(stale.parent_id(), Some("a"));
        let written = mine.append_children(vec![stale], false).unwrap();
        assert_eq!(written[0].parent_id(), Some(c.id()));
        assert_eq!(mine.entries.len(), 4);
        assert_eq!(mine.lines, vec![2, 3, 4, 5]);
        let fresh = Session::load(&p).unwrap();
        assert_eq!(fresh.leaf_id(), Some(written[0].id()));
        assert!(fresh.diagnostics.is_empty(), "{:?}", fresh.diagnostics);
        // A chain of our own stays a chain.
        let x = mine.new_label("a", None);
        let y = mine.new_label("a", Some("y".into()));
        let w = mine.append_children(vec![x, y], false).unwrap();
        assert_eq!(w[0].parent_id(), Some(written[0].id()));
        assert_eq!(w[1].parent_id(), Some(w[0].id()));
    }

    #[test]
    fn a_line_seen_half_written_is_read_again_once_finished() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let b = label_line("b", "a");
        let (head, rest) = b.split_at(20);
        std::fs::write(&p, format!("{HDR}\n{}\n{head}", label_line("a", "r"))).unwrap();
        // Loaded while another writer was mid-line…
        let mut s = Session::load(&p).unwrap();
        assert_eq!(s.entries.len(), 1);
        // …which then finished it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(format!("{rest}\n").as_bytes())
            .unwrap();
        let w = s
            .append_children(vec![s.new_label("a", Some("c".into()))], false)
            .unwrap();
        assert_eq!(w[0].parent_id(), Some("b"), "the finished line is an entry");
        let fresh = Session::load(&p).unwrap();
        assert_eq!(fresh.entries.len(), 3);
        assert_eq!(fresh.diagnostics.len(), 1, "only a's dangling parent r");
    }

    #[test]
    fn a_replaced_file_is_read_again_and_builders_see_the_current_leaf() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        std::fs::write(&p, format!("{HDR}\n{}\n", label_line("a", "r"))).unwrap();
        let mut s = Session::load(&p).unwrap();
        write_atomic(
            &p,
            format!(
                "{HDR}\n{}\n{}\n",
                label_line("a", "r"),
                label_line("z", "a")
            )
            .as_bytes(),
            true,
        )
        .unwrap();
        let got = s
            .append_with(false, |s: &Session| {
                Ok::<_, String>(vec![s.new_custom(s.leaf_id(), "t", Value::Null)])
            })
            .unwrap();
        assert_eq!(got[0].parent_id(), Some("z"));
        let none = s
            .append_with(false, |_| Ok::<_, String>(Vec::new()))
            .unwrap();
        assert!(none.is_empty());
        let refused = s.append_with(false, |_| Err::<Vec<Entry>, _>("no"));
        assert!(matches!(refused, Err(AppendError::Refused("no"))));
        assert_eq!(Session::load(&p).unwrap().entries.len(), 3);
    }

    #[test]
    fn a_held_handle_follows_a_replaced_file_and_never_writes_a_removed_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        std::fs::write(&p, format!("{HDR}\n{}\n", label_line("a", "r"))).unwrap();
        let mut s = Session::load(&p).unwrap();
        let first = s
            .append_children(vec![s.new_label("a", Some("1".into()))], false)
            .unwrap();
        assert!(s.held.is_open(), "the file stays open after an append");
        // Replaced (an atomic rewrite by another process) while held: the
        // next append goes into the new file, below its leaf.
        let replaced = format!(
            "{HDR}\n{}\n{}\n{}\n",
            label_line("a", "r"),
            first[0].to_line(),
            label_line("z", first[0].id())
        );
        write_atomic(&p, replaced.as_bytes(), true).unwrap();
        let w = s
            .append_children(vec![s.new_label("a", Some("2".into()))], false)
            .unwrap();
        assert_eq!(w[0].parent_id(), Some("z"));
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, format!("{replaced}{}\n", w[0].to_line()));
        // Removed while held: the append fails instead of writing into the
        // unlinked file.
        std::fs::remove_file(&p).unwrap();
        let e = s
            .append_children(vec![s.new_label("a", Some("3".into()))], false)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(!p.exists());
    }

    #[test]
    fn concurrent_writers_with_held_handles_keep_one_chain() {
        // Several copies of one session (loaded apart, and clones of one
        // that holds its file open) append at once; every entry must land
        // below the one written just before it, i.e. each append's parent
        // was chosen under the same lock that wrote it.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let a = r#"{"type":"session_info","id":"a","parentId":null,"timestamp":"t","name":"n"}"#;
        std::fs::write(&p, format!("{HDR}\n{a}\n")).unwrap();
        let mut holder = Session::load(&p).unwrap();
        holder
            .append_children(vec![holder.new_label("a", Some("h".into()))], false)
            .unwrap();
        assert!(holder.held.is_open());
        let mut copies: Vec<Session> = (0..3).map(|_| Session::load(&p).unwrap()).collect();
        copies.extend((0..3).map(|_| holder.clone()));
        assert!(
            copies[3..].iter().all(|c| !c.held.is_open()),
            "clones open their own"
        );
        copies.push(holder);
        const EACH: usize = 40;
        let writers = copies.len();
        let start = std::sync::Arc::new(std::sync::Barrier::new(writers));
        let threads: Vec<_> = copies
            .into_iter()
            .enumerate()
            .map(|(w, mut s)| {
                let start = std::sync::Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..EACH {
                        let e = s.new_label("a", Some(format!("{w}-{i}")));
                        s.append_children(vec![e], false).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let fresh = Session::load(&p).unwrap();
        assert!(fresh.diagnostics.is_empty(), "{:?}", fresh.diagnostics);
        assert_eq!(fresh.entries.len(), 2 + writers * EACH);
        for pair in fresh.entries.windows(2) {
            assert_eq!(
                pair[1].parent_id(),
                Some(pair[0].id()),
                "one chain, in file order"
            );
        }
    }

    #[test]
    fn old_versions_are_migrated_before_an_append_and_the_old_file_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v1.jsonl");
        let v1 = concat!(
            r#"{"type":"session","id":"s","timestamp":"t","cwd":"/p"}"#,
            "\n",
            r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"a","timestamp":1}}"#,
            "\n"
        );
        std::fs::write(&p, v1).unwrap();
        let mut s = Session::load(&p).unwrap();
        let first = s.entries[0].id().to_string();
        let e = s.new_label(&first, Some("x".into()));
        s.append_children(vec![e], false).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("v1.jsonl.v1.bak")).unwrap(),
            v1
        );
        let after = Session::load(&p).unwrap();
        assert_eq!(after.migrated_from, None);
        assert_eq!(after.entries[0].id(), first, "the id show printed is kept");
        assert_eq!(after.entries.len(), 2);
        assert!(after.labels().contains_key(&first));
    }

    #[test]
    fn new_files_appear_whole_and_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/n.jsonl");
        create_new_file(&p, b"one\n").unwrap();
        let e = create_new_file(&p, b"two\n").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&p).unwrap(), b"one\n");
        let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    }
}
