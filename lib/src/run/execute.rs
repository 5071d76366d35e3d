//! From an [`Assembly`] to a running agent: the prompts are read (piped
//! stdin, `@file`s, `--then`), the session gets its name and tool pin, the
//! agent is built with the run's hooks, approval gates, queue and
//! compaction settings, the run's budget and output schema, and the mode's
//! driver takes over — the one-shot loop of text and JSON mode
//! ([`super::oneshot`]) or the RPC server ([`super::rpc`]). Whatever the outcome, the extension hosts and MCP
//! servers are stopped before the exit code is returned.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;

use super::tools::publish_tools;
use super::{input, session, Assembly, Mode};
use crate::agent::hooks::{AgentExt, Gate, Limits};
use crate::agent::{Agent, AgentOptions, Hooks};
use crate::cli::CliError;
use crate::extensions::gate::CommandGate;
use crate::format::AgentMessage;
use crate::session::compact::CompactionSettings;

/// What the mode's driver needs besides the agent.
pub(super) struct Drive<'a> {
    pub asm: &'a Assembly,
    /// The prompts, in order (empty in RPC mode).
    pub prompts: Vec<AgentMessage>,
    /// `--then` follow-ups.
    pub then: Vec<AgentMessage>,
}

impl Assembly {
    /// Runs the assembled run to its end and returns the exit code.
    pub fn execute(mut self, rt: &Runtime) -> Result<i32, CliError> {
        let result = self.start(rt);
        self.shutdown(rt);
        result
    }

    fn start(&mut self, rt: &Runtime) -> Result<i32, CliError> {
        let prog = self.opts.prog;
        let rpc_mode = self.opts.mode == Mode::Rpc;
        let prompts = if rpc_mode {
            input::check_rpc_args(&self.opts.messages, &self.opts.then)?;
            Vec::new()
        } else {
            input::prompts(
                &self.opts.messages,
                &self.cwd,
                prog,
                self.settings.auto_resize_images(),
            )?
        };
        let then = input::then_prompts(&self.opts.then);
        if prompts.is_empty() && !rpc_mode {
            return Err(CliError::input("no prompt given")
                .with_hint("pass a message, an @file, or pipe text on stdin"));
        }
        let agent = self.agent()?;
        let drive = Drive {
            asm: self,
            prompts,
            then,
        };
        if rpc_mode {
            rt.block_on(super::rpc::serve(&drive, agent))
        } else {
            rt.block_on(super::oneshot::run(&drive, agent))
        }
    }

    /// The agent of the run: the session named and pinned as the flags
    /// ask, the tools published to the extensions, the hooks, gates and
    /// compaction settings in place.
    fn agent(&mut self) -> Result<Agent, CliError> {
        let Some(resolved) = self.resolved.take() else {
            return Err(CliError::failed("no model was resolved for this run"));
        };
        let mut store = std::mem::replace(
            &mut self.store,
            crate::session::store::SessionStore::create("", None, None),
        );
        if let Some(name) = &self.opts.session.name {
            session::name_session(&mut store, name)?;
        }
        if let Some(tools) = &self.persist {
            let entry = store
                .session
                .new_tool_selection(Some(tools))
                .map_err(|e| CliError::input(format!("--tools: {e}")))?;
            store
                .append(entry)
                .map_err(|e| CliError::failed(format!("cannot write session: {e}")))?;
        }
        publish_tools(&self.runner, &self.tools);
        let compaction = CompactionSettings::from_settings(
            &self.settings,
            Some(&format!(
                "{}/{}",
                resolved.model.provider, resolved.model.id
            )),
        )
        .map_err(CliError::input)?;
        self.registry = resolved.registry.map(std::sync::Arc::new);
        let opts = AgentOptions {
            model: resolved.model,
            api_key: resolved.api_key,
            thinking: resolved.thinking,
            tools: self.tools.clone(),
            cwd: self.cwd.clone(),
            sections: std::mem::take(&mut self.sections),
            forced_prompt: None,
            // The run's turn limit travels in its budget (children too).
            max_turns: None,
            idle_timeout: match self.opts.idle_timeout {
                Some(0) => None,
                Some(secs) => Some(Duration::from_secs(secs)),
                None => self.settings.http_idle_timeout(),
            }
            // No limit: a deadline no response outlives.
            .unwrap_or(Duration::MAX),
            auto_resize_images: self.settings.auto_resize_images(),
            retry: self.settings.retry(),
        };
        let event_timeout = Duration::from_secs(self.opts.extension_timeout.unwrap_or(30));
        let gates: Vec<Arc<dyn Gate>> = self
            .opts
            .gates
            .iter()
            .map(|c| {
                Arc::new(CommandGate {
                    command: c.clone(),
                    timeout: event_timeout,
                }) as Arc<dyn Gate>
            })
            .collect();
        let ext = AgentExt {
            hooks: self
                .has_exts
                .then(|| Arc::clone(&self.runner) as Arc<dyn Hooks>),
            limits: Limits {
                gates,
                sandbox: Arc::clone(&self.sandbox),
                budget: self.budget.clone(),
                ..Limits::default()
            },
            late_tools: self.mcp.as_ref().map(|m| Arc::clone(&m.inbox)),
            ..AgentExt::default()
        };
        let queue = Arc::new(if self.opts.mode == Mode::Rpc {
            crate::agent::queue::MessageQueue::new(
                crate::agent::queue::DrainMode::from_setting(self.settings.str("steeringMode")),
                crate::agent::queue::DrainMode::from_setting(self.settings.str("followUpMode")),
            )
        } else {
            crate::agent::queue::MessageQueue::default()
        });
        self.runner.set_queue(Arc::clone(&queue));
        if let Some(c) = &self.subagents {
            c.set_parent_queue(Arc::clone(&queue));
        }
        let mut agent = Agent::builder(opts, store, self.cancel.clone())
            .ext(ext)
            .queue(queue)
            .compaction(compaction)
            .build();
        agent.response_schema = self.output.as_ref().map(|o| Arc::clone(&o.native));
        Ok(agent)
    }
}
