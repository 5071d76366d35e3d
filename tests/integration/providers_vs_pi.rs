//! Provider behaviour side by side with the real pi 1.6.0: both run against
//! the same scripted loopback server (raw replies on any wire API, every
//! request logged), and must end the same way and send the same bodies.
//! Covers malformed events (FINDINGS.md §7), tool arguments that are not
//! JSON, and the request bodies of Responses and Anthropic models; plus
//! `JSON.parse`'s error wording against Node 22 itself.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::common::*;

/// One logged request.
#[derive(Clone, Debug)]
struct Logged {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Logged {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A loopback server answering request n with `replies[n]` (the last one
/// repeats) as a 200 event stream, logging every request.
struct Wire {
    port: u16,
    log: Arc<Mutex<Vec<Logged>>>,
}

impl Wire {
    fn start(replies: Vec<String>) -> Wire {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l2 = Arc::clone(&log);
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let mut headers = Vec::new();
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let l = line.trim_end();
                    if l.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = l.split_once(':') {
                        let k = k.trim().to_ascii_lowercase();
                        if k == "content-length" {
                            len = v.trim().parse().unwrap_or(0);
                        }
                        headers.push((k, v.trim().to_string()));
                    }
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                l2.lock().unwrap().push(Logged {
                    path: first.split_whitespace().nth(1).unwrap_or("").to_string(),
                    headers,
                    body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                });
                let reply = &replies[n.min(replies.len() - 1)];
                let _ = stream.write_all(
                    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{reply}")
                        .as_bytes(),
                );
                let _ = stream.flush();
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        });
        Wire { port, log }
    }

    fn requests(&self) -> Vec<Logged> {
        self.log.lock().unwrap().clone()
    }
}

/// How a run is set up: the API, and whether the model is a custom one
/// (`probe/probe-model`) or a built-in one pointed at the server.
#[derive(Clone, Copy)]
struct Setup {
    api: &'static str,
    builtin: Option<(&'static str, &'static str)>,
    reasoning: bool,
    thinking: Option<&'static str>,
}

impl Setup {
    fn custom(api: &'static str) -> Setup {
        Setup {
            api,
            builtin: None,
            reasoning: false,
            thinking: None,
        }
    }

    fn configure(&self, sb: &Sandbox, port: u16) {
        let path = match self.api {
            "anthropic-messages" => "",
            "google-generative-ai" => "/v1beta",
            _ => "/v1",
        };
        let base = format!("http://127.0.0.1:{port}{path}");
        let (provider, model, models) = match self.builtin {
            Some((p, m)) => (
                p,
                m,
                json!({"providers": {p: {"baseUrl": base, "apiKey": "test-key"}}}),
            ),
            None => (
                "probe",
                "probe-model",
                json!({"providers": {"probe": {"baseUrl": base, "api": self.api, "apiKey": "test-key",
                    "models": [{"id": "probe-model", "name": "Probe", "reasoning": self.reasoning, "input": ["text"],
                                "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
                                "contextWindow": 200000, "maxTokens": 4096}]}}}),
            ),
        };
        std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
        std::fs::write(
            sb.agent().join("settings.json"),
            json!({"defaultProvider": provider, "defaultModel": model, "retry": {"enabled": false}})
                .to_string(),
        )
        .unwrap();
    }
}

/// What one run left: its JSON events, the requests, the cwd's files.
struct Run {
    events: Vec<Value>,
    requests: Vec<Logged>,
    files: Vec<String>,
}

impl Run {
    /// The assistant and tool-result messages, in order.
    fn messages(&self) -> Vec<Value> {
        self.events
            .iter()
            .filter(|e| {
                e["type"] == "message_end"
                    && (e["message"]["role"] == "assistant" || e["message"]["role"] == "toolResult")
            })
            .map(|e| {
                let m = &e["message"];
                let mut v = json!({"role": m["role"], "content": m["content"], "stopReason": m["stopReason"],
                                   "errorMessage": m["errorMessage"], "details": m["details"], "isError": m["isError"]});
                if let Value::Object(o) = &mut v {
                    o.retain(|_, x| !x.is_null());
                }
                v
            })
            .collect()
    }
}

fn run_pi(o: &Oracle, setup: Setup, replies: &[String]) -> Run {
    let sb = Sandbox::new();
    let wire = Wire::start(replies.to_vec());
    setup.configure(&sb, wire.port);
    let mut cmd = o.pi160(&sb);
    cmd.args(["--mode", "json"]);
    if let Some(t) = setup.thinking {
        cmd.args(["--thinking", t]);
    }
    let out = cmd.arg("go").output().expect("spawn pi");
    finish(&sb, &wire, out)
}

fn run_ours(setup: Setup, replies: &[String]) -> Run {
    let sb = Sandbox::new();
    let wire = Wire::start(replies.to_vec());
    setup.configure(&sb, wire.port);
    let mut cmd = sb.cmd("pi-run");
    cmd.args(["--mode", "json"]);
    if let Some(t) = setup.thinking {
        cmd.args(["--thinking", t]);
    }
    let out = cmd.arg("go").output().expect("spawn pi-run");
    finish(&sb, &wire, out)
}

fn finish(sb: &Sandbox, wire: &Wire, out: std::process::Output) -> Run {
    let events = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(sb.cwd())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    Run {
        events,
        requests: wire.requests(),
        files,
    }
}

/// A request body with what legitimately differs masked: the system
/// prompt (the docs section names each harness's own docs) and the
/// session id used as cache key.
fn normalized(body: &Value) -> Value {
    let mut b = body.clone();
    if let Some(sys) = b.get_mut("system").and_then(Value::as_array_mut) {
        for s in sys {
            s["text"] = "<system prompt>".into();
        }
    }
    for key in ["messages", "input"] {
        if let Some(list) = b.get_mut(key).and_then(Value::as_array_mut) {
            for m in list {
                if m["role"] == "system" || m["role"] == "developer" {
                    if let Some(c) = m.get_mut("content").filter(|c| c.is_string()) {
                        *c = "<system prompt>".into();
                    }
                }
            }
        }
    }
    if b.get("prompt_cache_key").is_some() {
        b["prompt_cache_key"] = "<session id>".into();
    }
    b
}

// -------------------------------------------------------- stream builders

fn data(v: &Value) -> String {
    format!("data: {v}\n\n")
}

fn named(event: &str, v: &Value) -> String {
    format!("event: {event}\ndata: {v}\n\n")
}

/// The first half of an event's JSON text.
fn half(v: &Value) -> String {
    let s = v.to_string();
    s[..s.len() / 2].to_string()
}

fn cc(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 1, "model": "m",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn cc_text(text: &str) -> String {
    [
        data(&cc(json!({"role": "assistant", "content": ""}), None)),
        data(&cc(json!({"content": text}), None)),
        data(&cc(json!({}), Some("stop"))),
        "data: [DONE]\n\n".into(),
    ]
    .concat()
}

fn cc_tool(args: &str) -> String {
    [
        data(&cc(json!({"role": "assistant", "content": ""}), None)),
        data(&cc(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "bash", "arguments": ""}}]}),
            None,
        )),
        data(&cc(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}),
            None,
        )),
        data(&cc(json!({}), Some("tool_calls"))),
        "data: [DONE]\n\n".into(),
    ]
    .concat()
}

fn an_message(blocks: &[String], stop: &str) -> String {
    let mut s = named(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_p", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
    );
    s.extend(blocks.iter().map(String::as_str));
    s += &named(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 3}}),
    );
    s + &named("message_stop", &json!({"type": "message_stop"}))
}

fn an_delta(text: &str) -> Value {
    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
}

fn an_text(parts: &[&str], bad: Option<String>) -> String {
    let mut b = vec![named(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    )];
    for (i, p) in parts.iter().enumerate() {
        if i == 1 {
            if let Some(bad) = &bad {
                b.push(format!("event: content_block_delta\ndata: {bad}\n\n"));
            }
        }
        b.push(named("content_block_delta", &an_delta(p)));
    }
    b.push(named(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    an_message(&b, "end_turn")
}

fn an_tool(args: &str) -> String {
    an_message(
        &[
            named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}}),
            ),
            named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": args}}),
            ),
            named(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            ),
        ],
        "tool_use",
    )
}

fn rs_head() -> String {
    named(
        "response.created",
        &json!({"type": "response.created", "response": {"id": "resp_p", "status": "in_progress"}}),
    )
}

fn rs_done() -> String {
    named(
        "response.completed",
        &json!({"type": "response.completed", "response": {"id": "resp_p", "status": "completed", "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}}}),
    )
}

fn rs_delta(text: &str) -> Value {
    json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text})
}

fn rs_text(parts: &[&str], bad: Option<String>) -> String {
    let mut s = rs_head();
    s += &named(
        "response.output_item.added",
        &json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}}),
    );
    s += &named(
        "response.content_part.added",
        &json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
    );
    for (i, p) in parts.iter().enumerate() {
        if i == 1 {
            if let Some(bad) = &bad {
                s += &format!("event: response.output_text.delta\ndata: {bad}\n\n");
            }
        }
        s += &named("response.output_text.delta", &rs_delta(p));
    }
    let text: String = parts.concat();
    s += &named(
        "response.output_item.done",
        &json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
    );
    s + &rs_done()
}

fn rs_tool(args: &str) -> String {
    let item = |status: &str, a: &str| json!({"id": "fc_1", "type": "function_call", "status": status, "arguments": a, "call_id": "call_1", "name": "bash"});
    [
        rs_head(),
        named(
            "response.output_item.added",
            &json!({"type": "response.output_item.added", "output_index": 0, "item": item("in_progress", "")}),
        ),
        named(
            "response.function_call_arguments.delta",
            &json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": args}),
        ),
        named(
            "response.function_call_arguments.done",
            &json!({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": args}),
        ),
        named(
            "response.output_item.done",
            &json!({"type": "response.output_item.done", "output_index": 0, "item": item("completed", args)}),
        ),
        rs_done(),
    ]
    .concat()
}

fn gm(text: &str, finish: Option<&str>) -> Value {
    let mut c = json!({"content": {"parts": [{"text": text}], "role": "model"}, "index": 0});
    if let Some(f) = finish {
        c["finishReason"] = f.into();
    }
    json!({"candidates": [c], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}})
}

// ------------------------------------------------------------------ tests

#[test]
fn malformed_events_end_the_message_as_pi_does() {
    let Some(o) = Oracle::find("malformed_events_end_the_message_as_pi_does") else {
        return;
    };
    let cases = [
        (
            "openai-completions",
            [
                data(&cc(json!({"role": "assistant", "content": ""}), None)),
                data(&cc(json!({"content": "Hello"}), None)),
                format!("data: {}\n\n", half(&cc(json!({"content": " LOST"}), None))),
                data(&cc(json!({"content": " world"}), None)),
                data(&cc(json!({}), Some("stop"))),
                "data: [DONE]\n\n".into(),
            ]
            .concat(),
        ),
        (
            "anthropic-messages",
            an_text(&["Hello", " world"], Some(half(&an_delta(" LOST")))),
        ),
        (
            "openai-responses",
            rs_text(&["Hello", " world"], Some(half(&rs_delta(" LOST")))),
        ),
        (
            "google-generative-ai",
            [
                data(&gm("Hello", None)),
                format!("data: {}\n\n", half(&gm(" LOST", None))),
                data(&gm(" world", None)),
                data(&gm("", Some("STOP"))),
            ]
            .concat(),
        ),
    ];
    for (api, stream) in cases {
        let setup = Setup::custom(api);
        let theirs = run_pi(&o, setup, std::slice::from_ref(&stream));
        let ours = run_ours(setup, std::slice::from_ref(&stream));
        let (t, m) = (theirs.messages(), ours.messages());
        assert_eq!(m.len(), 1, "{api}: {m:?}");
        assert_eq!(m[0]["stopReason"], "error", "{api}: {m:?}");
        assert_eq!(m, t, "{api}");
    }
}

#[test]
fn tool_arguments_that_are_not_json_are_answered_as_pi_does() {
    let Some(o) = Oracle::find("tool_arguments_that_are_not_json_are_answered_as_pi_does") else {
        return;
    };
    // Cut by the network: a lenient repair would run `touch ran && echo hel`.
    let cut = r#"{"command": "touch ran && echo hel"#;
    let cases = [
        ("openai-completions", vec![cc_tool(cut), cc_text("done")]),
        (
            "openai-completions",
            vec![cc_tool("not json"), cc_text("done")],
        ),
        (
            "openai-completions",
            vec![cc_tool("[\"touch\"]"), cc_text("done")],
        ),
        (
            "anthropic-messages",
            vec![an_tool(cut), an_text(&["done"], None)],
        ),
        (
            "openai-responses",
            vec![rs_tool(cut), rs_text(&["done"], None)],
        ),
    ];
    for (api, replies) in cases {
        let setup = Setup::custom(api);
        let theirs = run_pi(&o, setup, &replies);
        let ours = run_ours(setup, &replies);
        assert!(
            ours.files.is_empty(),
            "{api}: the command ran: {:?}",
            ours.files
        );
        let (t, m) = (theirs.messages(), ours.messages());
        assert_eq!(m.len(), 3, "{api}: {m:?}");
        assert!(
            m[1]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .starts_with("Invalid arguments for tool \"bash\": "),
            "{api}: {}",
            m[1]
        );
        assert_eq!(m, t, "{api}");
        // The next request replays the call with `{}` and the same result.
        assert_eq!(ours.requests.len(), 2, "{api}");
        assert_eq!(
            normalized(&ours.requests[1].body),
            normalized(&theirs.requests[1].body),
            "{api}"
        );
    }
}

#[test]
fn request_bodies_equal_pis() {
    let Some(o) = Oracle::find("request_bodies_equal_pis") else {
        return;
    };
    let call = r#"{"command":"echo hi"}"#;
    let anthropic = vec![an_tool(call), an_text(&["done"], None)];
    let responses = vec![rs_tool(call), rs_text(&["done"], None)];
    let cases = [
        (Setup::custom("openai-responses"), &responses),
        (Setup::custom("anthropic-messages"), &anthropic),
        (
            Setup {
                reasoning: true,
                thinking: Some("high"),
                ..Setup::custom("anthropic-messages")
            },
            &anthropic,
        ),
        (
            Setup {
                reasoning: true,
                thinking: Some("high"),
                ..Setup::custom("openai-responses")
            },
            &responses,
        ),
        // Built-in models: adaptive thinking and strict tool schemas.
        (
            Setup {
                builtin: Some(("anthropic", "claude-sonnet-4-6")),
                thinking: Some("medium"),
                ..Setup::custom("anthropic-messages")
            },
            &anthropic,
        ),
        (
            Setup {
                builtin: Some(("openai", "gpt-5-mini")),
                thinking: Some("medium"),
                ..Setup::custom("openai-responses")
            },
            &responses,
        ),
    ];
    for (i, (setup, replies)) in cases.into_iter().enumerate() {
        let theirs = run_pi(&o, setup, replies);
        let ours = run_ours(setup, replies);
        assert_eq!(ours.requests.len(), 2, "case {i}");
        assert_eq!(theirs.requests.len(), 2, "case {i}");
        for (t, m) in theirs.requests.iter().zip(&ours.requests) {
            // The whole path, query included (pi's Anthropic `?beta=true`).
            assert_eq!(m.path, t.path, "case {i}");
            for h in ["anthropic-beta", "session-id", "x-client-request-id"] {
                assert_eq!(
                    m.header(h).is_some(),
                    t.header(h).is_some(),
                    "case {i}: {h}"
                );
            }
            assert_eq!(normalized(&m.body), normalized(&t.body), "case {i}");
            assert_eq!(
                m.header("anthropic-beta"),
                t.header("anthropic-beta"),
                "case {i}"
            );
        }
    }
}

#[test]
fn json_parse_errors_match_node() {
    let Some(o) = Oracle::find("json_parse_errors_match_node") else {
        return;
    };
    let inputs: Vec<&str> = vec![
        "",
        " ",
        "{",
        "{\"",
        "{\"a",
        "{\"a\"",
        "{\"a\":",
        "{\"a\":1",
        "{\"a\":1,",
        "{\"a\":1,\"b\"",
        "[",
        "[1",
        "[1,",
        "{\"a\":tru",
        "{\"a\":-",
        "{\"a\":1.",
        "{\"a\":1e",
        "{\"a\":1e+}",
        "{\"a\":\"x\\",
        "{\"a\":\"\\u12",
        "\"\\u00\"",
        "{\"a\":\"\\q\"}",
        "{\"a\":\"x\ny\"}",
        "{\"a\":1}x",
        "{\"a\":1} {\"b\":2}",
        "not json",
        "trux",
        "fals",
        "nope",
        "not json at all, this is a much longer text that goes on and on",
        "{\"a\": 1, \"b\": x, \"c\": 3, \"d\": 4, \"e\": 5, \"f\": 6, \"g\": 7, \"h\": 8}",
        "{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5, \"f\": 6, \"g\": 7, \"h\": x}",
        "x{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5, \"f\": 6, \"g\": 7}",
        "{\"a\"\n:\n\"x",
        "{\r\"a",
        "{\r\n\"a",
        "{a:1}",
        "{\"a\":1 \"b\":2}",
        "[1 2]",
        "{\"a\":01}",
        "00",
        "{\"a\":.5}",
        "{\"a\":[}",
        "{\"a\":{]}",
        "[,]",
        "{\"a\":1,}",
        "[1,]",
        "{\"a\" 1}",
        "\u{a0}{}",
        "\u{1}",
        "{\"é\":\"ü",
        "{\"a\":\"\u{1f600}",
        "{\"a\": \"\u{1f600}\u{1f600}\", \"b\": x, \"c\": 3}",
        "{\"command\": \"ls\"}garbage",
        "{\"path\": \"a.txt\", \"edits\": [{\"oldText\": ",
        "{\"a\":1}",
        "[1,\"x\",null,true,-0.5e3]",
    ];
    let script = "const inputs = JSON.parse(require('fs').readFileSync(0, 'utf8'));\
        process.stdout.write(JSON.stringify(inputs.map(s => { try { JSON.parse(s); return null; } catch (e) { return e.message; } })));";
    let mut child = std::process::Command::new(&o.node22)
        .args(["-e", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn node");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&inputs).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let node: Vec<Option<String>> = serde_json::from_slice(&out.stdout).expect("node's answer");
    for (input, want) in inputs.iter().zip(node) {
        let ours = pi_lib::provider::json_parse::parse(input).err();
        assert_eq!(ours, want, "{input:?}");
    }
}
