//! The streamable HTTP transport of one server: the SDK's client with the
//! entry's `headers` sent on every request.

use std::collections::{BTreeMap, HashMap};

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;

/// The transport for `url` (with `bearer` as the `Authorization: Bearer`
/// token); a header that is not a valid HTTP header is an error naming it.
pub fn transport(
    url: &str,
    headers: &BTreeMap<String, String>,
    bearer: Option<String>,
) -> Result<StreamableHttpClientTransport<reqwest013::Client>, String> {
    let mut custom = HashMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("invalid header name \"{k}\""))?;
        let value =
            HeaderValue::from_str(v).map_err(|_| format!("invalid value for header \"{k}\""))?;
        custom.insert(name, value);
    }
    // reqwest 0.13 is built without its own TLS provider: use the ring
    // provider the workspace's rustls already has (installing twice is a
    // harmless error).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url);
    cfg.custom_headers = custom;
    cfg.auth_header = bearer;
    Ok(StreamableHttpClientTransport::from_config(cfg))
}
