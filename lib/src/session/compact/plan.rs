//! The compaction plan (`pi-session compact --dry-run`) of a large session
//! without loading it: the file is streamed once through a small window
//! (the byte scanner, `lines::stream_raw_lines`) and indexed by scanning
//! only the start of each line (pi writes `type`, `id`, `parentId` first,
//! then a message's `role`), keeping per line only its place in the file,
//! its type and its parent. The branch is followed through that index, and
//! only the lines the decision needs are read back (`pread`) and parsed:
//! the latest compaction, the newest entries back to the `keepRecentTokens`
//! budget and the last usable usage. The cut itself is `cut::find_cut`,
//! shared with the full path, so both give the same answer. Anything
//! unusual (an older format version, a line not in pi's key order, context
//! edits, broken links, a usage older than the latest compaction) is left
//! to the full path: [`Index::open`] or [`Index::plan`] returns `None`.

use std::collections::HashMap;

/// The index's tables: ids are short and trusted to be few-colliding, so a
/// fast non-cryptographic hash (SipHash was a fifth of the dry run).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use std::fs::File;
use std::io::Read;

use serde_json::{Map, Value};

use super::{estimate_tokens, find_cut, usage_tokens, Cut, Kind, PrepareError};
use crate::format::message::CompactionSummaryMessage;
use crate::format::{AgentMessage, Entry, Num};
use crate::timefmt::parse_iso_ms;

/// What a compaction would do, without the messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPlan {
    pub first_kept_entry_id: String,
    pub split_turn: bool,
    pub tokens_before: u64,
    pub messages_to_summarize: usize,
    pub turn_prefix_messages: usize,
    pub previous_summary: bool,
}

impl super::Preparation<'_> {
    /// The plan of this preparation.
    pub fn plan(&self) -> CompactionPlan {
        CompactionPlan {
            first_kept_entry_id: self.first_kept_entry_id.clone(),
            split_turn: self.split_turn,
            tokens_before: self.tokens_before,
            messages_to_summarize: self.messages_to_summarize.len(),
            turn_prefix_messages: self.turn_prefix_messages.len(),
            previous_summary: self.previous_summary.is_some(),
        }
    }
}

/// The entry types the plan tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    /// A `message` entry with this role kind.
    Message(Kind),
    Compaction,
    ContextEdit,
    BranchSummary,
    CustomMessage,
    ModelChange,
    Other,
}

struct Line {
    /// Where the line is in the file and how long it is (without `\n`).
    start: u64,
    len: usize,
    ty: Type,
    parent: Option<usize>,
}

/// Where the index reads a line back from: the session file, or (tests) a
/// buffer.
pub trait Source {
    /// Fills `buf` from byte `at`.
    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()>;
}

impl Source for File {
    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, at)
    }
}

impl Source for &[u8] {
    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        let from = usize::try_from(at).ok();
        let b = from
            .and_then(|f| self.get(f..f.checked_add(buf.len())?))
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(b);
        Ok(())
    }
}

/// An entry id as a map key: up to 16 bytes inline with their length
/// (pi's ids are 8 hex digits), longer ones boxed. No allocation per line
/// for pi's ids.
#[derive(PartialEq, Eq, Hash)]
enum Key {
    Short(u128, u8),
    Long(Box<[u8]>),
}

fn key(id: &[u8]) -> Key {
    if id.len() <= 16 {
        let mut b = [0u8; 16];
        b[..id.len()].copy_from_slice(id);
        Key::Short(u128::from_le_bytes(b), id.len() as u8)
    } else {
        Key::Long(id.into())
    }
}

/// A session file indexed line by line.
pub struct Index<S: Source = File> {
    src: S,
    lines: Vec<Line>,
    /// Line numbers (in `lines`) from the root to the leaf.
    path: Vec<usize>,
    /// Entry id → line number.
    ids: FastMap<Key, usize>,
    parsed: FastMap<usize, Option<Entry>>,
}

/// The file's bytes at a time while indexing: the scanner's window, which
/// stays in the CPU cache between the kernel's copy and the scan.
const WINDOW: usize = crate::session::lines::CHUNK;

/// `"key":"value"` at `*at` (no escapes in the value): the value.
fn string_field<'b>(b: &'b [u8], at: &mut usize, key: &[u8]) -> Option<&'b [u8]> {
    let rest = b.get(*at..)?;
    let rest = rest.strip_prefix(key)?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    if rest[end] != b'"' {
        return None;
    }
    *at += key.len() + end + 1;
    Some(&rest[..end])
}

fn role_kind(role: &[u8]) -> Kind {
    match role {
        b"user" | b"bashExecution" | b"custom" | b"branchSummary" | b"compactionSummary" => {
            Kind::TurnStart
        }
        b"assistant" => Kind::Assistant,
        b"toolResult" => Kind::ToolResult,
        b"system" => Kind::System,
        _ => Kind::Other,
    }
}

impl Index<File> {
    /// Indexes the session file `f` (read from its current position, which
    /// should be its start); `None` when the file needs the full loader.
    pub fn open(f: File) -> Option<Index<File>> {
        let size = f.metadata().ok()?.len();
        let scan = Scan::read(&mut &f, size)?;
        Some(scan.with_source(f))
    }
}

impl<'b> Index<&'b [u8]> {
    /// Indexes `bytes` (a whole session file).
    pub fn new(bytes: &'b [u8]) -> Option<Index<&'b [u8]>> {
        let scan = Scan::read(&mut &bytes[..], bytes.len() as u64)?;
        Some(scan.with_source(bytes))
    }
}

/// What one pass over the file keeps.
struct Scan {
    lines: Vec<Line>,
    path: Vec<usize>,
    ids: FastMap<Key, usize>,
}

impl Scan {
    /// Indexes what `r` reads (`size`: about its length, for the tables).
    fn read<R: Read>(r: &mut R, size: u64) -> Option<Scan> {
        // About one entry per 512 bytes: no rehashing on typical files.
        let cap = usize::try_from(size / 512).unwrap_or(0);
        let mut lines = Vec::with_capacity(cap);
        let mut ids: FastMap<Key, usize> =
            FastMap::with_capacity_and_hasher(cap, Default::default());
        let mut header = false;
        let mut buf = Vec::new();
        // `None` from the scan: the file needs the full path.
        let mut scan = |start: u64, line: &[u8], terminated: bool| -> Option<()> {
            // Every line ends with a newline (a torn last line: full path).
            terminated.then_some(())?;
            if line.iter().all(u8::is_ascii_whitespace) {
                return Some(());
            }
            if !header {
                let v: Value = serde_json::from_slice(line).ok()?;
                let h = v.as_object()?;
                (h.get("type")?.as_str()? == "session").then_some(())?;
                (crate::format::entry::header_version(h.get("version")).ok()? == 3).then_some(())?;
                header = true;
                return Some(());
            }
            if line.last() != Some(&b'}') {
                return None;
            }
            let mut at = 0;
            let ty = string_field(line, &mut at, b"{\"type\":\"")?;
            let id = string_field(line, &mut at, b",\"id\":\"")?;
            let rest = line.get(at..)?;
            let parent = if let Some(r) = rest.strip_prefix(b",\"parentId\":null") {
                at = line.len() - r.len();
                None
            } else {
                let p = string_field(line, &mut at, b",\"parentId\":\"")?;
                Some(*ids.get(&key(p))?)
            };
            let ty = match ty {
                b"message" => {
                    // `,"timestamp":"…","message":{"role":"…"`
                    string_field(line, &mut at, b",\"timestamp\":\"")?;
                    let role = string_field(line, &mut at, b",\"message\":{\"role\":\"")?;
                    Type::Message(role_kind(role))
                }
                b"compaction" => Type::Compaction,
                b"context_edit" => Type::ContextEdit,
                b"branch_summary" => Type::BranchSummary,
                b"custom_message" => Type::CustomMessage,
                b"model_change" => Type::ModelChange,
                b"session" => return None,
                _ => Type::Other,
            };
            if id.is_empty() || ids.insert(key(id), lines.len()).is_some() {
                return None;
            }
            lines.push(Line {
                start,
                len: line.len(),
                ty,
                parent,
            });
            Some(())
        };
        let scanned =
            crate::session::lines::stream_raw_lines(r, &mut buf, WINDOW, |start, line, nl| {
                scan(start, line, nl).ok_or_else(String::new)
            });
        scanned.ok()?.ok()?;
        if !header {
            return None;
        }
        let mut path = Vec::new();
        let mut cur = lines.len().checked_sub(1);
        while let Some(i) = cur {
            path.push(i);
            cur = lines[i].parent;
            if cur.is_some_and(|p| p >= i) {
                return None;
            }
        }
        path.reverse();
        Some(Scan { lines, path, ids })
    }

    /// The index, reading lines back from `src` (the bytes scanned).
    fn with_source<S: Source>(self, src: S) -> Index<S> {
        Index {
            src,
            lines: self.lines,
            path: self.path,
            ids: self.ids,
            parsed: FastMap::default(),
        }
    }
}

impl<S: Source> Index<S> {
    /// Line `i` as a typed entry (read back and parsed once).
    fn entry(&mut self, i: usize) -> Option<&Entry> {
        let (src, line) = (&self.src, &self.lines[i]);
        self.parsed
            .entry(i)
            .or_insert_with(|| {
                let mut bytes = vec![0u8; line.len];
                src.read_at(&mut bytes, line.start).ok()?;
                let (v, _) = crate::session::load::parse_json(&bytes).ok()?;
                match v {
                    Value::Object(m) => Some(Entry::from_map(m)),
                    _ => None,
                }
            })
            .as_ref()
    }

    /// The session's model at the leaf (`"provider/id"`): the newest model
    /// change or assistant reply on the branch.
    pub fn model(&mut self) -> Option<String> {
        for k in (0..self.path.len()).rev() {
            let i = self.path[k];
            match self.lines[i].ty {
                Type::ModelChange => {
                    if let Some(Entry::ModelChange(m)) = self.entry(i) {
                        return Some(format!("{}/{}", m.provider, m.model_id));
                    }
                }
                Type::Message(Kind::Assistant) => {
                    if let Some(Entry::Message(m)) = self.entry(i) {
                        if let AgentMessage::Assistant(a) = &m.message {
                            return Some(format!("{}/{}", a.provider, a.model));
                        }
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// The message projected entry `i` contributes (`compaction`: whether
    /// it is the contributing one).
    fn message(&mut self, i: usize, compaction: bool) -> Option<AgentMessage> {
        match self.entry(i)? {
            Entry::Compaction(c) if compaction => {
                Some(AgentMessage::CompactionSummary(CompactionSummaryMessage {
                    summary: c.summary.clone(),
                    tokens_before: c.tokens_before.clone(),
                    timestamp: Num::signed(parse_iso_ms(&c.timestamp).unwrap_or(0)),
                    extra: Map::new(),
                }))
            }
            e => crate::session::context::entry_message(e).map(|m| m.into_owned()),
        }
    }

    /// The plan for keeping `keep` tokens; `None`: ask the full path.
    pub fn plan(&mut self, keep: u64) -> Option<Result<CompactionPlan, PrepareError>> {
        let &leaf = self.path.last()?;
        if self.lines[leaf].ty == Type::Compaction {
            return Some(Err(PrepareError::AlreadyCompacted));
        }
        if self
            .path
            .iter()
            .any(|&i| self.lines[i].ty == Type::ContextEdit)
        {
            return None;
        }
        // The projection: the latest compaction, the entries it kept (raw
        // system messages dropped), then everything after it.
        let cpos = self
            .path
            .iter()
            .rposition(|&i| self.lines[i].ty == Type::Compaction);
        let mut order: Vec<usize> = Vec::with_capacity(self.path.len());
        if let Some(cpos) = cpos {
            let ci = self.path[cpos];
            let first_kept = match self.entry(ci)? {
                Entry::Compaction(c) => c.first_kept_entry_id.clone(),
                _ => return None,
            };
            order.push(cpos);
            // Ids are unique in the index: the kept entry is one line.
            let kept_from = self
                .ids
                .get(&key(first_kept.as_bytes()))
                .and_then(|&line| self.path[..cpos].iter().position(|&i| i == line));
            if let Some(from) = kept_from {
                order.extend(
                    (from..cpos)
                        .filter(|&k| self.lines[self.path[k]].ty != Type::Message(Kind::System)),
                );
            }
            order.extend(cpos + 1..self.path.len());
        } else {
            order.extend(0..self.path.len());
        }
        let start = usize::from(cpos.is_some());
        let mut kinds = Vec::with_capacity(order.len());
        for (k, &pos) in order.iter().enumerate() {
            let i = self.path[pos];
            let kind = match self.lines[i].ty {
                Type::Message(kind) => kind,
                Type::Compaction if k == 0 && start == 1 => Kind::TurnStart,
                Type::CustomMessage => Kind::TurnStart,
                Type::BranchSummary => match self.message(i, false) {
                    Some(m) => Kind::of(Some(&m), false, false),
                    None => Kind::Meta,
                },
                _ => Kind::Meta,
            };
            kinds.push(kind);
        }
        // tokensBefore: the newest usable usage plus estimates after it; a
        // usage older than the compaction means estimating everything.
        let mut estimates: FastMap<usize, u64> = FastMap::default();
        let mut after = 0u64;
        let mut tokens_before = None;
        let mut bad = false;
        for k in (0..order.len()).rev() {
            let i = self.path[order[k]];
            let m = self.message(i, k == 0 && start == 1);
            if Kind::of(m.as_ref(), false, false) != kinds[k] {
                bad = true;
                break;
            }
            let Some(m) = m else {
                estimates.insert(k, 0);
                continue;
            };
            let t = estimate_tokens(&m);
            estimates.insert(k, t);
            if let AgentMessage::Assistant(a) = &m {
                let u = usage_tokens(&a.usage);
                if a.stop_reason != "aborted" && a.stop_reason != "error" && u > 0 {
                    if cpos.is_some_and(|c| order[k] <= c) {
                        return None;
                    }
                    tokens_before = Some(u + after);
                    break;
                }
            }
            after += t;
        }
        let tokens_before = tokens_before.filter(|_| !bad)?;
        let mut mismatch = false;
        let mut tokens = |k: usize| -> u64 {
            if let Some(&t) = estimates.get(&k) {
                return t;
            }
            let i = self.path[order[k]];
            let m = self.message(i, k == 0 && start == 1);
            if Kind::of(m.as_ref(), false, false) != kinds[k] {
                mismatch = true;
            }
            let t = m.as_ref().map(estimate_tokens).unwrap_or(0);
            estimates.insert(k, t);
            t
        };
        let found = find_cut(&kinds, start, keep, false, &mut tokens);
        if mismatch {
            return None;
        }
        let Cut { cut, turn_start } = match found {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let count =
            |from: usize, to: usize| kinds[from..to].iter().filter(|k| k.summarised()).count();
        let messages_to_summarize = count(start, turn_start.unwrap_or(cut));
        let turn_prefix_messages = turn_start.map(|t| count(t, cut)).unwrap_or(0);
        if messages_to_summarize == 0 && turn_prefix_messages == 0 {
            return Some(Err(PrepareError::NothingToCompact));
        }
        let cut_line = self.path[order[cut]];
        let first_kept_entry_id = self.entry(cut_line)?.id().to_string();
        Some(Ok(CompactionPlan {
            first_kept_entry_id,
            split_turn: turn_start.is_some(),
            tokens_before,
            messages_to_summarize,
            turn_prefix_messages,
            previous_summary: cpos.is_some(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every pi-written fixture, cut at every line: the fast plan (when it
    /// answers) equals the full preparation, for several budgets.
    #[test]
    fn equals_the_full_path_on_every_prefix_of_the_fixtures() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/pi-sessions/sessions");
        let mut files = Vec::new();
        for d in std::fs::read_dir(&root).unwrap().flatten() {
            for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
                if f.path().extension().is_some_and(|x| x == "jsonl") {
                    files.push(f.path());
                }
            }
        }
        assert!(files.len() > 5);
        let (mut fast, mut compared) = (0, 0);
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            let ls: Vec<&str> = text.lines().collect();
            for n in 2..=ls.len() {
                let cut = ls[..n].join("\n") + "\n";
                let Ok(s) = crate::session::Session::parse(Path::new("t.jsonl"), cut.as_bytes())
                else {
                    continue;
                };
                for keep in [1u64, 8, 30, 120, 20000] {
                    let full = s.prepare_compaction(None, keep).map(|p| p.plan());
                    let Some(mut idx) = Index::new(cut.as_bytes()) else {
                        continue;
                    };
                    let (m, _) =
                        s.model_on_path(&s.leaf_id().map(|l| s.path_to(l)).unwrap_or_default());
                    assert_eq!(
                        idx.model(),
                        m.map(|(p, id)| format!("{p}/{id}")),
                        "{}",
                        f.display()
                    );
                    compared += 1;
                    if let Some(planned) = idx.plan(keep) {
                        fast += 1;
                        assert_eq!(planned, full, "{} at line {n}, keep {keep}", f.display());
                    }
                }
            }
        }
        assert!(
            fast > 100,
            "the fast path answered only {fast} of {compared}"
        );
    }

    /// The index of a file on disk (streamed through the window, lines read
    /// back by offset) plans as the in-memory index and the full path do,
    /// with lines longer than the window too; a torn last line is left to
    /// the full path.
    #[test]
    fn a_file_on_disk_plans_as_the_buffer() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/pi-sessions/sessions");
        let dir = root.join("--@FIXTURE_PROJ_ENC@-tools-160--");
        let f = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path();
        let text = std::fs::read_to_string(f).unwrap();
        // Every tool result's text grows past the 64 KiB window.
        let long = "x".repeat(WINDOW + 4321);
        let text: String = text
            .lines()
            .map(|l| {
                if l.contains("\"role\":\"toolResult\"") {
                    l.replacen("\"text\":\"", &format!("\"text\":\"{long}"), 1)
                } else {
                    l.to_string()
                }
            })
            .map(|l| l + "\n")
            .collect();
        assert!(text.len() > 2 * WINDOW);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.jsonl");
        std::fs::write(&path, &text).unwrap();
        let s = crate::session::Session::parse(&path, text.as_bytes()).unwrap();
        let mut answered = 0;
        for keep in [1u64, 30, 120, 20000, 10_000_000] {
            let full = s.prepare_compaction(None, keep).map(|p| p.plan());
            let open = || Index::open(std::fs::File::open(&path).unwrap()).unwrap();
            let from_file = open().plan(keep);
            assert_eq!(from_file, Index::new(text.as_bytes()).unwrap().plan(keep));
            assert_eq!(open().model(), Some("mock/mock-model".to_string()));
            if let Some(p) = from_file {
                answered += 1;
                assert_eq!(p, full, "keep {keep}");
            }
        }
        assert!(answered >= 4, "{answered}");
        std::fs::write(&path, text.trim_end()).unwrap();
        assert!(Index::open(std::fs::File::open(&path).unwrap()).is_none());
    }
}
