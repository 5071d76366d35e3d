//! All extensions of a run as one [`Hooks`]: each event goes to the
//! extensions that handle it, in load order, and their answers are composed
//! exactly as pi 1.6.0 composes handlers ([`hooks`]): `input`
//! transforms chain and the first `handled` wins; `before_agent_start`
//! messages accumulate and the last `systemPrompt` wins; `context` lists
//! chain; `tool_call` rewrites chain and the first block wins, while an
//! error, a timeout or a dead extension blocks (fail closed, no
//! `extension_error`); `tool_result` patches chain; `message_end`
//! replacements chain (same role only); every other throw is reported and
//! the chain goes on. The runner also answers the extensions' calls
//! (`appendEntry`, `getActiveTools`, `ui.*` …; [`api`]), switches the
//! model and thinking level for them ([`models`]), and loads every
//! extension again after a session replacement ([`reload`]). This file
//! holds the runner itself: its extensions, their lifecycle
//! (`project_trust`, `session_start`, `session_shutdown`, closing), and
//! what the run tells it (tools, UI, queue).

mod api;
mod hooks;
mod models;
mod reload;

pub use hooks::custom_message;
use models::model_json;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::answer::{tool_call_answer, ToolCallAnswer};
use super::host::{CallHandler, Host, HostError};
use crate::agent::hooks::{
    ready, AgentOp, AgentSnapshot, BeforeAgentStart, BeforeAgentStartOutcome, BoxFuture,
    Delegation, Hooks, InputEvent, InputOutcome, ToolCallEvent, ToolCallOutcome, ToolResultEvent,
};
use crate::format::extension::{CommandSpec, Ctx, HostRecord, Registration, ToolSpec};
use crate::format::message::CustomMessage;
use crate::format::{AgentMessage, ContentBlock, Num, UserContent};
use crate::tools::ToolOutput;

/// One loaded extension.
pub struct ExtInfo {
    pub host: Arc<Host>,
    /// Its index in its process.
    pub ext: usize,
    /// The path diagnostics and `extension_error` name.
    pub path: String,
    pub reg: Registration,
    events: Mutex<HashSet<String>>,
    /// Tools and commands registered after load (`register_more`, e.g. in
    /// `session_start`); a later one replaces an earlier one of its name.
    more: Mutex<(Vec<ToolSpec>, Vec<CommandSpec>)>,
}

impl ExtInfo {
    pub fn new(host: Arc<Host>, ext: usize, path: String, reg: Registration) -> ExtInfo {
        let events = reg.events.iter().cloned().collect();
        ExtInfo {
            host,
            ext,
            path,
            reg,
            events: Mutex::new(events),
            more: Mutex::default(),
        }
    }
    fn handles(&self, event: &str) -> bool {
        lock(&self.events).contains(event)
    }

    /// Every tool it registered: at load, then later ones (a re-registered
    /// name keeps its place with the new definition, as pi replaces it).
    pub fn tools(&self) -> Vec<ToolSpec> {
        merged(&self.reg.tools, &lock(&self.more).0, |t| &t.name)
    }

    /// Every command it registered, at load and later (same rule).
    pub fn commands(&self) -> Vec<CommandSpec> {
        merged(&self.reg.commands, &lock(&self.more).1, |c| &c.name)
    }
}

/// `first` with `later` applied: a later item replaces the one of the same
/// name in place, a new name is appended.
fn merged<T: Clone>(first: &[T], later: &[T], name: impl Fn(&T) -> &String) -> Vec<T> {
    let mut out = first.to_vec();
    for t in later {
        match out.iter_mut().find(|o| name(o) == name(t)) {
            Some(o) => *o = t.clone(),
            None => out.push(t.clone()),
        }
    }
    out
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How the runner reports and waits.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// `print`, `json` or `rpc` (the `mode` extensions see).
    pub mode: String,
    /// `extension_error` records on the event stream (pi does this only in
    /// RPC mode); otherwise one `Extension error (<path>): <error>` stderr
    /// line each (print and `--mode json`, as pi 1.6.0).
    pub records: bool,
    pub cwd: String,
    pub event_timeout: Duration,
    pub prog: String,
    /// The merged settings (`getSettings`).
    pub settings: Value,
}

/// What the runner knows about the agent without asking it.
#[derive(Default)]
struct Shared {
    state: AgentSnapshot,
    active_tools: Vec<String>,
    all_tools: Vec<Value>,
    session_name: Option<String>,
    system_prompt: String,
    project_trusted: Option<bool>,
    /// A `setActiveTools` made before the agent exists (`session_start`):
    /// the names, resolved when the run's tool set is decided.
    pending_active: Option<Vec<String>>,
}

/// The extensions of a run.
pub struct Runner {
    cfg: RunnerConfig,
    exts: Mutex<Vec<Arc<ExtInfo>>>,
    events: Mutex<HashSet<String>>,
    errors: Mutex<Vec<Value>>,
    ops: Mutex<Vec<AgentOp>>,
    shared: Mutex<Shared>,
    /// Every tool `setActiveTools` may choose from.
    pool: Mutex<Vec<Arc<dyn crate::tools::Tool>>>,
    ops_ready: tokio::sync::Notify,
    queue: Mutex<Option<Arc<crate::agent::queue::MessageQueue>>>,
    cancel: CancellationToken,
    /// The client that answers `ui.*` calls (RPC mode), if any.
    ui: Mutex<Option<Arc<dyn super::ui::UiTransport>>>,
    /// `session_shutdown` went out already.
    shutdown_sent: AtomicBool,
    /// Rebuilds the prompt's sections for a new active tool set.
    prompt: Mutex<Option<PromptBuilder>>,
    /// Itself, for the tools it makes from late registrations.
    me: Weak<Runner>,
    /// Where `setModel` finds models and keys (`models.json`, `auth.json`).
    agent_dir: Mutex<Option<std::path::PathBuf>>,
    /// An extension asked to shut down (`ctx.shutdown()`).
    shutdown_requested: AtomicBool,
    /// Model/level changes whose `*_select` events are still going out.
    followups: tokio::sync::watch::Sender<usize>,
    /// The flag values the command line gave ([`Runner::configure`]),
    /// given again to the instances a reload makes.
    given_flags: Mutex<Map<String, Value>>,
    /// `(extension, notification)` pairs whose handler once did not answer
    /// within the limit: not sent again this run, so a hung
    /// `message_update` handler costs one timeout, not one per delta.
    gave_up: Mutex<HashSet<(usize, String)>>,
}

/// The system prompt's sections for an active tool set (pi-run's plan with
/// these tools), so the `tools` and `rules` sections follow the set.
pub type PromptBuilder = Arc<
    dyn Fn(&[Arc<dyn crate::tools::Tool>]) -> Result<Vec<(String, String)>, String> + Send + Sync,
>;

impl Runner {
    pub fn new(cfg: RunnerConfig, cancel: CancellationToken) -> Arc<Runner> {
        Arc::new_cyclic(|me| Runner {
            cfg,
            exts: Mutex::default(),
            events: Mutex::default(),
            errors: Mutex::default(),
            ops: Mutex::default(),
            shared: Mutex::default(),
            pool: Mutex::default(),
            ops_ready: tokio::sync::Notify::new(),
            queue: Mutex::default(),
            cancel,
            ui: Mutex::default(),
            shutdown_sent: AtomicBool::new(false),
            prompt: Mutex::default(),
            me: me.clone(),
            agent_dir: Mutex::default(),
            shutdown_requested: AtomicBool::new(false),
            followups: tokio::sync::watch::channel(0).0,
            given_flags: Mutex::default(),
            gave_up: Mutex::default(),
        })
    }

    /// Routes extension UI calls to `ui` from now on.
    pub fn set_ui(&self, ui: Arc<dyn super::ui::UiTransport>) {
        *lock(&self.ui) = Some(ui);
    }

    /// Adds loaded extensions (a load pass), in load order; their
    /// processes' calls are served by this runner.
    pub fn add(self: &Arc<Self>, exts: Vec<ExtInfo>) {
        for e in &exts {
            e.host.set_handler(Arc::clone(self) as Arc<dyn CallHandler>);
            lock(&self.events).extend(e.reg.events.iter().cloned());
        }
        lock(&self.exts).extend(exts.into_iter().map(Arc::new));
    }

    pub fn extensions(&self) -> Vec<Arc<ExtInfo>> {
        lock(&self.exts).clone()
    }

    /// The trust decision, once the first pass made it.
    pub fn set_project_trusted(&self, trusted: bool) {
        lock(&self.shared).project_trusted = Some(trusted);
    }

    /// The tools the agent runs with and their definitions (for
    /// `getActiveTools` / `getAllTools`).
    pub fn set_tools(&self, active: Vec<String>, all: Vec<Value>) {
        let mut s = lock(&self.shared);
        s.active_tools = active;
        s.all_tools = all;
    }

    pub fn set_system_prompt(&self, p: String) {
        lock(&self.shared).system_prompt = p;
    }

    /// The agent folder `setModel` reads models and keys from.
    pub fn set_agent_dir(&self, dir: std::path::PathBuf) {
        *lock(&self.agent_dir) = Some(dir);
    }

    /// Whether an extension called `ctx.shutdown()`. pi 1.6.0's print and
    /// JSON modes finish their prompts anyway (observed), so pi-run does
    /// too; a long-lived mode (RPC) ends after the current command.
    pub fn shutdown_requested(&self) -> bool {
        self.shutdown_requested.load(Ordering::Relaxed)
    }
    /// How the prompt's sections follow the active tools (none: the
    /// prompt is fixed, e.g. `--system-from`).
    pub fn set_prompt_builder(&self, b: Option<PromptBuilder>) {
        *lock(&self.prompt) = b;
    }

    /// The snapshot every event and execution carries.
    pub fn ctx(&self) -> Ctx {
        let s = lock(&self.shared);
        Ctx {
            cwd: self.cfg.cwd.clone(),
            mode: self.cfg.mode.clone(),
            has_ui: self.cfg.mode == "rpc",
            model: (!s.state.model.is_empty())
                .then(|| json!({"provider": s.state.provider, "id": s.state.model})),
            thinking_level: s.state.thinking_level.clone(),
            session_file: s.state.session_file.clone(),
            session_id: s.state.session_id.clone(),
            leaf_id: s.state.leaf_id.clone(),
            is_idle: s.state.idle,
            project_trusted: s.project_trusted,
            signal_aborted: self.cancel.is_cancelled(),
        }
    }

    /// Reports a handler's failure: an `extension_error` record in RPC
    /// mode, pi's stderr line otherwise.
    pub fn report(&self, path: &str, event: &str, error: &str) {
        if self.cfg.records {
            lock(&self.errors).push(json!({"type": "extension_error", "extensionPath": path, "event": event, "error": error}));
        } else {
            eprintln!("Extension error ({path}): {error}");
        }
    }

    /// The extensions handling `event`; `with_dead` keeps dead ones (the
    /// `tool_call` gate fails closed on them).
    fn handlers(&self, event: &str, with_dead: bool) -> Vec<Arc<ExtInfo>> {
        self.absorb_more();
        self.extensions()
            .into_iter()
            .filter(|e| e.handles(event) && (with_dead || e.host.dead_reason().is_none()))
            .collect()
    }

    /// Sends `event` to one extension: its answer, and the messages of its
    /// handlers that threw without ending the chain.
    async fn send(&self, e: &ExtInfo, event: &Value) -> (Result<Value, HostError>, Vec<String>) {
        let ctx = self.ctx();
        e.host
            .request_full(
                |id| HostRecord::Event {
                    id,
                    ext: e.ext,
                    event: event.clone(),
                    ctx,
                },
                None,
                Some(self.cfg.event_timeout),
                &self.cancel,
            )
            .await
    }

    /// Sends `event` to one handler; every failure is reported (each
    /// thrown message once) and a failed answer gives `None`.
    async fn send_reported(&self, e: &ExtInfo, event: &Value) -> Option<Value> {
        self.send_answer(e, event).await.ok()
    }

    /// [`Runner::send_reported`], telling why there is no answer.
    async fn send_answer(&self, e: &ExtInfo, event: &Value) -> Result<Value, HostError> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let (answer, errors) = self.send(e, event).await;
        for err in &errors {
            self.report(&e.path, kind, err);
        }
        match &answer {
            Ok(_) | Err(HostError::Dead(_)) | Err(HostError::Aborted) => {}
            Err(HostError::Failed(msg)) => {
                // With several throws the answer's error is the first of
                // `errors`, reported already.
                if errors.is_empty() {
                    self.report(&e.path, kind, msg);
                }
            }
            Err(HostError::Timeout) => {
                self.report(
                    &e.path,
                    kind,
                    &format!(
                        "did not answer {kind} within {} s",
                        self.cfg.event_timeout.as_secs_f64()
                    ),
                );
            }
        }
        answer
    }

    /// Every handler of a notification, in order.
    async fn notify_all(&self, event: Value) {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        // (A session replacement's `session_shutdown` is not the last one.)
        if kind == "session_shutdown" && event.get("reason").and_then(Value::as_str) == Some("quit")
        {
            self.shutdown_sent.store(true, Ordering::Relaxed);
        }
        for e in self.handlers(kind, false) {
            let key = (Arc::as_ptr(&e) as usize, kind.to_string());
            if lock(&self.gave_up).contains(&key) {
                continue;
            }
            if self.send_answer(&e, &event).await == Err(HostError::Timeout) {
                lock(&self.gave_up).insert(key);
                eprintln!(
                    "{}: extension {}: its {kind} handler did not answer within {} s; not waiting for it again this run",
                    self.cfg.prog,
                    e.path,
                    self.cfg.event_timeout.as_secs_f64()
                );
            }
        }
    }

    /// `project_trust` (first pass): the first `yes`/`no` wins; `undecided`
    /// and failures fall through. `Some((trusted, remember))`.
    pub async fn project_trust(&self, cwd: &str) -> Option<(bool, bool)> {
        let ev = json!({"type": "project_trust", "cwd": cwd});
        for e in self.handlers("project_trust", false) {
            let Some(v) = self.send_reported(&e, &ev).await else {
                continue;
            };
            let remember = v.get("remember").and_then(Value::as_bool) == Some(true);
            match v.get("trusted").and_then(Value::as_str) {
                Some("yes") => return Some((true, remember)),
                Some("no") => return Some((false, remember)),
                _ => {}
            }
        }
        None
    }

    /// `session_start` then `resources_discover`; returns the extra
    /// `(skillPaths, promptPaths, themePaths)`, merged.
    pub async fn session_start(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        self.notify_all(json!({"type": "session_start", "reason": "startup"}))
            .await;
        let ev = json!({"type": "resources_discover", "cwd": self.cfg.cwd, "reason": "startup"});
        let mut out = (Vec::new(), Vec::new(), Vec::new());
        for e in self.handlers("resources_discover", false) {
            if let Some(v) = self.send_reported(&e, &ev).await {
                let strs = |k: &str| crate::format::string_list(v.get(k));
                out.0.extend(strs("skillPaths"));
                out.1.extend(strs("promptPaths"));
                out.2.extend(strs("themePaths"));
            }
        }
        out
    }

    /// `session_shutdown`, then every process is closed (2 s grace, then
    /// its group is killed).
    pub async fn shutdown(&self) {
        if !self.cancel.is_cancelled() && !self.shutdown_sent.load(Ordering::Relaxed) {
            self.notify_all(Self::shutdown_event()).await;
        }
        self.close_all().await;
    }

    /// Stops every extension process (EOF, SIGTERM, SIGKILL; see
    /// [`Host::close`]) without `session_shutdown`: a run that ends before
    /// its session started (an extension failed to load).
    pub async fn close_all(&self) {
        let mut seen: Vec<*const Host> = Vec::new();
        let hosts: Vec<Arc<Host>> = self
            .extensions()
            .iter()
            .filter_map(|e| {
                let p = Arc::as_ptr(&e.host);
                (!seen.contains(&p)).then(|| {
                    seen.push(p);
                    Arc::clone(&e.host)
                })
            })
            .collect();
        let closing = hosts.iter().map(|h| h.close(Duration::from_secs(2)));
        futures_util::future::join_all(closing).await;
    }

    /// pi's `session_shutdown` at the end of a run (`reason: "quit"`).
    /// Sent through the agent ([`crate::agent::Agent::notify_hooks`]) while
    /// the session is open, so what its handlers append is written; then
    /// [`Runner::shutdown`] does not send it again.
    pub fn shutdown_event() -> Value {
        json!({"type": "session_shutdown", "reason": "quit"})
    }

    /// Kills every process at once (abort).
    pub fn kill_all(&self) {
        for e in self.extensions() {
            e.host.kill();
        }
    }

    /// The flag values each extension gets (`configure`), from what the
    /// command line gave: every flag it registered, its default otherwise.
    pub async fn configure(&self, given: &Map<String, Value>) {
        *lock(&self.given_flags) = given.clone();
        self.configure_exts(&self.extensions(), given).await;
    }

    async fn configure_exts(&self, exts: &[Arc<ExtInfo>], given: &Map<String, Value>) {
        for e in exts {
            let mut flags = Map::new();
            for f in &e.reg.flags {
                let v = given
                    .get(&f.name)
                    .cloned()
                    .or_else(|| f.default.clone())
                    .unwrap_or(Value::Null);
                flags.insert(f.name.clone(), v);
            }
            let send = e.host.send(HostRecord::Configure { ext: e.ext, flags });
            let _ = tokio::time::timeout(self.cfg.event_timeout, send).await;
        }
    }

    /// Every extension command under the name that invokes it, in pi's
    /// order (load order, then registration order): a name that two or
    /// more extensions registered becomes `name:1`, `name:2`, … in load
    /// order, as pi 1.6.0 names them (`get_commands`, `/name:2`).
    pub fn command_table(&self) -> Vec<(String, Arc<ExtInfo>, CommandSpec)> {
        self.absorb_more();
        let all: Vec<(Arc<ExtInfo>, CommandSpec)> = self
            .extensions()
            .into_iter()
            .flat_map(|e| e.commands().into_iter().map(move |c| (Arc::clone(&e), c)))
            .collect();
        let mut seen: std::collections::HashMap<String, usize> = Default::default();
        all.iter()
            .map(|(e, c)| {
                let owners = all.iter().filter(|(_, o)| o.name == c.name).count();
                let name = if owners > 1 {
                    let n = seen.entry(c.name.clone()).or_insert(0);
                    *n += 1;
                    format!("{}:{n}", c.name)
                } else {
                    c.name.clone()
                };
                (name, Arc::clone(e), c.clone())
            })
            .collect()
    }

    fn push_op(&self, op: AgentOp) {
        lock(&self.ops).push(op);
        self.ops_ready.notify_one();
    }

    /// The agent's message queue (`sendMessage`, `sendUserMessage`); from
    /// now on an agent serves the calls that need it.
    pub fn set_queue(&self, q: Arc<crate::agent::queue::MessageQueue>) {
        *lock(&self.queue) = Some(q);
    }

    /// The agent is gone (before `session_shutdown`): calls that need it
    /// are answered at once again instead of waiting for it.
    pub fn detach(&self) {
        *lock(&self.queue) = None;
    }

    /// Whether an agent serves the calls that need it (between
    /// [`Runner::set_queue`] and [`Runner::detach`]). Before it exists
    /// (`session_start`) and after it is gone (`session_shutdown`) a read
    /// must not wait for it.
    fn attached(&self) -> bool {
        lock(&self.queue).is_some()
    }

    /// Every tool `setActiveTools` may name (active or not).
    pub fn set_tool_pool(&self, tools: Vec<Arc<dyn crate::tools::Tool>>) {
        *lock(&self.pool) = tools;
    }

    /// The active set a `setActiveTools` asked for before the agent
    /// existed, from the pool (in pool order; unknown names are ignored,
    /// as pi does).
    pub fn take_pending_active(&self) -> Option<Vec<Arc<dyn crate::tools::Tool>>> {
        let names = lock(&self.shared).pending_active.take()?;
        Some(
            lock(&self.pool)
                .iter()
                .filter(|t| names.contains(&t.name().into_owned()))
                .cloned()
                .collect(),
        )
    }

    /// The pool [`Runner::set_tool_pool`] set.
    pub fn tool_pool(&self) -> Vec<Arc<dyn crate::tools::Tool>> {
        lock(&self.pool).clone()
    }

    /// Answers a call from the agent itself: `f` runs on the agent as soon
    /// as the loop can apply it (also while it waits for this very
    /// extension's handler).
    fn ask(
        &self,
        f: impl FnOnce(&mut crate::agent::Agent) -> Result<Value, String> + Send + 'static,
    ) -> BoxFuture<'static, Result<Value, String>> {
        if !self.attached() {
            return ready(Err(
                "pi-toolkit host: no session is open at this point (before session_start's agent or after shutdown)"
                    .into(),
            ));
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.push_op(Box::new(move |agent, _emit| {
            let _ = tx.send(f(agent));
        }));
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err("pi-toolkit host: the agent is not running".into()))
        })
    }
}

impl super::tool::ContextSource for Runner {
    fn ctx(&self) -> Ctx {
        Runner::ctx(self)
    }
}
