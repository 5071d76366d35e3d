//! Starting a run's extensions, pass by pass, around trust: the first pass
//! starts only CLI and user extensions (they alone may answer
//! `project_trust`); once the project is trusted, the second pass starts
//! the project's. A project extension is never started while the project
//! is untrusted. TypeScript/JavaScript extensions share one Node host
//! process; every process extension is its own process. An extension that
//! fails to load (a throwing factory, a missing file, a hang, a crash, no
//! Node) fails the run before the model is called, naming the extension
//! and the cause, as pi 1.6.0 does: extensions are guards, and a guard that
//! did not load must not leave the run unguarded.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::host::{Host, Spawn};
use super::runner::{ExtInfo, Runner};
use super::tool::ExtensionTool;
use crate::format::extension::{Hello, LoadEntry, PROTOCOL_VERSION};
use crate::format::resources::{Extension, Scope, Source};
use crate::resources::{is_js_extension, process_program};
use crate::tools::Tool;

/// How an extension runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ExtKind {
    /// pi's TS/JS extension: the Node host.
    Node,
    /// A process extension: this program.
    Process(PathBuf),
}

/// How `path` runs, or `None` when it is neither kind.
pub fn kind_of(path: &Path) -> Option<ExtKind> {
    let name = path.file_name()?.to_string_lossy();
    if is_js_extension(&name) && path.is_file() {
        return Some(ExtKind::Node);
    }
    process_program(path).map(ExtKind::Process)
}

/// Whether an extension belongs to the first (trust) pass: CLI and user
/// extensions, not the project's.
pub fn first_pass(e: &Extension) -> bool {
    e.scope != Scope::Project && !matches!(e.source, Source::Project | Source::ProjectSettings)
}

/// What every process is told.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub prog: String,
    pub cwd: PathBuf,
    pub agent_dir: PathBuf,
    pub mode: String,
    pub session_file: Option<String>,
    pub session_id: String,
    pub settings: Value,
    pub handshake: Duration,
}

fn label<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn hello(opts: &LoadOptions, pass: &str, trusted: Option<bool>, load: Vec<LoadEntry>) -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        host: "pi-toolkit".into(),
        host_version: env!("CARGO_PKG_VERSION").into(),
        cwd: opts.cwd.display().to_string(),
        mode: opts.mode.clone(),
        // RPC mode has a client that answers UI calls (extensions/ui.rs).
        has_ui: opts.mode == "rpc",
        pass: pass.into(),
        agent_dir: opts.agent_dir.display().to_string(),
        session_file: opts.session_file.clone(),
        session_id: opts.session_id.clone(),
        project_trusted: trusted,
        load,
        settings: opts.settings.clone(),
        load_timeout_ms: None,
    }
}

fn entry(e: &Extension) -> LoadEntry {
    LoadEntry {
        path: e.path.display().to_string(),
        source: label(&e.source),
        scope: label(&e.scope),
    }
}

/// An extension that did not load, and why (pi's `<error>` wording where
/// pi has one).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadFailure {
    pub path: String,
    pub error: String,
}

impl std::fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Failed to load extension \"{}\": {}",
            self.path, self.error
        )
    }
}

/// A load pass that failed: the run must not go on (pi 1.6.0 exits 1 on
/// any extension that fails to load; a guard that did not load must not
/// leave the run unguarded).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadFailed(pub Vec<LoadFailure>);

impl std::fmt::Display for LoadFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl From<LoadFailed> for crate::cli::CliError {
    fn from(e: LoadFailed) -> Self {
        crate::cli::CliError::failed(e.to_string()).with_hint(
            "nothing was sent to the model; fix or remove the extension \
             (--no-extensions skips the discovered ones)",
        )
    }
}

/// Starts `exts` (one pass) and adds what registered to `runner`; the
/// extensions that did not load, each with its cause. One extension's
/// failure never hides the others: every process extension is its own
/// process, and the Node host loads each TypeScript extension under its
/// own time limit and names the one that failed.
pub async fn load(
    runner: &Arc<Runner>,
    exts: &[Extension],
    pass: &str,
    trusted: Option<bool>,
    opts: &LoadOptions,
) -> Vec<LoadFailure> {
    let mut failures = Vec::new();
    let fail = |failures: &mut Vec<LoadFailure>, path: &Path, error: String| {
        failures.push(LoadFailure {
            path: path.display().to_string(),
            error,
        })
    };
    let mut node_exts = Vec::new();
    let mut starts = Vec::new();
    for e in exts {
        match kind_of(&e.path) {
            Some(ExtKind::Node) => node_exts.push(e.clone()),
            Some(ExtKind::Process(program)) => {
                let spawn = Spawn {
                    program,
                    args: Vec::new(),
                    display: e.path.display().to_string(),
                    cwd: opts.cwd.clone(),
                    prog: opts.prog.clone(),
                };
                let h = hello(opts, pass, trusted, vec![entry(e)]);
                let path = e.path.clone();
                starts
                    .push(async move { (vec![path], Host::start(spawn, h, opts.handshake).await) });
            }
            None if !e.path.exists() => fail(
                &mut failures,
                &e.path,
                format!("Extension path does not exist: {}", e.path.display()),
            ),
            None => fail(
                &mut failures,
                &e.path,
                "not a TS/JS file or an executable program".into(),
            ),
        }
    }
    let node_start = if node_exts.is_empty() {
        None
    } else {
        match (super::node::available(), super::node::find_node()) {
            (true, Some(node)) => match super::node::install() {
                Ok(dir) => Some((node, dir)),
                Err(err) => {
                    for e in &node_exts {
                        fail(
                            &mut failures,
                            &e.path,
                            format!("cannot install the Node host: {err}"),
                        );
                    }
                    None
                }
            },
            _ => {
                for e in &node_exts {
                    fail(
                        &mut failures,
                        &e.path,
                        "needs Node.js (set PI_NODE or put node on PATH)".into(),
                    );
                }
                None
            }
        }
    };
    let mut all = futures_util::future::join_all(starts).await;
    if let Some((node, dir)) = node_start {
        let spawn = Spawn {
            program: node,
            args: vec![dir.join(super::node::ENTRY).into_os_string()],
            display: "node host".into(),
            cwd: opts.cwd.clone(),
            prog: opts.prog.clone(),
        };
        let load: Vec<LoadEntry> = node_exts.iter().map(entry).collect();
        let mut h = hello(opts, pass, trusted, load);
        // The host fails an extension that takes longer than the limit and
        // loads the next (pi-run's own clock is for a host that hangs).
        h.load_timeout_ms = Some(u64::try_from(opts.handshake.as_millis()).unwrap_or(u64::MAX));
        let paths = node_exts.iter().map(|e| e.path.clone()).collect();
        all.push((paths, Host::start(spawn, h, opts.handshake).await));
    }
    let mut infos = Vec::new();
    // A process none of whose extensions loaded serves nothing: stopped.
    let mut idle = Vec::new();
    for (paths, started) in all {
        let (host, reg) = match started {
            Ok(v) => v,
            Err(err) => {
                match err.loading.and_then(|i| paths.get(i)) {
                    Some(p) => fail(&mut failures, p, err.cause),
                    None => {
                        for p in &paths {
                            fail(&mut failures, p, err.cause.clone());
                        }
                    }
                }
                continue;
            }
        };
        for err in &reg.errors {
            let path = if err.path.is_empty() {
                paths
                    .first()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            } else {
                err.path.clone()
            };
            failures.push(LoadFailure {
                path,
                error: err.message.clone(),
            });
        }
        if reg.extensions.is_empty() {
            idle.push(host);
            continue;
        }
        for r in reg.extensions {
            let path = paths
                .get(r.ext)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| r.path.clone());
            infos.push(ExtInfo::new(Arc::clone(&host), r.ext, path, r));
        }
    }
    runner.add(infos);
    futures_util::future::join_all(idle.iter().map(|h| h.close(Duration::from_secs(2)))).await;
    failures
}

/// [`load`] for a run: any extension that did not load fails the pass, and
/// then every extension process of the run (earlier passes too) is
/// stopped, before anything reaches the model.
pub async fn load_or_fail(
    runner: &Arc<Runner>,
    exts: &[Extension],
    pass: &str,
    trusted: Option<bool>,
    opts: &LoadOptions,
) -> Result<(), LoadFailed> {
    let failures = load(runner, exts, pass, trusted, opts).await;
    if failures.is_empty() {
        return Ok(());
    }
    runner.close_all().await;
    Err(LoadFailed(failures))
}

/// The tools the extensions registered, in load order, each with whether
/// it starts active (`defaultActive`, default true). A name a previous
/// extension already registered is pi's conflict error, reported and
/// skipped.
pub fn tools(runner: &Arc<Runner>, prog: &str) -> Vec<(Arc<dyn Tool>, bool)> {
    let mut out: Vec<(Arc<dyn Tool>, bool)> = Vec::new();
    let mut owners: Vec<(String, String)> = Vec::new();
    runner.absorb_more();
    for e in runner.extensions() {
        for spec in &e.tools() {
            if let Some((_, owner)) = owners.iter().find(|(n, _)| *n == spec.name) {
                eprintln!(
                    "{prog}: extension {}: Tool \"{}\" conflicts with {owner}; skipped",
                    e.path, spec.name
                );
                continue;
            }
            owners.push((spec.name.clone(), e.path.clone()));
            let tool: Arc<dyn Tool> = Arc::new(ExtensionTool {
                host: Arc::clone(&e.host),
                ext: e.ext,
                path: e.path.clone(),
                spec: spec.clone(),
                context: Arc::clone(runner) as Arc<dyn super::tool::ContextSource>,
            });
            out.push((tool, spec.default_active != Some(false)));
        }
    }
    out
}
