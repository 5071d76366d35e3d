//! The session flags handed to the library: which session a run writes
//! (`pi_lib::session::open`), `--name`, and pi's `--export FILE [OUTPUT]`.

use std::io::Write;
use std::path::{Path, PathBuf};

use pi_lib::cli::CliError;
use pi_lib::cli::EXIT_OK;
use pi_lib::session::open::{open_store, SessionFlags};
use pi_lib::session::store::SessionStore;

use crate::cli::Cli;

/// Opens the session store the flags ask for.
pub fn open(cli: &Cli, _agent_dir: &Path, cwd: &Path) -> Result<SessionStore, CliError> {
    let flags = SessionFlags {
        session: cli.session.clone(),
        fork: cli.fork.clone(),
        session_id: cli.session_id.clone(),
        continue_: cli.continue_,
        no_session: cli.no_session,
        session_dir: cli.session_dir.clone(),
    };
    open_store(&flags, cwd, &mut |w| pi_lib::cli::warn(crate::PROG, w)).map_err(CliError::input)
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
        pi_lib::session::export::export_html_file(file, args.get(1).map(PathBuf::as_path), cwd)
            .map_err(CliError::input)?;
    let mut w = pi_lib::cli::Stdout::new();
    writeln!(w, "Exported to: {}", out.display()).map_err(pi_lib::cli::stdout_error)?;
    w.finish()?;
    Ok(EXIT_OK)
}
