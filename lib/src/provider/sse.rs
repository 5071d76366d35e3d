//! Server-sent events: an incremental decoder over byte chunks, and the
//! streaming HTTP transport every wire API shares (POST a JSON body, check
//! the status, then read SSE events with an idle timeout and cancellation).
//!
//! The decoder follows the WHATWG rules the vendors' SDKs implement: LF, CRLF
//! and CR line ends; a blank line dispatches; `data:` lines join with `\n`;
//! `event:` names the event; `:` lines are comments; one space after the
//! colon is stripped. It works on bytes and only decodes whole lines, so a
//! UTF-8 character split across two chunks is never mangled.
//!
//! The transport turns every failure into a message text shaped like the
//! ones pi shows ("429: {…}", "Connection error.", "terminated: …"), because
//! the agent's retry rule matches on those texts.

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// One dispatched event: its `event:` name (empty when unnamed) and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; empty when the event had none.
    pub event: String,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

/// Incremental SSE decoder: feed chunks with [`SseDecoder::push`], then
/// call [`SseDecoder::finish`] at end of stream.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no line end (so a long line that
    /// arrives in many chunks is scanned once, not once per chunk).
    scanned: usize,
    /// The previous chunk ended in `\r`: a leading `\n` belongs to it.
    skip_lf: bool,
    event: String,
    data: String,
    has_data: bool,
    /// Lines that were neither comments nor known fields.
    foreign_lines: usize,
    first_foreign: Option<String>,
    /// Known field lines seen (data/event/id/retry).
    field_lines: usize,
}

impl SseDecoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events completed by them.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut bytes = chunk;
        if self.skip_lf && !bytes.is_empty() {
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
            self.skip_lf = false;
        }
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        let mut i = self.scanned;
        while i < self.buf.len() {
            match self.buf[i] {
                b'\n' => {
                    self.line_end(start, i, &mut out);
                    i += 1;
                    start = i;
                }
                b'\r' => {
                    self.line_end(start, i, &mut out);
                    i += 1;
                    if i < self.buf.len() {
                        if self.buf[i] == b'\n' {
                            i += 1;
                        }
                    } else {
                        self.skip_lf = true;
                    }
                    start = i;
                }
                _ => i += 1,
            }
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        out
    }

    /// Ends the stream: a last line without a line end is processed, and a
    /// pending event without its blank line is dispatched (servers that close
    /// right after the last `data:` line are common).
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.buf.is_empty() {
            let len = self.buf.len();
            self.line_end(0, len, &mut out);
            self.buf.clear();
            self.scanned = 0;
        }
        self.dispatch(&mut out);
        out
    }

    /// True when the bytes so far look like something other than SSE (lines
    /// that are not fields or comments, and no data line at all).
    pub fn looks_foreign(&self) -> bool {
        self.foreign_lines > 0 && self.field_lines == 0
    }

    /// The first line that was not SSE, shortened, for error messages.
    pub fn first_foreign_line(&self) -> Option<&str> {
        self.first_foreign.as_deref()
    }

    fn line_end(&mut self, start: usize, end: usize, out: &mut Vec<SseEvent>) {
        let line = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
        self.line(&line, out);
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.find(':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match field {
            "data" => {
                self.field_lines += 1;
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => {
                self.field_lines += 1;
                self.event = value.to_string();
            }
            "id" | "retry" => self.field_lines += 1,
            _ => {
                self.foreign_lines += 1;
                if self.first_foreign.is_none() {
                    self.first_foreign = Some(line.chars().take(200).collect());
                }
            }
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data),
            });
        } else {
            self.event.clear();
        }
        self.has_data = false;
    }
}

/// Why a streaming call stopped early. The variant tells the agent's retry
/// rule what kind of failure it was, so it does not have to guess from the
/// message text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The cancel token fired ("Request was aborted").
    Aborted,
    /// The cancel token fired while the request waited for the answer's
    /// headers (pi 1.6.0 says "Request aborted" then, observed on
    /// openai-completions; mid-stream it says "Request was aborted").
    AbortedBeforeAnswer,
    /// An error the provider reported in a well-formed answer (an error
    /// event in the stream, an unknown stop reason…), with the message the
    /// assistant message will carry; only its text says whether it is
    /// transient.
    Error(String),
    /// A non-2xx answer: its status, the message, and the delay the server
    /// asked for (`retry-after-ms` / `Retry-After`), if any.
    Http {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The transport failed: no connection, the idle timeout, or a body
    /// that was cut off or corrupted on the way. Always worth a retry.
    Transport(String),
}

impl Failure {
    /// The message the assistant message carries.
    pub fn message(&self) -> &str {
        match self {
            Failure::Aborted => ABORTED,
            Failure::AbortedBeforeAnswer => ABORTED_BEFORE_ANSWER,
            Failure::Error(m) | Failure::Transport(m) => m,
            Failure::Http { message, .. } => message,
        }
    }
}

/// pi 1.6.0's text for a malformed event on the OpenAI APIs (Chat
/// Completions and Responses): the OpenAI SDK's.
pub const OPENAI_MALFORMED: &str = "Error reading response: malformed server-sent event JSON.";

/// The server-requested delay of an error answer: `retry-after-ms`
/// (milliseconds), else `Retry-After` (seconds, or an HTTP date relative to
/// `now`). Unparsable or negative values are ignored.
pub fn retry_after(
    header: &dyn Fn(&str) -> Option<String>,
    now: time::OffsetDateTime,
) -> Option<Duration> {
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let v = header("retry-after")?;
    let v = v.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let date = parse_http_date(v)?;
    let delta = date - now;
    Some(if delta.is_negative() {
        Duration::ZERO
    } else {
        delta.unsigned_abs()
    })
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form of HTTP dates
/// servers send.
fn parse_http_date(v: &str) -> Option<time::OffsetDateTime> {
    let fmt = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    time::PrimitiveDateTime::parse(v, &fmt)
        .ok()
        .map(time::PrimitiveDateTime::assume_utc)
}

/// pi's text for an aborted request.
pub const ABORTED: &str = "Request was aborted";
/// The same before the answer's headers came.
pub const ABORTED_BEFORE_ANSWER: &str = "Request aborted";

/// How an API words a non-2xx answer: gets the status and the body text.
pub type HttpErrorFormat = fn(u16, &str) -> String;

/// OpenAI-style (as pi 1.6.0 prints it): `<status>: <JSON of body.error or
/// body>` for JSON bodies, `<status> <text>` otherwise, `<status> status
/// code (no body)` when empty.
pub fn openai_http_error(status: u16, body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return format!("{status} status code (no body)");
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(mut o)) => {
            let inner = o.remove("error").unwrap_or(Value::Object(o));
            format!("{status}: {inner}")
        }
        Ok(v) => format!("{status}: {v}"),
        Err(_) => format!("{status} {trimmed}"),
    }
}

/// Anthropic-SDK style: `<status> <body JSON, compact>` (other text as
/// is), `<status> status code (no body)` when empty.
pub fn plain_http_error(status: u16, body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return format!("{status} status code (no body)");
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => format!("{status} {v}"),
        Err(_) => format!("{status} {trimmed}"),
    }
}

/// A human form of a duration: `120s`, `1.5s`, `200ms`.
pub fn human_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn idle_message(d: Duration) -> String {
    format!(
        "Request timed out: no data received for {} (idle timeout)",
        human_duration(d)
    )
}

/// An error and its causes on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// One HTTP request to make.
pub struct HttpCall<'a> {
    /// Full URL.
    pub url: String,
    /// Headers in sending order (later ones win for the same name).
    pub headers: Vec<(String, String)>,
    /// The JSON body, serialised.
    pub body: Vec<u8>,
    /// Give up when nothing arrives for this long.
    pub idle_timeout: Duration,
    /// Cancelling aborts the call.
    pub cancel: &'a CancellationToken,
    /// Wording of non-2xx answers.
    pub http_error: HttpErrorFormat,
}

/// How long the rest of a body after its end marker is waited for (see
/// [`SseStream::finish`]).
const LINGER: Duration = Duration::from_millis(50);

/// An open event stream (the response was 2xx).
pub struct SseStream {
    resp: reqwest::Response,
    decoder: SseDecoder,
    pending: std::collections::VecDeque<SseEvent>,
    idle: Duration,
    cancel: CancellationToken,
    ended: bool,
    /// Bytes received so far.
    pub bytes: usize,
}

/// Opens an OpenAI-style call (`Authorization: Bearer`, JSON body, pi's
/// OpenAI error wording) to `base_url` + `path` — shared by Chat
/// Completions and Responses.
pub async fn open_openai(
    req: &super::Request<'_>,
    path: &str,
    body: Vec<u8>,
    api_headers: Vec<(String, String)>,
) -> Result<SseStream, Failure> {
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    if let Some(k) = &req.api_key {
        headers.push(("authorization".into(), format!("Bearer {k}")));
    }
    headers.extend(api_headers);
    headers.extend(super::model_and_call_headers(req));
    open(HttpCall {
        url: super::join_url(&req.model.base_url, path),
        headers,
        body,
        idle_timeout: req.idle_timeout,
        cancel: &req.cancel,
        http_error: openai_http_error,
    })
    .await
}

/// Sends `call`; on a 2xx answer returns the event stream.
pub async fn open(call: HttpCall<'_>) -> Result<SseStream, Failure> {
    if call.cancel.is_cancelled() {
        return Err(Failure::Aborted);
    }
    // One client per process: building one sets up TLS roots and a
    // connection pool, which costs more than a loopback request.
    static CLIENT: std::sync::OnceLock<Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    let client = match CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .build()
            .map_err(|e| error_chain(&e))
    }) {
        Ok(c) => c.clone(),
        Err(e) => return Err(Failure::Transport(format!("Connection error.: {e}"))),
    };
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in &call.headers {
        let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::from_bytes(k.as_bytes()),
            reqwest::header::HeaderValue::from_str(v),
        ) else {
            return Err(Failure::Error(format!("Invalid HTTP header \"{k}\"")));
        };
        headers.insert(name, value);
    }
    let send = client
        .post(&call.url)
        .headers(headers)
        .body(call.body)
        .send();
    let resp = tokio::select! {
        _ = call.cancel.cancelled() => return Err(Failure::AbortedBeforeAnswer),
        r = tokio::time::timeout(call.idle_timeout, send) => match r {
            Err(_) => return Err(Failure::Transport(idle_message(call.idle_timeout))),
            Ok(Err(e)) => return Err(Failure::Transport(format!("Connection error.: {}", error_chain(&e)))),
            Ok(Ok(r)) => r,
        },
    };
    let status = resp.status();
    if !status.is_success() {
        let headers = resp.headers();
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let retry_after = retry_after(&header, time::OffsetDateTime::now_utc());
        let text = tokio::select! {
            _ = call.cancel.cancelled() => return Err(Failure::Aborted),
            r = tokio::time::timeout(call.idle_timeout, resp.text()) => match r {
                Ok(Ok(t)) => t,
                _ => String::new(),
            },
        };
        return Err(Failure::Http {
            status: status.as_u16(),
            message: (call.http_error)(status.as_u16(), &text),
            retry_after,
        });
    }
    Ok(SseStream {
        resp,
        decoder: SseDecoder::new(),
        pending: Default::default(),
        idle: call.idle_timeout,
        cancel: call.cancel.clone(),
        ended: false,
        bytes: 0,
    })
}

impl SseStream {
    /// The next event; `Ok(None)` at a clean end of the body.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, Failure> {
        loop {
            if self.cancel.is_cancelled() {
                return Err(Failure::Aborted);
            }
            if let Some(ev) = self.pending.pop_front() {
                return Ok(Some(ev));
            }
            if self.ended {
                return Ok(None);
            }
            let chunk = tokio::select! {
                _ = self.cancel.cancelled() => return Err(Failure::Aborted),
                r = tokio::time::timeout(self.idle, self.resp.chunk()) => match r {
                    Err(_) => return Err(Failure::Transport(idle_message(self.idle))),
                    Ok(Err(e)) => {
                        return Err(Failure::Transport(format!("terminated: other side closed ({})", error_chain(&e))))
                    }
                    Ok(Ok(c)) => c,
                },
            };
            match chunk {
                Some(bytes) => {
                    self.bytes += bytes.len();
                    let evs = self.decoder.push(&bytes);
                    self.pending.extend(evs);
                }
                None => {
                    self.ended = true;
                    let evs = self.decoder.finish();
                    self.pending.extend(evs);
                }
            }
        }
    }

    /// After the stream's own end marker (`data: [DONE]`): reads what is
    /// left of the body (the chunked encoding's last chunk) so the
    /// connection goes back to the pool and the next request needs no new
    /// one; a server that keeps the body open is left after [`LINGER`].
    pub async fn finish(&mut self) {
        if self.ended {
            return;
        }
        let resp = &mut self.resp;
        let rest = async { while let Ok(Some(_)) = resp.chunk().await {} };
        tokio::select! {
            _ = self.cancel.cancelled() => {}
            _ = tokio::time::timeout(LINGER, rest) => {}
        }
    }

    /// When the body so far was not an event stream, a clear error saying so.
    pub fn foreign_body_error(&self) -> Option<String> {
        if self.decoder.looks_foreign() {
            Some(format!(
                "Invalid response: the body is not an event stream (starts with {:?})",
                self.decoder.first_foreign_line().unwrap_or("")
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback server answering every request on its connection with
    /// one `data: [DONE]` event, the chunked body's last chunk `tail`
    /// later (never, for `None`); counts the connections it accepted.
    async fn done_server(
        tail: Option<Duration>,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        let accepts = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&accepts);
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: its head, then Content-Length bytes.
                        let head_end = loop {
                            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break p + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        while buf.len() < head_end + len {
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.drain(..head_end + len);
                        let event = "data: [DONE]\n\n";
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                            event.len()
                        );
                        if sock.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                        match tail {
                            Some(d) => tokio::time::sleep(d).await,
                            None => std::future::pending::<()>().await,
                        }
                        if sock.write_all(b"0\r\n\r\n").await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, accepts)
    }

    /// Opens `url`, reads to `[DONE]` and finishes the stream.
    async fn one_request(url: &str) {
        let cancel = CancellationToken::new();
        let call = HttpCall {
            url: url.to_string(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{}".to_vec(),
            idle_timeout: Duration::from_secs(10),
            cancel: &cancel,
            http_error: plain_http_error,
        };
        let mut s = open(call)
            .await
            .unwrap_or_else(|_| panic!("the call failed"));
        let ev = s.next().await.unwrap_or_else(|_| panic!("no event"));
        assert_eq!(ev.map(|e| e.data), Some("[DONE]".to_string()));
        s.finish().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn after_done_the_connection_is_kept_for_the_next_request() {
        use std::sync::atomic::Ordering;
        let (url, accepts) = done_server(Some(Duration::from_millis(5))).await;
        for _ in 0..3 {
            one_request(&url).await;
        }
        assert_eq!(
            accepts.load(Ordering::SeqCst),
            1,
            "one connection for three requests"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_body_kept_open_after_done_is_left_after_the_linger() {
        let (url, _) = done_server(None).await;
        let t = std::time::Instant::now();
        one_request(&url).await;
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(d.push(c));
        }
        out.extend(d.finish());
        out
    }

    fn ev(e: &str, d: &str) -> SseEvent {
        SseEvent {
            event: e.into(),
            data: d.into(),
        }
    }

    #[test]
    fn line_ends_and_fields() {
        let want = vec![ev("a", "x\ny"), ev("", "z")];
        assert_eq!(all(&[b"event: a\ndata: x\ndata:y\n\ndata: z\n\n"]), want);
        assert_eq!(
            all(&[b"event: a\r\ndata: x\r\ndata:y\r\n\r\ndata: z\r\n\r\n"]),
            want
        );
        assert_eq!(all(&[b"event: a\rdata: x\rdata:y\r\rdata: z\r\r"]), want);
    }

    #[test]
    fn comments_and_split_crlf() {
        assert_eq!(
            all(&[
                b": OPENROUTER PROCESSING\n\ndata: 1\r",
                b"\n\r",
                b"\ndata:  2\n\n"
            ]),
            vec![ev("", "1"), ev("", " 2")]
        );
    }

    #[test]
    fn utf8_split_across_chunks() {
        let s = "data: h\u{e9}llo \u{1f600}\n\n".as_bytes();
        let chunks: Vec<&[u8]> = s.chunks(1).collect();
        assert_eq!(all(&chunks), vec![ev("", "h\u{e9}llo \u{1f600}")]);
    }

    #[test]
    fn unterminated_last_event_is_dispatched() {
        assert_eq!(all(&[b"data: last"]), vec![ev("", "last")]);
    }

    #[test]
    fn foreign_body_detected() {
        let mut d = SseDecoder::new();
        d.push(b"<html>oops</html>\n");
        d.finish();
        assert!(d.looks_foreign());
        assert_eq!(d.first_foreign_line(), Some("<html>oops</html>"));
    }

    #[test]
    fn retry_after_headers() {
        let now = time::macros::datetime!(2026-01-01 00:00:00 UTC);
        let h = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let ra = |pairs| retry_after(&h(pairs), now);
        assert_eq!(ra(&[("retry-after", "3")]), Some(Duration::from_secs(3)));
        assert_eq!(
            ra(&[("retry-after", "1.5")]),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            ra(&[("retry-after", "3"), ("retry-after-ms", "250")]),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            ra(&[("retry-after", "Thu, 01 Jan 2026 00:00:07 GMT")]),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            ra(&[("retry-after", "Wed, 31 Dec 2025 23:59:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(ra(&[("retry-after", "soon")]), None);
        assert_eq!(ra(&[("retry-after", "-1")]), None);
        assert_eq!(ra(&[]), None);
    }

    #[test]
    fn http_error_formats() {
        assert_eq!(
            openai_http_error(429, r#"{"error":{"message":"slow down"}}"#),
            r#"429: {"message":"slow down"}"#
        );
        assert_eq!(openai_http_error(500, "boom"), "500 boom");
        assert_eq!(openai_http_error(503, ""), "503 status code (no body)");
        assert_eq!(plain_http_error(529, "{\"a\": 1}"), "529 {\"a\":1}");
        assert_eq!(plain_http_error(502, "Bad gateway"), "502 Bad gateway");
    }
}
