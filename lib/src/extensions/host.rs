//! One extension process and its `pi-ext/1` conversation (see
//! [`crate::format::extension`]): spawned in its own process group, the
//! handshake under a timeout, numbered requests awaited with per-request
//! timeouts, calls from the extension served concurrently with whatever
//! request is outstanding (a handler may call back into the host while the
//! host waits for its answer), stderr forwarded line by line, and a dead
//! process (exit, broken protocol) turned into one diagnostic that fails
//! everything outstanding. While the extension waits for a person (a
//! `ui.confirm/select/input/editor` call is outstanding) the clock of its
//! requests is paused: a slow human is not a timeout.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::agent::hooks::BoxFuture;
use crate::format::extension::{
    ExtRecord, Hello, HostRecord, Register, RegisterMore, PROTOCOL_VERSION,
};

/// Serves the calls an extension makes (`appendEntry`, `getActiveTools`,
/// …): the answer, or the error message it gets back.
pub trait CallHandler: Send + Sync {
    fn call(
        &self,
        ext: usize,
        method: String,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, String>>;

    /// A failure extension `ext` of host `host` (its display name)
    /// reports on its own (`extension_error`).
    fn extension_error(&self, host: &str, ext: usize, event: &str, error: &str);
}

/// An answer: the outcome, and the messages of handlers that threw without
/// ending the chain.
type Answer = (Result<Value, String>, Vec<String>);

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum HostError {
    /// The extension answered with an error (the thrown message).
    Failed(String),
    /// No answer within the limit.
    Timeout,
    /// The process is gone or broke the protocol.
    Dead(String),
    /// The run was aborted meanwhile.
    Aborted,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Spawn {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The path diagnostics name (the extension file).
    pub display: String,
    pub cwd: PathBuf,
    /// The prefix of forwarded stderr lines and diagnostics (`pi-run`).
    pub prog: String,
}

struct Pending {
    tx: oneshot::Sender<Answer>,
    updates: Option<mpsc::UnboundedSender<Value>>,
}

/// A running extension process.
pub struct Host {
    pub display: String,
    prog: String,
    stdin: Arc<tokio::sync::Mutex<Option<tokio::process::ChildStdin>>>,
    pending: Arc<Mutex<HashMap<u64, Pending>>>,
    next_id: AtomicU64,
    dead: Arc<Mutex<Option<String>>>,
    pgid: Option<i32>,
    exited: watch::Receiver<bool>,
    handler: Arc<OnceLock<Arc<dyn CallHandler>>>,
    more: Arc<Mutex<Vec<RegisterMore>>>,
    /// How many dialogs (`ui.confirm` …) the extension is waiting for.
    dialogs: watch::Receiver<usize>,
    /// Its `register` said it answers `reload`.
    reloads: AtomicBool,
}

/// The UI calls that wait for a person.
fn is_dialog(method: &str) -> bool {
    matches!(
        method,
        "ui.confirm" | "ui.select" | "ui.input" | "ui.editor"
    )
}

/// `fut` with a limit whose clock runs only while no dialog is open
/// (`dialogs` is 0); `None` when the limit ran out.
async fn paused_timeout<F: std::future::Future>(
    limit: Duration,
    fut: F,
    mut dialogs: watch::Receiver<usize>,
) -> Option<F::Output> {
    tokio::pin!(fut);
    let mut left = limit;
    loop {
        let open = *dialogs.borrow_and_update();
        if open > 0 {
            tokio::select! {
                out = &mut fut => return Some(out),
                gone = async { dialogs.wait_for(|n| *n == 0).await.is_err() } => if gone {
                    // No sender any more: nothing can pause the clock.
                    return tokio::time::timeout(left, fut).await.ok();
                },
            }
            continue;
        }
        let start = tokio::time::Instant::now();
        tokio::select! {
            out = &mut fut => return Some(out),
            _ = tokio::time::sleep(left) => return None,
            gone = async { dialogs.wait_for(|n| *n > 0).await.is_err() } => {
                left = left.saturating_sub(start.elapsed());
                if gone {
                    return tokio::time::timeout(left, fut).await.ok();
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Writes one record line; `false` once stdin is closed or broken.
async fn write_line(
    stdin: &tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    mut line: String,
) -> bool {
    line.push('\n');
    let mut g = stdin.lock().await;
    let Some(w) = g.as_mut() else {
        return false;
    };
    if w.write_all(line.as_bytes()).await.is_err() || w.flush().await.is_err() {
        g.take();
        return false;
    }
    true
}

/// Kills process group `pgid` with SIGKILL.
fn kill_group(pgid: Option<i32>) {
    if let Some(pgid @ 1..) = pgid {
        // SAFETY: kill(2) with a negative pid signals a process group; no
        // memory is involved.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Marks the host dead (the first reason wins), prints the diagnostic once
/// and fails every outstanding request.
fn die(
    dead: &Mutex<Option<String>>,
    pending: &Mutex<HashMap<u64, Pending>>,
    prog: &str,
    reason: String,
) {
    {
        let mut d = lock(dead);
        if d.is_some() {
            return;
        }
        eprintln!("{prog}: {reason}");
        *d = Some(reason);
    }
    lock(pending).clear();
}

impl Host {
    /// Starts the process, sends `hello`, waits for `register`.
    pub async fn start(
        spawn: Spawn,
        hello: Hello,
        handshake: Duration,
    ) -> Result<(Arc<Host>, Register), String> {
        let display = spawn.display.clone();
        let mut cmd = tokio::process::Command::new(&spawn.program);
        cmd.args(&spawn.args)
            .current_dir(&spawn.cwd)
            .env("PI_EXT_PROTOCOL", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("extension {display}: cannot start: {e}"))?;
        let pgid = child.id().and_then(|p| i32::try_from(p).ok());
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            kill_group(pgid);
            return Err(format!("extension {display}: cannot open its pipes"));
        };
        let prog = spawn.prog.clone();
        let pending: Arc<Mutex<HashMap<u64, Pending>>> = Arc::default();
        let dead: Arc<Mutex<Option<String>>> = Arc::default();
        let handler: Arc<OnceLock<Arc<dyn CallHandler>>> = Arc::default();
        let more: Arc<Mutex<Vec<RegisterMore>>> = Arc::default();
        let (dialogs_tx, dialogs) = watch::channel(0usize);
        let dialogs_tx = Arc::new(dialogs_tx);

        // Every record is written by whoever sends it, holding the lock for
        // the whole line (so lines never interleave and keep send order).
        let stdin = Arc::new(tokio::sync::Mutex::new(Some(stdin)));

        // stderr is free text, forwarded with the extension's name.
        {
            let (prog, display) = (prog.clone(), display.clone());
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    eprintln!("{prog}: extension {display}: {l}");
                }
            });
        }

        // Reader: answers, updates, calls, registrations.
        let (reg_tx, reg_rx) = oneshot::channel::<Register>();
        let (eof_tx, eof_rx) = oneshot::channel::<()>();
        {
            let (pending, dead, handler, more) = (
                Arc::clone(&pending),
                Arc::clone(&dead),
                Arc::clone(&handler),
                Arc::clone(&more),
            );
            let (prog, display, stdin) = (prog.clone(), display.clone(), Arc::clone(&stdin));
            tokio::spawn(async move {
                let mut reg_tx = Some(reg_tx);
                let mut lines = BufReader::new(stdout).lines();
                loop {
                    let line = match lines.next_line().await {
                        Ok(Some(l)) => l,
                        Ok(None) => break,
                        Err(e) => {
                            die(
                                &dead,
                                &pending,
                                &prog,
                                format!("extension {display}: protocol error: {e}"),
                            );
                            kill_group(pgid);
                            break;
                        }
                    };
                    if line.trim().is_empty() {
                        continue;
                    }
                    match ExtRecord::parse(&line) {
                        Ok(ExtRecord::Register(r)) => {
                            if let Some(tx) = reg_tx.take() {
                                let _ = tx.send(r);
                            }
                        }
                        Ok(ExtRecord::RegisterMore(m)) => lock(&more).push(m),
                        Ok(ExtRecord::Result {
                            id,
                            outcome,
                            errors,
                        }) => {
                            if let Some(p) = lock(&pending).remove(&id) {
                                let _ = p.tx.send((outcome, errors));
                            }
                        }
                        Ok(ExtRecord::ExtensionError { ext, event, error }) => {
                            match handler.get() {
                                Some(h) => h.extension_error(&display, ext, &event, &error),
                                None => eprintln!("{prog}: extension {display}: {event}: {error}"),
                            }
                        }
                        Ok(ExtRecord::Update { id, partial }) => {
                            if let Some(u) = lock(&pending).get(&id).and_then(|p| p.updates.clone())
                            {
                                let _ = u.send(partial);
                            }
                        }
                        Ok(ExtRecord::Call {
                            id,
                            ext,
                            method,
                            params,
                        }) => {
                            // Started here, in line order (a call's effect
                            // precedes the answers read after it); awaited
                            // apart, so a slow answer blocks nothing.
                            let dialog = is_dialog(&method);
                            if dialog {
                                dialogs_tx.send_modify(|n| *n += 1);
                            }
                            let fut = match handler.get() {
                                Some(h) => h.call(ext, method, params),
                                None => Box::pin(std::future::ready(Err(format!(
                                    "pi-toolkit host: {method} is not available during loading"
                                )))),
                            };
                            let w = Arc::clone(&stdin);
                            let open = Arc::clone(&dialogs_tx);
                            tokio::spawn(async move {
                                let r = fut.await;
                                if dialog {
                                    open.send_modify(|n| *n = n.saturating_sub(1));
                                }
                                let (result, error) = match r {
                                    Ok(v) => (Some(v), None),
                                    Err(e) => (None, Some(e)),
                                };
                                write_line(&w, HostRecord::Return { id, result, error }.to_line())
                                    .await;
                            });
                        }
                        Ok(ExtRecord::Unknown(_)) => {}
                        Err(e) => {
                            die(
                                &dead,
                                &pending,
                                &prog,
                                format!("extension {display}: protocol error: {e}"),
                            );
                            kill_group(pgid);
                            break;
                        }
                    }
                }
                let _ = eof_tx.send(());
            });
        }

        // Waiter: an exit is a death, once the answers already written are
        // read.
        let (exit_tx, exit_rx) = watch::channel(false);
        {
            let (pending, dead, prog, display) = (
                Arc::clone(&pending),
                Arc::clone(&dead),
                prog.clone(),
                display.clone(),
            );
            tokio::spawn(async move {
                let status = child.wait().await;
                let _ = tokio::time::timeout(Duration::from_millis(500), eof_rx).await;
                let how = match status {
                    Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                        (Some(c), _) => format!("code {c}"),
                        (None, Some(sig)) => format!("signal {sig}"),
                        _ => "unknown status".into(),
                    },
                    Err(e) => e.to_string(),
                };
                die(
                    &dead,
                    &pending,
                    &prog,
                    format!("extension {display} exited ({how})"),
                );
                let _ = exit_tx.send(true);
            });
        }

        let host = Arc::new(Host {
            display: display.clone(),
            prog,
            stdin,
            pending,
            next_id: AtomicU64::new(1),
            dead,
            pgid,
            exited: exit_rx,
            handler,
            more,
            dialogs,
            reloads: AtomicBool::new(false),
        });
        host.send(HostRecord::Hello(hello)).await;
        let reg = match tokio::time::timeout(handshake, reg_rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => {
                let why = host
                    .dead_reason()
                    .unwrap_or_else(|| format!("extension {display} closed its output"));
                host.kill();
                return Err(format!("{why} before registering"));
            }
            Err(_) => {
                host.kill();
                return Err(format!(
                    "extension {display} did not register within {} s",
                    handshake.as_secs_f64()
                ));
            }
        };
        if reg.protocol != PROTOCOL_VERSION {
            let reason = format!(
                "protocol {} not supported (host speaks {PROTOCOL_VERSION})",
                reg.protocol
            );
            host.send(HostRecord::Bye {
                reason: Some(reason.clone()),
            })
            .await;
            host.stdin.lock().await.take();
            host.kill();
            return Err(format!("extension {display}: {reason}"));
        }
        host.reloads.store(reg.reloads, Ordering::Relaxed);
        Ok((host, reg))
    }

    /// Who serves this extension's calls (set once, after registration).
    pub fn set_handler(&self, h: Arc<dyn CallHandler>) {
        let _ = self.handler.set(h);
    }

    /// Registrations made after load, not taken yet.
    pub fn take_more(&self) -> Vec<RegisterMore> {
        std::mem::take(&mut lock(&self.more))
    }

    /// Whether it answers [`HostRecord::Reload`] (loads its extensions
    /// again for a new session).
    pub fn reloads(&self) -> bool {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Why the process is dead, if it is.
    pub fn dead_reason(&self) -> Option<String> {
        lock(&self.dead).clone()
    }

    /// Writes one record without waiting for the write (it may wait for
    /// a full pipe).
    fn send_later(&self, rec: HostRecord) {
        // Outside a runtime (a drop while it shuts down) nothing is sent.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let stdin = Arc::clone(&self.stdin);
        rt.spawn(async move { write_line(&stdin, rec.to_line()).await });
    }

    /// Writes one record (a one-way record: configure, bye).
    pub async fn send(&self, rec: HostRecord) {
        write_line(&self.stdin, rec.to_line()).await;
    }

    /// Sends request `make(id)` and waits for its answer; `updates`
    /// receives `update` records (tool executions). `timeout: None` waits
    /// until the answer, the process's death or `cancel`.
    pub async fn request(
        &self,
        make: impl FnOnce(u64) -> HostRecord,
        updates: Option<mpsc::UnboundedSender<Value>>,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<Value, HostError> {
        self.request_full(make, updates, timeout, cancel).await.0
    }

    /// [`Host::request`], with the answer's `errors` (handlers that threw
    /// without ending the chain; the caller reports them).
    pub async fn request_full(
        &self,
        make: impl FnOnce(u64) -> HostRecord,
        updates: Option<mpsc::UnboundedSender<Value>>,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> (Result<Value, HostError>, Vec<String>) {
        if let Some(r) = self.dead_reason() {
            return (Err(HostError::Dead(r)), Vec::new());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, Pending { tx, updates });
        // Checked again with the request in the table: a death meanwhile
        // has cleared it, or clears it later.
        if let Some(r) = self.dead_reason() {
            lock(&self.pending).remove(&id);
            return (Err(HostError::Dead(r)), Vec::new());
        }
        // The write is inside the limit too: an extension that stops
        // reading fills the pipe.
        let line = make(id).to_line();
        let work = async {
            write_line(&self.stdin, line).await;
            rx.await
        };
        let wait = async {
            match timeout {
                Some(t) => paused_timeout(t, work, self.dialogs.clone()).await,
                None => Some(work.await),
            }
        };
        // Dropped before it ends (the agent stopped waiting: an abort), the
        // request is forgotten and the extension told, as on `cancel`.
        let mut abandon = Abandon {
            host: self,
            id,
            armed: true,
        };
        let answer = tokio::select! {
            a = wait => a,
            _ = cancel.cancelled() => {
                abandon.armed = false;
                lock(&self.pending).remove(&id);
                self.send_later(HostRecord::Cancel { id });
                return (Err(HostError::Aborted), Vec::new());
            }
        };
        abandon.armed = false;
        match answer {
            Some(Ok((Ok(v), errors))) => (Ok(v), errors),
            Some(Ok((Err(msg), errors))) => (Err(HostError::Failed(msg)), errors),
            Some(Err(_)) => (
                Err(HostError::Dead(self.dead_reason().unwrap_or_else(|| {
                    format!("extension {} is not running", self.display)
                }))),
                Vec::new(),
            ),
            None => {
                lock(&self.pending).remove(&id);
                self.send_later(HostRecord::Cancel { id });
                (Err(HostError::Timeout), Vec::new())
            }
        }
    }

    /// Kills the process group at once.
    pub fn kill(&self) {
        kill_group(self.pgid);
    }

    /// The end: `bye`, stdin closed, up to `grace` for the process to exit,
    /// then its whole group is killed. Quiet: the process was asked to go.
    pub async fn close(&self, grace: Duration) {
        let was_alive = {
            let mut d = lock(&self.dead);
            let alive = d.is_none();
            if alive {
                *d = Some(format!("extension {} was stopped", self.display));
            }
            alive
        };
        if was_alive {
            let _ = tokio::time::timeout(grace, self.send(HostRecord::Bye { reason: None })).await;
        }
        if let Ok(mut g) = tokio::time::timeout(grace, self.stdin.lock()).await {
            g.take();
        }
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(grace, exited.wait_for(|e| *e)).await;
        self.kill();
    }

    /// The prefix of this host's diagnostics.
    pub fn prog(&self) -> &str {
        &self.prog
    }
}

/// A request in flight (see [`Host::request_full`]): dropped while still
/// armed, its entry leaves the table and the extension gets `cancel`.
struct Abandon<'a> {
    host: &'a Host,
    id: u64,
    armed: bool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(&self.host.pending).remove(&self.id);
            self.host.send_later(HostRecord::Cancel { id: self.id });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::extension::{Ctx, LoadEntry};

    /// Answers `ui.confirm` after `delay` (a slow person), `true`.
    struct SlowUi(Duration);
    impl CallHandler for SlowUi {
        fn call(
            &self,
            _: usize,
            method: String,
            _: Value,
        ) -> BoxFuture<'static, Result<Value, String>> {
            let d = self.0;
            Box::pin(async move {
                tokio::time::sleep(d).await;
                if method == "ui.confirm" {
                    Ok(Value::Bool(true))
                } else {
                    Ok(Value::Null)
                }
            })
        }
        fn extension_error(&self, _: &str, _: usize, _: &str, _: &str) {}
    }

    /// An extension whose event handler asks `method` and answers with
    /// what it got back.
    const ASKS: &str = r#"import json, sys
def send(r):
    sys.stdout.write(json.dumps(r) + "\n"); sys.stdout.flush()
sys.stdin.readline()
send({"type": "register", "protocol": 1, "extensions": [{"path": "asks.py", "events": ["tool_call"]}]})
for line in sys.stdin:
    r = json.loads(line)
    if r["type"] != "event":
        continue
    send({"type": "call", "id": "c1", "method": sys.argv[1], "params": {"title": "t", "message": "m"}})
    while True:
        a = json.loads(sys.stdin.readline())
        if a["type"] == "return":
            break
    send({"type": "result", "id": r["id"], "result": a.get("result")})
"#;

    async fn ask_once(method: &str) -> Result<Value, HostError> {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("asks.py");
        std::fs::write(&script, ASKS).unwrap();
        let spawn = Spawn {
            program: "python3".into(),
            args: vec![script.clone().into(), method.into()],
            display: "asks.py".into(),
            cwd: dir.path().to_path_buf(),
            prog: "test".into(),
        };
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            host: "pi-toolkit".into(),
            host_version: "0".into(),
            cwd: dir.path().display().to_string(),
            mode: "print".into(),
            has_ui: false,
            pass: "full".into(),
            agent_dir: dir.path().display().to_string(),
            session_file: None,
            session_id: "s".into(),
            project_trusted: Some(true),
            load: vec![LoadEntry {
                path: script.display().to_string(),
                source: "cli".into(),
                scope: "temporary".into(),
            }],
            settings: Value::Null,
        };
        let (host, _) = Host::start(spawn, hello, Duration::from_secs(10))
            .await
            .unwrap();
        host.set_handler(Arc::new(SlowUi(Duration::from_millis(700))));
        let cancel = CancellationToken::new();
        let r = host
            .request(
                |id| HostRecord::Event {
                    id,
                    ext: 0,
                    event: serde_json::json!({"type": "tool_call"}),
                    ctx: Ctx::default(),
                },
                None,
                Some(Duration::from_millis(300)),
                &cancel,
            )
            .await;
        host.close(Duration::from_secs(1)).await;
        r
    }

    #[tokio::test]
    async fn a_dialog_pauses_the_request_timeout() {
        if std::process::Command::new("python3")
            .arg("-V")
            .output()
            .is_err()
        {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "python3 is needed"
            );
            eprintln!("SKIP a_dialog_pauses_the_request_timeout: no python3");
            return;
        }
        // The person answers after 0.7 s, the limit is 0.3 s: the clock
        // stood still meanwhile.
        assert_eq!(ask_once("ui.confirm").await, Ok(Value::Bool(true)));
        // A slow call that is not a dialog is still timed.
        assert_eq!(ask_once("getSettings").await, Err(HostError::Timeout));
    }
}
