//! MCP servers as tools, the way pi 1.6.0's built-in MCP support exposes
//! them: the servers of `<agentDir>/mcp.json` and (only when the project is
//! trusted) `<cwd>/.pi/mcp.json` ([`config`]) connect in parallel at start
//! over stdio or streamable HTTP on the official Rust SDK ([`client`]);
//! their tools become ordinary [`crate::tools::Tool`]s named
//! `mcp__<server>__<tool>` ([`naming`], [`tool`]), so every call goes
//! through the agent's gate (hooks, approval, final policy) like a
//! built-in. A server that fails is one diagnostic and the run goes on;
//! the `mcp_servers` prompt section describes the servers whose tools are
//! not declared. With the metadata [`cache`] a server that answered before
//! is declared at once and connects in the background.

pub mod auth;
pub mod cache;
mod catalog;
pub mod client;
pub mod command;
pub mod config;
pub mod elicit;
mod http;
pub mod naming;
mod section;
pub mod status;
pub mod stdio;
pub mod tool;
pub mod urls;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

pub use config::{Exposure, McpConfig, ServerConfig, Transport};

use crate::tools::select::{AvailableTool, ToolKind};
use crate::tools::Tool;

/// How long the first request waits for servers with direct tools (pi's
/// limit).
pub const FIRST_REQUEST_WAIT: Duration = Duration::from_millis(10_000);

/// The notice when that wait runs out.
pub const STILL_CONNECTING: &str =
    "MCP servers are still connecting; their tools become available once connected.";

/// Where one server stands.
#[derive(Clone)]
pub enum State {
    /// `enabled: false`.
    Disabled,
    Connecting,
    Connected(Arc<client::Connection>),
    /// Why it could not connect.
    Failed(String),
    /// An HTTP server that asks for an OAuth sign-in (its 401 without a
    /// usable stored token, or signed out with `/mcp logout`): pi's
    /// `needs-auth`. The text says why and how to sign in.
    NeedsAuth(String),
}

/// One configured server and its connection.
pub struct Server {
    pub cfg: ServerConfig,
    state: watch::Sender<State>,
    /// When it connected, as a count (tools are declared in the order
    /// servers connect, as pi adds them).
    connected_as: std::sync::atomic::AtomicUsize,
    /// Its answers of the last run ([`cache`]), if any.
    cached: Option<cache::Entry>,
    /// A stdio server's process group once spawned (0 before).
    group: Arc<std::sync::atomic::AtomicU32>,
    /// Counts its connection attempts: an attempt overtaken by a
    /// reconnect does not overwrite the state the later one sets.
    attempt: std::sync::atomic::AtomicU64,
}

/// What a server offers: its tools, instructions and whether it has
/// resources, from the live connection or else from the cache.
pub struct Meta {
    pub tools: Vec<rmcp::model::Tool>,
    pub instructions: Option<String>,
    pub has_resources: bool,
}

impl Server {
    /// Enabled, with tools the model reaches through search or codemode
    /// (a deferred or codemode exposure) rather than declared one by one.
    pub(crate) fn reached_indirectly(&self) -> bool {
        self.cfg.enabled
            && self
                .cfg
                .exposures()
                .iter()
                .any(|e| matches!(e, Exposure::Deferred | Exposure::Codemode))
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// Its tools, instructions and resources: live once connected, from the
    /// cache while connecting, none after a failure.
    pub fn meta(&self) -> Option<Meta> {
        match self.state() {
            State::Connected(c) => Some(Meta {
                tools: c.tools.clone(),
                instructions: c.instructions.clone(),
                has_resources: c.has_resources,
            }),
            State::Connecting => self.cached.as_ref().map(|e| Meta {
                tools: e.tools.clone(),
                instructions: e.instructions.clone(),
                has_resources: e.has_resources,
            }),
            _ => None,
        }
    }

    /// Waits until it is no longer connecting (at most `limit`).
    async fn settled(&self, limit: Duration) -> bool {
        let mut rx = self.state.subscribe();
        let done = tokio::time::timeout(limit, rx.wait_for(|s| !matches!(s, State::Connecting)))
            .await
            .is_ok();
        done
    }

    /// The connection, waiting for it up to the server's timeout; an error
    /// text naming the server otherwise.
    pub async fn connection(&self) -> Result<Arc<client::Connection>, String> {
        self.settled(self.cfg.timeout).await;
        match self.state() {
            State::Connected(c) if !c.is_closed() => Ok(c),
            // pi's text for a server that went away.
            State::Connected(c) => Err(c
                .closed_error()
                .unwrap_or_else(|| "MCP connection closed".into())),
            State::Failed(e) => Err(format!(
                "MCP server \"{}\" is not connected: {e}",
                self.cfg.name
            )),
            State::NeedsAuth(e) => Err(format!(
                "MCP server \"{}\" is not connected: {e}",
                self.cfg.name
            )),
            State::Disabled => Err(format!("MCP server \"{}\" is disabled", self.cfg.name)),
            State::Connecting => Err(format!(
                "MCP server \"{}\" is not connected: still connecting after {}s",
                self.cfg.name,
                self.cfg.timeout.as_secs_f64()
            )),
        }
    }
}

/// The MCP servers of one run.
pub struct Mcp {
    pub config: McpConfig,
    pub servers: Vec<Arc<Server>>,
    /// Where `tool_search` puts the tools it loads (give it to the agent
    /// as [`crate::agent::hooks::AgentExt::late_tools`]).
    pub inbox: crate::tools::ToolInbox,
    /// What connecting a server needs (at start and on reconnect).
    link: Link,
    /// The `codemode` tool, once a codemode server activated it.
    codemode: std::sync::OnceLock<Arc<dyn Tool>>,
}

/// What a connection attempt needs besides the server: the session cwd,
/// the token store, the metadata cache and the order servers connect in.
#[derive(Clone)]
struct Link {
    cwd: std::path::PathBuf,
    store: Option<auth::Store>,
    cache: Option<cache::Cache>,
    counter: Arc<std::sync::atomic::AtomicUsize>,
}

impl Link {
    /// Connects `s` and records the outcome (its state, and the cache
    /// entry), unless a later attempt started meanwhile.
    async fn connect(&self, s: &Arc<Server>) {
        use std::sync::atomic::Ordering::SeqCst;
        let attempt = s.attempt.fetch_add(1, SeqCst) + 1;
        let cfg = s.cfg.clone();
        let key = cache::Cache::key(&cfg, &self.cwd);
        let group = Arc::clone(&s.group);
        let (cwd, store) = (self.cwd.clone(), self.store.clone());
        // A panic inside the SDK fails this server only.
        let st =
            match tokio::spawn(
                async move { client::connect(&cfg, &cwd, &group, store.as_ref()).await },
            )
            .await
            {
                Ok(Ok(c)) => State::Connected(Arc::new(c)),
                Ok(Err(e)) if client::asks_sign_in(&e, &s.cfg.name) => State::NeedsAuth(e),
                Ok(Err(e)) => State::Failed(e),
                Err(e) => State::Failed(format!("internal error: {e}")),
            };
        if s.attempt.load(SeqCst) != attempt {
            if let State::Connected(c) = st {
                c.close().await;
            }
            return;
        }
        if matches!(st, State::Connected(_)) {
            s.connected_as
                .store(self.counter.fetch_add(1, SeqCst), SeqCst);
        }
        let entry = match &st {
            State::Connected(c) => Some(cache::Entry {
                tools: c.tools.clone(),
                instructions: c.instructions.clone(),
                has_resources: c.has_resources,
            }),
            _ => None,
        };
        s.state.send_replace(st);
        if let Some(cache) = self.cache.clone() {
            // A little file I/O, off the runtime's threads.
            let _ = tokio::task::spawn_blocking(move || cache.store(&key, entry.as_ref())).await;
        }
    }
}

impl Mcp {
    /// Starts connecting every enabled server in the background (on the
    /// current Tokio runtime), without the metadata cache.
    pub fn start(config: McpConfig, cwd: &std::path::Path) -> Arc<Mcp> {
        Mcp::start_cached(config, cwd, None)
    }

    /// [`Mcp::start`] with the metadata cache of an agent dir: servers
    /// with an entry are not waited for at start, and every connection
    /// refreshes (or, failing, drops) its entry.
    pub fn start_cached(
        config: McpConfig,
        cwd: &std::path::Path,
        cache: Option<cache::Cache>,
    ) -> Arc<Mcp> {
        let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // No servers, no cache file to read.
        let entries = match &cache {
            Some(cache) if !config.servers.is_empty() => cache.load(),
            _ => Default::default(),
        };
        let servers: Vec<Arc<Server>> = config
            .servers
            .iter()
            .map(|cfg| {
                let (tx, _) = watch::channel(if cfg.enabled {
                    State::Connecting
                } else {
                    State::Disabled
                });
                Arc::new(Server {
                    cfg: cfg.clone(),
                    state: tx,
                    connected_as: std::sync::atomic::AtomicUsize::new(usize::MAX),
                    cached: entries.get(&cache::Cache::key(cfg, cwd)).cloned(),
                    group: Default::default(),
                    attempt: Default::default(),
                })
            })
            .collect();
        let link = Link {
            cwd: cwd.to_path_buf(),
            store: config.agent_dir.as_deref().map(auth::Store::new),
            cache,
            counter,
        };
        for s in servers.iter().filter(|s| s.cfg.enabled) {
            let (s, link) = (Arc::clone(s), link.clone());
            tokio::spawn(async move { link.connect(&s).await });
        }
        Arc::new(Mcp {
            config,
            servers,
            inbox: Default::default(),
            link,
            codemode: Default::default(),
        })
    }

    /// No servers configured (nothing to start, wait for or list).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Waits (at most [`FIRST_REQUEST_WAIT`]) for the enabled servers with
    /// a direct tool that the cache does not describe; `Some(notice)` when
    /// some are still connecting.
    pub async fn wait_direct(&self, limit: Duration) -> Option<&'static str> {
        let waits = self
            .servers
            .iter()
            .filter(|s| s.cfg.enabled && s.cfg.has_direct() && s.cached.is_none())
            .map(|s| s.settled(limit));
        let all = futures_util::future::join_all(waits).await;
        all.contains(&false).then_some(STILL_CONNECTING)
    }

    /// Waits for every enabled server (at most `limit`).
    pub async fn wait_all(&self, limit: Duration) {
        let waits = self.servers.iter().map(|s| s.settled(limit));
        futures_util::future::join_all(waits).await;
    }

    /// One line per problem: config errors and servers that failed to
    /// connect so far.
    pub fn diagnostics(&self) -> Vec<String> {
        let mut out: Vec<String> = self.config.errors.clone();
        for s in &self.servers {
            if let State::Failed(e) = s.state() {
                out.push(format!("MCP server \"{}\" failed: {e}", s.cfg.name));
            }
        }
        out
    }

    /// The enabled servers with tools (connected, or connecting with a
    /// cache entry) in the order they connected, the others after them in
    /// config order.
    fn described(&self) -> Vec<(Arc<Server>, Meta)> {
        let mut v: Vec<(Arc<Server>, Meta)> = self
            .servers
            .iter()
            .filter(|s| s.cfg.enabled)
            .filter_map(|s| s.meta().map(|m| (Arc::clone(s), m)))
            .collect();
        v.sort_by_key(|(s, _)| s.connected_as.load(std::sync::atomic::Ordering::SeqCst));
        v
    }

    /// Every described server's tools with their effective exposure, in
    /// connection and server order (names are given in config order, so a
    /// collision always hashes the same tool); `None` marks the point
    /// where the resource tools go: right after the first directly exposed
    /// server with resources.
    fn server_tools(&self) -> Vec<(Exposure, Option<Arc<dyn Tool>>)> {
        let mut taken: Vec<String> = Vec::new();
        let mut names: std::collections::HashMap<(String, String), String> = Default::default();
        let described = self.described();
        for s in self.servers.iter().filter(|s| s.cfg.enabled) {
            let Some((_, m)) = described.iter().find(|(d, _)| Arc::ptr_eq(d, s)) else {
                continue;
            };
            for t in &m.tools {
                let name = naming::tool_name(&s.cfg.name, &t.name, &taken);
                taken.push(name.clone());
                names.insert((s.cfg.name.clone(), t.name.to_string()), name);
            }
        }
        let mut out: Vec<(Exposure, Option<Arc<dyn Tool>>)> = Vec::new();
        let mut resources = false;
        for (s, m) in described {
            for t in &m.tools {
                let Some(name) = names.get(&(s.cfg.name.clone(), t.name.to_string())) else {
                    continue;
                };
                let e = s.cfg.exposure_of(&t.name);
                let tool: Arc<dyn Tool> =
                    Arc::new(tool::McpTool::new(Arc::clone(&s), name.clone(), t));
                out.push((e, Some(tool)));
            }
            if !resources && m.has_resources && s.cfg.exposure == Exposure::Direct {
                resources = true;
                out.push((Exposure::Direct, None));
            }
        }
        out
    }

    /// The tools `tool_search` may load: those of `deferred` and
    /// `codemode` exposure.
    pub fn deferred_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.server_tools()
            .into_iter()
            .filter(|(e, _)| matches!(e, Exposure::Deferred | Exposure::Codemode))
            .filter_map(|(_, t)| t)
            .collect()
    }

    /// Every tool a codemode script may call: the servers' tools that are
    /// not hidden, then the resource tools when a server that is not
    /// hidden has resources.
    pub fn script_tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        let mut out: Vec<Arc<dyn Tool>> = self
            .server_tools()
            .into_iter()
            .filter(|(e, _)| *e != Exposure::Hidden)
            .filter_map(|(_, t)| t)
            .collect();
        let resources = self.servers.iter().any(|s| {
            s.cfg.enabled
                && s.cfg.exposure != Exposure::Hidden
                && s.meta().is_some_and(|m| m.has_resources)
        });
        if resources {
            out.extend(tool::resource_tools(Arc::clone(self)));
        }
        out
    }

    /// Whether the `codemode` tool comes with the servers: a server has a
    /// `codemode` exposure and `autoEnableCodemode` is not `false`.
    fn codemode_active(&self) -> bool {
        self.config.auto_enable_codemode != Some(false)
            && self
                .servers
                .iter()
                .any(|s| s.cfg.enabled && s.cfg.exposures().contains(&Exposure::Codemode))
    }

    /// The `codemode` tool of this run (one instance).
    pub fn codemode_tool(self: &Arc<Self>) -> Arc<dyn Tool> {
        let catalog: Arc<dyn crate::codemode::Catalog> =
            Arc::new(catalog::McpCatalog(Arc::downgrade(self)));
        Arc::clone(self.codemode.get_or_init(|| {
            Arc::new(crate::codemode::CodemodeTool::new(
                Some(catalog),
                self.config.codemode.clone(),
            ))
        }))
    }

    /// The tools declared at start, in pi's order: `codemode` when a
    /// server has that exposure (unless `autoEnableCodemode: false`),
    /// `tool_search` when a server is deferred, then the direct tools of
    /// the connected servers in the order they connected, the resource
    /// tools after the first directly exposed server with resources.
    pub fn direct_tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        if self.codemode_active() {
            out.push(self.codemode_tool());
        }
        if self
            .servers
            .iter()
            .any(|s| s.cfg.enabled && s.cfg.exposures().contains(&Exposure::Deferred))
        {
            out.push(Arc::new(tool::ToolSearch::new(Arc::clone(self))));
        }
        for (e, t) in self.server_tools() {
            match t {
                Some(t) if e == Exposure::Direct => out.push(t),
                Some(_) => {}
                None => out.extend(tool::resource_tools(Arc::clone(self))),
            }
        }
        out
    }

    /// The tools as the tool-set resolver sees them.
    pub fn available(tools: &[Arc<dyn Tool>]) -> Vec<AvailableTool> {
        tools
            .iter()
            .map(|t| AvailableTool {
                name: t.name().into_owned(),
                kind: ToolKind::Mcp,
                active_by_default: true,
            })
            .collect()
    }

    /// The `mcp_servers` section (wrapped), when a server is deferred.
    pub fn servers_section(&self) -> Option<String> {
        section::servers_section(&self.servers)
    }

    /// The configured server `name`.
    pub fn server(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.cfg.name == name)
    }

    /// Closes `s`'s connection (or kills the process group of an attempt
    /// still under way) and connects it again, as pi's `/mcp reconnect`;
    /// the state it ends in. Its tools are the new connection's from then
    /// on ([`Mcp::direct_tools`]).
    pub async fn reconnect(&self, s: &Arc<Server>) -> State {
        self.disconnect(s, State::Connecting).await;
        self.link.connect(s).await;
        s.state()
    }

    /// Closes `s`'s connection and leaves it in `then` (a sign-out leaves
    /// it [`State::NeedsAuth`]).
    pub async fn disconnect(&self, s: &Server, then: State) {
        s.attempt.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        release(s, s.state.send_replace(then)).await;
    }

    /// Closes every connection (stdin, SIGTERM, SIGKILL to the group); a
    /// stdio server still connecting (the run did not need to wait for it)
    /// gets SIGKILL to its group.
    pub async fn shutdown(&self) {
        let closes = self
            .servers
            .iter()
            .map(|s| async move { release(s, s.state()).await });
        futures_util::future::join_all(closes).await;
    }
}

/// What the first model request gets from MCP: the declared tools after
/// pi's wait, the notice when the wait ran out, and the problems so far.
pub struct FirstRequest {
    pub tools: Vec<Arc<dyn Tool>>,
    pub notice: Option<&'static str>,
    pub diagnostics: Vec<String>,
}

impl Mcp {
    /// Waits as the first request does ([`Mcp::wait_direct`]), then what it
    /// declares: one path for `pi-run` and `pi-prompt`, so the prompt
    /// `pi-prompt` shows is the one `pi-run` sends.
    pub async fn first_request(self: &Arc<Self>) -> FirstRequest {
        if self.is_empty() && self.config.errors.is_empty() {
            return FirstRequest {
                tools: Vec::new(),
                notice: None,
                diagnostics: Vec::new(),
            };
        }
        let notice = self.wait_direct(FIRST_REQUEST_WAIT).await;
        FirstRequest {
            tools: self.direct_tools(),
            notice,
            diagnostics: self.diagnostics(),
        }
    }
}

/// The tools a resolved set declares: the built-ins and the other tools
/// (`mcp_tools`: MCP's, and whatever joins after them) it names, in its
/// order, as the tools that run others (the `codemode` tool) present them.
pub fn declared_tools(names: &[String], mcp_tools: &[Arc<dyn Tool>]) -> Vec<Arc<dyn Tool>> {
    let mut tools = crate::tools::select::builtin_tools(names);
    tools.extend(
        mcp_tools
            .iter()
            .filter(|t| names.contains(&t.name().into_owned()))
            .cloned(),
    );
    tools.sort_by_key(|t| {
        let n = t.name().into_owned();
        names.iter().position(|x| *x == n)
    });
    crate::tools::present(tools)
}

/// Adds the `mcp_servers` section after the planned ones (pi's place).
pub fn push_section(sections: &mut Vec<(String, String)>, section: Option<&String>) {
    if let Some(s) = section {
        sections.push(("mcp_servers".into(), s.clone()));
    }
}

/// Signs in to the configured HTTP server `name` with OAuth (at most
/// `limit`), storing its tokens in `<agent_dir>/mcp-auth.json` as pi does;
/// `open` gets the authorization URL (the browser).
pub async fn login(
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
    trusted: bool,
    name: &str,
    limit: Duration,
    open: auth::Opener<'_>,
) -> Result<(), String> {
    let cfg = config::load(agent_dir, cwd, trusted);
    let Some(server) = cfg.servers.iter().find(|s| s.name == name) else {
        let mut msg = format!("no MCP server \"{name}\" in the mcp.json files");
        if let Some(e) = cfg.errors.first() {
            msg.push_str(&format!(" ({e})"));
        }
        return Err(msg);
    };
    auth::login(server, &auth::Store::new(agent_dir), limit, open).await
}

/// Signs out of the configured HTTP server `name`, as `pi mcp logout`
/// does: its record in `<agent_dir>/mcp-auth.json` is dropped (atomically,
/// other servers' records kept); `Ok(false)` when there was none.
pub fn logout(
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
    trusted: bool,
    name: &str,
) -> Result<bool, String> {
    let cfg = config::load(agent_dir, cwd, trusted);
    let Some(server) = cfg.servers.iter().find(|s| s.name == name) else {
        return Err(format!("no MCP server \"{name}\" in the mcp.json files"));
    };
    let config::Transport::Http { url, .. } = &server.transport else {
        return Ok(false);
    };
    auth::Store::new(agent_dir).remove(&auth::Store::key(server, url))
}

/// What `pi-resources` lists: every configured server (an untrusted
/// project's entries as `skipped`, never started) and the config errors.
/// With `inspect`, the loaded servers are started, their tools listed, and
/// stopped again.
pub async fn list(
    agent_dir: &std::path::Path,
    cwd: &std::path::Path,
    trusted: bool,
    inspect: bool,
) -> (Vec<crate::format::resources::McpServerRecord>, Vec<String>) {
    use crate::format::resources::{McpServerRecord, McpToolRecord};
    let cfg = config::load(agent_dir, cwd, trusted);
    let errors = cfg.errors.clone();
    let project = cwd.join(".pi").join("mcp.json");
    let record = |s: &ServerConfig, status: &str| McpServerRecord {
        name: s.name.clone(),
        source: s.source.clone(),
        scope: if s.source == project {
            "project"
        } else {
            "global"
        }
        .into(),
        status: status.into(),
        transport: s.transport.kind().into(),
        exposure: s.exposure.as_str().into(),
        tools: None,
        error: None,
    };
    let mut out: Vec<McpServerRecord> = cfg
        .servers
        .iter()
        .map(|s| record(s, if s.enabled { "loaded" } else { "disabled" }))
        .collect();
    if !trusted && project.exists() {
        let all = config::load(agent_dir, cwd, true);
        for s in all.servers.iter().filter(|s| s.source == project) {
            out.push(record(s, "skipped"));
        }
    }
    if inspect {
        let mcp = Mcp::start(cfg, cwd);
        mcp.wait_all(Duration::from_secs(3600)).await;
        let mut taken: Vec<String> = Vec::new();
        for (rec, s) in out.iter_mut().zip(mcp.servers.iter()) {
            match s.state() {
                State::Connected(c) => {
                    let tools = c
                        .tools
                        .iter()
                        .map(|t| {
                            let name = naming::tool_name(&s.cfg.name, &t.name, &taken);
                            taken.push(name.clone());
                            McpToolRecord {
                                name,
                                exposure: s.cfg.exposure_of(&t.name).as_str().into(),
                            }
                        })
                        .collect();
                    rec.tools = Some(tools);
                }
                State::Failed(e) => rec.error = Some(e),
                _ => {}
            }
        }
        mcp.shutdown().await;
    }
    (out, errors)
}

/// Lets go of what `s` held in `state`: a connection is closed (stdin,
/// SIGTERM, SIGKILL to the group); a stdio server still connecting gets
/// SIGKILL to its group.
async fn release(s: &Server, state: State) {
    match state {
        State::Connected(c) => c.close().await,
        State::Connecting => {
            let g = s.group.load(std::sync::atomic::Ordering::SeqCst);
            if g != 0 {
                client::kill_group(g);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `codemode` server (pi's default exposure) brings the `codemode`
    /// tool and a `codemode` line in the section; a server that cannot
    /// start is one diagnostic; `autoEnableCodemode: false` keeps the tool
    /// away.
    #[tokio::test]
    async fn codemode_servers_bring_the_codemode_tool_and_failures_are_diagnostics() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path().join("mcp.json"),
            r#"{"mcpServers":{"cm":{"command":"/nonexistent/mcp-server","description":"Code tools"}}}"#,
        )
        .unwrap();
        let cfg = config::load(t.path(), t.path(), false);
        let mcp = Mcp::start(cfg, t.path());
        mcp.wait_all(Duration::from_secs(30)).await;
        let d = mcp.diagnostics();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with("MCP server \"cm\" failed: cannot start /nonexistent/mcp-server"),
            "{d:?}"
        );
        assert_eq!(
            mcp.servers_section().as_deref(),
            Some("<mcp_servers>\nMCP servers whose tools are not declared to you. Call the tools of `codemode` servers from codemode scripts.\n- mcp__cm (codemode): Code tools\n</mcp_servers>")
        );
        let names: Vec<String> = mcp
            .direct_tools()
            .iter()
            .map(|t| t.name().into_owned())
            .collect();
        assert_eq!(names, ["codemode"]);
        std::fs::write(
            t.path().join("mcp.json"),
            r#"{"autoEnableCodemode":false,"mcpServers":{"cm":{"command":"/nonexistent/mcp-server"}}}"#,
        )
        .unwrap();
        let mcp = Mcp::start(config::load(t.path(), t.path(), false), t.path());
        mcp.wait_all(Duration::from_secs(30)).await;
        assert!(mcp.direct_tools().is_empty());
    }
}
