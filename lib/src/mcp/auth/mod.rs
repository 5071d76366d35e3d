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
//! tool serves both; a later connection sends the stored access token,
//! refreshed with the stored refresh token once it has expired or the
//! server rejects it. Beyond pi: `oauth.grantType: "client_credentials"`
//! (a secret or a signed JWT) and `"enterprise"` (an IdP's ID token
//! exchanged for an ID-JAG) get tokens without a browser, `oauth.clientMetadataUrl` is the client ID
//! when the authorization server supports Client ID Metadata Documents, a
//! 2025-03-26 server's own root metadata is used when discovery finds no
//! matching issuer, and a 403 `insufficient_scope` is remembered
//! (`stepUpScope`) so the next sign-in asks for the wider scope.

mod discovery;
mod store;
mod token;

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::config::{Grant, OAuth, Registration, ServerConfig, Transport};
use discovery::{challenge, discover};
use store::union_scopes;
pub use store::{Store, FILE};
pub use token::{bearer, provider_token};
use token::{client_credentials, save_tokens};

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
    if let Transport::Http {
        auth_provider: Some(p),
        ..
    } = &cfg.transport
    {
        // pi 1.6.0's words (`pi mcp login`, exit 1).
        return Err(format!(
            "MCP server \"{}\" uses the credentials of provider \"{p}\". Run \"pi auth login {p}\".",
            cfg.name
        ));
    }
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
    if let Some(e) = super::urls::credentials_error(url) {
        return Err(e);
    }
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
async fn login_inner(
    cfg: &ServerConfig,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    oauth: &OAuth,
    store: &Store,
    open: Opener<'_>,
) -> Result<(), String> {
    use rmcp::transport::auth::{AuthorizationManager, AuthorizationRequest, AuthorizationSession};
    if oauth.grant != Grant::AuthorizationCode {
        return client_credentials(cfg, url, headers, oauth, store)
            .await
            .map(|_| ());
    }
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
    if oauth.client_registration == Registration::Cimd
        && oauth.client_id.is_none()
        && oauth.client_metadata_url.is_none()
    {
        return Err(format!(
            "MCP server \"{}\": oauth.clientRegistration \"cimd\" needs oauth.clientMetadataUrl (the URL of this client's metadata document); or use \"auto\" or \"dcr\", or set oauth.clientId",
            cfg.name
        ));
    }
    let metadata = discover(&manager, url, oauth, challenge.as_deref()).await?;
    let as_metadata = serde_json::to_value(&metadata).unwrap_or(Value::Null);
    let cimd_supported = as_metadata["client_id_metadata_document_supported"] == json!(true);
    manager.set_metadata(metadata);

    // The loopback callback.
    let (listener, redirect) = callback_listener(oauth).await?;
    let client_name = oauth.client_name.clone().unwrap_or_else(|| "pi".into());
    let mut request = AuthorizationRequest::new(redirect.clone()).with_client_name(&client_name);
    if let Some(c) = &challenge {
        request = request.with_challenge(c.clone());
    }
    // The configured scope, else what the server asks for (the challenge,
    // else its advertised scopes), plus any wider scope a 403 asked for.
    let step_up = store
        .record(cfg, url)
        .and_then(|r| r["stepUpScope"].as_str().map(str::to_string));
    match (&oauth.scope, &step_up) {
        (Some(scope), _) => {
            let all = union_scopes(scope, step_up.as_deref().unwrap_or(""));
            request = request.with_scopes(all.split_whitespace().map(str::to_string));
        }
        (None, Some(up)) => {
            let first = manager.select_initial_scopes(&[]).await.join(" ");
            let all = union_scopes(&first, up);
            request = request.with_scopes(all.split_whitespace().map(str::to_string));
        }
        (None, None) => {}
    }
    // A pre-registered client; else the configured metadata document when
    // the server supports documents (and registration is not forced);
    // else one registered now (so its secret can be stored, as pi stores
    // `clientInformation`).
    let use_cimd = oauth.client_id.is_none()
        && oauth.client_metadata_url.is_some()
        && oauth.client_registration != Registration::Dcr
        && cimd_supported;
    if oauth.client_registration == Registration::Cimd && oauth.client_id.is_none() && !use_cimd {
        return Err(format!(
            "MCP server \"{}\": the authorization server does not support client ID metadata documents (oauth.clientRegistration \"cimd\")",
            cfg.name
        ));
    }
    let (client_id, client_secret) = match (&oauth.client_id, &oauth.client_metadata_url) {
        (Some(id), _) => (id.clone(), oauth.client_secret.clone()),
        (None, Some(doc)) if use_cimd => (doc.clone(), None),
        _ => {
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
    let tokens = serde_json::to_value(&tokens).map_err(auth_err)?;
    let mut info = Map::new();
    info.insert("client_id".into(), json!(client_id));
    if let Some(s) = client_secret {
        info.insert("client_secret".into(), json!(s));
    }
    info.insert("client_name".into(), json!(client_name));
    info.insert("redirect_uris".into(), json!([redirect]));
    save_tokens(store, cfg, url, &as_metadata, info, tokens)
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
    use super::store::now_ms;
    use super::token::client_assertion;
    use super::*;
    use std::path::Path;

    fn http_cfg(dir: &Path) -> ServerConfig {
        std::fs::write(
            dir.join("mcp.json"),
            r#"{"mcpServers":{"my-srv":{"url":"http://127.0.0.1:9/mcp"}}}"#,
        )
        .unwrap();
        let cfg = crate::mcp::config::load(dir, dir, false);
        cfg.servers[0].clone()
    }

    /// `auth.provider`'s token: an API key, an unexpired OAuth login's
    /// `access`; nothing for an expired login, a provider without a
    /// credential, or one the model registry does not know.
    #[test]
    fn provider_token_reads_the_providers_credential() {
        let t = tempfile::tempdir().unwrap();
        let auth = json!({
            "openai": {"type": "api_key", "key": "!echo sk-1"},
            "anthropic": {"type": "oauth", "access": "a-1", "refresh": "r", "expires": 9_999_999_999_999u64},
            "github-copilot": {"type": "oauth", "access": "old", "refresh": "r", "expires": 1000},
            "nosuch": {"type": "api_key", "key": "k"}
        });
        std::fs::write(t.path().join("auth.json"), auth.to_string()).unwrap();
        let tok = |p: &str| provider_token(t.path(), p);
        assert_eq!(tok("openai"), Ok(Some("sk-1".into())));
        assert_eq!(tok("anthropic"), Ok(Some("a-1".into())));
        assert_eq!(tok("github-copilot"), Ok(None));
        assert_eq!(tok("nosuch"), Ok(None));
        std::fs::write(t.path().join("auth.json"), "{").unwrap();
        assert!(tok("openai").is_err_and(|e| e.contains("auth.json")));
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

    /// A loopback token endpoint answering each POST with the next of
    /// `replies` (status, JSON); the requests (head and body) it got.
    async fn token_server(
        replies: Vec<(u16, Value)>,
    ) -> (String, tokio::task::JoinHandle<Vec<String>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", l.local_addr().unwrap());
        let h = tokio::spawn(async move {
            let mut got = Vec::new();
            for (status, body) in replies {
                let (mut sock, _) = l.accept().await.unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = sock.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len: usize = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len || n == 0 {
                            got.push(text);
                            break;
                        }
                    }
                }
                let b = body.to_string();
                let resp = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}",
                    b.len()
                );
                sock.write_all(resp.as_bytes()).await.unwrap();
            }
            got
        });
        (url, h)
    }

    /// An expired token is refreshed with the stored refresh token, client
    /// and token endpoint (HTTP Basic with the stored secret); the new
    /// tokens are stored (the refresh token kept when the answer has none)
    /// and other records stay. A token the server rejected is refreshed
    /// even before it expires; a refused refresh sends nothing.
    #[tokio::test]
    async fn expired_or_rejected_token_is_refreshed() {
        let t = tempfile::tempdir().unwrap();
        let cfg = http_cfg(t.path());
        let store = Store::new(t.path());
        let url = "http://127.0.0.1:9/mcp";
        let (endpoint, server) = token_server(vec![
            (
                200,
                json!({"access_token": "a2", "token_type": "bearer", "expires_in": 3600}),
            ),
            (
                200,
                json!({"access_token": "a3", "token_type": "Bearer", "refresh_token": "r3"}),
            ),
            (400, json!({"error": "invalid_grant"})),
        ])
        .await;
        let rec = json!({
            "serverUrl": url,
            "tokens": {"access_token": "a1", "token_type": "Bearer", "refresh_token": "r1"},
            "tokensExpireAt": 1,
            "clientInformation": {"client_id": "cid", "client_secret": "s:1"},
            "discovery": {"authorizationServerMetadata": {"token_endpoint": endpoint}},
        });
        std::fs::write(
            &store.path,
            json!({"other|http://x": {"tokens": {"access_token": "keep"}}, Store::key(&cfg, url): rec}).to_string(),
        )
        .unwrap();
        assert_eq!(
            bearer(&cfg, &store, false).await.unwrap().as_deref(),
            Some("a2")
        );
        let r = store.record(&cfg, url).unwrap();
        assert_eq!(r["tokens"]["access_token"], "a2");
        assert_eq!(r["tokens"]["refresh_token"], "r1", "kept");
        assert!(r["tokensExpireAt"].as_u64().unwrap() > now_ms() as u64);
        // Valid now: sent as stored, no request.
        assert_eq!(store.access_token(&cfg, url).as_deref(), Some("a2"));
        // Rejected by the server: refreshed although it has not expired;
        // an answer without expires_in drops the old expiry.
        assert_eq!(
            bearer(&cfg, &store, true).await.unwrap().as_deref(),
            Some("a3")
        );
        let r = store.record(&cfg, url).unwrap();
        assert_eq!(r["tokens"]["refresh_token"], "r3");
        assert!(r.get("tokensExpireAt").is_none(), "{r}");
        // A refused refresh: nothing to send (the server then asks for sign-in).
        assert_eq!(bearer(&cfg, &store, true).await.unwrap(), None);
        assert_eq!(
            store.record(&cfg, url).unwrap()["tokens"]["access_token"],
            "a3"
        );
        let got = server.await.unwrap();
        assert!(got[0].starts_with("POST /token "), "{}", got[0]);
        assert!(got[0].contains("grant_type=refresh_token&refresh_token=r1&resource=http%3A%2F%2F127.0.0.1%3A9%2Fmcp"), "{}", got[0]);
        // Basic auth of form-encoded "cid" and "s:1".
        assert!(
            got[0]
                .to_ascii_lowercase()
                .contains("authorization: basic y2lkonmlm0ex"),
            "{}",
            got[0]
        );
        assert!(got[1].contains("refresh_token=r1&"), "{}", got[1]);
        assert!(got[2].contains("refresh_token=r3&"), "{}", got[2]);
        let all: Value =
            serde_json::from_str(&std::fs::read_to_string(&store.path).unwrap()).unwrap();
        assert_eq!(all["other|http://x"]["tokens"]["access_token"], "keep");
    }

    /// A `private_key_jwt` assertion: ES256 over `header.claims` with the
    /// PEM key, verifiable with its public key; `iss`/`sub` the client,
    /// `aud` as given, a short validity. A bad key is an error, no panic.
    #[test]
    fn client_assertion_is_a_verifiable_es256_jwt() {
        use base64::Engine;
        use ring::signature::{
            EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING,
        };
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let std = base64::engine::general_purpose::STANDARD;
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            std.encode(pkcs8.as_ref())
        );
        let jwt = client_assertion(&pem, "ES256", "cid", "http://as.example").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header: Value = serde_json::from_slice(&b64.decode(parts[0]).unwrap()).unwrap();
        let claims: Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(header, json!({"alg": "ES256", "typ": "JWT"}));
        assert_eq!(
            (&claims["iss"], &claims["sub"], &claims["aud"]),
            (&json!("cid"), &json!("cid"), &json!("http://as.example"))
        );
        assert_eq!(
            claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
            300
        );
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let public = ring::signature::UnparsedPublicKey::new(
            &ECDSA_P256_SHA256_FIXED,
            key.public_key().as_ref(),
        );
        let input = format!("{}.{}", parts[0], parts[1]);
        public
            .verify(input.as_bytes(), &b64.decode(parts[2]).unwrap())
            .unwrap();
        assert!(client_assertion("not a key", "ES256", "cid", "a").is_err());
        assert!(client_assertion(&pem, "RS256", "cid", "a")
            .unwrap_err()
            .contains("RSA"));
    }

    /// Sign-out drops one record and keeps the others; a second sign-out
    /// finds nothing.
    #[test]
    fn remove_drops_one_record() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let store = Store::new(t.path());
        std::fs::write(&store.path, r#"{"a|u":{"tokens":{}},"b|u":{"tokens":{}}}"#).unwrap();
        assert!(store.remove("a|u").unwrap());
        assert!(!store.remove("a|u").unwrap());
        let all: Value =
            serde_json::from_str(&std::fs::read_to_string(&store.path).unwrap()).unwrap();
        assert_eq!(all, json!({"b|u": {"tokens": {}}}));
        let mode = std::fs::metadata(&store.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn step_up_scopes_accumulate() {
        assert_eq!(union_scopes("a b", "b c"), "a b c");
        assert_eq!(union_scopes("", "x"), "x");
        let t = tempfile::tempdir().unwrap();
        let cfg = http_cfg(t.path());
        let store = Store::new(t.path());
        let url = "http://127.0.0.1:9/mcp";
        store
            .note_step_up(&cfg, url, "mcp:basic mcp:write")
            .unwrap();
        store
            .note_step_up(&cfg, url, "mcp:admin mcp:basic")
            .unwrap();
        assert_eq!(
            store.record(&cfg, url).unwrap()["stepUpScope"],
            "mcp:basic mcp:write mcp:admin"
        );
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
