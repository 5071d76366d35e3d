//! Talking to the token endpoint: authorization-code and refresh grants,
//! client credentials (a secret or a signed `private_key_jwt` assertion),
//! the enterprise-managed ID-JAG exchange, storing what comes back as pi
//! records it, and the bearer token a connection sends (stored, refreshed
//! or newly granted; for `auth.provider` the model provider's credential).

use std::path::Path;

use serde_json::{json, Map, Value};

use super::super::config::{Grant, OAuth, ServerConfig, Transport};
use super::auth_err;
use super::discovery::{challenge, discover};
use super::store::{now_ms, Store};

/// `application/x-www-form-urlencoded` of `pairs`.
pub(super) fn form(pairs: &[(&str, &str)]) -> String {
    let mut u = reqwest013::Url::parse("http://x/").expect("a constant URL");
    u.query_pairs_mut().extend_pairs(pairs);
    u.query().unwrap_or("").to_string()
}

/// A request to the token endpoint of `metadata` (RFC 6749 §3.2) with the
/// grant `params`, authenticated as the client: HTTP Basic with a secret
/// (unless the server lists only `client_secret_post`), else the
/// credentials in the body. The token response, or the server's error.
pub(super) async fn token_request(
    metadata: &Value,
    client_id: &str,
    secret: Option<&str>,
    params: &[(&str, &str)],
) -> Result<Value, String> {
    token_request_as(metadata, client_id, secret, true, params).await
}

/// A signed JWT client assertion (RFC 7523 §2.2, `private_key_jwt`):
/// `iss` = `sub` = the client ID, `aud` the authorization server, valid
/// for five minutes, signed with the PEM PKCS#8 key (`ES256` or `RS256`).
pub(super) fn client_assertion(
    pem: &str,
    alg: &str,
    client_id: &str,
    aud: &str,
) -> Result<String, String> {
    use base64::Engine;
    use ring::signature::{
        EcdsaKeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256,
    };
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| "not a PEM key".to_string())?;
    let now = (now_ms() / 1000) as u64;
    let mut jti = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut jti)
        .map_err(|_| "no random numbers".to_string())?;
    let header = json!({"alg": alg, "typ": "JWT"});
    let claims = json!({"iss": client_id, "sub": client_id, "aud": aud,
        "iat": now, "exp": now + 300, "jti": b64.encode(jti)});
    let input = format!(
        "{}.{}",
        b64.encode(header.to_string()),
        b64.encode(claims.to_string())
    );
    let rng = ring::rand::SystemRandom::new();
    let sig = match alg {
        "RS256" => {
            let key =
                RsaKeyPair::from_pkcs8(&der).map_err(|e| format!("not a PKCS#8 RSA key: {e}"))?;
            let mut sig = vec![0u8; key.public().modulus_len()];
            key.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                .map_err(|_| "signing failed".to_string())?;
            sig
        }
        _ => {
            let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
                .map_err(|e| format!("not a PKCS#8 P-256 key: {e}"))?;
            key.sign(&rng, input.as_bytes())
                .map_err(|_| "signing failed".to_string())?
                .as_ref()
                .to_vec()
        }
    };
    Ok(format!("{input}.{}", b64.encode(sig)))
}

/// [`token_request`]; `with_id: false` leaves the client ID out of the body
/// (a JWT assertion names the client).
pub(super) async fn token_request_as(
    metadata: &Value,
    client_id: &str,
    secret: Option<&str>,
    with_id: bool,
    params: &[(&str, &str)],
) -> Result<Value, String> {
    use base64::Engine;
    let endpoint = metadata["token_endpoint"]
        .as_str()
        .ok_or("the authorization server's metadata has no token_endpoint")?;
    let methods: Vec<&str> = metadata["token_endpoint_auth_methods_supported"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let post_only =
        methods.contains(&"client_secret_post") && !methods.contains(&"client_secret_basic");
    let basic = secret.is_some() && !post_only;
    let mut pairs: Vec<(&str, &str)> = params.to_vec();
    if !basic && with_id {
        pairs.push(("client_id", client_id));
        if let Some(s) = secret {
            pairs.push(("client_secret", s));
        }
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut req = reqwest013::Client::new()
        .post(endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(form(&pairs));
    if let (true, Some(s)) = (basic, secret) {
        // RFC 6749 §2.3.1: each part form-encoded, then Base64.
        let enc = |v: &str| form(&[("", v)]).trim_start_matches('=').to_string();
        let cred = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            enc(client_id),
            enc(s)
        ));
        req = req.header("authorization", format!("Basic {cred}"));
    }
    let resp = req.send().await.map_err(|e| format!("{endpoint}: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("{endpoint}: {e}"))?;
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() || body["access_token"].as_str().is_none() {
        let why = match (body["error"].as_str(), body["error_description"].as_str()) {
            (Some(e), Some(d)) => format!("{e}: {d}"),
            (Some(e), None) => e.to_string(),
            _ => format!("HTTP {}", status.as_u16()),
        };
        return Err(format!("the token request failed: {why}"));
    }
    Ok(body)
}

/// Stores a token response under the server's key as pi records it; a
/// response without a refresh token keeps the one stored before.
pub(super) fn save_tokens(
    store: &Store,
    cfg: &ServerConfig,
    url: &str,
    metadata: &Value,
    info: Map<String, Value>,
    mut tokens: Value,
) -> Result<(), String> {
    // The server's word for it ("Bearer"), as pi stores it.
    if tokens["token_type"]
        .as_str()
        .is_some_and(|t| t.eq_ignore_ascii_case("bearer"))
    {
        tokens["token_type"] = json!("Bearer");
    }
    if tokens["refresh_token"].as_str().is_none() {
        if let Some(old) = store
            .record(cfg, url)
            .and_then(|r| r["tokens"]["refresh_token"].as_str().map(str::to_string))
        {
            tokens["refresh_token"] = json!(old);
        }
    }
    let mut fields = Map::new();
    fields.insert("serverUrl".into(), json!(url));
    fields.insert(
        "discovery".into(),
        json!({"authorizationServerMetadata": metadata}),
    );
    fields.insert("clientInformation".into(), Value::Object(info));
    match tokens["expires_in"].as_f64() {
        Some(secs) => {
            fields.insert(
                "tokensExpireAt".into(),
                json!((now_ms() as f64 + secs * 1000.0) as u64),
            );
        }
        None => {
            fields.insert("tokensExpireAt".into(), Value::Null);
        }
    }
    fields.insert("tokens".into(), tokens);
    store.update(&Store::key(cfg, url), fields)
}

/// The access token to send to the HTTP server `cfg` at `url`: the stored
/// one while it is valid (unless `rejected`, the server refused it), else
/// one refreshed with the stored refresh token, else for
/// `oauth.grantType: "client_credentials"` a new one from the token
/// endpoint. `Ok(None)`: nothing to send (the server may ask for sign-in).
pub async fn bearer(
    cfg: &ServerConfig,
    store: &Store,
    rejected: bool,
) -> Result<Option<String>, String> {
    let Transport::Http {
        url,
        headers,
        oauth,
        auth_provider,
    } = &cfg.transport
    else {
        return Ok(None);
    };
    if let Some(p) = auth_provider {
        // `auth.provider`: that provider's credential, never this server's
        // own OAuth tokens.
        let (dir, p) = (store.agent_dir().to_path_buf(), p.clone());
        return tokio::task::spawn_blocking(move || provider_token(&dir, &p))
            .await
            .map_err(|e| format!("internal error: {e}"))?;
    }
    if !rejected {
        if let Some(t) = store.access_token(cfg, url) {
            return Ok(Some(t));
        }
    }
    if let Some(t) = refresh(cfg, url, store).await {
        return Ok(Some(t));
    }
    if oauth.grant != Grant::AuthorizationCode {
        return client_credentials(cfg, url, headers, oauth, store)
            .await
            .map(Some);
    }
    Ok(None)
}

/// The token `auth.provider` sends, read as the model providers read their
/// credentials (`crate::model`): the provider's `auth.json` OAuth login's
/// `access` token while it has not expired (`expires`, in ms; pi 1.6.0 then
/// tries to refresh it, which we cannot do for model providers, so an
/// expired login sends nothing, as pi does when the refresh fails), else its
/// API key in pi's order (`auth.json`, `models.json` `apiKey`, environment;
/// `!command` and `$VAR` resolved). A provider the model registry does not
/// know sends nothing, as in pi 1.6.0. `Err`: a broken
/// `auth.json` or a key that does not resolve.
pub fn provider_token(agent_dir: &Path, provider: &str) -> Result<Option<String>, String> {
    use crate::model::{auth::AuthEntry, auth::AuthFile, ModelError, ModelRegistry};
    let (reg, _) = ModelRegistry::load_lenient(agent_dir, std::env::vars().collect());
    if reg.provider(provider).is_none() {
        return Ok(None);
    }
    let file = AuthFile::load(&agent_dir.join("auth.json")).map_err(|e| e.to_string())?;
    if let Some(AuthEntry::OAuth(o)) = file.get(provider) {
        let live = o
            .get("expires")
            .and_then(Value::as_f64)
            .is_some_and(|e| e > now_ms() as f64);
        let access = o.get("access").and_then(Value::as_str);
        return Ok(access.filter(|a| live && !a.is_empty()).map(str::to_string));
    }
    match reg.api_key(provider, None) {
        Ok(k) => Ok(k.filter(|k| !k.is_empty())),
        Err(ModelError::OAuthUnsupported { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Refreshes the stored tokens (RFC 6749 §6) with the stored refresh
/// token, client and token endpoint; `None` when there is nothing to
/// refresh with or the server refuses.
pub(super) async fn refresh(cfg: &ServerConfig, url: &str, store: &Store) -> Option<String> {
    let rec = store.record(cfg, url)?;
    let refresh_token = rec["tokens"]["refresh_token"].as_str()?;
    let metadata = &rec["discovery"]["authorizationServerMetadata"];
    let info = rec["clientInformation"].as_object()?.clone();
    let client_id = info.get("client_id")?.as_str()?;
    let secret = info.get("client_secret").and_then(Value::as_str);
    let tokens = token_request(
        metadata,
        client_id,
        secret,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("resource", url),
        ],
    )
    .await
    .ok()?;
    let token = tokens["access_token"].as_str()?.to_string();
    save_tokens(store, cfg, url, metadata, info, tokens).ok()?;
    Some(token)
}

/// The grants without a browser, after discovery as for a sign-in: client
/// credentials (RFC 6749 §4.4; MCP's SEP-1046), the client authenticated
/// by `oauth.clientSecret` or a `privateKey` JWT; or enterprise-managed
/// (SEP-990), the IdP's ID token exchanged for an ID-JAG that is the JWT
/// bearer grant. The tokens are stored like a sign-in's.
pub(super) async fn client_credentials(
    cfg: &ServerConfig,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    oauth: &OAuth,
    store: &Store,
) -> Result<String, String> {
    use rmcp::transport::auth::{AuthorizationManager, WWWAuthenticateParams};
    let client_id = oauth.client_id.as_deref().ok_or_else(|| {
        format!(
            "MCP server \"{}\": this oauth.grantType needs oauth.clientId",
            cfg.name
        )
    })?;
    let challenge = challenge(url, headers).await?.filter(|c| !c.is_empty());
    let manager = AuthorizationManager::new_allowing_private_addresses(url)
        .await
        .map_err(auth_err)?;
    let metadata = discover(&manager, url, oauth, challenge.as_deref()).await?;
    let metadata = serde_json::to_value(&metadata).unwrap_or(Value::Null);
    let scope = oauth.scope.clone().or_else(|| {
        let base = reqwest013::Url::parse(url).ok()?;
        WWWAuthenticateParams::parse(challenge.as_deref()?, &base).scope
    });
    let mut params = vec![("grant_type", "client_credentials"), ("resource", url)];
    if let Some(s) = scope.as_deref() {
        params.push(("scope", s));
    }
    // Enterprise-managed: the IdP's ID token becomes an ID-JAG for this
    // authorization server and resource, which is then the grant.
    let jag;
    if let (Grant::Enterprise, Some(idp)) = (oauth.grant, &oauth.idp) {
        let audience = metadata["issuer"].as_str().unwrap_or(url).to_string();
        let mut ex = vec![
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:id-jag",
            ),
            ("subject_token", idp.id_token.as_str()),
            (
                "subject_token_type",
                "urn:ietf:params:oauth:token-type:id_token",
            ),
            ("audience", audience.as_str()),
            ("resource", url),
        ];
        if let Some(s) = scope.as_deref() {
            ex.push(("scope", s));
        }
        let idp_meta = json!({"token_endpoint": idp.token_endpoint});
        let answer = token_request(&idp_meta, &idp.client_id, idp.client_secret.as_deref(), &ex)
            .await
            .map_err(|e| format!("MCP server \"{}\": the IdP token exchange: {e}", cfg.name))?;
        jag = answer["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        params = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", jag.as_str()),
        ];
        if let Some(s) = scope.as_deref() {
            params.push(("scope", s));
        }
    }
    let assertion;
    let secret = match &oauth.private_key {
        Some(pem) => {
            let aud = metadata["issuer"]
                .as_str()
                .or(metadata["token_endpoint"].as_str())
                .unwrap_or(url);
            let alg = oauth.signing_algorithm.as_deref().unwrap_or("ES256");
            assertion = client_assertion(pem, alg, client_id, aud)
                .map_err(|e| format!("MCP server \"{}\": oauth.privateKey: {e}", cfg.name))?;
            params.push((
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ));
            params.push(("client_assertion", &assertion));
            None
        }
        None => oauth.client_secret.as_deref(),
    };
    let with_id = oauth.private_key.is_none();
    let tokens = token_request_as(&metadata, client_id, secret, with_id, &params)
        .await
        .map_err(|e| format!("MCP server \"{}\": {e}", cfg.name))?;
    let token = tokens["access_token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut info = Map::new();
    info.insert("client_id".into(), json!(client_id));
    if let Some(s) = &oauth.client_secret {
        info.insert("client_secret".into(), json!(s));
    }
    save_tokens(store, cfg, url, &metadata, info, tokens)?;
    Ok(token)
}
