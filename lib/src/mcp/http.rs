//! The streamable HTTP transport of one server: the SDK's client with the
//! entry's `headers` sent on every request, on a reqwest client that notes
//! an SSE event over the SDK's 16 MiB cap (the SDK ends the connection on
//! it) so the connection can say why instead of only "MCP connection
//! closed".

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures_util::stream::{BoxStream, StreamExt};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::transport::StreamableHttpClientTransport;
use sse_stream::Sse;

use super::stdio::Oversize;

/// The transport for `url` (with `bearer` as the `Authorization: Bearer`
/// token); a header that is not a valid HTTP header is an error naming it.
/// `over` is set when the server sends a message over the cap.
pub fn transport(
    url: &str,
    headers: &BTreeMap<String, String>,
    bearer: Option<String>,
    over: &Oversize,
) -> Result<StreamableHttpClientTransport<Watched>, String> {
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
    let client = reqwest013::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(same_origin_redirects())
        .build()
        .map_err(|e| format!("cannot make the HTTP client: {e}"))?;
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url);
    cfg.custom_headers = custom;
    cfg.auth_header = bearer;
    Ok(StreamableHttpClientTransport::with_client(
        Watched {
            client,
            over: over.clone(),
        },
        cfg,
    ))
}

/// The SDK's own client's rules: no idle pool, and only same-origin 307
/// and 308 redirects (they keep the method and body; anything else, or
/// another origin, which would get the session id and headers, is
/// returned as it is), at most 10.
fn same_origin_redirects() -> reqwest013::redirect::Policy {
    reqwest013::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > 10 {
            attempt.error("exceeded 10 redirects")
        } else {
            attempt.follow()
        }
    })
}

/// reqwest, with every response watched for a message over the cap.
#[derive(Clone)]
pub struct Watched {
    client: reqwest013::Client,
    over: Oversize,
}

type Events = BoxStream<'static, Result<Sse, SseError>>;

impl Watched {
    fn watch(&self, events: Events) -> Events {
        let over = self.over.clone();
        events
            .inspect(move |e| {
                if e.as_ref()
                    .is_err_and(|e| e.to_string().contains("exceeded the maximum size"))
                {
                    over.note();
                }
            })
            .boxed()
    }
}

impl StreamableHttpClient for Watched {
    type Error = reqwest013::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let r = self
            .client
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        match r {
            Ok(StreamableHttpPostResponse::Sse(events, id)) => {
                Ok(StreamableHttpPostResponse::Sse(self.watch(events), id))
            }
            // A JSON body over the cap fails only its request, which says
            // so (client.rs).
            other => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<Events, StreamableHttpError<Self::Error>> {
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map(|events| self.watch(events))
    }
}
