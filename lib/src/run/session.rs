//! Which session a run writes: new (default), `--continue`, `--session`,
//! `--session-id`, `--fork`, `--no-session`, `--session-dir`, and `--name`;
//! and pi's `--export FILE [OUTPUT]`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli::CliError;
use crate::cli::EXIT_OK;
use crate::format::Entry;
use crate::paths::{encode_cwd, session_file_name, sessions_root};
use crate::session::file::{probe, Skipped};
use crate::session::resolve::{header_id, looks_like_path, resolve, session_files_flat};
use crate::session::store::SessionStore;
use crate::session::write::write_atomic;
use crate::session::Session;

use super::SessionChoice;

/// The folder new sessions of `cwd` go to.
fn dir_for(cli: &SessionChoice, cwd: &Path) -> PathBuf {
    match &cli.session_dir {
        Some(d) => d.clone(),
        None => sessions_root().join(encode_cwd(&cwd.to_string_lossy())),
    }
}

/// Loads a session to continue, migrating an old format version on disk
/// first (the old file is kept as `<file>.v<N>.bak`), as pi rewrites it.
fn load_for_append(path: &Path, prog: &str) -> Result<Session, CliError> {
    let mut s = Session::load(path).map_err(|e| CliError::input(e.to_string()))?;
    s.diagnostics.warn(prog);
    s.migrate_on_disk()
        .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
    Ok(s)
}

fn warn_skipped(prog: &str) -> impl FnMut(&Skipped) + '_ {
    move |skip| crate::cli::warn(prog, &skip.to_string())
}

/// The most recent valid session of a folder, by file modification time.
/// Entries that are not regular files (a FIFO named `*.jsonl`) are never
/// opened.
fn most_recent(dir: &Path, prog: &str) -> Option<PathBuf> {
    let found = session_files_flat(dir).ok()?;
    found.skipped.iter().for_each(warn_skipped(prog));
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

fn roots(cli: &SessionChoice) -> Vec<PathBuf> {
    match &cli.session_dir {
        Some(d) => vec![d.clone()],
        None => vec![sessions_root()],
    }
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

/// A new session with an exact id, under `dir` (pi names the file
/// `<timestamp>_<id>.jsonl`).
fn create_with_id(cwd: &str, dir: &Path, id: &str, parent: Option<String>) -> SessionStore {
    let ts = crate::timefmt::now_iso();
    let mut store = SessionStore::create_at(cwd, dir.join(session_file_name(&ts, id)));
    let h = &mut store.session.header;
    h.id = id.to_string();
    h.timestamp = ts;
    h.parent_session = parent;
    store
}

/// This folder's session whose header id is exactly `id`.
fn with_id(dir: &Path, id: &str) -> Option<PathBuf> {
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

/// Opens the session store the flags ask for.
pub fn open(cli: &SessionChoice, cwd: &Path, prog: &str) -> Result<SessionStore, CliError> {
    let cwd_s = cwd.to_string_lossy().into_owned();
    if let Some(id) = &cli.session_id {
        if !valid_session_id(id) {
            return Err(CliError::input(
                "Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', and start and end with an alphanumeric character",
            ));
        }
    }
    if cli.no_session {
        let mut store = SessionStore::create(&cwd_s, None, None);
        if let Some(id) = &cli.session_id {
            store.session.header.id = id.clone();
        }
        return Ok(store);
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
        let path = resolve(reference, &roots(cli), &mut warn_skipped(prog))
            .map_err(|e| CliError::input(e.to_string()))?;
        return Ok(SessionStore::open(load_for_append(&path, prog)?));
    }
    if let Some(reference) = &cli.fork {
        let path = resolve(reference, &roots(cli), &mut warn_skipped(prog))
            .map_err(|e| CliError::input(e.to_string()))?;
        let source = Session::load(&path).map_err(|e| CliError::input(e.to_string()))?;
        let abs = path.canonicalize().unwrap_or(path);
        let parent = Some(abs.display().to_string());
        let mut store = match &cli.session_id {
            Some(id) => create_with_id(&cwd_s, &dir_for(cli, cwd), id, parent),
            None => SessionStore::create(&cwd_s, Some(&dir_for(cli, cwd)), parent),
        };
        for e in source.entries {
            store.session.push(e);
        }
        return Ok(store);
    }
    let dir = dir_for(cli, cwd);
    if let Some(id) = &cli.session_id {
        if let Some(p) = with_id(&dir, id) {
            return Ok(SessionStore::open(load_for_append(&p, prog)?));
        }
        crate::cli::warn(
            prog,
            &format!(
                "No project session found with id '{id}'; creating a new session with that id."
            ),
        );
        return Ok(create_with_id(&cwd_s, &dir, id, None));
    }
    if cli.continue_recent {
        if let Some(p) = most_recent(&dir, prog) {
            return Ok(SessionStore::open(load_for_append(&p, prog)?));
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

/// `--export FILE [OUTPUT]`: the session as one HTML page, as pi does
/// (default name `pi-session-<file stem>.html` in the current directory).
pub fn export(args: &[PathBuf], cwd: &Path) -> Result<i32, CliError> {
    let Some(file) = args.first() else {
        return Err(CliError::input("--export needs a session file"));
    };
    let file = cwd.join(file);
    if !file.is_file() {
        return Err(CliError::input(format!(
            "File not found: {}",
            file.display()
        )));
    }
    let s = Session::load(&file).map_err(|e| CliError::input(e.to_string()))?;
    let out = match args.get(1) {
        Some(o) => o.clone(),
        None => {
            let stem = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            PathBuf::from(format!("pi-session-{stem}.html"))
        }
    };
    let target = cwd.join(&out);
    if target == file {
        return Err(CliError::input(format!(
            "{}: refusing to overwrite the session itself",
            target.display()
        )));
    }
    write_atomic(
        &target,
        crate::session::export::to_html(&s).as_bytes(),
        true,
    )
    .map_err(|e| CliError::input(format!("{}: {e}", target.display())))?;
    let mut w = crate::cli::Stdout::new();
    writeln!(w, "Exported to: {}", out.display()).map_err(crate::cli::stdout_error)?;
    w.finish()?;
    Ok(EXIT_OK)
}

/// The session a plan reads and never writes: `--session` as it is on
/// disk (no migration), else a new session in memory.
pub fn open_read_only(
    cli: &SessionChoice,
    cwd: &Path,
    prog: &str,
) -> Result<SessionStore, CliError> {
    let Some(reference) = &cli.session else {
        return Ok(SessionStore::create(&cwd.to_string_lossy(), None, None));
    };
    let path = resolve(reference, &roots(cli), &mut warn_skipped(prog))
        .map_err(|e| CliError::input(e.to_string()))?;
    let s = Session::load(&path).map_err(|e| CliError::input(e.to_string()))?;
    s.diagnostics.warn(prog);
    Ok(SessionStore::detached(s))
}
