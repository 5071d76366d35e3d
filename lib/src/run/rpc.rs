//! RPC mode: the assembled run served over pi's protocol
//! ([`crate::rpc::serve`] owns the protocol). This part wires what the
//! protocol needs from the run: the prompt preflight (extension commands,
//! `input` handlers, expansion) and the built-in `/mcp` command, the
//! extensions' UI through the client, `get_commands` (made again after a
//! session replacement), MCP's start-up notice, and `session_shutdown`
//! when stdin ends.

use crate::agent::Event;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::execute::Drive;
use super::tools::McpSelect;
use crate::agent::Agent;
use crate::cli::CliError;
use crate::extensions::runner::Runner;
use crate::format::AgentMessage;
use crate::resources::Resources;
use crate::rpc::{LocalFuture, Out, Preflight, RpcOptions};

/// The prompt preflight of print and JSON mode (extension commands,
/// `input` handlers, `/skill:` and template expansion).
struct RunPreflight<'a> {
    resources: &'a Resources,
    chat_only: bool,
    prog: &'static str,
    /// The built-in `/mcp` command: the servers and where it notifies.
    mcp: Option<McpCommand<'a>>,
}

struct McpCommand<'a> {
    mcp: Option<&'a Arc<crate::mcp::Mcp>>,
    agent_dir: &'a Path,
    ui: Arc<crate::rpc::ui::RpcUi>,
    select: &'a McpSelect,
    /// Becomes true once the start-up notice went out (or there is none):
    /// pi answers `/mcp` after it.
    noticed: tokio::sync::watch::Receiver<bool>,
}

impl McpCommand<'_> {
    /// `/mcp …` as pi answers it outside the TUI (the library decides);
    /// `false` when `text` is not `/mcp`.
    async fn run(&self, agent: &mut Agent, text: &str) -> bool {
        let Some(cmd) = crate::mcp::status::parse_command(text) else {
            return false;
        };
        let mut noticed = self.noticed.clone();
        let _ = noticed.wait_for(|done| *done).await;
        let ctx = crate::mcp::command::Context {
            mcp: self.mcp,
            agent_dir: self.agent_dir,
            ui: Some(self.ui.as_ref()),
            select: Some(self.select),
        };
        crate::mcp::command::run(&ctx, cmd, &mut agent.opts.tools).await;
        true
    }
}

impl Preflight for RunPreflight<'_> {
    fn prepare<'a>(
        &'a self,
        agent: &'a mut Agent,
        user: AgentMessage,
        emit: crate::agent::Emit<'a>,
    ) -> LocalFuture<'a, Option<AgentMessage>> {
        Box::pin(async move {
            if let (Some(c), AgentMessage::User(u)) = (&self.mcp, &user) {
                if c.run(agent, &u.content.joined_text("\n")).await {
                    return None;
                }
            }
            super::preflight::preflight(
                agent,
                user,
                self.resources,
                self.chat_only,
                self.prog,
                emit,
            )
            .await
        })
    }
}

/// Serves the protocol on stdin/stdout; the exit code.
pub(super) async fn serve(drive: &Drive<'_>, mut agent: Agent) -> Result<i32, CliError> {
    let asm = drive.asm;
    let (stopper, input) = crate::rpc::io::stdin_and_signals().map_err(CliError::failed)?;
    // A limit of the run (--max-cost, --timeout) ends the server as a
    // signal would, with exit 3; a reply cut at the token limit is said on
    // stderr.
    if let Some(b) = &asm.budget {
        let prog = asm.opts.prog;
        b.on_trip(move |l| {
            crate::cli::note(prog, &l.message());
            let _ = stopper.send(crate::rpc::io::Input::Signal(crate::cli::EXIT_LIMIT));
        });
        b.on_warning(move |w| crate::cli::warn(prog, w));
        b.arm_timeout();
    }
    agent.prepare_session().map_err(CliError::failed)?;
    let mcp_on = !asm.opts.no_mcp;
    // Made again after a session replacement (the extensions load anew).
    let command_list: Arc<dyn Fn() -> Vec<Value> + Send + Sync> = {
        let (runner, resources) = (Arc::clone(&asm.runner), asm.resources.clone());
        Arc::new(move || {
            let ext_commands: Vec<_> = runner
                .extensions()
                .iter()
                .flat_map(|e| e.commands().into_iter().map(|c| (e.path.clone(), c)))
                .collect();
            let mut commands = crate::rpc::command_list(&ext_commands, &resources);
            // pi's built-in extensions load after every other one: their
            // commands follow the extensions' (before templates and skills).
            if mcp_on {
                commands.insert(ext_commands.len(), crate::rpc::builtin_mcp_command());
            }
            commands
        })
    };
    let mut opts = RpcOptions {
        // Shared, not copied: the registry holds every known model.
        registry: asm.registry.clone().filter(|r| {
            r.model(&agent.opts.model.provider, &agent.opts.model.id)
                .is_some()
        }),
        agent_dir: asm.opts.agent_dir.clone(),
        auto_compaction: agent.auto_compaction,
        commands: command_list(),
        refresh_commands: Some(command_list),
        ui: None,
        shutdown_requested: Some({
            let runner = Arc::clone(&asm.runner);
            Arc::new(move || runner.shutdown_requested())
        }),
        finish_on_eof: asm.opts.drain,
    };
    let out = Out::stdout();
    let ui = crate::rpc::ui::RpcUi::new(out.clone());
    asm.runner
        .set_ui(Arc::clone(&ui) as Arc<dyn crate::extensions::ui::UiTransport>);
    opts.ui = Some(Arc::clone(&ui));
    // pi's start-up notice: once every server settled, one warning for
    // config errors and failed servers (before any prompt the client waits
    // to send; commands are read meanwhile).
    let (noticed_tx, noticed) = tokio::sync::watch::channel(asm.mcp.is_none());
    let notice = asm.mcp.as_ref().map(|m| {
        let (m, ui) = (Arc::clone(m), Arc::clone(&ui));
        tokio::spawn(async move {
            crate::mcp::status::settle(&m).await;
            if let Some(n) = crate::mcp::status::attention(&m) {
                ui.notice(&n, "warning");
            }
            noticed_tx.send_replace(true);
        })
    });
    let pre = RunPreflight {
        resources: &asm.resources,
        chat_only: asm.chat_only,
        prog: asm.opts.prog,
        mcp: mcp_on.then(|| McpCommand {
            mcp: asm.mcp.as_ref(),
            agent_dir: &asm.opts.agent_dir,
            ui: Arc::clone(&ui),
            select: asm.mcp_select.as_ref(),
            noticed,
        }),
    };
    // What extensions emitted while loading goes out first.
    agent.apply_pending(&mut |v: &Event<'_>| {
        out.record(v);
    });
    let code = crate::rpc::serve(&mut agent, opts, &pre, input, out.clone()).await;
    if let Some(n) = notice {
        n.abort();
    }
    if code == 0 {
        // Stdin closed or ctx.shutdown(): session_shutdown goes through the
        // agent while the session is open, so what its handlers append is
        // written (as in print mode); the runner does not send it again.
        let mut emit = |v: &Event<'_>| {
            out.record(v);
        };
        agent
            .notify_hooks(Runner::shutdown_event(), &mut emit)
            .await;
        agent.apply_pending(&mut emit);
    }
    Ok(code)
}
