//! [`Session`]: a session in memory — its header, its entries in file
//! order with the file line each came from, the problems found reading it,
//! and the tables that make walks cheap (entry positions by id, each
//! entry's parent position). Reading a file into one is `load`, writing to
//! it is `write`; both build on this type and neither on the other.

use std::hash::BuildHasher;
use std::path::PathBuf;

use crate::format::{Entry, SessionHeader};

use super::diagnostics::{Diagnostic, Diagnostics};
use super::file::HeldFile;

/// Where the in-memory copy stands against the file: the bytes and newlines
/// up to the end of its last complete line, and which file (device, inode)
/// it was. Appends use this to read only what other processes added since;
/// an unfinished last line is read again then (its writer may have finished
/// it meanwhile).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DiskState {
    pub len: u64,
    pub newlines: usize,
    pub dev: u64,
    pub ino: u64,
}

/// A loaded session: header, entries in file order, and what went wrong.
#[derive(Debug, Clone)]
pub struct Session {
    pub path: PathBuf,
    pub header: SessionHeader,
    pub entries: Vec<Entry>,
    /// The 1-based file line of each entry (parallel to `entries`; 0 for
    /// entries not yet written).
    pub lines: Vec<usize>,
    pub diagnostics: Diagnostics,
    /// The version the file had on disk, when it was migrated in memory.
    pub migrated_from: Option<u64>,
    /// Whether the file ended without a newline (a crash mid-write).
    pub missing_final_newline: bool,
    index: IdIndex,
    /// Per entry: its parent's position ([`NO_PARENT`] for a root, a
    /// dangling or a self reference), and [`DUPLICATE`] set when an earlier
    /// entry has the same id. Walks use it instead of looking ids up.
    links: Vec<u32>,
    /// `None`: this copy was not read from the file (new, or not yet read).
    pub(crate) disk: Option<DiskState>,
    /// The file's handle, kept open between appends (never shared by
    /// clones).
    pub(crate) held: HeldFile,
}

impl Session {
    /// A session with no entries (not yet on disk).
    pub fn empty(path: PathBuf, header: SessionHeader) -> Session {
        Session {
            path,
            header,
            entries: Vec::new(),
            lines: Vec::new(),
            diagnostics: Diagnostics::default(),
            migrated_from: None,
            missing_final_newline: false,
            index: IdIndex::default(),
            links: Vec::new(),
            disk: None,
            held: Default::default(),
        }
    }

    /// The session id from the header.
    pub fn id(&self) -> &str {
        &self.header.id
    }

    /// The index of the entry with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(&self.entries, id)
    }

    /// Whether an entry has this id.
    pub fn has_id(&self, id: &str) -> bool {
        self.index_of(id).is_some()
    }

    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.index_of(id).map(|i| &self.entries[i])
    }

    /// Finds an entry by full id or unique prefix.
    pub fn find_entry(&self, id_or_prefix: &str) -> Result<&Entry, String> {
        if let Some(e) = self.get(id_or_prefix) {
            return Ok(e);
        }
        let matches: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| !e.id().is_empty() && e.id().starts_with(id_or_prefix))
            .collect();
        match matches.len() {
            0 => Err(format!(
                "{}: no entry with id {id_or_prefix}",
                self.path.display()
            )),
            1 => Ok(matches[0]),
            _ => Err(format!(
                "{}: entry id prefix {id_or_prefix} is ambiguous: {}",
                self.path.display(),
                super::prefixes::some_of(matches.iter().map(|e| e.id().to_string()))
            )),
        }
    }

    /// The leaf: the last entry (in file order) that has an id.
    pub fn leaf_id(&self) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .map(Entry::id)
            .find(|id| !id.is_empty())
    }

    /// Appends an entry in memory (the caller persists it).
    pub fn push(&mut self, entry: Entry) {
        self.push_at(entry, 0);
    }

    pub(crate) fn push_at(&mut self, entry: Entry, line: usize) {
        let parent = entry
            .parent_id()
            .and_then(|p| self.index_of(p))
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(NO_PARENT);
        let indexed = !entry.id().is_empty();
        self.entries.push(entry);
        self.lines.push(line);
        let new = indexed && self.index.insert(&self.entries, self.entries.len() - 1);
        self.links.push(if indexed && !new {
            parent | DUPLICATE
        } else {
            parent
        });
    }

    /// The position of entry `i`'s parent (`None` for a root, and for a
    /// parent that is not in the file).
    pub fn parent_index(&self, i: usize) -> Option<usize> {
        match self.links.get(i) {
            Some(&l) if self.links.len() == self.entries.len() => {
                let p = l & !DUPLICATE;
                (p != NO_PARENT).then_some(p as usize)
            }
            // `entries` was changed directly: look the parent up.
            _ => {
                let p = self.entries.get(i)?.parent_id()?;
                self.index_of(p).filter(|&p| p != i)
            }
        }
    }

    /// Whether entry `i` holds the first use of its id (entries without an
    /// id and later duplicates are not part of the tree).
    pub fn is_tree_node(&self, i: usize) -> bool {
        let Some(e) = self.entries.get(i) else {
            return false;
        };
        match self.links.get(i) {
            Some(&l) if self.links.len() == self.entries.len() => {
                !e.id().is_empty() && l & DUPLICATE == 0
            }
            _ => !e.id().is_empty() && self.index_of(e.id()) == Some(i),
        }
    }

    /// The whole file as pi writes it: header line, then one line per entry.
    pub fn to_jsonl(&self) -> String {
        let mut out = self.header.to_line();
        out.push('\n');
        for e in &self.entries {
            out.push_str(&e.to_line());
            out.push('\n');
        }
        out
    }

    /// Records a problem at `line` of this session's file.
    pub(crate) fn diag(&mut self, line: usize, message: String) {
        self.diagnostics.push(Diagnostic {
            path: self.path.clone(),
            line,
            message,
        });
    }

    /// Whether entry `i` repeats the id of an earlier entry (the first one
    /// is used).
    pub(crate) fn is_duplicate(&self, i: usize) -> bool {
        self.links.get(i).is_some_and(|&l| l & DUPLICATE != 0)
    }

    /// Links entry `i` to its parent at position `parent` (found after
    /// the entry was read).
    pub(crate) fn set_parent_index(&mut self, i: usize, parent: usize) {
        if let (Some(l), Ok(p)) = (self.links.get_mut(i), u32::try_from(parent)) {
            *l = (*l & DUPLICATE) | p;
        }
    }

    /// Whether entry `i` has no parent in the session (yet): a root, or a
    /// parent not read so far.
    pub(crate) fn parent_unlinked(&self, i: usize) -> bool {
        self.links
            .get(i)
            .is_some_and(|&l| l & !DUPLICATE == NO_PARENT)
    }
}

/// [`Session::links`]: no parent (or none in the file).
const NO_PARENT: u32 = u32::MAX >> 1;
/// [`Session::links`]: an earlier entry has this entry's id.
const DUPLICATE: u32 = 1 << 31;

/// Entry positions by id: a hash table of indices into `entries`, hashed
/// and compared through the ids the entries hold, so the index costs a few
/// bytes per entry instead of a copy of every id. The first entry with an
/// id wins (duplicates are reported, not indexed).
#[derive(Debug, Clone, Default)]
struct IdIndex {
    table: hashbrown::HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

impl IdIndex {
    fn get(&self, entries: &[Entry], id: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(id);
        self.table
            .find(hash, |&i| {
                entries.get(i as usize).is_some_and(|e| e.id() == id)
            })
            .map(|&i| i as usize)
    }

    /// Indexes entry `i` unless an earlier entry has its id (one probe);
    /// whether it was indexed.
    fn insert(&mut self, entries: &[Entry], i: usize) -> bool {
        let (Ok(pos), Some(e)) = (u32::try_from(i), entries.get(i)) else {
            return false;
        };
        let id = e.id();
        let hasher = &self.hasher;
        let id_of = |j: u32| entries.get(j as usize).map(Entry::id).unwrap_or("");
        let hash = hasher.hash_one(id);
        if let hashbrown::hash_table::Entry::Vacant(v) =
            self.table
                .entry(hash, |&j| id_of(j) == id, |&j| hasher.hash_one(id_of(j)))
        {
            v.insert(pos);
            return true;
        }
        false
    }
}
