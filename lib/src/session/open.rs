//! Which session a run writes, from pi's session flags: a new session in
//! the cwd's folder (the default), the most recent one there
//! (`--continue`), a named file or id (`--session`; a path that does not
//! exist yet is created), an exact id (`--session-id`, continued when the
//! folder has it, else created with it), a fork of another session
//! (`--fork`, all its entries copied), or none on disk (`--no-session`).
//! Concurrent runs creating one new `--session-id` share one file (pi
//! 1.6.0 makes one per run). `--session-dir` replaces the sessions
//! folder. A file in an old format version is rewritten as the current
//! one before the run appends to it (the old file is kept as
//! `<file>.v<N>.bak`), as pi rewrites it.

use std::path::{Path, PathBuf};

use crate::paths::{encode_cwd, sessions_root};

use super::file::{probe, Skipped};
use super::fork::{fork, ForkOf, ForkSpec, ForkWrite};
use super::resolve::{header_id, looks_like_path, resolve, roots, session_files_flat};
use super::store::SessionStore;
use super::Session;

/// A run's session flags, as parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionFlags {
    /// `--session PATH|ID`.
    pub session: Option<String>,
    /// `--fork PATH|ID`.
    pub fork: Option<String>,
    /// `--session-id ID`.
    pub session_id: Option<String>,
    /// `--continue`.
    pub continue_: bool,
    /// `--no-session`.
    pub no_session: bool,
    /// `--session-dir DIR`.
    pub session_dir: Option<PathBuf>,
}

/// pi's message for a `--session-id` it refuses.
pub const BAD_SESSION_ID: &str = "Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', and start and end with an alphanumeric character";

/// Opens the session store `flags` ask for, for a run in `cwd`. Warnings
/// (damaged lines of a loaded file, folder entries that are not session
/// files, a new session made for an unknown `--session-id`) go to `warn`
/// as they come. An error is the user's (a bad flag value, a file that
/// cannot be read or migrated).
pub fn open_store(
    flags: &SessionFlags,
    cwd: &Path,
    warn: &mut dyn FnMut(&str),
) -> Result<SessionStore, String> {
    let cwd_s = cwd.to_string_lossy().into_owned();
    if let Some(id) = &flags.session_id {
        if !valid_session_id(id) {
            return Err(BAD_SESSION_ID.into());
        }
    }
    if flags.no_session {
        let mut store = SessionStore::create(&cwd_s, None, None);
        if let Some(id) = &flags.session_id {
            store.session.header.id = id.clone();
        }
        return Ok(store);
    }
    let roots = roots(flags.session_dir.as_deref());
    if let Some(reference) = &flags.session {
        let p = Path::new(reference);
        if looks_like_path(reference) {
            match probe(p) {
                Ok(false) => return Ok(SessionStore::create_at(&cwd_s, cwd.join(p))),
                Ok(true) => {}
                Err(what) => return Err(format!("{reference}: {what}")),
            }
        }
        let path = resolve(reference, &roots, &mut |skip: &Skipped| {
            warn(&skip.to_string())
        })
        .map_err(|e| e.to_string())?;
        return Ok(SessionStore::open(load_for_append(&path, warn)?));
    }
    let dir = match &flags.session_dir {
        Some(d) => d.clone(),
        None => sessions_root().join(encode_cwd(&cwd_s)),
    };
    if let Some(reference) = &flags.fork {
        let path = resolve(reference, &roots, &mut |skip: &Skipped| {
            warn(&skip.to_string())
        })
        .map_err(|e| e.to_string())?;
        let source = Session::load(&path).map_err(|e| e.to_string())?;
        let abs = path.canonicalize().unwrap_or(path);
        let spec = ForkSpec {
            of: ForkOf::Whole,
            relabel: false,
            cwd: &cwd_s,
            dir: Some(&dir),
            id: flags.session_id.as_deref(),
            parent: Some(abs.display().to_string()),
            write: ForkWrite::Lazy,
        };
        return fork(&source, &spec).map_err(|e| e.to_string());
    }
    if let Some(id) = &flags.session_id {
        if let Some(p) = with_id(&dir, id) {
            return Ok(SessionStore::open(load_for_append(&p, warn)?));
        }
        warn(&format!(
            "No project session found with id '{id}'; creating a new session with that id."
        ));
        return Ok(SessionStore::create_claiming(&cwd_s, &dir, id));
    }
    if flags.continue_ {
        if let Some(p) = most_recent(&dir, warn) {
            return Ok(SessionStore::open(load_for_append(&p, warn)?));
        }
    }
    Ok(SessionStore::create(&cwd_s, Some(&dir), None))
}

/// Loads a session to continue, its damage reported to `warn`, migrating
/// an old format version on disk first.
fn load_for_append(path: &Path, warn: &mut dyn FnMut(&str)) -> Result<Session, String> {
    let mut s = Session::load(path).map_err(|e| e.to_string())?;
    for m in s.diagnostics.messages() {
        warn(&m);
    }
    s.migrate_on_disk()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(s)
}

/// The most recent valid session of a folder, by file modification time.
/// Entries that are not regular files (a FIFO named `*.jsonl`) are never
/// opened.
fn most_recent(dir: &Path, warn: &mut dyn FnMut(&str)) -> Option<PathBuf> {
    let found = session_files_flat(dir).ok()?;
    for skip in &found.skipped {
        warn(&skip.to_string());
    }
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = found
        .files
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    files
        .into_iter()
        .map(|(_, p)| p)
        .find(|p| header_id(p).is_some())
}

/// pi's rule for `--session-id`: letters, digits, `.`, `_`, `-`, starting
/// and ending with a letter or digit.
fn valid_session_id(id: &str) -> bool {
    let ok_end = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    ok_end(id.chars().next())
        && ok_end(id.chars().last())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// This folder's session whose header id is exactly `id` (the first by
/// file name when several have it, as pi's own runs may leave).
pub(super) fn with_id(dir: &Path, id: &str) -> Option<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
        .into_iter()
        .find(|p| header_id(p).as_deref() == Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_follow_pis_rule() {
        for ok in ["a", "a.b-c_d", "0abc9"] {
            assert!(valid_session_id(ok), "{ok}");
        }
        for bad in ["", "-a", "a.", "a b", "a/b"] {
            assert!(!valid_session_id(bad), "{bad}");
        }
    }
}
