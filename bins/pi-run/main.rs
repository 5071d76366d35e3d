//! `pi-run` — the agent loop as a command. Thin client of `pi_lib::agent`:
//! resolve the model, tools, prompt and session from flags and files, run
//! the prompts, print the answer or the event stream, exit with a code that
//! tells CI what happened.

mod cli;
mod input;
mod models;
mod sessions;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use pi_lib::agent::{Agent, AgentOptions};
use pi_lib::cli::{report, CliError, EXIT_INTERRUPTED, EXIT_OK};
use pi_lib::format::ContentBlock;
use pi_lib::prompt::{toolkit_docs, PromptInputs};
use pi_lib::settings::Settings;
use pi_lib::tools::Tool;
use tokio_util::sync::CancellationToken;

use cli::{Cli, Mode};

const PROG: &str = "pi-run";

fn main() {
    let cli = Cli::parse_from(cli::normalize_args(std::env::args_os()));
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => report(PROG, &e),
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// Reads a prompt flag value: a path to an existing file means its
/// contents, anything else is the text itself.
fn text_or_file(v: &str, cwd: &std::path::Path) -> Result<String, CliError> {
    let p = cwd.join(v);
    if !v.contains('\n') && v.len() < 4096 && p.is_file() {
        return std::fs::read_to_string(&p)
            .map_err(|e| CliError::input(format!("{}: {e}", p.display())));
    }
    Ok(v.to_string())
}

/// The active tools: defaults (or settings `defaultTools`), `--tools`,
/// `--no-tools`.
fn select_tools(cli: &Cli, settings: &Settings) -> Result<Vec<Arc<dyn Tool>>, CliError> {
    let defaults: Vec<String> = settings.default_tools().unwrap_or_else(|| {
        pi_lib::tools::DEFAULT_TOOLS
            .iter()
            .map(|s| s.to_string())
            .collect()
    });
    let mut names: Vec<String> = if cli.no_tools { Vec::new() } else { defaults };
    if let Some(list) = &cli.tools {
        let list: Vec<&str> = list
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        let modifiers = list
            .iter()
            .all(|s| s.starts_with('+') || s.starts_with('-'));
        if modifiers && !list.is_empty() {
            for m in list {
                let name = &m[1..];
                if m.starts_with('+') {
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_string());
                    }
                } else {
                    names.retain(|n| n != name);
                }
            }
        } else if list
            .iter()
            .any(|s| s.starts_with('+') || s.starts_with('-'))
        {
            return Err(CliError::input(
                "--tools: plain names and +name/-name entries cannot be mixed",
            ));
        } else {
            names = list.iter().map(|s| s.to_string()).collect();
        }
    }
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for n in names {
        match pi_lib::tools::builtin(&n) {
            Some(t) => {
                if !tools.iter().any(|x| x.definition().name == n) {
                    tools.push(Arc::from(t));
                }
            }
            None => pi_lib::cli::warn(PROG, &format!("unknown tool \"{n}\" ignored")),
        }
    }
    Ok(tools)
}

fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(what) = cli.generate {
        pi_lib::cli::generate(Cli::command(), what, &mut std::io::stdout().lock())?;
        return Ok(EXIT_OK);
    }
    let agent_dir = pi_lib::paths::agent_dir();
    let start_cwd =
        std::env::current_dir().map_err(|e| CliError::input(format!("current directory: {e}")))?;
    let trusted = cli.approve;
    let settings = Settings::load(&agent_dir, &start_cwd, trusted)
        .map_err(|e| CliError::input(e.to_string()))?;

    if let Some(search) = &cli.list_models {
        return models::list(&agent_dir, search);
    }
    let resolved = models::resolve(&cli, &agent_dir, &start_cwd, trusted)?;
    let tools = select_tools(&cli, &settings)?;

    // The session decides the working directory (a resumed session runs
    // where it was made, when that directory still exists).
    let mut store = sessions::open(&cli, &agent_dir, &start_cwd)?;
    let cwd = {
        let c = std::path::PathBuf::from(&store.session.header.cwd);
        if c.is_dir() {
            c
        } else {
            start_cwd.clone()
        }
    };
    let prompts = input::prompts(&cli, &cwd)?;
    if prompts.is_empty() {
        return Err(CliError::input("no prompt given")
            .with_hint("pass a message, an @file, or pipe text on stdin"));
    }
    if let Some(name) = &cli.name {
        sessions::name_session(&mut store, name)?;
    }

    let mut prompt = PromptInputs {
        cwd: cwd.display().to_string(),
        docs: Some(toolkit_docs()),
        ..Default::default()
    };
    prompt.custom_prompt = match &cli.system_prompt {
        Some(p) => Some(text_or_file(p, &cwd)?),
        None => pi_lib::prompt::system_md(&agent_dir, &cwd, trusted),
    };
    for a in &cli.append_system_prompt {
        prompt.append.push(text_or_file(a, &cwd)?);
    }
    if cli.append_system_prompt.is_empty() {
        if let Some(a) = pi_lib::prompt::append_system_md(&agent_dir, &cwd, trusted) {
            prompt.append.push(a);
        }
    }
    if !cli.no_context_files {
        let (files, errors) = pi_lib::prompt::context_files::discover(&agent_dir, &cwd);
        for (p, e) in errors {
            pi_lib::cli::warn(PROG, &format!("{}: {e}; skipped", p.display()));
        }
        prompt.context_files = files;
    }

    let cancel = CancellationToken::new();
    let opts = AgentOptions {
        model: resolved.model,
        api_key: resolved.api_key,
        thinking: resolved.thinking,
        tools,
        cwd,
        prompt,
        forced_prompt: None,
        max_turns: cli.max_turns,
        idle_timeout: Duration::from_secs(cli.idle_timeout.max(1)),
        retry: settings.retry(),
    };
    let json = cli.mode == Mode::Json;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::input(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let mut agent = Agent {
            opts,
            store,
            cancel: cancel.clone(),
        };
        let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        {
            let cancel = cancel.clone();
            let flag = Arc::clone(&interrupted);
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    cancel.cancel();
                }
            });
        }
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let mut write_failed = false;
        let mut emit = |v: &serde_json::Value| {
            if json && !write_failed {
                let ok = serde_json::to_writer(&mut out, v).is_ok()
                    && out.write_all(b"\n").is_ok()
                    && out.flush().is_ok();
                write_failed = !ok;
            }
        };
        if json {
            let header = agent.store.session.header.to_line();
            emit(&serde_json::from_str(&header).unwrap_or(serde_json::Value::Null));
        }
        agent.prepare_session().map_err(CliError::failed)?;
        let mut last = None;
        for user in prompts {
            let outcome = agent.run(user, &mut emit).await;
            last = outcome.last.clone();
            if interrupted.load(std::sync::atomic::Ordering::SeqCst) || outcome.aborted {
                let _ = out.flush();
                eprintln!("{PROG}: interrupted");
                return Ok(EXIT_INTERRUPTED);
            }
            if let Some(err) = outcome.error {
                let _ = out.flush();
                return Err(CliError::failed(err));
            }
        }
        if !json {
            if let Some(m) = &last {
                let texts: Vec<String> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text(t) => Some(t.text.clone()),
                        _ => None,
                    })
                    .collect();
                for t in texts {
                    let _ = writeln!(out, "{t}");
                }
            }
        }
        let _ = out.flush();
        Ok::<i32, CliError>(EXIT_OK)
    })
}
