//! One connection to one MCP server on the official SDK (`rmcp`): a child
//! process in its own process group (stdio, [`super::stdio`]: ended with
//! everything it started, its messages capped) or a streamable HTTP endpoint,
//! the `initialize` → `notifications/initialized` → `tools/list` handshake
//! within the server's timeout, and `tools/call` with a progress token
//! (progress resets the timeout and reaches the caller as [`Progress`])
//! that is cancelled with `notifications/cancelled` on abort.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, Implementation, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, RootsCapabilities, ServerResult,
};
// Roots are deprecated in the newest protocol drafts; pi 1.6.0 (protocol
// 2025-11-25) still offers them, and servers such as server-filesystem use
// them.
#[allow(deprecated)]
use rmcp::model::{ListRootsResult, Root};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::{Elicitation, ServerConfig, Transport};
use super::stdio::Oversize;

/// The last bytes a stdio server wrote to stderr (for diagnostics).
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<u8>>>);

impl StderrTail {
    const MAX: usize = 2048;

    fn push(&self, bytes: &[u8]) {
        if let Ok(mut q) = self.0.lock() {
            q.extend(bytes);
            while q.len() > Self::MAX {
                q.pop_front();
            }
        }
    }

    /// The last non-empty line.
    pub fn last_line(&self) -> Option<String> {
        let q = self.0.lock().ok()?;
        let v: Vec<u8> = q.iter().copied().collect();
        String::from_utf8_lossy(&v)
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    }
}

/// One `notifications/progress` of a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

impl Progress {
    /// pi's text for it: the message, else `Progress <n>` or
    /// `Progress <n>/<total>` (numbers as JavaScript prints them).
    pub fn text(&self) -> String {
        if let Some(m) = self.message.as_deref().filter(|m| !m.is_empty()) {
            return m.to_string();
        }
        let num = |x: f64| {
            if x.fract() == 0.0 && x.abs() < 1e15 {
                format!("{}", x as i64)
            } else {
                format!("{x}")
            }
        };
        match self.total {
            Some(t) => format!("Progress {}/{}", num(self.progress), num(t)),
            None => format!("Progress {}", num(self.progress)),
        }
    }
}

/// Routes each progress notification to the request whose token it
/// carries. A notification may overtake the registration (the request is
/// on the wire before its handle returns): those wait in `early`
/// (bounded) until their request registers.
#[derive(Clone, Default)]
struct ProgressRoutes(Arc<Mutex<Routes>>);

#[derive(Default)]
struct Routes {
    live: HashMap<ProgressToken, tokio::sync::mpsc::UnboundedSender<Progress>>,
    early: VecDeque<(ProgressToken, Progress)>,
}

impl ProgressRoutes {
    const EARLY_MAX: usize = 64;

    fn deliver(&self, p: ProgressNotificationParam) {
        let Ok(mut r) = self.0.lock() else { return };
        let item = Progress {
            progress: p.progress,
            total: p.total,
            message: p.message,
        };
        match r.live.get(&p.progress_token) {
            Some(tx) => {
                let _ = tx.send(item);
            }
            None => {
                r.early.push_back((p.progress_token, item));
                while r.early.len() > Self::EARLY_MAX {
                    r.early.pop_front();
                }
            }
        }
    }

    fn register(&self, token: &ProgressToken) -> tokio::sync::mpsc::UnboundedReceiver<Progress> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        if let Ok(mut r) = self.0.lock() {
            let early = std::mem::take(&mut r.early);
            for (t, p) in early {
                if &t == token {
                    let _ = tx.send(p);
                } else {
                    r.early.push_back((t, p));
                }
            }
            r.live.insert(token.clone(), tx);
        }
        rx
    }

    fn remove(&self, token: &ProgressToken) {
        if let Ok(mut r) = self.0.lock() {
            r.live.remove(token);
        }
    }
}

/// pi's result text for a call cut short by an abort.
pub const ABORTED: &str = "MCP request aborted";

/// The reason `notifications/cancelled` gives on abort (pi's).
const CANCEL_REASON: &str = "AbortError: This operation was aborted";

/// A live session with a server.
pub struct Connection {
    peer: Peer<RoleClient>,
    running: tokio::sync::Mutex<Option<RunningService<RoleClient, Client>>>,
    pub tools: Vec<rmcp::model::Tool>,
    pub instructions: Option<String>,
    pub has_resources: bool,
    pub stderr: StderrTail,
    timeout: Duration,
    routes: ProgressRoutes,
    /// An HTTP server's config and token store, to note a wider scope it
    /// asks for (403 `insufficient_scope`).
    auth: Option<(ServerConfig, super::auth::Store)>,
    /// A stdio server's process (ended by [`Connection::close`]) and
    /// whether it sent a message over the cap.
    process: tokio::sync::Mutex<Option<super::stdio::Process>>,
    oversize: Option<super::stdio::Oversize>,
    name: String,
}

/// What the client tells and answers a server: pi's handshake
/// (`clientInfo.name` "pi", protocol 2025-11-25, the `roots` capability) and
/// the session cwd as the only root.
pub struct Client {
    info: ClientConfig,
    /// The entry's `elicitation` (pi's default: none offered).
    elicitation: super::config::Elicitation,
    cwd: std::path::PathBuf,
    routes: ProgressRoutes,
}

impl Client {
    fn new(cfg: &ServerConfig, cwd: &std::path::Path, routes: &ProgressRoutes) -> Client {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        let mut caps = ClientCapabilities::default();
        caps.roots = Some(RootsCapabilities::default());
        if cfg.elicitation == Elicitation::Defaults {
            // Form elicitation, answered without asking anyone
            // (super::elicit), for an entry that opts in; pi 1.6.0 declares
            // only `roots`.
            caps.elicitation = Some(
                rmcp::model::ElicitationCapability::new()
                    .with_form(rmcp::model::FormElicitationCapability::new()),
            );
        }
        info.capabilities = caps;
        info.client_info = Implementation::new("pi", env!("CARGO_PKG_VERSION"));
        Client {
            info,
            elicitation: cfg.elicitation,
            cwd: cwd.to_path_buf(),
            routes: routes.clone(),
        }
    }
}

#[allow(deprecated)]
impl rmcp::ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<ListRootsResult, rmcp::ErrorData>> + Send + '_
    {
        let name = self
            .cwd
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let root = Root::new(format!("file://{}", self.cwd.display())).with_name(name);
        std::future::ready(Ok(ListRootsResult::new(vec![root])))
    }

    // pi 1.6.0's client offers neither sampling nor elicitation (it
    // declares only `roots`) and answers those requests, like any other it
    // does not know, with JSON-RPC "Method not found: <method>"; so do we
    // (pi 1.6.0 answers so), instead of the SDK's silent decline, unless the entry
    // opts in to elicitation (`"elicitation": "defaults"`, super::elicit).
    fn create_message(
        &self,
        _params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<rmcp::model::CreateMessageResult, rmcp::ErrorData>>
           + Send
           + '_ {
        std::future::ready(Err(not_offered("sampling/createMessage")))
    }

    fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<rmcp::model::ElicitResult, rmcp::ErrorData>> + Send + '_
    {
        std::future::ready(match self.elicitation {
            Elicitation::Defaults => Ok(super::elicit::answer(&request)),
            Elicitation::None => Err(not_offered("elicitation/create")),
        })
    }

    fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<rmcp::model::CustomResult, rmcp::ErrorData>> + Send + '_
    {
        std::future::ready(Err(not_offered(&request.method)))
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.routes.deliver(params);
        std::future::ready(())
    }
}

/// pi's answer to a server request the client does not offer.
fn not_offered(method: &str) -> rmcp::ErrorData {
    rmcp::ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!("Method not found: {method}"),
        None,
    )
}

/// A failed call or connection, as one line.
fn err_text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Connects and lists the tools, all within `cfg.timeout`; `cwd` is the
/// session's, offered as the root.
/// A stdio server's process group is noted in `group` as soon as it is
/// spawned, so a run that ends while it still connects can stop it.
/// An HTTP server's stored OAuth access token (`store`) is sent as a
/// bearer token; a server that asks for sign-in is an error saying how.
pub async fn connect(
    cfg: &ServerConfig,
    session_cwd: &std::path::Path,
    group: &std::sync::atomic::AtomicU32,
    store: Option<&super::auth::Store>,
) -> Result<Connection, String> {
    let stderr = StderrTail::default();
    let routes = ProgressRoutes::default();
    let mut process = None;
    let oversize;
    let running = match &cfg.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let started = super::stdio::start(command, args, env, cwd.as_ref())
                .map_err(|e| format!("cannot start {command}: {e}"))?;
            let (transport, over) = (started.transport, started.oversize);
            group.store(
                u32::try_from(started.process.pgid()).unwrap_or(0),
                std::sync::atomic::Ordering::SeqCst,
            );
            let proc = started.process;
            if let Some(mut err) = started.stderr {
                let tail = stderr.clone();
                tokio::spawn(async move {
                    use tokio::io::AsyncReadExt;
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = err.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        tail.push(&buf[..n]);
                    }
                });
            }
            let shaken = handshake(
                Client::new(cfg, session_cwd, &routes).serve(transport),
                cfg,
                &stderr,
            )
            .await;
            match shaken {
                Ok(r) => {
                    (process, oversize) = (Some(proc), Some(over));
                    r
                }
                Err(e) => {
                    // The transport is gone with the future: stdin is
                    // closed, so the process can end (in the background:
                    // the failure is reported now).
                    tokio::spawn(proc.end());
                    return Err(if over.hit() {
                        Oversize::error(&cfg.name, true)
                    } else {
                        e
                    });
                }
            }
        }
        Transport::Http {
            url,
            headers,
            auth_provider,
            ..
        } => {
            // A user name or password in the URL: refused before anything
            // is sent, as pi's fetch refuses it.
            if let Some(e) = super::urls::credentials_error(url) {
                return Err(e);
            }
            // The stored token (refreshed when it has expired); when the
            // server rejects it, once more with a refreshed one.
            let mut rejected = false;
            let over = Oversize::default();
            oversize = Some(over.clone());
            loop {
                let token = match store {
                    Some(s) => super::auth::bearer(cfg, s, rejected).await?,
                    None => None,
                };
                let had_token = token.is_some();
                let transport = super::http::transport(url, headers, token, &over)?;
                match handshake(
                    Client::new(cfg, session_cwd, &routes).serve(transport),
                    cfg,
                    &stderr,
                )
                .await
                {
                    Ok(r) => break r,
                    Err(e) if is_auth_required(&e) && auth_provider.is_some() => {
                        // pi: "needs sign-in", "sign in with: /login <p> in pi".
                        let p = auth_provider.as_deref().unwrap_or_default();
                        let dir = store.map(|s| s.agent_dir().display().to_string());
                        return Err(format!(
                            "{e}; it uses the credentials of provider \"{p}\": sign in with `/login {p}` in pi or add an api_key entry for \"{p}\" to {}/auth.json",
                            dir.as_deref().unwrap_or("<agentDir>")
                        ));
                    }
                    Err(e) if is_auth_required(&e) && had_token && !rejected => rejected = true,
                    Err(e) if is_auth_required(&e) => {
                        return Err(format!("{e}; {}", sign_in_hint(&cfg.name)))
                    }
                    Err(e) => return Err(oversized(&e, &cfg.name, &over).unwrap_or(e)),
                }
            }
        }
    };
    let peer = running.peer().clone();
    let (instructions, has_resources) = match running.peer_info() {
        Some(i) => (i.instructions.clone(), i.capabilities.resources.is_some()),
        None => (None, false),
    };
    let listed = match tokio::time::timeout(cfg.timeout, peer.list_all_tools()).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(with_stderr(
            format!("tools/list failed: {}", err_text(e)),
            &stderr,
        )),
        Err(_) => Err(timed_out(cfg.timeout)),
    };
    let tools = match listed {
        Ok(t) => t,
        Err(e) => {
            if let Some(p) = process {
                tokio::spawn(async move {
                    let mut running = running;
                    let _ = running.close_with_timeout(super::stdio::EOF_GRACE).await;
                    p.end().await;
                });
            }
            return Err(match oversize {
                Some(o) => oversized(&e, &cfg.name, &o).unwrap_or(e),
                None => e,
            });
        }
    };
    Ok(Connection {
        peer,
        running: tokio::sync::Mutex::new(Some(running)),
        tools,
        instructions,
        has_resources,
        stderr,
        timeout: cfg.timeout,
        routes,
        auth: match (&cfg.transport, store) {
            (
                Transport::Http {
                    auth_provider: None,
                    ..
                },
                Some(s),
            ) => Some((cfg.clone(), s.clone())),
            _ => None,
        },
        process: tokio::sync::Mutex::new(process),
        oversize,
        name: cfg.name.clone(),
    })
}

/// The `WWW-Authenticate` challenge of a 401 (`false`) or 403 (`true`) the
/// HTTP transport hit, found along the error's sources.
fn http_challenge(e: &(dyn std::error::Error + 'static)) -> Option<(bool, String)> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let mut source = Some(e);
    while let Some(cur) = source {
        if let Some(a) = cur.downcast_ref::<AuthRequiredError>() {
            return Some((false, a.www_authenticate_header.clone()));
        }
        if let Some(a) = cur.downcast_ref::<InsufficientScopeError>() {
            return Some((true, a.www_authenticate_header.clone()));
        }
        if let Some(rmcp::ServiceError::TransportSend(t)) = cur.downcast_ref::<rmcp::ServiceError>()
        {
            source = Some(t.error.as_ref());
            continue;
        }
        source = cur.source();
    }
    None
}

/// Whether a connection failed because the server wants (other)
/// credentials.
fn is_auth_required(e: &str) -> bool {
    e.contains("authorization required") || e.contains("Auth required")
}

/// The error of a server `name` whose message went over the cap: one that
/// closed the connection (`over`), or an HTTP answer the SDK refused
/// (`e`); `None` for any other error.
fn oversized(e: &str, name: &str, over: &Oversize) -> Option<String> {
    if over.hit() {
        Some(Oversize::error(name, true))
    } else if e.contains("HTTP response body exceeded the maximum size") {
        Some(Oversize::error(name, false))
    } else {
        None
    }
}

/// pi's words for a request that got no answer within the server's
/// `timeout`.
fn timed_out(d: Duration) -> String {
    format!("MCP request timed out after {}ms", d.as_millis())
}

/// How a connection error that asks for an OAuth sign-in ends.
fn sign_in_hint(server: &str) -> String {
    format!("sign in with `pi-resources mcp login {server}` or /mcp login {server}")
}

/// Whether [`connect`]'s error for `server` is a request to sign in (the
/// manager then counts the server as needing sign-in, not failed).
pub fn asks_sign_in(err: &str, server: &str) -> bool {
    err.ends_with(&sign_in_hint(server))
}

fn with_stderr(msg: String, tail: &StderrTail) -> String {
    match tail.last_line() {
        Some(l) => format!("{msg} (stderr: {l})"),
        None => msg,
    }
}

async fn handshake<F, E>(
    fut: F,
    cfg: &ServerConfig,
    stderr: &StderrTail,
) -> Result<RunningService<RoleClient, Client>, String>
where
    F: std::future::Future<Output = Result<RunningService<RoleClient, Client>, E>>,
    E: std::fmt::Display,
{
    match tokio::time::timeout(cfg.timeout, fut).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(with_stderr(format!("initialize failed: {e}"), stderr)),
        Err(_) => Err(with_stderr(timed_out(cfg.timeout), stderr)),
    }
}

/// Kills a process group (a stdio server that never finished connecting).
pub fn kill_group(pgid: u32) {
    if let Ok(pid) = i32::try_from(pgid) {
        super::stdio::kill_group(pid);
    }
}

impl Connection {
    /// A failed request as one line. An HTTP server's 403
    /// `insufficient_scope` notes the scope it asks for, so the next
    /// sign-in requests it (pi, too, asks for sign-in again), and says so.
    fn request_error(&self, e: rmcp::ServiceError) -> String {
        if let Some(o) = &self.oversize {
            if let Some(t) = oversized(&e.to_string(), &self.name, o) {
                return t;
            }
        }
        if let (Some((cfg, store)), Some((forbidden, header))) = (&self.auth, http_challenge(&e)) {
            let Transport::Http { url, .. } = &cfg.transport else {
                return err_text(e);
            };
            let base = reqwest013::Url::parse(url).ok();
            let params = base
                .as_ref()
                .map(|b| rmcp::transport::auth::WWWAuthenticateParams::parse(&header, b));
            let login = format!("sign in again with `pi-resources mcp login {}`", cfg.name);
            return match params {
                Some(p) if forbidden && p.is_insufficient_scope() => {
                    let scope = p.scope.unwrap_or_default();
                    let noted = store.note_step_up(cfg, url, &scope);
                    let mut msg = format!(
                        "MCP server \"{}\" needs a wider scope (\"{scope}\"); {login}",
                        cfg.name
                    );
                    if let Err(w) = noted {
                        msg.push_str(&format!(" (the scope could not be noted: {w})"));
                    }
                    msg
                }
                _ => format!(
                    "MCP server \"{}\" refused the credentials; {login}",
                    cfg.name
                ),
            };
        }
        with_stderr(err_text(e), &self.stderr)
    }

    /// Whether the transport is gone (the server exited).
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }

    /// Why the connection closed, when it is ours to say: a message over
    /// the cap.
    pub fn closed_error(&self) -> Option<String> {
        self.oversize
            .as_ref()
            .filter(|o| o.hit())
            .map(|_| Oversize::error(&self.name, true))
    }

    /// The text of a failed request `e`: why the connection closed, or
    /// pi's text for the error.
    pub fn failure(&self, e: &str) -> String {
        self.closed_error()
            .unwrap_or_else(|| super::tool::rpc_error_text(e, self.is_closed()))
    }

    /// One request with the server's timeout (reset by progress); its
    /// progress notifications go to `on_progress` as they come. When
    /// `cancel` fires the server gets `notifications/cancelled` and the
    /// answer is [`ABORTED`].
    pub async fn request(
        &self,
        req: ClientRequest,
        cancel: &CancellationToken,
        on_progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<ServerResult, String> {
        let opts = PeerRequestOptions::with_timeout(self.timeout).reset_timeout_on_progress();
        let handle = self
            .peer
            .send_cancellable_request(req, opts)
            .await
            .map_err(|e| self.request_error(e))?;
        let id = handle.id.clone();
        let peer = handle.peer.clone();
        let token = handle.progress_token.clone();
        let mut progress = self.routes.register(&token);
        let response = handle.await_response();
        tokio::pin!(response);
        let out = loop {
            tokio::select! {
                biased;
                Some(p) = progress.recv() => on_progress(p),
                r = &mut response => {
                    // Progress that came just before the answer still counts.
                    while let Ok(p) = progress.try_recv() {
                        on_progress(p);
                    }
                    break r.map_err(|e| self.request_error(e));
                }
                _ = cancel.cancelled() => {
                    let _ = peer
                        .notify_cancelled(CancelledNotificationParam::new(
                            Some(id),
                            Some(CANCEL_REASON.into()),
                        ))
                        .await;
                    break Err(ABORTED.into());
                }
            }
        };
        self.routes.remove(&token);
        out
    }

    /// `tools/call` by the server's own tool name; the result as JSON.
    pub async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        cancel: &CancellationToken,
        on_progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Value, String> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = match args {
            Value::Object(m) => Some(m),
            _ => None,
        };
        let req = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        match self.request(req, cancel, on_progress).await? {
            ServerResult::CallToolResult(r) => serde_json::to_value(r).map_err(err_text),
            other => serde_json::to_value(other).map_err(err_text),
        }
    }

    /// Ends the session: the SDK closes the transport (a stdio server's
    /// stdin, so EOF), then a stdio server's whole process group is ended
    /// ([`super::stdio::Process::end`]: a grace period, SIGTERM, SIGKILL).
    pub async fn close(&self) {
        if let Some(mut r) = self.running.lock().await.take() {
            let _ = r.close_with_timeout(super::stdio::EOF_GRACE).await;
        }
        if let Some(p) = self.process.lock().await.take() {
            p.end().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_text_as_pi_writes_it() {
        let p = |progress, total, message: Option<&str>| Progress {
            progress,
            total,
            message: message.map(str::to_string),
        };
        assert_eq!(p(1.0, Some(3.0), Some("step 1 of 3")).text(), "step 1 of 3");
        assert_eq!(p(2.0, None, None).text(), "Progress 2");
        assert_eq!(p(3.0, Some(3.0), None).text(), "Progress 3/3");
        assert_eq!(p(0.5, Some(1.0), Some("")).text(), "Progress 0.5/1");
    }

    #[test]
    fn early_progress_waits_for_its_request() {
        let routes = ProgressRoutes::default();
        let tok = |n| ProgressToken(rmcp::model::NumberOrString::Number(n));
        let note = |n, progress| {
            let mut p = ProgressNotificationParam::new(tok(n), progress);
            p.message = None;
            p
        };
        routes.deliver(note(7, 1.0));
        routes.deliver(note(8, 1.0));
        let mut rx = routes.register(&tok(7));
        assert_eq!(rx.try_recv().map(|p| p.progress), Ok(1.0));
        assert!(
            rx.try_recv().is_err(),
            "token 8's progress is not token 7's"
        );
        routes.deliver(note(7, 2.0));
        assert_eq!(rx.try_recv().map(|p| p.progress), Ok(2.0));
        routes.remove(&tok(7));
        let mut rx8 = routes.register(&tok(8));
        assert_eq!(rx8.try_recv().map(|p| p.progress), Ok(1.0));
    }
}
