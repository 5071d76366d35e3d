//! A real headless Chromium driven over the DevTools protocol, for tests of
//! pages a person opens (the HTML session export). The protocol runs over
//! the browser's `--remote-debugging-pipe` (file descriptors 3 and 4, NUL-
//! separated JSON), so no port and no WebSocket client are needed.
//!
//! Chromium comes from Debian's packages (`tests/browser/install.sh`, run
//! by `tests/install.sh`); `PI_CHROMIUM` names another binary. Without it a
//! test skips, except under `CI=true`, where it fails.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long one protocol command may take.
const STEP: Duration = Duration::from_secs(60);

/// The Chromium binary: `$PI_CHROMIUM`, else Debian's `/usr/bin/chromium`,
/// else the one `tests/browser/install.sh` unpacked without root. `None`
/// (with a message) when there is none; under `CI=true` a panic.
pub fn chromium(test: &str) -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let candidates = [
        std::env::var_os("PI_CHROMIUM").map(PathBuf::from),
        Some(PathBuf::from("/usr/bin/chromium")),
        Some(home.join(".cache/pi-toolkit-browser/root/usr/lib/chromium/chromium")),
    ];
    if let Some(p) = candidates.into_iter().flatten().find(|p| p.is_file()) {
        return Some(p);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: Chromium is not installed (run tests/browser/install.sh; .ci/run does)");
    }
    eprintln!("SKIP {test}: Chromium is not installed; run tests/browser/install.sh");
    None
}

/// One headless browser with one page, ended (its whole process group) on
/// drop.
pub struct Browser {
    child: Child,
    tx: ChildStdin,
    rx: Receiver<Value>,
    next: u64,
    /// The page's protocol session.
    session: String,
    /// Every event received so far.
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `exe` headless with an empty profile, a `width`×`height`
    /// window, and one blank page attached.
    pub fn launch(exe: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // The shell hands our pipes to the browser as fds 3 (commands in)
        // and 4 (answers out), where --remote-debugging-pipe expects them.
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--remote-debugging-pipe",
                "--hide-scrollbars",
                &format!("--window-size={width},{height}"),
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start chromium");
        let tx = child.stdin.take().unwrap();
        let out = child.stdout.take().unwrap();
        let (send, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut buf = Vec::new();
            while matches!(r.read_until(0, &mut buf), Ok(n) if n > 0) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    if send.send(v).is_err() {
                        break;
                    }
                }
                buf.clear();
            }
        });
        let mut b = Browser {
            child,
            tx,
            rx,
            next: 0,
            session: String::new(),
            events: Vec::new(),
            _profile: profile,
        };
        let target = b.browser_call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = b.browser_call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        b.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        for m in ["Page.enable", "Runtime.enable", "Log.enable"] {
            b.call(m, json!({}));
        }
        b
    }

    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = s.into();
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.tx.write_all(&bytes).expect("write to chromium");
        self.tx.flush().unwrap();
        let deadline = Instant::now() + STEP;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) if v["id"] == id => {
                    if let Some(e) = v.get("error") {
                        panic!("{method}: {e}");
                    }
                    return v["result"].clone();
                }
                Ok(v) => self.events.push(v),
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer in {STEP:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: chromium went away"),
            }
        }
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None)
    }

    /// A command to the page.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let s = self.session.clone();
        self.send(method, params, Some(&s))
    }

    /// Waits for the page event `method` (one already received counts).
    pub fn wait_event(&mut self, method: &str) -> Value {
        if let Some(e) = self.events.iter().find(|e| e["method"] == method) {
            return e.clone();
        }
        let deadline = Instant::now() + STEP;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => {
                    let hit = v["method"] == method;
                    self.events.push(v.clone());
                    if hit {
                        return v;
                    }
                }
                Err(_) => panic!("no {method} in {STEP:?}"),
            }
        }
    }

    /// Opens `file` and waits until it has loaded.
    pub fn open(&mut self, file: &Path) {
        self.open_url(&format!("file://{}", file.display()));
    }

    /// Opens `url` and waits until it has loaded; what the page before it
    /// reported is forgotten.
    pub fn open_url(&mut self, url: &str) {
        while let Ok(v) = self.rx.try_recv() {
            self.events.push(v);
        }
        self.events.clear();
        self.call("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired");
    }

    /// The value of a JavaScript expression in the page.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("{expr}: {e}");
        }
        r["result"]["value"].clone()
    }

    /// A real mouse click in the middle of the element `selector` finds
    /// (scrolled into view first).
    pub fn click(&mut self, selector: &str) {
        let sel = serde_json::to_string(selector).unwrap();
        let at = self.eval(&format!(
            "(() => {{ const e = document.querySelector({sel}); if (!e) return null; e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); return {{x: r.left + Math.min(r.width / 2, 40), y: r.top + r.height / 2}}; }})()"
        ));
        assert!(at.is_object(), "nothing matches {selector}");
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": at["x"], "y": at["y"], "button": "left", "clickCount": 1}),
            );
        }
    }

    /// Script errors and console errors the page reported so far.
    pub fn errors(&mut self) -> Vec<String> {
        // Let events already on their way arrive.
        while let Ok(v) = self.rx.try_recv() {
            self.events.push(v);
        }
        self.events
            .iter()
            .filter_map(|e| match e["method"].as_str() {
                Some("Runtime.exceptionThrown") => {
                    Some(e["params"]["exceptionDetails"].to_string())
                }
                Some("Runtime.consoleAPICalled") if e["params"]["type"] == "error" => {
                    Some(e["params"]["args"].to_string())
                }
                Some("Log.entryAdded") if e["params"]["entry"]["level"] == "error" => {
                    Some(e["params"]["entry"]["text"].to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// A PNG of the whole page, written to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        use base64::Engine as _;
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("screenshot data"))
            .expect("base64 png");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The whole group: the browser and its renderer and helper processes.
        let pgid = self.child.id() as i32;
        // SAFETY: a plain signal to the group this test started.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Where a test keeps its screenshots: `target/tmp/<dir>`.
pub fn artifact_dir(dir: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir)
}
