//! `pi-run` — the agent loop as a command. It parses the flags into
//! [`pi_lib::run::RunOptions`] and lets the library assemble and drive the
//! run ([`pi_lib::run`]); the exit code tells CI what happened.

mod cli;

use std::io::Write;

use clap::CommandFactory;
use pi_lib::cli::{report, stdout_error, CliError, EXIT_OK};
use pi_lib::run::{self, ModelChoice, RunOptions, SessionChoice};
use pi_lib::session::open::SessionFlags;
use pi_lib::trust::CliTrust;

use cli::{Cli, Mode};

const PROG: &str = "pi-run";

fn main() {
    let mut command = Cli::command();
    // pi's multi-letter short options (`-nt`, `-xt`, `-ne`, …) are
    // rewritten before clap sees them.
    let (args, ext_flags) = pi_lib::cli::split_unknown_options(
        pi_lib::cli::rewrite_pi_aliases(std::env::args_os(), &command),
        &command,
    );
    let cli: Cli = pi_lib::cli::parse_with_or_exit(PROG, &mut command, args.clone());
    let code = match start(cli, &args, ext_flags) {
        Ok(code) => code,
        Err(e) => report(PROG, &e),
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

fn start(
    cli: Cli,
    args: &[std::ffi::OsString],
    ext_flags: Vec<pi_lib::cli::Pending>,
) -> Result<i32, CliError> {
    if let Some(what) = cli.generate {
        let mut out = pi_lib::cli::Stdout::new();
        pi_lib::cli::generate(Cli::command(), what, &mut out).map_err(stdout_error)?;
        out.finish()?;
        return Ok(EXIT_OK);
    }
    let cwd = match &cli.cwd {
        Some(dir) => run::enter_dir(dir)?,
        None => std::env::current_dir()
            .map_err(|e| CliError::input(format!("current directory: {e}")))?,
    };
    if let Some((what, instead)) = cli.interactive_only() {
        return Err(CliError::input(format!(
            "{what} is interactive only; pi-run has no interactive UI"
        ))
        .with_hint(instead));
    }
    if cli.drain && cli.mode != Mode::Rpc {
        return Err(CliError::input("--drain applies to --mode rpc only"));
    }
    if let Some(search) = &cli.list_models {
        return run::model::list(&pi_lib::paths::agent_dir(), search);
    }
    if let Some(args) = &cli.export {
        return run::session::export(args, &cwd);
    }
    let mode = match cli.mode {
        Mode::Text => run::Mode::Text,
        Mode::Json => run::Mode::Json,
        Mode::Rpc => run::Mode::Rpc,
    };
    let mut opts = RunOptions::new(PROG, mode, cwd);
    opts.session = SessionChoice {
        flags: SessionFlags {
            session: cli.session,
            fork: cli.fork,
            session_id: cli.session_id,
            continue_: cli.continue_,
            no_session: cli.no_session,
            session_dir: cli.session_dir,
        },
        name: cli.name,
    };
    opts.trust = CliTrust::from_flags(cli.approve, cli.no_approve);
    opts.model = ModelChoice {
        provider: cli.provider,
        model: cli.model,
        thinking: cli.thinking,
        api_key: cli.api_key,
        scope: cli.models,
    };
    opts.tool_flags = cli.tool_args.flags();
    opts.resource_args = cli.resource_args;
    opts.system_prompt = cli.system_prompt;
    opts.append_system_prompt = cli.append_system_prompt;
    opts.system_from = cli.system_from;
    opts.no_mcp = cli.no_mcp;
    opts.max_turns = cli.max_turns;
    opts.idle_timeout = cli.idle_timeout;
    opts.extension_timeout = cli.extension_timeout;
    opts.gates = cli.gate;
    opts.message_positions = run::extflags::positions(args, &cli.messages);
    opts.messages = cli.messages;
    opts.then = cli.then;
    opts.drain = cli.drain;
    opts.sandbox = pi_lib::sandbox::CliSandbox {
        mode: cli.sandbox.map(cli::SandboxMode::mode),
        network: cli.sandbox_network,
        env_keep: cli.env_keep,
    };
    opts.ext_flags = ext_flags;
    opts.max_cost = cli.max_cost;
    opts.timeout = cli.timeout;
    opts.output_schema = cli.output_schema;
    opts.output_retries = cli.output_retries;
    opts.output_last_message = cli.output_last_message;
    opts.verbose = cli.verbose;
    run::run(opts)
}
