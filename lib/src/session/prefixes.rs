//! Short session ids that still name one session. Session ids are UUID v7:
//! their leading characters are a timestamp, so sessions made minutes
//! apart share their first 8 or 10 characters. Listings print each id cut
//! to its shortest prefix that no other known session shares (git's
//! abbreviated hashes, with a floor of [`MIN_PREFIX`]), where "known" is
//! every session an id prefix is resolved against, so a printed prefix
//! always works as a `SESSION` argument.

use std::path::{Path, PathBuf};

use super::resolve::{header_id, session_files};

/// The shortest prefix printed.
pub const MIN_PREFIX: usize = 8;

/// The session ids a prefix must tell apart, sorted.
#[derive(Debug, Clone, Default)]
pub struct IdPrefixes {
    sorted: Vec<String>,
}

impl IdPrefixes {
    /// Prefixes unique among `ids`.
    pub fn new(ids: impl IntoIterator<Item = String>) -> IdPrefixes {
        let mut sorted: Vec<String> = ids.into_iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        IdPrefixes { sorted }
    }

    /// Prefixes unique among every session under `roots` (the folders an
    /// id prefix is resolved in) and `more`. Ids come from pi's file names
    /// (`<time>_<id>.jsonl`), else from the file's header.
    pub fn around(roots: &[PathBuf], more: impl IntoIterator<Item = String>) -> IdPrefixes {
        let mut ids: Vec<String> = more.into_iter().collect();
        for root in roots {
            if let Ok(found) = session_files(root) {
                ids.extend(found.files.iter().filter_map(|f| file_id(f)));
            }
        }
        IdPrefixes::new(ids)
    }

    /// How many characters of `id` tell it apart from every other known
    /// id (at least [`MIN_PREFIX`], at most the whole id).
    pub fn len_for(&self, id: &str) -> usize {
        let common = |other: &str| {
            id.chars()
                .zip(other.chars())
                .take_while(|(a, b)| a == b)
                .count()
        };
        let at = self.sorted.partition_point(|s| s.as_str() < id);
        let mut need = 0;
        if at > 0 {
            need = need.max(common(&self.sorted[at - 1]) + 1);
        }
        let next = match self.sorted.get(at) {
            Some(s) if s == id => self.sorted.get(at + 1),
            other => other,
        };
        if let Some(n) = next {
            need = need.max(common(n) + 1);
        }
        need.max(MIN_PREFIX).min(id.chars().count())
    }

    /// `id` cut to [`IdPrefixes::len_for`] characters.
    pub fn short<'a>(&self, id: &'a str) -> &'a str {
        let n = self.len_for(id);
        match id.char_indices().nth(n) {
            Some((i, _)) => &id[..i],
            None => id,
        }
    }

    /// One prefix length telling each of `ids` apart (a table column).
    pub fn column_len<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> usize {
        ids.into_iter()
            .map(|id| self.len_for(id))
            .max()
            .unwrap_or(MIN_PREFIX)
    }
}

/// How many candidates an ambiguous-prefix error names.
pub const CANDIDATES_SHOWN: usize = 5;

/// The candidates of an ambiguous prefix, for an error message: the first
/// [`CANDIDATES_SHOWN`], then how many more ("a, b, c, d, e and 7 more").
pub fn some_of(items: impl IntoIterator<Item = String>) -> String {
    let mut shown = Vec::new();
    let mut more = 0usize;
    for item in items {
        if shown.len() < CANDIDATES_SHOWN {
            shown.push(item);
        } else {
            more += 1;
        }
    }
    let list = shown.join(", ");
    if more > 0 {
        format!("{list} and {more} more")
    } else {
        list
    }
}

/// The session id a file holds: from pi's file name when it ends in a
/// UUID, else from its header.
fn file_id(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_string_lossy();
    match stem.rsplit_once('_') {
        Some((_, id)) if super::resolve::uuid_like(id) => Some(id.to_string()),
        _ => header_id(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_tell_ids_apart() {
        let p = IdPrefixes::new(
            ["01a228a9-8a19", "01a228a9-8bbe", "01a228a9-8bbf", "zz"].map(str::to_string),
        );
        assert_eq!(p.short("01a228a9-8a19"), "01a228a9-8a");
        assert_eq!(p.short("01a228a9-8bbe"), "01a228a9-8bbe");
        assert_eq!(p.len_for("zz"), 2, "never longer than the id");
        assert_eq!(p.short("ffffffffffff"), "ffffffff", "the floor");
        // An id not among the known ones is told apart from its neighbours.
        assert_eq!(p.short("01a228a9-8bb0"), "01a228a9-8bb0");
        assert_eq!(
            p.column_len(["01a228a9-8a19", "ffffffffffff"]),
            "01a228a9-8a".len()
        );
        assert_eq!(IdPrefixes::default().len_for("abcdefghij"), 8);
    }

    #[test]
    fn an_ambiguous_prefix_names_five_candidates_then_a_count() {
        let items = |n: usize| (0..n).map(|i| format!("c{i}"));
        assert_eq!(some_of(items(2)), "c0, c1");
        assert_eq!(some_of(items(5)), "c0, c1, c2, c3, c4");
        assert_eq!(some_of(items(12)), "c0, c1, c2, c3, c4 and 7 more");
    }
}
