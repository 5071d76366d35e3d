//! `pi-resources` — resource discovery and project trust. Thin client of
//! `pi_lib::trust` (the decision) and `pi_lib::resources` (what applies):
//! parse arguments, decide trust, discover, print records.

mod agents_cmd;
mod cli;
mod mcp_cmd;
mod out;
mod trust_cmd;

use std::path::PathBuf;

use clap::CommandFactory;
use pi_lib::cli::{report, CliError, EXIT_OK};
use pi_lib::format::resources::ResourceDiagnostic;
use pi_lib::resources::{discover, discover_chat_only, DiscoverOptions};
use pi_lib::settings::Settings;
use pi_lib::tools::select;
use pi_lib::trust::CliTrust;

use cli::{Cli, Command};

const PROG: &str = "pi-resources";

fn main() {
    let cli: Cli = pi_lib::cli::parse_or_exit(PROG, cli::rewrite_args(std::env::args_os()));
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) if e.code == 0 => 0,
        Err(e) => report(PROG, &e),
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(what) = cli.generate {
        let mut stdout = pi_lib::cli::Stdout::new();
        pi_lib::cli::generate(Cli::command(), what, &mut stdout).map_err(out::io_err)?;
        stdout.finish()?;
        return Ok(EXIT_OK);
    }
    let (agents, mcp_cmd) = match cli.command {
        Some(Command::Trust(args)) => return trust_cmd::run(args, cli.format),
        Some(Command::Agents(args)) => (Some(args), None),
        Some(Command::Mcp(args)) => (None, Some(args)),
        None => (None, None),
    };
    let cwd = resolve_cwd(cli.cwd.as_deref())?;
    let agent_dir = pi_lib::paths::agent_dir();
    let cli_trust = CliTrust::from_flags(cli.approve, cli.no_approve);
    let outcome = pi_lib::trust::decide(&cwd, &agent_dir, cli_trust, None, false)
        .map_err(|e| CliError::input(e.to_string()))?;
    if let Some(args) = agents {
        return agents_cmd::run(args, cli.format, &agent_dir, &cwd, outcome.trusted);
    }
    if let Some(args) = mcp_cmd {
        return mcp_cmd::run(args, &agent_dir, &cwd, outcome.trusted);
    }
    let trust = outcome.record();
    let bad_settings = |e: pi_lib::settings::SettingsError| {
        CliError::input(e.to_string()).with_hint("fix or remove the file; it is never rewritten")
    };
    // The tool set, by the library's one resolver (as pi-run decides it).
    let settings = Settings::load(&agent_dir, &cwd, outcome.trusted).map_err(bad_settings)?;
    let mut available = select::builtin_available();
    available.extend(
        pi_lib::subagents::runtime::described_tools(&agent_dir, &cwd, outcome.trusted)
            .iter()
            .map(|t| select::AvailableTool::extension(&t.name(), true)),
    );
    let tool_set = select::resolve(
        &cli.tool_args.flags(),
        &settings.default_tools(),
        None,
        &available,
    )
    .map_err(|e| CliError::input(e.to_string()))?;
    for w in &tool_set.warnings {
        pi_lib::cli::warn(PROG, w);
    }
    let mut opts = DiscoverOptions {
        cwd,
        agent_dir,
        home: std::env::var_os("HOME").map(PathBuf::from),
        ..Default::default()
    };
    cli.resource_args.apply(&mut opts);
    let res = if tool_set.chat_only {
        discover_chat_only(&opts)
    } else {
        discover(&opts, outcome.trusted)
    }
    .map_err(bad_settings)?;
    let mut res = res;
    if cli.inspect && !res.extensions.is_empty() {
        inspect(
            &mut res,
            &settings,
            outcome.trusted,
            &opts.agent_dir,
            &opts.cwd,
        )?;
    }
    // The MCP servers (started, listed and stopped with --inspect).
    let (mcp, mcp_errors) = if tool_set.chat_only {
        (Vec::new(), Vec::new())
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| CliError::input(format!("cannot start the runtime: {e}")))?
            .block_on(pi_lib::mcp::list(
                &opts.agent_dir,
                &opts.cwd,
                outcome.trusted,
                cli.inspect,
            ))
    };
    res.diagnostics
        .extend(mcp_errors.into_iter().map(|message| ResourceDiagnostic {
            kind: "invalid".into(),
            resource_type: "mcp".into(),
            message,
            path: None,
            winner: None,
            name: None,
        }));
    out::print(
        &trust,
        &tool_set.record(),
        &res,
        &mcp,
        pi_lib::cli::resolve_format(cli.format),
    )
}

/// Starts the extensions `res` lists (already filtered by trust), records
/// what each registered, and stops them.
fn inspect(
    res: &mut pi_lib::resources::Resources,
    settings: &Settings,
    trusted: bool,
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
) -> Result<(), CliError> {
    use pi_lib::extensions::{loader, runner};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::input(format!("cannot start the runtime: {e}")))?;
    let cwd = cwd.to_path_buf();
    let cancel = tokio_util::sync::CancellationToken::new();
    let settings_value = serde_json::Value::Object(settings.values.clone());
    let r = runner::Runner::new(
        runner::RunnerConfig {
            mode: "print".into(),
            records: false,
            cwd: cwd.display().to_string(),
            event_timeout: std::time::Duration::from_secs(30),
            prog: PROG.into(),
            settings: settings_value.clone(),
        },
        cancel,
    );
    let opts = loader::LoadOptions {
        prog: PROG.into(),
        cwd,
        agent_dir: agent_dir.to_path_buf(),
        mode: "print".into(),
        session_file: None,
        session_id: String::new(),
        settings: settings_value,
        handshake: std::time::Duration::from_secs(10),
    };
    // A listing shows what did load; what did not is a warning here (a
    // run fails on it).
    for f in rt.block_on(loader::load(
        &r,
        &res.extensions,
        "full",
        Some(trusted),
        &opts,
    )) {
        pi_lib::cli::warn(PROG, &f.to_string());
    }
    // What they register in session_start counts too (pi lists commands
    // and tools after it).
    if !r.extensions().is_empty() {
        // An in-memory session, as `pi --no-session` has one.
        pi_lib::agent::Hooks::set_state(
            r.as_ref(),
            pi_lib::agent::hooks::AgentSnapshot {
                session_id: pi_lib::session::ids::new_session_id(),
                thinking_level: "off".into(),
                idle: true,
                ..Default::default()
            },
        );
        rt.block_on(r.session_start());
        r.absorb_more();
    }
    for info in r.extensions() {
        let names = |v: Vec<String>| serde_json::Value::from(v);
        let reg = serde_json::json!({
            "tools": names(info.tools().iter().map(|t| t.name.clone()).collect()),
            "commands": names(info.commands().iter().map(|c| c.name.clone()).collect()),
            "flags": names(info.reg.flags.iter().map(|f| f.name.clone()).collect()),
        });
        if let Some(e) = res
            .extensions
            .iter_mut()
            .find(|e| e.path.display().to_string() == info.path)
        {
            e.registered = Some(reg);
        }
    }
    rt.block_on(r.shutdown());
    Ok(())
}

/// `--cwd` made absolute and real; the current directory by default.
fn resolve_cwd(dir: Option<&std::path::Path>) -> Result<PathBuf, CliError> {
    let here = std::env::current_dir()
        .map_err(|e| CliError::input(format!("cannot read the current directory: {e}")))?;
    let Some(dir) = dir else { return Ok(here) };
    let p = here.join(dir);
    match std::fs::canonicalize(&p) {
        Ok(real) if real.is_dir() => Ok(real),
        Ok(_) => Err(CliError::input(format!(
            "--cwd {}: not a directory",
            p.display()
        ))),
        Err(e) => Err(CliError::input(format!("--cwd {}: {e}", p.display()))),
    }
}
