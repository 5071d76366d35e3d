//! `pi-run --mode rpc` against pi 1.6.0: the captures in
//! `/work/shared/reference/rpc-transcripts/` replayed (same commands, at
//! the same points of the stream, against a loopback model answering what
//! pi's mock answered), and the same drives run side by side with the real
//! pi. Responses are compared ignoring ids, timestamps and paths; events
//! by their type sequence. Plus `--then` and shutdown.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{Oracle, Sandbox};

const TRANSCRIPTS: &str = "/work/shared/reference/rpc-transcripts";

// ---------------------------------------------------------------------------
// A loopback OpenAI-compatible model server with per-reply pacing.

/// One scripted answer.
#[derive(Clone, Debug)]
struct Turn {
    text: Option<String>,
    /// `(call id, tool name, JSON arguments)`.
    calls: Vec<(String, String, String)>,
    usage: (u64, u64),
    /// Stream the text in small pieces, 80 ms apart (room for an abort).
    slow: bool,
}

fn text_turn(t: &str) -> Turn {
    Turn {
        text: Some(t.into()),
        calls: vec![],
        usage: (100, 20),
        slow: false,
    }
}

struct Server {
    port: u16,
    requests: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    /// Holds the requests numbered in `held` until released.
    gate: std::sync::Arc<Gate>,
}

/// Where held requests wait (30 s at most) until the test releases them.
#[derive(Default)]
struct Gate {
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Gate {
    fn wait(&self) {
        let g = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .cv
            .wait_timeout_while(g, Duration::from_secs(30), |open| !*open);
    }

    fn release(&self) {
        *self.open.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.gate.release();
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1, "model": "mock-1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

impl Server {
    /// Answers the n-th request with `turns[n]`.
    fn start(turns: Vec<Turn>) -> Server {
        Server::serve(turns, false, vec![])
    }

    /// As [`Server::start`], but the requests numbered in `held` (from 0)
    /// get their answer only after [`Server::release`]: a summary or a
    /// reply that is certainly still running while the test asks.
    fn holding(turns: Vec<Turn>, held: Vec<usize>) -> Server {
        Server::serve(turns, false, held)
    }

    fn release(&self) {
        self.gate.release();
    }

    /// Waits (30 s at most) until `n` requests came.
    fn wait_requests(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.request_count() < n {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for request #{n}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Answers each request with the turn numbered by how many assistant
    /// messages it holds, as the captures' mock did (so a summarization
    /// request, which has none, gets turn 0).
    fn start_counting(turns: Vec<Turn>) -> Server {
        Server::serve(turns, true, vec![])
    }

    fn serve(turns: Vec<Turn>, counting: bool, held: Vec<usize>) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reqs = std::sync::Arc::clone(&requests);
        let turns = std::sync::Arc::new(turns);
        let gate = std::sync::Arc::new(Gate::default());
        let gates = std::sync::Arc::clone(&gate);
        std::thread::spawn(move || {
            let mut n = 0usize;
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let nth = n;
                n += 1;
                let reqs = std::sync::Arc::clone(&reqs);
                let turns = std::sync::Arc::clone(&turns);
                let hold = held.contains(&nth).then(|| std::sync::Arc::clone(&gates));
                std::thread::spawn(move || {
                    serve_one(stream, reqs, hold, &|body: &Value| {
                        let i = if counting {
                            body["messages"].as_array().map_or(0, |m| {
                                m.iter().filter(|m| m["role"] == "assistant").count()
                            })
                        } else {
                            nth
                        };
                        turns.get(i).cloned().unwrap_or_else(|| text_turn("ok"))
                    })
                });
            }
        });
        Server {
            port,
            requests,
            gate,
        }
    }

    fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

fn serve_one(
    mut stream: std::net::TcpStream,
    reqs: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    hold: Option<std::sync::Arc<Gate>>,
    choose: &dyn Fn(&Value) -> Turn,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let turn = choose(&body);
    reqs.lock().unwrap().push(body);
    if let Some(g) = hold {
        g.wait();
    }
    let mut parts = vec![
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            .to_string(),
    ];
    parts.push(chunk(json!({"role": "assistant", "content": ""}), None));
    if let Some(t) = &turn.text {
        if turn.slow {
            let chars: Vec<char> = t.chars().collect();
            for piece in chars.chunks(4) {
                parts.push(chunk(
                    json!({"content": piece.iter().collect::<String>()}),
                    None,
                ));
            }
        } else {
            parts.push(chunk(json!({"content": t}), None));
        }
    }
    for (i, (id, name, args)) in turn.calls.iter().enumerate() {
        parts.push(chunk(json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]}), None));
    }
    let finish = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    parts.push(chunk(json!({}), Some(finish)));
    let usage = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1, "model": "mock-1",
        "choices": [], "usage": {"prompt_tokens": turn.usage.0, "completion_tokens": turn.usage.1, "total_tokens": turn.usage.0 + turn.usage.1}});
    parts.push(format!("data: {usage}\n\ndata: [DONE]\n\n"));
    for p in parts {
        if stream.write_all(p.as_bytes()).is_err() {
            return;
        }
        let _ = stream.flush();
        if turn.slow {
            std::thread::sleep(Duration::from_millis(80));
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// models.json + settings.json for the `mock/mock-1` model of the captures
/// (plus `extra` models, e.g. a reasoning one).
fn configure(agent: &Path, port: u16, extra: &[Value]) {
    let mut models = vec![
        json!({"id": "mock-1", "name": "mock-1", "reasoning": false, "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 128000, "maxTokens": 16384,
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false}}),
    ];
    models.extend(extra.iter().cloned());
    let m = json!({"providers": {"mock": {"baseUrl": format!("http://127.0.0.1:{port}/v1"),
        "api": "openai-completions", "apiKey": "test", "models": models}}});
    std::fs::write(agent.join("models.json"), m.to_string()).unwrap();
    std::fs::write(
        agent.join("settings.json"),
        r#"{"defaultProvider":"mock","defaultModel":"mock-1"}"#,
    )
    .unwrap();
}

// ---------------------------------------------------------------------------
// An RPC client.

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    raw: Vec<String>,
}

impl Client {
    fn spawn(mut cmd: Command) -> Client {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn rpc process");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|_| json!({"type": "NOT_JSON", "line": line}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Client {
            child,
            stdin,
            rx,
            seen: Vec::new(),
            raw: Vec::new(),
        }
    }

    fn send_line(&mut self, line: &str) {
        self.raw.push(line.to_string());
        let s = self.stdin.as_mut().expect("stdin open");
        s.write_all(line.as_bytes()).unwrap();
        s.write_all(b"\n").unwrap();
        s.flush().unwrap();
    }

    fn send(&mut self, v: &Value) {
        self.send_line(&v.to_string());
    }

    /// Waits (30 s at most) until `count` records satisfy `pred`.
    fn wait_count(&mut self, what: &str, count: usize, pred: &dyn Fn(&Value) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.seen.iter().filter(|v| pred(v)).count() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!(
                    "timed out waiting for {what} (#{count}); got:\n{}",
                    self.seen
                        .iter()
                        .map(|v| v.to_string().chars().take(200).collect::<String>())
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            }
        }
    }

    fn response(&mut self, id: &str) -> Value {
        let pred = |v: &Value| v["type"] == "response" && v["id"] == id;
        self.wait_count(&format!("response {id}"), 1, &pred);
        self.seen.iter().find(|v| pred(v)).cloned().unwrap()
    }

    /// Closes stdin and waits for the exit; the exit code.
    fn finish(mut self) -> (Option<i32>, Vec<Value>, String) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the rpc process did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(v) = self.rx.recv_timeout(Duration::from_millis(500)) {
            self.seen.push(v);
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status.code(), self.seen, err)
    }
}

// ---------------------------------------------------------------------------
// Captures: their commands, what they waited for, what came back.

struct Capture {
    name: String,
    records: Vec<(String, Value)>,
}

fn load_capture(name: &str) -> Option<Capture> {
    let path = PathBuf::from(TRANSCRIPTS).join(name);
    let Ok(text) = std::fs::read_to_string(&path) else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{}: missing (the RPC captures)", path.display());
        }
        eprintln!("SKIP {name}: {} is not on this machine", path.display());
        return None;
    };
    let records = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["dir"].as_str().unwrap().to_string(), v["msg"].clone())
        })
        .collect();
    Some(Capture {
        name: name.into(),
        records,
    })
}

/// The key a wait counts: responses by id, messages by role, events by
/// type. `None` for records whose number depends on timing.
fn key(v: &Value) -> Option<String> {
    let t = v["type"].as_str().unwrap_or("");
    match t {
        "response" => Some(format!("response:{}", v["id"])),
        "message_update" | "tool_execution_update" | "bash_execution_update" => None,
        // (The captures replace non-assistant `message_start` messages
        // by a note; `message_end` always has the message.)
        "message_end" => Some(format!(
            "{t}:{}",
            v["message"]["role"].as_str().unwrap_or("?")
        )),
        _ => Some(t.to_string()),
    }
}

/// What pi's mock answered, turn by turn: the assistant messages of the
/// capture (the empty aborted one pi makes without a request excluded).
fn turns_of(c: &Capture) -> Vec<Turn> {
    let mut out = Vec::new();
    for (dir, m) in &c.records {
        if dir != "<" || m["type"] != "message_end" || m["message"]["role"] != "assistant" {
            continue;
        }
        let msg = &m["message"];
        let content = msg["content"].as_array().cloned().unwrap_or_default();
        let aborted = msg["stopReason"] == "aborted";
        if aborted && content.is_empty() {
            continue;
        }
        let mut text: Option<String> = None;
        let mut calls = Vec::new();
        for b in &content {
            match b["type"].as_str() {
                Some("text") => {
                    text.get_or_insert_with(String::new)
                        .push_str(b["text"].as_str().unwrap_or(""));
                }
                Some("toolCall") => calls.push((
                    b["id"].as_str().unwrap_or("call_0").to_string(),
                    b["name"].as_str().unwrap_or("").to_string(),
                    b["arguments"].to_string(),
                )),
                _ => {}
            }
        }
        if aborted {
            // The mock's full answer went on; stream it slowly.
            let t = text.get_or_insert_with(String::new);
            t.push_str(" and on it goes, slowly, until the client aborts the stream.");
        }
        let usage = &msg["usage"];
        out.push(Turn {
            text,
            calls,
            usage: (
                usage["input"].as_u64().unwrap_or(100),
                usage["output"].as_u64().unwrap_or(20),
            ),
            slow: aborted
                || content.iter().any(|b| {
                    b["type"] == "toolCall" && b["arguments"].to_string().contains("sleep 10")
                }),
        });
    }
    out
}

/// Whether the capture ran with a session file.
fn persisted(c: &Capture) -> bool {
    c.records
        .iter()
        .find(|(_, m)| m["command"] == "get_state")
        .is_none_or(|(_, m)| m["data"].get("sessionFile").is_some())
}

/// Drives `cmd` through the capture's commands: each is sent once the
/// records the capture saw before it (by [`key`] and count) have come, and
/// after at least one more streamed update when the capture sent it
/// mid-stream.
fn replay(c: &Capture, cmd: Command) -> (Option<i32>, Vec<Value>) {
    let mut client = Client::spawn(cmd);
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let mut last: Option<(String, usize)> = None;
    let mut streaming_since_last = 0usize;
    for (dir, m) in &c.records {
        if dir == "<" {
            match key(m) {
                Some(k) => {
                    let n = counts.entry(k.clone()).or_default();
                    *n += 1;
                    last = Some((k, *n));
                    streaming_since_last = 0;
                }
                None => {
                    if m["type"] == "message_update" {
                        streaming_since_last += 1;
                    }
                }
            }
            continue;
        }
        if let Some((k, n)) = &last {
            let k2 = k.clone();
            client.wait_count(k, *n, &move |v| key(v).as_deref() == Some(&k2));
            if streaming_since_last > 0 {
                // Sent while text streamed: wait for a text delta after
                // the last keyed record.
                let start = {
                    let mut seen_n = 0;
                    client
                        .seen
                        .iter()
                        .position(|v| {
                            if key(v).as_deref() == Some(k.as_str()) {
                                seen_n += 1;
                            }
                            seen_n == *n
                        })
                        .unwrap_or(0)
                };
                let deadline = Instant::now() + Duration::from_secs(20);
                while !client.seen[start..].iter().any(|v| {
                    v["type"] == "message_update"
                        && v["assistantMessageEvent"]["type"] == "text_delta"
                }) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match client.rx.recv_timeout(left) {
                        Ok(v) => client.seen.push(v),
                        Err(_) => {
                            panic!("{}: no streamed text before a mid-stream command", c.name)
                        }
                    }
                }
            }
        }
        if let Some(raw) = m.get("_raw").and_then(Value::as_str) {
            client.send_line(raw);
        } else {
            client.send(&remap(c, m, &client.seen));
        }
    }
    // Everything the capture got back must come (by key and count).
    for (k, n) in counts {
        let k2 = k.clone();
        client.wait_count(&k, n, &move |v| key(v).as_deref() == Some(&k2));
    }
    let (code, seen, _) = client.finish();
    (code, seen)
}

/// A command naming something of pi's run (a `fork`'s entry id, a
/// `switch_session` file) names the same thing of this run: what the
/// response with the same id and position said here.
fn remap(c: &Capture, m: &Value, seen: &[Value]) -> Value {
    let mut m = m.clone();
    let ours = |id: &Value| {
        seen.iter()
            .find(|r| r["type"] == "response" && &r["id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    let captured = c
        .records
        .iter()
        .filter(|(d, r)| d == "<" && r["type"] == "response");
    if m["type"] == "fork" {
        for (_, r) in captured {
            let Some(list) = r.pointer("/data/messages").and_then(Value::as_array) else {
                continue;
            };
            if r["command"] != "get_fork_messages" {
                continue;
            }
            if let Some(i) = list.iter().position(|x| x["entryId"] == m["entryId"]) {
                if let Some(e) = ours(&r["id"]).pointer(&format!("/data/messages/{i}/entryId")) {
                    m["entryId"] = e.clone();
                }
                break;
            }
        }
    } else if m["type"] == "extension_ui_response" {
        // The answer to the capture's n-th UI request answers ours.
        let n = c
            .records
            .iter()
            .filter(|(d, r)| d == "<" && r["type"] == "extension_ui_request")
            .position(|(_, r)| r["id"] == m["id"]);
        if let Some(r) = n.and_then(|n| {
            seen.iter()
                .filter(|r| r["type"] == "extension_ui_request")
                .nth(n)
        }) {
            m["id"] = r["id"].clone();
        }
    } else if m["type"] == "switch_session" {
        for (_, r) in captured {
            if r["command"] == "get_state" && r["data"]["sessionFile"] == m["sessionPath"] {
                m["sessionPath"] = ours(&r["id"])["data"]["sessionFile"].clone();
                break;
            }
        }
    }
    m
}

/// Keys whose values are per run (ids, times, paths, host details) or this
/// toolkit's own text (the system prompt).
const IGNORED: &[&str] = &[
    "timestamp",
    "sessionFile",
    "sessionId",
    "baseUrl",
    "durationMs",
    "id",
    "parentId",
    "leafId",
    "entryId",
    "responseId",
    "sections",
    "toolsAdded",
    "wall_time_seconds",
    "cwd",
    "path",
    "fullOutputPath",
];

/// Differences between `want` (pi) and `got` (ours) below `at`. An elided
/// capture string (`…[N chars]`) matches any string with its prefix.
fn diff(want: &Value, got: &Value, at: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                if IGNORED.contains(&k.as_str()) || k.starts_with('…') {
                    continue;
                }
                match g.get(k) {
                    Some(gv) => diff(wv, gv, &format!("{at}.{k}"), out),
                    None => out.push(format!("{at}.{k}: missing (pi: {wv})")),
                }
            }
            for k in g.keys() {
                if !w.contains_key(k) && !IGNORED.contains(&k.as_str()) {
                    out.push(format!("{at}.{k}: not in pi's record"));
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                out.push(format!("{at}: {} items, pi {}", g.len(), w.len()));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff(wv, gv, &format!("{at}[{i}]"), out);
            }
        }
        (Value::String(w), Value::String(g)) => {
            if let Some(pos) = w.find('…') {
                if !g.starts_with(&w[..pos]) {
                    out.push(format!("{at}: {g:?} vs pi {w:?}"));
                }
            } else if w != g {
                out.push(format!("{at}: {g:?} vs pi {w:?}"));
            }
        }
        (Value::Number(w), Value::Number(g))
            if (w.as_f64().unwrap_or(0.0) - g.as_f64().unwrap_or(0.0)).abs() > 1e-9 =>
        {
            out.push(format!("{at}: {g} vs pi {w}"));
        }
        (Value::Number(_), Value::Number(_)) => {}
        _ if want != got => out.push(format!("{at}: {got} vs pi {want}")),
        _ => {}
    }
}

/// The parse error's text is JavaScript's `JSON.parse` message in pi.
fn normalize(mut v: Value) -> Value {
    if v["command"] == "parse" {
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            let p = e.split(':').next().unwrap_or("").to_string();
            v["error"] = Value::String(p);
        }
    }
    // get_commands lists pi's built-in llama.cpp extension, which this
    // toolkit does not have (its built-in `mcp` command it has).
    if let Some(cmds) = v
        .pointer_mut("/data/commands")
        .and_then(Value::as_array_mut)
    {
        cmds.retain(|c| c["sourceInfo"]["path"] != "builtin:llama.cpp");
    }
    v
}

fn responses(records: &[Value]) -> Vec<Value> {
    records
        .iter()
        .filter(|v| v["type"] == "response")
        .cloned()
        .map(normalize)
        .collect()
}

/// The event types in order (responses and timing-dependent updates
/// left out; message events carry their role).
fn event_types(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|v| v["type"] != "response")
        .filter_map(key)
        .collect()
}

/// Compares our records with pi's (a capture or a live run).
fn compare(label: &str, want: &[Value], got: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    let (w, g) = (responses(want), responses(got));
    for wr in &w {
        match g
            .iter()
            .find(|r| r["id"] == wr["id"] && r["command"] == wr["command"])
        {
            // After an abort mid-stream the text so far depends on timing:
            // both must have begun the same answer.
            Some(gr)
                if wr["command"] == "get_last_assistant_text"
                    && gr["data"]["text"].is_string()
                    && wr["data"]["text"].as_str().unwrap_or("").split(' ').next()
                        == gr["data"]["text"].as_str().unwrap_or("").split(' ').next() => {}
            Some(gr) => diff(wr, gr, &format!("{label} response {}", wr["id"]), &mut out),
            None => out.push(format!(
                "{label}: no response {} ({})",
                wr["id"], wr["command"]
            )),
        }
    }
    if w.len() != g.len() {
        out.push(format!("{label}: {} responses, pi {}", g.len(), w.len()));
    }
    let (we, ge) = (event_types(want), event_types(got));
    if we != ge {
        let first = we
            .iter()
            .zip(&ge)
            .position(|(a, b)| a != b)
            .unwrap_or(we.len().min(ge.len()));
        out.push(format!(
            "{label}: event types differ at #{first}:\n  pi:   {:?}\n  ours: {:?}",
            &we[first.saturating_sub(3)..we.len().min(first + 6)],
            &ge[first.saturating_sub(3)..ge.len().min(first + 6)],
        ));
    }
    out
}

/// The records of the `kinds` event types compared in full, the n-th of
/// a type with the n-th (an extension's path by its file name).
fn compare_full(label: &str, kinds: &[&str], want: &[Value], got: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    let base = |mut v: Value| {
        if let Some(p) = v.get("extensionPath").and_then(Value::as_str) {
            let b = p.rsplit('/').next().unwrap_or(p).to_string();
            v["extensionPath"] = json!(b);
        }
        v
    };
    for kind in kinds {
        let of = |r: &[Value]| -> Vec<Value> {
            r.iter()
                .filter(|v| v["type"] == *kind)
                .cloned()
                .map(base)
                .collect()
        };
        let (mut w, mut g) = (of(want), of(got));
        // Tools run in parallel: which of two running calls ends first is
        // timing (an extension tool's host round trip against a shell), so
        // tool records pair by call id (their type order is compared).
        for l in [&mut w, &mut g] {
            l.sort_by(|a, b| {
                a["toolCallId"]
                    .to_string()
                    .cmp(&b["toolCallId"].to_string())
            });
        }
        if w.len() != g.len() {
            out.push(format!(
                "{label}: {} {kind} records, pi {}",
                g.len(),
                w.len()
            ));
        }
        for (i, (wv, gv)) in w.iter().zip(&g).enumerate() {
            diff(wv, gv, &format!("{label} {kind}[{i}]"), &mut out);
        }
    }
    out
}

fn ours(sb: &Sandbox, persisted: bool) -> Command {
    let mut c = sb.cmd("pi-run");
    c.env("PI_OFFLINE", "1").args(["--mode", "rpc"]);
    if !persisted {
        c.arg("--no-session");
    }
    c
}

fn theirs(o: &Oracle, sb: &Sandbox, persisted: bool) -> Command {
    let mut c = o.pi160(sb);
    c.env("PI_TELEMETRY", "0").args(["--mode", "rpc"]);
    if !persisted {
        c.arg("--no-session");
    }
    c
}

/// One capture: replayed against pi-run and compared with the capture;
/// with the oracle installed, also replayed against pi 1.6.0 and compared
/// with that run.
fn check_capture(name: &str) {
    check_capture_with(name, None)
}

/// How a capture is replayed beyond the plain case.
#[derive(Default)]
struct Replay {
    /// The mock numbered replies by the request's assistant messages (see
    /// [`check_capture_with`]); compaction ids and estimates left out.
    counting: bool,
    /// `compaction.keepRecentTokens` (the compaction captures).
    keep_recent: Option<u64>,
    /// Extra command-line arguments (`-e` probes), for both programs.
    args: Vec<String>,
    /// Node for the TS extensions (ours and pi's).
    node: Option<PathBuf>,
    /// Event types whose records are compared in full (nth with nth), not
    /// only by type.
    full: &'static [&'static str],
    /// Prepares a sandbox (files the capture's run had) after `configure`.
    setup: Option<fn(&Sandbox, u16)>,
    /// The `message` of every `extension_ui_request` compared nth with
    /// nth, each run's agent dir as `<agent>` (the capture's is read from
    /// its own text, [`capture_agent_dir`]), with a rewrite of pi's text
    /// where this toolkit documents a different one.
    ui_text: Option<UiRewrite>,
}

/// A rewrite of pi's UI text (see [`Replay::ui_text`]).
type UiRewrite = fn(&str) -> String;

/// The agent dir the capture's run had, as its UI text names it: the
/// directory of the first `…/mcp.json` path in an `extension_ui_request`.
fn capture_agent_dir(records: &[Value]) -> String {
    let found = records
        .iter()
        .filter(|v| v["type"] == "extension_ui_request")
        .filter_map(|v| v["message"].as_str())
        .find_map(|m| {
            let end = m.find("/mcp.json")?;
            let start = m[..end].rfind(char::is_whitespace).map_or(0, |i| i + 1);
            Some(m[start..end].to_string())
        });
    match found {
        Some(dir) if !dir.is_empty() => dir,
        _ => panic!("the capture's UI text names no <agent>/mcp.json"),
    }
}

/// The `extension_ui_request` messages of `want` (pi's, rewritten by
/// `map`) and `got`, each with its agent dir as `<agent>`, nth with nth.
fn compare_ui_text(
    label: &str,
    (want, want_agent): (&[Value], &str),
    (got, got_agent): (&[Value], &str),
    map: UiRewrite,
) -> Vec<String> {
    let texts = |r: &[Value], agent: &str| -> Vec<String> {
        r.iter()
            .filter(|v| v["type"] == "extension_ui_request")
            .map(|v| {
                v["message"]
                    .as_str()
                    .unwrap_or("")
                    .replace(agent, "<agent>")
            })
            .collect()
    };
    let w: Vec<String> = texts(want, want_agent).iter().map(|t| map(t)).collect();
    let g = texts(got, got_agent);
    if w == g {
        return Vec::new();
    }
    vec![format!(
        "{label}: UI messages differ:\n  pi:   {w:?}\n  ours: {g:?}"
    )]
}

/// `keep_recent` (the compaction captures, run with that
/// `compaction.keepRecentTokens`, reference §3.4): the capture's mock chose
/// each reply by the number of assistant messages in the request (its
/// summarization requests have none and got turn 0), so the script is the
/// replies before the first compaction plus the new ones after it, served
/// the same way. The compaction's `firstKeptEntryId` (a random id; its
/// position is checked by `rpc_compact_matches_pi`) and
/// `estimatedTokensAfter` (it counts the system prompt, whose text is this
/// toolkit's own) are left out of the comparison.
fn check_capture_with(name: &str, keep_recent: Option<u64>) {
    check_replay(
        name,
        Replay {
            counting: keep_recent.is_some(),
            keep_recent,
            ..Replay::default()
        },
    )
}

fn check_replay(name: &str, opts: Replay) {
    let counting = opts.counting;
    let keep_recent = opts.keep_recent;
    let Some(mut cap) = load_capture(name) else {
        return;
    };
    let strip = |records: &mut dyn Iterator<Item = &mut Value>| {
        for m in records {
            for p in ["/data", "/result"] {
                if let Some(o) = m.pointer_mut(p).and_then(Value::as_object_mut) {
                    o.remove("firstKeptEntryId");
                    o.remove("estimatedTokensAfter");
                }
            }
        }
    };
    if counting {
        strip(&mut cap.records.iter_mut().map(|(_, m)| m));
    }
    let want: Vec<Value> = cap
        .records
        .iter()
        .filter(|(d, _)| d == "<")
        .map(|(_, m)| m.clone())
        .collect();
    let mut turns = turns_of(&cap);
    if counting {
        let before = cap
            .records
            .iter()
            .take_while(|(_, m)| m["type"] != "compaction_start")
            .filter(|(d, m)| {
                d == "<" && m["type"] == "message_end" && m["message"]["role"] == "assistant"
            })
            .count();
        // Replies first seen after a compaction were the script's next
        // entries (the turn numbers the kept context reached).
        let later = turns.split_off(before.min(turns.len()));
        for t in later {
            if !turns.iter().any(|k| k.text == t.text && k.calls == t.calls) {
                turns.push(t);
            }
        }
    }
    let start = |t: Vec<Turn>| {
        if counting {
            Server::start_counting(t)
        } else {
            Server::start(t)
        }
    };
    let keep = persisted(&cap);
    // The compaction captures kept only the last exchange (reference §3.4:
    // they set a small keepRecentTokens) and read a notes file.
    let prepare = |sb: &Sandbox, port: u16| {
        configure(&sb.agent(), port, &[]);
        if let Some(setup) = opts.setup {
            setup(sb, port);
        }
        if keep_recent.is_some() {
            std::fs::write(
                sb.agent().join("settings.json"),
                json!({"defaultProvider": "mock", "defaultModel": "mock-1",
                    "compaction": {"keepRecentTokens": keep_recent}})
                .to_string(),
            )
            .unwrap();
            std::fs::write(sb.cwd().join("notes.txt"), "hello notes\n").unwrap();
        }
    };
    let sb = Sandbox::new();
    let server = start(turns.clone());
    prepare(&sb, server.port);
    let with = |mut c: Command| {
        c.args(&opts.args);
        if let Some(n) = &opts.node {
            c.env("PI_NODE", n);
        }
        c
    };
    let (code, mut got) = replay(&cap, with(ours(&sb, keep)));
    if counting {
        strip(&mut got.iter_mut());
    }
    assert_eq!(code, Some(0), "{name}: pi-run exits 0 on stdin EOF");
    let mut problems = compare(&format!("{name} (capture)"), &want, &got);
    problems.extend(compare_full(
        &format!("{name} (capture)"),
        opts.full,
        &want,
        &got,
    ));
    let our_agent = sb.agent().display().to_string();
    if let Some(map) = opts.ui_text {
        let cap_agent = capture_agent_dir(&want);
        problems.extend(compare_ui_text(
            &format!("{name} (capture)"),
            (&want, &cap_agent),
            (&got, &our_agent),
            map,
        ));
    }
    if let Some(o) = Oracle::find(&format!("rpc {name} side by side")) {
        let sb2 = Sandbox::new();
        let server2 = start(turns);
        prepare(&sb2, server2.port);
        let (code2, mut live) = replay(&cap, with(theirs(&o, &sb2, keep)));
        if counting {
            strip(&mut live.iter_mut());
        }
        assert_eq!(code2, Some(0), "{name}: pi exits 0 on stdin EOF");
        problems.extend(compare(&format!("{name} (pi 1.6.0 live)"), &live, &got));
        if let Some(map) = opts.ui_text {
            problems.extend(compare_ui_text(
                &format!("{name} (pi 1.6.0 live)"),
                (&live, &sb2.agent().display().to_string()),
                (&got, &our_agent),
                map,
            ));
        }
        problems.extend(compare_full(
            &format!("{name} (pi 1.6.0 live)"),
            opts.full,
            &live,
            &got,
        ));
        if server.request_count() != server2.request_count() {
            problems.push(format!(
                "{name}: {} model requests, pi {}",
                server.request_count(),
                server2.request_count()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn rpc_capture_01_state_models_session_commands() {
    check_capture("01-basic-state-model.jsonl");
}

#[test]
fn rpc_capture_02_steer_and_follow_up_queues() {
    check_capture("02-steer-followup-queue.jsonl");
}

#[test]
fn rpc_capture_03_abort_keeps_a_queued_follow_up() {
    check_capture("03-abort.jsonl");
}

#[test]
fn rpc_capture_04_compact_split_turn() {
    check_capture_with("04-compact-split-turn.jsonl", Some(30));
}

#[test]
fn rpc_capture_05_compact_repeat_then_fork_clone_new_switch() {
    check_capture_with("05-compact-repeat-fork-clone-new.jsonl", Some(5));
}

/// Capture 06 replayed with our two probes (`tests/ext-node/fixtures/rpc06`,
/// rebuilt from what the capture and its events log show): every UI
/// method answered as the capture's client did, the command that throws,
/// the `input` chain, `tool_call` block/throw/mutate/timed confirm,
/// validation and unknown tools, `tool_result` chaining, the extension's
/// compaction and its cancel. The UI requests, extension errors and tool
/// results are compared in full, not only by type.
#[test]
fn rpc_capture_06_extension_ui_and_hooks() {
    let Some(o) = Oracle::find("rpc capture 06") else {
        return;
    };
    let dir = crate::common::repo().join("tests/ext-node/fixtures/rpc06");
    let mut args = Vec::new();
    for p in ["probe.ts", "probe2.ts"] {
        args.push("-e".to_string());
        args.push(dir.join(p).display().to_string());
    }
    check_replay(
        "06-extension-ui-and-hooks.jsonl",
        Replay {
            counting: true,
            // (The capture's extension compaction kept the last two
            // exchanges: a small keepRecentTokens, as in capture 04.)
            keep_recent: Some(30),
            args,
            node: Some(o.node22.clone()),
            full: &[
                "extension_ui_request",
                "extension_error",
                "tool_execution_start",
                "tool_execution_end",
                "compaction_end",
            ],
            ..Replay::default()
        },
    );
}

/// Capture 11 replayed with our probe (`tests/ext-node/fixtures/rpc11`):
/// `user_bash` throw / result / invalid result, `session_before_switch` and
/// `_fork` cancels, a `message_end` replacement with the wrong role and a
/// right one, `turn_end`'s draft and `continue`, an invalid
/// `agent_before_settle` draft, `sendMessage` with `triggerTurn`,
/// `appendEntry` and `deliverAs: "nextTurn"`; extension errors and
/// appended entries compared in full.
#[test]
fn rpc_capture_11_extension_gates_and_boundaries() {
    let Some(o) = Oracle::find("rpc capture 11") else {
        return;
    };
    let ext = crate::common::repo().join("tests/ext-node/fixtures/rpc11/ext3.ts");
    check_replay(
        "11-extension-gates-boundaries.jsonl",
        Replay {
            args: vec!["-e".into(), ext.display().to_string()],
            node: Some(o.node22.clone()),
            full: &["extension_error", "entry_appended"],
            ..Replay::default()
        },
    );
}

#[test]
fn rpc_capture_12_idle_steer_and_follow_up() {
    check_capture("12-idle-steer-followup.jsonl");
}

// ---------------------------------------------------------------------------
// Commands the captures do not show, side by side with pi 1.6.0.

/// Sends each command once the previous one's response has come (the
/// prompt's once its run settled); all records.
fn drive(cmd: Command, commands: &[Value]) -> Vec<Value> {
    let mut client = Client::spawn(cmd);
    let mut settled = 0;
    for c in commands {
        client.send(c);
        let id = c["id"].as_str().unwrap_or("").to_string();
        client.response(&id);
        if c["type"] == "prompt" {
            settled += 1;
            client.wait_count("agent_settled", settled, &|v| v["type"] == "agent_settled");
        }
    }
    let (code, seen, err) = client.finish();
    assert_eq!(code, Some(0), "exit on EOF; stderr:\n{err}");
    seen
}

/// Paths under the sandbox written as `<ROOT>/…`.
fn replace_root(v: Value, root: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace(root, "<ROOT>")),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| replace_root(x, root)).collect()),
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, x)| (k, replace_root(x, root)))
                .collect(),
        ),
        other => other,
    }
}

/// Two models (one reasoning), a prompt template and a skill.
fn extra_setup(sb: &Sandbox, port: u16) {
    configure(
        &sb.agent(),
        port,
        &[
            json!({"id": "think-1", "name": "think-1", "reasoning": true, "input": ["text"],
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            "contextWindow": 64000, "maxTokens": 8000}),
        ],
    );
    let prompts = sb.cwd().join(".pi/prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    std::fs::write(
        prompts.join("review.md"),
        "---\ndescription: Review the change\n---\nReview $1 carefully.\n",
    )
    .unwrap();
    let skill = sb.agent().join("skills/tidy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tidy\ndescription: Tidy the workspace\n---\nTidy up.\n",
    )
    .unwrap();
}

#[test]
fn rpc_models_thinking_queue_and_session_commands_match_pi() {
    let Some(o) = Oracle::find("rpc commands side by side") else {
        return;
    };
    let commands = [
        json!({"id": "m", "type": "get_available_models"}),
        json!({"id": "l0", "type": "get_available_thinking_levels"}),
        json!({"id": "c0", "type": "cycle_model"}),
        json!({"id": "s0", "type": "get_state"}),
        json!({"id": "l1", "type": "get_available_thinking_levels"}),
        json!({"id": "t1", "type": "set_thinking_level", "level": "high"}),
        json!({"id": "t2", "type": "set_thinking_level", "level": "high"}),
        json!({"id": "ct", "type": "cycle_thinking_level"}),
        json!({"id": "sm", "type": "set_model", "provider": "mock", "modelId": "mock-1"}),
        json!({"id": "s1", "type": "get_state"}),
        json!({"id": "q1", "type": "steer", "message": "later steer"}),
        json!({"id": "q2", "type": "follow_up", "message": "later follow-up"}),
        json!({"id": "cq", "type": "clear_queue"}),
        json!({"id": "mode", "type": "set_follow_up_mode", "mode": "all"}),
        json!({"id": "p", "type": "prompt", "message": "hello"}),
        json!({"id": "e", "type": "get_entries"}),
        json!({"id": "tr", "type": "get_tree"}),
        json!({"id": "n", "type": "new_session"}),
        json!({"id": "s2", "type": "get_state"}),
        json!({"id": "e2", "type": "get_messages"}),
        json!({"id": "cmds", "type": "get_commands"}),
    ];
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let server = Server::start(vec![text_turn("Hi there.")]);
        extra_setup(&sb, server.port);
        let cmd = if pi {
            let mut c = theirs(&o, &sb, true);
            c.arg("--approve");
            c
        } else {
            let mut c = ours(&sb, true);
            c.arg("--approve");
            c
        };
        let root = sb.root().display().to_string();
        let records: Vec<Value> = drive(cmd, &commands)
            .into_iter()
            .map(|v| replace_root(v, &root))
            .collect();
        let settings: Value = serde_json::from_str(
            &std::fs::read_to_string(sb.agent().join("settings.json")).unwrap(),
        )
        .unwrap();
        (records, settings)
    };
    let (pi, pi_settings) = run(true);
    let (got, got_settings) = run(false);
    let problems = compare("commands (pi 1.6.0 live)", &pi, &got);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(got_settings["followUpMode"], "all", "persisted as pi does");
    assert_eq!(pi_settings, got_settings);
}

// ---------------------------------------------------------------------------
// Shutdown and `--then`.

fn session_lines(sb: &Sandbox) -> Vec<Value> {
    let mut files = Vec::new();
    let mut stack = vec![sb.agent().join("sessions")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                files.push(p);
            }
        }
    }
    assert_eq!(files.len(), 1, "one session file: {files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("every session line is JSON"))
        .collect()
}

#[test]
fn rpc_sigterm_and_sighup_end_a_streaming_run_with_the_session_intact() {
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        let sb = Sandbox::new();
        let server = Server::start(vec![Turn {
            text: Some("Working.".into()),
            calls: vec![(
                "call_1".into(),
                "bash".into(),
                json!({"command": "sleep 20; echo never"}).to_string(),
            )],
            usage: (100, 20),
            slow: false,
        }]);
        configure(&sb.agent(), server.port, &[]);
        let mut client = Client::spawn(ours(&sb, true));
        client.send(&json!({"id": "p", "type": "prompt", "message": "slow tool"}));
        client.wait_count("tool start", 1, &|v| v["type"] == "tool_execution_start");
        let st = Command::new("kill")
            .args([&format!("-{signal}"), &client.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let t = Instant::now();
        let status = loop {
            if let Some(s) = client.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "SIG{signal}: no exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(code), "SIG{signal}");
        let lines = session_lines(&sb);
        assert_eq!(lines[0]["type"], "session");
        let roles: Vec<&str> = lines
            .iter()
            .filter_map(|l| l["message"]["role"].as_str())
            .collect();
        assert!(
            roles.starts_with(&["system", "user", "assistant"]),
            "SIG{signal}: the prompt and the tool call are saved: {roles:?}"
        );
    }
}

#[test]
fn then_runs_each_follow_up_after_the_task_before_it_in_one_run() {
    let sb = Sandbox::new();
    let server = Server::start(vec![
        Turn {
            text: None,
            calls: vec![(
                "call_1".into(),
                "bash".into(),
                json!({"command": "echo built"}).to_string(),
            )],
            usage: (100, 20),
            slow: false,
        },
        text_turn("built it"),
        text_turn("verified it"),
    ]);
    configure(&sb.agent(), server.port, &[]);
    let out = sb
        .cmd("pi-run")
        .env("PI_OFFLINE", "1")
        .args(["--mode", "json", "build it", "--then", "verify it"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<String> = events.iter().filter_map(key).collect();
    assert_eq!(
        kinds.iter().filter(|k| *k == "agent_start").count(),
        1,
        "one run"
    );
    assert_eq!(kinds.iter().filter(|k| *k == "agent_settled").count(), 1);
    // The follow-up comes only once the first task ended: after the turn
    // that answered without tool calls, inside a new turn.
    let pos = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let answered =
        pos(&|v| v["type"] == "turn_end" && v["message"]["content"][0]["text"] == "built it");
    let next =
        pos(&|v| v["type"] == "message_end" && v["message"]["content"][0]["text"] == "verify it");
    assert!(next > answered, "the follow-up waits for the task to end");
    assert_eq!(events[answered + 1]["type"], "turn_start");
    assert_eq!(server.request_count(), 3);
    let last = server.requests.lock().unwrap()[2].to_string();
    assert!(
        last.contains("built it") && last.contains("verify it"),
        "same session"
    );
    // Text mode prints the last task's answer.
    let sb = Sandbox::new();
    let server = Server::start(vec![text_turn("one"), text_turn("two")]);
    configure(&sb.agent(), server.port, &[]);
    let out = sb
        .cmd("pi-run")
        .env("PI_OFFLINE", "1")
        .args(["-p", "first", "--then", "second"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "two\n");
    let roles: Vec<String> = session_lines(&sb)
        .iter()
        .filter_map(|l| l["message"]["role"].as_str().map(str::to_string))
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant"]);
}

// ---------------------------------------------------------------------------
// The extension UI sub-protocol, side by side with pi 1.6.0.

const ASK_EXTENSION: &str = r#"
export default function (pi) {
  pi.registerCommand("ask", {
    description: "Ask things",
    handler: async (args, ctx) => {
      const pick = await ctx.ui.select("Pick one", ["red", "blue"]);
      const ok = await ctx.ui.confirm("Sure?", "Really " + pick + "?");
      const late = await ctx.ui.select("Too slow", ["x"], { timeout: 300 });
      const name = await ctx.ui.input("Name", "your name");
      const none = await ctx.ui.input("Cancel me");
      ctx.ui.setStatus("ask", "done");
      ctx.ui.notify(`picked ${pick} ${ok} ${late} ${name} ${none}`, "info");
    },
  });
}
"#;

/// Runs `/ask`, answering the dialogs as a client would; the UI records
/// (ids left out) and the prompt's response.
fn ask_round_trip(cmd: Command) -> (Vec<Value>, Value) {
    let mut client = Client::spawn(cmd);
    client.send(&json!({"id": "p", "type": "prompt", "message": "/ask"}));
    let mut answered = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    let response = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let v = client
            .rx
            .recv_timeout(left)
            .expect("records until the prompt's response");
        client.seen.push(v.clone());
        if v["type"] == "response" && v["id"] == "p" {
            break v;
        }
        if v["type"] != "extension_ui_request" {
            continue;
        }
        let id = v["id"].clone();
        let answer = match (v["method"].as_str(), v["title"].as_str()) {
            (Some("select"), Some("Pick one")) => Some(json!({"value": "blue"})),
            (Some("confirm"), _) => Some(json!({"confirmed": true})),
            (Some("input"), Some("Name")) => Some(json!({"value": "Ann"})),
            (Some("input"), Some("Cancel me")) => Some(json!({"cancelled": true})),
            _ => None,
        };
        if let Some(mut a) = answer {
            a["type"] = json!("extension_ui_response");
            a["id"] = id;
            answered += 1;
            client.send(&a);
        }
    };
    assert_eq!(answered, 4);
    let (code, seen, err) = client.finish();
    assert_eq!(code, Some(0), "{err}");
    let ui: Vec<Value> = seen
        .iter()
        .filter(|v| v["type"] == "extension_ui_request")
        .map(|v| {
            let mut v = v.clone();
            v.as_object_mut().unwrap().remove("id");
            v
        })
        .collect();
    (ui, response)
}

#[test]
fn rpc_extension_dialogs_round_trip_to_the_client_as_pi() {
    let Some(o) = Oracle::find("rpc extension UI side by side") else {
        return;
    };
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let server = Server::start(vec![]);
        configure(&sb.agent(), server.port, &[]);
        let mut cmd = side(&o, &sb, pi, false);
        with_extension(&mut cmd, &o, &sb, "ask.js", ASK_EXTENSION);
        ask_round_trip(cmd)
    };
    let (pi_ui, pi_resp) = run(true);
    let (ui, resp) = run(false);
    assert_eq!(resp["data"], json!({"disposition": "handled"}));
    assert_eq!(ui, pi_ui, "the same UI requests in the same order");
    assert_eq!(resp, pi_resp);
    let last = ui.last().unwrap();
    assert_eq!(last["message"], "picked blue true undefined Ann undefined");
}

// ---------------------------------------------------------------------------
// `compact`.

/// Where `firstKeptEntryId` points: the entry's position in the session file.
fn kept_position(sb: &Sandbox, records: &[Value]) -> Vec<Option<usize>> {
    let lines = session_lines(sb);
    records
        .iter()
        .filter(|v| v["type"] == "response" && v["command"] == "compact")
        .map(|v| {
            let id = v["data"]["firstKeptEntryId"].as_str()?;
            lines.iter().position(|l| l["id"] == id)
        })
        .collect()
}

/// Random entry ids out of the way of the comparison.
fn hide_kept_ids(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, x)| {
                    if (k == "firstKeptEntryId" && x.is_string()) || k == "estimatedTokensAfter" {
                        (k, json!("<ID>"))
                    } else {
                        (k, hide_kept_ids(x))
                    }
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(hide_kept_ids).collect()),
        other => other,
    }
}

#[test]
fn rpc_compact_matches_pi() {
    let Some(o) = Oracle::find("rpc compact side by side") else {
        return;
    };
    let commands = [
        json!({"id": "p1", "type": "prompt", "message": "first question"}),
        json!({"id": "p2", "type": "prompt", "message": "second question"}),
        json!({"id": "c1", "type": "compact", "customInstructions": "keep it short"}),
        json!({"id": "c2", "type": "compact"}),
        json!({"id": "s", "type": "get_state"}),
        json!({"id": "st", "type": "get_session_stats"}),
        json!({"id": "m", "type": "get_messages"}),
    ];
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let server = Server::start(vec![
            text_turn("First answer."),
            text_turn("Second answer."),
            text_turn("SUMMARY: two questions were answered."),
            text_turn("SUMMARY: turn prefix."),
        ]);
        configure(&sb.agent(), server.port, &[]);
        std::fs::write(
            sb.agent().join("settings.json"),
            r#"{"defaultProvider":"mock","defaultModel":"mock-1","compaction":{"keepRecentTokens":1}}"#,
        )
        .unwrap();
        let cmd = side(&o, &sb, pi, true);
        let root = sb.root().display().to_string();
        let records: Vec<Value> = drive(cmd, &commands)
            .into_iter()
            .map(|v| replace_root(v, &root))
            .collect();
        let kept = kept_position(&sb, &records);
        let reqs = server.requests.lock().unwrap().clone();
        let system = reqs
            .first()
            .and_then(|r| r.pointer("/messages/0/content"))
            .and_then(Value::as_str)
            .map_or(0, str::len) as i64;
        let after = records
            .iter()
            .find(|v| v["id"] == "c1" && v["type"] == "response")
            .and_then(|v| v.pointer("/data/estimatedTokensAfter"))
            .and_then(Value::as_i64)
            .unwrap_or(-1);
        let records: Vec<Value> = records.into_iter().map(hide_kept_ids).collect();
        (records, kept, reqs.len(), system, after)
    };
    let (pi, pi_kept, pi_requests, pi_system, pi_after) = run(true);
    let (got, got_kept, got_requests, got_system, got_after) = run(false);
    // estimatedTokensAfter counts the replayed system prompt, whose docs
    // paragraph names pi's or the toolkit's own files: equal once that
    // length difference (chars/4) is taken out.
    let expected = pi_after + (got_system - pi_system) / 4;
    assert!(
        got_after > 0 && (got_after - expected).abs() <= 8,
        "estimatedTokensAfter {got_after}, pi {pi_after} (system prompt {got_system} vs {pi_system} chars)"
    );
    let c1 = got
        .iter()
        .find(|v| v["id"] == "c1" && v["type"] == "response")
        .cloned()
        .unwrap_or_default();
    assert_eq!(c1["success"], true, "compact answered: {c1}");
    assert!(c1["data"]["summary"].is_string(), "{c1}");
    let problems = compare("compact (pi 1.6.0 live)", &pi, &got);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(pi_kept, got_kept, "firstKeptEntryId at the same entry");
    assert_eq!(pi_requests, got_requests, "model requests");
}

// ---------------------------------------------------------------------------
// Session replacement (`fork`, `clone`, `switch_session`, `new_session`)
// and `export_html`, side by side with pi 1.6.0.

/// Logs the session events it gets (to `$PROBE_LOG`), cancels the one named
/// by `$PROBE_CANCEL`, and sends a message from each `session_start`.
const SESSION_PROBE: &str = r#"
import * as fs from "node:fs";
export default function (pi) {
  const log = (o) => fs.appendFileSync(process.env.PROBE_LOG, JSON.stringify(o) + "\n");
  for (const ev of ["session_start", "session_shutdown", "session_before_fork",
                    "session_before_switch", "resources_discover"]) {
    pi.on(ev, async (e) => {
      log(e);
      if (ev === "session_start") {
        pi.sendMessage({ customType: "probe", content: "started " + e.reason, display: true });
      }
      if (process.env.PROBE_CANCEL === ev) return { cancel: true };
    });
  }
}
"#;

/// `@<id>/<json pointer>` in a command: that part of response `<id>`.
fn resolve_refs(v: &Value, seen: &[Value]) -> Value {
    match v {
        Value::String(s) if s.starts_with('@') => {
            let (id, ptr) = s[1..].split_once('/').unwrap_or((&s[1..], ""));
            let r = seen
                .iter()
                .find(|r| r["type"] == "response" && r["id"] == id)
                .unwrap_or_else(|| panic!("no response {id} to take {s} from"));
            r.pointer(&format!("/{ptr}"))
                .cloned()
                .unwrap_or_else(|| panic!("{s}: not in {r}"))
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), resolve_refs(x, seen)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// [`drive`] with `@id/pointer` references resolved from earlier responses.
fn drive_refs(cmd: Command, commands: &[Value]) -> Vec<Value> {
    let mut client = Client::spawn(cmd);
    let mut settled = 0;
    for c in commands {
        let c = resolve_refs(c, &client.seen);
        client.send(&c);
        let id = c["id"].as_str().unwrap_or("").to_string();
        let r = client.response(&id);
        if c["type"] == "prompt" && r["data"]["disposition"] == "started" {
            settled += 1;
            client.wait_count("agent_settled", settled, &|v| v["type"] == "agent_settled");
        }
    }
    let (code, seen, err) = client.finish();
    assert_eq!(code, Some(0), "exit on EOF; stderr:\n{err}");
    seen
}

/// Every session file under the sandbox: `(has parentSession, entry types)`,
/// sorted; and the first session's path.
fn session_files(sb: &Sandbox) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    let mut stack = vec![sb.agent().join("sessions"), sb.cwd()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with(".pi") {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                let lines: Vec<Value> = std::fs::read_to_string(&p)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
                let kinds = lines[1..]
                    .iter()
                    .map(|l| match l["message"]["role"].as_str() {
                        Some(r) => format!("message:{r}"),
                        None => l["type"].as_str().unwrap_or("?").to_string(),
                    })
                    .collect();
                out.push((lines[0]["parentSession"].is_string(), kinds));
            }
        }
    }
    out.sort();
    out
}

/// The probe's log with session files named by what they are (the first
/// session, another one) and entry ids by the fork message they are.
fn probe_log(sb: &Sandbox, records: &[Value]) -> Vec<Value> {
    let first = records
        .iter()
        .find(|r| r["id"] == "s0")
        .and_then(|r| r["data"]["sessionFile"].as_str())
        .unwrap_or("")
        .to_string();
    let forks: Vec<String> = records
        .iter()
        .find(|r| r["id"] == "fm")
        .and_then(|r| r["data"]["messages"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|m| m["entryId"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let text = std::fs::read_to_string(sb.root().join("probe.log")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            for (k, x) in v.as_object_mut().unwrap().iter_mut() {
                let Some(s) = x.as_str() else { continue };
                if k.ends_with("File") {
                    *x = json!(if s == first { "<FIRST>" } else { "<OTHER>" });
                } else if k == "entryId" {
                    *x = json!(forks
                        .iter()
                        .position(|f| f == s)
                        .map_or("<LEAF>".to_string(), |i| format!("<FORK {i}>")));
                } else if k == "cwd" {
                    *x = json!("<CWD>");
                }
            }
            v
        })
        .collect()
}

/// A replacement drive's records, the probe's log, the session files and
/// the HTML files written.
type ReplacementRun = (
    Vec<Value>,
    Vec<Value>,
    Vec<(bool, Vec<String>)>,
    Vec<String>,
);

fn replacement_run(o: &Oracle, pi: bool, cancel: &str, commands: &[Value]) -> ReplacementRun {
    let sb = Sandbox::new();
    let server = Server::start(vec![text_turn("Answer one."), text_turn("Answer two.")]);
    configure(&sb.agent(), server.port, &[]);
    let mut cmd = side(o, &sb, pi, true);
    with_extension(&mut cmd, o, &sb, "probe.js", SESSION_PROBE);
    cmd.env("PROBE_LOG", sb.root().join("probe.log"))
        .env("PROBE_CANCEL", cancel);
    let records = drive_refs(cmd, commands);
    let log = probe_log(&sb, &records);
    let html: Vec<String> = ["x.html", "pi-session-"]
        .iter()
        .filter(|n| {
            std::fs::read_dir(sb.cwd()).unwrap().flatten().any(|e| {
                let f = e.file_name().to_string_lossy().into_owned();
                f.starts_with(*n) && f.ends_with(".html") && e.metadata().is_ok_and(|m| m.len() > 0)
            })
        })
        .map(|n| n.to_string())
        .collect();
    (records, log, session_files(&sb), html)
}

#[test]
fn rpc_fork_clone_switch_new_and_export_match_pi() {
    let Some(o) = Oracle::find("rpc session replacement side by side") else {
        return;
    };
    let commands = [
        json!({"id": "p0", "type": "prompt", "message": "first question"}),
        json!({"id": "p1", "type": "prompt", "message": "second question"}),
        json!({"id": "s0", "type": "get_state"}),
        json!({"id": "fm", "type": "get_fork_messages"}),
        json!({"id": "fkbad", "type": "fork", "entryId": "nope"}),
        json!({"id": "fk", "type": "fork", "entryId": "@fm/data/messages/1/entryId"}),
        json!({"id": "s1", "type": "get_state"}),
        json!({"id": "m1", "type": "get_messages"}),
        json!({"id": "fk0", "type": "fork", "entryId": "@fm/data/messages/0/entryId"}),
        json!({"id": "s2", "type": "get_state"}),
        json!({"id": "sw", "type": "switch_session", "sessionPath": "@s0/data/sessionFile"}),
        json!({"id": "s3", "type": "get_state"}),
        json!({"id": "cl", "type": "clone"}),
        json!({"id": "s4", "type": "get_state"}),
        json!({"id": "ns", "type": "new_session"}),
        json!({"id": "s5", "type": "get_state"}),
        json!({"id": "cl2", "type": "clone"}),
        json!({"id": "ex0", "type": "export_html"}),
        json!({"id": "sw2", "type": "switch_session", "sessionPath": "@s0/data/sessionFile"}),
        json!({"id": "ex1", "type": "export_html"}),
        json!({"id": "ex2", "type": "export_html", "outputPath": "x.html"}),
        json!({"id": "m2", "type": "get_messages"}),
    ];
    let (pi, pi_log, pi_files, pi_html) = replacement_run(&o, true, "", &commands);
    let (got, log, files, html) = replacement_run(&o, false, "", &commands);
    let problems = compare("replacement (pi 1.6.0 live)", &pi, &got);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let ex1 = got.iter().find(|r| r["id"] == "ex1").unwrap();
    assert!(
        ex1["data"]["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("pi-session-") && p.ends_with(".html")),
        "pi's default export name, relative: {ex1}"
    );
    assert_eq!(log, pi_log, "the extensions see the same session events");
    let seen = |t: &str, r: &str| {
        log.iter()
            .filter(|e| e["type"] == t && e["reason"] == r)
            .count()
    };
    assert_eq!(
        (
            seen("session_shutdown", "fork"),
            seen("session_start", "fork")
        ),
        (3, 3),
        "two forks and a clone, each announced: {log:?}"
    );
    assert_eq!(seen("session_start", "resume"), 2);
    assert_eq!(seen("session_start", "new"), 1);
    assert_eq!(
        files.iter().filter(|(parent, _)| *parent).count(),
        2,
        "the written forks name their parent: {files:?}"
    );
    assert_eq!(files, pi_files, "the same session files");
    assert_eq!(html, pi_html, "the same HTML files");
    assert_eq!(html.len(), 2);
    let fk = got.iter().find(|r| r["id"] == "fk").unwrap();
    assert_eq!(
        fk["data"],
        json!({"text": "second question", "cancelled": false})
    );

    // Cancelled by the extension: nothing is replaced.
    let cancelled = [
        json!({"id": "p0", "type": "prompt", "message": "first question"}),
        json!({"id": "s0", "type": "get_state"}),
        json!({"id": "fm", "type": "get_fork_messages"}),
        json!({"id": "fkbad", "type": "fork", "entryId": "nope"}),
        json!({"id": "fk", "type": "fork", "entryId": "@fm/data/messages/0/entryId"}),
        json!({"id": "cl", "type": "clone"}),
        json!({"id": "ns", "type": "new_session"}),
        json!({"id": "sw", "type": "switch_session", "sessionPath": "@s0/data/sessionFile"}),
        json!({"id": "s1", "type": "get_state"}),
    ];
    for hook in ["session_before_fork", "session_before_switch"] {
        let (pi, pi_log, pi_files, _) = replacement_run(&o, true, hook, &cancelled);
        let (got, log, files, _) = replacement_run(&o, false, hook, &cancelled);
        let problems = compare(&format!("{hook} cancels (pi 1.6.0 live)"), &pi, &got);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert_eq!(log, pi_log, "{hook}: the same session events");
        assert_eq!(files, pi_files, "{hook}: the same session files");
    }
}

/// `/bye` calls `ctx.shutdown()`; `session_shutdown` is logged.
const BYE_EXTENSION: &str = r#"
import * as fs from "node:fs";
export default function (pi) {
  pi.registerCommand("bye", { description: "quit", handler: async (_a, ctx) => { ctx.shutdown(); } });
  pi.on("session_shutdown", async (e) => {
    fs.appendFileSync(process.env.PROBE_LOG, JSON.stringify(e) + "\n");
  });
}
"#;

#[test]
fn rpc_extension_shutdown_ends_the_process_after_the_command_as_pi() {
    let Some(o) = Oracle::find("rpc ctx.shutdown side by side") else {
        return;
    };
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let server = Server::start(vec![]);
        configure(&sb.agent(), server.port, &[]);
        let mut cmd = side(&o, &sb, pi, false);
        with_extension(&mut cmd, &o, &sb, "bye.js", BYE_EXTENSION);
        cmd.env("PROBE_LOG", sb.root().join("probe.log"));
        let mut client = Client::spawn(cmd);
        client.send(&json!({"id": "p", "type": "prompt", "message": "/bye"}));
        let r = client.response("p");
        // stdin stays open: the process ends by itself.
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = client.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "pi: {pi}: still running 30 s after ctx.shutdown()"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let log = std::fs::read_to_string(sb.root().join("probe.log")).unwrap_or_default();
        (r, status.code(), log)
    };
    let (pi_r, pi_code, pi_log) = run(true);
    let (r, code, log) = run(false);
    assert_eq!(r["data"], json!({"disposition": "handled"}));
    assert_eq!(r, pi_r);
    assert_eq!(code, pi_code, "exit code");
    assert_eq!(log, pi_log, "one session_shutdown {{reason: quit}}");
    assert_eq!(log.lines().count(), 1);
}

const LIFECYCLE_BYE: &str = r#"
export default function (pi) {
  pi.on("session_shutdown", async (e) => { pi.appendEntry("lifecycle-bye", { reason: e.reason }); });
}
"#;

/// Stdin closed after a prompt: `session_shutdown`'s `appendEntry` lands in
/// the session file, as pi 1.6.0 writes it.
#[test]
fn rpc_eof_session_shutdown_append_entry_is_written_as_pi() {
    let Some(o) = Oracle::find("rpc session_shutdown appendEntry side by side") else {
        return;
    };
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let server = Server::start(vec![text_turn("hello")]);
        configure(&sb.agent(), server.port, &[]);
        let mut cmd = side(&o, &sb, pi, true);
        with_extension(&mut cmd, &o, &sb, "bye.js", LIFECYCLE_BYE);
        let mut client = Client::spawn(cmd);
        client.send(&json!({"id": "p", "type": "prompt", "message": "hi"}));
        client.response("p");
        client.wait_count("agent_end", 1, &|v| v["type"] == "agent_end");
        let (code, _, err) = client.finish();
        assert_eq!(code, Some(0), "pi: {pi}: {err}");
        let lines = session_lines(&sb);
        let last = lines.last().cloned().unwrap_or_default();
        json!({"type": last["type"], "customType": last["customType"], "data": last["data"]})
    };
    let pi = run(true);
    let ours = run(false);
    assert_eq!(
        ours,
        json!({"type": "custom", "customType": "lifecycle-bye", "data": {"reason": "quit"}})
    );
    assert_eq!(ours, pi);
}

/// The commands pi 1.6.0 answers at once while a run streams, with what
/// the session holds so far (the prompt's user message, not the reply);
/// the model commands change the agent from the next request.
fn while_streaming() -> Vec<Value> {
    let mut v: Vec<Value> = [
        ("gm", "get_messages"),
        ("lt", "get_last_assistant_text"),
        ("gs", "get_state"),
        ("gc", "get_commands"),
        ("ss", "get_session_stats"),
        ("ge", "get_entries"),
        ("gt", "get_tree"),
        ("fm", "get_fork_messages"),
        ("am", "get_available_models"),
        ("tl", "get_available_thinking_levels"),
        ("cm", "cycle_model"),
        ("ct", "cycle_thinking_level"),
    ]
    .into_iter()
    .map(|(id, t)| json!({"id": id, "type": t}))
    .collect();
    v.push(json!({"id": "sm", "type": "set_model", "provider": "mock", "modelId": "mock-1"}));
    v.push(json!({"id": "sx", "type": "set_model", "provider": "mock", "modelId": "nope"}));
    v.push(json!({"id": "st", "type": "set_thinking_level", "level": "high"}));
    v.push(json!({"id": "g2", "type": "get_entries"}));
    v
}

#[test]
fn rpc_read_commands_answer_at_once_while_a_run_streams_as_pi() {
    let Some(o) = Oracle::find("rpc answers while streaming side by side") else {
        return;
    };
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let slow = Turn {
            slow: true,
            ..text_turn("A long answer that streams in many small pieces, slowly.")
        };
        let server = Server::start(vec![text_turn("First answer."), slow]);
        configure(&sb.agent(), server.port, &[]);
        let mut client = Client::spawn(side(&o, &sb, pi, true));
        client.send(&json!({"id": "p0", "type": "prompt", "message": "first"}));
        client.wait_count("settled", 1, &|v| v["type"] == "agent_settled");
        let delta = |v: &Value| v["assistantMessageEvent"]["type"] == "text_delta";
        let before = client.seen.iter().filter(|v| delta(v)).count();
        client.send(&json!({"id": "p1", "type": "prompt", "message": "second"}));
        client.wait_count("a text delta of the second reply", before + 1, &delta);
        for c in while_streaming() {
            client.send(&c);
            client.response(c["id"].as_str().unwrap_or(""));
        }
        client.wait_count("settled", 2, &|v| v["type"] == "agent_settled");
        let (code, seen, err) = client.finish();
        assert_eq!(code, Some(0), "{err}");
        // Where each answer came: before the streamed reply ended.
        let end = seen
            .iter()
            .rposition(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
            .unwrap();
        for c in while_streaming() {
            let id = &c["id"];
            let at = seen.iter().position(|v| &v["id"] == id).unwrap();
            assert!(at < end, "pi: {pi}: {id} answered while streaming");
        }
        seen
    };
    let pi = run(true);
    let got = run(false);
    let pick = |r: &[Value]| -> Vec<Value> {
        r.iter()
            .filter(|v| v["type"] == "response" && v["id"] != "p0" && v["id"] != "p1")
            .cloned()
            .collect()
    };
    let problems = compare("while streaming (pi 1.6.0 live)", &pick(&pi), &pick(&got));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let gm = got.iter().find(|v| v["id"] == "gm").unwrap();
    let roles: Vec<&str> = gm["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user"],
        "the context so far: {gm}"
    );
    let gs = got.iter().find(|v| v["id"] == "gs").unwrap();
    assert_eq!(gs["data"]["isStreaming"], true);
    let lt = got.iter().find(|v| v["id"] == "lt").unwrap();
    assert_eq!(lt["data"]["text"], "First answer.");
    let fm = got.iter().find(|v| v["id"] == "fm").unwrap();
    assert_eq!(
        fm["data"]["messages"].as_array().map(Vec::len),
        Some(2),
        "both prompts so far: {fm}"
    );
}

/// Where a compaction runs in [`rpc_get_state_during_compactions_matches_pi`].
#[derive(Clone, Copy, Debug)]
enum Compaction {
    /// The threshold after a run (its `agent_end` emitted).
    AfterRun,
    /// The threshold between turns (the run goes on after it).
    BetweenTurns,
    /// The `compact` command while idle.
    Manual,
}

/// `get_state` while a compaction certainly runs (its summary request is
/// held at the mock until the answer came) and again once it ended and
/// the server settled: pi 1.6.0 answers at once with `isCompacting` true
/// (`isStreaming` as the run's), then false; pi-run the same, for the
/// threshold after a run, between turns and the manual command. A read
/// command the agent answers (`get_session_stats`) is answered meanwhile
/// too.
#[test]
fn rpc_get_state_during_compactions_matches_pi() {
    let Some(o) = Oracle::find("rpc isCompacting side by side") else {
        return;
    };
    let run = |pi: bool, at: Compaction| {
        let sb = Sandbox::new();
        // The first reply stays under the threshold (window 16500 minus
        // the 16384 reserve); the second passes it. Between turns it is a
        // tool call, and the run goes on after the compaction.
        let first = Turn {
            usage: (10, 5),
            ..text_turn("First answer.")
        };
        let big = match at {
            Compaction::BetweenTurns => Turn {
                text: None,
                calls: vec![(
                    "call_1".into(),
                    "bash".into(),
                    json!({"command": "echo hi"}).to_string(),
                )],
                usage: (400, 20),
                slow: false,
            },
            Compaction::AfterRun => Turn {
                usage: (400, 20),
                ..text_turn("An answer.")
            },
            Compaction::Manual => Turn {
                usage: (10, 5),
                ..text_turn("An answer.")
            },
        };
        let summary = text_turn("SUMMARY: one question was answered.");
        // Request 2 is the (first) summary in every case.
        let server = Server::holding(
            vec![
                first,
                big,
                summary.clone(),
                text_turn("Done."),
                summary.clone(),
                summary,
            ],
            vec![2],
        );
        configure(&sb.agent(), server.port, &[]);
        std::fs::write(
            sb.agent().join("settings.json"),
            r#"{"defaultProvider":"mock","defaultModel":"mock-1","compaction":{"keepRecentTokens":1}}"#,
        )
        .unwrap();
        let models = sb.agent().join("models.json");
        let text = std::fs::read_to_string(&models)
            .unwrap()
            .replace("128000", "16500");
        std::fs::write(&models, text).unwrap();
        let mut client = Client::spawn(side(&o, &sb, pi, true));
        let settled = |v: &Value| v["type"] == "agent_settled";
        client.send(&json!({"id": "p0", "type": "prompt", "message": "first question"}));
        client.wait_count("settled", 1, &settled);
        client.send(&json!({"id": "p", "type": "prompt", "message": "a question"}));
        if let Compaction::Manual = at {
            client.wait_count("settled", 2, &settled);
            client.send(&json!({"id": "c", "type": "compact"}));
        }
        client.wait_count("compaction_start", 1, &|v| v["type"] == "compaction_start");
        server.wait_requests(3);
        client.send(&json!({"id": "gs", "type": "get_state"}));
        client.send(&json!({"id": "ss", "type": "get_session_stats"}));
        client.response("gs");
        client.response("ss");
        assert!(
            !client.seen.iter().any(|v| v["type"] == "compaction_end"),
            "pi: {pi}, {at:?}: answered while the summary is held"
        );
        server.release();
        match at {
            Compaction::Manual => {
                client.response("c");
            }
            _ => client.wait_count("settled", 2, &settled),
        }
        client.send(&json!({"id": "gs2", "type": "get_state"}));
        client.response("gs2");
        let (code, seen, err) = client.finish();
        assert_eq!(code, Some(0), "{err}");
        let pick = |id: &str| {
            seen.iter()
                .find(|v| v["type"] == "response" && v["id"] == id)
                .cloned()
                .unwrap_or_default()
        };
        vec![pick("gs"), pick("ss"), pick("gs2")]
    };
    for at in [
        Compaction::AfterRun,
        Compaction::BetweenTurns,
        Compaction::Manual,
    ] {
        let want = run(true, at);
        let got = run(false, at);
        assert_eq!(got[0]["data"]["isCompacting"], true, "{at:?}: {}", got[0]);
        assert_eq!(got[2]["data"]["isCompacting"], false, "{at:?}: {}", got[2]);
        let problems = compare(&format!("{at:?} (pi 1.6.0 live)"), &want, &got);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

/// Our `pi-run --mode rpc` or pi 1.6.0's, in `sb`.
fn side(o: &Oracle, sb: &Sandbox, pi: bool, persisted: bool) -> Command {
    if pi {
        theirs(o, sb, persisted)
    } else {
        ours(sb, persisted)
    }
}

/// Writes `source` as `<sandbox>/<name>` and loads it with `-e` (Node 22
/// runs it on our side too).
fn with_extension(cmd: &mut Command, o: &Oracle, sb: &Sandbox, name: &str, source: &str) {
    let ext = sb.root().join(name);
    std::fs::write(&ext, source).unwrap();
    cmd.args(["-e", ext.to_str().unwrap()])
        .env("PI_NODE", &o.node22);
}

/// `compact` and `bash` sent while a reply streams (held at the mock), side
/// by side with pi 1.6.0: `compact` aborts the run, which settles, then
/// compacts and answers; `bash` runs and answers at once, before the reply
/// ends, and its `bashExecution` joins the session only after the run (the
/// run's next request does not carry it).
#[test]
fn rpc_compact_and_bash_while_a_run_streams_match_pi() {
    let Some(o) = Oracle::find("rpc compact and bash while streaming side by side") else {
        return;
    };
    let run = |pi: bool, compact: bool| {
        let sb = Sandbox::new();
        let reply = if compact {
            text_turn("A reply that never ends.")
        } else {
            Turn {
                text: None,
                calls: vec![(
                    "call_1".into(),
                    "bash".into(),
                    json!({"command": "echo tool"}).to_string(),
                )],
                usage: (100, 20),
                slow: false,
            }
        };
        let server = Server::holding(
            vec![
                text_turn("First answer."),
                reply,
                text_turn(if compact {
                    "SUMMARY: a question."
                } else {
                    "Done."
                }),
            ],
            vec![1],
        );
        configure(&sb.agent(), server.port, &[]);
        std::fs::write(
            sb.agent().join("settings.json"),
            r#"{"defaultProvider":"mock","defaultModel":"mock-1","compaction":{"keepRecentTokens":1}}"#,
        )
        .unwrap();
        let mut client = Client::spawn(side(&o, &sb, pi, true));
        let settled = |v: &Value| v["type"] == "agent_settled";
        client.send(&json!({"id": "p0", "type": "prompt", "message": "first question"}));
        client.wait_count("settled", 1, &settled);
        client.send(&json!({"id": "p1", "type": "prompt", "message": "second question"}));
        client.response("p1");
        server.wait_requests(2);
        client.send(&json!({"id": "gs", "type": "get_state"}));
        client.response("gs");
        let from = client.seen.len();
        if compact {
            client.send(&json!({"id": "c", "type": "compact"}));
            client.response("c");
        } else {
            client.send(&json!({"id": "b", "type": "bash", "command": "echo hello"}));
            client.response("b");
            assert!(
                !client.seen[from..].iter().any(|v| v["type"] == "agent_end"),
                "pi: {pi}: bash answered while the reply is held"
            );
            server.release();
            client.wait_count("settled", 2, &settled);
        }
        client.send(&json!({"id": "gm", "type": "get_messages"}));
        client.response("gm");
        let (code, seen, err) = client.finish();
        assert_eq!(code, Some(0), "{err}");
        let entries: Vec<String> = session_lines(&sb)
            .iter()
            .filter(|l| l["type"] == "message")
            .map(|l| l["message"]["role"].as_str().unwrap_or("?").to_string())
            .collect();
        let reqs = server.requests.lock().unwrap().clone();
        let last = reqs.last().cloned().unwrap_or_default().to_string();
        let records: Vec<Value> = seen[from..].iter().cloned().map(hide_kept_ids).collect();
        (records, entries, reqs.len(), last.contains("hello"))
    };
    for compact in [true, false] {
        let (want, want_entries, want_reqs, want_hello) = run(true, compact);
        let (got, got_entries, got_reqs, got_hello) = run(false, compact);
        let label = if compact { "compact" } else { "bash" };
        let problems = compare(
            &format!("{label} while streaming (pi 1.6.0 live)"),
            &want,
            &got,
        );
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert_eq!(
            got_entries, want_entries,
            "{label}: message entries in order"
        );
        assert_eq!(got_reqs, want_reqs, "{label}: model requests");
        assert!(
            !want_hello && !got_hello,
            "{label}: the run's requests carry no bash output"
        );
    }
}

/// Commands sent while the `compact` command runs (its summary held at
/// the mock), side by side with pi 1.6.0: a `prompt` is refused, a `steer`
/// is queued, `get_state` says `isCompacting`, and `abort` cancels the
/// compaction (`compaction_end {aborted: true}`, `Compaction cancelled`).
#[test]
fn rpc_commands_during_the_compact_command_match_pi() {
    let Some(o) = Oracle::find("rpc commands during compact side by side") else {
        return;
    };
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let server = Server::holding(
            vec![
                text_turn("First answer."),
                text_turn("Second answer."),
                text_turn("SUMMARY: never sent."),
            ],
            vec![2],
        );
        configure(&sb.agent(), server.port, &[]);
        std::fs::write(
            sb.agent().join("settings.json"),
            r#"{"defaultProvider":"mock","defaultModel":"mock-1","compaction":{"keepRecentTokens":1}}"#,
        )
        .unwrap();
        let mut client = Client::spawn(side(&o, &sb, pi, true));
        let settled = |v: &Value| v["type"] == "agent_settled";
        for (n, id) in ["p0", "p1"].into_iter().enumerate() {
            client.send(&json!({"id": id, "type": "prompt", "message": format!("question {id}")}));
            client.wait_count("settled", n + 1, &settled);
        }
        let from = client.seen.len();
        client.send(&json!({"id": "c", "type": "compact"}));
        client.wait_count("compaction_start", 1, &|v| v["type"] == "compaction_start");
        server.wait_requests(3);
        for c in [
            json!({"id": "q", "type": "prompt", "message": "during"}),
            json!({"id": "s", "type": "steer", "message": "steer during"}),
            json!({"id": "gs", "type": "get_state"}),
        ] {
            client.send(&c);
            client.response(c["id"].as_str().unwrap_or(""));
        }
        assert!(
            !client.seen.iter().any(|v| v["type"] == "compaction_end"),
            "pi: {pi}: answered while the summary is held"
        );
        client.send(&json!({"id": "a", "type": "abort"}));
        client.response("c");
        client.response("a");
        let (code, seen, err) = client.finish();
        assert_eq!(code, Some(0), "{err}");
        seen[from..].to_vec()
    };
    let want = run(true);
    let got = run(false);
    let problems = compare("during compact (pi 1.6.0 live)", &want, &got);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let c = got
        .iter()
        .find(|v| v["id"] == "c" && v["type"] == "response")
        .cloned()
        .unwrap_or_default();
    assert_eq!(c["error"], "Compaction cancelled", "{c}");
}

/// A `get_state` sent while a failed request waits for its retry (the
/// provider's 500, a 2 s backoff) is answered at once, before the retry
/// begins its turn, on both sides.
#[test]
fn rpc_get_state_during_a_retry_backoff_is_answered_at_once_as_pi() {
    use crate::common::{sse_text, Reply, ScriptServer};
    let Some(o) = Oracle::find("rpc get_state during a retry side by side") else {
        return;
    };
    let run = |pi: bool| {
        let sb = Sandbox::new();
        let server = ScriptServer::start(vec![
            Reply::Status(500, r#"{"error":{"message":"boom"}}"#.into()),
            Reply::Sse(sse_text("Recovered.")),
        ]);
        server.configure(&sb.agent());
        std::fs::write(
            sb.agent().join("settings.json"),
            r#"{"defaultProvider":"mock","defaultModel":"mock-model","retry":{"baseDelayMs":2000}}"#,
        )
        .unwrap();
        let mut client = Client::spawn(side(&o, &sb, pi, true));
        client.send(&json!({"id": "p", "type": "prompt", "message": "hello"}));
        client.wait_count("auto_retry_start", 1, &|v| v["type"] == "auto_retry_start");
        client.send(&json!({"id": "gs", "type": "get_state"}));
        let gs = client.response("gs");
        client.wait_count("settled", 1, &|v| v["type"] == "agent_settled");
        let (code, seen, err) = client.finish();
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            server.requests.lock().unwrap().len(),
            2,
            "pi: {pi}: retried"
        );
        // Answered at once: before the retry (2 s later) starts its turn.
        let at = |pred: &dyn Fn(&Value) -> bool| seen.iter().position(pred);
        let answered = at(&|v| v["id"] == "gs" && v["type"] == "response");
        let waiting = at(&|v| v["type"] == "auto_retry_start").unwrap_or(usize::MAX);
        let retry = seen
            .iter()
            .skip(waiting)
            .position(|v| v["type"] == "turn_start")
            .map(|n| n + waiting);
        (
            answered.is_some() && retry.is_some() && answered < retry,
            gs["data"]["isStreaming"].clone(),
            gs["data"]["messageCount"].clone(),
        )
    };
    let want = run(true);
    let got = run(false);
    assert!(want.0, "pi answers during the backoff: {want:?}");
    assert_eq!(
        got, want,
        "(answered before the retry began, isStreaming, messageCount)"
    );
}

/// Capture 10's three stdio servers (`tests/mcp/weather.py`, answering as
/// the capture's wire log shows) and two invalid entries.
fn mcp10_setup(sb: &Sandbox, _port: u16) {
    let weather = crate::common::repo().join("tests/mcp/weather.py");
    let wire = sb.root().join("wire.jsonl");
    let server = |name: &str, extra: Value| {
        let mut v = json!({"command": "python3",
            "args": [weather.display().to_string(), name, wire.display().to_string()]});
        for (k, x) in extra.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        v
    };
    let cfg = json!({"mcpServers": {
        "wx-direct": server("wx-direct", json!({"exposure": "direct",
            "toolExposure": {"delete_all": "hidden"}})),
        "wx-code": server("wx-code", json!({"exposure": "codemode"})),
        "wx-def": server("wx-def", json!({"exposure": "deferred"})),
        "bad name!": {"command": "x"},
        "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
    }});
    std::fs::write(sb.agent().join("mcp.json"), cfg.to_string()).unwrap();
}

/// Capture 10 (MCP over stdio): the start-up notice for the two bad
/// entries comes before the first prompt; the direct tool is called over
/// the wire; `/mcp` is handled (not sent to the model) with one line per
/// server and the config errors. Responses, event types and both notices'
/// text against the capture and live pi 1.6.0; the servers saw the
/// handshake and the call in the capture's order.
#[test]
fn rpc_capture_10_mcp_stdio() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("python3 is needed for the MCP fixture server");
        }
        eprintln!("SKIP rpc_capture_10_mcp_stdio: no python3");
        return;
    }
    check_replay(
        "10-mcp-stdio.jsonl",
        Replay {
            setup: Some(mcp10_setup),
            ..Replay::default()
        },
    );
}

/// What each server of capture 10 was asked, in order (methods, the call's
/// tool and arguments): ours against the capture's wire log.
#[test]
fn rpc_capture_10_mcp_wire_matches_the_capture() {
    let Ok(text) = std::fs::read_to_string(Path::new(TRANSCRIPTS).join("10-mcp-stdio.wire.jsonl"))
    else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("10-mcp-stdio.wire.jsonl missing");
        }
        eprintln!("SKIP rpc_capture_10_mcp_wire: the capture is not on this machine");
        return;
    };
    let Some(cap) = load_capture("10-mcp-stdio.jsonl") else {
        return;
    };
    let sb = Sandbox::new();
    let server = Server::start(turns_of(&cap));
    configure(&sb.agent(), server.port, &[]);
    mcp10_setup(&sb, server.port);
    let _ = replay(&cap, ours(&sb, persisted(&cap)));
    let asked = |text: &str| {
        let mut by: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(l).unwrap_or_default();
            if v["dir"] != "in" {
                continue;
            }
            let m = &v["msg"];
            let mut what = m["method"].as_str().unwrap_or("?").to_string();
            if what == "tools/call" {
                what = format!(
                    "{what} {} {}",
                    m["params"]["name"], m["params"]["arguments"]
                );
            }
            by.entry(v["srv"].as_str().unwrap_or("?").to_string())
                .or_default()
                .push(what);
        }
        by
    };
    let ours_wire = std::fs::read_to_string(sb.root().join("wire.jsonl")).unwrap_or_default();
    assert_eq!(asked(&ours_wire), asked(&text));
}

/// `/mcp` in `-p --mode json` (capture 10's servers): handled without a
/// model request and without output beyond the session header, as pi
/// 1.6.0 (whose notices go only to a UI); exit 0.
#[test]
fn mcp_command_in_json_mode_is_handled_silently_as_pi() {
    let run = |pi: Option<&crate::common::Oracle>| {
        let sb = Sandbox::new();
        let server = Server::start(vec![text_turn("should not be asked")]);
        configure(&sb.agent(), server.port, &[]);
        mcp10_setup(&sb, server.port);
        let mut cmd = match pi {
            Some(o) => {
                let mut c = o.pi160(&sb);
                c.env("PI_TELEMETRY", "0");
                c
            }
            None => sb.cmd("pi-run"),
        };
        let out = cmd
            .env("PI_OFFLINE", "1")
            .args(["--no-session", "--mode", "json", "-p", "/mcp"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let types: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["type"].as_str().unwrap_or("?").to_string())
            .collect();
        (out.status.code(), types, server.request_count())
    };
    // pi prints the header only; pi-run closes every JSON run with its
    // run_end record.
    let mut ours = run(None);
    assert_eq!(ours.1.pop().as_deref(), Some("run_end"));
    assert_eq!(ours, (Some(0), vec!["session".to_string()], 0));
    if let Some(o) = crate::common::Oracle::find("mcp command in json mode") {
        assert_eq!(run(Some(&o)), ours, "pi 1.6.0 vs ours");
    }
}

// ---------------------------------------------------------------------------
// Extensions loaded again after a session replacement, side by side with
// pi 1.6.0.

/// The reload probe (`tests/ext-node/fixtures/reload-probe.cjs`).
const RELOAD_PROBE: &str = include_str!("../ext-node/fixtures/reload-probe.cjs");

/// One drive with the reload probe: the records, and the probe's log (its
/// module id checked to be one and dropped) followed by one record of the
/// commands each `get_commands` listed and the tools of each model request.
fn reload_run(o: &Oracle, pi: bool, commands: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let sb = Sandbox::new();
    let server = Server::start(vec![
        text_turn("Answer one."),
        text_turn("Answer two."),
        text_turn("Answer three."),
    ]);
    configure(&sb.agent(), server.port, &[]);
    let mut cmd = side(o, &sb, pi, true);
    with_extension(&mut cmd, o, &sb, "probe.cjs", RELOAD_PROBE);
    cmd.args(["--probe-flag", "cli-value"])
        .env("PROBE_LOG", sb.root().join("probe.log"));
    let records = drive_refs(cmd, commands);
    let text = std::fs::read_to_string(sb.root().join("probe.log")).unwrap_or_default();
    let mut ids = std::collections::BTreeSet::new();
    let log: Vec<Value> = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            ids.insert(v["mod"].to_string());
            v.as_object_mut().unwrap().remove("mod");
            v
        })
        .collect();
    assert_eq!(ids.len(), 1, "pi: {pi}: one module instance: {ids:?}");
    let listed: Vec<Value> = responses(&records)
        .iter()
        .filter(|r| r["command"] == "get_commands")
        .map(|r| {
            let names: Vec<Value> = r["data"]["commands"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|c| json!([c["name"], c["description"]]))
                        .collect()
                })
                .unwrap_or_default();
            json!({"id": r["id"], "commands": names})
        })
        .collect();
    let tools: Vec<Value> = server
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|b| {
            json!(b["tools"]
                .as_array()
                .map(|a| a
                    .iter()
                    .map(|t| t["function"]["name"].clone())
                    .collect::<Vec<_>>())
                .unwrap_or_default())
        })
        .collect();
    let mut log = log;
    log.push(json!({"listed": listed, "tools": tools}));
    (records, log)
}

#[test]
fn rpc_extensions_are_loaded_again_after_session_replacement_as_pi() {
    let Some(o) = Oracle::find("rpc extension reload side by side") else {
        return;
    };
    let commands = [
        json!({"id": "gc0", "type": "get_commands"}),
        json!({"id": "ns", "type": "new_session"}),
        json!({"id": "gc1", "type": "get_commands"}),
        json!({"id": "pp", "type": "prompt", "message": "/probe a"}),
        json!({"id": "po1", "type": "prompt", "message": "/only1"}),
        json!({"id": "po2", "type": "prompt", "message": "/only2"}),
        json!({"id": "st", "type": "prompt", "message": "/stale"}),
        json!({"id": "p1", "type": "prompt", "message": "hello"}),
        json!({"id": "s1", "type": "get_state"}),
        json!({"id": "fm", "type": "get_fork_messages"}),
        json!({"id": "fk", "type": "fork", "entryId": "@fm/data/messages/0/entryId"}),
        json!({"id": "gc2", "type": "get_commands"}),
        json!({"id": "p2", "type": "prompt", "message": "again"}),
        json!({"id": "cl", "type": "clone"}),
        json!({"id": "sw", "type": "switch_session", "sessionPath": "@s1/data/sessionFile"}),
        json!({"id": "gc3", "type": "get_commands"}),
        json!({"id": "p3", "type": "prompt", "message": "/probe z"}),
    ];
    let (pi, pi_log) = reload_run(&o, true, &commands);
    let (got, log) = reload_run(&o, false, &commands);
    let problems = compare("reload (pi 1.6.0 live)", &pi, &got);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(
        log, pi_log,
        "the probe saw the same factory calls, events and commands"
    );
    // What that record says, spelled out (it fails on the old pi-run,
    // which kept the first registration serving every session).
    let of = |t: &str| -> Vec<(u64, String)> {
        log.iter()
            .filter(|e| e["type"] == t)
            .map(|e| {
                (
                    e["n"].as_u64().unwrap_or(0),
                    e["reason"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    assert_eq!(
        of("factory").len(),
        5,
        "a factory call per session: {log:?}"
    );
    assert_eq!(
        of("session_start"),
        [
            (1, "startup"),
            (2, "new"),
            (3, "fork"),
            (4, "fork"),
            (5, "resume")
        ]
        .map(|(n, r)| (n, r.to_string()))
    );
    assert_eq!(
        of("session_shutdown"),
        [
            (1, "new"),
            (2, "fork"),
            (3, "fork"),
            (4, "resume"),
            (5, "quit")
        ]
        .map(|(n, r)| (n, r.to_string()))
    );
    let stale = log
        .iter()
        .find(|e| e["name"] == "stale")
        .expect("/stale ran");
    for (k, v) in stale["out"].as_object().unwrap() {
        assert!(
            v["err"].as_str().is_some_and(|e| e
                .starts_with("This extension ctx is stale after session replacement or reload.")),
            "{k}: {v}"
        );
    }
    let last = log.last().unwrap();
    assert_eq!(
        last["tools"][0],
        json!(["read", "bash", "edit", "write", "tool_2"]),
        "the first instance's tools are gone from the next request"
    );
}

/// The `user_bash` probe (`tests/ext-node/fixtures/user-bash.cjs`).
const USER_BASH_PROBE: &str = include_str!("../ext-node/fixtures/user-bash.cjs");

/// `bash` sent while a reply streams (held at the mock), with an
/// extension's `user_bash` handler, side by side with pi 1.6.0: the
/// handler is asked at once (not idle), and its `{result}`, the command
/// run here (no answer: `bash_execution_update`, then the response) or its
/// throw (`extension_error`, a failed response) answer before the reply
/// ends; the `bashExecution` entry is appended after the run, whose
/// requests do not carry it.
#[test]
fn rpc_bash_with_a_user_bash_handler_while_a_run_streams_matches_pi() {
    let Some(o) = Oracle::find("rpc bash with user_bash while streaming side by side") else {
        return;
    };
    let run = |pi: bool, mode: &str| {
        let sb = Sandbox::new();
        let server = Server::holding(
            vec![text_turn("First answer."), text_turn("Second answer.")],
            vec![1],
        );
        configure(&sb.agent(), server.port, &[]);
        let mut cmd = side(&o, &sb, pi, true);
        with_extension(&mut cmd, &o, &sb, "user-bash.cjs", USER_BASH_PROBE);
        cmd.env("PROBE_LOG", sb.root().join("probe.log"))
            .env("UB_MODE", mode);
        let mut client = Client::spawn(cmd);
        let settled = |v: &Value| v["type"] == "agent_settled";
        client.send(&json!({"id": "p0", "type": "prompt", "message": "first question"}));
        client.wait_count("settled", 1, &settled);
        client.send(&json!({"id": "p1", "type": "prompt", "message": "second question"}));
        client.response("p1");
        server.wait_requests(2);
        let from = client.seen.len();
        client.send(&json!({"id": "b", "type": "bash", "command": "echo hello"}));
        client.response("b");
        assert!(
            !client.seen[from..].iter().any(|v| v["type"] == "agent_end"),
            "pi: {pi}, {mode}: bash answered while the reply is held"
        );
        server.release();
        client.wait_count("settled", 2, &settled);
        client.send(&json!({"id": "gm", "type": "get_messages"}));
        client.response("gm");
        let (code, seen, err) = client.finish();
        assert_eq!(code, Some(0), "{err}");
        let entries: Vec<String> = session_lines(&sb)
            .iter()
            .filter(|l| l["type"] == "message")
            .map(|l| l["message"]["role"].as_str().unwrap_or("?").to_string())
            .collect();
        let reqs = server.requests.lock().unwrap().clone();
        let carried = reqs.iter().any(|r| r.to_string().contains("hello"));
        let log = std::fs::read_to_string(sb.root().join("probe.log")).unwrap_or_default();
        let records: Vec<Value> = seen[from..].to_vec();
        (records, entries, reqs.len(), carried, log)
    };
    for mode in ["local", "result", "throw"] {
        let (want, want_entries, want_reqs, want_carried, want_log) = run(true, mode);
        let (got, got_entries, got_reqs, got_carried, got_log) = run(false, mode);
        let label = format!("bash with user_bash ({mode}) while streaming (pi 1.6.0 live)");
        let problems = compare(&label, &want, &got);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        let problems = compare_full(
            &label,
            &["extension_error", "bash_execution_update"],
            &want,
            &got,
        );
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert_eq!(
            got_entries, want_entries,
            "{mode}: message entries in order"
        );
        assert_eq!(got_reqs, want_reqs, "{mode}: model requests");
        assert!(
            !want_carried && !got_carried,
            "{mode}: the run's requests carry no bash output"
        );
        assert_eq!(got_log, want_log, "{mode}: the handler saw the same");
        assert_eq!(
            got_log.trim(),
            r#"{"type":"user_bash","command":"echo hello","idle":false}"#
        );
    }
}
