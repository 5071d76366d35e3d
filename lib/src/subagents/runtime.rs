//! The child runtime of the built-in subagents: the three control tools as
//! agent [`Tool`]s over one [`Controller`] per parent session. Each `Agent`
//! call creates a real pi session (header `parentSession`, the
//! `pi-web:subagent` metadata, `pi-web:subagent-status` and
//! `pi-web:subagent-result` entries) and runs it in-process with the
//! parent's model, on its own thread, at most `maxConcurrent` at a time
//! (FIFO). Foreground calls wait for the child; background calls return at
//! once and the parent receives the completion as a follow-up custom message.
//! A child that fails or panics becomes a `failed` run, never a parent crash.
//! `resume` reopens a finished (or dead) child's file and continues it with
//! the tools and prompt its `resourceSnapshot` recorded; a `queued` or
//! `running` record no live run owns reads as `interrupted`. `max_turns` is
//! pi-web's two-phase limit (a wrap-up steer at N turns, an abort at N+1,
//! recorded as completed), `isolation: "worktree"` runs the child in a
//! fresh git worktree ([`super::worktree`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::profiles::{self, Profile};
use super::runs::{self, Snapshot};
use super::settings;
use super::tools::{self as st, RunInfo, RunStatus};
use crate::agent::hooks::{AgentExt, Delegation};
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
    /// The built-in tools the parent's tool flags allow a child at all: a
    /// profile's tools outside it are left out.
    pub tool_ceiling: crate::tools::select::ToolCeiling,
    /// The parent's own turn limit (`--max-turns`): no child runs longer.
    pub max_turns: Option<u32>,
}

struct RunState {
    info: Mutex<RunInfo>,
    /// The child's session file.
    session_path: Option<PathBuf>,
    done: tokio::sync::watch::Sender<bool>,
    /// Sent after `done` once a background run's report is queued for the
    /// parent (a one-shot run waits for this, not for `done`).
    settled: tokio::sync::watch::Sender<bool>,
    queue: Arc<MessageQueue>,
    cancel: CancellationToken,
}

/// The runs of one parent session.
pub struct Controller {
    ctx: ParentContext,
    profiles: Vec<Profile>,
    slots: Arc<tokio::sync::Semaphore>,
    runs: Mutex<HashMap<String, Arc<RunState>>>,
    /// Background results read through `get_subagent_result`: `(session
    /// id, completedAt)`, so a resumed run's report is not dropped.
    consumed: Mutex<Vec<(String, String)>>,
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

/// A child's agent options: its own model, tools, cwd and prompt sections;
/// from the parent its idle timeout, image and retry settings and its turn
/// limit (the tool's own two-phase limit steers within it); no forced
/// prompt.
fn child_options(
    ctx: &ParentContext,
    model: Model,
    api_key: Option<String>,
    thinking: ThinkingLevel,
    tools: Vec<Arc<dyn Tool>>,
    cwd: PathBuf,
    sections: Vec<(String, String)>,
) -> AgentOptions {
    AgentOptions {
        model,
        api_key,
        thinking,
        tools,
        cwd,
        sections,
        forced_prompt: None,
        max_turns: ctx.max_turns,
        idle_timeout: ctx.idle_timeout,
        auto_resize_images: ctx.auto_resize_images,
        retry: ctx.retry,
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
                    c: Some(Arc::clone(self)),
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
        // The child obeys whatever limits the calling agent obeys; with
        // none handed over there is no child (fail closed).
        let Some(parent) = AgentExt::of_caller(&tc) else {
            return text_output(NO_CALLER.into(), None, true);
        };
        let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        let started = match s("resume").filter(|r| !r.trim().is_empty()) {
            Some(id) => self.resume(id.trim(), &args, &tc, &parent),
            None => self.start(&args, &tc, &parent),
        };
        match started {
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

    /// Validates a start, creates the child's session (and worktree) and
    /// queues it.
    fn start(
        self: &Arc<Self>,
        args: &Value,
        tc: &ToolContext,
        parent: &AgentExt,
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
        // Isolation: the profile's `off` wins, else the request's exact
        // `worktree`, else the profile's.
        let isolated = profile.isolation.as_deref() != Some("off")
            && (s("isolation").as_deref() == Some("worktree")
                || profile.isolation.as_deref() == Some("worktree"));
        let inherit = args
            .get("inherit_context")
            .and_then(Value::as_bool)
            .unwrap_or(profile.inherit_context);
        let max_turns = turn_limit(args.get("max_turns"), profile.max_turns)?;
        let thinking = match s("thinking")
            .filter(|t| !t.is_empty())
            .or(profile.thinking.clone())
        {
            Some(t) => ThinkingLevel::parse(&t)
                .ok_or_else(|| format!("Invalid subagent thinking level: {t}"))?,
            None => ctx.thinking,
        };
        let (model, api_key) = match s("model")
            .filter(|m| !m.trim().is_empty())
            .or(profile.model.clone())
        {
            Some(m) => self.child_model(m.trim())?,
            None => (ctx.model.clone(), ctx.api_key.clone()),
        };
        let task = s("prompt").unwrap_or_default();
        let context = if inherit {
            Some(parent_context(&parent_path)?)
        } else {
            None
        };
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
        let mut delegated = super::input::append_documents(&task, &docs);
        let description = s("description")
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| profile.display_name.clone());

        // The prompt plan: inherited context joins the system prompt of a
        // child with tools, the task of a Chat-only one.
        let chat_only = profile.is_chat_only();
        let mut append = vec![profile.prompt.clone()];
        if let Some(c) = &context {
            if chat_only {
                delegated = format!("{delegated}\n\n{c}");
            } else {
                append.push(c.clone());
            }
        }
        let exact = (chat_only || profile.prompt_mode == profiles::PromptMode::Replace)
            .then(|| profile.prompt.clone());
        let snapshot = Snapshot {
            append_system_prompt: append,
            // The child's tools: its profile's built-ins (never a control
            // tool) that the parent's tool flags allow.
            tools: profile
                .tools
                .iter()
                .filter(|t| !super::is_control_tool(t) && ctx.tool_ceiling.allows(t))
                .cloned()
                .collect(),
            load_skills: false,
            load_extensions: false,
            exact_system_prompt: exact,
        };
        let worktree = if isolated {
            Some(super::worktree::create(&ctx.cwd)?)
        } else {
            None
        };
        let cwd = worktree
            .as_ref()
            .map_or(ctx.cwd.clone(), |w| w.path.clone());
        let built = child_setup(&snapshot, &cwd, &ctx.tool_ceiling);
        let (tools, sections) = match built {
            Ok(b) => b,
            Err(e) => {
                if let Some(w) = &worktree {
                    let _ = super::worktree::cleanup(w);
                }
                return Err(e);
            }
        };
        let created_at = crate::timefmt::now_iso();
        let mut store = SessionStore::create(
            &cwd.display().to_string(),
            ctx.session_dir.as_deref(),
            Some(parent_path.display().to_string()),
        );
        let id = store.session.header.id.clone();
        let mut meta = serde_json::Map::new();
        meta.insert("version".into(), json!(1));
        meta.insert("parentSessionId".into(), json!(ctx.parent_session_id));
        meta.insert("parentSessionPath".into(), json!(parent_path));
        meta.insert("parentToolCallId".into(), json!(tc.tool_call_id));
        meta.insert("profile".into(), json!(profile.name));
        meta.insert("description".into(), json!(description));
        meta.insert("task".into(), json!(task));
        meta.insert("runInBackground".into(), json!(background));
        meta.insert("createdAt".into(), json!(created_at));
        meta.insert("resourceSnapshot".into(), snapshot.to_json());
        if let Some(w) = &worktree {
            meta.insert("worktreePath".into(), json!(w.path));
            meta.insert("worktreeBranch".into(), json!(w.branch));
        }
        let written = (|| {
            let e = store.session.new_custom(
                store.session.leaf_id(),
                "pi-web:subagent",
                Value::Object(meta),
            );
            append_entry(&mut store, e)?;
            let e = store.session.new_session_info(&description);
            append_entry(&mut store, e)
        })();
        if let Err(e) = written {
            if let Some(w) = &worktree {
                let _ = super::worktree::cleanup(w);
            }
            return Err(e);
        }
        let info = RunInfo {
            session_id: id.clone(),
            profile: profile.name.clone(),
            description,
            status: RunStatus::Queued,
            run_in_background: background,
            created_at,
            completed_at: None,
            result: None,
            error: None,
            worktree_path: worktree.as_ref().map(|w| w.path.display().to_string()),
            worktree_branch: worktree.as_ref().map(|w| w.branch.clone()),
            worktree_cleanup_error: None,
            worktree_branch_removed: false,
        };
        let opts = child_options(ctx, model, api_key, thinking, tools, cwd, sections);
        let ext = parent.for_child(Delegation {
            session_id: id.clone(),
            profile: profile.name.clone(),
            parent_tool_call_id: tc.tool_call_id.clone(),
        });
        let state = self.launch(Launch {
            store,
            opts,
            ext,
            task: delegated,
            info,
            max_turns,
            worktree,
        });
        Ok((id, state, background))
    }

    /// A model other than the parent's (pi-web's `parseSubagentModel`):
    /// `provider/id` exactly, or a bare id that names exactly one model.
    fn child_model(&self, m: &str) -> Result<(Model, Option<String>), String> {
        let ctx = &self.ctx;
        let parent = &ctx.model;
        if m == format!("{}/{}", parent.provider, parent.id) || m == parent.id {
            return Ok((parent.clone(), ctx.api_key.clone()));
        }
        let not_found = || format!("Subagent model not found: {m}");
        let registry =
            crate::model::ModelRegistry::load(&ctx.agent_dir).map_err(|e| e.to_string())?;
        let found = match m.find('/') {
            Some(i) if i > 0 => {
                let (p, id) = (&m[..i], &m[i + 1..]);
                registry
                    .all()
                    .iter()
                    .find(|x| x.provider == p && x.id == id)
                    .cloned()
                    .ok_or_else(not_found)?
            }
            _ => {
                let hits: Vec<&Model> = registry.all().iter().filter(|x| x.id == m).collect();
                match hits.as_slice() {
                    [one] => (*one).clone(),
                    [] => return Err(not_found()),
                    _ => {
                        return Err(format!(
                            "Subagent model is ambiguous; use provider/modelId: {m}"
                        ))
                    }
                }
            }
        };
        let key = registry
            .api_key(&found.provider, None)
            .map_err(|e| e.to_string())?;
        let model = registry
            .resolve_headers(&found, key.as_deref())
            .map_err(|e| e.to_string())?;
        Ok((model, key))
    }

    /// Continues an existing child (pi-web's resume): same session id and
    /// file, the tools and prompt its snapshot recorded, the new prompt as
    /// the task exactly (no documents, no inherited context, no turn limit,
    /// no worktree). `model` and `isolation` cannot change on resume.
    fn resume(
        self: &Arc<Self>,
        id: &str,
        args: &Value,
        tc: &ToolContext,
        parent: &AgentExt,
    ) -> Result<(String, Arc<RunState>, bool), String> {
        let ctx = &self.ctx;
        let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        if s("model").is_some_and(|m| !m.trim().is_empty()) {
            return Err(RESUME_MODEL.into());
        }
        if s("isolation").is_some_and(|m| !m.trim().is_empty()) {
            return Err(RESUME_ISOLATION.into());
        }
        let live = self.run(id);
        let path = match &live {
            Some(st) => st.session_path.clone(),
            None => ctx
                .session_dir
                .as_deref()
                .and_then(|d| runs::find_in_dir(d, id)),
        }
        .ok_or_else(|| format!("Subagent not found: {id}"))?;
        if live
            .as_ref()
            .is_some_and(|st| !lock(&st.info).status.is_terminal())
        {
            return Err("Subagent is already running".into());
        }
        let mut session = crate::session::Session::load(&path)
            .map_err(|_| format!("Subagent session file not found: {id}"))?;
        let mut persisted =
            runs::read_run(&session).ok_or_else(|| format!("Subagent not found: {id}"))?;
        if persisted.stale() {
            session = close_stale(session);
            persisted =
                runs::read_run(&session).ok_or_else(|| format!("Subagent not found: {id}"))?;
        }
        if persisted.parent_session_id != ctx.parent_session_id {
            return Err("Subagent does not belong to this parent session".into());
        }
        // A snapshot that does not validate leaves a normal session (pi-web
        // treats it so): the default tools, pi's own prompt.
        let snapshot = runs::metadata(&session)
            .and_then(runs::read_snapshot)
            .unwrap_or_else(|| Snapshot {
                append_system_prompt: Vec::new(),
                tools: crate::tools::DEFAULT_TOOLS
                    .iter()
                    .map(|t| t.to_string())
                    .collect(),
                load_skills: false,
                load_extensions: false,
                exact_system_prompt: None,
            });
        let cwd = PathBuf::from(&session.header.cwd);
        let (tools, sections) = child_setup(&snapshot, &cwd, &ctx.tool_ceiling)?;
        // The child keeps its own model and thinking level.
        let context = session.context(None);
        let (model, api_key) = match &context.model {
            Some((p, m)) => self.child_model(&format!("{p}/{m}"))?,
            None => (ctx.model.clone(), ctx.api_key.clone()),
        };
        let thinking = ThinkingLevel::parse(&context.thinking_level).unwrap_or(ctx.thinking);
        let description = s("description")
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .unwrap_or(persisted.description.clone());
        let background = args
            .get("run_in_background")
            .and_then(Value::as_bool)
            .unwrap_or(persisted.run_in_background);
        let info = RunInfo {
            session_id: id.to_string(),
            profile: persisted.profile.clone(),
            description,
            status: RunStatus::Queued,
            run_in_background: background,
            created_at: persisted.created_at.clone(),
            completed_at: None,
            result: None,
            error: None,
            worktree_path: persisted.worktree_path.clone(),
            worktree_branch: persisted.worktree_branch.clone(),
            worktree_cleanup_error: None,
            worktree_branch_removed: false,
        };
        let opts = child_options(ctx, model, api_key, thinking, tools, cwd, sections);
        let ext = parent.for_child(Delegation {
            session_id: id.to_string(),
            profile: persisted.profile.clone(),
            parent_tool_call_id: tc.tool_call_id.clone(),
        });
        let state = self.launch(Launch {
            store: SessionStore::open(session),
            opts,
            ext,
            task: s("prompt").unwrap_or_default(),
            info,
            max_turns: None,
            worktree: None,
        });
        Ok((id.to_string(), state, background))
    }

    /// Queues a prepared child: the `queued` entry, the run record, then a
    /// task that waits for a slot (FIFO), writes `running`, runs the child
    /// on its own thread and records the result.
    fn launch(self: &Arc<Self>, l: Launch) -> Arc<RunState> {
        let Launch {
            mut store,
            opts,
            ext,
            task,
            info,
            max_turns,
            worktree,
        } = l;
        let e = store.session.new_custom(
            store.session.leaf_id(),
            "pi-web:subagent-status",
            status_data("queued"),
        );
        let _ = store.append_ref(e);
        let background = info.run_in_background;
        let id = info.session_id.clone();
        let (done, _) = tokio::sync::watch::channel(false);
        let (settled, rx) = tokio::sync::watch::channel(false);
        let state = Arc::new(RunState {
            info: Mutex::new(info),
            session_path: store.path().map(|p| p.to_path_buf()),
            done,
            settled,
            queue: Arc::new(MessageQueue::default()),
            cancel: CancellationToken::new(),
        });
        lock(&self.runs).insert(id, Arc::clone(&state));
        if background {
            lock(&self.background).push(rx);
        }
        let me = Arc::clone(self);
        let st2 = Arc::clone(&state);
        let slots = Arc::clone(&self.slots);
        tokio::spawn(async move {
            // FIFO: tokio's semaphore serves waiters in order.
            let permit = tokio::select! {
                p = slots.acquire_owned() => p.ok(),
                _ = st2.cancel.cancelled() => None,
            };
            let end = if permit.is_none() {
                // Stopped while queued: recorded as aborted, never started.
                let end = ChildEnd {
                    status: RunStatus::Aborted,
                    text: None,
                    error: None,
                    cleanup: worktree
                        .as_ref()
                        .map(super::worktree::cleanup)
                        .unwrap_or_default(),
                    wrapped: false,
                };
                write_result(&mut store, &end);
                end
            } else {
                let e = store.session.new_custom(
                    store.session.leaf_id(),
                    "pi-web:subagent-status",
                    status_data("running"),
                );
                let _ = store.append_ref(e);
                lock(&st2.info).status = RunStatus::Running;
                let (tx, rx) = tokio::sync::oneshot::channel();
                let q = Arc::clone(&st2.queue);
                let cancel = st2.cancel.clone();
                // The child's future is not `Send`: it runs on a thread of
                // its own, driven through the parent's runtime, so its HTTP
                // connections live (and are pooled) where the parent's do.
                let handle = tokio::runtime::Handle::current();
                on_child_thread(Box::new(move || {
                    let child = Child {
                        opts,
                        ext,
                        store,
                        queue: q,
                        cancel,
                        task,
                        max_turns,
                        worktree,
                    };
                    let out = run_child(&handle, child);
                    let _ = tx.send(out);
                }));
                match rx.await {
                    Ok(r) => r,
                    Err(_) => ChildEnd::failed("the subagent crashed".into()),
                }
            };
            drop(permit);
            {
                let mut info = lock(&st2.info);
                info.status = end.status;
                info.result = end.text;
                info.error = end.error;
                info.worktree_cleanup_error = end.cleanup.error;
                info.worktree_branch_removed = end.cleanup.branch_removed;
                info.completed_at = Some(crate::timefmt::now_iso());
            }
            st2.done.send_replace(true);
            if background {
                me.notify_parent(&st2);
            }
            st2.settled.send_replace(true);
        });
        state
    }

    /// Queues a finished background run's report for the parent (a
    /// follow-up that starts a turn), unless its result was read already.
    /// The `consumed` lock is held until the report is queued, so a
    /// concurrent [`Controller::consume`] either finds the report queued
    /// (and withdraws it) or leaves its mark first.
    fn notify_parent(&self, state: &RunState) {
        let info = lock(&state.info).clone();
        let mut consumed = lock(&self.consumed);
        let key = (
            info.session_id.clone(),
            info.completed_at.clone().unwrap_or_default(),
        );
        if let Some(i) = consumed.iter().position(|c| *c == key) {
            consumed.remove(i);
            return;
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
        drop(consumed);
    }

    /// Marks a finished background run's result as read (pi-web's
    /// consumption mark, keyed by session id and `completedAt`): a report
    /// still waiting in the parent's queue is withdrawn, as pi-web drops a
    /// report consumed while the parent was busy; one not queued yet is
    /// dropped by [`Controller::notify_parent`] when it comes.
    fn consume(&self, info: &RunInfo) {
        let mut consumed = lock(&self.consumed);
        let completed = info.completed_at.clone().unwrap_or_default();
        let queued = lock(&self.parent_queue).clone();
        let withdrawn = queued.is_some_and(|q| {
            q.withdraw_custom(|c| {
                let d = c.details.as_ref();
                c.custom_type == st::NOTIFICATION_TYPE
                    && d.and_then(|d| d.get("sessionId")).and_then(Value::as_str)
                        == Some(info.session_id.as_str())
                    && d.and_then(|d| d.get("completedAt"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        == completed
            })
        });
        if !withdrawn {
            consumed.push((info.session_id.clone(), completed));
        }
    }

    async fn get_result(&self, args: Value, tc: ToolContext) -> ToolOutput {
        let id = args
            .get("agent_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(state) = self.run(&id) else {
            // Not run by this process: the file decides, and a `queued` or
            // `running` record nobody runs any more was interrupted.
            return match self.persisted(&id) {
                Some(info) => text_output(info.final_text(), Some(info.details()), info.is_error()),
                None => text_output(format!("Subagent not found: {id}"), None, true),
            };
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
            self.consume(&info);
        }
        text_output(info.final_text(), Some(info.details()), info.is_error())
    }

    /// A child of this parent that no live run owns, read from its file.
    fn persisted(&self, id: &str) -> Option<RunInfo> {
        let path = runs::find_in_dir(self.ctx.session_dir.as_deref()?, id)?;
        let s = crate::session::Session::load(&path).ok()?;
        let mut r =
            runs::read_run(&s).filter(|r| r.parent_session_id == self.ctx.parent_session_id)?;
        if r.stale() {
            r = runs::read_run(&close_stale(s))?;
        }
        Some(runs::live_view(&r, false))
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

/// A `pi-web:subagent-status` entry's data, naming this process as the
/// one that runs the child (see [`runs::Owner`]).
fn status_data(status: &str) -> Value {
    let mut data = json!({"version": 1, "status": status});
    runs::Owner::this_process().mark(&mut data);
    data
}

/// Closes the record of a child whose process has ended (it would read
/// `queued` or `running` for ever): a `pi-web:subagent-result` entry with
/// status `interrupted`, which pi-web and [`runs::read_run`] read as such.
fn close_stale(session: crate::session::Session) -> crate::session::Session {
    let mut store = SessionStore::open(session);
    let e = store.session.new_custom(
        store.session.leaf_id(),
        "pi-web:subagent-result",
        json!({"version": 1, "status": "interrupted", "completedAt": crate::timefmt::now_iso()}),
    );
    let _ = store.append_ref(e);
    store.session
}

fn user_message(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![ContentBlock::text(text)]),
        timestamp: Num::signed(crate::timefmt::now_ms()),
        extra: serde_json::Map::new(),
    })
}

/// `Agent` called outside an agent's loop: there are no limits to hand
/// on, so no child starts.
pub const NO_CALLER: &str =
    "Agent can only start a subagent from an agent's tool call (the caller's limits could not be handed on)";

/// The turn limit of a start: the request's `max_turns` (a fraction is
/// rounded up, so it never lifts a limit; 0 means "not given"), else the
/// profile's. Negative or non-finite values are refused.
fn turn_limit(requested: Option<&Value>, profile: Option<u64>) -> Result<Option<u64>, String> {
    match requested.and_then(Value::as_f64) {
        Some(n) if !n.is_finite() || n < 0.0 => {
            Err("max_turns must be a non-negative number".into())
        }
        Some(n) if n > 0.0 => Ok(Some(n.ceil() as u64)),
        _ => Ok(profile),
    }
}

/// `Agent` resume refusals: both are fixed when the child was created.
pub const RESUME_MODEL: &str = "Agent resume keeps the subagent's model; model cannot be given";
pub const RESUME_ISOLATION: &str =
    "Agent resume keeps the subagent's isolation; isolation cannot be given";

/// The prefix of inherited parent context and its cap (characters of the
/// serialized messages, counted as JavaScript counts: UTF-16 units).
pub const CONTEXT_PREFIX: &str = "The following is the active conversation context from the parent session. Use it only as background for the delegated task:";
pub const CONTEXT_LIMIT: usize = 50_000;

/// The parent's active context (after compaction) as `inherit_context`
/// hands it over: the prefix, a newline, the messages as JSON, cut at
/// [`CONTEXT_LIMIT`] with `\n[Parent context truncated]`.
pub fn parent_context(parent_path: &std::path::Path) -> Result<String, String> {
    let session = match crate::session::Session::load(parent_path) {
        Ok(s) => s,
        // Not written yet: an empty context.
        Err(_) if !parent_path.exists() => {
            return Ok(format!("{CONTEXT_PREFIX}\n[]"));
        }
        Err(e) => return Err(format!("cannot read the parent session: {e}")),
    };
    let ctx = session.context(None);
    let msgs: Vec<&crate::format::message::MessageRef> =
        ctx.messages.iter().map(|(_, m)| m).collect();
    let json = serde_json::to_string(&msgs).map_err(|e| e.to_string())?;
    Ok(format!(
        "{CONTEXT_PREFIX}\n{}",
        cap_utf16(&json, CONTEXT_LIMIT)
    ))
}

/// `text` cut to at most `limit` UTF-16 units (never inside a character),
/// marked when cut.
pub fn cap_utf16(text: &str, limit: usize) -> String {
    let mut units = 0;
    for (i, c) in text.char_indices() {
        units += c.len_utf16();
        if units > limit {
            return format!("{}\n[Parent context truncated]", &text[..i]);
        }
    }
    text.to_string()
}

/// A child's whole run, handed to a child thread.
type ChildJob = Box<dyn FnOnce() + Send>;

/// Child threads waiting for their next child (one sender each).
static IDLE_CHILD_THREADS: Mutex<Vec<std::sync::mpsc::Sender<ChildJob>>> = Mutex::new(Vec::new());

/// Runs `job` on a child thread: a child's future is not `Send`, so each
/// running child has a thread of its own, driven through the parent's
/// runtime. A thread whose child has ended waits for the next one instead
/// of exiting, so a child after the first costs no thread start (nor the
/// new stack's page faults). There are never more threads than children
/// that ran at once; idle ones block on their channel until the process
/// ends.
fn on_child_thread(job: ChildJob) {
    let mut job = job;
    loop {
        let idle = lock(&IDLE_CHILD_THREADS).pop();
        match idle {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                // That thread is gone (it panicked): try the next one.
                Err(back) => job = back.0,
            },
            None => break,
        }
    }
    let started = std::thread::Builder::new()
        .name("pi-subagent".into())
        .spawn(move || {
            let (tx, rx) = std::sync::mpsc::channel::<ChildJob>();
            let mut next = Some(job);
            while let Some(job) = next.take() {
                job();
                lock(&IDLE_CHILD_THREADS).push(tx.clone());
                next = rx.recv().ok();
            }
        });
    // No thread (out of resources): the job, dropped unrun, drops its
    // result channel, so the run is reported as crashed.
    drop(started);
}

/// A child's tools and system-prompt sections.
type ChildSetup = (Vec<Arc<dyn Tool>>, Vec<(String, String)>);

/// The child's tools and system-prompt sections from its snapshot: the
/// exact prompt alone, or pi's prompt for the tools with the append list.
/// Only the tools `ceiling` allows (a resumed child obeys the parent that
/// resumes it).
fn child_setup(
    snap: &Snapshot,
    cwd: &std::path::Path,
    ceiling: &crate::tools::select::ToolCeiling,
) -> Result<ChildSetup, String> {
    let allowed: Vec<String> = snap
        .tools
        .iter()
        .filter(|t| ceiling.allows(t))
        .cloned()
        .collect();
    let tools = crate::tools::select::builtin_tools(&allowed);
    let sections = match &snap.exact_system_prompt {
        Some(p) if p.is_empty() => Vec::new(),
        Some(p) => vec![("preamble".to_string(), p.clone())],
        None => {
            let plan = crate::prompt::plan::PlanOptions {
                cwd: cwd.display().to_string(),
                tools: crate::agent::prompt_tools(&tools),
                system_prompt: None,
                append: snap
                    .append_system_prompt
                    .iter()
                    .filter(|p| !p.is_empty())
                    .cloned()
                    .collect(),
                docs: None,
                chat_only: false,
            };
            crate::prompt::plan::plan_sections(&plan, &crate::resources::Resources::default())?
        }
    };
    Ok((tools, sections))
}

fn append_entry(store: &mut SessionStore, e: crate::format::Entry) -> Result<(), String> {
    store
        .append_ref(e)
        .map(|_| ())
        .map_err(|e| format!("cannot write the subagent session: {e}"))
}

/// A child ready to be queued.
struct Launch {
    store: SessionStore,
    opts: AgentOptions,
    /// Its watchers: the parent's, for a child ([`AgentExt::for_child`]).
    ext: AgentExt,
    task: String,
    info: RunInfo,
    max_turns: Option<u64>,
    worktree: Option<super::worktree::Worktree>,
}

/// How a child run ended.
struct ChildEnd {
    status: RunStatus,
    text: Option<String>,
    error: Option<String>,
    /// What removing its worktree did (nothing without one).
    cleanup: super::worktree::Cleanup,
    /// Ended by the turn limit (the wrap-up steer was sent).
    wrapped: bool,
}

impl ChildEnd {
    fn failed(error: String) -> ChildEnd {
        ChildEnd {
            status: RunStatus::Failed,
            text: None,
            error: Some(error),
            cleanup: Default::default(),
            wrapped: false,
        }
    }
}

/// Appends the `pi-web:subagent-result` entry (optional keys omitted).
fn write_result(store: &mut SessionStore, end: &ChildEnd) {
    let mut data = serde_json::Map::new();
    data.insert("version".into(), json!(1));
    data.insert("status".into(), json!(end.status.as_str()));
    data.insert("completedAt".into(), json!(crate::timefmt::now_iso()));
    if let Some(t) = end.text.as_ref().filter(|t| !t.is_empty()) {
        data.insert("result".into(), json!(t));
    }
    if let Some(e) = end.error.as_ref().filter(|e| !e.is_empty()) {
        data.insert("error".into(), json!(e));
    }
    if let Some(e) = &end.cleanup.error {
        data.insert("worktreeCleanupError".into(), json!(e));
    }
    if end.cleanup.branch_removed {
        data.insert("worktreeBranchRemoved".into(), json!(true));
    }
    if end.wrapped {
        data.insert("wrappedAtTurnLimit".into(), json!(true));
    }
    let e = store.session.new_custom(
        store.session.leaf_id(),
        "pi-web:subagent-result",
        Value::Object(data),
    );
    let _ = store.append_ref(e);
}

/// A started child, handed to its thread.
struct Child {
    opts: AgentOptions,
    ext: AgentExt,
    store: SessionStore,
    queue: Arc<MessageQueue>,
    cancel: CancellationToken,
    task: String,
    max_turns: Option<u64>,
    worktree: Option<super::worktree::Worktree>,
}

/// Runs one child to its end on the current thread: the turn limiter
/// (a wrap-up steer when `max_turns` turns have ended, an abort after one
/// more, recorded as completed), the worktree's removal, the result entry.
/// A panic inside is caught and reported as `failed`.
fn run_child(rt: &tokio::runtime::Handle, child: Child) -> ChildEnd {
    let Child {
        opts,
        ext,
        store,
        queue,
        cancel,
        task,
        max_turns,
        worktree,
    } = child;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            let mut agent = Agent::new(opts, store, cancel.clone());
            // Every tool call of the child passes its parent's gate.
            agent.ext = ext;
            agent.queue = Arc::clone(&queue);
            let mut turns = 0u64;
            let mut wrapped = false;
            let mut limit_hit = false;
            let mut last_text: Option<String> = None;
            let mut emit = |v: &Value| {
                if v.get("type").and_then(Value::as_str) != Some("turn_end") {
                    return;
                }
                if let Some(m) = v.get("message").filter(|m| m["role"] == "assistant") {
                    let t: String = m["content"]
                        .as_array()
                        .map(|c| {
                            c.iter()
                                .filter(|b| b["type"] == "text")
                                .filter_map(|b| b["text"].as_str())
                                .collect()
                        })
                        .unwrap_or_default();
                    if !t.trim().is_empty() {
                        last_text = Some(t.trim().to_string());
                    }
                }
                turns += 1;
                match max_turns {
                    Some(n) if turns == n => {
                        wrapped = true;
                        queue.steer(user_message(st::TURN_LIMIT_STEER));
                    }
                    Some(n) if turns > n && wrapped && !limit_hit => {
                        limit_hit = true;
                        cancel.cancel();
                    }
                    _ => {}
                }
            };
            if let Err(e) = agent.prepare_session() {
                return (agent, None, Some(e), false, false);
            }
            let out = agent.run(user_message(&task), &mut emit).await;
            let text = out
                .last
                .as_ref()
                .map(|m| {
                    AgentMessage::Assistant(Box::new(m.clone()))
                        .text()
                        .trim()
                        .to_string()
                })
                .filter(|t| !t.is_empty())
                .or(if limit_hit { last_text } else { None });
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
            let aborted = (out.aborted || cancel.is_cancelled()) && !limit_hit;
            let error = if limit_hit {
                None
            } else {
                out.error.or(provider_error)
            };
            (agent, text, error, aborted, wrapped && limit_hit)
        })
    }));
    let Ok((mut agent, text, error, aborted, wrapped)) = outcome else {
        let mut end = ChildEnd::failed("the subagent crashed".into());
        end.cleanup = worktree
            .as_ref()
            .map(super::worktree::cleanup)
            .unwrap_or_default();
        return end;
    };
    let status = if aborted {
        RunStatus::Aborted
    } else if error.is_some() {
        RunStatus::Failed
    } else {
        RunStatus::Completed
    };
    let end = ChildEnd {
        status,
        text,
        error: error.filter(|_| status == RunStatus::Failed),
        cleanup: worktree
            .as_ref()
            .map(super::worktree::cleanup)
            .unwrap_or_default(),
        wrapped,
    };
    write_result(&mut agent.store, &end);
    end
}

/// The control tools as a run declares them while the switch is on, for a
/// program that shows a run's prompt without running one (`pi-prompt`):
/// the same definitions, snippet and guidelines; calling one is an error.
pub fn described_tools(
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
    trusted: bool,
) -> Vec<Arc<dyn Tool>> {
    if !settings::is_enabled(&settings::settings_path(agent_dir)) {
        return Vec::new();
    }
    let profiles = profiles::list_sources(agent_dir, cwd, trusted).effective();
    st::control_tools(&profiles)
        .into_iter()
        .map(|spec| Arc::new(ControlTool { spec, c: None }) as Arc<dyn Tool>)
        .collect()
}

/// One of the three control tools (`c`: the runs it drives; none when it
/// only describes itself).
struct ControlTool {
    spec: crate::format::extension::ToolSpec,
    c: Option<Arc<Controller>>,
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
            let Some(c) = &self.c else {
                return ToolOutput::error("the subagent tools run only inside pi-run");
            };
            match self.spec.name.as_str() {
                "Agent" => c.agent(args, ctx, up).await,
                "get_subagent_result" => c.get_result(args, ctx).await,
                _ => c.steer(args),
            }
        })
    }
}

/// Joins the built-in's control tools to a run's tool set as the tool
/// flags decide (`sel`: they are an extension's tools to `-t`, `-xt` and
/// `-nt`, as pi-web's subagents are an extension): a legacy
/// `pi-subagents` extension's tools leave it (seed 001 §4); an unrelated
/// extension that registered a control-tool name keeps it, the built-in's
/// tool of that name is left out, and the collision is returned as the
/// same line a file extension's conflict gives (`extension
/// <inline:pi-web-subagents>: Tool "<name>" conflicts with <path>;
/// skipped`): the built-in behaves as pi-web's hidden inline extension,
/// loaded after the file extensions, so its tools come after theirs.
pub fn join_control_tools(
    tools: &mut Vec<Arc<dyn Tool>>,
    control: Vec<Arc<dyn Tool>>,
    runner: &crate::extensions::runner::Runner,
    sel: &mut crate::tools::select::Selection,
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
                // pi's conflict error lands on the later extension, and
                // the inline one loads after every file extension.
                warnings.push(format!(
                    "extension {}: Tool \"{name}\" conflicts with {}; skipped",
                    st::EXTENSION_PATH,
                    e.path
                ));
                taken.push(name.clone());
            }
        }
    }
    let existing: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    for t in control {
        let name = t.definition().name;
        if taken.contains(&name) || existing.contains(&name) {
            continue;
        }
        // The tool flags treat them as any extension's tools.
        sel.add([crate::tools::select::AvailableTool::extension(&name, true)]);
        if sel.is_active(&name) {
            tools.push(t);
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_threads_run_every_job_at_once_and_are_reused_after() {
        // Eight jobs that only finish together: each must get a thread of
        // its own at once (an idle thread is never one still running).
        let n = 8;
        let all = Arc::new(std::sync::Barrier::new(n + 1));
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..n {
            let (all, tx) = (Arc::clone(&all), tx.clone());
            on_child_thread(Box::new(move || {
                all.wait();
                let _ = tx.send((i, std::thread::current().id()));
            }));
        }
        all.wait();
        let mut first: Vec<_> = (0..n).map(|_| rx.recv().unwrap()).collect();
        first.sort_by_key(|(i, _)| *i);
        let ids: std::collections::HashSet<_> = first.iter().map(|(_, t)| *t).collect();
        assert_eq!(ids.len(), n, "one thread per running job");
        // Later jobs, one after another, all run (on threads that are
        // parked as idle or new ones), none is lost.
        for i in 0..20 {
            let tx = tx.clone();
            on_child_thread(Box::new(move || {
                let _ = tx.send((i, std::thread::current().id()));
            }));
            let (got, _) = rx.recv().unwrap();
            assert_eq!(got, i);
        }
        // A job that panics takes only its own thread with it.
        on_child_thread(Box::new(|| panic!("child job panicked on purpose")));
        for i in 0..3 {
            let tx = tx.clone();
            on_child_thread(Box::new(move || {
                let _ = tx.send((i, std::thread::current().id()));
            }));
            assert_eq!(rx.recv().unwrap().0, i);
        }
    }

    #[test]
    fn inherited_context_is_capped_in_utf16_units_and_marked() {
        assert_eq!(cap_utf16("abc", 3), "abc");
        assert_eq!(cap_utf16("abcd", 3), "abc\n[Parent context truncated]");
        // "😀" is two UTF-16 units: never split.
        assert_eq!(cap_utf16("a😀b", 2), "a\n[Parent context truncated]");
        assert_eq!(cap_utf16("a😀b", 3), "a😀\n[Parent context truncated]");
        let long = "x".repeat(CONTEXT_LIMIT + 10);
        let capped = cap_utf16(&long, CONTEXT_LIMIT);
        assert_eq!(
            capped.len(),
            CONTEXT_LIMIT + "\n[Parent context truncated]".len()
        );
    }

    #[test]
    fn parent_context_has_the_prefix_and_the_messages() {
        let d = tempfile::tempdir().unwrap();
        let missing = parent_context(&d.path().join("none.jsonl")).unwrap();
        assert_eq!(missing, format!("{CONTEXT_PREFIX}\n[]"));
        let p = d.path().join("p.jsonl");
        std::fs::write(
            &p,
            "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n\
             {\"type\":\"message\",\"id\":\"a1\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"MARK\",\"timestamp\":1}}\n",
        )
        .unwrap();
        let c = parent_context(&p).unwrap();
        assert!(c.starts_with(&format!("{CONTEXT_PREFIX}\n[{{")), "{c}");
        assert!(c.contains("\"MARK\""), "{c}");
    }
}
