//! `pi-run` — the agent loop as a command. Thin client of `pi_lib::agent`:
//! resolve the model, tools, prompt and session from flags and files, run
//! the prompts, print the answer or the event stream, exit with a code that
//! tells CI what happened.

mod cli;
mod extflags;
mod input;
mod models;
mod rpc;
mod sessions;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use clap::CommandFactory;
use pi_lib::agent::{Agent, AgentOptions};
use pi_lib::cli::{report, stdout_error, CliError, EXIT_OK};
use pi_lib::format::AgentMessage;
use pi_lib::format::ContentBlock;
use pi_lib::interrupt::{StopReason, Stopper};
use pi_lib::prompt::expand::{expand_input, NoHooks};
use pi_lib::prompt::plan::{plan_sections, PlanOptions};
use pi_lib::prompt::toolkit_docs;
use pi_lib::resources::{DiscoverOptions, Resources};
use pi_lib::settings::Settings;
use pi_lib::tools::select;
use pi_lib::trust::CliTrust;
use tokio_util::sync::CancellationToken;

use cli::{Cli, Mode};
use pi_lib::extensions::gate as exts_gate;
use pi_lib::extensions::loader as exts_loader;
use pi_lib::extensions::runner as exts_runner;

/// The extension machinery pi-run wires in.
mod exts {
    pub use super::exts_gate::CommandGate;
    pub use super::exts_loader::{first_pass, load, tools, LoadOptions};
    pub use super::exts_runner::{Runner, RunnerConfig};
}

const PROG: &str = "pi-run";

fn main() {
    let (args, ext_flags) =
        extflags::split(cli::normalize_args(std::env::args_os()), &Cli::command());
    let cli: Cli = pi_lib::cli::parse_or_exit(PROG, args.clone());
    let code = match run(cli, &args, &ext_flags) {
        Ok(code) => code,
        Err(e) => report(PROG, &e),
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
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

fn run(
    mut cli: Cli,
    args: &[std::ffi::OsString],
    ext_flags: &[extflags::Pending],
) -> Result<i32, CliError> {
    if let Some(what) = cli.generate {
        let mut out = pi_lib::cli::Stdout::new();
        pi_lib::cli::generate(Cli::command(), what, &mut out).map_err(stdout_error)?;
        out.finish()?;
        return Ok(EXIT_OK);
    }
    let agent_dir = pi_lib::paths::agent_dir();
    let start_cwd =
        std::env::current_dir().map_err(|e| CliError::input(format!("current directory: {e}")))?;
    if let Some((what, instead)) = cli.interactive_only() {
        return Err(CliError::input(format!(
            "{what} is interactive only; pi-run has no interactive UI"
        ))
        .with_hint(instead));
    }
    if let Some(search) = &cli.list_models {
        return models::list(&agent_dir, search);
    }
    if let Some(args) = &cli.export {
        return sessions::export(args, &start_cwd);
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

    // Seed 000: the persisted tool policy is read from the session before
    // any resource loads, so an extension or skill never touches a
    // Chat-only run.
    let selection = store.session.run_selection();

    // Project trust (non-interactive: pi-run never prompts), then settings
    // and resources through the same library code as pi-resources.
    let cli_trust = if cli.approve {
        CliTrust::Approve
    } else if cli.no_approve {
        CliTrust::NoApprove
    } else {
        CliTrust::Unset
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::input(format!("cannot start the runtime: {e}")))?;
    let cancel = CancellationToken::new();
    let json = cli.mode == Mode::Json;
    let rpc_mode = cli.mode == Mode::Rpc;
    let mode_name = match cli.mode {
        Mode::Json => "json",
        Mode::Rpc => "rpc",
        Mode::Text => "print",
    };
    let event_timeout = Duration::from_secs(cli.extension_timeout.unwrap_or(30));
    // Untrusted settings: what the first extension pass and the first tool
    // resolution see (read once).
    let untrusted_settings =
        Settings::load(&agent_dir, &cwd, false).map_err(|e| CliError::input(e.to_string()))?;
    let mut discover = DiscoverOptions::for_cwd(&cwd);
    discover.agent_dir = agent_dir.clone();
    cli.resource_args.apply(&mut discover);
    discover.no_context_files |= !selection.context_files;
    // Seed 002's first pass: only CLI and user extensions start before the
    // trust decision (they may answer project_trust).
    let runner = exts::Runner::new(
        exts::RunnerConfig {
            mode: mode_name.into(),
            // pi 1.6.0 prints extension errors to stderr in --mode json
            // too; RPC clients get `extension_error` records.
            records: rpc_mode,
            cwd: cwd.display().to_string(),
            event_timeout,
            prog: PROG.into(),
            settings: serde_json::Value::Object(untrusted_settings.values.clone()),
        },
        cancel.clone(),
    );
    runner.set_agent_dir(agent_dir.clone());
    let load_opts = |settings: &Settings| exts::LoadOptions {
        prog: PROG.into(),
        cwd: cwd.clone(),
        agent_dir: agent_dir.clone(),
        mode: mode_name.into(),
        session_file: store.path().map(|p| p.display().to_string()),
        session_id: store.session.id().to_string(),
        settings: serde_json::Value::Object(settings.values.clone()),
        // Start-up (Node, TypeScript, a busy machine) gets at least 10 s even
        // when events are held to a shorter limit.
        handshake: Duration::from_secs(cli.extension_timeout.unwrap_or(10).max(10)),
    };
    let chat_only_first = select::resolve(
        &cli.tool_args.flags(),
        &untrusted_settings.default_tools(),
        selection.pinned().as_ref(),
        &select::builtin_available(),
    )
    .map(|t| t.chat_only)
    .unwrap_or(true);
    let mut loaded_first: Vec<std::path::PathBuf> = Vec::new();
    if !chat_only_first {
        if let Ok(first) = pi_lib::resources::discover(&discover, false) {
            let list: Vec<_> = first
                .extensions
                .into_iter()
                .filter(exts::first_pass)
                .collect();
            if !list.is_empty() {
                loaded_first = list.iter().map(|e| e.path.clone()).collect();
                let opts = load_opts(&untrusted_settings);
                rt.block_on(exts::load(&runner, &list, "trust", None, &opts));
            }
        }
    }
    let mut trust_hook =
        |dir: &std::path::Path| rt.block_on(runner.project_trust(&dir.display().to_string()));
    let asks = pi_lib::agent::Hooks::handles(runner.as_ref(), "project_trust");
    let trust = pi_lib::trust::decide(
        &cwd,
        &agent_dir,
        cli_trust,
        asks.then_some(&mut trust_hook as pi_lib::trust::TrustHook<'_>),
        false,
    )
    .map_err(|e| CliError::input(e.to_string()))?;
    let trusted = trust.trusted;
    // Never silent about trust: one line on stderr (and a `trust` record
    // in --mode json) whenever the project has protected resources.
    let trust_record = trust.notice(&cwd).map(|line| {
        pi_lib::cli::note(PROG, &line);
        serde_json::to_value(pi_lib::format::resources::ResourceRecord::Trust(
            trust.record(),
        ))
        .unwrap_or(serde_json::Value::Null)
    });
    let settings =
        Settings::load(&agent_dir, &cwd, trusted).map_err(|e| CliError::input(e.to_string()))?;
    // A continued session keeps its model and thinking level (pi 1.6.0).
    let continued = !store.session.branch().is_empty();
    let restore = continued.then(|| {
        let ctx = store.session.context(None);
        let has_level = store.session.branch().into_iter().any(|i| {
            matches!(
                store.session.entries[i],
                pi_lib::format::Entry::ThinkingLevelChange(_)
            )
        });
        models::Restore {
            model: ctx.model.clone(),
            thinking: has_level.then(|| ctx.thinking_level.clone()),
        }
    });
    // MCP servers connect in parallel, started before the model is
    // resolved so their start-up overlaps ours; the first request waits (at
    // most pi's limit) only for servers with direct tools that the metadata
    // cache does not describe.
    let mcp = (!cli.no_mcp && !chat_only_first).then(|| {
        let _rt = rt.enter();
        pi_lib::mcp::Mcp::start_cached(
            pi_lib::mcp::config::load(&agent_dir, &cwd, trusted),
            &cwd,
            Some(pi_lib::mcp::cache::Cache::user()),
        )
    });
    let resolved = match models::resolve(&cli, &agent_dir, &settings, restore.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            if let Some(m) = &mcp {
                rt.block_on(m.shutdown());
            }
            return Err(e);
        }
    };
    let mcp_tools = match &mcp {
        Some(m) => {
            let first = rt.block_on(m.first_request());
            if let Some(notice) = first.notice {
                pi_lib::cli::note(PROG, notice);
            }
            for d in &first.diagnostics {
                pi_lib::cli::warn(PROG, d);
            }
            first.tools
        }
        None => Vec::new(),
    };
    // The tool set: one resolver for pi-run, pi-prompt and pi-resources,
    // asked again as extension and subagent tools become known.
    let mut sel = select::Selection::new(
        cli.tool_args.flags(),
        settings.default_tools(),
        selection.pinned(),
    );
    sel.add(select::builtin_available());
    sel.add(pi_lib::mcp::Mcp::available(&mcp_tools));
    let tool_set = sel.resolve().map_err(|e| CliError::input(e.to_string()))?;
    let chat_only = tool_set.chat_only;
    let mut tools = pi_lib::mcp::declared_tools(&tool_set.names, &mcp_tools);
    // The same selection for the MCP tools a `/mcp reconnect` or sign-in
    // brings.
    let mcp_select = {
        let (flags, defaults) = (cli.tool_args.flags(), settings.default_tools());
        let pinned = selection.pinned();
        move |now: &[Arc<dyn pi_lib::tools::Tool>]| -> Vec<Arc<dyn pi_lib::tools::Tool>> {
            let mut available = select::builtin_available();
            available.extend(pi_lib::mcp::Mcp::available(now));
            let names = select::resolve(&flags, &defaults, pinned.as_ref(), &available)
                .map(|s| s.names)
                .unwrap_or_default();
            now.iter()
                .filter(|t| names.contains(&t.definition().name))
                .cloned()
                .collect()
        }
    };
    for e in &cli.resource_args.extensions {
        let p = cwd.join(e);
        if !p.exists() {
            return Err(CliError::input(format!(
                "Failed to load extension \"{}\": Extension path does not exist: {}",
                p.display(),
                p.display()
            ))
            .with_hint("start without it, or check the path"));
        }
    }

    let mut resources = if chat_only {
        // Only context files: no skills, templates, extensions or themes.
        pi_lib::resources::discover_chat_only(&discover)
            .map_err(|e| CliError::input(e.to_string()))?
    } else {
        pi_lib::resources::discover(&discover, trusted)
            .map_err(|e| CliError::input(e.to_string()))?
    };
    for d in &resources.diagnostics {
        if d.kind != "collision" {
            pi_lib::cli::warn(PROG, &d.message);
        }
    }
    // The second pass: the project's extensions, only when trusted
    // (`resources` holds them only then).
    runner.set_project_trusted(trusted);
    if chat_only {
        rt.block_on(runner.shutdown());
    } else {
        let rest: Vec<_> = resources
            .extensions
            .iter()
            .filter(|e| !loaded_first.contains(&e.path))
            .cloned()
            .collect();
        if !rest.is_empty() {
            let opts = load_opts(&settings);
            rt.block_on(exts::load(&runner, &rest, "full", Some(trusted), &opts));
        }
    }
    let has_exts = !chat_only && !runner.extensions().is_empty();
    if has_exts {
        join_extension_tools(&runner, &mut tools, false, &mut sel);
    }
    // Extension flags, now that the extensions registered theirs.
    let registered: Vec<_> = runner
        .extensions()
        .iter()
        .flat_map(|e| e.reg.flags.clone())
        .collect();
    let (flag_values, back) = extflags::resolve(ext_flags, &registered)?;
    if !back.is_empty() {
        let pos = extflags::positions(args, &cli.messages);
        extflags::reinsert(&mut cli.messages, &pos, back);
    }
    if has_exts {
        rt.block_on(runner.configure(&flag_values));
        // resources_discover: extra skill, template and theme paths (relative
        // to the cwd), discovered like --skill & co.
        let (skills, prompts, themes) = rt.block_on(runner.session_start());
        // Tools registered in session_start (pi-subagents' supervisor) join;
        // a setActiveTools made there decides the set.
        join_extension_tools(&runner, &mut tools, true, &mut sel);
        if let Some(active) = runner.take_pending_active() {
            tools = active;
        }
        if !(skills.is_empty() && prompts.is_empty() && themes.is_empty()) {
            let abs = |v: Vec<String>| v.into_iter().map(|p| cwd.join(p)).collect::<Vec<_>>();
            discover.skills.extend(abs(skills));
            discover.prompt_templates.extend(abs(prompts));
            discover.themes.extend(abs(themes));
            resources = pi_lib::resources::discover(&discover, trusted)
                .map_err(|e| CliError::input(e.to_string()))?;
        }
    }

    // The built-in subagents (off unless <agentDir>/agents/settings.json
    // says `builtInEnabled: true`): their control tools join the set, a
    // legacy pi-subagents extension's tools leave it.
    let subagents = (!chat_only).then(|| {
        pi_lib::subagents::runtime::Controller::new(pi_lib::subagents::runtime::ParentContext {
            agent_dir: agent_dir.clone(),
            cwd: cwd.clone(),
            session_dir: store
                .path()
                .and_then(|p| p.parent())
                .map(|p| p.to_path_buf()),
            parent_session_id: store.session.header.id.clone(),
            parent_session_path: store.path().map(|p| p.to_path_buf()),
            model: resolved.model.clone(),
            api_key: resolved.api_key.clone(),
            thinking: resolved.thinking,
            idle_timeout: settings.http_idle_timeout().unwrap_or(Duration::MAX),
            retry: settings.retry(),
            auto_resize_images: settings.auto_resize_images(),
            trusted,
            tool_ceiling: sel.ceiling(),
            max_turns: cli.max_turns,
        })
    });
    if let Some(c) = &subagents {
        for w in
            pi_lib::subagents::runtime::join_control_tools(&mut tools, c.tools(), &runner, &mut sel)
        {
            eprintln!("{PROG}: {w}");
        }
    }
    for w in sel.finish(&mut tools) {
        pi_lib::cli::warn(PROG, &w);
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
        let plan = PlanOptions {
            cwd: cwd.display().to_string(),
            tools: pi_lib::agent::prompt_tools(&tools),
            system_prompt: cli.system_prompt.clone(),
            append: cli.append_system_prompt.clone(),
            docs: Some(toolkit_docs()),
            chat_only,
        };
        let mut sections = plan_sections(&plan, &resources).map_err(CliError::input)?;
        // A deferred MCP server's listing is its own section (pi's mcp_servers).
        let mcp_section = mcp.as_ref().and_then(|m| m.servers_section());
        pi_lib::mcp::push_section(&mut sections, mcp_section.as_ref());
        if has_exts {
            // setActiveTools and late registrations rebuild the sections.
            let res = resources.clone();
            runner.set_prompt_builder(Some(Arc::new(move |tools| {
                let plan = PlanOptions {
                    tools: pi_lib::agent::prompt_tools(tools),
                    ..plan.clone()
                };
                let mut sections = plan_sections(&plan, &res)?;
                pi_lib::mcp::push_section(&mut sections, mcp_section.as_ref());
                Ok(sections)
            })));
        }
        sections
    };

    let prompts = if rpc_mode {
        rpc::check_args(&cli)?;
        Vec::new()
    } else {
        input::prompts(&cli, &cwd)?
    };
    let then = input::then_prompts(&cli);
    if prompts.is_empty() && !rpc_mode {
        return Err(CliError::input("no prompt given")
            .with_hint("pass a message, an @file, or pipe text on stdin"));
    }
    if let Some(name) = &cli.name {
        sessions::name_session(&mut store, name)?;
    }
    if let Some(tools) = &tool_set.persist {
        let entry = store
            .session
            .new_tool_selection(Some(tools))
            .map_err(|e| CliError::input(format!("--tools: {e}")))?;
        store
            .append(entry)
            .map_err(|e| CliError::failed(format!("cannot write session: {e}")))?;
    }

    runner.set_tools(
        tools.iter().map(|t| t.definition().name).collect(),
        tools
            .iter()
            .filter_map(|t| serde_json::to_value(t.definition()).ok())
            .collect(),
    );
    let compaction = pi_lib::session::compact::CompactionSettings::from_settings(
        &settings,
        Some(&format!(
            "{}/{}",
            resolved.model.provider, resolved.model.id
        )),
    )
    .map_err(CliError::input)?;
    let registry = resolved.registry;
    let opts = AgentOptions {
        model: resolved.model,
        api_key: resolved.api_key,
        thinking: resolved.thinking,
        tools,
        cwd,
        sections,
        forced_prompt: None,
        max_turns: cli.max_turns,
        idle_timeout: match cli.idle_timeout {
            Some(0) => None,
            Some(secs) => Some(Duration::from_secs(secs)),
            None => settings.http_idle_timeout(),
        }
        // No limit: a deadline no response outlives.
        .unwrap_or(Duration::MAX),
        auto_resize_images: settings.auto_resize_images(),
        retry: settings.retry(),
    };
    let gates: Vec<std::sync::Arc<dyn pi_lib::agent::hooks::Gate>> = cli
        .gate
        .iter()
        .map(|c| {
            std::sync::Arc::new(exts::CommandGate {
                command: c.clone(),
                timeout: event_timeout,
            }) as std::sync::Arc<dyn pi_lib::agent::hooks::Gate>
        })
        .collect();
    let hooks = has_exts.then(|| runner.clone() as std::sync::Arc<dyn pi_lib::agent::Hooks>);
    if rpc_mode {
        let setup = rpc::Setup {
            agent_dir: &agent_dir,
            settings: &settings,
            resources: &resources,
            chat_only,
            runner: &runner,
            subagents: subagents.as_ref(),
            mcp_on: !cli.no_mcp,
            mcp: mcp.as_ref(),
            mcp_select: &mcp_select,
        };
        let mut agent = Agent::new(opts, store, cancel.clone());
        agent.compaction = compaction;
        agent.auto_compaction = compaction.enabled;
        agent.ext.late_tools = mcp.as_ref().map(|m| Arc::clone(&m.inbox));
        let result = rt.block_on(rpc::serve(&setup, agent, registry, hooks, gates));
        runner.detach();
        rt.block_on(runner.shutdown());
        if let Some(m) = &mcp {
            rt.block_on(m.shutdown());
        }
        return result;
    }
    let mcp_on = !cli.no_mcp;
    let result = rt.block_on(async {
        let mut agent = Agent::new(opts, store, cancel.clone());
        agent.ext.hooks = hooks;
        agent.ext.limits.gates = gates;
        agent.compaction = compaction;
        agent.auto_compaction = compaction.enabled;
        agent.ext.late_tools = mcp.as_ref().map(|m| Arc::clone(&m.inbox));
        runner.set_queue(Arc::clone(&agent.queue));
        if let Some(c) = &subagents {
            c.set_parent_queue(Arc::clone(&agent.queue));
        }
        // SIGINT, SIGTERM and SIGHUP are taken over right here, before the
        // first request, so an early signal still saves the session; a
        // stdout that fails stops the run the same way.
        let stop = Stopper::new(cancel.clone());
        if let Err(e) = stop.watch_signals() {
            pi_lib::cli::warn(PROG, &e);
        }
        let mut out = pi_lib::cli::Stdout::new();
        // After a signal the stream goes on (the aborted message, the
        // settled event); after a failed write nothing more is tried.
        let mut write_failed = false;
        let mut emit = |v: &serde_json::Value| {
            if json && !write_failed {
                if let Err(e) = out.record(v) {
                    write_failed = true;
                    stop.stop(StopReason::from_write_error(&e));
                }
            }
        };
        if json {
            let header = agent.store.session.header.to_line();
            emit(&serde_json::from_str(&header).unwrap_or(serde_json::Value::Null));
            if let Some(t) = &trust_record {
                emit(t);
            }
        }
        if continued {
            agent.prepare_continued_session()
        } else {
            agent.prepare_session()
        }
        .map_err(CliError::failed)?;
        let mut last = None;
        let mut failed = None;
        let mut prompts: std::collections::VecDeque<AgentMessage> = prompts.into();
        let mut then = Some(then);
        loop {
            // The prompts given, then what extensions asked to run while
            // the agent was idle (sendMessage triggerTurn, sendUserMessage).
            let user = match prompts.pop_front() {
                Some(u) => {
                    // `--then`: follow-ups of the last prompt's run, each
                    // delivered when the task before it has ended.
                    if prompts.is_empty() {
                        for m in
                            expand_prompts(then.take().unwrap_or_default(), &resources, chat_only)
                        {
                            agent.queue.follow_up(m);
                        }
                    }
                    u
                }
                None => match agent.queue.take_idle_run() {
                    Some(pi_lib::agent::queue::IdleRun::User { text }) => {
                        AgentMessage::User(pi_lib::format::message::UserMessage {
                            content: pi_lib::format::UserContent::Blocks(vec![ContentBlock::text(
                                text,
                            )]),
                            timestamp: pi_lib::format::Num::signed(pi_lib::timefmt::now_ms()),
                            extra: serde_json::Map::new(),
                        })
                    }
                    Some(pi_lib::agent::queue::IdleRun::Custom(c)) => {
                        AgentMessage::Custom(Box::new(c))
                    }
                    // Background children still running: their reports
                    // come as follow-ups, so wait for them.
                    None => match &subagents {
                        Some(c) if c.has_running_background() => {
                            agent.idle_until(c.wait_background(), &mut emit).await;
                            continue;
                        }
                        _ => break,
                    },
                },
            };
            // pi's built-in `/mcp` says nothing in print and JSON mode
            // (it notifies only a UI) but acts (`logout` drops the
            // tokens); it is handled, not sent.
            if let Some(cmd) = mcp_on
                .then(|| pi_lib::mcp::status::command_of(&user))
                .flatten()
            {
                let ctx = pi_lib::mcp::command::Context {
                    mcp: mcp.as_ref(),
                    agent_dir: &agent_dir,
                    ui: None,
                    select: Some(&mcp_select),
                };
                pi_lib::mcp::command::run(&ctx, cmd, &mut agent.opts.tools).await;
                continue;
            }
            let Some(user) = preflight(&mut agent, user, &resources, chat_only, &mut emit).await
            else {
                continue;
            };
            let outcome = agent.run(user, &mut emit).await;
            last = outcome.last.clone();
            if let Some(reason) = stop.reason() {
                return Err(stopped(&reason));
            }
            if outcome.aborted {
                return Err(stopped(&StopReason::Interrupt));
            }
            if let Some(err) = outcome.error {
                failed = Some(CliError::failed(err));
                break;
            }
        }
        // session_shutdown while the session is open: what its handlers
        // append is written, as pi writes it.
        agent
            .notify_hooks(exts::Runner::shutdown_event(), &mut emit)
            .await;
        agent.apply_pending(&mut emit);
        if let Some(f) = failed {
            return Err(f);
        }
        if !json {
            if let Some(m) = &last {
                for b in &m.content {
                    if let ContentBlock::Text(t) = b {
                        writeln!(out, "{}", t.text).map_err(|e| stopped_writing(&e))?;
                    }
                }
            }
        }
        out.flush().map_err(|e| stopped_writing(&e))?;
        Ok::<i32, CliError>(EXIT_OK)
    });
    if cancel.is_cancelled() {
        runner.kill_all();
    }
    runner.detach();
    rt.block_on(runner.shutdown());
    if let Some(m) = &mcp {
        rt.block_on(m.shutdown());
    }
    result
}

/// Extension tools join the set as the tool flags decide (one named like a
/// built-in replaces it) and the pool `setActiveTools` chooses from.
/// `late`: only tools not in the pool yet (registered after load, e.g. in
/// `session_start`).
fn join_extension_tools(
    runner: &Arc<exts::Runner>,
    tools: &mut Vec<Arc<dyn pi_lib::tools::Tool>>,
    late: bool,
    sel: &mut select::Selection,
) {
    let names: Vec<String> = pi_lib::tools::BUILTIN_TOOLS
        .iter()
        .map(|n| n.to_string())
        .collect();
    let mut pool = if late {
        runner.tool_pool()
    } else {
        select::builtin_tools(&names)
    };
    let known: Vec<String> = pool.iter().map(|t| t.definition().name).collect();
    for (t, active) in exts::tools(runner, PROG) {
        let name = t.definition().name;
        if late && known.contains(&name) {
            continue;
        }
        pool.retain(|b| b.definition().name != name);
        pool.push(Arc::clone(&t));
        sel.add([select::AvailableTool::extension(&name, active)]);
        if sel.is_active(&name) {
            tools.retain(|b| b.definition().name != name);
            tools.push(t);
        }
    }
    // What the tool flags shut out, `setActiveTools` cannot bring back.
    pool.retain(|t| sel.admits(&t.definition().name));
    runner.set_tool_pool(pool);
    // What getActiveTools/getAllTools answer in session_start.
    runner.set_tools(
        tools.iter().map(|t| t.definition().name).collect(),
        tools
            .iter()
            .filter_map(|t| serde_json::to_value(t.definition()).ok())
            .collect(),
    );
}

/// What pi does with a prompt before a run (seed 004 step 2): an
/// extension command runs instead of the agent; the `input` handlers may
/// transform the text or handle it; then `/skill:` and template expansion.
/// `None`: nothing to run.
pub(crate) async fn preflight(
    agent: &mut Agent,
    user: AgentMessage,
    resources: &Resources,
    chat_only: bool,
    emit: pi_lib::agent::Emit<'_>,
) -> Option<AgentMessage> {
    let AgentMessage::User(mut u) = user else {
        return Some(user);
    };
    if agent.ext.hooks.is_some() {
        let text = u.content.joined_text("\n");
        if let Some(rest) = text.strip_prefix('/') {
            let (name, args) = rest.split_once(' ').unwrap_or((rest, ""));
            if agent.command(name, args.trim_start(), emit).await {
                return None;
            }
        }
        let images: Vec<serde_json::Value> = match &u.content {
            pi_lib::format::UserContent::Blocks(b) => b
                .iter()
                .filter(|b| matches!(b, ContentBlock::Image(_)))
                .filter_map(|b| serde_json::to_value(b).ok())
                .collect(),
            _ => Vec::new(),
        };
        let ev = pi_lib::agent::hooks::InputEvent {
            text,
            images,
            source: "interactive".into(),
            streaming_behavior: None,
        };
        match agent.input(ev, emit).await {
            pi_lib::agent::hooks::InputOutcome::Handled => return None,
            pi_lib::agent::hooks::InputOutcome::Transform { text, images } => {
                let mut blocks = vec![ContentBlock::text(text)];
                blocks.extend(
                    images
                        .into_iter()
                        .filter_map(|i| serde_json::from_value::<ContentBlock>(i).ok()),
                );
                u.content = pi_lib::format::UserContent::Blocks(blocks);
            }
            pi_lib::agent::hooks::InputOutcome::Continue => {}
        }
    }
    expand_prompts(vec![AgentMessage::User(u)], resources, chat_only)
        .into_iter()
        .next()
}

/// The error for a run that was stopped from outside: its one line on
/// stderr and its exit code.
fn stopped(reason: &StopReason) -> CliError {
    pi_lib::cli::note(PROG, &reason.message());
    CliError::quiet(reason.exit_code())
}

/// The answer could not be written (the run itself finished and is saved).
fn stopped_writing(e: &std::io::Error) -> CliError {
    stopped(&StopReason::from_write_error(e))
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
