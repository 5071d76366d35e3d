//! The run's assembly, in the one order every mode shares: the session
//! (which may move the working directory) and its persisted tool policy
//! (read before anything loads, so an extension never touches a Chat-only
//! session); the first extension pass (user and command-line extensions,
//! which may answer `project_trust`) and the trust decision; the settings
//! the decision allows; MCP servers (started early so their start-up
//! overlaps ours); the model; the tool set; resources; the second
//! extension pass (the project's, when trusted), extension flags and
//! `session_start` (which may add tools and resource paths); the built-in
//! subagents; and the system-prompt sections. [`Assembly`] holds the
//! result; it becomes an [`Agent`](crate::agent::Agent) for a run
//! ([`super::oneshot`], [`super::rpc`]) or a [`super::Plan`] for `pi-prompt`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use super::model::{self as run_model, Resolved, Restore};
use super::tools::{join_extension_tools, mcp_select, McpSelect};
use super::{extflags, session, Mode, RunOptions};
use crate::cli::CliError;
use crate::extensions::loader::{self, LoadOptions};
use crate::extensions::runner::{Runner, RunnerConfig};
use crate::format::resources::{ResourceRecord, ToolSetRecord};
use crate::mcp::Mcp;
use crate::resources::{DiscoverOptions, Resources};
use crate::session::store::SessionStore;
use crate::session::tool_selection::RunSelection;
use crate::settings::Settings;
use crate::subagents::runtime::{Controller, ParentContext};
use crate::tools::select;
use crate::tools::Tool;

/// A run, put together and not started yet.
pub struct Assembly {
    pub(super) opts: RunOptions,
    /// Where the run works (the session's directory when it still exists).
    pub cwd: PathBuf,
    pub(super) store: SessionStore,
    /// The session's persisted tool policy.
    pub(super) selection: RunSelection,
    /// The session already had entries on its branch (continued).
    pub(super) continued: bool,
    pub(super) cancel: CancellationToken,
    pub(super) runner: Arc<Runner>,
    discover: DiscoverOptions,
    /// Whether the project's resources are allowed.
    pub(super) trusted: bool,
    /// The `trust` record for `--mode json`, when the project has
    /// protected resources.
    pub(super) trust_record: Option<Value>,
    /// The sandbox every tool of the run (and of its subagent children)
    /// runs in.
    pub(super) sandbox: Arc<crate::sandbox::Sandbox>,
    /// The `sandbox` record for `--mode json`, when a sandbox is on.
    pub(super) sandbox_record: Option<Value>,
    /// The trust decision the run was assembled under (its own, or the
    /// one piped records carry).
    pub(super) decision: Option<crate::format::resources::TrustRecord>,
    /// Settings as the trust decision allows them.
    pub(super) settings: Settings,
    /// The model (`None` in a plan, which needs none; taken by the agent).
    pub(super) resolved: Option<Resolved>,
    /// The registry the model came from, for RPC's model commands.
    pub(super) registry: Option<std::sync::Arc<crate::model::ModelRegistry>>,
    pub(super) mcp: Option<Arc<Mcp>>,
    pub(super) mcp_select: Arc<McpSelect>,
    /// The run's tool decision, asked again as extension and subagent
    /// tools become known.
    sel: select::Selection,
    /// The tool set came piped from `pi-resources`: the names it lists
    /// (its order is kept, and only the subagent tools it names join).
    piped_tools: Option<Vec<String>>,
    /// The active tools, in order.
    pub(super) tools: Vec<Arc<dyn Tool>>,
    /// A plain `--tools` list to pin in a session that has no pin yet.
    pub(super) persist: Option<Vec<String>>,
    pub(super) chat_only: bool,
    pub(super) resources: Resources,
    /// Extensions are loaded (and so hooks exist).
    pub(super) has_exts: bool,
    /// The extensions got `session_start` (else they get no
    /// `session_shutdown` either).
    session_started: bool,
    pub(super) subagents: Option<Arc<Controller>>,
    pub(super) sections: Vec<(String, String)>,
    /// The run's budget: its limits and what it spent (not in a plan).
    pub(super) budget: Option<Arc<crate::agent::budget::Budget>>,
    /// `--output-schema`, loaded.
    pub(super) output: Option<Arc<super::output::OutputSpec>>,
}

fn input_err(e: impl std::fmt::Display) -> CliError {
    CliError::input(e.to_string())
}

impl Assembly {
    /// Puts the run of `opts` together on `rt`. Whatever was started
    /// before a failing step (extension hosts, MCP servers) is stopped.
    pub fn new(opts: RunOptions, rt: &Runtime) -> Result<Assembly, CliError> {
        // The output options are checked before anything is opened or
        // started: a bad schema never costs a request.
        let output = match (&opts.output_schema, opts.mode) {
            (Some(p), m) if m != Mode::Plan => Some(Arc::new(super::output::load(
                &opts.cwd.join(p),
                opts.output_retries,
            )?)),
            _ => None,
        };
        if let Some(p) = &opts.output_last_message {
            super::output::check_last_message_path(&opts.cwd.join(p))?;
        }
        let mut asm = Assembly::open(opts)?;
        asm.output = output;
        match asm.build(rt) {
            Ok(()) => Ok(asm),
            Err(e) => {
                asm.shutdown(rt);
                Err(e)
            }
        }
    }

    /// The session, the working directory and the extension runner;
    /// nothing started yet.
    fn open(opts: RunOptions) -> Result<Assembly, CliError> {
        let prog = opts.prog;
        let store = if opts.mode == Mode::Plan {
            session::open_read_only(&opts.session, &opts.cwd, prog)?
        } else {
            session::open(&opts.session, &opts.cwd, prog)?
        };
        // A resumed session runs where it was made, when that directory
        // still exists.
        let cwd = {
            let c = PathBuf::from(&store.session.header.cwd);
            if c.is_dir() {
                c
            } else {
                opts.cwd.clone()
            }
        };
        let selection = store.session.run_selection();
        let cancel = CancellationToken::new();
        // Untrusted settings: what the first extension pass and the first
        // tool resolution see.
        let untrusted = Settings::load(&opts.agent_dir, &cwd, false).map_err(input_err)?;
        let mut discover = DiscoverOptions::for_cwd(&cwd);
        discover.agent_dir = opts.agent_dir.clone();
        opts.resource_args.apply(&mut discover);
        discover.no_context_files |= !selection.context_files;
        let runner = Runner::new(
            RunnerConfig {
                mode: opts.mode.name().into(),
                // pi 1.6.0 prints extension errors to stderr in --mode json
                // too; RPC clients get `extension_error` records.
                records: opts.mode == Mode::Rpc,
                cwd: cwd.display().to_string(),
                event_timeout: Duration::from_secs(opts.extension_timeout.unwrap_or(30)),
                prog: prog.into(),
                settings: Value::Object(untrusted.values.clone()),
            },
            cancel.clone(),
        );
        runner.set_agent_dir(opts.agent_dir.clone());
        let continued = !store.session.branch().is_empty();
        let mcp_select = mcp_select(
            opts.tool_flags.clone(),
            untrusted.default_tools(),
            selection.pinned(),
        );
        let sel = select::Selection::new(
            opts.tool_flags.clone(),
            untrusted.default_tools(),
            selection.pinned(),
        );
        Ok(Assembly {
            opts,
            cwd,
            store,
            selection,
            continued,
            cancel,
            runner,
            discover,
            trusted: false,
            trust_record: None,
            sandbox: Default::default(),
            sandbox_record: None,
            decision: None,
            settings: untrusted,
            resolved: None,
            registry: None,
            mcp: None,
            mcp_select,
            sel,
            piped_tools: None,
            tools: Vec::new(),
            persist: None,
            chat_only: false,
            resources: Resources::default(),
            has_exts: false,
            session_started: false,
            subagents: None,
            sections: Vec::new(),
            budget: None,
            output: None,
        })
    }

    /// Every step after [`Assembly::open`], in order.
    fn build(&mut self, rt: &Runtime) -> Result<(), CliError> {
        // A set without tools (Chat only) starts no extension and no MCP
        // server; decided on the untrusted settings before anything loads.
        let chat_only_first = self.resolve_tools(&[]).map(|t| t.chat_only).unwrap_or(true);
        let records = self.opts.resource_records.take();
        let from_records = records.is_some();
        let loaded_first = match &records {
            Some(_) => Vec::new(),
            None => self.first_pass_and_trust(rt, chat_only_first)?,
        };
        let piped_set = records.and_then(|r| self.take_records(r));
        let chat_only_first = chat_only_first || piped_set.as_ref().is_some_and(|s| s.chat_only);
        self.settings =
            Settings::load(&self.opts.agent_dir, &self.cwd, self.trusted).map_err(input_err)?;
        // The sandbox is set up (and proved) before anything else starts:
        // a refusal ends the run with exit 5 before any model request.
        if self.opts.mode != Mode::Plan {
            (self.sandbox, self.sandbox_record) =
                super::sandbox::prepare(&self.opts, &self.cwd, self.trusted)?;
        }
        self.mcp_select = mcp_select(
            self.opts.tool_flags.clone(),
            self.settings.default_tools(),
            self.selection.pinned(),
        );
        // MCP servers connect in parallel, started before the model is
        // resolved so their start-up overlaps ours; the first request waits
        // (at most pi's limit) only for servers with direct tools that the
        // metadata cache does not describe.
        if !self.opts.no_mcp && !chat_only_first {
            let _rt = rt.enter();
            self.mcp = Some(Mcp::start_cached(
                crate::mcp::config::load(&self.opts.agent_dir, &self.cwd, self.trusted),
                &self.cwd,
                Some(crate::mcp::cache::Cache::user()),
            ));
        }
        if self.opts.mode != Mode::Plan {
            let resolved = self.resolve_model()?;
            self.budget = Some(super::limits::budget(
                &self.opts,
                &self.settings,
                &resolved.model,
            )?);
            self.resolved = Some(resolved);
        }
        let mcp_tools = match &self.mcp {
            Some(m) => {
                let first = rt.block_on(m.first_request());
                if let Some(notice) = first.notice {
                    crate::cli::note(self.opts.prog, notice);
                }
                for d in &first.diagnostics {
                    crate::cli::warn(self.opts.prog, d);
                }
                first.tools
            }
            None => Vec::new(),
        };
        // The tool set: one resolver for pi-run, pi-prompt and
        // pi-resources, asked again as extension and subagent tools become
        // known (its warnings once they all are).
        self.sel = select::Selection::new(
            self.opts.tool_flags.clone(),
            self.settings.default_tools(),
            self.selection.pinned(),
        );
        self.sel.add(select::builtin_available());
        self.sel.add(Mcp::available(&mcp_tools));
        match piped_set {
            Some(set) => self.take_piped_tool_set(set, &mcp_tools),
            None => {
                let set = self.sel.resolve().map_err(input_err)?;
                self.chat_only = set.chat_only;
                self.persist = set.persist;
                self.tools = crate::mcp::declared_tools(&set.names, &mcp_tools);
            }
        }
        self.check_extension_paths()?;
        if !from_records {
            self.discover_resources()?;
        }
        self.second_pass(rt, &loaded_first)?;
        self.start_subagents();
        match &self.piped_tools {
            // In the resolver's order; its warnings once every tool is known.
            None => {
                for w in self.sel.finish(&mut self.tools) {
                    crate::cli::warn(self.opts.prog, &w);
                }
            }
            // In the listing's order.
            Some(names) => self.tools.sort_by_key(|t| {
                let n = t.name().into_owned();
                names.iter().position(|x| *x == n).unwrap_or(usize::MAX)
            }),
        }
        self.sections = self.plan_sections()?;
        Ok(())
    }

    /// The tool set by the library's one resolver, with `extra` (MCP
    /// tools) available beside the built-ins.
    fn resolve_tools(
        &self,
        extra: &[Arc<dyn Tool>],
    ) -> Result<select::ToolSet, select::SelectError> {
        let mut available = select::builtin_available();
        available.extend(Mcp::available(extra));
        select::resolve(
            &self.opts.tool_flags,
            &self.settings.default_tools(),
            self.selection.pinned().as_ref(),
            &available,
        )
    }

    /// The first extension pass (only user and command-line extensions
    /// start before the decision; they may answer `project_trust`), then
    /// the decision. Returns the extensions already loaded.
    fn first_pass_and_trust(
        &mut self,
        rt: &Runtime,
        chat_only_first: bool,
    ) -> Result<Vec<PathBuf>, CliError> {
        let mut loaded_first = Vec::new();
        if !chat_only_first {
            if let Ok(first) = crate::resources::discover_untrusted_extensions(&self.discover) {
                let list: Vec<_> = first
                    .extensions
                    .into_iter()
                    .filter(loader::first_pass)
                    .collect();
                if !list.is_empty() {
                    loaded_first = list.iter().map(|e| e.path.clone()).collect();
                    let lo = self.load_options();
                    rt.block_on(loader::load_or_fail(
                        &self.runner,
                        &list,
                        "trust",
                        None,
                        &lo,
                    ))?;
                }
            }
        }
        let runner = Arc::clone(&self.runner);
        let mut trust_hook =
            |dir: &Path| rt.block_on(runner.project_trust(&dir.display().to_string()));
        let asks = crate::agent::Hooks::handles(runner.as_ref(), "project_trust");
        let trust = crate::trust::decide(
            &self.cwd,
            &self.opts.agent_dir,
            self.opts.trust,
            asks.then_some(&mut trust_hook as crate::trust::TrustHook<'_>),
            false,
        )
        .map_err(input_err)?;
        self.trusted = trust.trusted;
        self.decision = Some(trust.record());
        // Never silent about trust: one line on stderr (and a `trust`
        // record in --mode json) whenever the project has protected
        // resources. A plan says nothing (`pi-resources` reports trust).
        if self.opts.mode != Mode::Plan {
            self.trust_record = trust.notice(&self.cwd).map(|line| {
                crate::cli::note(self.opts.prog, &line);
                serde_json::to_value(ResourceRecord::Trust(trust.record())).unwrap_or(Value::Null)
            });
        }
        Ok(loaded_first)
    }

    /// Resources piped from `pi-resources`: they and their trust decision
    /// replace discovery; their `tool_set` record, when there is one.
    fn take_records(&mut self, records: Vec<ResourceRecord>) -> Option<ToolSetRecord> {
        let piped_tools = records.iter().find_map(|r| match r {
            ResourceRecord::ToolSet(t) => Some(t.clone()),
            _ => None,
        });
        let (res, trust) = Resources::from_records(records);
        self.trusted = trust.as_ref().map(|t| t.trusted).unwrap_or(false);
        self.decision = trust;
        self.resources = res;
        // Tool options given here, or a session's pin, decide instead.
        piped_tools.filter(|_| !self.opts.tool_flags.any() && self.selection.pinned().is_none())
    }

    /// The piped `tool_set`: every MCP tool is active beside it, as the
    /// resolver has it without tool options.
    fn take_piped_tool_set(&mut self, set: ToolSetRecord, mcp_tools: &[Arc<dyn Tool>]) {
        // MCP's tools follow the listing's last built-in (the subagent
        // tools it names join later, from this run's own controller).
        let mut names = set.tools;
        let at = names
            .iter()
            .rposition(|n| crate::tools::BUILTIN_TOOLS.contains(&n.as_str()))
            .map_or(0, |i| i + 1);
        let mcp_names: Vec<String> = mcp_tools.iter().map(|t| t.name().into_owned()).collect();
        names.splice(at..at, mcp_names);
        self.piped_tools = Some(names.clone());
        self.chat_only = set.chat_only;
        self.tools = crate::mcp::declared_tools(&names, mcp_tools);
    }

    /// The model, key and thinking level; a continued session keeps its
    /// model and thinking level unless the flags name others (pi 1.6.0).
    fn resolve_model(&self) -> Result<Resolved, CliError> {
        let restore = self.continued.then(|| {
            let s = &self.store.session;
            let ctx = s.context(None);
            let has_level = s
                .branch()
                .into_iter()
                .any(|i| matches!(s.entries[i], crate::format::Entry::ThinkingLevelChange(_)));
            Restore {
                model: ctx.model.clone(),
                thinking: has_level.then(|| ctx.thinking_level.clone()),
            }
        });
        run_model::resolve(
            &self.opts.model,
            self.opts.session.flags.continue_,
            &self.opts.agent_dir,
            &self.settings,
            restore.as_ref(),
            self.opts.prog,
        )
    }

    /// `-e PATH` must exist: pi's message and, as for any extension that
    /// does not load, exit 1 before the model is asked.
    fn check_extension_paths(&self) -> Result<(), CliError> {
        for e in &self.opts.resource_args.extensions {
            let p = crate::paths::normalize(&self.cwd.join(e));
            if !p.exists() {
                return Err(CliError::failed(format!(
                    "Failed to load extension \"{}\": Extension path does not exist: {}",
                    p.display(),
                    p.display()
                ))
                .with_hint("start without it, or check the path"));
            }
        }
        Ok(())
    }

    /// Resources through the same library code as `pi-resources`; Chat
    /// only discovers the context files alone.
    fn discover_resources(&mut self) -> Result<(), CliError> {
        self.resources = if self.chat_only {
            crate::resources::discover_chat_only(&self.discover).map_err(input_err)?
        } else {
            crate::resources::discover(&self.discover, self.trusted).map_err(input_err)?
        };
        for d in &self.resources.diagnostics {
            if d.kind != "collision" {
                crate::cli::warn(self.opts.prog, &d.message);
            }
        }
        Ok(())
    }

    /// What the extension loader needs to know about this run.
    fn load_options(&self) -> LoadOptions {
        LoadOptions {
            prog: self.opts.prog.into(),
            cwd: self.cwd.clone(),
            agent_dir: self.opts.agent_dir.clone(),
            mode: self.opts.mode.name().into(),
            session_file: self.store.path().map(|p| p.display().to_string()),
            session_id: self.store.session.id().to_string(),
            settings: Value::Object(self.settings.values.clone()),
            // Start-up (Node, TypeScript, a busy machine) gets at least 10 s
            // even when events are held to a shorter limit.
            handshake: Duration::from_secs(self.opts.extension_timeout.unwrap_or(10).max(10)),
        }
    }

    /// The second pass: the project's extensions, only when trusted
    /// (`resources` holds them only then); their tools, the extension
    /// flags, and `session_start`, whose tools join and whose
    /// `resources_discover` paths are discovered like `--skill` & co.
    fn second_pass(&mut self, rt: &Runtime, loaded_first: &[PathBuf]) -> Result<(), CliError> {
        let prog = self.opts.prog;
        self.runner.set_project_trusted(self.trusted);
        if self.chat_only {
            rt.block_on(self.runner.shutdown());
        } else {
            let rest: Vec<_> = self
                .resources
                .extensions
                .iter()
                .filter(|e| !loaded_first.contains(&e.path))
                .cloned()
                .collect();
            if !rest.is_empty() {
                let lo = self.load_options();
                rt.block_on(loader::load_or_fail(
                    &self.runner,
                    &rest,
                    "full",
                    Some(self.trusted),
                    &lo,
                ))?;
            }
        }
        self.has_exts = !self.chat_only && !self.runner.extensions().is_empty();
        if self.has_exts {
            join_extension_tools(&self.runner, &mut self.tools, false, &mut self.sel, prog);
        }
        // Extension flags, now that the extensions registered theirs.
        let registered: Vec<_> = self
            .runner
            .extensions()
            .iter()
            .flat_map(|e| e.reg.flags.clone())
            .collect();
        let (flag_values, back) =
            extflags::resolve(&self.opts.ext_flags, &registered, self.has_exts)?;
        if !back.is_empty() {
            extflags::reinsert(&mut self.opts.messages, &self.opts.message_positions, back);
        }
        if !self.has_exts {
            return Ok(());
        }
        rt.block_on(self.runner.configure(&flag_values));
        self.session_started = true;
        let (skills, prompts, themes) = rt.block_on(self.runner.session_start());
        // Tools registered in session_start (pi-subagents' supervisor)
        // join; a setActiveTools made there decides the set.
        join_extension_tools(&self.runner, &mut self.tools, true, &mut self.sel, prog);
        if let Some(active) = self.runner.take_pending_active() {
            self.tools = active;
        }
        if !(skills.is_empty() && prompts.is_empty() && themes.is_empty()) {
            let cwd = self.cwd.clone();
            let abs = |v: Vec<String>| v.into_iter().map(|p| cwd.join(p)).collect::<Vec<_>>();
            self.discover.skills.extend(abs(skills));
            self.discover.prompt_templates.extend(abs(prompts));
            self.discover.themes.extend(abs(themes));
            self.resources =
                crate::resources::discover(&self.discover, self.trusted).map_err(input_err)?;
        }
        Ok(())
    }

    /// The built-in subagents (off unless `<agentDir>/agents/settings.json`
    /// says `builtInEnabled: true`): their control tools join the set, a
    /// legacy pi-subagents extension's tools leave it.
    fn start_subagents(&mut self) {
        if self.chat_only {
            return;
        }
        let (model, api_key, thinking) = match &self.resolved {
            Some(r) => (r.model.clone(), r.api_key.clone(), r.thinking),
            // A plan runs nothing; the tools' declarations need no model.
            None => (
                run_model::placeholder(),
                None,
                crate::format::model::ThinkingLevel::Off,
            ),
        };
        let c = Controller::new(ParentContext {
            agent_dir: self.opts.agent_dir.clone(),
            cwd: self.cwd.clone(),
            session_dir: self
                .store
                .path()
                .and_then(|p| p.parent())
                .map(|p| p.to_path_buf()),
            parent_session_id: self.store.session.header.id.clone(),
            parent_session_path: self.store.path().map(|p| p.to_path_buf()),
            model,
            api_key,
            thinking,
            idle_timeout: self.settings.http_idle_timeout().unwrap_or(Duration::MAX),
            retry: self.settings.retry(),
            auto_resize_images: self.settings.auto_resize_images(),
            trusted: self.trusted,
            tool_ceiling: self.sel.ceiling(),
        });
        // A piped listing names the subagent tools it keeps.
        let control: Vec<_> = c
            .tools()
            .into_iter()
            .filter(|t| {
                self.piped_tools
                    .as_ref()
                    .is_none_or(|names| names.contains(&t.name().into_owned()))
            })
            .collect();
        for w in crate::subagents::runtime::join_control_tools(
            &mut self.tools,
            control,
            &self.runner,
            &mut self.sel,
        ) {
            crate::cli::note(self.opts.prog, &w);
        }
        self.subagents = Some(c);
    }

    /// Stops the extension hosts and MCP servers (after a signal, the
    /// extension processes are killed first).
    pub(super) fn shutdown(&self, rt: &Runtime) {
        if self.cancel.is_cancelled() {
            self.runner.kill_all();
        }
        self.runner.detach();
        if self.session_started {
            rt.block_on(self.runner.shutdown());
        } else {
            rt.block_on(self.runner.close_all());
        }
        if let Some(m) = &self.mcp {
            rt.block_on(m.shutdown());
        }
    }
}
