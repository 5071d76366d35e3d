//! The child runtime of the built-in subagents: the three control tools as
//! agent [`Tool`]s over one [`Controller`] per parent session. Each `Agent`
//! call creates a real pi session (header `parentSession`, the
//! `pi-web:subagent` metadata, `pi-web:subagent-status` and
//! `pi-web:subagent-result` entries) and runs it in-process with the
//! parent's model, on its own thread, at most `maxConcurrent` at a time
//! (FIFO). Foreground calls wait for the child; background calls return at
//! once and the parent receives the completion as a follow-up custom message.
//! A child that fails or panics becomes a `failed` run, never a parent crash.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::profiles::{self, Profile};
use super::settings;
use super::tools::{self as st, RunInfo, RunStatus};
use crate::agent::queue::{DeliverAs, MessageQueue};
use crate::agent::{Agent, AgentOptions, RetrySettings};
use crate::format::message::{CustomMessage, UserMessage};
use crate::format::model::{Model, ThinkingLevel};
use crate::format::tool::ToolDefinition;
use crate::format::{AgentMessage, ContentBlock, Num, UserContent};
use crate::session::store::SessionStore;
use crate::tools::{Tool, ToolContext, ToolFuture, ToolOutput, UpdateSink};

/// What a child inherits from its parent run.
#[derive(Clone)]
pub struct ParentContext {
    pub agent_dir: PathBuf,
    pub cwd: PathBuf,
    /// Where child session files go (the parent's session folder); `None`
    /// keeps children in memory (`--no-session`).
    pub session_dir: Option<PathBuf>,
    pub parent_session_id: String,
    pub parent_session_path: Option<PathBuf>,
    pub model: Model,
    pub api_key: Option<String>,
    pub thinking: ThinkingLevel,
    pub idle_timeout: Duration,
    pub retry: RetrySettings,
    pub auto_resize_images: bool,
    /// Whether the project is trusted (project profiles load only then).
    pub trusted: bool,
}

struct RunState {
    info: Mutex<RunInfo>,
    done: tokio::sync::watch::Sender<bool>,
    queue: Arc<MessageQueue>,
    cancel: CancellationToken,
}

/// The runs of one parent session.
pub struct Controller {
    ctx: ParentContext,
    profiles: Vec<Profile>,
    slots: Arc<tokio::sync::Semaphore>,
    runs: Mutex<HashMap<String, Arc<RunState>>>,
    consumed: Mutex<Vec<String>>,
    parent_queue: Mutex<Option<Arc<MessageQueue>>>,
    background: Mutex<Vec<tokio::sync::watch::Receiver<bool>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn text_output(text: String, details: Option<Value>, is_error: bool) -> ToolOutput {
    ToolOutput {
        content: vec![ContentBlock::text(text)],
        details,
        is_error,
        ..Default::default()
    }
}

fn settings_path(ctx: &ParentContext) -> PathBuf {
    settings::settings_path(&ctx.agent_dir)
}

impl Controller {
    /// A controller for one parent run; the effective profiles and the
    /// concurrency limit are read now.
    pub fn new(ctx: ParentContext) -> Arc<Controller> {
        let limit = settings::read(&settings_path(&ctx))
            .map(|s| s.max_concurrent)
            .unwrap_or(settings::DEFAULT_MAX_CONCURRENT);
        let profiles = profiles::list_sources(&ctx.agent_dir, &ctx.cwd, ctx.trusted).effective();
        Arc::new(Controller {
            ctx,
            profiles,
            slots: Arc::new(tokio::sync::Semaphore::new(limit as usize)),
            runs: Mutex::default(),
            consumed: Mutex::default(),
            parent_queue: Mutex::default(),
            background: Mutex::default(),
        })
    }

    /// The parent's message queue (background completions go there).
    pub fn set_parent_queue(&self, q: Arc<MessageQueue>) {
        *lock(&self.parent_queue) = Some(q);
    }

    /// The three tools when the switch is on (read now: fail closed), else
    /// none.
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        if !settings::is_enabled(&settings_path(&self.ctx)) {
            return Vec::new();
        }
        st::control_tools(&self.profiles)
            .into_iter()
            .map(|spec| {
                Arc::new(ControlTool {
                    spec,
                    c: Arc::clone(self),
                }) as Arc<dyn Tool>
            })
            .collect()
    }

    /// Whether a background child is still running.
    pub fn has_running_background(&self) -> bool {
        lock(&self.background).iter().any(|r| !*r.borrow())
    }

    /// Waits until every background child has finished (a one-shot run
    /// does not settle before its children).
    pub async fn wait_background(&self) {
        loop {
            let pending: Vec<_> = lock(&self.background)
                .iter()
                .filter(|r| !*r.borrow())
                .cloned()
                .collect();
            if pending.is_empty() {
                return;
            }
            for mut r in pending {
                let _ = r.wait_for(|d| *d).await;
            }
        }
    }

    fn run(&self, id: &str) -> Option<Arc<RunState>> {
        lock(&self.runs).get(id).cloned()
    }

    async fn agent(
        self: &Arc<Self>,
        args: Value,
        tc: ToolContext,
        mut up: UpdateSink,
    ) -> ToolOutput {
        if let Err(e) = st::guard(settings::is_enabled(&settings_path(&self.ctx))) {
            return text_output(e, None, true);
        }
        let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        if let Some(id) = s("resume").filter(|r| !r.trim().is_empty()) {
            let id = id.trim().to_string();
            return match self.run(&id) {
                None => text_output(format!("Subagent not found: {id}"), None, true),
                Some(_) => text_output("Subagent resume is not supported yet".into(), None, true),
            };
        }
        match self.start(&args, &tc).await {
            Err(e) => text_output(e, None, true),
            Ok((id, state, background)) => {
                if background {
                    let info = lock(&state.info).clone();
                    return text_output(st::background_started(&id), Some(info.details()), false);
                }
                {
                    let info = lock(&state.info).clone();
                    up(text_output(
                        format!(
                            "{}: {} ({})",
                            info.profile,
                            info.description,
                            info.status.as_str()
                        ),
                        Some(info.details()),
                        false,
                    ));
                }
                let mut rx = state.done.subscribe();
                let finished = tokio::select! {
                    _ = rx.wait_for(|d| *d) => true,
                    _ = tc.cancel.cancelled() => false,
                };
                if !finished {
                    // Aborting the parent's call aborts its foreground child.
                    state.cancel.cancel();
                    let _ = rx.wait_for(|d| *d).await;
                }
                let info = lock(&state.info).clone();
                text_output(info.final_text(), Some(info.details()), info.is_error())
            }
        }
    }

    /// Validates a start, writes the child's first entries and queues it.
    async fn start(
        self: &Arc<Self>,
        args: &Value,
        tc: &ToolContext,
    ) -> Result<(String, Arc<RunState>, bool), String> {
        let ctx = &self.ctx;
        let parent_path = ctx
            .parent_session_path
            .clone()
            .ok_or("Parent session must be persisted before starting a subagent")?;
        let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        let requested = s("subagent_type").unwrap_or_else(|| profiles::DEFAULT_PROFILE.into());
        let profile = profiles::resolve(&self.profiles, &requested)
            .cloned()
            .ok_or_else(|| format!("Unknown or disabled subagent profile: {requested}"))?;
        let background = args
            .get("run_in_background")
            .and_then(Value::as_bool)
            .unwrap_or(profile.run_in_background);
        let thinking = match s("thinking")
            .filter(|t| !t.is_empty())
            .or(profile.thinking.clone())
        {
            Some(t) => ThinkingLevel::parse(&t)
                .ok_or_else(|| format!("Invalid subagent thinking level: {t}"))?,
            None => ctx.thinking,
        };
        let max_turns = match args.get("max_turns").and_then(Value::as_f64) {
            Some(n) if !n.is_finite() || n < 0.0 => {
                return Err("max_turns must be a non-negative number".into())
            }
            Some(n) if n >= 1.0 => Some(n.floor() as u64),
            _ => profile.max_turns,
        };
        if let Some(m) = s("model").filter(|m| !m.trim().is_empty()) {
            let m = m.trim();
            let same = m == ctx.model.id || m == format!("{}/{}", ctx.model.provider, ctx.model.id);
            if !same {
                return Err(format!("Subagent model not found: {m}"));
            }
        }
        let task = s("prompt").unwrap_or_default();
        let files: Vec<String> = args
            .get("input_files")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let docs = super::input::load(&ctx.cwd, &files)?;
        let delegated = super::input::append_documents(&task, &docs);
        let description = s("description")
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| profile.display_name.clone());

        // The child's tools: its profile's built-ins (never a control tool).
        let tools = crate::tools::select::builtin_tools(&profile.tools);
        let exact = profile.is_chat_only() || profile.prompt_mode == profiles::PromptMode::Replace;
        let sections = if exact {
            if profile.prompt.is_empty() {
                Vec::new()
            } else {
                vec![("preamble".to_string(), profile.prompt.clone())]
            }
        } else {
            let plan = crate::prompt::plan::PlanOptions {
                cwd: ctx.cwd.display().to_string(),
                tools: crate::agent::prompt_tools(&tools),
                system_prompt: None,
                append: vec![profile.prompt.clone()]
                    .into_iter()
                    .filter(|p| !p.is_empty())
                    .collect(),
                docs: None,
                chat_only: false,
            };
            crate::prompt::plan::plan_sections(&plan, &crate::resources::Resources::default())?
        };
        let tool_names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
        let mut snapshot = serde_json::Map::new();
        snapshot.insert("version".into(), json!(1));
        snapshot.insert("appendSystemPrompt".into(), json!([profile.prompt]));
        snapshot.insert("tools".into(), json!(tool_names));
        snapshot.insert("loadSkills".into(), json!(false));
        snapshot.insert("loadExtensions".into(), json!(false));
        if exact {
            snapshot.insert("exactSystemPrompt".into(), json!(profile.prompt));
        }
        let created_at = crate::timefmt::now_iso();
        let mut store = SessionStore::create(
            &ctx.cwd.display().to_string(),
            ctx.session_dir.as_deref(),
            Some(parent_path.display().to_string()),
        );
        let id = store.session.header.id.clone();
        let meta = json!({
            "version": 1,
            "parentSessionId": ctx.parent_session_id,
            "parentSessionPath": parent_path,
            "parentToolCallId": tc.tool_call_id,
            "profile": profile.name,
            "description": description,
            "task": task,
            "runInBackground": background,
            "createdAt": created_at,
            "resourceSnapshot": snapshot,
        });
        let append = |store: &mut SessionStore, e| {
            store
                .append(e)
                .map(|_| ())
                .map_err(|e| format!("cannot write the subagent session: {e}"))
        };
        let e = store
            .session
            .new_custom(store.session.leaf_id(), "pi-web:subagent", meta);
        append(&mut store, e)?;
        let e = store.session.new_session_info(&description);
        append(&mut store, e)?;
        let e = store.session.new_custom(
            store.session.leaf_id(),
            "pi-web:subagent-status",
            json!({"version": 1, "status": "queued"}),
        );
        append(&mut store, e)?;

        let (done, rx) = tokio::sync::watch::channel(false);
        let state = Arc::new(RunState {
            info: Mutex::new(RunInfo {
                session_id: id.clone(),
                profile: profile.name.clone(),
                description,
                status: RunStatus::Queued,
                run_in_background: background,
                created_at,
                completed_at: None,
                result: None,
                error: None,
                worktree_path: None,
                worktree_branch: None,
                worktree_cleanup_error: None,
            }),
            done,
            queue: Arc::new(MessageQueue::default()),
            cancel: CancellationToken::new(),
        });
        lock(&self.runs).insert(id.clone(), Arc::clone(&state));
        if background {
            lock(&self.background).push(rx);
        }
        let opts = AgentOptions {
            model: ctx.model.clone(),
            api_key: ctx.api_key.clone(),
            thinking,
            tools,
            cwd: ctx.cwd.clone(),
            sections,
            forced_prompt: None,
            max_turns: max_turns.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            idle_timeout: ctx.idle_timeout,
            auto_resize_images: ctx.auto_resize_images,
            retry: ctx.retry,
        };
        let me = Arc::clone(self);
        let st2 = Arc::clone(&state);
        let slots = Arc::clone(&self.slots);
        tokio::spawn(async move {
            // FIFO: tokio's semaphore serves waiters in order.
            let permit = tokio::select! {
                p = slots.acquire_owned() => p.ok(),
                _ = st2.cancel.cancelled() => None,
            };
            let (status, result, error) = if permit.is_none() {
                (RunStatus::Aborted, None, None)
            } else {
                let e = store.session.new_custom(
                    store.session.leaf_id(),
                    "pi-web:subagent-status",
                    json!({"version": 1, "status": "running"}),
                );
                let _ = store.append(e);
                lock(&st2.info).status = RunStatus::Running;
                let (tx, rx) = tokio::sync::oneshot::channel();
                let q = Arc::clone(&st2.queue);
                let cancel = st2.cancel.clone();
                std::thread::spawn(move || {
                    let out = run_child(opts, store, q, cancel, delegated);
                    let _ = tx.send(out);
                });
                match rx.await {
                    Ok(r) => r,
                    Err(_) => (
                        RunStatus::Failed,
                        None,
                        Some("the subagent crashed".to_string()),
                    ),
                }
            };
            drop(permit);
            {
                let mut info = lock(&st2.info);
                info.status = status;
                info.result = result;
                info.error = error;
                info.completed_at = Some(crate::timefmt::now_iso());
            }
            let _ = st2.done.send(true);
            if background {
                me.notify_parent(&st2);
            }
        });
        Ok((id, state, background))
    }

    fn notify_parent(&self, state: &RunState) {
        let info = lock(&state.info).clone();
        {
            let mut consumed = lock(&self.consumed);
            if let Some(i) = consumed.iter().position(|c| *c == info.session_id) {
                consumed.remove(i);
                return;
            }
        }
        let Some(q) = lock(&self.parent_queue).clone() else {
            return;
        };
        let msg = CustomMessage {
            custom_type: st::NOTIFICATION_TYPE.into(),
            content: UserContent::Text(st::notification_text(&info)),
            display: true,
            details: Some(info.details()),
            timestamp: Num::signed(crate::timefmt::now_ms()),
            extra: serde_json::Map::new(),
        };
        q.send_custom(msg, Some(true), Some(DeliverAs::FollowUp));
    }

    async fn get_result(&self, args: Value, tc: ToolContext) -> ToolOutput {
        let id = args
            .get("agent_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(state) = self.run(&id) else {
            return text_output(format!("Subagent not found: {id}"), None, true);
        };
        if args.get("wait").and_then(Value::as_bool) == Some(true) {
            let mut rx = state.done.subscribe();
            tokio::select! {
                _ = rx.wait_for(|d| *d) => {}
                _ = tc.cancel.cancelled() => return ToolOutput::error("Result wait aborted"),
            }
        }
        let info = lock(&state.info).clone();
        if info.run_in_background && info.status.is_terminal() {
            lock(&self.consumed).push(info.session_id.clone());
        }
        text_output(info.final_text(), Some(info.details()), info.is_error())
    }

    fn steer(&self, args: Value) -> ToolOutput {
        let id = args.get("agent_id").and_then(Value::as_str).unwrap_or("");
        let running = self
            .run(id)
            .filter(|s| lock(&s.info).status == RunStatus::Running);
        let Some(state) = running else {
            return text_output("Subagent is not running".into(), None, true);
        };
        let message = args
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        if message.is_empty() {
            return text_output("Steering message is required".into(), None, true);
        }
        state.queue.steer(user_message(message));
        text_output(st::steered(id), None, false)
    }
}

fn user_message(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![ContentBlock::text(text)]),
        timestamp: Num::signed(crate::timefmt::now_ms()),
        extra: serde_json::Map::new(),
    })
}

/// Runs one child to its end on the current thread; writes its result
/// entry. A panic inside is caught and reported as `failed`.
fn run_child(
    opts: AgentOptions,
    store: SessionStore,
    queue: Arc<MessageQueue>,
    cancel: CancellationToken,
    task: String,
) -> (RunStatus, Option<String>, Option<String>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return (
                RunStatus::Failed,
                None,
                Some(format!("cannot start the subagent: {e}")),
            )
        }
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            let mut agent = Agent::new(opts, store, cancel.clone());
            agent.queue = queue;
            let mut emit = |_: &Value| {};
            if let Err(e) = agent.prepare_session() {
                return (agent, None, Some(e), false);
            }
            let out = agent.run(user_message(&task), &mut emit).await;
            let text = out.last.as_ref().map(|m| {
                AgentMessage::Assistant(Box::new(m.clone()))
                    .text()
                    .trim()
                    .to_string()
            });
            let provider_error = out
                .last
                .as_ref()
                .filter(|m| m.stop_reason == "error")
                .map(|m| {
                    m.error_message
                        .clone()
                        .filter(|e| !e.is_empty())
                        .unwrap_or_else(|| "Provider returned an error".into())
                });
            let aborted = out.aborted || cancel.is_cancelled();
            (agent, text, out.error.or(provider_error), aborted)
        })
    }));
    let Ok((mut agent, text, error, aborted)) = outcome else {
        return (RunStatus::Failed, None, Some("the subagent crashed".into()));
    };
    let status = if aborted {
        RunStatus::Aborted
    } else if error.is_some() {
        RunStatus::Failed
    } else {
        RunStatus::Completed
    };
    let mut data = serde_json::Map::new();
    data.insert("version".into(), json!(1));
    data.insert("status".into(), json!(status.as_str()));
    data.insert("completedAt".into(), json!(crate::timefmt::now_iso()));
    if let Some(t) = text.as_ref().filter(|t| !t.is_empty()) {
        data.insert("result".into(), json!(t));
    }
    if let Some(e) = error.as_ref().filter(|_| status == RunStatus::Failed) {
        data.insert("error".into(), json!(e));
    }
    let e = agent.store.session.new_custom(
        agent.store.session.leaf_id(),
        "pi-web:subagent-result",
        Value::Object(data),
    );
    let _ = agent.store.append(e);
    let error = if status == RunStatus::Failed {
        error
    } else {
        None
    };
    (status, text, error)
}

/// One of the three control tools.
struct ControlTool {
    spec: crate::format::extension::ToolSpec,
    c: Arc<Controller>,
}

impl Tool for ControlTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.spec.name.clone(),
            description: self.spec.description.clone(),
            parameters: self.spec.parameters.clone(),
            extra: serde_json::Map::new(),
        }
    }
    fn prompt_snippet(&self) -> Option<String> {
        self.spec.prompt_snippet.clone()
    }
    fn prompt_guidelines(&self) -> Vec<String> {
        self.spec.prompt_guidelines.clone()
    }
    fn execute<'a>(&'a self, args: Value, ctx: ToolContext, up: UpdateSink) -> ToolFuture<'a> {
        Box::pin(async move {
            match self.spec.name.as_str() {
                "Agent" => self.c.agent(args, ctx, up).await,
                "get_subagent_result" => self.c.get_result(args, ctx).await,
                _ => self.c.steer(args),
            }
        })
    }
}

/// Joins the built-in's control tools to a run's tool set: a legacy
/// `pi-subagents` extension's tools leave it (seed 001 §4); an unrelated
/// extension that registered a control-tool name keeps it, the built-in's
/// tool of that name is left out, and the collision is returned as a
/// warning (`Tool "<name>" conflicts with <path>`, as pi reports it).
pub fn join_control_tools(
    tools: &mut Vec<Arc<dyn Tool>>,
    control: Vec<Arc<dyn Tool>>,
    runner: &crate::extensions::runner::Runner,
) -> Vec<String> {
    use super::legacy::{legacy_paths, LoadedExtension};
    if control.is_empty() {
        return Vec::new();
    }
    let mut view: Vec<LoadedExtension> = runner
        .extensions()
        .iter()
        .map(|e| LoadedExtension {
            path: e.path.clone(),
            source: String::new(),
            tools: e.tools().into_iter().map(|t| t.name).collect(),
        })
        .collect();
    view.push(LoadedExtension {
        path: st::EXTENSION_PATH.into(),
        source: String::new(),
        tools: super::CONTROL_TOOL_NAMES
            .iter()
            .map(|s| s.to_string())
            .collect(),
    });
    let legacy = legacy_paths(&view);
    let mut warnings = Vec::new();
    let mut taken: Vec<String> = Vec::new();
    for e in view.iter().filter(|e| e.path != st::EXTENSION_PATH) {
        if legacy.contains(&e.path) {
            let gone: Vec<&String> = e
                .tools
                .iter()
                .filter(|t| !crate::tools::BUILTIN_TOOLS.contains(&t.as_str()))
                .collect();
            tools.retain(|t| !gone.contains(&&t.definition().name));
            continue;
        }
        for name in e.tools.iter().filter(|t| super::is_control_tool(t)) {
            if !taken.contains(name) {
                warnings.push(format!("Tool \"{name}\" conflicts with {}", e.path));
                taken.push(name.clone());
            }
        }
    }
    let existing: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    for t in control {
        let name = t.definition().name;
        if !taken.contains(&name) && !existing.contains(&name) {
            tools.push(t);
        }
    }
    warnings
}
