//! Which session a run writes: new (default), `--continue`, `--session`,
//! `--fork`, `--no-session`, `--session-dir`.

use std::path::{Path, PathBuf};

use pi_lib::cli::CliError;
use pi_lib::format::Entry;
use pi_lib::paths::{encode_cwd, sessions_root};
use pi_lib::session::file::{probe, Skipped};
use pi_lib::session::resolve::{header_id, looks_like_path, resolve, session_files_flat};
use pi_lib::session::store::SessionStore;
use pi_lib::session::Session;

use crate::cli::Cli;

/// The folder new sessions of `cwd` go to.
fn dir_for(cli: &Cli, cwd: &Path) -> PathBuf {
    match &cli.session_dir {
        Some(d) => d.clone(),
        None => sessions_root().join(encode_cwd(&cwd.to_string_lossy())),
    }
}

/// Loads a session to continue, migrating an old format version on disk
/// first (the old file is kept as `<file>.v<N>.bak`), as pi rewrites it.
fn load_for_append(path: &Path) -> Result<Session, CliError> {
    let mut s = Session::load(path).map_err(|e| CliError::input(e.to_string()))?;
    s.diagnostics.warn(crate::PROG);
    s.migrate_on_disk()
        .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
    Ok(s)
}

fn warn_skipped(skip: &Skipped) {
    pi_lib::cli::warn(crate::PROG, &skip.to_string());
}

/// The most recent valid session of a folder, by file modification time.
/// Entries that are not regular files (a FIFO named `*.jsonl`) are never
/// opened.
fn most_recent(dir: &Path) -> Option<PathBuf> {
    let found = session_files_flat(dir).ok()?;
    found.skipped.iter().for_each(warn_skipped);
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

fn roots(cli: &Cli) -> Vec<PathBuf> {
    match &cli.session_dir {
        Some(d) => vec![d.clone()],
        None => vec![sessions_root()],
    }
}

/// Opens the session store the flags ask for.
pub fn open(cli: &Cli, _agent_dir: &Path, cwd: &Path) -> Result<SessionStore, CliError> {
    let cwd_s = cwd.to_string_lossy().into_owned();
    if cli.no_session {
        return Ok(SessionStore::create(&cwd_s, None, None));
    }
    if let Some(reference) = &cli.session {
        let p = Path::new(reference);
        if looks_like_path(reference) {
            match probe(p) {
                Ok(false) => return Ok(SessionStore::create_at(&cwd_s, cwd.join(p))),
                Ok(true) => {}
                Err(what) => return Err(CliError::input(format!("{reference}: {what}"))),
            }
        }
        let path = resolve(reference, &roots(cli), &mut warn_skipped)
            .map_err(|e| CliError::input(e.to_string()))?;
        return Ok(SessionStore::open(load_for_append(&path)?));
    }
    if let Some(reference) = &cli.fork {
        let path = resolve(reference, &roots(cli), &mut warn_skipped)
            .map_err(|e| CliError::input(e.to_string()))?;
        let source = Session::load(&path).map_err(|e| CliError::input(e.to_string()))?;
        let abs = path.canonicalize().unwrap_or(path);
        let mut store = SessionStore::create(
            &cwd_s,
            Some(&dir_for(cli, cwd)),
            Some(abs.display().to_string()),
        );
        for e in source.entries {
            store.session.push(e);
        }
        return Ok(store);
    }
    let dir = dir_for(cli, cwd);
    if cli.continue_ {
        if let Some(p) = most_recent(&dir) {
            return Ok(SessionStore::open(load_for_append(&p)?));
        }
    }
    Ok(SessionStore::create(&cwd_s, Some(&dir), None))
}

/// `--name`: a `session_info` entry (first, for a new session).
pub fn name_session(store: &mut SessionStore, name: &str) -> Result<(), CliError> {
    if name.trim().is_empty() {
        return Err(CliError::input("--name: session name cannot be empty"));
    }
    let e: Entry = store.session.new_session_info(name);
    store
        .append(e)
        .map_err(|e| CliError::failed(format!("cannot write session: {e}")))?;
    Ok(())
}
