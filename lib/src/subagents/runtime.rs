//! The child runtime of the built-in subagents: one [`Controller`] per
//! parent session behind the three control tools (the tools themselves:
//! `control`). Each `Agent` call creates a real pi session (header
//! `parentSession`, the `pi-web:subagent` metadata, `pi-web:subagent-status`
//! and `pi-web:subagent-result` entries) and runs it in-process with the
//! parent's model, at most `maxConcurrent` at a time (FIFO; the running
//! itself: `child`). A child obeys every limit of the agent whose
//! `Agent` call started it: its tool calls pass that agent's whole gate
//! (hooks, approvers, final policy; [`AgentExt::for_child`]), its tools
//! never include one the parent's tool flags shut out, and it shares the
//! run's budget (the same turn limit, purse and clock; a child on a model
//! without prices is refused under `--max-cost`). Foreground calls wait
//! for the child; background calls return at once and the parent receives the completion
//! as a follow-up custom message. A child that fails or panics becomes a
//! `failed` run, never a parent crash. `resume` (in `resume`) reopens a
//! finished (or dead) child's file and continues it with the tools and prompt its
//! `resourceSnapshot` recorded; a `queued` or `running` record no live run
//! owns reads as `interrupted`, and is written so when its process has
//! ended. `max_turns` is pi-web's two-phase limit (a wrap-up steer at N
//! turns, an abort at N+1, recorded as completed), `isolation: "worktree"`
//! runs the child in a fresh git worktree ([`super::worktree`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::child::{
    child_model, child_options, child_setup, parent_context, turn_limit, user_message, Launch,
};
use super::control::ControlTool;
pub use super::control::{described_tools, join_control_tools};
use super::profiles::{self, Profile};
use super::runs::{self, close_stale, Snapshot};
use super::settings;
use super::tools::{self as st, RunInfo, RunStatus};
use crate::agent::hooks::{AgentExt, Delegation};
use crate::agent::queue::{DeliverAs, MessageQueue};
use crate::agent::RetrySettings;
use crate::format::message::CustomMessage;
use crate::format::model::{Model, ThinkingLevel};
use crate::format::{ContentBlock, Num, UserContent};
use crate::session::store::SessionStore;
use crate::tools::{Tool, ToolContext, ToolOutput, UpdateSink};

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
}

pub(super) struct RunState {
    pub(super) info: Mutex<RunInfo>,
    /// The child's session file.
    pub(super) session_path: Option<PathBuf>,
    pub(super) done: tokio::sync::watch::Sender<bool>,
    /// Sent after `done` once a background run's report is queued for the
    /// parent (a one-shot run waits for this, not for `done`).
    pub(super) settled: tokio::sync::watch::Sender<bool>,
    pub(super) queue: Arc<MessageQueue>,
    pub(super) cancel: CancellationToken,
}

/// The runs of one parent session.
pub struct Controller {
    pub(super) ctx: ParentContext,
    pub(super) profiles: Vec<Profile>,
    pub(super) slots: Arc<tokio::sync::Semaphore>,
    pub(super) runs: Mutex<HashMap<String, Arc<RunState>>>,
    /// Background results read through `get_subagent_result`: `(session
    /// id, completedAt)`, so a resumed run's report is not dropped.
    pub(super) consumed: Mutex<Vec<(String, String)>>,
    pub(super) parent_queue: Mutex<Option<Arc<MessageQueue>>>,
    pub(super) background: Mutex<Vec<tokio::sync::watch::Receiver<bool>>>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
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

/// A child's model must be one the run's budget can count (a cost limit
/// needs prices).
pub(super) fn counted(parent: &AgentExt, model: &Model) -> Result<(), String> {
    match &parent.limits.budget {
        Some(b) => b.check_priced(model),
        None => Ok(()),
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

    /// Every child this controller started or resumed: its session id,
    /// profile and status (`running` while it runs).
    pub fn child_statuses(&self) -> Vec<(String, String, RunStatus)> {
        let mut v: Vec<(String, String, RunStatus, String)> = lock(&self.runs)
            .values()
            .map(|r| {
                let i = lock(&r.info);
                (
                    i.session_id.clone(),
                    i.profile.clone(),
                    i.status,
                    i.created_at.clone(),
                )
            })
            .collect();
        v.sort_by(|a, b| a.3.cmp(&b.3).then(a.0.cmp(&b.0)));
        v.into_iter().map(|(id, p, s, _)| (id, p, s)).collect()
    }

    /// Tells every child still queued or running to stop (the run is
    /// stopping): each ends as aborted, its tools killed.
    pub fn stop_all(&self) {
        for r in lock(&self.runs).values() {
            r.cancel.cancel();
        }
    }

    /// Waits at most `grace` for every child still running to end (they
    /// were told to stop): their tools' process groups are killed on the
    /// way, so nothing a child started outlives the run.
    pub async fn wait_children(&self, grace: Duration) {
        let pending: Vec<_> = lock(&self.runs)
            .values()
            .map(|r| r.done.subscribe())
            .collect();
        let all = async {
            for mut rx in pending {
                let _ = rx.wait_for(|d| *d).await;
            }
        };
        let _ = tokio::time::timeout(grace, all).await;
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

    pub(super) fn run(&self, id: &str) -> Option<Arc<RunState>> {
        lock(&self.runs).get(id).cloned()
    }

    pub(super) async fn agent(
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
            Some(m) => child_model(&self.ctx, m.trim())?,
            None => (ctx.model.clone(), ctx.api_key.clone()),
        };
        counted(parent, &model)?;
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

    /// Queues a finished background run's report for the parent (a
    /// follow-up that starts a turn), unless its result was read already.
    /// The `consumed` lock is held until the report is queued, so a
    /// concurrent [`Controller::consume`] either finds the report queued
    /// (and withdraws it) or leaves its mark first.
    pub(super) fn notify_parent(&self, state: &RunState) {
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

    pub(super) async fn get_result(&self, args: Value, tc: ToolContext) -> ToolOutput {
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

    pub(super) fn steer(&self, args: Value) -> ToolOutput {
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

/// `Agent` called outside an agent's loop: there are no limits to hand
/// on, so no child starts.
pub const NO_CALLER: &str =
    "Agent can only start a subagent from an agent's tool call (the caller's limits could not be handed on)";

/// `Agent` resume refusals: both are fixed when the child was created.
pub const RESUME_MODEL: &str = "Agent resume keeps the subagent's model; model cannot be given";
pub const RESUME_ISOLATION: &str =
    "Agent resume keeps the subagent's isolation; isolation cannot be given";

fn append_entry(store: &mut SessionStore, e: crate::format::Entry) -> Result<(), String> {
    store
        .append_ref(e)
        .map(|_| ())
        .map_err(|e| format!("cannot write the subagent session: {e}"))
}
