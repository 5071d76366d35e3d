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
use tokio::io::BufReader;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::wire::{is_dialog, lock, paused_timeout, write_line, MAX_RECORD, MAX_STDERR_LINE};
use crate::agent::hooks::BoxFuture;
use crate::capped_lines::{self, Line};
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

/// Why an extension process did not get to `register`.
#[derive(Debug, Clone, PartialEq)]
pub struct StartError {
    /// The extension a multi-extension process (the Node host) was
    /// loading when it failed (its `loading` record), if it said.
    pub loading: Option<usize>,
    /// The cause, without the extension's name (`did not register within
    /// 10 s`, `exited (code 3) before registering`, …).
    pub cause: String,
}

/// What the conversation's tasks and the [`Host`] share.
struct Shared {
    display: String,
    prog: String,
    pgid: Option<i32>,
    stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    pending: Mutex<HashMap<u64, Pending>>,
    /// Why the process is dead (the whole diagnostic), once it is.
    dead: Mutex<Option<String>>,
    /// The same without the extension's name.
    cause: Mutex<Option<String>>,
    /// `register` arrived: from now on a death is reported on stderr (before,
    /// it is the start's error).
    registered: AtomicBool,
    handler: OnceLock<Arc<dyn CallHandler>>,
    more: Mutex<Vec<RegisterMore>>,
    /// How many dialogs (`ui.confirm` …) the extension is waiting for.
    dialogs: watch::Sender<usize>,
    /// The extension being loaded (`loading` records), for the handshake.
    loading: watch::Sender<Option<usize>>,
}

impl Shared {
    /// Marks the host dead (the first cause wins), reports it once (after
    /// registration) and fails every outstanding request.
    fn die(&self, cause: String) {
        {
            let mut d = lock(&self.dead);
            if d.is_some() {
                return;
            }
            let reason = format!("extension {} {cause}", self.display);
            if self.registered.load(Ordering::Acquire) {
                eprintln!("{}: {reason}", self.prog);
            }
            *d = Some(reason);
            *lock(&self.cause) = Some(cause);
        }
        lock(&self.pending).clear();
    }

    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            crate::process_group::kill(pgid);
        }
    }

    /// Serves one record from the extension; `false` ends the conversation.
    fn take(
        &self,
        line: &str,
        reg_tx: &mut Option<oneshot::Sender<Register>>,
        me: &Arc<Shared>,
    ) -> bool {
        let rec = match ExtRecord::parse(line) {
            Ok(r) => r,
            Err(e) => {
                self.die(format!("broke the protocol: {e}"));
                self.kill();
                return false;
            }
        };
        match rec {
            ExtRecord::Register(r) => {
                if let Some(tx) = reg_tx.take() {
                    let _ = tx.send(r);
                }
            }
            ExtRecord::Loading { ext, .. } => {
                self.loading.send_replace(Some(ext));
            }
            ExtRecord::RegisterMore(m) => lock(&self.more).push(m),
            ExtRecord::Result {
                id,
                outcome,
                errors,
            } => {
                if let Some(p) = lock(&self.pending).remove(&id) {
                    let _ = p.tx.send((outcome, errors));
                }
            }
            ExtRecord::ExtensionError { ext, event, error } => match self.handler.get() {
                Some(h) => h.extension_error(&self.display, ext, &event, &error),
                None => eprintln!(
                    "{}: extension {}: {event}: {error}",
                    self.prog, self.display
                ),
            },
            ExtRecord::Update { id, partial } => {
                if let Some(u) = lock(&self.pending).get(&id).and_then(|p| p.updates.clone()) {
                    let _ = u.send(partial);
                }
            }
            ExtRecord::Call {
                id,
                ext,
                method,
                params,
            } => {
                // Started here, in line order (a call's effect precedes the
                // answers read after it); awaited apart, so a slow answer
                // blocks nothing.
                let dialog = is_dialog(&method);
                if dialog {
                    self.dialogs.send_modify(|n| *n += 1);
                }
                let fut = match self.handler.get() {
                    Some(h) => h.call(ext, method, params),
                    None => Box::pin(std::future::ready(Err(format!(
                        "pi-toolkit host: {method} is not available during loading"
                    )))),
                };
                let me = Arc::clone(me);
                tokio::spawn(async move {
                    let r = fut.await;
                    if dialog {
                        me.dialogs.send_modify(|n| *n = n.saturating_sub(1));
                    }
                    let (result, error) = match r {
                        Ok(v) => (Some(v), None),
                        Err(e) => (None, Some(e)),
                    };
                    write_line(
                        &me.stdin,
                        HostRecord::Return { id, result, error }.to_line(),
                    )
                    .await;
                });
            }
            ExtRecord::Unknown(_) => {}
        }
        true
    }
}

/// A running extension process.
pub struct Host {
    pub display: String,
    sh: Arc<Shared>,
    next_id: AtomicU64,
    exited: watch::Receiver<bool>,
    /// Its `register` said it answers `reload`.
    reloads: AtomicBool,
}

/// Reads the extension's records (each line at most [`MAX_RECORD`]) until
/// its output ends or it breaks the protocol.
async fn read_records(
    sh: Arc<Shared>,
    stdout: tokio::process::ChildStdout,
    mut reg_tx: Option<oneshot::Sender<Register>>,
) {
    let mut r = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        match capped_lines::read_line(&mut r, &mut buf, MAX_RECORD).await {
            Ok(Line::Eof) => return,
            Ok(Line::Text) => {}
            Ok(Line::TooLong) => {
                sh.die(format!(
                    "broke the protocol: a record is longer than {} (the limit)",
                    capped_lines::size_text(MAX_RECORD)
                ));
                sh.kill();
                return;
            }
            Err(e) => {
                sh.die(format!("broke the protocol: {e}"));
                sh.kill();
                return;
            }
        }
        let line = String::from_utf8_lossy(&buf);
        if line.trim().is_empty() {
            continue;
        }
        if !sh.take(&line, &mut reg_tx, &sh) {
            return;
        }
    }
}

/// Forwards the extension's stderr line by line, each cut at
/// [`MAX_STDERR_LINE`].
async fn forward_stderr(prog: String, display: String, stderr: tokio::process::ChildStderr) {
    let mut r = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        match capped_lines::read_line(&mut r, &mut buf, MAX_STDERR_LINE).await {
            Ok(Line::Text) => {
                eprintln!(
                    "{prog}: extension {display}: {}",
                    String::from_utf8_lossy(&buf)
                )
            }
            Ok(Line::TooLong) => {
                let cut = capped_lines::skip_line(&mut r).await.unwrap_or(0);
                eprintln!(
                    "{prog}: extension {display}: {} [line cut at {}: {cut} more bytes dropped]",
                    String::from_utf8_lossy(&buf),
                    capped_lines::size_text(MAX_STDERR_LINE)
                );
            }
            Ok(Line::Eof) | Err(_) => return,
        }
    }
}

/// How a process ended, for people.
fn exit_text(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(c), _) => format!("code {c}"),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => "unknown status".into(),
        },
        Err(e) => e.to_string(),
    }
}

impl Host {
    /// Starts the process, sends `hello`, waits for `register`: at most
    /// `handshake` in all, or, for a process that says which extension it
    /// is loading (`loading` records), `handshake` for each one.
    pub async fn start(
        spawn: Spawn,
        hello: Hello,
        handshake: Duration,
    ) -> Result<(Arc<Host>, Register), StartError> {
        let fail = |cause: String| StartError {
            loading: None,
            cause,
        };
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
            .map_err(|e| fail(format!("cannot start {}: {e}", spawn.program.display())))?;
        let pgid = child.id().and_then(|p| i32::try_from(p).ok());
        if let Some(p) = pgid {
            crate::process_group::register(p);
        }
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            if let Some(p) = pgid {
                crate::process_group::kill(p);
            }
            return Err(fail("cannot open its pipes".into()));
        };
        let (dialogs_tx, _) = watch::channel(0usize);
        let (loading_tx, mut loading) = watch::channel(None);
        let sh = Arc::new(Shared {
            display: display.clone(),
            prog: spawn.prog.clone(),
            pgid,
            // Every record is written by whoever sends it, holding the lock
            // for the whole line (so lines never interleave and keep send
            // order).
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending: Mutex::default(),
            dead: Mutex::default(),
            cause: Mutex::default(),
            registered: AtomicBool::new(false),
            handler: OnceLock::new(),
            more: Mutex::default(),
            dialogs: dialogs_tx,
            loading: loading_tx,
        });
        tokio::spawn(forward_stderr(spawn.prog.clone(), display.clone(), stderr));
        let (reg_tx, mut reg_rx) = oneshot::channel::<Register>();
        let (eof_tx, eof_rx) = oneshot::channel::<()>();
        {
            let sh = Arc::clone(&sh);
            tokio::spawn(async move {
                read_records(sh, stdout, Some(reg_tx)).await;
                let _ = eof_tx.send(());
            });
        }
        // Waiter: an exit is a death, once the answers already written are
        // read.
        let (exit_tx, exit_rx) = watch::channel(false);
        {
            let sh = Arc::clone(&sh);
            tokio::spawn(async move {
                let status = child.wait().await;
                let _ = tokio::time::timeout(Duration::from_millis(500), eof_rx).await;
                sh.die(format!("exited ({})", exit_text(status)));
                let _ = exit_tx.send(true);
            });
        }
        let host = Arc::new(Host {
            display: display.clone(),
            sh: Arc::clone(&sh),
            next_id: AtomicU64::new(1),
            exited: exit_rx,
            reloads: AtomicBool::new(false),
        });
        let hello_times_loads = hello.load_timeout_ms.is_some();
        host.send(HostRecord::Hello(hello)).await;
        // Each `loading` record restarts the clock. A process that times
        // each load itself (hello `loadTimeoutMs`) gets a margin, so its
        // own, more precise failure comes first; the clock is for a hang.
        let clock = handshake
            + if hello_times_loads {
                Duration::from_secs(1)
            } else {
                Duration::ZERO
            };
        let sleep = tokio::time::sleep(clock);
        tokio::pin!(sleep);
        let mut progress = true;
        let reg = loop {
            tokio::select! {
                r = &mut reg_rx => break r.ok(),
                _ = &mut sleep => {
                    host.kill();
                    let loading = *loading.borrow();
                    let secs = handshake.as_secs_f64();
                    return Err(StartError {
                        loading,
                        cause: match loading {
                            Some(_) => format!("did not finish loading within {secs} s"),
                            None => format!("did not register within {secs} s"),
                        },
                    });
                }
                moved = async {
                    if progress { loading.changed().await.is_ok() } else { std::future::pending().await }
                } => {
                    progress = moved;
                    if moved {
                        sleep.as_mut().reset(tokio::time::Instant::now() + clock);
                    }
                }
            }
        };
        let loading = *loading.borrow();
        let Some(reg) = reg else {
            // The reader ended: wait (briefly) for the exit status, which
            // says more than "closed its output".
            let mut exited = host.exited.clone();
            let _ = tokio::time::timeout(Duration::from_secs(1), exited.wait_for(|e| *e)).await;
            host.kill();
            let cause = lock(&sh.cause)
                .clone()
                .unwrap_or_else(|| "closed its output".into());
            let cause = match loading {
                Some(_) => format!("the extension process {cause} while loading it"),
                None if cause.starts_with("exited") => format!("{cause} before registering"),
                None => cause,
            };
            return Err(StartError { loading, cause });
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
            sh.stdin.lock().await.take();
            host.kill();
            return Err(fail(reason));
        }
        sh.registered.store(true, Ordering::Release);
        // A death between the register and now is reported like any other.
        if let Some(reason) = host.dead_reason() {
            eprintln!("{}: {reason}", sh.prog);
        }
        host.reloads.store(reg.reloads, Ordering::Relaxed);
        Ok((host, reg))
    }

    /// Who serves this extension's calls (set once, after registration).
    pub fn set_handler(&self, h: Arc<dyn CallHandler>) {
        let _ = self.sh.handler.set(h);
    }

    /// Registrations made after load, not taken yet.
    pub fn take_more(&self) -> Vec<RegisterMore> {
        std::mem::take(&mut lock(&self.sh.more))
    }

    /// Whether it answers [`HostRecord::Reload`] (loads its extensions
    /// again for a new session).
    pub fn reloads(&self) -> bool {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Why the process is dead, if it is.
    pub fn dead_reason(&self) -> Option<String> {
        lock(&self.sh.dead).clone()
    }

    /// Writes one record without waiting for the write (it may wait for
    /// a full pipe).
    fn send_later(&self, rec: HostRecord) {
        let sh = Arc::clone(&self.sh);
        tokio::spawn(async move { write_line(&sh.stdin, rec.to_line()).await });
    }

    /// Writes one record (a one-way record: configure, bye).
    pub async fn send(&self, rec: HostRecord) {
        write_line(&self.sh.stdin, rec.to_line()).await;
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
        lock(&self.sh.pending).insert(id, Pending { tx, updates });
        // Checked again with the request in the table: a death meanwhile
        // has cleared it, or clears it later.
        if let Some(r) = self.dead_reason() {
            lock(&self.sh.pending).remove(&id);
            return (Err(HostError::Dead(r)), Vec::new());
        }
        // The write is inside the limit too: an extension that stops
        // reading fills the pipe.
        let line = make(id).to_line();
        let work = async {
            write_line(&self.sh.stdin, line).await;
            rx.await
        };
        let wait = async {
            match timeout {
                Some(t) => paused_timeout(t, work, self.sh.dialogs.subscribe()).await,
                None => Some(work.await),
            }
        };
        let answer = tokio::select! {
            a = wait => a,
            _ = cancel.cancelled() => {
                lock(&self.sh.pending).remove(&id);
                self.send_later(HostRecord::Cancel { id });
                return (Err(HostError::Aborted), Vec::new());
            }
        };
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
                lock(&self.sh.pending).remove(&id);
                self.send_later(HostRecord::Cancel { id });
                (Err(HostError::Timeout), Vec::new())
            }
        }
    }

    /// Kills the process group at once.
    pub fn kill(&self) {
        self.sh.kill();
    }

    /// The end: `bye` and stdin closed (EOF), up to `grace` for the
    /// process to exit, then SIGTERM to its whole group (what it started
    /// in the background too) and up to `grace` more, then SIGKILL. Quiet:
    /// the process was asked to go.
    pub async fn close(&self, grace: Duration) {
        let was_alive = {
            let mut d = lock(&self.sh.dead);
            let alive = d.is_none();
            if alive {
                *d = Some(format!("extension {} was stopped", self.display));
            }
            alive
        };
        if was_alive {
            let _ = tokio::time::timeout(grace, self.send(HostRecord::Bye { reason: None })).await;
        }
        if let Ok(mut g) = tokio::time::timeout(grace, self.sh.stdin.lock()).await {
            g.take();
        }
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(grace, exited.wait_for(|e| *e)).await;
        match self.sh.pgid {
            Some(pgid) => crate::process_group::end(pgid, grace).await,
            None => self.kill(),
        }
    }

    /// The prefix of this host's diagnostics.
    pub fn prog(&self) -> &str {
        &self.sh.prog
    }

    /// The process group it runs in (its process id).
    pub fn pgid(&self) -> Option<i32> {
        self.sh.pgid
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
            load_timeout_ms: None,
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
