//! One connection to one MCP server on the official SDK (`rmcp`): a child
//! process in its own process group (stdio) or a streamable HTTP endpoint,
//! the `initialize` → `notifications/initialized` → `tools/list` handshake
//! within the server's timeout, and `tools/call` with a progress token
//! (progress resets the timeout) that is cancelled on abort.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, Implementation, ProtocolVersion, RootsCapabilities, ServerResult,
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

use super::config::{ServerConfig, Transport};

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

/// A live session with a server.
pub struct Connection {
    peer: Peer<RoleClient>,
    running: tokio::sync::Mutex<Option<RunningService<RoleClient, Client>>>,
    pub tools: Vec<rmcp::model::Tool>,
    pub instructions: Option<String>,
    pub has_resources: bool,
    pub stderr: StderrTail,
    timeout: Duration,
}

/// What the client tells and answers a server: pi's handshake
/// (`clientInfo.name` "pi", protocol 2025-11-25, the `roots` capability) and
/// the session cwd as the only root.
pub struct Client {
    info: ClientConfig,
    cwd: std::path::PathBuf,
}

impl Client {
    fn new(cwd: &std::path::Path) -> Client {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        let mut caps = ClientCapabilities::default();
        caps.roots = Some(RootsCapabilities::default());
        info.capabilities = caps;
        info.client_info = Implementation::new("pi", env!("CARGO_PKG_VERSION"));
        Client {
            info,
            cwd: cwd.to_path_buf(),
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
}

/// A failed call or connection, as one line.
fn err_text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Connects and lists the tools, all within `cfg.timeout`; `cwd` is the
/// session's, offered as the root.
pub async fn connect(
    cfg: &ServerConfig,
    session_cwd: &std::path::Path,
) -> Result<Connection, String> {
    let stderr = StderrTail::default();
    let running = match &cfg.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env);
            if let Some(d) = cwd {
                cmd.current_dir(d);
            }
            let mut wrap = process_wrap::tokio::CommandWrap::from(cmd);
            // Its own process group, so shutdown reaches its children too.
            wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
            let (transport, err) = rmcp::transport::TokioChildProcess::builder(wrap)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start {command}: {e}"))?;
            if let Some(mut err) = err {
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
            handshake(Client::new(session_cwd).serve(transport), cfg, &stderr).await?
        }
        Transport::Http { url, headers } => {
            let transport = super::http::transport(url, headers)?;
            handshake(Client::new(session_cwd).serve(transport), cfg, &stderr).await?
        }
    };
    let peer = running.peer().clone();
    let (instructions, has_resources) = match running.peer_info() {
        Some(i) => (i.instructions.clone(), i.capabilities.resources.is_some()),
        None => (None, false),
    };
    let tools = match tokio::time::timeout(cfg.timeout, peer.list_all_tools()).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            return Err(with_stderr(
                format!("tools/list failed: {}", err_text(e)),
                &stderr,
            ))
        }
        Err(_) => return Err(format!("tools/list timed out after {}", secs(cfg.timeout))),
    };
    Ok(Connection {
        peer,
        running: tokio::sync::Mutex::new(Some(running)),
        tools,
        instructions,
        has_resources,
        stderr,
        timeout: cfg.timeout,
    })
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
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
        Err(_) => Err(with_stderr(
            format!("initialize timed out after {}", secs(cfg.timeout)),
            stderr,
        )),
    }
}

impl Connection {
    /// Whether the transport is gone (the server exited).
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }

    /// One request with the server's timeout (reset by progress), cancelled
    /// with `notifications/cancelled` when `cancel` fires.
    pub async fn request(
        &self,
        req: ClientRequest,
        cancel: &CancellationToken,
    ) -> Result<ServerResult, String> {
        let opts = PeerRequestOptions::with_timeout(self.timeout).reset_timeout_on_progress();
        let handle = self
            .peer
            .send_cancellable_request(req, opts)
            .await
            .map_err(|e| with_stderr(err_text(e), &self.stderr))?;
        let id = handle.id.clone();
        let peer = handle.peer.clone();
        tokio::select! {
            r = handle.await_response() => r.map_err(|e| with_stderr(err_text(e), &self.stderr)),
            _ = cancel.cancelled() => {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("aborted".into()),
                    ))
                    .await;
                Err("aborted".into())
            }
        }
    }

    /// `tools/call` by the server's own tool name; the result as JSON.
    pub async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, String> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = match args {
            Value::Object(m) => Some(m),
            _ => None,
        };
        let req = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        match self.request(req, cancel).await? {
            ServerResult::CallToolResult(r) => serde_json::to_value(r).map_err(err_text),
            other => serde_json::to_value(other).map_err(err_text),
        }
    }

    /// Closes stdin, then SIGTERM, then SIGKILL to the process group (the
    /// SDK's shutdown of a child process).
    pub async fn close(&self) {
        if let Some(mut r) = self.running.lock().await.take() {
            let _ = r.close_with_timeout(Duration::from_secs(3)).await;
        }
    }
}
