//! The session of a run: the one the session flags ask for
//! ([`crate::session::open`] decides), or, for a plan, the `--session` file
//! read as it is and never written; `--name`; and pi's
//! `--export FILE [OUTPUT]`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli::CliError;
use crate::cli::EXIT_OK;
use crate::session::open::open_store;
use crate::session::resolve::{resolve, roots};
use crate::session::store::SessionStore;
use crate::session::Session;

use super::SessionChoice;

/// Opens the session store the flags ask for.
pub fn open(cli: &SessionChoice, cwd: &Path, prog: &str) -> Result<SessionStore, CliError> {
    open_store(&cli.flags, cwd, &mut |w| crate::cli::warn(prog, w)).map_err(CliError::input)
}

/// The session a plan reads and never writes: `--session` as it is on
/// disk (no migration), else a new session in memory.
pub fn open_read_only(
    cli: &SessionChoice,
    cwd: &Path,
    prog: &str,
) -> Result<SessionStore, CliError> {
    let Some(reference) = &cli.flags.session else {
        return Ok(SessionStore::create(&cwd.to_string_lossy(), None, None));
    };
    let path = resolve(
        reference,
        &roots(cli.flags.session_dir.as_deref()),
        &mut |skip| crate::cli::warn(prog, &skip.to_string()),
    )
    .map_err(|e| CliError::input(e.to_string()))?;
    let s = Session::load(&path).map_err(|e| CliError::input(e.to_string()))?;
    s.diagnostics.warn(prog);
    Ok(SessionStore::detached(s))
}

/// `--name`: a `session_info` entry (first, for a new session).
pub fn name_session(store: &mut SessionStore, name: &str) -> Result<(), CliError> {
    if name.trim().is_empty() {
        return Err(CliError::input("--name: session name cannot be empty"));
    }
    let e = store.session.new_session_info(name);
    store
        .append(e)
        .map_err(|e| CliError::failed(format!("cannot write session: {e}")))?;
    Ok(())
}

/// `--export FILE [OUTPUT]`: the session as one HTML page, as pi does.
pub fn export(args: &[PathBuf], cwd: &Path) -> Result<i32, CliError> {
    let Some(file) = args.first() else {
        return Err(CliError::input("--export needs a session file"));
    };
    let out =
        crate::session::export::export_html_file(file, args.get(1).map(PathBuf::as_path), cwd)
            .map_err(CliError::input)?;
    let mut w = crate::cli::Stdout::new();
    writeln!(w, "Exported to: {}", out.display()).map_err(crate::cli::stdout_error)?;
    w.finish()?;
    Ok(EXIT_OK)
}
