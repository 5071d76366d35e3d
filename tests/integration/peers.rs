//! `pi-run` against third-party mock LLM servers from PyPI — llmock 0.2.2
//! (fault injection on every wire API, with a resilience verdict) and
//! fakellm 0.3.5 (scripted agent loops) — installed by
//! `tests/peers/install.sh` into `${PI_PEERS_DIR:-~/.cache/pi-toolkit-peers}`.
//! Each test starts its own server on a free loopback port, waits until it
//! answers, and kills it by PID at the end. Without the install the tests
//! skip (and fail under `CI=true`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

fn peers_venv() -> PathBuf {
    std::env::var_os("PI_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pi-toolkit-peers")
        })
        .join("venv/bin")
}

/// The peer's executable, or `None` (with a SKIP line) when not installed;
/// under `CI=true` a missing peer is a failure.
fn peer_bin(name: &str, test: &str) -> Option<PathBuf> {
    let bin = peers_venv().join(name);
    if bin.exists() {
        return Some(bin);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{test}: {name} is not installed under {} (run tests/peers/install.sh; .ci/run does)",
            peers_venv().display()
        );
    }
    eprintln!(
        "SKIP {test}: {name} is not installed under {}; run tests/peers/install.sh",
        peers_venv().display()
    );
    None
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// One plain HTTP/1.1 request to the peer; returns (status, body).
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// A running peer server, killed (by PID) and reaped on drop.
struct Peer {
    child: Child,
    port: u16,
}

impl Peer {
    /// Starts `bin args… --port <free>` in `dir` and polls `ready_path`
    /// until it answers 200 (at most 60 s).
    fn start(bin: &Path, args: &[&str], dir: &Path, ready_path: &str) -> Peer {
        let port = free_port();
        let child = Command::new(bin)
            .args(args)
            .args(["--port", &port.to_string()])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let mut peer = Peer { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if matches!(http(port, "GET", ready_path, None), Some((200, _))) {
                return peer;
            }
            if let Ok(Some(st)) = peer.child.try_wait() {
                panic!("{} exited before it was ready: {st}", bin.display());
            }
            assert!(
                Instant::now() < deadline,
                "{} not ready after 60 s",
                bin.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn get(&self, path: &str) -> Value {
        let (_, body) = http(self.port, "GET", path, None).expect("peer answers");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }

    fn post(&self, path: &str, body: &Value) -> Value {
        let (status, text) = http(self.port, "POST", path, Some(body)).expect("peer answers");
        assert!(status < 300, "{path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------ llmock

/// The four wire APIs as llmock serves them: (provider name in models.json,
/// api, base URL path, model id).
const LLMOCK_APIS: [(&str, &str, &str, &str); 4] = [
    ("lm-chat", "openai-completions", "/v1", "gpt-4o-mini"),
    ("lm-resp", "openai-responses", "/v1", "gpt-4o-mini"),
    (
        "lm-anth",
        "anthropic-messages",
        "/anthropic",
        "claude-sonnet-4-5",
    ),
    (
        "lm-gem",
        "google-generative-ai",
        "/gemini/v1beta",
        "gemini-2.5-flash",
    ),
];

struct Llmock {
    peer: Peer,
}

impl Llmock {
    fn start(test: &str, sb: &Sandbox) -> Option<Llmock> {
        let bin = peer_bin("llmock", test)?;
        let peer = Peer::start(
            &bin,
            &["serve", "--host", "127.0.0.1"],
            sb.root(),
            "/health",
        );
        Some(Llmock { peer })
    }

    /// Writes models.json (one provider per API) and settings.json.
    fn configure(&self, sb: &Sandbox, settings: Value) {
        let mut providers = serde_json::Map::new();
        for (name, api, path, id) in LLMOCK_APIS {
            providers.insert(
                name.into(),
                json!({"baseUrl": format!("http://127.0.0.1:{}{path}", self.peer.port), "api": api,
                       "apiKey": "test-key", "models": [{"id": id, "contextWindow": 128000, "maxTokens": 1024}]}),
            );
        }
        std::fs::write(
            sb.agent().join("models.json"),
            json!({ "providers": providers }).to_string(),
        )
        .unwrap();
        std::fs::write(sb.agent().join("settings.json"), settings.to_string()).unwrap();
    }

    /// Clears llmock's queue, log and verdict, then queues `behaviors`.
    fn scenario(&self, behaviors: Value) {
        self.peer.post("/_llmock/reset", &json!({}));
        self.peer
            .post("/_llmock/scenario", &json!({ "behaviors": behaviors }));
    }

    fn verdict(&self) -> Value {
        self.peer.get("/_llmock/verdict")
    }
}

/// Runs `pi-run --mode json --model <provider>/<model> ARGS` in `sb`.
fn pi_run(sb: &Sandbox, provider: &str, args: &[&str]) -> (std::process::Output, Vec<Value>) {
    let model = LLMOCK_APIS
        .iter()
        .find(|(n, ..)| *n == provider)
        .map(|(n, _, _, id)| format!("{n}/{id}"))
        .unwrap_or_else(|| provider.to_string());
    let out = sb
        .cmd("pi-run")
        .args(["--no-session", "--mode", "json", "--model", &model])
        .args(args)
        .output()
        .expect("spawn pi-run");
    let events = jsonl(&out);
    (out, events)
}

fn assistant_ends(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .map(|e| &e["message"])
        .collect()
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

#[track_caller]
fn assert_passed(verdict: &Value, what: &str) {
    assert_eq!(verdict["passed"], true, "{what}: llmock verdict {verdict}");
}

#[test]
fn llmock_malformed_event_is_an_error_then_retried_on_every_api() {
    let sb = Sandbox::new();
    let Some(lm) = Llmock::start(
        "llmock_malformed_event_is_an_error_then_retried_on_every_api",
        &sb,
    ) else {
        return;
    };
    lm.configure(&sb, json!({"retry": {"baseDelayMs": 10}}));
    // pi 1.6.0's wording per API (tests/oracle/FINDINGS.md §7).
    let wording = [
        (
            "lm-chat",
            "Error reading response: malformed server-sent event JSON.",
        ),
        (
            "lm-resp",
            "Error reading response: malformed server-sent event JSON.",
        ),
        ("lm-anth", "Could not parse Anthropic SSE event "),
        ("lm-gem", " in JSON at position "),
    ];
    for (provider, words) in wording {
        lm.scenario(json!([{"type": "stream_fault", "kind": "malformed", "after_chunks": 2}]));
        let (out, events) = pi_run(&sb, provider, &["-nt", "hi"]);
        let ends = assistant_ends(&events);
        assert_eq!(ends.len(), 2, "{provider}: {}", stderr(&out));
        assert_eq!(ends[0]["stopReason"], "error", "{provider}: {}", ends[0]);
        let err = ends[0]["errorMessage"].as_str().unwrap_or("");
        assert!(err.contains(words), "{provider}: {err}");
        assert_eq!(ends[1]["stopReason"], "stop", "{provider}");
        assert_eq!(of_type(&events, "auto_retry_start").len(), 1, "{provider}");
        assert!(out.status.success(), "{provider}: {}", stderr(&out));
        assert_passed(&lm.verdict(), provider);
    }
}

#[test]
fn llmock_cut_off_stream_is_retried_on_every_api() {
    let sb = Sandbox::new();
    let Some(lm) = Llmock::start("llmock_cut_off_stream_is_retried_on_every_api", &sb) else {
        return;
    };
    lm.configure(&sb, json!({"retry": {"baseDelayMs": 10}}));
    let wording = [
        ("lm-chat", "Stream ended without finish_reason"),
        (
            "lm-resp",
            "OpenAI Responses stream ended before a terminal response event",
        ),
        ("lm-anth", "Anthropic stream ended before message_stop"),
        ("lm-gem", "Google stream ended without a finish reason"),
    ];
    for (provider, words) in wording {
        lm.scenario(json!([{"type": "stream_fault", "kind": "truncate", "after_chunks": 2}]));
        let (out, events) = pi_run(&sb, provider, &["-nt", "hi"]);
        assert!(out.status.success(), "{provider}: {}", stderr(&out));
        let ends = assistant_ends(&events);
        assert_eq!(ends[0]["errorMessage"], words, "{provider}");
        assert_eq!(ends.last().unwrap()["stopReason"], "stop", "{provider}");
        assert_passed(&lm.verdict(), provider);
    }
    // A dropped connection and a stalled stream (our idle timeout) too.
    for (fault, args) in [
        (
            json!({"type": "stream_fault", "kind": "disconnect", "after_chunks": 2}),
            vec![],
        ),
        (
            json!({"type": "stream_fault", "kind": "stall", "after_chunks": 2, "stall_seconds": 30}),
            vec!["--idle-timeout", "1"],
        ),
    ] {
        lm.scenario(json!([fault]));
        let mut a = args.clone();
        a.extend(["-nt", "hi"]);
        let (out, events) = pi_run(&sb, "lm-chat", &a);
        assert!(out.status.success(), "{fault}: {}", stderr(&out));
        assert_eq!(of_type(&events, "auto_retry_start").len(), 1, "{fault}");
        assert_passed(&lm.verdict(), &fault.to_string());
    }
}

#[test]
fn llmock_retry_after_sets_the_delay_capped_by_the_settings() {
    let sb = Sandbox::new();
    let Some(lm) = Llmock::start(
        "llmock_retry_after_sets_the_delay_capped_by_the_settings",
        &sb,
    ) else {
        return;
    };
    // llmock sends `retry-after: 1` and `retry-after-ms: 1000`.
    for (settings, want) in [
        (json!({"retry": {"baseDelayMs": 10}}), 1000),
        (
            json!({"retry": {"baseDelayMs": 10, "maxAgentDelayMs": 300}}),
            300,
        ),
    ] {
        lm.configure(&sb, settings.clone());
        for provider in ["lm-chat", "lm-anth"] {
            lm.scenario(json!([{"type": "fail", "status": 429, "retry_after": 1}]));
            let (out, events) = pi_run(&sb, provider, &["-nt", "hi"]);
            assert!(out.status.success(), "{provider}: {}", stderr(&out));
            let starts = of_type(&events, "auto_retry_start");
            assert_eq!(starts.len(), 1, "{provider}");
            assert_eq!(starts[0]["delayMs"], want, "{provider} {settings}");
            let v = lm.verdict();
            if want == 1000 {
                assert_passed(&v, provider);
            } else {
                // Capped below what the server asked: llmock says so.
                assert_eq!(v["findings"][0]["code"], "retry_after_ignored", "{v}");
            }
        }
    }
    // 503 with Retry-After is honoured too; a 500 keeps the backoff.
    lm.configure(&sb, json!({"retry": {"baseDelayMs": 10}}));
    for (status, want) in [(503, 1000), (500, 10)] {
        lm.scenario(json!([{"type": "fail", "status": status, "retry_after": 1}]));
        let (_, events) = pi_run(&sb, "lm-chat", &["-nt", "hi"]);
        assert_eq!(
            of_type(&events, "auto_retry_start")[0]["delayMs"],
            want,
            "{status}"
        );
    }
}

#[test]
fn llmock_client_errors_and_quota_are_not_retried() {
    let sb = Sandbox::new();
    let Some(lm) = Llmock::start("llmock_client_errors_and_quota_are_not_retried", &sb) else {
        return;
    };
    lm.configure(&sb, json!({"retry": {"baseDelayMs": 10}}));
    let cases = [
        // A status number inside the message of a 400 does not make it a 429.
        json!({"type": "fail", "status": 400, "message": "max_tokens: 429 is more than this model allows"}),
        json!({"type": "fail", "status": 400, "message": "upstream returned 503"}),
        json!({"type": "fail", "status": 404, "message": "no such model"}),
        json!({"type": "fail", "status": 429, "code": "insufficient_quota", "message": "You exceeded your current quota, please check your plan and billing details."}),
        json!({"type": "fail", "status": 402, "message": "Payment required"}),
    ];
    for provider in ["lm-chat", "lm-anth"] {
        for case in &cases {
            lm.scenario(json!([case]));
            let (out, events) = pi_run(&sb, provider, &["-nt", "hi"]);
            assert_eq!(out.status.code(), Some(1), "{provider} {case}");
            assert!(
                of_type(&events, "auto_retry_start").is_empty(),
                "{provider} {case}"
            );
            let v = lm.verdict();
            assert_eq!(v["attempts"], 1, "{provider} {case}: {v}");
            // llmock files a quota 429 given up at once as a warning
            // ("gave_up"); not retrying it is deliberate.
            assert_eq!(v["errors"], 0, "{provider} {case}: {v}");
        }
    }
}

#[test]
fn llmock_malformed_tool_arguments_are_not_run() {
    let sb = Sandbox::new();
    let Some(lm) = Llmock::start("llmock_malformed_tool_arguments_are_not_run", &sb) else {
        return;
    };
    lm.configure(&sb, json!({"retry": {"baseDelayMs": 10}}));
    for provider in ["lm-chat", "lm-resp", "lm-anth"] {
        lm.scenario(json!([{"type": "tool_fault", "kind": "malformed_arguments"}]));
        let (out, events) = pi_run(&sb, provider, &["--tools", "write", "write a file"]);
        assert!(out.status.success(), "{provider}: {}", stderr(&out));
        let ends = of_type(&events, "tool_execution_end");
        assert_eq!(ends.len(), 1, "{provider}");
        let text = ends[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            text.starts_with("Invalid arguments for tool \"write\": ")
                && text.contains("\n\nReceived arguments:\n"),
            "{provider}: {text}"
        );
        assert_eq!(ends[0]["isError"], true);
        assert_eq!(ends[0]["result"]["details"], json!({}));
        // The write tool never ran: nothing but the sandbox's own files.
        assert!(
            std::fs::read_dir(sb.cwd()).unwrap().next().is_none(),
            "{provider}: a file was written"
        );
        // The call is recorded with empty arguments and the reason.
        let first = assistant_ends(&events)[0];
        let call = &first["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "toolCall")
            .unwrap();
        assert_eq!(call["arguments"], json!({}), "{provider}");
        assert!(call["argumentsError"].is_string(), "{provider}: {call}");
        assert_passed(&lm.verdict(), provider);
    }
}

// ----------------------------------------------------------------- fakellm

struct Fakellm {
    peer: Peer,
}

impl Fakellm {
    fn start(test: &str, sb: &Sandbox, rules: &str) -> Option<Fakellm> {
        let bin = peer_bin("fakellm", test)?;
        std::fs::write(sb.root().join("fakellm.yaml"), rules).unwrap();
        let peer = Peer::start(&bin, &["serve"], sb.root(), "/_fakellm/stats");
        Some(Fakellm { peer })
    }

    fn configure(&self, sb: &Sandbox) {
        let base = format!("http://127.0.0.1:{}", self.peer.port);
        let models = json!({"providers": {
            "fk-chat": {"baseUrl": format!("{base}/v1"), "api": "openai-completions", "apiKey": "k",
                        "models": [{"id": "gpt-4o-mini", "maxTokens": 1024}]},
            "fk-anth": {"baseUrl": base, "api": "anthropic-messages", "apiKey": "k",
                        "models": [{"id": "claude-sonnet-4-5", "maxTokens": 1024}]}
        }});
        std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
        std::fs::write(
            sb.agent().join("settings.json"),
            r#"{"retry":{"baseDelayMs":10}}"#,
        )
        .unwrap();
    }

    fn reset(&self) {
        self.peer.post("/_fakellm/reset", &json!({}));
    }

    fn requests(&self) -> u64 {
        self.peer.get("/_fakellm/stats")["total_requests"]
            .as_u64()
            .unwrap_or(0)
    }
}

const FAKELLM_RULES: &str = r#"version: 1
defaults: {fallback: deterministic_echo}
rules:
  - name: after_error
    when: {tool_result_contains: "Invalid arguments"}
    respond: {content: "saw the error"}
  - name: string_arguments
    when: {messages_contain: "make the call"}
    respond:
      tool_calls: [{name: bash, arguments: '{"command": "touch ran && echo hel'}]
  - name: after_read
    when: {tool_result_contains: "hello file"}
    respond: {content: "The file says: hello file"}
  - name: read
    when: {messages_contain: "what is in a.txt"}
    respond:
      tool_calls: [{name: read, arguments: {path: "a.txt"}}]
"#;

#[test]
fn fakellm_arguments_that_are_not_an_object_are_not_run() {
    let sb = Sandbox::new();
    let Some(fk) = Fakellm::start(
        "fakellm_arguments_that_are_not_an_object_are_not_run",
        &sb,
        FAKELLM_RULES,
    ) else {
        return;
    };
    fk.configure(&sb);
    // fakellm sends a string-valued `arguments` JSON-encoded: `"{\"command…"`,
    // valid JSON but no object. It must not be "repaired" into a command.
    for provider in ["fk-chat/gpt-4o-mini", "fk-anth/claude-sonnet-4-5"] {
        // fakellm keeps per-conversation state (tool results seen).
        fk.reset();
        // A bounded run: code that mis-answered the call would loop on
        // fakellm's rule instead of ending.
        let out = sb
            .cmd("pi-run")
            .args(["--no-session", "--mode", "json", "--max-turns", "3"])
            .args(["--model", provider, "--tools", "bash"])
            .arg("make the call")
            .output()
            .unwrap();
        assert!(out.status.success(), "{provider}: {}", stderr(&out));
        let events = jsonl(&out);
        let end = of_type(&events, "tool_execution_end");
        assert_eq!(
            end[0]["result"]["content"][0]["text"],
            "Invalid arguments for tool \"bash\": Tool arguments must be a JSON object\n\nReceived arguments:\n\"{\\\"command\\\": \\\"touch ran && echo hel\"",
            "{provider}"
        );
        assert!(
            !sb.cwd().join("ran").exists(),
            "{provider}: the command ran"
        );
        let last = assistant_ends(&events).last().copied().cloned().unwrap();
        assert_eq!(last["content"][0]["text"], "saw the error", "{provider}");
    }
}

/// A normal streamed tool call still works with the strict final parse:
/// fakellm splits the arguments mid-token (`{"pa` + `th":` + …).
/// (fakellm answers its `status:` rules only to non-streaming requests, so
/// the retry cases are llmock's above.)
#[test]
fn fakellm_split_arguments_parse_and_run_on_both_apis() {
    let sb = Sandbox::new();
    let Some(fk) = Fakellm::start(
        "fakellm_split_arguments_parse_and_run_on_both_apis",
        &sb,
        FAKELLM_RULES,
    ) else {
        return;
    };
    fk.configure(&sb);
    std::fs::write(sb.cwd().join("a.txt"), "hello file\n").unwrap();
    for provider in ["fk-chat/gpt-4o-mini", "fk-anth/claude-sonnet-4-5"] {
        fk.reset();
        let before = fk.requests();
        let out = sb
            .cmd("pi-run")
            .args(["--no-session", "--tools", "read", "--model", provider, "-p"])
            .arg("what is in a.txt")
            .output()
            .unwrap();
        assert_eq!(ok(&out), "The file says: hello file\n", "{provider}");
        assert_eq!(fk.requests() - before, 2, "{provider}");
    }
}
