//! Finding the authorization server of an HTTP MCP server: the 401/403
//! challenge an unauthenticated session gets (`initialize`, then
//! `notifications/initialized` and `tools/list`), and the authorization
//! server's metadata, from `oauth.authServerMetadataUrl`, discovery from
//! the challenge, or a 2025-03-26 server's own root metadata.

use serde_json::json;

use super::super::config::OAuth;

/// handshake through and guard only its methods). `None`: no challenge.
pub(super) async fn challenge(
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

/// The authorization server's metadata: from `oauth.authServerMetadataUrl`
/// when given, else discovered from the challenge (protected-resource
/// metadata, then the authorization server's). When that fails, a
/// 2025-03-26 server's own `/.well-known/oauth-authorization-server` is
/// used as that revision defines it (the MCP server's origin is the
/// authorization base URL, so its issuer need not match the resource).
pub(super) async fn discover(
    manager: &rmcp::transport::auth::AuthorizationManager,
    url: &str,
    oauth: &OAuth,
    challenge: Option<&str>,
) -> Result<rmcp::transport::auth::AuthorizationMetadata, String> {
    if let Some(u) = &oauth.auth_server_metadata_url {
        return fetch_metadata(u).await;
    }
    match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(r) => Ok(r.metadata),
        Err(e) => {
            let legacy = reqwest013::Url::parse(url).ok().map(|u| {
                format!(
                    "{}/.well-known/oauth-authorization-server",
                    u.origin().ascii_serialization()
                )
            });
            match legacy {
                Some(l) => fetch_metadata(&l)
                    .await
                    .map_err(|_| format!("OAuth discovery failed: {e}")),
                None => Err(format!("OAuth discovery failed: {e}")),
            }
        }
    }
}

pub(super) async fn fetch_metadata(
    u: &str,
) -> Result<rmcp::transport::auth::AuthorizationMetadata, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let resp = reqwest013::Client::new()
        .get(u)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("{u}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("{u}: HTTP {}", resp.status().as_u16()));
    }
    let text = resp.text().await.map_err(|e| format!("{u}: {e}"))?;
    serde_json::from_str::<rmcp::transport::auth::AuthorizationMetadata>(&text)
        .map_err(|e| format!("{u}: not authorization server metadata: {e}"))
}
