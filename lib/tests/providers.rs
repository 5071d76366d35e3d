//! The four wire APIs against a loopback HTTP server that replays scripted
//! byte streams (chunked at awkward boundaries), recorded vendor streams
//! from `../shared/golden-sse` (skipped when absent) and the composed
//! transcripts of providers.md §6; plus every failure mode: HTTP 429/500,
//! mid-stream errors, dropped connections, stalls, garbage and cancel.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pi_lib::agent::retry;
use pi_lib::format::message::AssistantMessage;
use pi_lib::format::model::{Model, ThinkingLevel};
use pi_lib::format::tool::ToolDefinition;
use pi_lib::format::ContentBlock;
use pi_lib::provider::{self, FailureKind, Request, StreamEvent};
use regex::Regex;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------- server

/// How a scripted response ends after its body pieces.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// Proper end of the chunked body.
    Clean,
    /// Close the socket without the final chunk.
    Drop,
    /// Keep the socket open, send nothing more.
    Stall,
}

#[derive(Clone)]
struct Reply {
    status: u16,
    content_type: &'static str,
    /// More response headers.
    headers: Vec<(&'static str, &'static str)>,
    body: Vec<u8>,
    /// Split the body into pieces of this many bytes.
    piece: usize,
    end: End,
}

fn sse(body: &str) -> Reply {
    Reply {
        status: 200,
        content_type: "text/event-stream",
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
        piece: 7,
        end: End::Clean,
    }
}

fn status(code: u16, body: &str) -> Reply {
    Reply {
        status: code,
        content_type: "application/json",
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
        piece: 1 << 20,
        end: End::Clean,
    }
}

#[derive(Debug, Clone, Default)]
struct Captured {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Captured {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves `reply` to every connection; returns the base address.
async fn serve(reply: Reply) -> (String, Arc<Mutex<Vec<Captured>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let reply = reply.clone();
            let log = log2.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                let head_end = loop {
                    let n = sock.read(&mut tmp).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut lines = head.split("\r\n");
                let request_line = lines.next().unwrap_or("").to_string();
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
                    .collect();
                let len: usize = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let n = sock.read(&mut tmp).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                }
                let body = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
                log.lock().unwrap().push(Captured {
                    request_line,
                    headers,
                    body,
                });
                let extra: String = reply
                    .headers
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}\r\n"))
                    .collect();
                let head = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: {}\r\n{extra}transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
                    reply.status, reply.content_type
                );
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for piece in reply.body.chunks(reply.piece.max(1)) {
                    let mut c = format!("{:x}\r\n", piece.len()).into_bytes();
                    c.extend_from_slice(piece);
                    c.extend_from_slice(b"\r\n");
                    if sock.write_all(&c).await.is_err() {
                        return;
                    }
                    let _ = sock.flush().await;
                }
                match reply.end {
                    End::Clean => {
                        let _ = sock.write_all(b"0\r\n\r\n").await;
                        let _ = sock.shutdown().await;
                    }
                    End::Drop => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        drop(sock);
                    }
                    End::Stall => {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), log)
}

// ---------------------------------------------------------------- helpers

const APIS: [&str; 4] = [
    "openai-completions",
    "anthropic-messages",
    "openai-responses",
    "google-generative-ai",
];

fn model(api: &str, base: &str, id: &str, cost: [f64; 4]) -> Model {
    let base = match api {
        "openai-completions" | "openai-responses" => format!("{base}/v1"),
        "google-generative-ai" => format!("{base}/v1beta"),
        _ => base.to_string(),
    };
    serde_json::from_value(json!({
        "id": id, "name": id, "api": api, "provider": "test", "baseUrl": base,
        "reasoning": true, "input": ["text", "image"],
        "cost": {"input": cost[0], "output": cost[1], "cacheRead": cost[2], "cacheWrite": cost[3]},
        "contextWindow": 200000, "maxTokens": 8192
    }))
    .unwrap()
}

fn request(m: Model) -> Request<'static> {
    Request {
        model: m,
        system_prompt: Some("You are terse.".into()),
        messages: vec![serde_json::from_value(
            json!({"role":"user","content":"What is the weather in Paris?","timestamp":1}),
        )
        .unwrap()],
        tools: vec![ToolDefinition {
            name: "get_weather".into(),
            description: "Weather for a place".into(),
            parameters: json!({"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}),
            extra: Default::default(),
        }],
        api_key: Some("sk-test".into()),
        thinking: ThinkingLevel::Off,
        max_tokens: None,
        headers: vec![("x-extra".into(), "1".into())],
        idle_timeout: Duration::from_secs(5),
        cancel: CancellationToken::new(),
        session_id: None,
        response_schema: None,
    }
}

async fn run(req: Request<'_>) -> (AssistantMessage, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let mut sink = |e: &StreamEvent, _m: &AssistantMessage| events.push(e.clone());
    let msg = provider::stream(req, &mut sink).await;
    (msg, events)
}

async fn replay(
    api: &str,
    id: &str,
    cost: [f64; 4],
    reply: Reply,
) -> (AssistantMessage, Vec<StreamEvent>, Captured) {
    let (base, log) = serve(reply).await;
    let (msg, events) = run(request(model(api, &base, id, cost))).await;
    let cap = log.lock().unwrap().first().cloned().unwrap_or_default();
    (msg, events, cap)
}

fn kinds(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            StreamEvent::Start | StreamEvent::Done { .. } | StreamEvent::Error { .. } => {
                e.kind().to_string()
            }
            StreamEvent::TextStart { content_index }
            | StreamEvent::TextDelta { content_index, .. }
            | StreamEvent::TextEnd { content_index, .. }
            | StreamEvent::ThinkingStart { content_index }
            | StreamEvent::ThinkingDelta { content_index, .. }
            | StreamEvent::ThinkingEnd { content_index, .. }
            | StreamEvent::ToolCallStart { content_index, .. }
            | StreamEvent::ToolCallDelta { content_index, .. }
            | StreamEvent::ToolCallEnd { content_index, .. } => {
                format!("{}({content_index})", e.kind())
            }
        })
        .collect()
}

fn content(m: &AssistantMessage) -> Value {
    serde_json::to_value(&m.content).unwrap()
}

fn usage(m: &AssistantMessage) -> [u64; 5] {
    let u = &m.usage;
    [
        u.input.as_u64(),
        u.output.as_u64(),
        u.cache_read.as_u64(),
        u.cache_write.as_u64(),
        u.total_tokens.as_u64(),
    ]
}

fn approx(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-12, "{a} != {b}");
}

fn retry_regex() -> Regex {
    Regex::new("(?i)overloaded|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|server.?error|internal.?error|connection.?error|connection.?refused|other side closed|fetch failed|upstream.?connect|reset before headers|terminated|retry delay").unwrap()
}

fn assert_terminal_once(events: &[StreamEvent]) {
    let n = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Done { .. } | StreamEvent::Error { .. }))
        .count();
    assert_eq!(n, 1, "{:?}", kinds(events));
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Done { .. } | StreamEvent::Error { .. })
    ));
}

// ------------------------------------------------- per-API stream scripts

/// A short stream for `api`: some text, then (optionally) the stream is cut.
fn text_stream(api: &str) -> String {
    match api {
        "openai-completions" => "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n".into(),
        "anthropic-messages" => "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n".into(),
        "openai-responses" => "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[]}}\n\nevent: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello\"}\n\n".into(),
        _ => "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hello\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n".into(),
    }
}

/// A mid-stream error event in each API's own shape.
fn error_event(api: &str) -> &'static str {
    match api {
        "openai-completions" => "data: {\"error\":{\"message\":\"Internal server error\",\"type\":\"server_error\"}}\n\n",
        "anthropic-messages" => "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
        "openai-responses" => "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"The server had an error\"}\n\n",
        _ => "data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n",
    }
}

fn tool_choice_id(api: &str) -> &'static str {
    match api {
        "anthropic-messages" => "claude-sonnet-4-5",
        "openai-responses" => "gpt-5-mini",
        "google-generative-ai" => "gemini-2.5-flash",
        _ => "gpt-4o",
    }
}

// ---------------------------------------------------------------- §6 fixtures

const CC_6_1: &str = r#"data: {"id":"cc1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"cc1","choices":[{"index":0,"delta":{"content":"Let me check"},"finish_reason":null}]}

data: {"id":"cc1","choices":[{"index":0,"delta":{"content":" the weather."},"finish_reason":null}]}

data: {"id":"cc1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_Wx1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}

data: {"id":"cc1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}}]},"finish_reason":null}]}

data: {"id":"cc1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ation\": \"Par"}}]},"finish_reason":null}]}

data: {"id":"cc1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"is\", \"unit\": \"c\"}"}}]},"finish_reason":null}]}

data: {"id":"cc1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"cc1","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":31,"total_tokens":151,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

"#;

const CC_6_2: &str = r#"data: {"id":"cc2","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"The user wants"},"finish_reason":null}]}

data: {"id":"cc2","choices":[{"index":0,"delta":{"reasoning_content":" two files read."},"finish_reason":null}]}

data: {"id":"cc2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.txt\"}"}}]},"finish_reason":null}]}

data: {"id":"cc2","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}

data: {"id":"cc2","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"path\":\"b.txt\"}"}}]},"finish_reason":null}]}

data: {"id":"cc2","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"cc2","choices":[],"usage":{"prompt_tokens":210,"completion_tokens":48,"total_tokens":258}}

data: [DONE]

"#;

const AN_6_3: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01XA","type":"message","role":"assistant","content":[],"stop_reason":null,"usage":{"input_tokens":512,"cache_creation_input_tokens":0,"cache_read_input_tokens":2048,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants the weather in Paris."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" I should call get_weather."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIBxgCKkAx9f3sig=="}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"I'll look that up."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01A9","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Pa"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ris\", \"unit\": \"celsius\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":96}}

event: message_stop
data: {"type":"message_stop"}

"#;

const AN_6_4: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01XB","type":"message","role":"assistant","content":[],"stop_reason":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":1800,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgyOPAQUE"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Done."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}

event: message_stop
data: {"type":"message_stop"}

"#;

const RS_6_5: &str = r#"event: response.output_item.added
data: {"type":"response.output_item.added","output_index":0,"item":{"id":"rs_01","type":"reasoning","summary":[]}}

event: response.reasoning_summary_part.added
data: {"type":"response.reasoning_summary_part.added","item_id":"rs_01","output_index":0,"part":{"type":"summary_text","text":""}}

event: response.reasoning_summary_text.delta
data: {"type":"response.reasoning_summary_text.delta","item_id":"rs_01","output_index":0,"delta":"**Planning**\n\nNeed the weather tool."}

event: response.reasoning_summary_part.done
data: {"type":"response.reasoning_summary_part.done","item_id":"rs_01","output_index":0,"part":{"type":"summary_text","text":"**Planning**\n\nNeed the weather tool."}}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":0,"item":{"id":"rs_01","type":"reasoning","encrypted_content":"gAAAAABoENC","summary":[{"type":"summary_text","text":"**Planning**\n\nNeed the weather tool."}]}}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":1,"item":{"id":"fc_01","type":"function_call","status":"in_progress","arguments":"","call_id":"call_9","name":"get_weather"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","item_id":"fc_01","output_index":1,"delta":"{\"location\":"}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","item_id":"fc_01","output_index":1,"delta":"\"Paris\"}"}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","item_id":"fc_01","output_index":1,"arguments":"{\"location\":\"Paris\"}"}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":1,"item":{"id":"fc_01","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_9","name":"get_weather"}}

event: response.completed
data: {"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":128},"output_tokens":90,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":390}}}

"#;

const RS_6_6: &str = r#"event: response.output_item.added
data: {"type":"response.output_item.added","output_index":0,"item":{"id":"msg_7","type":"message","status":"in_progress","role":"assistant","content":[]}}

event: response.content_part.added
data: {"type":"response.content_part.added","item_id":"msg_7","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","item_id":"msg_7","output_index":0,"content_index":0,"delta":"Once upon"}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":0,"item":{"id":"msg_7","type":"message","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"Once upon","annotations":[]}]}}

event: response.incomplete
data: {"type":"response.incomplete","response":{"id":"resp_2","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":0},"output_tokens":16,"total_tokens":56}}}

"#;

const GE_6_7: &str = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"**Checking weather**\\nI'll call the tool.\",\"thought\":true}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":95,\"totalTokenCount\":135,\"thoughtsTokenCount\":40}}\r\n\r\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"get_weather\",\"args\":{\"location\":\"Paris\"}},\"thoughtSignature\":\"CiQBVKhc7g==\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":95,\"candidatesTokenCount\":18,\"totalTokenCount\":153,\"thoughtsTokenCount\":40}}\r\n\r\n";

// ---------------------------------------------------------------- completions

#[tokio::test]
async fn completions_text_and_tool_call_6_1() {
    let (m, ev, cap) = replay(
        "openai-completions",
        "gpt-4o-mini",
        [0.15, 0.6, 0.075, 0.0],
        sse(CC_6_1),
    )
    .await;
    // pi 1.6.0 ends every block when the stream ends, in content order.
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "text_start(0)",
            "text_delta(0)",
            "text_delta(0)",
            "toolcall_start(1)",
            "toolcall_delta(1)",
            "toolcall_delta(1)",
            "toolcall_delta(1)",
            "toolcall_delta(1)",
            "text_end(0)",
            "toolcall_end(1)",
            "done"
        ]
    );
    assert_eq!(
        content(&m),
        json!([{"type":"text","text":"Let me check the weather."},{"type":"toolCall","id":"call_Wx1","name":"get_weather","arguments":{"location":"Paris","unit":"c"}}])
    );
    assert_eq!(m.stop_reason, "toolUse");
    assert_eq!(usage(&m), [56, 31, 64, 0, 151]);
    approx(m.usage.cost.total.as_f64(), 0.0000318);
    assert_eq!(m.extra["responseId"], "cc1");
    // request
    assert_eq!(cap.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(cap.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(cap.header("x-extra"), Some("1"));
    let b = &cap.body;
    assert_eq!(
        b["messages"][0],
        json!({"role":"system","content":"You are terse."})
    );
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
    assert_eq!(b["store"], json!(false));
    assert_eq!(b["max_completion_tokens"], json!(8192));
    assert_eq!(b["tools"][0]["function"]["name"], "get_weather");
    assert!(b["tools"][0]["function"].get("strict").is_none());
    assert!(b.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn completions_reasoning_and_parallel_tools_6_2() {
    let (m, ev, _) = replay("openai-completions", "qwen", [0.0; 4], sse(CC_6_2)).await;
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "thinking_start(0)",
            "thinking_delta(0)",
            "thinking_delta(0)",
            "toolcall_start(1)",
            "toolcall_delta(1)",
            "toolcall_start(2)",
            "toolcall_delta(2)",
            "toolcall_delta(2)",
            "thinking_end(0)",
            "toolcall_end(1)",
            "toolcall_end(2)",
            "done"
        ]
    );
    assert_eq!(
        content(&m),
        json!([
            {"type":"thinking","thinking":"The user wants two files read.","thinkingSignature":"reasoning_content"},
            {"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"a.txt"}},
            {"type":"toolCall","id":"call_2","name":"read","arguments":{"path":"b.txt"}}
        ])
    );
    assert_eq!(usage(&m), [210, 48, 0, 0, 258]);
}

#[tokio::test]
async fn completions_interleaved_parallel_fragments_keyed_by_index() {
    let ch = |d: Value| {
        format!(
            "data: {}\n\n",
            json!({"id":"x","choices":[{"index":0,"delta":d,"finish_reason":null}]})
        )
    };
    let mut s = String::new();
    s += &ch(
        json!({"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"read","arguments":""}}]}),
    );
    s += &ch(
        json!({"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"name":"ls","arguments":""}}]}),
    );
    s += &ch(json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a"}}]}));
    s += &ch(json!({"tool_calls":[{"index":1,"function":{"arguments":"{\"path\":\"b"}}]}));
    s += &ch(json!({"tool_calls":[{"index":0,"function":{"arguments":".txt\"}"}}]}));
    s += &ch(json!({"tool_calls":[{"index":1,"function":{"arguments":"\"}"}}]}));
    s += "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    let (m, _, _) = replay("openai-completions", "m", [0.0; 4], sse(&s)).await;
    assert_eq!(
        content(&m),
        json!([
            {"type":"toolCall","id":"c0","name":"read","arguments":{"path":"a.txt"}},
            {"type":"toolCall","id":"c1","name":"ls","arguments":{"path":"b"}}
        ])
    );
}

#[tokio::test]
async fn completions_body_with_history_and_compat() {
    let (base, log) = serve(sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")).await;
    let mut m = model("openai-completions", &base, "m", [0.0; 4]);
    m.compat = Some(serde_json::from_value(json!({"supportsDeveloperRole":true,"maxTokensField":"max_tokens","requiresToolResultName":true,"thinkingFormat":"qwen","supportsStore":false,"supportsUsageInStreaming":false,"supportsStrictMode":true})).unwrap());
    let mut req = request(m);
    req.thinking = ThinkingLevel::Low;
    req.messages.push(serde_json::from_value(json!({"role":"assistant","content":[{"type":"thinking","thinking":"hmm","thinkingSignature":"reasoning_content"},{"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"a.txt"}}],"api":"openai-completions","provider":"test","model":"m","usage":{},"stopReason":"toolUse","timestamp":2})).unwrap());
    req.messages.push(serde_json::from_value(json!({"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{"type":"text","text":"hello\n"}],"isError":false,"timestamp":3})).unwrap());
    let (msg, _) = run(req).await;
    assert_eq!(msg.stop_reason, "stop");
    let b = log.lock().unwrap()[0].body.clone();
    // Same keys and order as pi 1.6.0 sends for this compat (observed).
    let keys: Vec<&str> = b.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "model",
            "messages",
            "stream",
            "max_tokens",
            "tools",
            "enable_thinking",
            "reasoning_effort"
        ]
    );
    assert_eq!(b["messages"][0]["role"], "developer");
    assert_eq!(
        b["messages"][2],
        json!({"role":"assistant","content":null,"reasoning_content":"hmm","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a.txt\"}"}}]})
    );
    assert_eq!(
        b["messages"][3],
        json!({"role":"tool","content":"hello\n","tool_call_id":"call_1","name":"read"})
    );
    assert_eq!(b["tools"][0]["function"]["strict"], json!(true));
    assert_eq!(b["reasoning_effort"], "low");
}

#[tokio::test]
async fn completions_finish_reason_variants() {
    let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial \"},\"finish_reason\":null}]}\n\n";
    let (m, ev, _) = replay("openai-completions", "m", [0.0; 4], sse(&format!("{text}data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"content_filter\"}}]}}\n\ndata: [DONE]\n\n"))).await;
    assert_eq!(m.stop_reason, "error");
    assert_eq!(
        m.error_message.as_deref(),
        Some("Provider finish_reason: content_filter")
    );
    assert!(kinds(&ev).contains(&"text_end(0)".to_string()));
    let (m, _, _) = replay("openai-completions", "m", [0.0; 4], sse(&format!("{text}data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"length\"}}]}}\n\ndata: [DONE]\n\n"))).await;
    assert_eq!(m.stop_reason, "length");
    let (m, _, _) = replay("openai-completions", "m", [0.0; 4], sse(text)).await;
    assert_eq!(
        m.error_message.as_deref(),
        Some("Stream ended without finish_reason")
    );
}

// ---------------------------------------------------------------- anthropic

#[tokio::test]
async fn anthropic_thinking_text_tool_6_3() {
    let (m, ev, cap) = replay(
        "anthropic-messages",
        "claude-sonnet-4-5",
        [3.0, 15.0, 0.3, 3.75],
        sse(AN_6_3),
    )
    .await;
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "thinking_start(0)",
            "thinking_delta(0)",
            "thinking_delta(0)",
            "thinking_end(0)",
            "text_start(1)",
            "text_delta(1)",
            "text_end(1)",
            "toolcall_start(2)",
            "toolcall_delta(2)",
            "toolcall_delta(2)",
            "toolcall_delta(2)",
            "toolcall_end(2)",
            "done"
        ]
    );
    assert_eq!(
        content(&m),
        json!([
            {"type":"thinking","thinking":"The user wants the weather in Paris. I should call get_weather.","thinkingSignature":"EqQBCkYIBxgCKkAx9f3sig=="},
            {"type":"text","text":"I'll look that up."},
            {"type":"toolCall","id":"toolu_01A9","name":"get_weather","arguments":{"location":"Paris","unit":"celsius"}}
        ])
    );
    assert_eq!(m.stop_reason, "toolUse");
    assert_eq!(usage(&m), [512, 96, 2048, 0, 2656]);
    approx(m.usage.cost.total.as_f64(), 0.0035904);
    assert_eq!(cap.request_line, "POST /v1/messages?beta=true HTTP/1.1");
    assert_eq!(cap.header("x-api-key"), Some("sk-test"));
    assert_eq!(cap.header("anthropic-version"), Some("2023-06-01"));
    // pi 1.6.0: tool input streams via `eager_input_streaming` on each
    // tool, so no beta header without budget thinking.
    assert_eq!(cap.header("anthropic-beta"), None);
    let b = &cap.body;
    assert_eq!(b["tools"][0]["eager_input_streaming"], json!(true));
    assert_eq!(
        b["system"],
        json!([{"type":"text","text":"You are terse.","cache_control":{"type":"ephemeral"}}])
    );
    assert_eq!(
        b["messages"],
        json!([{"role":"user","content":[{"type":"text","text":"What is the weather in Paris?","cache_control":{"type":"ephemeral"}}]}])
    );
    assert_eq!(
        b["tools"][0]["input_schema"]["required"],
        json!(["location"])
    );
    assert_eq!(b["max_tokens"], json!(8192));
    assert!(b.get("thinking").is_none());
}

#[tokio::test]
async fn anthropic_redacted_thinking_cache_write_6_4() {
    let (m, ev, _) = replay(
        "anthropic-messages",
        "claude-sonnet-4-5",
        [3.0, 15.0, 0.3, 3.75],
        sse(AN_6_4),
    )
    .await;
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "thinking_start(0)",
            "thinking_end(0)",
            "text_start(1)",
            "text_delta(1)",
            "text_end(1)",
            "done"
        ]
    );
    assert_eq!(
        content(&m)[0],
        json!({"type":"thinking","thinking":"[Reasoning redacted]","thinkingSignature":"EmwKAhgBEgyOPAQUE","redacted":true})
    );
    assert_eq!(m.stop_reason, "stop");
    assert_eq!(usage(&m), [20, 12, 0, 1800, 1832]);
    approx(m.usage.cost.total.as_f64(), 0.00699);
}

#[tokio::test]
async fn anthropic_thinking_budget_and_parallel_tools() {
    let mut s = String::from("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n");
    for (i, p) in [(0, "a"), (1, "b")] {
        s += &format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{i},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"toolu_{i}\",\"name\":\"read\",\"input\":{{}}}}}}\n\n");
        s += &format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{i},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"path\\\":\\\"{p}\\\"}}\"}}}}\n\n");
        s += &format!("event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{i}}}\n\n");
    }
    s += "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":30}}\n\n";
    s += "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let (base, log) = serve(sse(&s)).await;
    let mut req = request(model(
        "anthropic-messages",
        &base,
        "claude-sonnet-4-5",
        [0.0; 4],
    ));
    req.thinking = ThinkingLevel::Medium;
    let (m, _) = run(req).await;
    assert_eq!(
        content(&m),
        json!([
            {"type":"toolCall","id":"toolu_0","name":"read","arguments":{"path":"a"}},
            {"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"b"}}
        ])
    );
    assert_eq!(usage(&m), [5, 30, 0, 0, 35]);
    let b = log.lock().unwrap()[0].body.clone();
    // 8192 + medium budget 8192 = 16384, capped at the model's 8192 -> budget 7168
    assert_eq!(b["max_tokens"], json!(8192));
    assert_eq!(
        b["thinking"],
        json!({"type":"enabled","budget_tokens":7168,"display":"summarized"})
    );
    assert_eq!(
        log.lock().unwrap()[0].header("anthropic-beta"),
        Some("interleaved-thinking-2025-05-14")
    );
}

// ---------------------------------------------------------------- responses

#[tokio::test]
async fn responses_reasoning_and_function_call_6_5() {
    let (m, ev, cap) = replay(
        "openai-responses",
        "gpt-5-mini",
        [0.25, 2.0, 0.025, 0.0],
        sse(RS_6_5),
    )
    .await;
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "thinking_start(0)",
            "thinking_delta(0)",
            "thinking_delta(0)",
            "thinking_end(0)",
            "toolcall_start(1)",
            "toolcall_delta(1)",
            "toolcall_delta(1)",
            "toolcall_end(1)",
            "done"
        ]
    );
    let c = content(&m);
    assert_eq!(c[0]["thinking"], "**Planning**\n\nNeed the weather tool.");
    let sig: Value = serde_json::from_str(c[0]["thinkingSignature"].as_str().unwrap()).unwrap();
    assert_eq!(sig["encrypted_content"], "gAAAAABoENC");
    assert_eq!(
        c[1],
        json!({"type":"toolCall","id":"call_9|fc_01","name":"get_weather","arguments":{"location":"Paris"}})
    );
    assert_eq!(m.stop_reason, "toolUse");
    assert_eq!(usage(&m), [172, 90, 128, 0, 390]);
    approx(m.usage.cost.total.as_f64(), 0.0002262);
    assert_eq!(cap.request_line, "POST /v1/responses HTTP/1.1");
    assert_eq!(cap.header("authorization"), Some("Bearer sk-test"));
    let b = &cap.body;
    assert_eq!(
        b["input"][0],
        json!({"role":"developer","content":"You are terse."})
    );
    assert_eq!(
        b["input"][1],
        json!({"role":"developer","content":"# Juice: 0 !important"})
    );
    assert_eq!(
        b["input"][2],
        json!({"role":"user","content":[{"type":"input_text","text":"What is the weather in Paris?"}]})
    );
    assert_eq!(
        b["tools"][0],
        json!({"type":"function","name":"get_weather","description":"Weather for a place","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}})
    );
    assert_eq!(b["max_output_tokens"], json!(8192));
}

#[tokio::test]
async fn responses_incomplete_is_length_with_usage_6_6() {
    let (m, ev, _) = replay("openai-responses", "gpt-5-mini", [0.0; 4], sse(RS_6_6)).await;
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "text_start(0)",
            "text_delta(0)",
            "text_end(0)",
            "done"
        ]
    );
    assert_eq!(
        content(&m),
        json!([{"type":"text","text":"Once upon","textSignature":"{\"v\":1,\"id\":\"msg_7\"}"}])
    );
    assert_eq!(m.stop_reason, "length");
    assert_eq!(usage(&m), [40, 16, 0, 0, 56]);
}

#[tokio::test]
async fn responses_parallel_calls_and_replayed_history() {
    let mut s = String::new();
    for (oi, p) in [(0, "a"), (1, "b")] {
        s += &format!("event: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"output_index\":{oi},\"item\":{{\"id\":\"fc_{oi}\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"call_{oi}\",\"name\":\"read\"}}}}\n\n");
        s += &format!("event: response.function_call_arguments.delta\ndata: {{\"type\":\"response.function_call_arguments.delta\",\"output_index\":{oi},\"delta\":\"{{\\\"path\\\":\\\"{p}\\\"}}\"}}\n\n");
        s += &format!("event: response.output_item.done\ndata: {{\"type\":\"response.output_item.done\",\"output_index\":{oi},\"item\":{{\"id\":\"fc_{oi}\",\"type\":\"function_call\",\"arguments\":\"{{\\\"path\\\":\\\"{p}\\\"}}\",\"call_id\":\"call_{oi}\",\"name\":\"read\"}}}}\n\n");
    }
    s += "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":10,\"output_tokens\":5,\"total_tokens\":15}}}\n\n";
    let (base, log) = serve(sse(&s)).await;
    let mut req = request(model("openai-responses", &base, "gpt-5-mini", [0.0; 4]));
    req.thinking = ThinkingLevel::High;
    req.session_id = Some("sess-1".into());
    // Foreign (Anthropic) history: thinking becomes text, id kept.
    req.messages.push(serde_json::from_value(json!({"role":"assistant","content":[{"type":"thinking","thinking":"plan","thinkingSignature":"sig"},{"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"x"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude","usage":{},"stopReason":"toolUse","timestamp":2})).unwrap());
    req.messages.push(
        serde_json::from_value(json!({"role":"user","content":"next","timestamp":3})).unwrap(),
    );
    let (m, _) = run(req).await;
    assert_eq!(m.stop_reason, "toolUse");
    assert_eq!(
        content(&m)[1],
        json!({"type":"toolCall","id":"call_1|fc_1","name":"read","arguments":{"path":"b"}})
    );
    let b = log.lock().unwrap()[0].body.clone();
    assert_eq!(b["reasoning"], json!({"effort":"high","summary":"auto"}));
    assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(b["prompt_cache_key"], "sess-1");
    let input = b["input"].as_array().unwrap();
    assert_eq!(input[2]["content"][0]["text"], "plan");
    assert_eq!(
        input[3],
        json!({"type":"function_call","call_id":"toolu_1","name":"read","arguments":"{\"path\":\"x\"}"})
    );
    // the orphaned call got pi's synthetic result
    assert_eq!(
        input[4],
        json!({"type":"function_call_output","call_id":"toolu_1","output":"No result provided"})
    );
}

// ---------------------------------------------------------------- google

#[tokio::test]
async fn google_thought_and_function_call_6_7() {
    let (m, ev, cap) = replay(
        "google-generative-ai",
        "gemini-2.5-flash",
        [0.3, 2.5, 0.075, 0.0],
        sse(GE_6_7),
    )
    .await;
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "thinking_start(0)",
            "thinking_delta(0)",
            "thinking_end(0)",
            "toolcall_start(1)",
            "toolcall_delta(1)",
            "toolcall_end(1)",
            "done"
        ]
    );
    let c = content(&m);
    assert_eq!(
        c[0]["thinking"],
        "**Checking weather**\nI'll call the tool."
    );
    assert_eq!(c[1]["name"], "get_weather");
    assert_eq!(c[1]["arguments"], json!({"location":"Paris"}));
    assert_eq!(c[1]["thoughtSignature"], "CiQBVKhc7g==");
    assert!(Regex::new(r"^get_weather_\d+_\d+$")
        .unwrap()
        .is_match(c[1]["id"].as_str().unwrap()));
    assert_eq!(m.stop_reason, "toolUse");
    assert_eq!(usage(&m), [95, 58, 0, 0, 153]);
    approx(m.usage.cost.total.as_f64(), 0.0001735);
    assert_eq!(
        cap.request_line,
        "POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse HTTP/1.1"
    );
    assert_eq!(cap.header("x-goog-api-key"), Some("sk-test"));
    let b = &cap.body;
    assert_eq!(
        b["systemInstruction"],
        json!({"parts":[{"text":"You are terse."}]})
    );
    assert_eq!(
        b["contents"],
        json!([{"role":"user","parts":[{"text":"What is the weather in Paris?"}]}])
    );
    assert_eq!(
        b["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["required"],
        json!(["location"])
    );
    assert_eq!(b["generationConfig"], json!({"maxOutputTokens": 8192}));
}

#[tokio::test]
async fn google_text_max_tokens_parallel_calls_and_thinking_budget() {
    let s = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}],\"role\":\"model\"}}]}\r\n\r\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}],\"role\":\"model\"},\"finishReason\":\"MAX_TOKENS\"}],\"usageMetadata\":{\"promptTokenCount\":10,\"cachedContentTokenCount\":4,\"candidatesTokenCount\":2,\"totalTokenCount\":12}}\r\n\r\n";
    let (base, log) = serve(sse(s)).await;
    let mut req = request(model(
        "google-generative-ai",
        &base,
        "gemini-2.5-flash",
        [0.0; 4],
    ));
    req.thinking = ThinkingLevel::Low;
    let (m, ev) = run(req).await;
    assert_eq!(
        kinds(&ev),
        [
            "start",
            "text_start(0)",
            "text_delta(0)",
            "text_delta(0)",
            "text_end(0)",
            "done"
        ]
    );
    assert_eq!(content(&m), json!([{"type":"text","text":"Hello"}]));
    assert_eq!(m.stop_reason, "length");
    assert_eq!(usage(&m), [6, 2, 4, 0, 12]);
    let b = log.lock().unwrap()[0].body.clone();
    assert_eq!(
        b["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts":true,"thinkingBudget":2048})
    );

    let s = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"read\",\"args\":{\"path\":\"a\"}}},{\"functionCall\":{\"name\":\"read\",\"args\":{\"path\":\"b\"}}}],\"role\":\"model\"},\"finishReason\":\"STOP\"}]}\r\n\r\n";
    let (m, _, _) = replay("google-generative-ai", "gemini-2.5-flash", [0.0; 4], sse(s)).await;
    let c = content(&m);
    assert_eq!(
        (c[0]["arguments"].clone(), c[1]["arguments"].clone()),
        (json!({"path":"a"}), json!({"path":"b"}))
    );
    assert_ne!(c[0]["id"], c[1]["id"]);
    assert_eq!(m.stop_reason, "toolUse");
}

// ---------------------------------------------------------------- failures, all APIs

/// Streams like [`replay`], also returning the failure details.
async fn replay_detailed(api: &str, reply: Reply) -> (provider::Streamed, Vec<StreamEvent>) {
    let (base, _) = serve(reply).await;
    let mut events = Vec::new();
    let mut sink = |e: &StreamEvent, _m: &AssistantMessage| events.push(e.clone());
    let req = request(model(api, &base, tool_choice_id(api), [0.0; 4]));
    let s = provider::stream_detailed(req, &mut sink).await;
    (s, events)
}

/// A text stream "Hello" + <event cut in half> + " world" + a proper end.
fn stream_with_malformed_event(api: &str) -> String {
    let half = |v: Value| {
        let t = v.to_string();
        t[..t.len() / 2].to_string()
    };
    match api {
        "openai-completions" => {
            let c = |d: Value, f: Value| json!({"id":"c","choices":[{"index":0,"delta":d,"finish_reason":f}]});
            format!(
                "data: {}\n\ndata: {}\n\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
                c(json!({"content":"Hello"}), Value::Null),
                half(c(json!({"content":" LOST"}), Value::Null)),
                c(json!({"content":" world"}), Value::Null),
                c(json!({}), json!("stop"))
            )
        }
        "anthropic-messages" => {
            let d = |t: &str| json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":t}});
            format!(
                "{}event: content_block_delta\ndata: {}\n\nevent: content_block_delta\ndata: {}\n\nevent: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\nevent: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}},\"usage\":{{\"output_tokens\":3}}}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
                text_stream(api),
                half(d(" LOST")),
                d(" world")
            )
        }
        "openai-responses" => {
            let d = |t: &str| json!({"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":t});
            format!(
                "{}event: response.output_text.delta\ndata: {}\n\nevent: response.output_text.delta\ndata: {}\n\nevent: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"id\":\"r\",\"status\":\"completed\"}}}}\n\n",
                text_stream(api),
                half(d(" LOST")),
                d(" world")
            )
        }
        _ => {
            let g = |t: &str, f: Option<&str>| {
                let mut c = json!({"content":{"parts":[{"text":t}],"role":"model"},"index":0});
                if let Some(f) = f {
                    c["finishReason"] = f.into();
                }
                json!({"candidates":[c]})
            };
            format!(
                "{}data: {}\r\n\r\ndata: {}\r\n\r\ndata: {}\r\n\r\n",
                text_stream(api),
                half(g(" LOST", None)),
                g(" world", None),
                g("", Some("STOP"))
            )
        }
    }
}

#[tokio::test]
async fn malformed_event_is_a_transport_error_with_pis_wording_on_every_api() {
    for api in APIS {
        let (s, ev) = replay_detailed(api, sse(&stream_with_malformed_event(api))).await;
        let m = &s.message;
        assert_eq!(m.stop_reason, "error", "{api}: {:?}", m.content);
        // Nothing after the bad event is read: no word is silently lost.
        assert_eq!(content(m)[0]["text"], "Hello", "{api}");
        let e = m.error_message.clone().unwrap_or_default();
        let ok = match api {
            "openai-completions" | "openai-responses" => {
                e == "Error reading response: malformed server-sent event JSON."
            }
            "anthropic-messages" => e.starts_with(
                "Could not parse Anthropic SSE event content_block_delta: Unterminated string in JSON at position ",
            ) && e.contains("; raw=event: content_block_delta\\ndata: {"),
            _ => e.starts_with("Unterminated string in JSON at position "),
        };
        assert!(ok, "{api}: {e}");
        assert_eq!(
            s.failure.as_ref().map(|f| &f.kind),
            Some(&FailureKind::Transport),
            "{api}"
        );
        assert!(retry::should_retry(&e, s.failure.as_ref()), "{api}");
        assert_terminal_once(&ev);
    }
}

#[tokio::test]
async fn cut_tool_arguments_are_recorded_never_repaired() {
    let cut = r#"{"command": "rm -rf build && echo hel"#;
    let want = format!(
        "Unterminated string in JSON at position 37 (line 1 column 38)\n\nReceived arguments:\n{cut}"
    );
    let esc = serde_json::to_string(cut).unwrap();
    let streams = [
        ("openai-completions", format!(
            "data: {{\"id\":\"c\",\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{{\"name\":\"bash\",\"arguments\":{esc}}}}}]}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
        )),
        ("anthropic-messages", format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"m\",\"usage\":{{}}}}}}\n\nevent: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"bash\",\"input\":{{}}}}}}\n\nevent: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":{esc}}}}}\n\nevent: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\nevent: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"tool_use\"}}}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
        )),
        ("openai-responses", format!(
            "event: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"call_1\",\"name\":\"bash\"}}}}\n\nevent: response.function_call_arguments.delta\ndata: {{\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"delta\":{esc}}}\n\nevent: response.output_item.done\ndata: {{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":{esc},\"call_id\":\"call_1\",\"name\":\"bash\"}}}}\n\nevent: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"id\":\"r\",\"status\":\"completed\"}}}}\n\n"
        )),
    ];
    for (api, body) in streams {
        let (s, ev) = replay_detailed(api, sse(&body)).await;
        assert_eq!(
            s.message.stop_reason, "toolUse",
            "{api}: {:?}",
            s.message.error_message
        );
        let call = &content(&s.message)[0];
        assert_eq!(call["arguments"], json!({}), "{api}");
        assert_eq!(call["argumentsError"], json!(want), "{api}");
        let end = ev.iter().find_map(|e| match e {
            StreamEvent::ToolCallEnd { tool_call, .. } => Some(tool_call.clone()),
            _ => None,
        });
        assert_eq!(end.map(|t| t.arguments), Some(json!({})), "{api}");
    }
}

#[tokio::test]
async fn cut_off_streams_are_transport_failures_with_pis_wording() {
    let wording = [
        ("openai-completions", "Stream ended without finish_reason"),
        (
            "anthropic-messages",
            "Anthropic stream ended before message_stop",
        ),
        (
            "openai-responses",
            "OpenAI Responses stream ended before a terminal response event",
        ),
        (
            "google-generative-ai",
            "Google stream ended without a finish reason",
        ),
    ];
    for (api, want) in wording {
        let (s, _) = replay_detailed(api, sse(&text_stream(api))).await;
        assert_eq!(s.message.error_message.as_deref(), Some(want), "{api}");
        assert_eq!(
            s.failure.map(|f| f.kind),
            Some(FailureKind::Transport),
            "{api}"
        );
    }
}

#[tokio::test]
async fn http_errors_carry_their_status_and_retry_after() {
    for api in APIS {
        let mut r = status(429, r#"{"error":{"message":"slow down"}}"#);
        r.headers = vec![("retry-after", "2")];
        let (s, _) = replay_detailed(api, r).await;
        let f = s.failure.expect("failure info");
        assert_eq!(f.kind, FailureKind::Http(429), "{api}");
        assert_eq!(f.retry_after, Some(Duration::from_secs(2)), "{api}");
        let mut r = status(503, "");
        r.headers = vec![("retry-after-ms", "1500")];
        let (s, _) = replay_detailed(api, r).await;
        let f = s.failure.expect("failure info");
        assert_eq!(f.retry_after, Some(Duration::from_millis(1500)), "{api}");
        // A 400 that names another status in its text is still a 400.
        let (s, _) = replay_detailed(
            api,
            status(400, r#"{"error":{"message":"max_tokens 429 too large"}}"#),
        )
        .await;
        let f = s.failure.expect("failure info");
        assert_eq!(f.kind, FailureKind::Http(400), "{api}");
        let e = s.message.error_message.unwrap_or_default();
        assert!(!retry::should_retry(&e, Some(&f)), "{api}: {e}");
    }
}

#[tokio::test]
async fn http_429_is_retryable_for_every_api() {
    for api in APIS {
        let (m, ev, _) = replay(
            api,
            tool_choice_id(api),
            [0.0; 4],
            status(
                429,
                r#"{"error":{"message":"Rate limit reached","type":"rate_limit"}}"#,
            ),
        )
        .await;
        assert_eq!(m.stop_reason, "error", "{api}");
        let e = m.error_message.clone().unwrap();
        assert!(e.starts_with("429"), "{api}: {e}");
        assert!(e.contains("Rate limit reached"), "{api}: {e}");
        assert!(retry_regex().is_match(&e), "{api}: {e}");
        assert_terminal_once(&ev);
    }
}

#[tokio::test]
async fn http_500_text_and_empty_bodies() {
    for api in APIS {
        let (m, _, _) = replay(
            api,
            tool_choice_id(api),
            [0.0; 4],
            status(500, "upstream exploded"),
        )
        .await;
        assert_eq!(
            m.error_message.as_deref(),
            Some("500 upstream exploded"),
            "{api}"
        );
        let (m, _, _) = replay(api, tool_choice_id(api), [0.0; 4], status(503, "")).await;
        assert_eq!(
            m.error_message.as_deref(),
            Some("503 status code (no body)"),
            "{api}"
        );
    }
}

#[tokio::test]
async fn mid_stream_error_event_keeps_partial_for_every_api() {
    for api in APIS {
        let body = format!("{}{}", text_stream(api), error_event(api));
        let (m, ev, _) = replay(api, tool_choice_id(api), [0.0; 4], sse(&body)).await;
        assert_eq!(m.stop_reason, "error", "{api}");
        assert_eq!(content(&m)[0]["text"], "Hello", "{api}");
        let e = m.error_message.clone().unwrap();
        assert!(retry_regex().is_match(&e), "{api}: {e}");
        assert!(
            !kinds(&ev).iter().any(|k| k.starts_with("text_end")),
            "{api}: open blocks get no end"
        );
        assert_terminal_once(&ev);
    }
}

#[tokio::test]
async fn dropped_connection_is_a_retryable_error() {
    for api in APIS {
        let mut r = sse(&text_stream(api));
        r.end = End::Drop;
        let started = Instant::now();
        let (m, ev, _) = replay(api, tool_choice_id(api), [0.0; 4], r).await;
        assert!(started.elapsed() < Duration::from_secs(3), "{api}: hung");
        assert_eq!(m.stop_reason, "error", "{api}");
        assert_eq!(content(&m)[0]["text"], "Hello", "{api}");
        let e = m.error_message.clone().unwrap();
        assert!(retry_regex().is_match(&e), "{api}: {e}");
        assert_terminal_once(&ev);
    }
}

#[tokio::test]
async fn stalled_server_hits_the_idle_timeout() {
    for api in APIS {
        let mut r = sse(&text_stream(api));
        r.end = End::Stall;
        let (base, _log) = serve(r).await;
        let mut req = request(model(api, &base, tool_choice_id(api), [0.0; 4]));
        req.idle_timeout = Duration::from_millis(200);
        let started = Instant::now();
        let (m, ev) = run(req).await;
        assert!(started.elapsed() < Duration::from_secs(2), "{api}");
        assert_eq!(m.stop_reason, "error");
        assert_eq!(
            m.error_message.as_deref(),
            Some("Request timed out: no data received for 200ms (idle timeout)"),
            "{api}"
        );
        assert_terminal_once(&ev);
    }
}

#[tokio::test]
async fn garbage_body_is_a_clear_error() {
    for api in APIS {
        let r = Reply {
            status: 200,
            content_type: "text/html",
            headers: Vec::new(),
            body: b"<html><body>Bad gateway page</body></html>\n".to_vec(),
            piece: 5,
            end: End::Clean,
        };
        let (m, ev, _) = replay(api, tool_choice_id(api), [0.0; 4], r).await;
        assert_eq!(m.stop_reason, "error", "{api}");
        let e = m.error_message.clone().unwrap();
        assert!(
            e.contains("not an event stream") && e.contains("<html>"),
            "{api}: {e}"
        );
        assert_terminal_once(&ev);
    }
}

#[tokio::test]
async fn cancel_aborts_for_every_api() {
    for api in APIS {
        let mut r = sse(&text_stream(api));
        r.end = End::Stall;
        let (base, _log) = serve(r).await;
        let req = request(model(api, &base, tool_choice_id(api), [0.0; 4]));
        let cancel = req.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            cancel.cancel();
        });
        let started = Instant::now();
        let (m, ev) = run(req).await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(m.stop_reason, "aborted", "{api}");
        assert_eq!(m.error_message.as_deref(), Some("Request was aborted"));
        assert_eq!(content(&m)[0]["text"], "Hello", "{api}: partial kept");
        assert_eq!(
            ev.last(),
            Some(&StreamEvent::Error {
                reason: "aborted".into()
            })
        );
        assert_terminal_once(&ev);
    }
}

#[tokio::test]
async fn connection_refused_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    for api in APIS {
        let (m, ev) = run(request(model(api, &base, tool_choice_id(api), [0.0; 4]))).await;
        let e = m.error_message.clone().unwrap();
        assert!(e.starts_with("Connection error."), "{api}: {e}");
        assert_terminal_once(&ev);
    }
}

// ---------------------------------------------------------------- golden streams

fn golden_dir() -> Option<std::path::PathBuf> {
    let p = std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/golden-sse"
    ));
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("SKIP golden-sse replay: {} is absent", p.display());
        None
    }
}

#[tokio::test]
async fn golden_anthropic_streams() {
    let Some(dir) = golden_dir() else { return };
    let read = |n: &str| std::fs::read_to_string(dir.join("anthropic").join(n)).unwrap();
    let go = |body: String| async move {
        replay("anthropic-messages", "claude", [0.0; 4], sse(&body)).await
    };

    let (m, ev, _) = go(read("basic_response.txt")).await;
    assert_eq!(m.stop_reason, "stop");
    assert!(!content(&m)[0]["text"].as_str().unwrap().is_empty());
    assert_terminal_once(&ev);

    let (m, _, _) = go(read("tool_use_response.txt")).await;
    assert_eq!(m.stop_reason, "toolUse");
    let tc = m.content.iter().find_map(|b| match b {
        ContentBlock::ToolCall(t) => Some(t.clone()),
        _ => None,
    });
    let tc = tc.expect("a tool call");
    assert!(tc.id.starts_with("toolu_"));
    assert!(
        tc.arguments.as_object().is_some_and(|o| !o.is_empty()),
        "{:?}",
        tc.arguments
    );

    let (m, _, _) = go(read("incomplete_partial_json_response.txt")).await;
    assert!(m
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolCall(t) if t.arguments.is_object())));
    assert!(m
        .content
        .iter()
        .all(|b| !matches!(b, ContentBlock::ToolCall(t) if t.extra.contains_key("partialJson"))));

    let (m, _, _) = go(read("refusal_response.txt")).await;
    assert_eq!(m.stop_reason, "error");
    assert_eq!(
        m.error_message.as_deref(),
        Some("An unknown error occurred")
    );
    assert_eq!(usage(&m)[0], 20);

    for n in [
        "compaction_response.txt",
        "fallback_response.txt",
        "fallback_credit_response.txt",
    ] {
        let (m, ev, _) = go(read(n)).await;
        assert_eq!(m.stop_reason, "stop", "{n}");
        assert!(
            m.content
                .iter()
                .any(|b| matches!(b, ContentBlock::Text(t) if !t.text.is_empty())),
            "{n}"
        );
        assert_terminal_once(&ev);
    }
}

#[tokio::test]
async fn golden_openai_chat_streams() {
    let Some(dir) = golden_dir() else { return };
    let mut files: Vec<_> = std::fs::read_dir(dir.join("openai-chat"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut saw_tools = 0;
    let finish = Regex::new(r#""finish_reason":\s*"(\w+)""#).unwrap();
    for f in files {
        let body = std::fs::read_to_string(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let (m, ev, _) = replay(
            "openai-completions",
            "gpt-4o",
            [2.5, 10.0, 1.25, 0.0],
            sse(&body),
        )
        .await;
        assert_terminal_once(&ev);
        // Expected outcome from the finish_reason the recording carries.
        let fr = finish.captures_iter(&body).last().map(|c| c[1].to_string());
        match fr.as_deref() {
            Some("stop") => assert_eq!(m.stop_reason, "stop", "{name}"),
            Some("length") => assert_eq!(m.stop_reason, "length", "{name}"),
            Some("tool_calls") => {
                assert_eq!(m.stop_reason, "toolUse", "{name}");
                let calls: Vec<_> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                assert!(!calls.is_empty(), "{name}");
                for c in &calls {
                    assert!(c.id.starts_with("call_"), "{name}");
                    assert!(
                        c.arguments.as_object().is_some_and(|o| !o.is_empty()),
                        "{name}: {:?}",
                        c.arguments
                    );
                }
                saw_tools += calls.len();
            }
            other => panic!("{name}: unexpected finish {other:?}"),
        }
        // Text equals the concatenated content deltas of the recording.
        let mut want = String::new();
        for line in body.lines() {
            let Some(d) = line.strip_prefix("data: ") else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(d) else {
                continue;
            };
            if let Some(t) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
            {
                want.push_str(t);
            }
        }
        let got: String = m
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(got, want, "{name}");
        // Usage when the recording has it.
        if let Some(u) = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| v.get("usage").filter(|u| u.is_object()).cloned())
            .next_back()
        {
            let cached = u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            assert_eq!(
                m.usage.input.as_u64(),
                u["prompt_tokens"].as_u64().unwrap() - cached,
                "{name}"
            );
            assert_eq!(
                m.usage.output.as_u64(),
                u["completion_tokens"].as_u64().unwrap(),
                "{name}"
            );
            assert!(m.usage.cost.total.as_f64() > 0.0, "{name}");
        }
    }
    assert!(saw_tools >= 2, "the recordings include parallel tool calls");
}

#[tokio::test]
async fn served_model_is_recorded_after_the_response_id_where_pi_records_it() {
    // pi 1.6.0 writes `responseModel` (right after `responseId`) for
    // Chat Completions and Anthropic when the server names another model
    // than the one asked for; for Responses and Google it writes none.
    let cc = |model: &str| {
        format!(
            "data: {{\"id\":\"c1\",\"model\":\"{model}\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"Hi\"}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
        )
    };
    let an = |model: &str| {
        format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"m1\",\"model\":\"{model}\",\"usage\":{{\"input_tokens\":5,\"output_tokens\":1}}}}}}\n\nevent: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\nevent: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"Hi\"}}}}\n\nevent: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\nevent: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}},\"usage\":{{\"output_tokens\":2}}}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
        )
    };
    let rs = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"model\":\"other\",\"status\":\"in_progress\"}}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"model\":\"other\",\"status\":\"completed\",\"usage\":{\"input_tokens\":5,\"output_tokens\":2,\"total_tokens\":7}}}\n\n";
    let gm = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"modelVersion\":\"other\",\"responseId\":\"g1\"}\r\n\r\n";
    for (api, body, served) in [
        ("openai-completions", cc("other"), Some("other")),
        ("openai-completions", cc("asked"), None),
        ("anthropic-messages", an("other"), Some("other")),
        ("anthropic-messages", an("asked"), None),
        ("openai-responses", rs.to_string(), None),
        ("google-generative-ai", gm.to_string(), None),
    ] {
        let (m, _, _) = replay(api, "asked", [0.0; 4], sse(&body)).await;
        assert_eq!(m.stop_reason, "stop", "{api}: {:?}", m.error_message);
        assert!(m.extra.contains_key("responseId"), "{api}");
        assert_eq!(
            m.extra.get("responseModel").and_then(Value::as_str),
            served,
            "{api}"
        );
        if served.is_some() {
            let keys: Vec<&String> = m.extra.keys().collect();
            let at = keys.iter().position(|k| *k == "responseId");
            assert_eq!(
                keys.get(at.map_or(0, |i| i + 1)).map(|k| k.as_str()),
                Some("responseModel"),
                "{api}: {keys:?}"
            );
        }
    }
}

#[tokio::test]
async fn the_session_is_named_in_headers_on_responses_only() {
    // pi 1.6.0 sends `session-id` and `x-client-request-id` (the session
    // id) to the Responses API; Chat Completions and Anthropic get neither.
    for api in [
        "openai-responses",
        "openai-completions",
        "anthropic-messages",
    ] {
        let (base, log) = serve(sse(&text_stream(api))).await;
        let mut req = request(model(api, &base, "m", [0.0; 4]));
        req.session_id = Some("sess-1".into());
        let _ = run(req).await;
        let cap = log.lock().unwrap().first().cloned().unwrap_or_default();
        let want = (api == "openai-responses").then_some("sess-1");
        assert_eq!(cap.header("session-id"), want, "{api}");
        assert_eq!(cap.header("x-client-request-id"), want, "{api}");
        assert!(!cap.request_line.is_empty(), "{api}: no request seen");
    }
}
