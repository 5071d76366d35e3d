//! All extensions of a run as one [`Hooks`]: each event goes to the
//! extensions that handle it, in load order, and their answers are composed
//! exactly as pi 1.6.0 composes handlers (reference §1.4): `input`
//! transforms chain and the first `handled` wins; `before_agent_start`
//! messages accumulate and the last `systemPrompt` wins; `context` lists
//! chain; `tool_call` rewrites chain and the first block wins, while an
//! error, a timeout or a dead extension blocks (fail closed, no
//! `extension_error`); `tool_result` patches chain; `message_end`
//! replacements chain (same role only); every other throw is reported and
//! the chain goes on. The runner also answers the extensions' calls
//! (`appendEntry`, `getActiveTools`, `ui.*` …).

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

    /// Registrations made after load: new events join at once, new tools
    /// and commands with [`ExtInfo::tools`] / [`ExtInfo::commands`].
    /// While an agent runs, tools registered now join its tool set (active
    /// unless `defaultActive: false`) from its next request on, as pi
    /// refreshes its tools at once.
    pub fn absorb_more(&self) {
        let mut late: Vec<(Arc<dyn crate::tools::Tool>, bool)> = Vec::new();
        for e in self.extensions() {
            for m in e.host.take_more() {
                // The Node host's batch may be for another extension it runs.
                let owner = if m.ext == e.ext {
                    Some(Arc::clone(&e))
                } else {
                    self.extensions()
                        .into_iter()
                        .find(|o| Arc::ptr_eq(&o.host, &e.host) && o.ext == m.ext)
                };
                let Some(owner) = owner else { continue };
                lock(&owner.events).extend(m.events.iter().cloned());
                lock(&self.events).extend(m.events);
                if let Some(me) = self.me.upgrade() {
                    for spec in &m.tools {
                        let tool: Arc<dyn crate::tools::Tool> =
                            Arc::new(super::tool::ExtensionTool {
                                host: Arc::clone(&owner.host),
                                ext: owner.ext,
                                path: owner.path.clone(),
                                spec: spec.clone(),
                                runner: me.clone(),
                            });
                        late.push((tool, spec.default_active != Some(false)));
                    }
                }
                let mut more = lock(&owner.more);
                more.0.extend(m.tools);
                more.1.extend(m.commands);
            }
        }
        if late.is_empty() || !self.attached() {
            // Before the agent exists, pi-run joins them when it decides
            // the starting set.
            return;
        }
        {
            let mut pool = lock(&self.pool);
            for (t, _) in &late {
                let name = t.definition().name;
                match pool.iter_mut().find(|p| p.definition().name == name) {
                    Some(p) => *p = Arc::clone(t),
                    None => pool.push(Arc::clone(t)),
                }
            }
        }
        let builder = lock(&self.prompt).clone();
        let me = self.me.clone();
        self.push_op(Box::new(move |agent, _emit| {
            let mut tools = agent.opts.tools.clone();
            for (t, active) in late {
                let name = t.definition().name;
                match tools.iter_mut().find(|p| p.definition().name == name) {
                    Some(p) => *p = t,
                    None if active => tools.push(t),
                    None => {}
                }
            }
            if let Some(me) = me.upgrade() {
                me.retool(agent, tools, builder);
            }
        }));
    }

    /// The agent runs with `tools` from its next request on; the prompt's
    /// sections are rebuilt for them (the next turn records the patch:
    /// the changed `tools`/`rules` sections, `toolsAdded`/`toolsRemoved`,
    /// as pi 1.6.0 records it).
    fn retool(
        &self,
        agent: &mut crate::agent::Agent,
        tools: Vec<Arc<dyn crate::tools::Tool>>,
        builder: Option<PromptBuilder>,
    ) {
        if let Some(b) = builder {
            match b(&tools) {
                Ok(sections) => agent.opts.sections = sections,
                Err(e) => eprintln!("{}: system prompt: {e}", self.cfg.prog),
            }
        }
        self.set_tools(
            tools.iter().map(|t| t.definition().name).collect(),
            tools
                .iter()
                .filter_map(|t| serde_json::to_value(t.definition()).ok())
                .collect(),
        );
        agent.opts.tools = tools;
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

    fn registry(&self) -> Result<crate::model::ModelRegistry, String> {
        let dir = lock(&self.agent_dir)
            .clone()
            .ok_or("pi-toolkit host: no model registry in this run")?;
        crate::model::ModelRegistry::load(&dir).map_err(|e| e.to_string())
    }

    /// `pi.setModel`: `false` for an unknown model or one without a key
    /// (pi: false without auth); otherwise the agent uses it from the next
    /// request, the thinking level is clamped to it, the change is recorded
    /// (`model_change`, `thinking_level_change`), and the extensions get
    /// `thinking_level_select` (when the level moved) and `model_select`
    /// with pi's payload before the call returns, as in pi.
    fn set_model(
        self: Arc<Self>,
        provider: String,
        id: String,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let reg = match self.registry() {
            Ok(r) => r,
            Err(e) => return ready(Err(e)),
        };
        let Some(model) = reg
            .all()
            .iter()
            .find(|m| m.provider == provider && m.id == id)
            .cloned()
        else {
            return ready(Ok(false.into()));
        };
        let Ok(Some(key)) = reg.api_key(&provider, None) else {
            return ready(Ok(false.into()));
        };
        match reg.resolve_headers(&model, Some(&key)) {
            Ok(model) => self.switch_model(reg, model, key),
            Err(e) => ready(Err(e.to_string())),
        }
    }

    fn switch_model(
        self: Arc<Self>,
        reg: crate::model::ModelRegistry,
        model: crate::format::model::Model,
        key: String,
    ) -> BoxFuture<'static, Result<Value, String>> {
        use crate::model::select::clamp_thinking;
        let map = reg.thinking_level_map(&model).cloned();
        let new_json = model_json(&reg, &model);
        let chosen = model.clone();
        let busy = Followup::new(&self.followups);
        let change = self.ask(move |a| {
            let (prev, prev_level) = (a.opts.model.clone(), a.opts.thinking);
            if prev.provider == chosen.provider && prev.id == chosen.id {
                return Ok(Value::Null);
            }
            let level = clamp_thinking(&chosen, map.as_ref(), prev_level);
            a.opts.model = chosen;
            a.opts.api_key = Some(key);
            a.opts.thinking = level;
            a.prepare_session()?;
            Ok(json!({"provider": prev.provider, "id": prev.id,
                          "previousLevel": prev_level.as_str(), "level": level.as_str()}))
        });
        Box::pin(async move {
            let _busy = busy;
            let change = change.await?;
            if change.is_null() {
                return Ok(true.into());
            }
            let previous = reg
                .all()
                .iter()
                .find(|m| {
                    Some(m.provider.as_str()) == change["provider"].as_str()
                        && Some(m.id.as_str()) == change["id"].as_str()
                })
                .map(|m| model_json(&reg, m))
                .unwrap_or_else(|| json!({"provider": change["provider"], "id": change["id"]}));
            {
                let mut s = lock(&self.shared);
                s.state.provider = model.provider.clone();
                s.state.model = model.id.clone();
                s.state.thinking_level = change["level"].as_str().unwrap_or("off").to_string();
            }
            if change["level"] != change["previousLevel"] {
                self.notify_all(json!({"type": "thinking_level_select", "level": change["level"], "previousLevel": change["previousLevel"]}))
                .await;
            }
            self.notify_all(json!({"type": "model_select", "model": new_json, "previousModel": previous, "source": "set"}))
            .await;
            Ok(true.into())
        })
    }

    /// `pi.setThinkingLevel`: clamped to the model; a change is recorded
    /// (`thinking_level_change`) and sent as `thinking_level_select`.
    ///
    /// The change is queued when the call is read (before the answers read
    /// after it), so the handler's next event already sees it.
    fn set_thinking(self: Arc<Self>, level: String) -> BoxFuture<'static, Result<Value, String>> {
        use crate::model::select::{clamp_thinking, parse_thinking};
        let want = match parse_thinking(&level) {
            Ok(w) => w,
            Err(e) => return ready(Err(e.to_string())),
        };
        // Without a registry (the faux provider) no map clamps the level.
        let reg = self.registry().ok();
        let busy = Followup::new(&self.followups);
        let change = self.ask(move |a| {
            let map = reg
                .as_ref()
                .and_then(|r| r.thinking_level_map(&a.opts.model).cloned());
            let prev = a.opts.thinking;
            let level = clamp_thinking(&a.opts.model, map.as_ref(), want);
            if level == prev {
                return Ok(Value::Null);
            }
            a.opts.thinking = level;
            a.prepare_session()?;
            Ok(json!({"type": "thinking_level_select", "level": level.as_str(), "previousLevel": prev.as_str()}))
        });
        Box::pin(async move {
            let _busy = busy;
            let change = change.await?;
            if !change.is_null() {
                lock(&self.shared).state.thinking_level =
                    change["level"].as_str().unwrap_or("off").to_string();
                self.notify_all(change).await;
            }
            Ok(Value::Null)
        })
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
                let strs = |k: &str| -> Vec<String> {
                    v.get(k)
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default()
                };
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

    /// A session replacement, as pi 1.6.0 does it: every process that
    /// reloads (the Node host) runs its extensions' factories again, and
    /// their new registrations replace the old ones in place, in one swap
    /// (handlers, commands, flags, tools; the flag values the command line
    /// gave are given again). A process that does not reload keeps its
    /// registration. The agent's tools follow in an operation: the old
    /// instances' tools leave, the new ones' join (active unless
    /// `defaultActive: false`), the prompt's sections are rebuilt.
    async fn reload_all(&self) {
        self.absorb_more();
        let old = self.extensions();
        let mut hosts: Vec<Arc<Host>> = Vec::new();
        for e in &old {
            if e.host.reloads()
                && e.host.dead_reason().is_none()
                && !hosts.iter().any(|h| Arc::ptr_eq(h, &e.host))
            {
                hosts.push(Arc::clone(&e.host));
            }
        }
        if hosts.is_empty() {
            return;
        }
        // The host bounds each factory by its load timeout.
        let limit = self.cfg.event_timeout
            + Duration::from_secs(10) * u32::try_from(old.len()).unwrap_or(u32::MAX).max(1);
        let mut fresh: Vec<(Arc<Host>, Vec<ExtInfo>)> = Vec::new();
        for h in hosts {
            let answer = h
                .request(
                    |id| HostRecord::Reload { id },
                    None,
                    Some(limit),
                    &self.cancel,
                )
                .await;
            // Late registrations of the old instances are void.
            h.take_more();
            let reg = match answer {
                Ok(v) => serde_json::from_value::<crate::format::extension::Register>(v)
                    .map_err(|e| format!("bad reload answer: {e}")),
                Err(HostError::Failed(m)) | Err(HostError::Dead(m)) => Err(m),
                Err(HostError::Timeout) => {
                    Err(format!("did not reload within {} s", limit.as_secs_f64()))
                }
                Err(HostError::Aborted) => Err("reload aborted".into()),
            };
            let mut infos = Vec::new();
            match reg {
                Ok(reg) => {
                    for err in &reg.errors {
                        eprintln!(
                            "{}: extension {}: {}; skipped",
                            self.cfg.prog, err.path, err.message
                        );
                    }
                    for r in reg.extensions {
                        let path = old
                            .iter()
                            .find(|o| Arc::ptr_eq(&o.host, &h) && o.ext == r.ext)
                            .map(|o| o.path.clone())
                            .unwrap_or_else(|| r.path.clone());
                        infos.push(ExtInfo::new(Arc::clone(&h), r.ext, path, r));
                    }
                }
                Err(msg) => eprintln!("{}: extension {}: {msg}", self.cfg.prog, h.display),
            }
            fresh.push((h, infos));
        }
        let (gone, added): (Vec<Arc<ExtInfo>>, Vec<Arc<ExtInfo>>) = {
            let mut exts = lock(&self.exts);
            let mut out = Vec::new();
            let mut gone = Vec::new();
            let mut added = Vec::new();
            for e in exts.iter() {
                match fresh.iter_mut().find(|(h, _)| Arc::ptr_eq(h, &e.host)) {
                    None => out.push(Arc::clone(e)),
                    Some((_, infos)) => {
                        gone.push(Arc::clone(e));
                        // The host's new block takes its first old place.
                        for info in std::mem::take(infos) {
                            let info = Arc::new(info);
                            added.push(Arc::clone(&info));
                            out.push(info);
                        }
                    }
                }
            }
            let mut events = lock(&self.events);
            events.clear();
            for e in &out {
                events.extend(lock(&e.events).iter().cloned());
            }
            *exts = out;
            (gone, added)
        };
        let given = lock(&self.given_flags).clone();
        self.configure_exts(&added, &given).await;
        let Some(me) = self.me.upgrade() else {
            return;
        };
        // The old instances' tools, by what they are (another tool of one
        // of their names, e.g. a built-in subagent control tool that
        // displaced a legacy extension's, stays).
        let old_tools: Vec<(String, String, Value)> = gone
            .iter()
            .flat_map(|e| {
                e.tools()
                    .into_iter()
                    .map(|t| (t.name, t.description, t.parameters))
            })
            .collect();
        let is_old = move |t: &Arc<dyn crate::tools::Tool>| {
            let d = t.definition();
            old_tools
                .iter()
                .any(|(n, desc, p)| *n == d.name && *desc == d.description && *p == d.parameters)
        };
        let mut taken: HashSet<String> = self
            .extensions()
            .iter()
            .filter(|e| !added.iter().any(|a| Arc::ptr_eq(a, e)))
            .flat_map(|e| e.tools().into_iter().map(|t| t.name))
            .collect();
        let mut new_tools: Vec<(Arc<dyn crate::tools::Tool>, bool)> = Vec::new();
        for e in &added {
            for spec in e.tools() {
                if !taken.insert(spec.name.clone()) {
                    eprintln!(
                        "{}: extension {}: Tool \"{}\" conflicts with another extension; skipped",
                        self.cfg.prog, e.path, spec.name
                    );
                    continue;
                }
                let active = spec.default_active != Some(false);
                let tool: Arc<dyn crate::tools::Tool> = Arc::new(super::tool::ExtensionTool {
                    host: Arc::clone(&e.host),
                    ext: e.ext,
                    path: e.path.clone(),
                    spec,
                    runner: Arc::clone(&me),
                });
                new_tools.push((tool, active));
            }
        }
        // A new tool whose name another tool holds (not one of the old
        // instances') does not join.
        let join = |list: &mut Vec<Arc<dyn crate::tools::Tool>>,
                    t: &Arc<dyn crate::tools::Tool>| {
            let name = t.definition().name;
            if !list.iter().any(|o| o.definition().name == name) {
                list.push(Arc::clone(t));
            }
        };
        {
            let mut pool = lock(&self.pool);
            pool.retain(|t| !is_old(t));
            for (t, _) in &new_tools {
                join(&mut pool, t);
            }
        }
        let builder = lock(&self.prompt).clone();
        let weak = self.me.clone();
        self.push_op(Box::new(move |agent, _emit| {
            let mut tools = agent.opts.tools.clone();
            tools.retain(|t| !is_old(t));
            for (t, _) in new_tools.iter().filter(|(_, active)| *active) {
                join(&mut tools, t);
            }
            if let Some(me) = weak.upgrade() {
                me.retool(agent, tools, builder);
            }
        }));
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
                .filter(|t| names.contains(&t.definition().name))
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

/// An id for a draft in a boundary preview (8 hex digits, as pi's entry
/// ids; only handlers see it, nothing is recorded under it).
fn draft_id() -> String {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    let mut x = (t ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    format!("{:08x}", x as u32)
}

/// A model as pi's events carry it (its `models.json` / built-in object).
fn model_json(reg: &crate::model::ModelRegistry, m: &crate::format::model::Model) -> Value {
    reg.pi_json(m)
        .map(Value::Object)
        .unwrap_or_else(|| json!({"provider": m.provider, "id": m.id}))
}

/// A patch from `tool_result` applied to `out` (pi's partial patch).
fn apply_result_patch(out: &mut ToolOutput, v: &Value) -> Result<(), String> {
    let Value::Object(p) = v else {
        return Ok(());
    };
    if let Some(c) = p.get("content") {
        out.content = serde_json::from_value::<Vec<ContentBlock>>(c.clone())
            .map_err(|e| format!("invalid content in tool_result patch: {e}"))?;
        if !p.contains_key("structuredContent") {
            out.structured = None;
        }
    }
    if let Some(d) = p.get("details") {
        out.details = Some(d.clone());
    }
    if let Some(s) = p.get("structuredContent") {
        out.structured = Some(s.clone());
    }
    if let Some(e) = p.get("isError").and_then(Value::as_bool) {
        out.is_error = e;
    }
    Ok(())
}

fn result_event(ev: &ToolResultEvent, out: &ToolOutput) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), "tool_result".into());
    m.insert("toolName".into(), ev.tool_name.clone().into());
    m.insert("toolCallId".into(), ev.tool_call_id.clone().into());
    m.insert("input".into(), ev.input.clone());
    m.insert(
        "content".into(),
        serde_json::to_value(&out.content).unwrap_or(Value::Null),
    );
    m.insert("details".into(), out.details.clone().unwrap_or(Value::Null));
    if let Some(s) = &out.structured {
        m.insert("structuredContent".into(), s.clone());
    }
    m.insert("isError".into(), out.is_error.into());
    Delegation::stamp(ev.delegation.as_ref(), Value::Object(m))
}

/// A `{customType, content, display, details?}` from an extension as a
/// custom message.
pub fn custom_message(v: &Value) -> Result<CustomMessage, String> {
    let custom_type = v
        .get("customType")
        .and_then(Value::as_str)
        .ok_or("a message needs a string customType")?
        .to_string();
    let content = match v.get("content") {
        Some(Value::String(s)) => UserContent::Text(s.clone()),
        Some(c @ Value::Array(_)) => serde_json::from_value(c.clone())
            .map_err(|e| format!("invalid message content: {e}"))?,
        _ => UserContent::Text(String::new()),
    };
    Ok(CustomMessage {
        custom_type,
        content,
        display: v.get("display").and_then(Value::as_bool).unwrap_or(false),
        details: v.get("details").cloned(),
        timestamp: Num::signed(crate::timefmt::now_ms()),
        extra: Map::new(),
    })
}

impl Hooks for Runner {
    fn handles(&self, event: &str) -> bool {
        self.absorb_more();
        lock(&self.events).contains(event)
    }

    fn set_state(&self, state: AgentSnapshot) {
        lock(&self.shared).state = state;
    }

    fn drain_events(&self) -> Vec<Value> {
        std::mem::take(&mut lock(&self.errors))
    }

    fn reload(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.reload_all())
    }

    fn take_ops(&self) -> Vec<AgentOp> {
        // Tools registered during the hook that just returned join now.
        self.absorb_more();
        std::mem::take(&mut lock(&self.ops))
    }

    fn ops_ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.ops_ready.notified())
    }

    fn quiesce(&self) -> BoxFuture<'_, ()> {
        let mut rx = self.followups.subscribe();
        Box::pin(async move {
            let _ = rx.wait_for(|n| *n == 0).await;
        })
    }

    fn command(&self, name: &str, args: &str) -> Option<BoxFuture<'_, ()>> {
        let (_, e, spec) = self
            .command_table()
            .into_iter()
            .find(|(invoke, _, _)| invoke == name)?;
        // The extension knows the command by the name it registered.
        let ev = json!({"type": "command", "name": spec.name, "args": args});
        let name = name.to_string();
        Some(Box::pin(async move {
            match self.send(&e, &ev).await.0 {
                Ok(_) | Err(HostError::Aborted) => {}
                Err(HostError::Failed(m)) => self.report(&format!("command:{name}"), "command", &m),
                Err(HostError::Timeout) => self.report(
                    &format!("command:{name}"),
                    "command",
                    "did not answer within the extension timeout",
                ),
                Err(HostError::Dead(m)) => self.report(&format!("command:{name}"), "command", &m),
            }
        }))
    }

    fn input(&self, ev: InputEvent) -> BoxFuture<'_, InputOutcome> {
        Box::pin(async move {
            let (mut text, mut images) = (ev.text.clone(), ev.images.clone());
            let mut changed = false;
            for e in self.handlers("input", false) {
                let mut payload =
                    json!({"type": "input", "text": text, "images": images, "source": ev.source});
                // pi omits it when idle.
                if let Some(b) = &ev.streaming_behavior {
                    payload["streamingBehavior"] = b.clone().into();
                }
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                match v.get("action").and_then(Value::as_str) {
                    Some("handled") => return InputOutcome::Handled,
                    Some("transform") => {
                        if let Some(t) = v.get("text").and_then(Value::as_str) {
                            text = t.to_string();
                        }
                        if let Some(i) = v.get("images").and_then(Value::as_array) {
                            images = i.clone();
                        }
                        changed = true;
                    }
                    _ => {}
                }
            }
            if changed {
                InputOutcome::Transform { text, images }
            } else {
                InputOutcome::Continue
            }
        })
    }

    fn before_agent_start(&self, ev: BeforeAgentStart) -> BoxFuture<'_, BeforeAgentStartOutcome> {
        Box::pin(async move {
            let mut payload = ev.start.clone();
            payload.insert("type".into(), "before_agent_start".into());
            payload.insert("systemPromptOptions".into(), ev.options.clone());
            payload.insert("systemPrompt".into(), ev.system_prompt.clone().into());
            let payload = Value::Object(payload);
            let mut out = BeforeAgentStartOutcome::default();
            for e in self.handlers("before_agent_start", false) {
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                // One handler's `message`, or several handlers' `messages`
                // of one extension (the Node host), in order.
                let one = v.get("message").filter(|m| m.is_object()).into_iter();
                let many = v
                    .get("messages")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                for m in one.chain(many) {
                    match custom_message(m) {
                        Ok(c) => out.messages.push(AgentMessage::Custom(Box::new(c))),
                        Err(err) => self.report(&e.path, "before_agent_start", &err),
                    }
                }
                if let Some(p) = v.get("systemPrompt").and_then(Value::as_str) {
                    out.system_prompt = Some(p.to_string());
                }
            }
            out
        })
    }

    fn context(&self, messages: Vec<AgentMessage>) -> BoxFuture<'_, Option<Vec<AgentMessage>>> {
        Box::pin(async move {
            let mut list = messages;
            let mut changed = false;
            for e in self.handlers("context", false) {
                let payload = json!({"type": "context", "messages": list});
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                if let Some(m) = v.get("messages") {
                    match serde_json::from_value::<Vec<AgentMessage>>(m.clone()) {
                        Ok(new) => {
                            list = new;
                            changed = true;
                        }
                        Err(err) => {
                            self.report(&e.path, "context", &format!("invalid messages: {err}"))
                        }
                    }
                }
            }
            changed.then_some(list)
        })
    }

    fn tool_call(&self, ev: ToolCallEvent) -> BoxFuture<'_, ToolCallOutcome> {
        Box::pin(async move {
            let mut input = ev.input.clone();
            let mut changed = false;
            for e in self.handlers("tool_call", true) {
                let payload = Delegation::stamp(
                    ev.delegation.as_ref(),
                    json!({"type": "tool_call", "toolName": ev.tool_name, "toolCallId": ev.tool_call_id, "input": input}),
                );
                let (answer, errors) = self.send(&e, &payload).await;
                for err in &errors {
                    self.report(&e.path, "tool_call", err);
                }
                match answer {
                    Ok(v) => match tool_call_answer(&v) {
                        Ok(ToolCallAnswer::Block(reason)) => return ToolCallOutcome::Block(reason),
                        Ok(ToolCallAnswer::Input(i)) => {
                            input = i;
                            changed = true;
                        }
                        Ok(ToolCallAnswer::Nothing) => {}
                        Err(why) => {
                            eprintln!(
                                "{}: extension {}: {why}; blocking {}",
                                self.cfg.prog, e.path, ev.tool_name
                            );
                            return ToolCallOutcome::Block(format!(
                                "Extension {} {why}; blocking execution",
                                e.path
                            ));
                        }
                    },
                    // Fail closed, with the thrown text (pi: no
                    // extension_error for these).
                    Err(HostError::Failed(msg)) => return ToolCallOutcome::Block(msg),
                    Err(HostError::Timeout) => {
                        return ToolCallOutcome::Block(format!(
                            "Extension {} did not answer tool_call within {} s; blocking execution",
                            e.path,
                            self.cfg.event_timeout.as_secs_f64()
                        ))
                    }
                    Err(HostError::Dead(_)) => {
                        return ToolCallOutcome::Block(format!(
                            "Extension {} is not running; blocking execution",
                            e.path
                        ))
                    }
                    Err(HostError::Aborted) => {
                        return ToolCallOutcome::Block("Operation aborted".into())
                    }
                }
            }
            ToolCallOutcome::Continue(changed.then_some(input))
        })
    }

    fn tool_result(&self, ev: ToolResultEvent) -> BoxFuture<'_, Option<ToolOutput>> {
        Box::pin(async move {
            let mut out = ev.output.clone();
            let mut changed = false;
            for e in self.handlers("tool_result", false) {
                let payload = result_event(&ev, &out);
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                if v.is_object() {
                    match apply_result_patch(&mut out, &v) {
                        Ok(()) => changed = true,
                        Err(err) => self.report(&e.path, "tool_result", &err),
                    }
                }
            }
            changed.then_some(out)
        })
    }

    fn message_end(&self, message: AgentMessage) -> BoxFuture<'_, Option<AgentMessage>> {
        Box::pin(async move {
            let mut msg = message;
            let mut changed = false;
            for e in self.handlers("message_end", false) {
                let payload = json!({"type": "message_end", "message": msg});
                let Some(v) = self.send_reported(&e, &payload).await else {
                    continue;
                };
                let Some(m) = v.get("message") else { continue };
                match serde_json::from_value::<AgentMessage>(m.clone()) {
                    Ok(new) if new.role() == msg.role() => {
                        msg = new;
                        changed = true;
                    }
                    Ok(_) => self.report(
                        &e.path,
                        "message_end",
                        "message_end handlers must return a message with the same role",
                    ),
                    Err(err) => {
                        self.report(&e.path, "message_end", &format!("invalid message: {err}"))
                    }
                }
            }
            changed.then_some(msg)
        })
    }

    fn notify(&self, event: Value) -> BoxFuture<'_, ()> {
        Box::pin(self.notify_all(event))
    }

    /// The first `{cancel: true}` cancels; later handlers are not asked.
    fn session_before(&self, event: Value) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let v = self.session_before_answer(event).await;
            v.is_some_and(|v| v.get("cancel").and_then(Value::as_bool) == Some(true))
        })
    }

    /// The first handler that throws fails the command (pi: its message is
    /// the RPC error); the first `{result}` answers it.
    fn user_bash(&self, event: Value) -> BoxFuture<'_, Result<Option<Value>, String>> {
        Box::pin(async move {
            for e in self.handlers("user_bash", false) {
                let (answer, errors) = self.send(&e, &event).await;
                for err in &errors {
                    self.report(&e.path, "user_bash", err);
                }
                if let Some(first) = errors.first() {
                    return Err(first.clone());
                }
                match answer {
                    Ok(v) => {
                        if let Some(r) = v.get("result").filter(|r| r.is_object()) {
                            return Ok(Some(r.clone()));
                        }
                    }
                    Err(HostError::Failed(msg)) => {
                        self.report(&e.path, "user_bash", &msg);
                        return Err(msg);
                    }
                    Err(_) => {}
                }
            }
            Ok(None)
        })
    }

    fn session_before_answer(&self, event: Value) -> BoxFuture<'_, Option<Value>> {
        Box::pin(async move {
            let kind = event["type"].as_str().unwrap_or("").to_string();
            let mut last = None;
            for e in self.handlers(&kind, false) {
                let Some(v) = self.send_reported(&e, &event).await else {
                    continue;
                };
                if v.is_null() {
                    continue;
                }
                let cancel = v.get("cancel").and_then(Value::as_bool) == Some(true);
                last = Some(v);
                if cancel {
                    break;
                }
            }
            last
        })
    }

    /// pi's boundary chain: each handler sees the proposal so far; a
    /// returned `entries` or `continue` replaces that field. Drafts that
    /// are not `custom` / `custom_message` objects are reported and the
    /// proposal is dropped (pi: `Invalid boundary entries`).
    fn boundary(&self, payload: Value) -> BoxFuture<'_, crate::agent::hooks::BoundaryOutcome> {
        Box::pin(async move {
            let kind = payload["type"].as_str().unwrap_or("turn_end").to_string();
            let mut ev = payload;
            // The committed context; each handler sees it with the drafts
            // proposed so far (pi rebuilds the preview before each one).
            let base = ev.get("context").cloned();
            let preview = |drafts: &Value| {
                base.as_ref().map(|b| {
                    let drafts = drafts.as_array().map(Vec::as_slice).unwrap_or(&[]);
                    crate::agent::hooks::boundary_preview(
                        b,
                        drafts,
                        crate::timefmt::now_ms(),
                        &crate::timefmt::now_iso(),
                        draft_id,
                    )
                })
            };
            // Who proposed the drafts (an invalid proposal is theirs).
            let mut proposer = String::from("boundary");
            for e in self.handlers(&kind, false) {
                if let Some(p) = preview(&ev["entries"]) {
                    ev["context"] = p;
                }
                let Some(v) = self.send_reported(&e, &ev).await else {
                    continue;
                };
                if let Some(entries) = v.get("entries").filter(|x| x.is_array()) {
                    ev["entries"] = entries.clone();
                    proposer = e.path.clone();
                }
                if let Some(c) = v.get("continue").and_then(Value::as_bool) {
                    ev["continue"] = c.into();
                }
            }
            let entries = ev["entries"].as_array().cloned().unwrap_or_default();
            // A `context_edit` must name an entry of the branch.
            let known: std::collections::HashSet<&str> = base
                .as_ref()
                .and_then(|b| b["contextEntries"].as_array())
                .map(|l| {
                    l.iter()
                        .filter_map(|x| x["sourceEntry"]["id"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            let bad = entries.iter().find_map(|d| {
                let custom = || d.get("customType").and_then(Value::as_str).is_some();
                match d.get("type").and_then(Value::as_str) {
                    Some("custom") | Some("custom_message") if custom() => None,
                    Some("context_edit") => match d.get("targetId").and_then(Value::as_str) {
                        Some(t) if known.contains(t) => {
                            let r = d.get("replacement").unwrap_or(&Value::Null);
                            (!(r.is_null() || r.get("content").is_some()))
                                .then(|| format!("invalid replacement for {t}"))
                        }
                        Some(t) => Some(format!("Entry {t} not found")),
                        None => Some("context_edit needs a targetId".to_string()),
                    },
                    _ => Some(format!("unsupported draft {d}")),
                }
            });
            if let Some(msg) = bad {
                self.report(
                    &proposer,
                    &kind,
                    &format!("Invalid boundary entries: {msg}"),
                );
                return crate::agent::hooks::BoundaryOutcome::default();
            }
            let mut continue_run = ev["continue"].as_bool() == Some(true);
            let runnable =
                preview(&ev["entries"]).is_none_or(|p| p["canContinue"].as_bool() == Some(true));
            if continue_run && !runnable {
                // pi 1.6.0 (observed): this line on stderr in every mode,
                // and the run settles.
                eprintln!(
                    "Extension error (<boundary>): {kind} requested continuation without runnable model context"
                );
                continue_run = false;
            }
            crate::agent::hooks::BoundaryOutcome {
                entries,
                continue_run,
            }
        })
    }
}

impl CallHandler for Runner {
    fn call(
        &self,
        _ext: usize,
        method: String,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let entries = |agent: &crate::agent::Agent, idx: Vec<usize>| {
            Value::Array(
                idx.into_iter()
                    .filter_map(|i| serde_json::to_value(&agent.store.session.entries[i]).ok())
                    .collect(),
            )
        };
        match method.as_str() {
            "session.getEntries" => self.ask(move |a| {
                let n = a.store.session.entries.len();
                Ok(entries(a, (0..n).collect()))
            }),
            "session.getBranch" => {
                let from = params
                    .get("fromId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.ask(move |a| {
                    let idx = match &from {
                        Some(id) if a.store.session.index_of(id).is_none() => {
                            return Err(format!("Entry {id} not found"))
                        }
                        Some(id) => a.store.session.path_to(id),
                        None => a.store.session.branch(),
                    };
                    Ok(entries(a, idx))
                })
            }
            // pi's estimate: the last answer's total tokens against the
            // model's window (`undefined` before any answer).
            "getContextUsage" => self.ask(|a| {
                let session = &a.store.session;
                let tokens = session.branch().into_iter().rev().find_map(|i| {
                    match session.entries[i].message() {
                        Some(m @ AgentMessage::Assistant(_)) => serde_json::to_value(m)
                            .ok()
                            .map(|v| v["usage"]["totalTokens"].clone())
                            .filter(Value::is_number),
                        _ => None,
                    }
                });
                let window = a.opts.model.context_window;
                Ok(match tokens {
                    Some(t) if window > 0 => json!({
                        "percent": t.as_f64().unwrap_or(0.0) / window as f64 * 100.0,
                        "tokens": t,
                        "contextWindow": window,
                    }),
                    _ => Value::Null,
                })
            }),
            "session.getHeader" => self
                .ask(|a| serde_json::to_value(&a.store.session.header).map_err(|e| e.to_string())),
            "session.getLeafId" => self.ask(|a| {
                Ok(a.store
                    .session
                    .leaf_id()
                    .map(|s| Value::String(s.to_string()))
                    .unwrap_or(Value::Null))
            }),
            "setActiveTools" => {
                let names = crate::format::string_list(params.get("names"));
                let pool = lock(&self.pool).clone();
                // Unknown names are ignored, as pi does.
                let chosen: Vec<Arc<dyn crate::tools::Tool>> = names
                    .iter()
                    .filter_map(|n| pool.iter().find(|t| t.definition().name == *n).cloned())
                    .collect();
                {
                    let mut s = lock(&self.shared);
                    s.active_tools = chosen.iter().map(|t| t.definition().name).collect();
                }
                if !self.attached() {
                    // Before the agent exists (session_start): the names
                    // decide the tool set the run starts with, resolved
                    // once tools registered meanwhile have joined.
                    lock(&self.shared).pending_active = Some(names);
                    return ready(Ok(Value::Null));
                }
                let builder = lock(&self.prompt).clone();
                let me = self.me.clone();
                self.ask(move |a| {
                    if let Some(me) = me.upgrade() {
                        me.retool(a, chosen, builder);
                    }
                    Ok(Value::Null)
                })
            }
            // A client that answers (RPC mode): dialogs go to it and
            // wait for its answer; notices are sent on.
            m if m.starts_with("ui.") && lock(&self.ui).is_some() => {
                let ui = lock(&self.ui).clone();
                match ui {
                    Some(ui)
                        if matches!(m, "ui.confirm" | "ui.select" | "ui.input" | "ui.editor") =>
                    {
                        ui.dialog(m, params)
                    }
                    Some(ui) => {
                        ui.notify(m, params);
                        ready(Ok(Value::Null))
                    }
                    None => ready(self.answer(&method, &params)),
                }
            }
            "setModel" | "setThinkingLevel" => {
                let Some(me) = self.me.upgrade() else {
                    return ready(Err("pi-toolkit host: the run is over".into()));
                };
                let p = |k: &str| {
                    params
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                if method == "setModel" {
                    me.set_model(p("provider"), p("id"))
                } else {
                    me.set_thinking(p("level"))
                }
            }
            _ => ready(self.answer(&method, &params)),
        }
    }

    fn extension_error(&self, host: &str, ext: usize, event: &str, error: &str) {
        let path = self
            .extensions()
            .into_iter()
            .find(|e| e.ext == ext && e.host.display == host)
            .map(|e| e.path.clone())
            .unwrap_or_else(|| host.to_string());
        self.report(&path, event, error);
    }
}

impl Runner {
    /// Answers one call from an extension. Changes to the agent are queued
    /// as operations the loop applies when the current hook returns.
    fn answer(&self, method: &str, p: &Value) -> Result<Value, String> {
        let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
        match method {
            "appendEntry" => {
                let ty = s("customType").ok_or("appendEntry needs a customType")?;
                let data = p.get("data").cloned().unwrap_or(Value::Null);
                self.push_op(Box::new(move |agent, emit| {
                    let leaf = agent.store.session.leaf_id().map(str::to_string);
                    let e = agent.store.session.new_custom(leaf.as_deref(), &ty, data);
                    if let Err(err) = agent.append_entry(e, emit) {
                        eprintln!("pi-run: appendEntry: {err}");
                    }
                }));
                Ok(Value::Null)
            }
            "setSessionName" => {
                let name = s("name").ok_or("setSessionName needs a name")?;
                lock(&self.shared).session_name = Some(name.trim().to_string());
                self.push_op(Box::new(move |agent, emit| {
                    let e = agent.store.session.new_session_info(&name);
                    if let Err(err) = agent.append_entry(e, emit) {
                        eprintln!("pi-run: setSessionName: {err}");
                    }
                }));
                Ok(Value::Null)
            }
            "setLabel" => {
                let target = s("entryId").ok_or("setLabel needs an entryId")?;
                let label = s("label")
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty());
                self.push_op(Box::new(move |agent, emit| {
                    if agent.store.session.index_of(&target).is_none() {
                        eprintln!("pi-run: setLabel: Entry {target} not found");
                        return;
                    }
                    let e = agent.store.session.new_label(&target, label);
                    if let Err(err) = agent.append_entry(e, emit) {
                        eprintln!("pi-run: setLabel: {err}");
                    }
                }));
                Ok(Value::Null)
            }
            // Commands run while the agent is idle (pi-run's preflight).
            "waitForIdle" => Ok(Value::Null),
            "getSessionName" => Ok(lock(&self.shared)
                .session_name
                .clone()
                .map(Value::String)
                .unwrap_or(Value::Null)),
            "sendMessage" => {
                use crate::agent::queue::DeliverAs;
                let msg = custom_message(p.get("message").unwrap_or(&Value::Null))?;
                let opts = p.get("options");
                let trigger = opts
                    .and_then(|o| o.get("triggerTurn"))
                    .and_then(Value::as_bool);
                let deliver = DeliverAs::parse(
                    opts.and_then(|o| o.get("deliverAs"))
                        .and_then(Value::as_str),
                )?;
                let queue = lock(&self.queue).clone();
                match queue {
                    // Idle without a trigger: appended at once.
                    Some(q)
                        if q.is_streaming()
                            || trigger == Some(true)
                            || deliver == Some(DeliverAs::NextTurn) =>
                    {
                        q.send_custom(msg, trigger, deliver)
                    }
                    _ => self.push_op(Box::new(move |agent, emit| {
                        if let Err(err) =
                            agent.append_message_now(AgentMessage::Custom(Box::new(msg)), emit)
                        {
                            eprintln!("pi-run: sendMessage: {err}");
                        }
                    })),
                }
                Ok(Value::Null)
            }
            "sendUserMessage" => {
                use crate::agent::queue::DeliverAs;
                let text = match p.get("content") {
                    Some(Value::String(t)) => t.clone(),
                    Some(c @ Value::Array(_)) => serde_json::from_value::<UserContent>(c.clone())
                        .map(|u| u.joined_text("\n"))
                        .map_err(|e| format!("invalid content: {e}"))?,
                    _ => return Err("sendUserMessage needs content".into()),
                };
                let deliver = DeliverAs::parse(
                    p.get("options")
                        .and_then(|o| o.get("deliverAs"))
                        .and_then(Value::as_str),
                )?;
                let Some(q) = lock(&self.queue).clone() else {
                    return Err("pi-toolkit host: sendUserMessage is not available".into());
                };
                let message = AgentMessage::User(crate::format::message::UserMessage {
                    content: UserContent::Blocks(vec![ContentBlock::text(text.clone())]),
                    timestamp: Num::signed(crate::timefmt::now_ms()),
                    extra: Map::new(),
                });
                q.send_user(message, text, deliver)?;
                Ok(Value::Null)
            }
            "getActiveTools" => Ok(json!(lock(&self.shared).active_tools)),
            "getAllTools" => Ok(Value::Array(lock(&self.shared).all_tools.clone())),
            // `ctx.modelRegistry` of the Node host: every model, as pi's
            // objects (none without a registry: the faux provider).
            "modelRegistry.getAll" => Ok(match self.registry() {
                Ok(reg) => Value::Array(reg.all().iter().map(|m| model_json(&reg, m)).collect()),
                Err(_) => Value::Array(Vec::new()),
            }),
            "getCommands" => {
                let mut out = Vec::new();
                for (name, e, c) in self.command_table() {
                    {
                        let mut m = Map::new();
                        m.insert("name".into(), name.into());
                        if let Some(d) = &c.description {
                            m.insert("description".into(), d.clone().into());
                        }
                        m.insert("source".into(), "extension".into());
                        m.insert("sourceInfo".into(), json!({"path": e.path}));
                        out.push(Value::Object(m));
                    }
                }
                Ok(Value::Array(out))
            }
            "getThinkingLevel" => Ok(lock(&self.shared).state.thinking_level.clone().into()),
            "getSettings" => Ok(self.cfg.settings.clone()),
            "getSystemPrompt" => Ok(lock(&self.shared).system_prompt.clone().into()),
            "hasPendingMessages" => Ok(lock(&self.queue)
                .as_ref()
                .is_some_and(|q| q.has_pending())
                .into()),
            "shutdown" => {
                self.shutdown_requested.store(true, Ordering::Relaxed);
                Ok(Value::Null)
            }
            "abort" => {
                self.cancel.cancel();
                Ok(Value::Null)
            }
            // No person to ask (pi-run is non-interactive): pi's defaults.
            "ui.confirm" => Ok(false.into()),
            "ui.select" | "ui.input" | "ui.editor" => Ok(Value::Null),
            m if m.starts_with("ui.") => Ok(Value::Null),
            other => Err(format!("Unknown method: {other}")),
        }
    }
}

/// Counts one model/level change until its `*_select` events went out
/// (`Hooks::quiesce` waits for none to be left).
struct Followup(tokio::sync::watch::Sender<usize>);

impl Followup {
    fn new(tx: &tokio::sync::watch::Sender<usize>) -> Followup {
        tx.send_modify(|n| *n += 1);
        Followup(tx.clone())
    }
}

impl Drop for Followup {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}
