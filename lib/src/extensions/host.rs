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

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::conversation::{
    exit_text, forward_stderr, give_records_fd, protocol_ended, read_output, records_pipe, Pending,
    Shared, Source, RECORDS_FD, UNDECIDED,
};
use super::wire::{lock, paused_timeout, write_line};
use crate::agent::hooks::BoxFuture;
use crate::format::extension::{Hello, HostRecord, Register, RegisterMore, PROTOCOL_VERSION};

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

/// A running extension process.
pub struct Host {
    pub display: String,
    sh: Arc<Shared>,
    next_id: AtomicU64,
    exited: watch::Receiver<bool>,
    /// Its `register` said it answers `reload`.
    reloads: AtomicBool,
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
        // The records pipe (fd 3), offered; without one, stdout only.
        let pipe = records_pipe();
        if let Some(p) = &pipe {
            cmd.env("PI_EXT_RECORDS_FD", RECORDS_FD.to_string());
            give_records_fd(&mut cmd, &p.write);
        }
        let spawned = cmd.spawn();
        // Our copy of the write end goes, so the pipe ends with the child.
        let records = pipe.and_then(|p| {
            drop(p.write);
            tokio::net::unix::pipe::Receiver::from_owned_fd(p.read).ok()
        });
        let mut child =
            spawned.map_err(|e| fail(format!("cannot start {}: {e}", spawn.program.display())))?;
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
        let (reg_tx, mut reg_rx) = oneshot::channel::<Register>();
        let sh = Arc::new(Shared {
            display: display.clone(),
            prog: spawn.prog.clone(),
            pgid,
            // Every record is written by whoever sends it, holding the lock
            // for the whole line (so lines never interleave and keep send
            // order).
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            later: Mutex::default(),
            pending: Mutex::default(),
            dead: Mutex::default(),
            cause: Mutex::default(),
            registered: AtomicBool::new(false),
            handler: OnceLock::new(),
            more: Mutex::default(),
            dialogs: dialogs_tx,
            loading: loading_tx,
            reg_tx: Mutex::new(Some(reg_tx)),
            channel: AtomicU8::new(UNDECIDED),
            // Without a records pipe, only stdout can end.
            ended: watch::channel((false, records.is_none())).0,
        });
        tokio::spawn(forward_stderr(spawn.prog.clone(), display.clone(), stderr));
        tokio::spawn(read_output(Arc::clone(&sh), Source::Stdout, stdout));
        if let Some(r) = records {
            tokio::spawn(read_output(Arc::clone(&sh), Source::RecordsFd, r));
        }
        // Waiter: an exit is a death, once the answers already written are
        // read.
        let (exit_tx, exit_rx) = watch::channel(false);
        {
            let sh = Arc::clone(&sh);
            tokio::spawn(async move {
                let status = child.wait().await;
                let _ = tokio::time::timeout(Duration::from_millis(500), protocol_ended(&sh)).await;
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
        // No register can come once the process is gone or both its
        // outputs ended.
        let mut exited = host.exited.clone();
        let mut ended = sh.ended.subscribe();
        let hopeless = async {
            tokio::select! {
                _ = exited.wait_for(|e| *e) => {}
                _ = ended.wait_for(|(a, b)| *a && *b) => {}
            }
        };
        tokio::pin!(hopeless);
        let reg = loop {
            tokio::select! {
                biased;
                r = &mut reg_rx => break r.ok(),
                () = &mut hopeless => break reg_rx.try_recv().ok(),
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
    /// a full pipe). [`Host::close`] waits for it before `bye`.
    fn send_later(&self, rec: HostRecord) {
        // Outside a runtime (a drop while it shuts down) nothing is sent.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let sh = Arc::clone(&self.sh);
        let write = rt.spawn(async move {
            write_line(&sh.stdin, rec.to_line()).await;
        });
        let mut later = lock(&self.sh.later);
        later.retain(|w| !w.is_finished());
        later.push(write);
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
                lock(&self.sh.pending).remove(&id);
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
            // What was sent without waiting goes first (an abort's
            // `cancel`), then `bye`.
            let later = std::mem::take(&mut *lock(&self.sh.later));
            let _ = tokio::time::timeout(grace, async {
                for w in later {
                    let _ = w.await;
                }
            })
            .await;
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
            lock(&self.host.sh.pending).remove(&self.id);
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

    /// Starts `python3 script arg` in `dir` as an extension host.
    async fn start_python(
        dir: &std::path::Path,
        script: &std::path::Path,
        arg: &std::ffi::OsStr,
        load: Vec<LoadEntry>,
    ) -> Arc<Host> {
        let spawn = Spawn {
            program: "python3".into(),
            args: vec![script.into(), arg.into()],
            display: script.display().to_string(),
            cwd: dir.to_path_buf(),
            prog: "test".into(),
        };
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            host: "pi-toolkit".into(),
            host_version: "0".into(),
            cwd: dir.display().to_string(),
            mode: "print".into(),
            has_ui: false,
            pass: "full".into(),
            agent_dir: dir.display().to_string(),
            session_file: None,
            session_id: "s".into(),
            project_trusted: Some(true),
            load,
            settings: Value::Null,
            load_timeout_ms: None,
        };
        let (host, _) = Host::start(spawn, hello, Duration::from_secs(10))
            .await
            .unwrap();
        host
    }

    /// Sends a `tool_call` event and waits for its answer.
    async fn tool_call(
        host: &Host,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<Value, HostError> {
        host.request(
            |id| HostRecord::Event {
                id,
                ext: 0,
                event: serde_json::json!({"type": "tool_call"}),
                ctx: Ctx::default(),
            },
            None,
            timeout,
            cancel,
        )
        .await
    }

    async fn ask_once(method: &str) -> Result<Value, HostError> {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("asks.py");
        std::fs::write(&script, ASKS).unwrap();
        let load = vec![LoadEntry {
            path: script.display().to_string(),
            source: "cli".into(),
            scope: "temporary".into(),
        }];
        let host = start_python(dir.path(), &script, method.as_ref(), load).await;
        host.set_handler(Arc::new(SlowUi(Duration::from_millis(700))));
        let cancel = CancellationToken::new();
        let r = tool_call(&host, Some(Duration::from_millis(300)), &cancel).await;
        host.close(Duration::from_secs(1)).await;
        r
    }

    /// An extension that never answers an event and logs the type of every
    /// record it reads.
    const LOGS: &str = r#"import json, sys
log = open(sys.argv[1], "a")
sys.stdin.readline()
sys.stdout.write(json.dumps({"type": "register", "protocol": 1, "extensions": [{"path": "logs.py", "events": ["tool_call"]}]}) + "\n")
sys.stdout.flush()
for line in sys.stdin:
    log.write(json.loads(line)["type"] + "\n"); log.flush()
"#;

    /// Whether python3 is here (required under `CI=true`).
    fn python3() -> bool {
        let there = std::process::Command::new("python3")
            .arg("-V")
            .output()
            .is_ok();
        if !there {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "python3 is needed"
            );
            eprintln!("SKIP: no python3");
        }
        there
    }

    /// An aborted request's `cancel`, written without waiting, reaches the
    /// extension before the `bye` of a close that follows at once: on a
    /// one-thread runtime the spawned write has not run yet when `close`
    /// starts.
    #[tokio::test]
    async fn an_abort_right_before_the_end_still_tells_the_extension() {
        if !python3() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (script, log) = (dir.path().join("logs.py"), dir.path().join("log"));
        std::fs::write(&script, LOGS).unwrap();
        let host = start_python(dir.path(), &script, log.as_ref(), Vec::new()).await;
        let cancel = CancellationToken::new();
        cancel.cancel();
        let r = tool_call(&host, None, &cancel).await;
        assert_eq!(r, Err(HostError::Aborted));
        host.close(Duration::from_secs(2)).await;
        let got = std::fs::read_to_string(&log).unwrap();
        let types: Vec<&str> = got.lines().collect();
        assert!(
            types.ends_with(&["cancel", "bye"]),
            "the extension read: {types:?}"
        );
    }

    #[tokio::test]
    async fn a_dialog_pauses_the_request_timeout() {
        if !python3() {
            return;
        }
        // The person answers after 0.7 s, the limit is 0.3 s: the clock
        // stood still meanwhile.
        assert_eq!(ask_once("ui.confirm").await, Ok(Value::Bool(true)));
        // A slow call that is not a dialog is still timed.
        assert_eq!(ask_once("getSettings").await, Err(HostError::Timeout));
    }
}
