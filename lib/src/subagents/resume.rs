//! `resume`: a finished (or dead) child continued in its own session (same
//! id and file) with the tools and prompt its `resourceSnapshot`
//! recorded and the new prompt as the task exactly; its model and
//! isolation cannot change.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::child::{child_model, child_options, child_setup, Launch};
use super::runs::{self, close_stale, Snapshot};
use super::runtime::*;
use super::tools::{RunInfo, RunStatus};
use crate::agent::hooks::{AgentExt, Delegation};
use crate::format::model::ThinkingLevel;
use crate::session::store::SessionStore;
use crate::tools::ToolContext;

impl Controller {
    /// Continues an existing child (pi-web's resume): same session id and
    /// file, the tools and prompt its snapshot recorded, the new prompt as
    /// the task exactly (no documents, no inherited context, no turn limit,
    /// no worktree). `model` and `isolation` cannot change on resume.
    pub(super) fn resume(
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
            Some((p, m)) => child_model(&self.ctx, &format!("{p}/{m}"))?,
            None => (ctx.model.clone(), ctx.api_key.clone()),
        };
        counted(parent, &model)?;
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
}
