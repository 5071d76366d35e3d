//! Starting a run's extensions, pass by pass (seed 002): the first pass
//! starts only CLI and user extensions (they alone may answer
//! `project_trust`); once the project is trusted, the second pass starts
//! the project's. A project extension is never started while the project
//! is untrusted. TypeScript/JavaScript extensions share one Node host
//! process; every process extension is its own process. A broken
//! extension is one diagnostic and the run goes on (seed 002; pi 1.6.0
//! exits 1 instead).

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
    }
}

fn entry(e: &Extension) -> LoadEntry {
    LoadEntry {
        path: e.path.display().to_string(),
        source: label(&e.source),
        scope: label(&e.scope),
    }
}

/// Starts `exts` (one pass) and adds what registered to `runner`. Every
/// failure is one stderr line naming the extension; the rest still run.
pub async fn load(
    runner: &Arc<Runner>,
    exts: &[Extension],
    pass: &str,
    trusted: Option<bool>,
    opts: &LoadOptions,
) {
    let warn = |path: &Path, msg: &str| {
        eprintln!(
            "{}: extension {}: {msg}; skipped",
            opts.prog,
            path.display()
        )
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
            None => warn(&e.path, "not a TS/JS file or an executable program"),
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
                        warn(&e.path, &format!("cannot install the Node host: {err}"));
                    }
                    None
                }
            },
            _ => {
                for e in &node_exts {
                    warn(&e.path, "needs Node.js (set PI_NODE or put node on PATH)");
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
        let h = hello(opts, pass, trusted, load);
        let paths = node_exts.iter().map(|e| e.path.clone()).collect();
        all.push((paths, Host::start(spawn, h, opts.handshake).await));
    }
    let mut infos = Vec::new();
    for (paths, started) in all {
        let (host, reg) = match started {
            Ok(v) => v,
            Err(msg) => {
                for p in &paths {
                    eprintln!("{}: {msg}; extension {} skipped", opts.prog, p.display());
                }
                continue;
            }
        };
        for err in &reg.errors {
            eprintln!(
                "{}: extension {}: {}; skipped",
                opts.prog, err.path, err.message
            );
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
                runner: Arc::clone(runner),
            });
            out.push((tool, spec.default_active != Some(false)));
        }
    }
    out
}
