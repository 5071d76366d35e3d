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
use pi_lib::format::AgentMessage;
use pi_lib::format::ContentBlock;
use pi_lib::prompt::expand::{expand_input, NoHooks};
use pi_lib::prompt::plan::{plan_sections, PlanOptions};
use pi_lib::prompt::toolkit_docs;
use pi_lib::resources::{DiscoverOptions, Resources};
use pi_lib::session::tool_selection::RunSelection;
use pi_lib::settings::Settings;
use pi_lib::tools::Tool;
use pi_lib::trust::CliTrust;
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
        return pi_lib::resources::text::read(&p)
            .map_err(|e| CliError::input(format!("{}: {e}", p.display())));
    }
    Ok(v.to_string())
}

/// The tool names of a run: the resolved selection (session pin or this
/// run's request), else the defaults (or settings `defaultTools`) changed
/// by `+name` / `-name` entries and `--no-tools`.
fn tool_names(
    cli: &Cli,
    settings: &Settings,
    selection: &RunSelection,
) -> Result<Vec<String>, CliError> {
    if let Some(t) = &selection.tools {
        return Ok(t.clone());
    }
    let mut names: Vec<String> = if cli.no_tools {
        Vec::new()
    } else {
        settings.default_tools().unwrap_or_else(|| {
            pi_lib::tools::DEFAULT_TOOLS
                .iter()
                .map(|s| s.to_string())
                .collect()
        })
    };
    for m in modifier_entries(cli)? {
        let name = &m[1..];
        if m.starts_with('+') {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        } else {
            names.retain(|n| n != name);
        }
    }
    Ok(names)
}

/// `--tools` entries: `Some(plain names)` is a selection; `+x`/`-x` only
/// modify the defaults. Mixing both is an error, as in pi.
fn tools_request(cli: &Cli) -> Result<Option<Vec<String>>, CliError> {
    if cli.chat_only {
        return Ok(Some(Vec::new()));
    }
    let Some(list) = &cli.tools else {
        return Ok(None);
    };
    let list: Vec<&str> = list
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    let modifiers = list
        .iter()
        .filter(|s| s.starts_with('+') || s.starts_with('-'))
        .count();
    if modifiers > 0 && modifiers < list.len() {
        return Err(CliError::input(
            "--tools: plain names and +name/-name entries cannot be mixed",
        ));
    }
    if modifiers > 0 {
        return Ok(None);
    }
    Ok(Some(list.iter().map(|s| s.to_string()).collect()))
}

fn modifier_entries(cli: &Cli) -> Result<Vec<String>, CliError> {
    if tools_request(cli)?.is_some() {
        return Ok(Vec::new());
    }
    Ok(cli
        .tools
        .iter()
        .flatten()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect())
}

fn build_tools(names: &[String]) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for n in names {
        match pi_lib::tools::builtin(n) {
            Some(t) => {
                if !tools.iter().any(|x| &x.definition().name == n) {
                    tools.push(Arc::from(t));
                }
            }
            None => pi_lib::cli::warn(PROG, &format!("unknown tool \"{n}\" ignored")),
        }
    }
    tools
}

/// Sections from `--system-from`: `pi-prompt system` JSONL, or plain text
/// as the whole prompt.
fn sections_from(src: &str) -> Result<Vec<(String, String)>, CliError> {
    let text = if src == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| CliError::input(format!("stdin: {e}")))?;
        s
    } else {
        std::fs::read_to_string(src).map_err(|e| CliError::input(format!("{src}: {e}")))?
    };
    let mut sections = Vec::new();
    let mut jsonl = true;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) if v.get("type").is_some() => {
                if v["type"] == "section" {
                    let (Some(name), Some(body)) = (v["name"].as_str(), v["text"].as_str()) else {
                        return Err(CliError::input(format!(
                            "{src}:{}: section record needs name and text",
                            i + 1
                        )));
                    };
                    sections.push((name.to_string(), body.to_string()));
                }
            }
            _ => {
                jsonl = false;
                break;
            }
        }
    }
    if !jsonl {
        return Ok(if text.is_empty() {
            Vec::new()
        } else {
            vec![("preamble".to_string(), text)]
        });
    }
    Ok(sections)
}

fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(what) = cli.generate {
        pi_lib::cli::generate(Cli::command(), what, &mut std::io::stdout().lock())?;
        return Ok(EXIT_OK);
    }
    let agent_dir = pi_lib::paths::agent_dir();
    let start_cwd =
        std::env::current_dir().map_err(|e| CliError::input(format!("current directory: {e}")))?;
    if let Some(search) = &cli.list_models {
        return models::list(&agent_dir, search);
    }

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

    // Seed 000: the tool policy is resolved from the session before any
    // resource loads, so an extension or skill never touches a Chat-only run.
    let requested = tools_request(&cli)?;
    let selection = store
        .session
        .run_selection(requested.as_deref())
        .map_err(|e| CliError::input(format!("--tools: {e}")))?;
    if let (Some(req), Some(pinned)) = (&requested, &selection.tools) {
        if selection.from != "request" && req != pinned {
            pi_lib::cli::warn(
                PROG,
                &format!(
                    "this session pins its tools ({}); the requested selection is ignored (change it with pi-session select-tool)",
                    if pinned.is_empty() { "Chat only".to_string() } else { pinned.join(", ") }
                ),
            );
        }
    }

    // Project trust (non-interactive: pi-run never prompts), then settings
    // and resources through the same library code as pi-resources.
    let cli_trust = if cli.approve {
        CliTrust::Approve
    } else if cli.no_approve {
        CliTrust::NoApprove
    } else {
        CliTrust::Unset
    };
    let trusted = match pi_lib::trust::decide(&cwd, &agent_dir, cli_trust, None, false) {
        Ok(o) => o.trusted,
        Err(e) => return Err(CliError::input(e.to_string())),
    };
    let settings =
        Settings::load(&agent_dir, &cwd, trusted).map_err(|e| CliError::input(e.to_string()))?;
    let resolved = models::resolve(&cli, &agent_dir, &settings)?;
    let tools = build_tools(&tool_names(&cli, &settings, &selection)?);

    let mut discover = DiscoverOptions::for_cwd(&cwd);
    discover.agent_dir = agent_dir.clone();
    discover.no_context_files = cli.no_context_files || !selection.context_files;
    let resources = if selection.chat_only {
        // Only context files: no skills, templates, extensions or themes.
        discover.no_extensions = true;
        discover.no_skills = true;
        discover.no_prompt_templates = true;
        discover.no_themes = true;
        let mut r = pi_lib::resources::discover(&discover, false)
            .map_err(|e| CliError::input(e.to_string()))?;
        r.system_prompt = None;
        r.append_system_prompt.clear();
        r
    } else {
        discover.skills = cli.skill.clone();
        discover.prompt_templates = cli.prompt_template.clone();
        discover.no_skills = cli.no_skills;
        discover.no_prompt_templates = cli.no_prompt_templates;
        pi_lib::resources::discover(&discover, trusted)
            .map_err(|e| CliError::input(e.to_string()))?
    };
    for d in &resources.diagnostics {
        if d.kind != "collision" {
            pi_lib::cli::warn(PROG, &d.message);
        }
    }

    let sections = if let Some(exact) = &selection.exact_prompt {
        if exact.is_empty() {
            Vec::new()
        } else {
            vec![("preamble".to_string(), exact.clone())]
        }
    } else if let Some(src) = &cli.system_from {
        sections_from(src)?
    } else {
        let mut append = Vec::new();
        for a in &cli.append_system_prompt {
            append.push(text_or_file(a, &cwd)?);
        }
        let plan = PlanOptions {
            cwd: cwd.display().to_string(),
            tools: pi_lib::agent::prompt_tools(&tools),
            system_prompt: cli
                .system_prompt
                .as_deref()
                .map(|p| text_or_file(p, &cwd))
                .transpose()?,
            append,
            docs: Some(toolkit_docs()),
            chat_only: selection.chat_only,
        };
        plan_sections(&plan, &resources).map_err(CliError::input)?
    };

    let prompts = input::prompts(&cli, &cwd)?;
    if prompts.is_empty() {
        return Err(CliError::input("no prompt given")
            .with_hint("pass a message, an @file, or pipe text on stdin"));
    }
    let prompts = expand_prompts(prompts, &resources, selection.chat_only);
    if let Some(name) = &cli.name {
        sessions::name_session(&mut store, name)?;
    }
    if let Some(tools) = &selection.persist {
        let entry = store
            .session
            .new_tool_selection(Some(tools))
            .map_err(|e| CliError::input(format!("--tools: {e}")))?;
        store
            .append(entry)
            .map_err(|e| CliError::failed(format!("cannot write session: {e}")))?;
    }

    let cancel = CancellationToken::new();
    let opts = AgentOptions {
        model: resolved.model,
        api_key: resolved.api_key,
        thinking: resolved.thinking,
        tools,
        cwd,
        sections,
        forced_prompt: None,
        max_turns: cli.max_turns,
        idle_timeout: Duration::from_secs(cli.idle_timeout.max(1)),
        auto_resize_images: settings.auto_resize_images(),
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
        // SIGINT is taken over right here, before the first request, so an
        // early Ctrl-C still saves the session and exits 130.
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
            Ok(mut sigint) => {
                let cancel = cancel.clone();
                let flag = Arc::clone(&interrupted);
                tokio::spawn(async move {
                    if sigint.recv().await.is_some() {
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                        cancel.cancel();
                    }
                });
            }
            Err(e) => pi_lib::cli::warn(PROG, &format!("cannot handle SIGINT: {e}")),
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

/// `/skill:name` and `/template` expansion of each prompt (not in Chat
/// only, which loads no skills or templates).
fn expand_prompts(
    prompts: Vec<AgentMessage>,
    resources: &Resources,
    chat_only: bool,
) -> Vec<AgentMessage> {
    if chat_only {
        return prompts;
    }
    prompts
        .into_iter()
        .map(|m| match m {
            AgentMessage::User(mut u) => {
                let text = u.content.joined_text("\n");
                let e = expand_input(&text, &resources.skills, &resources.prompts, &mut NoHooks);
                if let Some(w) = &e.warning {
                    pi_lib::cli::warn(PROG, w);
                }
                if let Some(t) = e.text {
                    if t != text {
                        u.content =
                            pi_lib::format::UserContent::Blocks(vec![ContentBlock::text(t)]);
                    }
                }
                AgentMessage::User(u)
            }
            other => other,
        })
        .collect()
}
