//! Running subagent children: queueing a prepared child for a slot, the
//! thread it runs on (a child's future is not `Send`), its agent options
//! and tool set from its snapshot (within the parent's tool ceiling), the
//! parent context `inherit_context` hands over, the turn limiter, and the
//! result entry written when it ends. [`super::runtime`] decides what to
//! start and reports on the runs.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::runs::{status_data, Snapshot};
use super::runtime::{lock, Controller, ParentContext, RunState};
use super::tools::{self as st, RunInfo, RunStatus};
use crate::agent::hooks::AgentExt;
use crate::agent::queue::MessageQueue;
use crate::agent::{Agent, AgentOptions, Event};
use crate::format::message::UserMessage;
use crate::format::model::{Model, ThinkingLevel};
use crate::format::{AgentMessage, ContentBlock, Num, UserContent};
use crate::session::store::SessionStore;
use crate::tools::Tool;

/// A child's agent options: its own model, tools, cwd and prompt sections;
/// from the parent its idle timeout, image and retry settings (its turn
/// limit comes with the run's budget in its [`AgentExt`]; the tool's own
/// two-phase limit steers within it); no forced prompt.
pub(super) fn child_options(
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
        max_turns: None,
        idle_timeout: ctx.idle_timeout,
        auto_resize_images: ctx.auto_resize_images,
        retry: ctx.retry,
    }
}

pub(super) fn user_message(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Blocks(vec![ContentBlock::text(text)]),
        timestamp: Num::signed(crate::timefmt::now_ms()),
        extra: serde_json::Map::new(),
    })
}

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
pub(super) type ChildJob = Box<dyn FnOnce() + Send>;

/// Child threads waiting for their next child (one sender each).
static IDLE_CHILD_THREADS: Mutex<Vec<std::sync::mpsc::Sender<ChildJob>>> = Mutex::new(Vec::new());

/// Runs `job` on a child thread: a child's future is not `Send`, so each
/// running child has a thread of its own, driven through the parent's
/// runtime. A thread whose child has ended waits for the next one instead
/// of exiting, so a child after the first costs no thread start (nor the
/// new stack's page faults). There are never more threads than children
/// that ran at once; idle ones block on their channel until the process
/// ends.
pub(super) fn on_child_thread(job: ChildJob) {
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
pub(super) type ChildSetup = (Vec<Arc<dyn Tool>>, Vec<(String, String)>);

/// The child's tools and system-prompt sections from its snapshot: the
/// exact prompt alone, or pi's prompt for the tools with the append list.
/// Only the tools `ceiling` allows (a resumed child obeys the parent that
/// resumes it).
pub(super) fn child_setup(
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

/// How a child run ended.
pub(super) struct ChildEnd {
    pub(super) status: RunStatus,
    pub(super) text: Option<String>,
    pub(super) error: Option<String>,
    /// What removing its worktree did (nothing without one).
    pub(super) cleanup: super::worktree::Cleanup,
    /// Ended by the turn limit (the wrap-up steer was sent).
    pub(super) wrapped: bool,
}

impl ChildEnd {
    pub(super) fn failed(error: String) -> ChildEnd {
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
pub(super) fn write_result(store: &mut SessionStore, end: &ChildEnd) {
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
pub(super) struct Child {
    pub(super) opts: AgentOptions,
    pub(super) ext: AgentExt,
    pub(super) store: SessionStore,
    pub(super) queue: Arc<MessageQueue>,
    pub(super) cancel: CancellationToken,
    pub(super) task: String,
    pub(super) max_turns: Option<u64>,
    pub(super) worktree: Option<super::worktree::Worktree>,
}

/// Runs one child to its end on the current thread: the turn limiter
/// (a wrap-up steer when `max_turns` turns have ended, an abort after one
/// more, recorded as completed), the worktree's removal, the result entry.
/// A panic inside is caught and reported as `failed`.
pub(super) fn run_child(rt: &tokio::runtime::Handle, child: Child) -> ChildEnd {
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
            let mut emit = |v: &Event<'_>| {
                // Only turn ends matter here, and only their reply's text.
                let Event::TurnEnd { message, .. } = v else {
                    return;
                };
                if let AgentMessage::Assistant(m) = message {
                    let t = crate::format::message::blocks_text(&m.content, "");
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

/// A model other than the parent's (pi-web's `parseSubagentModel`):
/// `provider/id` exactly, or a bare id that names exactly one model.
pub(super) fn child_model(ctx: &ParentContext, m: &str) -> Result<(Model, Option<String>), String> {
    let parent = &ctx.model;
    if m == format!("{}/{}", parent.provider, parent.id) || m == parent.id {
        return Ok((parent.clone(), ctx.api_key.clone()));
    }
    let not_found = || format!("Subagent model not found: {m}");
    let registry = crate::model::ModelRegistry::load(&ctx.agent_dir).map_err(|e| e.to_string())?;
    let found = match m.find('/') {
        Some(i) if i > 0 => {
            let (p, id) = (&m[..i], &m[i + 1..]);
            registry.model(p, id).cloned().ok_or_else(not_found)?
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

/// The turn limit of a start: the request's `max_turns` (a fraction is
/// rounded up, so it never lifts a limit; 0 means "not given"), else the
/// profile's. Negative or non-finite values are refused.
pub(super) fn turn_limit(
    requested: Option<&Value>,
    profile: Option<u64>,
) -> Result<Option<u64>, String> {
    match requested.and_then(Value::as_f64) {
        Some(n) if !n.is_finite() || n < 0.0 => {
            Err("max_turns must be a non-negative number".into())
        }
        Some(n) if n > 0.0 => Ok(Some(n.ceil() as u64)),
        _ => Ok(profile),
    }
}

/// A child ready to be queued.
pub(super) struct Launch {
    pub(super) store: SessionStore,
    pub(super) opts: AgentOptions,
    /// Its watchers: the parent's, for a child ([`AgentExt::for_child`]).
    pub(super) ext: AgentExt,
    pub(super) task: String,
    pub(super) info: RunInfo,
    pub(super) max_turns: Option<u64>,
    pub(super) worktree: Option<super::worktree::Worktree>,
}

impl Controller {
    /// Queues a prepared child: the `queued` entry, the run record, then a
    /// task that waits for a slot (FIFO), writes `running`, runs the child
    /// on its own thread and records the result.
    pub(super) fn launch(self: &Arc<Self>, l: Launch) -> Arc<RunState> {
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
            // A limit of the run stops every child, also a background one.
            cancel: ext
                .limits
                .budget
                .as_ref()
                .map(|b| b.token().child_token())
                .unwrap_or_default(),
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
                // That runtime has one thread, the run's: its sockets,
                // timers and spawned tasks are served by that thread, which
                // stays inside the runtime while any child runs (it awaits
                // the children's results, or the run's end waits for them).
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
