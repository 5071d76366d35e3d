//! The run's sandbox, set up once after the trust decision (which decides
//! whether the project's settings may tighten it) and before anything
//! else starts: the settings and flags resolved, the kernel objects
//! prepared and proved, and the run told — one stderr line and, for
//! `--mode json`, the `sandbox` record. A sandbox that cannot be set up
//! ends the run with exit 5 and one line naming what is missing.

use std::sync::Arc;

use serde_json::Value;

use super::RunOptions;
use crate::cli::CliError;
use crate::sandbox::{config, Sandbox, Setup};

/// The sandbox of a run in `cwd` (`trusted`: the project's settings may
/// tighten it) and its `--mode json` record.
pub(super) fn prepare(
    opts: &RunOptions,
    cwd: &std::path::Path,
    trusted: bool,
) -> Result<(Arc<Sandbox>, Option<Value>), CliError> {
    let (cfg, warnings) =
        config::load(&opts.agent_dir, cwd, trusted, &opts.sandbox).map_err(CliError::input)?;
    for w in &warnings {
        crate::cli::warn(opts.prog, w);
    }
    if cfg.mode == config::Mode::DangerFullAccess {
        // No sandbox: nothing to read or prepare.
        return Ok((Arc::new(Sandbox::none()), None));
    }
    let shell = crate::tools::bash::shell();
    let sandbox = Sandbox::prepare(&Setup {
        config: &cfg,
        cwd,
        agent_dir: &opts.agent_dir,
        home: &crate::paths::home_dir(),
        temp: &std::env::temp_dir(),
        provider_keys: crate::model::key_variables(&opts.agent_dir),
        probe: &shell,
    })
    .map_err(|e| CliError::sandbox(e.to_string()))?;
    if let Some(line) = sandbox.notice() {
        crate::cli::note(opts.prog, &line);
    }
    let record = sandbox.record();
    Ok((Arc::new(sandbox), record))
}
