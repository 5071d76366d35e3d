//! Forking a session: a new session (its own id, `parentSession` naming the
//! source) that starts with a copy of some of the source's entries. Every
//! fork goes through [`fork`]; what differs between them is the spec:
//!
//! * `pi-session fork` ([`fork_file`]): the path to an entry, label
//!   entries left out and the kept entries' labels re-created after them
//!   (as pi's `/fork` does), each entry copied from its stored line with
//!   only `parentId` changed, written at once next to the source;
//! * RPC `fork` and `clone`: the path to an entry, unchanged, written at
//!   once when it holds a user or assistant message (as pi does), lazily
//!   otherwise;
//! * `pi-run --fork`: every entry of the source, written when the run's
//!   first message is.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::format::entry::LabelEntry;
use crate::format::{AgentMessage, Entry};
use crate::timefmt::now_iso;

use super::ids::new_entry_id;
use super::store::SessionStore;
use super::stored::{for_each_line, Line};
use super::Session;

/// Which entries a fork copies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ForkOf<'a> {
    /// The path from the root to this entry (`None`: no entries).
    Path(Option<&'a str>),
    /// Every entry of the source, all branches.
    Whole,
}

/// When a fork is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ForkWrite {
    /// With the first user or assistant message appended to it.
    Lazy,
    /// At once when the copy holds a user or assistant message, else lazily.
    WhenTalk,
    /// At once, each entry from the source's stored line (fields pi left
    /// out stay out, unknown ones where they were); never over a file.
    Now,
}

/// What a fork is.
#[derive(Debug, Clone)]
pub struct ForkSpec<'a> {
    pub of: ForkOf<'a>,
    /// Leave the copied path's `label` entries out, link each kept entry to
    /// the one before it, and re-create the kept entries' labels after the
    /// last one.
    pub relabel: bool,
    /// The new session's working directory.
    pub cwd: &'a str,
    /// The folder it is written to (`None`: memory only).
    pub dir: Option<&'a Path>,
    /// Its id (`None`: a new one).
    pub id: Option<&'a str>,
    /// Its `parentSession`.
    pub parent: Option<String>,
    pub write: ForkWrite,
}

/// A new session forked from `source` as `spec` says.
pub fn fork(source: &Session, spec: &ForkSpec<'_>) -> io::Result<SessionStore> {
    let mut store = SessionStore::create_named(spec.cwd, spec.dir, spec.id, spec.parent.clone());
    let mut picked: Vec<usize> = match spec.of {
        ForkOf::Path(leaf) => leaf.map(|l| source.path_to(l)).unwrap_or_default(),
        ForkOf::Whole => (0..source.entries.len()).collect(),
    };
    if spec.relabel {
        picked.retain(|&i| !matches!(source.entries[i], Entry::Label(_)));
    }
    let stored = match spec.write {
        ForkWrite::Now => stored_lines(source, &picked),
        _ => HashMap::new(),
    };
    let mut lines: Vec<String> = Vec::new();
    let mut talk = false;
    for &i in &picked {
        let mut e = source.entries[i].clone();
        talk |= matches!(
            e.message(),
            Some(AgentMessage::User(_)) | Some(AgentMessage::Assistant(_))
        );
        let parent = spec
            .relabel
            .then(|| store.session.leaf_id().map(str::to_string));
        if let Some(p) = &parent {
            e.set_parent_id(p.clone());
        }
        if spec.write == ForkWrite::Now {
            lines.push(relinked(stored.get(&i), parent.as_ref()).unwrap_or_else(|| e.to_line()));
        }
        store.session.push(e);
    }
    if spec.relabel {
        for label in labels_of(source, &store.session) {
            lines.push(label.to_line());
            store.session.push(label);
        }
    }
    match spec.write {
        ForkWrite::Lazy => {}
        ForkWrite::WhenTalk if !talk => {}
        ForkWrite::WhenTalk => store.flush()?,
        ForkWrite::Now => {
            let mut text = store.session.header.to_line();
            text.push('\n');
            for line in &lines {
                text.push_str(line);
                text.push('\n');
            }
            store.write_new(&text).map_err(|e| {
                let path = store.path().map(|p| p.display().to_string());
                io::Error::new(
                    e.kind(),
                    format!("{}: cannot write fork: {e}", path.unwrap_or_default()),
                )
            })?;
        }
    }
    Ok(store)
}

impl SessionStore {
    /// A fork of `source` (pi's RPC `fork`/`clone`): a new session whose
    /// entries are `source`'s path to `leaf` (none: empty), unchanged,
    /// with `parentSession` naming `source`'s file; written under `dir` at
    /// once when the copied path holds a user or assistant message, lazily
    /// otherwise (see [`fork`]).
    pub fn fork_of(
        source: &Session,
        leaf: Option<&str>,
        dir: Option<&Path>,
        parent: Option<String>,
    ) -> io::Result<SessionStore> {
        fork(
            source,
            &ForkSpec {
                of: ForkOf::Path(leaf),
                relabel: false,
                cwd: &source.header.cwd,
                dir,
                id: None,
                parent,
                write: ForkWrite::WhenTalk,
            },
        )
    }
}

/// `pi-session fork`: the path to `at` of the session file `source`,
/// relabelled, written now next to the source (whose canonical path the
/// fork names as its parent).
pub fn fork_file(source: &Session, at: &str) -> io::Result<SessionStore> {
    let canonical = source
        .path
        .canonicalize()
        .unwrap_or_else(|_| source.path.clone());
    let dir = canonical
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    fork(
        source,
        &ForkSpec {
            of: ForkOf::Path(Some(at)),
            relabel: true,
            cwd: &source.header.cwd,
            dir: Some(&dir),
            id: None,
            parent: Some(canonical.display().to_string()),
            write: ForkWrite::Now,
        },
    )
}

/// The stored lines of entries `wanted`, by position.
fn stored_lines(source: &Session, wanted: &[usize]) -> HashMap<usize, String> {
    let wanted: HashSet<usize> = wanted.iter().copied().collect();
    let mut stored = HashMap::new();
    let _ = for_each_line(source, |l| {
        if let Line::Entry(i, t) = l {
            if wanted.contains(&i) {
                stored.insert(i, t);
            }
        }
        Ok::<(), std::convert::Infallible>(())
    });
    stored
}

/// A stored line with its `parentId` set to `parent` (when given; the key
/// keeps its place).
fn relinked(line: Option<&String>, parent: Option<&Option<String>>) -> Option<String> {
    let line = line?;
    let Some(parent) = parent else {
        return Some(line.clone());
    };
    let mut v = serde_json::from_str::<Value>(line).ok()?;
    v.as_object_mut()?.insert(
        "parentId".into(),
        parent.clone().map_or(Value::Null, Value::from),
    );
    Some(v.to_string())
}

/// `label` entries re-creating the source's labels of the entries `fork`
/// kept, sorted by target, chained after its last entry; their ids are new
/// to the source too.
fn labels_of(source: &Session, fork: &Session) -> Vec<Entry> {
    let kept: HashSet<&str> = fork.entries.iter().map(Entry::id).collect();
    let mut labels: Vec<(String, String)> = source
        .labels()
        .into_iter()
        .filter(|(t, _)| kept.contains(t.as_str()))
        .collect();
    labels.sort();
    let mut taken: HashSet<String> = HashSet::new();
    let mut parent = fork.leaf_id().map(str::to_string);
    let mut out = Vec::new();
    for (target, text) in labels {
        let id = new_entry_id(|id| source.has_id(id) || taken.contains(id));
        taken.insert(id.clone());
        out.push(Entry::Label(Box::new(LabelEntry {
            id: id.clone(),
            parent_id: parent.replace(id),
            timestamp: now_iso(),
            target_id: target,
            label: Some(text),
            extra: Map::new(),
        })));
    }
    out
}
