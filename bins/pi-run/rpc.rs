//! `pi-run --mode rpc`: wires the resolved run (agent, extensions,
//! resources, settings) into `pi_lib::rpc::serve`, which owns the protocol.

use std::path::Path;
use std::sync::Arc;

use pi_lib::agent::queue::{DrainMode, MessageQueue};
use pi_lib::agent::Agent;
use pi_lib::cli::CliError;
use pi_lib::format::AgentMessage;
use pi_lib::resources::Resources;
use pi_lib::rpc::{LocalFuture, Out, Preflight, RpcOptions};
use pi_lib::settings::Settings;
use serde_json::Value;

use crate::cli::Cli;
use crate::exts;

/// What the run resolved before the protocol starts.
pub struct Setup<'a> {
    pub agent_dir: &'a Path,
    pub settings: &'a Settings,
    pub resources: &'a Resources,
    pub chat_only: bool,
    pub runner: &'a Arc<exts::Runner>,
    /// The built-in subagents: background completions go to this run's queue.
    pub subagents: Option<&'a Arc<pi_lib::subagents::runtime::Controller>>,
    /// MCP is on (no `--no-mcp`): the built-in `/mcp` command exists.
    pub mcp_on: bool,
    /// The servers started for this run.
    pub mcp: Option<&'a Arc<pi_lib::mcp::Mcp>>,
    /// Which MCP tools the run's tool selection admits (after `/mcp
    /// reconnect` or a sign-in changed a server's tools).
    pub mcp_select: &'a McpSelect,
}

/// See [`Setup::mcp_select`].
pub type McpSelect =
    dyn Fn(&[Arc<dyn pi_lib::tools::Tool>]) -> Vec<Arc<dyn pi_lib::tools::Tool>> + Sync;

/// pi refuses prompts on the command line in RPC mode: they come on stdin.
pub fn check_args(cli: &Cli) -> Result<(), CliError> {
    if cli.messages.iter().any(|m| m.starts_with('@')) {
        return Err(CliError::input(
            "@file arguments are not supported in RPC mode",
        ));
    }
    if !cli.messages.is_empty() || !cli.then.is_empty() {
        return Err(CliError::input("--mode rpc takes no prompt arguments")
            .with_hint("send {\"type\":\"prompt\",\"message\":…} on stdin"));
    }
    Ok(())
}

/// The prompt preflight of print and JSON mode (extension commands,
/// `input` handlers, `/skill:` and template expansion).
struct BinPreflight<'a> {
    resources: &'a Resources,
    chat_only: bool,
    /// The built-in `/mcp` command: the servers and where it notifies.
    mcp: Option<McpCommand<'a>>,
}

struct McpCommand<'a> {
    mcp: Option<&'a Arc<pi_lib::mcp::Mcp>>,
    agent_dir: &'a Path,
    ui: Arc<pi_lib::rpc::ui::RpcUi>,
    select: &'a McpSelect,
    /// Becomes true once the start-up notice went out (or there is none):
    /// pi answers `/mcp` after it.
    noticed: tokio::sync::watch::Receiver<bool>,
}

impl McpCommand<'_> {
    /// `/mcp …` as pi answers it outside the TUI (the library decides);
    /// `false` when `text` is not `/mcp`.
    async fn run(&self, agent: &mut Agent, text: &str) -> bool {
        let Some(cmd) = pi_lib::mcp::status::parse_command(text) else {
            return false;
        };
        let mut noticed = self.noticed.clone();
        let _ = noticed.wait_for(|done| *done).await;
        let ctx = pi_lib::mcp::command::Context {
            mcp: self.mcp,
            agent_dir: self.agent_dir,
            ui: Some(self.ui.as_ref()),
            select: Some(self.select),
        };
        pi_lib::mcp::command::run(&ctx, cmd, &mut agent.opts.tools).await;
        true
    }
}

impl Preflight for BinPreflight<'_> {
    fn prepare<'a>(
        &'a self,
        agent: &'a mut Agent,
        user: AgentMessage,
        emit: &'a mut dyn FnMut(&Value),
    ) -> LocalFuture<'a, Option<AgentMessage>> {
        Box::pin(async move {
            if let (Some(c), AgentMessage::User(u)) = (&self.mcp, &user) {
                if c.run(agent, &u.content.joined_text("\n")).await {
                    return None;
                }
            }
            crate::preflight(agent, user, self.resources, self.chat_only, emit).await
        })
    }
}

/// Serves the protocol on stdin/stdout; the exit code.
pub async fn serve(
    setup: &Setup<'_>,
    mut agent: Agent,
    registry: Option<pi_lib::model::ModelRegistry>,
    hooks: Option<Arc<dyn pi_lib::agent::Hooks>>,
    gates: Vec<Arc<dyn pi_lib::agent::hooks::Gate>>,
) -> Result<i32, CliError> {
    agent.ext.hooks = hooks;
    agent.ext.limits.gates = gates;
    agent.queue = Arc::new(MessageQueue::new(
        DrainMode::from_setting(setup.settings.str("steeringMode")),
        DrainMode::from_setting(setup.settings.str("followUpMode")),
    ));
    setup.runner.set_queue(Arc::clone(&agent.queue));
    if let Some(c) = setup.subagents {
        c.set_parent_queue(Arc::clone(&agent.queue));
    }
    let input = pi_lib::rpc::io::stdin_and_signals().map_err(CliError::failed)?;
    agent.prepare_session().map_err(CliError::failed)?;
    // Made again after a session replacement (the extensions load anew).
    let command_list: Arc<dyn Fn() -> Vec<Value> + Send + Sync> = {
        let (runner, resources, mcp_on) = (
            Arc::clone(setup.runner),
            setup.resources.clone(),
            setup.mcp_on,
        );
        Arc::new(move || {
            let ext_commands: Vec<_> = runner
                .extensions()
                .iter()
                .flat_map(|e| e.commands().into_iter().map(|c| (e.path.clone(), c)))
                .collect();
            let mut commands = pi_lib::rpc::command_list(&ext_commands, &resources);
            // pi's built-in extensions load after every other one: their
            // commands follow the extensions' (before templates and skills).
            if mcp_on {
                commands.insert(ext_commands.len(), pi_lib::rpc::builtin_mcp_command());
            }
            commands
        })
    };
    let mut opts = RpcOptions {
        registry: registry
            .filter(|r| {
                r.all()
                    .iter()
                    .any(|m| m.provider == agent.opts.model.provider && m.id == agent.opts.model.id)
            })
            .map(Arc::new),
        agent_dir: setup.agent_dir.to_path_buf(),
        auto_compaction: agent.auto_compaction,
        commands: command_list(),
        refresh_commands: Some(command_list),
        ui: None,
        shutdown_requested: Some({
            let runner = Arc::clone(setup.runner);
            Arc::new(move || runner.shutdown_requested())
        }),
    };
    let out = Out::stdout();
    let ui = pi_lib::rpc::ui::RpcUi::new(out.clone());
    setup
        .runner
        .set_ui(Arc::clone(&ui) as Arc<dyn pi_lib::extensions::ui::UiTransport>);
    opts.ui = Some(Arc::clone(&ui));
    // pi's start-up notice: once every server settled, one warning for
    // config errors and failed servers (before any prompt the client waits
    // to send; commands are read meanwhile).
    let (noticed_tx, noticed) = tokio::sync::watch::channel(setup.mcp.is_none());
    let notice = setup.mcp.map(|m| {
        let (m, ui) = (Arc::clone(m), Arc::clone(&ui));
        tokio::spawn(async move {
            pi_lib::mcp::status::settle(&m).await;
            if let Some(n) = pi_lib::mcp::status::attention(&m) {
                ui.notice(&n, "warning");
            }
            noticed_tx.send_replace(true);
        })
    });
    let pre = BinPreflight {
        resources: setup.resources,
        chat_only: setup.chat_only,
        mcp: setup.mcp_on.then(|| McpCommand {
            mcp: setup.mcp,
            agent_dir: setup.agent_dir,
            ui: Arc::clone(&ui),
            select: setup.mcp_select,
            noticed,
        }),
    };
    // What extensions emitted while loading goes out first.
    agent.apply_pending(&mut |v: &Value| {
        out.record(v);
    });
    let code = pi_lib::rpc::serve(&mut agent, opts, &pre, input, out.clone()).await;
    if let Some(n) = notice {
        n.abort();
    }
    if code == 0 {
        // Stdin closed or ctx.shutdown(): session_shutdown goes through the
        // agent while the session is open, so what its handlers append is
        // written (as in print mode); the runner does not send it again.
        let mut emit = |v: &Value| {
            out.record(v);
        };
        agent
            .notify_hooks(exts::Runner::shutdown_event(), &mut emit)
            .await;
        agent.apply_pending(&mut emit);
    }
    Ok(code)
}
