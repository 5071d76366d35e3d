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

/// The entry types of the one session a run wrote, and its `context_edit`
/// targets.
fn session_shape(sb: &Sandbox) -> (Vec<String>, Vec<(String, Value)>) {
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

/// llama-server refusing a prompt longer than its context: pi hides the
/// error reply from later context with a `context_edit` (and exits 0
/// silently); pi-run writes the same session but keeps its exit 1.
#[test]
fn prompt_over_the_server_context_is_hidden_like_pi() {
    let Some(o) = Oracle::find("prompt_over_the_server_context_is_hidden_like_pi") else {
        return;
    };
    // llama-server's refusal (its `exceed_context_size_error`).
    let refusal = json!({"error": {"code": 400,
        "message": "request (9000 tokens) exceeds the available context size (2048 tokens), try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 2048}})
    .to_string();
    let mut shapes = Vec::new();
    for pi in [true, false] {
        let sb = Sandbox::new();
        let server = ScriptServer::start(vec![Reply::Status(400, refusal.clone())]);
        configure(&sb, server.port, "openai-completions", 128000);
        let mut cmd = if pi { o.pi160(&sb) } else { sb.cmd("pi-run") };
        let out = cmd
            .args(["-p", "--no-tools", "word word word"])
            .output()
            .expect("spawn");
        let code = out.status.code();
        assert_eq!(code, Some(if pi { 0 } else { 1 }), "{}", stderr(&out));
        shapes.push(session_shape(&sb));
    }
    let (pi_kinds, pi_edits) = &shapes[0];
    assert_eq!(
        pi_edits,
        &vec![("message:assistant".to_string(), Value::Null)],
        "pi hides the failed reply"
    );
    assert_eq!(&shapes[1].0, pi_kinds, "pi-run's session entries");
    assert_eq!(&shapes[1].1, pi_edits, "pi-run's context edits");
}
