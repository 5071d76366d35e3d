//! OAuth sign-in to streamable HTTP servers, the way pi 1.6.0's `pi mcp
//! login` does it, on the SDK's OAuth support (`rmcp` feature `auth`): an
//! unauthenticated session whose 401 challenge starts discovery
//! (protected-resource metadata, then the authorization server's), a
//! pre-registered client (`oauth.clientId`/`clientSecret`) or dynamic
//! client registration, PKCE authorization in the browser with a loopback
//! callback (`http://127.0.0.1:<port>/callback`, `oauth.callbackPort` or
//! `oauth.callbackUrl`), and the code exchanged for tokens. The tokens are
//! kept where pi keeps them, `<agentDir>/mcp-auth.json` (mode 0600,
//! replaced atomically, other entries untouched), under pi's key
//! `<namespace>|<url>` and in pi's record shape, so a sign-in by either
//! tool serves both; a later connection sends the stored access token.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::config::{OAuth, ServerConfig, Transport};

/// The token file in an agent dir.
pub const FILE: &str = "mcp-auth.json";

/// The store of one agent dir.
#[derive(Clone, Debug, PartialEq)]
pub struct Store {
    pub path: PathBuf,
}

/// Serialises read-modify-write of the file within one process.
static WRITE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Store {
    pub fn new(agent_dir: &Path) -> Store {
        Store {
            path: agent_dir.join(FILE),
        }
    }

    /// pi's key of a server's record.
    pub fn key(cfg: &ServerConfig, url: &str) -> String {
        format!("{}|{url}", cfg.namespace())
    }

    fn read(&self) -> Result<Map<String, Value>, String> {
        match std::fs::read_to_string(&self.path) {
            Ok(t) => match serde_json::from_str(&t) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Err(format!("{}: expected an object", self.path.display())),
                Err(e) => Err(format!("{}: {e}", self.path.display())),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
            Err(e) => Err(format!("{}: {e}", self.path.display())),
        }
    }

    /// The stored record of a server, if any.
    pub fn record(&self, cfg: &ServerConfig, url: &str) -> Option<Value> {
        self.read().ok()?.remove(&Store::key(cfg, url))
    }

    /// The access token to send: the record's, unless it has expired
    /// (`tokensExpireAt`, milliseconds since the epoch).
    pub fn access_token(&self, cfg: &ServerConfig, url: &str) -> Option<String> {
        let r = self.record(cfg, url)?;
        let token = r["tokens"]["access_token"].as_str()?.to_string();
        if let Some(at) = r["tokensExpireAt"].as_f64() {
            if at <= now_ms() as f64 {
                return None;
            }
        }
        Some(token)
    }

    /// Merges `fields` into a server's record (other records and fields
    /// stay), written atomically with mode 0600.
    pub fn update(&self, key: &str, fields: Map<String, Value>) -> Result<(), String> {
        let _g = WRITE.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read()?;
        let rec = all
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !rec.is_object() {
            *rec = Value::Object(Map::new());
        }
        if let Value::Object(m) = rec {
            m.extend(fields);
        }
        let text = serde_json::to_string_pretty(&Value::Object(all)).map_err(|e| e.to_string())?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        crate::atomic_file::write_private_atomic(&self.path, text.as_bytes())
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// How the browser is opened: a function given the authorization URL.
pub type Opener<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// Opens `url` with the desktop's opener (`xdg-open`, `open` on macOS), as
/// pi does; a missing opener is not an error (the URL is printed too).
pub fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

fn auth_err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Signs in to the HTTP server `cfg` (within `limit`) and stores its
/// tokens in `store`; `open` gets the authorization URL.
pub async fn login(
    cfg: &ServerConfig,
    store: &Store,
    limit: Duration,
    open: Opener<'_>,
) -> Result<(), String> {
    let Transport::Http {
        url,
        headers,
        oauth,
        ..
    } = &cfg.transport
    else {
        return Err(format!(
            "MCP server \"{}\" is not an HTTP server; only HTTP servers sign in with OAuth",
            cfg.name
        ));
    };
    let work = login_inner(cfg, url, headers, oauth, store, open);
    match tokio::time::timeout(limit, work).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "sign-in to \"{}\" timed out after {}s",
            cfg.name,
            limit.as_secs_f64()
        )),
    }
}

/// The server's challenge (a 401 or 403 with its `WWW-Authenticate`, `""`
/// without one) to an unauthenticated session: `initialize`, then
/// `notifications/initialized` and `tools/list` (a server may let the
/// handshake through and guard only its methods). `None`: no challenge.
async fn challenge(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<Option<String>, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest013::Client::new();
    let bodies = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
            "clientInfo": {"name": "pi", "version": env!("CARGO_PKG_VERSION")}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
    ];
    let mut session: Option<String> = None;
    for body in bodies {
        let mut req = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(id) = &session {
            req = req.header("mcp-session-id", id.as_str());
        }
        let resp = req.send().await.map_err(|e| format!("{url}: {e}"))?;
        if matches!(resp.status().as_u16(), 401 | 403) {
            return Ok(Some(
                resp.headers()
                    .get("www-authenticate")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string(),
            ));
        }
        if let Some(id) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            session = Some(id.to_string());
        }
        if !resp.status().is_success() {
            return Ok(None);
        }
    }
    Ok(None)
}

async fn login_inner(
    cfg: &ServerConfig,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    oauth: &OAuth,
    store: &Store,
    open: Opener<'_>,
) -> Result<(), String> {
    use rmcp::transport::auth::{AuthorizationManager, AuthorizationRequest, AuthorizationSession};
    let Some(challenge) = challenge(url, headers).await? else {
        return Err(format!(
            "MCP server \"{}\" did not ask for sign-in (no 401 to initialize or tools/list)",
            cfg.name
        ));
    };
    let challenge = Some(challenge).filter(|c| !c.is_empty());
    let mut manager = AuthorizationManager::new_allowing_private_addresses(url)
        .await
        .map_err(auth_err)?;
    if oauth.client_registration == super::config::Registration::Cimd && oauth.client_id.is_none() {
        return Err(format!(
            "MCP server \"{}\": oauth.clientRegistration \"cimd\" is not supported by this toolkit; use \"auto\" or \"dcr\", or set oauth.clientId",
            cfg.name
        ));
    }
    // The authorization server's metadata: from oauth.authServerMetadataUrl
    // when given, else discovered from the challenge.
    let metadata = match &oauth.auth_server_metadata_url {
        Some(u) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let text = reqwest013::Client::new()
                .get(u)
                .header("accept", "application/json")
                .send()
                .await
                .map_err(|e| format!("{u}: {e}"))?
                .text()
                .await
                .map_err(|e| format!("{u}: {e}"))?;
            serde_json::from_str::<rmcp::transport::auth::AuthorizationMetadata>(&text)
                .map_err(|e| format!("{u}: not authorization server metadata: {e}"))?
        }
        None => {
            manager
                .resolve_metadata_from_challenge(challenge.as_deref())
                .await
                .map_err(|e| format!("OAuth discovery failed: {e}"))?
                .metadata
        }
    };
    let as_metadata = serde_json::to_value(&metadata).unwrap_or(Value::Null);
    manager.set_metadata(metadata);

    // The loopback callback.
    let (listener, redirect) = callback_listener(oauth).await?;
    let client_name = oauth.client_name.clone().unwrap_or_else(|| "pi".into());
    let mut request = AuthorizationRequest::new(redirect.clone()).with_client_name(&client_name);
    if let Some(c) = &challenge {
        request = request.with_challenge(c.clone());
    }
    if let Some(scope) = &oauth.scope {
        request = request.with_scopes(scope.split_whitespace().map(str::to_string));
    }
    // A pre-registered client, else one registered now (so its secret can
    // be stored, as pi stores `clientInformation`).
    let (client_id, client_secret) = match &oauth.client_id {
        Some(id) => (id.clone(), oauth.client_secret.clone()),
        None => {
            let scopes = manager.select_scopes(None, &[]);
            let refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
            let reg = manager
                .register_client(&client_name, &redirect, &refs)
                .await
                .map_err(|e| format!("OAuth client registration failed: {e}"))?;
            (reg.client_id, reg.client_secret)
        }
    };
    request = request.with_preregistered_client(client_id.clone());
    if let Some(s) = &client_secret {
        request = request.with_client_secret(s.clone());
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| format!("OAuth authorization failed: {e}"))?;
    let auth_url = session.get_authorization_url().to_string();
    eprintln!("Open this URL to sign in to \"{}\":\n{auth_url}", cfg.name);
    open(&auth_url);
    let callback = wait_callback(&listener, &redirect).await?;
    let tokens = session
        .handle_callback_url(&callback)
        .await
        .map_err(|e| format!("OAuth token exchange failed: {e}"))?;
    let mut tokens = serde_json::to_value(&tokens).map_err(auth_err)?;
    // The server's word for it ("Bearer"), as pi stores it.
    if tokens["token_type"].as_str() == Some("bearer") {
        tokens["token_type"] = json!("Bearer");
    }
    let mut info = Map::new();
    info.insert("client_id".into(), json!(client_id));
    if let Some(s) = client_secret {
        info.insert("client_secret".into(), json!(s));
    }
    info.insert("client_name".into(), json!(client_name));
    info.insert("redirect_uris".into(), json!([redirect]));
    let mut fields = Map::new();
    fields.insert("serverUrl".into(), json!(url));
    fields.insert(
        "discovery".into(),
        json!({"authorizationServerMetadata": as_metadata}),
    );
    fields.insert("clientInformation".into(), Value::Object(info));
    if let Some(secs) = tokens["expires_in"].as_f64() {
        fields.insert(
            "tokensExpireAt".into(),
            json!((now_ms() as f64 + secs * 1000.0) as u64),
        );
    }
    fields.insert("tokens".into(), tokens);
    store.update(&Store::key(cfg, url), fields)
}

/// The listener for the redirect and the redirect URI: `oauth.callbackUrl`
/// as given, else `http://127.0.0.1:<callbackPort or a free port>/callback`.
async fn callback_listener(oauth: &OAuth) -> Result<(tokio::net::TcpListener, String), String> {
    if let Some(u) = &oauth.callback_url {
        let parsed = reqwest013::Url::parse(u).map_err(|e| format!("oauth.callbackUrl: {e}"))?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        let host = match parsed.host_str() {
            Some("[::1]") | Some("::1") => "::1",
            _ => "127.0.0.1",
        };
        let l = tokio::net::TcpListener::bind((host, port))
            .await
            .map_err(|e| format!("cannot listen on {host}:{port} for the OAuth callback: {e}"))?;
        return Ok((l, u.clone()));
    }
    let port = oauth.callback_port.unwrap_or(0);
    let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port} for the OAuth callback: {e}"))?;
    let port = l.local_addr().map_err(auth_err)?.port();
    Ok((l, format!("http://127.0.0.1:{port}/callback")))
}

/// Serves the loopback listener until the browser arrives at the redirect
/// path with `code` (or `error`); the full callback URL.
async fn wait_callback(
    listener: &tokio::net::TcpListener,
    redirect: &str,
) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let base = reqwest013::Url::parse(redirect).map_err(auth_err)?;
    loop {
        let (mut sock, _) = listener.accept().await.map_err(auth_err)?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 2048];
        // The request line and headers (a GET has no body).
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
            match tokio::time::timeout(Duration::from_secs(10), sock.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let head = String::from_utf8_lossy(&buf);
        let target = head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("/");
        let Ok(full) = base.join(target) else {
            continue;
        };
        if full.path() != base.path() {
            let _ = sock
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let q: std::collections::HashMap<String, String> =
            full.query_pairs().into_owned().collect();
        let (status, page) = if q.contains_key("code") {
            ("200 OK", "Signed in. You can close this window.")
        } else {
            (
                "400 Bad Request",
                "Sign-in failed. You can close this window.",
            )
        };
        let body = format!("<!doctype html><title>pi</title><p>{page}</p>\n");
        let _ = sock
            .write_all(
                format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
        if q.contains_key("code") {
            return Ok(full.to_string());
        }
        if let Some(e) = q.get("error") {
            let d = q.get("error_description").map(|d| format!(": {d}"));
            return Err(format!(
                "the authorization server refused: {e}{}",
                d.unwrap_or_default()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http_cfg(dir: &Path) -> ServerConfig {
        std::fs::write(
            dir.join("mcp.json"),
            r#"{"mcpServers":{"my-srv":{"url":"http://127.0.0.1:9/mcp"}}}"#,
        )
        .unwrap();
        let cfg = super::super::config::load(dir, dir, false);
        cfg.servers[0].clone()
    }

    /// Records live under pi's key, the file is private, other records and
    /// fields survive an update, and an expired token is not sent.
    #[test]
    fn store_keeps_pi_records_private_and_merged() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let cfg = http_cfg(t.path());
        let store = Store::new(t.path());
        let url = "http://127.0.0.1:9/mcp";
        assert_eq!(Store::key(&cfg, url), "mcp__my_srv|http://127.0.0.1:9/mcp");
        std::fs::write(
            &store.path,
            r#"{"other|http://x":{"tokens":{"access_token":"keep"}}}"#,
        )
        .unwrap();
        let far = now_ms() as u64 + 3_600_000;
        let mut f = Map::new();
        f.insert(
            "tokens".into(),
            json!({"access_token": "a1", "token_type": "Bearer"}),
        );
        f.insert("tokensExpireAt".into(), json!(far));
        f.insert("codeVerifier".into(), json!("v"));
        store.update(&Store::key(&cfg, url), f).unwrap();
        assert_eq!(store.access_token(&cfg, url).as_deref(), Some("a1"));
        let mode = std::fs::metadata(&store.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut f = Map::new();
        f.insert("tokensExpireAt".into(), json!(1));
        store.update(&Store::key(&cfg, url), f).unwrap();
        assert_eq!(store.access_token(&cfg, url), None, "expired");
        let all: Value =
            serde_json::from_str(&std::fs::read_to_string(&store.path).unwrap()).unwrap();
        assert_eq!(all["other|http://x"]["tokens"]["access_token"], "keep");
        assert_eq!(
            all["mcp__my_srv|http://127.0.0.1:9/mcp"]["codeVerifier"],
            "v"
        );
        // No temp file left beside it.
        let names: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    /// A broken token file is an error naming it, never overwritten.
    #[test]
    fn broken_store_is_not_overwritten() {
        let t = tempfile::tempdir().unwrap();
        let store = Store::new(t.path());
        std::fs::write(&store.path, "{oops").unwrap();
        let err = store.update("k", Map::new()).unwrap_err();
        assert!(err.starts_with(&store.path.display().to_string()), "{err}");
        assert_eq!(std::fs::read_to_string(&store.path).unwrap(), "{oops");
    }
}
