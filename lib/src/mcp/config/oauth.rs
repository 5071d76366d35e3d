//! An `mcp.json` entry's `oauth` object: how the client registers with the
//! authorization server, which grant it uses, the enterprise identity
//! provider, and the checks pi 1.6.0 applies to each field (unknown keys
//! ignored, URLs https or loopback, `${VAR}` and `!command` expanded in the
//! secret).

use serde_json::{Map, Value};

use super::expand_value;
use crate::mcp::urls::{is_secure as secure_url, SECURE_URL};

/// How a client registers with the authorization server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Registration {
    #[default]
    Auto,
    Dcr,
    Cimd,
}

/// An entry's `oauth` object, as pi 1.6.0 validates it (unknown keys are
/// ignored, as pi does).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OAuth {
    pub client_id: Option<String>,
    /// `${VAR}` and `!command` expanded.
    pub client_secret: Option<String>,
    pub callback_port: Option<u16>,
    pub callback_url: Option<String>,
    pub scope: Option<String>,
    pub client_name: Option<String>,
    pub client_registration: Registration,
    pub auth_server_metadata_url: Option<String>,
    /// Ours (pi has no such field; pi ignores it): the URL of the client's
    /// own Client ID Metadata Document, used as the client ID when the
    /// authorization server supports documents (pi uses its fixed
    /// `https://pi.dev/oauth/client.json` instead).
    pub client_metadata_url: Option<String>,
    /// Ours: `"client_credentials"` signs in without a browser, with
    /// `clientId`/`clientSecret` (machine-to-machine); the default is the
    /// browser's authorization code flow.
    pub grant: Grant,
    /// Ours: a PEM PKCS#8 private key (`${VAR}`/`!command` expanded); with
    /// `grantType: "client_credentials"` the client authenticates with a
    /// signed JWT (`private_key_jwt`, RFC 7523) instead of a secret.
    pub private_key: Option<String>,
    /// Ours: the JWT algorithm for `privateKey`, `ES256` (default) or `RS256`.
    pub signing_algorithm: Option<String>,
    /// Ours: for `grantType: "enterprise"`, the enterprise identity
    /// provider whose ID token is exchanged for an ID-JAG (SEP-990).
    pub idp: Option<Idp>,
}

/// `oauth.idp` (ours): the enterprise identity provider of the
/// `"enterprise"` grant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Idp {
    pub token_endpoint: String,
    pub client_id: String,
    /// `${VAR}` and `!command` expanded.
    pub client_secret: Option<String>,
    /// The user's ID token from the IdP; `${VAR}` and `!command` expanded.
    pub id_token: String,
}

/// The OAuth grant a server's tokens come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Grant {
    #[default]
    AuthorizationCode,
    ClientCredentials,
    /// Enterprise-managed authorization (SEP-990): the IdP's ID token is
    /// exchanged for an ID-JAG (RFC 8693), then for an access token with
    /// the JWT bearer grant (RFC 7523).
    Enterprise,
}

pub(super) fn oauth_field(m: &Map<String, Value>, name: &str) -> Result<OAuth, String> {
    let Some(v) = m.get("oauth") else {
        return Ok(OAuth::default());
    };
    let e = |msg: &str| format!("server \"{name}\": oauth{msg}");
    let Value::Object(o) = v else {
        return Err(e(" must be an object"));
    };
    let string = |k: &str, msg: &str| -> Result<Option<String>, String> {
        match o.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(e(&format!(".{k} {msg}"))),
        }
    };
    let mut out = OAuth {
        client_id: string("clientId", "must be a string")?,
        client_secret: string("clientSecret", "must be a string")?.map(|s| expand_value(&s)),
        scope: string("scope", "must be a string")?,
        ..OAuth::default()
    };
    out.callback_port = match o.get("callbackPort") {
        None => None,
        Some(p) => Some(
            p.as_u64()
                .filter(|p| (1..=65535).contains(p))
                .map(|p| p as u16)
                .ok_or_else(|| e(".callbackPort must be a port number"))?,
        ),
    };
    out.callback_url = match o.get("callbackUrl") {
        None => None,
        Some(Value::String(u)) if crate::mcp::urls::is_callback(u) => Some(u.clone()),
        Some(_) => {
            return Err(e(
                ".callbackUrl must be an http URI on localhost, 127.0.0.1, or [::1] without query or fragment",
            ))
        }
    };
    out.client_name = match o.get("clientName") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => return Err(e(".clientName must be a non-empty string")),
    };
    out.client_registration = match o.get("clientRegistration") {
        None => Registration::Auto,
        Some(v) => match v.as_str() {
            Some("auto") => Registration::Auto,
            Some("dcr") => Registration::Dcr,
            Some("cimd") => Registration::Cimd,
            _ => {
                return Err(e(
                    ".clientRegistration must be \"auto\", \"dcr\", or \"cimd\"",
                ))
            }
        },
    };
    let url_field = |k: &str| match o.get(k) {
        None => Ok(None),
        Some(Value::String(u)) if secure_url(u) => Ok(Some(u.clone())),
        Some(_) => Err(e(&format!(".{k} must be {SECURE_URL}"))),
    };
    out.auth_server_metadata_url = url_field("authServerMetadataUrl")?;
    out.client_metadata_url = url_field("clientMetadataUrl")?;
    out.grant = match o.get("grantType") {
        None => Grant::AuthorizationCode,
        Some(v) => match v.as_str() {
            Some("authorization_code") => Grant::AuthorizationCode,
            Some("client_credentials") => Grant::ClientCredentials,
            Some("enterprise") => Grant::Enterprise,
            _ => {
                return Err(e(
                    ".grantType must be \"authorization_code\", \"client_credentials\", or \"enterprise\"",
                ))
            }
        },
    };
    out.idp = match o.get("idp") {
        None => None,
        Some(Value::Object(i)) => {
            let field = |k: &str| match i.get(k) {
                Some(Value::String(v)) if !v.is_empty() => Ok(Some(v.clone())),
                None => Ok(None),
                Some(_) => Err(e(&format!(".idp.{k} must be a non-empty string"))),
            };
            let need = |k: &str| {
                field(k)?.ok_or_else(|| e(&format!(".idp.{k} must be a non-empty string")))
            };
            let token_endpoint = need("tokenEndpoint")?;
            if !secure_url(&token_endpoint) {
                return Err(e(&format!(".idp.tokenEndpoint must be {SECURE_URL}")));
            }
            Some(Idp {
                token_endpoint,
                client_id: need("clientId")?,
                client_secret: field("clientSecret")?.map(|s| expand_value(&s)),
                id_token: expand_value(&need("idToken")?),
            })
        }
        Some(_) => return Err(e(".idp must be an object")),
    };
    if out.grant == Grant::Enterprise && out.idp.is_none() {
        return Err(e(".grantType \"enterprise\" needs oauth.idp"));
    }
    if out.grant == Grant::Enterprise && out.client_id.is_none() {
        return Err(e(".grantType \"enterprise\" needs oauth.clientId"));
    }
    out.private_key = string("privateKey", "must be a string")?.map(|s| expand_value(&s));
    out.signing_algorithm = match o.get("signingAlgorithm") {
        None => None,
        Some(Value::String(a)) if a == "ES256" || a == "RS256" => Some(a.clone()),
        Some(_) => return Err(e(".signingAlgorithm must be \"ES256\" or \"RS256\"")),
    };
    if out.grant == Grant::ClientCredentials && out.client_id.is_none() {
        return Err(e(".grantType \"client_credentials\" needs oauth.clientId"));
    }
    Ok(out)
}
