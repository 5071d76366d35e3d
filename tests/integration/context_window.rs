//! The output-token clamp side by side with the real pi 1.6.0: with a small
//! context window both ask for what the window leaves (never below one
//! token) on every wire API, and pi-run says on stderr when that leaves an
//! answer no room.

use serde_json::{json, Value};

use crate::common::*;

const APIS: [&str; 4] = [
    "openai-completions",
    "openai-responses",
    "anthropic-messages",
    "google-generative-ai",
];

fn configure(sb: &Sandbox, port: u16, api: &str, window: u64) {
    let path = match api {
        "anthropic-messages" => "",
        "google-generative-ai" => "/v1beta",
        _ => "/v1",
    };
    let models = json!({"providers": {"probe": {"baseUrl": format!("http://127.0.0.1:{port}{path}"),
        "api": api, "apiKey": "test-key",
        "models": [{"id": "probe-model", "name": "Probe", "reasoning": false, "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": window, "maxTokens": 4096}]}}});
    std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
    std::fs::write(
        sb.agent().join("settings.json"),
        r#"{"defaultProvider":"probe","defaultModel":"probe-model","retry":{"enabled":false}}"#,
    )
    .unwrap();
}

/// The first request body and stderr of one run (pi when `oracle` is given).
fn first_request(
    oracle: Option<&Oracle>,
    api: &str,
    window: u64,
    args: &[&str],
) -> (Value, String) {
    let sb = Sandbox::new();
    let server = ScriptServer::start(vec![Reply::Sse(sse_text("ok"))]);
    configure(&sb, server.port, api, window);
    let mut cmd = match oracle {
        Some(o) => o.pi160(&sb),
        None => sb.cmd("pi-run"),
    };
    let out = cmd
        .args(["--mode", "json"])
        .args(args)
        .output()
        .expect("spawn");
    let body = server.requests.lock().unwrap().first().cloned();
    let who = if oracle.is_some() { "pi" } else { "pi-run" };
    let body = body.unwrap_or_else(|| panic!("{who} sent no request on {api}: {}", stderr(&out)));
    (body, stderr(&out))
}

fn max_tokens(body: &Value) -> u64 {
    ["max_tokens", "max_completion_tokens", "max_output_tokens"]
        .iter()
        .find_map(|k| body[k].as_u64())
        .or_else(|| body["generationConfig"]["maxOutputTokens"].as_u64())
        .unwrap_or_else(|| panic!("no max tokens in {body}"))
}

fn system_tokens(body: &Value) -> u64 {
    let s = body["messages"][0]["content"].as_str().unwrap_or_default();
    (s.encode_utf16().count() as u64 * 2).div_ceil(7)
}

#[test]
fn full_window_leaves_one_token_on_every_api_as_pi() {
    let Some(o) = Oracle::find("full_window_leaves_one_token_on_every_api_as_pi") else {
        return;
    };
    for api in APIS {
        for (window, want) in [(4096, 1), (128000, 4096)] {
            let (pi, _) = first_request(Some(&o), api, window, &["hi"]);
            let (ours, err) = first_request(None, api, window, &["hi"]);
            let warned = want == 1;
            // The Responses API takes no fewer than 16.
            let want = if api == "openai-responses" {
                want.max(16)
            } else {
                want
            };
            assert_eq!(max_tokens(&pi), want, "pi on {api}, window {window}");
            assert_eq!(max_tokens(&ours), want, "pi-run on {api}, window {window}");
            assert_eq!(
                err.contains("leave 1 output token"),
                warned,
                "pi-run's warning on {api}, window {window}: {err}"
            );
        }
    }
}

/// In a window that leaves part of `maxTokens`, both ask for the same
/// amount, but for the length of their own system prompt (each names its
/// own docs): the messages count alike.
#[test]
fn partial_window_clamps_like_pi() {
    let Some(o) = Oracle::find("partial_window_clamps_like_pi") else {
        return;
    };
    let long = format!("hi {}", "x".repeat(3500));
    for task in ["hi", long.as_str()] {
        let (pi, _) = first_request(Some(&o), "openai-completions", 6500, &["--no-tools", task]);
        let (ours, _) = first_request(None, "openai-completions", 6500, &["--no-tools", task]);
        let (p, u) = (max_tokens(&pi), max_tokens(&ours));
        assert!(p < 4096, "pi did not clamp: {p}");
        assert_eq!(
            u as i64 - p as i64,
            system_tokens(&pi) as i64 - system_tokens(&ours) as i64,
            "pi asked for {p}, pi-run for {u} (prompt of {} chars)",
            task.len()
        );
    }
}

/// The entry types of a session, and what its `context_edit`s target.
pub(crate) type Shape = (Vec<String>, Vec<(String, Value)>);

/// The entry types of the one session a run wrote, and its `context_edit`
/// targets.
pub(crate) fn session_shape(sb: &Sandbox) -> Shape {
    let mut files = Vec::new();
    let mut dirs = vec![sb.agent().join("sessions")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                files.push(p);
            }
        }
    }
    assert_eq!(files.len(), 1, "one session: {files:?}");
    let entries: Vec<Value> = std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        // pi-run's stored outcome (pi has none).
        .filter(|e| e["customType"] != "pi-run:run_end")
        .collect();
    let kind = |e: &Value| match e["type"].as_str() {
        Some("message") => format!("message:{}", e["message"]["role"].as_str().unwrap_or("")),
        Some(t) => t.to_string(),
        None => String::new(),
    };
    let by_id = |id: &Value| entries.iter().find(|e| &e["id"] == id).map(kind);
    let edits = entries
        .iter()
        .filter(|e| e["type"] == "context_edit")
        .map(|e| {
            (
                by_id(&e["targetId"]).unwrap_or_default(),
                e["replacement"].clone(),
            )
        })
        .collect();
    (entries.iter().map(kind).collect(), edits)
}

/// One run of pi (`oracle` given) or pi-run against `replies` with a
/// 128000-token window: its output, the request bodies the server saw and
/// the session it wrote.
fn run_against(
    oracle: Option<&Oracle>,
    replies: Vec<Reply>,
    args: &[&str],
) -> (std::process::Output, Vec<Value>, Shape) {
    let sb = Sandbox::new();
    let server = ScriptServer::start(replies);
    configure(&sb, server.port, "openai-completions", 128000);
    let mut cmd = match oracle {
        Some(o) => o.pi160(&sb),
        None => sb.cmd("pi-run"),
    };
    let out = cmd.args(args).output().expect("spawn");
    let requests = server.requests.lock().unwrap().clone();
    let shape = session_shape(&sb);
    (out, requests, shape)
}

/// llama-server refusing a prompt longer than its context: pi hides the
/// error reply from later context with a `context_edit` (and exits 0
/// silently), and sends nothing more, since so short a session has
/// nothing to compact; pi-run writes the same session and sends nothing
/// more either, but keeps its exit 1.
#[test]
fn prompt_over_the_server_context_is_hidden_like_pi() {
    let Some(o) = Oracle::find("prompt_over_the_server_context_is_hidden_like_pi") else {
        return;
    };
    // llama-server's refusal (its `exceed_context_size_error`), as the
    // real server sends it with HTTP 400.
    let refusal = json!({"error": {"code": 400,
        "message": "request (9000 tokens) exceeds the available context size (2048 tokens), try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 2048}})
    .to_string();
    let replies = vec![
        Reply::Status(400, refusal),
        Reply::Sse(sse_text("a summary nobody asked for")),
    ];
    let args = ["-p", "--no-tools", "word word word"];
    let (pi_out, pi_reqs, pi_shape) = run_against(Some(&o), replies.clone(), &args);
    let (out, reqs, shape) = run_against(None, replies, &args);
    assert_eq!(pi_out.status.code(), Some(0), "{}", stderr(&pi_out));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (pi_kinds, pi_edits) = &pi_shape;
    assert_eq!(
        pi_edits,
        &vec![("message:assistant".to_string(), Value::Null)],
        "pi hides the failed reply"
    );
    assert_eq!(&shape.0, pi_kinds, "pi-run's session entries");
    assert_eq!(&shape.1, pi_edits, "pi-run's context edits");
    assert_eq!(pi_reqs.len(), 1, "pi sends no summary request");
    assert_eq!(reqs.len(), pi_reqs.len(), "pi-run's requests: {reqs:?}");
}

/// The stream llama.cpp's llama-server (build 11434) sends for an answer
/// it cut at its context size, as captured from the real server: one
/// chunk a token after the role chunk, `finish_reason` `length` once
/// prompt and answer fill `n_ctx`, then the usage chunk with no choices
/// (asked for with `stream_options.include_usage`) carrying llama.cpp's
/// `prompt_tokens_details` and `timings`.
fn llama_cut_sse(tokens: &[&str], prompt: u64, completion: u64) -> String {
    let chunk = |choices: Value, more: Value| {
        let mut c = json!({"choices": choices, "created": 1796551938,
            "id": "chatcmpl-J6yh99iYXgLqsPghwqLE08G5duAwI8G4", "model": "smollm2",
            "system_fingerprint": "b0-unknown", "object": "chat.completion.chunk"});
        if let (Some(c), Some(m)) = (c.as_object_mut(), more.as_object()) {
            c.extend(m.clone());
        }
        format!("data: {c}\n\n")
    };
    let mut s = chunk(
        json!([{"finish_reason": null, "index": 0, "delta": {"role": "assistant", "content": null}}]),
        json!({}),
    );
    for t in tokens {
        s.push_str(&chunk(
            json!([{"finish_reason": null, "index": 0, "delta": {"content": t}}]),
            json!({}),
        ));
    }
    s.push_str(&chunk(
        json!([{"finish_reason": "length", "index": 0, "delta": {}}]),
        json!({}),
    ));
    s.push_str(&chunk(
        json!([]),
        json!({"usage": {"completion_tokens": completion, "prompt_tokens": prompt,
                "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": 0}},
            "timings": {"cache_n": 0, "prompt_n": prompt, "prompt_ms": 5861.072,
                "prompt_per_token_ms": 26.52, "prompt_per_second": 37.71, "predicted_n": completion,
                "predicted_ms": 7367.285, "predicted_per_token_ms": 736.73,
                "predicted_per_second": 1.36}}),
    ));
    s.push_str("data: [DONE]\n\n");
    s
}

/// The event types of a `--mode json` run, message events by role and
/// appended entries by type; `message_update` and pi-run's closing
/// `run_end` (pi has none) left out.
fn event_types(out: &std::process::Output) -> Vec<String> {
    stdout(out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| {
            let t = e["type"].as_str()?.to_string();
            match t.as_str() {
                "message_update" | "run_end" => None,
                "message_start" | "message_end" => Some(format!(
                    "{t}:{}",
                    e["message"]["role"].as_str().unwrap_or("")
                )),
                "entry_appended" => {
                    Some(format!("{t}:{}", e["entry"]["type"].as_str().unwrap_or("")))
                }
                _ => Some(t),
            }
        })
        .collect()
}

/// llama-server cutting an answer at its context size: the prompt's 1900
/// tokens and 148 generated fill its 2048, and the stream ends with
/// `finish_reason` `length` (fewer tokens than the model's `maxTokens`).
/// pi 1.6.0 hides the cut reply with a `context_edit`, finds nothing to
/// compact in so short a session, sends no other request, prints nothing
/// and exits 0, with or without tools, in text and JSON mode. pi-run does
/// the same, and says on stderr why there is no answer.
#[test]
fn answer_cut_at_the_server_context_is_hidden_like_pi() {
    let Some(o) = Oracle::find("answer_cut_at_the_server_context_is_hidden_like_pi") else {
        return;
    };
    let replies = vec![
        Reply::Sse(llama_cut_sse(&["Hello", "!", " Here", " is"], 1900, 148)),
        Reply::Sse(sse_text("a summary nobody asked for")),
    ];
    for tools in [&["--no-tools"][..], &[]] {
        for mode in [&["-p"][..], &["--mode", "json"]] {
            let args: Vec<&str> = [tools, mode, &["Say hello."]].concat();
            let (pi_out, pi_reqs, pi_shape) = run_against(Some(&o), replies.clone(), &args);
            let (out, reqs, shape) = run_against(None, replies.clone(), &args);
            assert_eq!(
                pi_out.status.code(),
                Some(0),
                "pi {args:?}: {}",
                stderr(&pi_out)
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "pi-run {args:?}: {}",
                stderr(&out)
            );
            assert_eq!(pi_reqs.len(), 1, "pi {args:?} sends no summary request");
            assert_eq!(reqs.len(), 1, "pi-run {args:?}: {reqs:?}");
            assert_eq!(
                pi_shape.1,
                vec![("message:assistant".to_string(), Value::Null)],
                "pi {args:?} hides the cut reply"
            );
            assert_eq!(shape, pi_shape, "pi-run's session {args:?}");
            if mode == ["-p"] {
                assert_eq!(stdout(&pi_out), "", "pi {args:?} prints nothing");
                assert_eq!(stdout(&out), "", "pi-run {args:?}");
            } else {
                assert_eq!(event_types(&out), event_types(&pi_out), "{args:?}");
            }
            assert!(
                stderr(&out).contains("hidden from later context"),
                "pi-run {args:?} says why: {}",
                stderr(&out)
            );
        }
    }
}
