//! The QuickJS side of a codemode script: one thread per script, one fresh
//! runtime with a memory limit and an interrupt handler (the deadline and
//! cancellation stop even `while (true) {}`), the prelude's globals, and a
//! small event loop: run the promise jobs, then wait for the answer of a
//! tool call the script awaits. The thread talks to the async side only
//! through two channels (tool calls out, answers and cancellation in), so
//! nothing the script does blocks the agent's runtime.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Instant;

use rquickjs::context::EvalOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Function, Object, Promise, Runtime, Value};
use tokio::sync::mpsc;

/// The script's text before the source on line 1: the script is the body
/// of an async function, and line numbers of stack traces stay those of
/// the input (columns on line 1 are shifted by this prefix's length, as in
/// pi).
const PREFIX: &str = "(async function () {        ";
const PRELUDE: &str = include_str!("prelude.js");

/// At most this much output (characters of text and base64 data) and this
/// many items: past either the script fails.
pub const MAX_OUTPUT_CHARS: usize = 16 * 1024 * 1024;
pub const MAX_OUTPUT_ITEMS: usize = 100_000;

/// One output item, in the order the script made them.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Text(String),
    Console(String),
    Image { data: String, mime: String },
}

/// Why a script failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// It threw, or did not parse: `Name: message` and its frames.
    Script(String),
    /// Its deadline passed.
    Timeout,
    /// It was cancelled.
    Aborted,
    /// The engine itself failed.
    Sandbox(String),
}

/// How a script ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub failure: Option<Failure>,
    pub items: Vec<Item>,
    /// The store changes of a successful script (`{set, delete}` as JSON).
    pub writes: Option<String>,
}

/// What the script's thread tells the async side.
#[derive(Debug)]
pub enum ToHost {
    /// A tool call: the script's id for it, the tool and its JSON args.
    Call {
        id: u32,
        name: String,
        args: String,
    },
    Done(Outcome),
}

/// What the async side tells the script's thread.
#[derive(Debug)]
pub enum ToJs {
    /// A call's answer: its JSON value, or an error text (`ok: false`).
    Reply {
        id: u32,
        ok: bool,
        payload: String,
    },
    Cancel,
}

/// Synchronous lookups a script makes (`searchTools`, `describeTool`,
/// `describeNamespace`, `models`): JSON text, `""` for `undefined`.
pub trait Queries: Send + 'static {
    fn query(&self, kind: &str, a: &str, b: &str) -> String;
}

/// One script to run.
pub struct Script {
    /// The source (the options line already blanked).
    pub code: String,
    /// `{tools: [{name, description}], aliases: [[alias, name]], store}`.
    pub init: String,
    pub deadline: Option<Instant>,
    pub memory_limit: usize,
}

/// A running script: answers and cancellation go in through `tx`;
/// `cancel` stops it at once (also while it computes).
pub struct Running {
    pub tx: std_mpsc::Sender<ToJs>,
    pub cancel: Arc<AtomicBool>,
}

impl Running {
    /// Stops the script (at its next interrupt check or wait).
    pub fn stop(&self) {
        self.cancel.store(true, Ordering::SeqCst);
        let _ = self.tx.send(ToJs::Cancel);
    }
}

/// Starts `script` on its own thread; its calls and its end arrive on
/// `out`.
pub fn spawn(
    script: Script,
    queries: Box<dyn Queries>,
    out: mpsc::UnboundedSender<ToHost>,
) -> Result<Running, String> {
    let (tx, rx) = std_mpsc::channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    std::thread::Builder::new()
        .name("codemode".into())
        .stack_size(16 << 20)
        .spawn(move || {
            let calls = out.clone();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(script, queries, calls, rx, flag)
            }))
            .unwrap_or_else(|_| Outcome {
                failure: Some(Failure::Sandbox("the script engine failed".into())),
                items: Vec::new(),
                writes: None,
            });
            let _ = out.send(ToHost::Done(outcome));
        })
        .map_err(|e| format!("cannot start the script engine: {e}"))?;
    Ok(Running { tx, cancel })
}

/// What the host functions share with the loop.
#[derive(Default)]
struct State {
    items: Vec<Item>,
    chars: usize,
    overflow: Option<String>,
    exited: bool,
    next_id: u32,
    outstanding: usize,
}

fn sandbox(e: impl std::fmt::Display) -> Outcome {
    Outcome {
        failure: Some(Failure::Sandbox(e.to_string())),
        items: Vec::new(),
        writes: None,
    }
}

fn run(
    script: Script,
    queries: Box<dyn Queries>,
    out: mpsc::UnboundedSender<ToHost>,
    rx: std_mpsc::Receiver<ToJs>,
    cancel: Arc<AtomicBool>,
) -> Outcome {
    let rt = match Runtime::new() {
        Ok(rt) => rt,
        Err(e) => return sandbox(e),
    };
    rt.set_memory_limit(script.memory_limit);
    rt.set_max_stack_size(4 << 20);
    let timed_out = Arc::new(AtomicBool::new(false));
    {
        let (cancel, timed_out, deadline) =
            (Arc::clone(&cancel), Arc::clone(&timed_out), script.deadline);
        rt.set_interrupt_handler(Some(Box::new(move || {
            if cancel.load(Ordering::Relaxed) {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                timed_out.store(true, Ordering::Relaxed);
                return true;
            }
            false
        })));
    }
    let ctx = match Context::full(&rt) {
        Ok(c) => c,
        Err(e) => return sandbox(e),
    };
    let state = Rc::new(RefCell::new(State::default()));
    let stopped = || {
        if cancel.load(Ordering::SeqCst) {
            Some(Failure::Aborted)
        } else if timed_out.load(Ordering::SeqCst)
            || script.deadline.is_some_and(|d| Instant::now() >= d)
        {
            Some(Failure::Timeout)
        } else {
            None
        }
    };
    let result = ctx.with(|ctx| -> Result<Outcome, rquickjs::Error> {
        install_host(&ctx, &state, queries, out, &script.init)?;
        let api: Object = ctx.eval_with_options(PRELUDE, options("codemode-prelude.js"))?;
        let format: Function = api.get("format")?;
        let c = ctx.clone();
        let describe = || -> String {
            let e: Value = c.catch();
            format
                .call::<_, String>((e,))
                .unwrap_or_else(|_| "Error: the script failed".into())
        };
        let fail = |f: Failure, state: &Rc<RefCell<State>>| Outcome {
            failure: Some(f),
            items: std::mem::take(&mut state.borrow_mut().items),
            writes: None,
        };
        let wrapped = format!("{PREFIX}{}\n}})", script.code);
        let main: Function = match ctx.eval_with_options(wrapped, options("codemode.js")) {
            Ok(f) => f,
            Err(_) => {
                let text = describe();
                return Ok(fail(stopped().unwrap_or(Failure::Script(text)), &state));
            }
        };
        let start: Function = api.get("start")?;
        let promise: Promise = match start.call((main,)) {
            Ok(p) => p,
            Err(_) => {
                let text = describe();
                return Ok(fail(stopped().unwrap_or(Failure::Script(text)), &state));
            }
        };
        let settle: Function = api.get("settle")?;
        loop {
            while ctx.execute_pending_job() {
                if state.borrow().exited || stopped().is_some() {
                    break;
                }
            }
            if let Some(f) = stopped() {
                return Ok(fail(f, &state));
            }
            if let Some(msg) = state.borrow().overflow.clone() {
                return Ok(fail(Failure::Script(format!("RangeError: {msg}")), &state));
            }
            let exited = state.borrow().exited;
            if exited {
                break;
            }
            match promise.state() {
                PromiseState::Resolved => {
                    let value: Value = promise.result().unwrap_or_else(|| Ok(Value::new_undefined(ctx.clone())))?;
                    let finish: Function = api.get("finish")?;
                    if finish.call::<_, ()>((value,)).is_err() {
                        let text = describe();
                        return Ok(fail(Failure::Script(text), &state));
                    }
                    if let Some(msg) = state.borrow().overflow.clone() {
                        return Ok(fail(Failure::Script(format!("RangeError: {msg}")), &state));
                    }
                    break;
                }
                PromiseState::Rejected => {
                    let _ = promise.result::<Value>();
                    let text = describe();
                    return Ok(fail(stopped().unwrap_or(Failure::Script(text)), &state));
                }
                PromiseState::Pending => {}
            }
            if state.borrow().outstanding == 0 {
                return Ok(fail(
                    Failure::Script("Error: The script is waiting on a promise that can never settle: no tool call is pending, and timers do not exist here.".into()),
                    &state,
                ));
            }
            let msg = match script.deadline {
                Some(d) => rx
                    .recv_timeout(d.saturating_duration_since(Instant::now()))
                    .map_err(|e| matches!(e, std_mpsc::RecvTimeoutError::Timeout)),
                None => rx.recv().map_err(|_| false),
            };
            match msg {
                Ok(ToJs::Reply { id, ok, payload }) => {
                    state.borrow_mut().outstanding -= 1;
                    if settle.call::<_, ()>((id, ok, payload)).is_err() {
                        let text = describe();
                        return Ok(fail(stopped().unwrap_or(Failure::Script(text)), &state));
                    }
                }
                Ok(ToJs::Cancel) | Err(false) => return Ok(fail(Failure::Aborted, &state)),
                Err(true) => return Ok(fail(Failure::Timeout, &state)),
            }
        }
        let writes: Function = api.get("writes")?;
        let w: String = writes.call(()).unwrap_or_default();
        Ok(Outcome {
            failure: None,
            items: std::mem::take(&mut state.borrow_mut().items),
            writes: (!w.is_empty()).then_some(w),
        })
    });
    match result {
        Ok(o) => o,
        Err(e) => match stopped() {
            Some(f) => Outcome {
                failure: Some(f),
                items: std::mem::take(&mut state.borrow_mut().items),
                writes: None,
            },
            None => sandbox(e),
        },
    }
}

fn options(file: &str) -> EvalOptions {
    let mut o = EvalOptions::default();
    o.global = true;
    o.strict = false;
    o.filename = Some(file.into());
    o
}

/// The host functions the prelude takes: `call`, `emit`, `exit`, `query`
/// and the init data.
fn install_host<'js>(
    ctx: &Ctx<'js>,
    state: &Rc<RefCell<State>>,
    queries: Box<dyn Queries>,
    out: mpsc::UnboundedSender<ToHost>,
    init: &str,
) -> rquickjs::Result<()> {
    let host = Object::new(ctx.clone())?;
    let s = Rc::clone(state);
    host.set(
        "call",
        Function::new(ctx.clone(), move |name: String, args: String| -> u32 {
            let mut st = s.borrow_mut();
            st.next_id += 1;
            st.outstanding += 1;
            let id = st.next_id;
            let _ = out.send(ToHost::Call { id, name, args });
            id
        })?,
    )?;
    let s = Rc::clone(state);
    host.set(
        "emit",
        Function::new(ctx.clone(), move |kind: String, payload: String| -> String {
            let mut st = s.borrow_mut();
            if st.overflow.is_some() {
                return st.overflow.clone().unwrap_or_default();
            }
            let item = match kind.as_str() {
                "console" => Item::Console(payload),
                "image" => {
                    let v: serde_json::Value =
                        serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null);
                    Item::Image {
                        data: v["data"].as_str().unwrap_or("").to_string(),
                        mime: v["mimeType"].as_str().unwrap_or("").to_string(),
                    }
                }
                _ => Item::Text(payload),
            };
            let size = match &item {
                Item::Text(t) | Item::Console(t) => t.chars().count(),
                Item::Image { data, .. } => data.len(),
            };
            if st.items.len() + 1 > MAX_OUTPUT_ITEMS || st.chars + size > MAX_OUTPUT_CHARS {
                let msg = format!(
                    "Output limit exceeded: at most {MAX_OUTPUT_CHARS} characters and {MAX_OUTPUT_ITEMS} text, image and console items; write large data to a file with a tool instead"
                );
                st.overflow = Some(msg.clone());
                return msg;
            }
            st.chars += size;
            st.items.push(item);
            String::new()
        })?,
    )?;
    let s = Rc::clone(state);
    host.set(
        "exit",
        Function::new(ctx.clone(), move || {
            s.borrow_mut().exited = true;
        })?,
    )?;
    host.set(
        "query",
        Function::new(ctx.clone(), move |kind: String, a: String, b: String| {
            queries.query(&kind, &a, &b)
        })?,
    )?;
    host.set("init", init)?;
    ctx.globals().set("__host", host)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    struct NoQueries;
    impl Queries for NoQueries {
        fn query(&self, _: &str, _: &str, _: &str) -> String {
            String::new()
        }
    }

    fn start(code: &str, deadline: Option<Instant>) -> (Running, mpsc::UnboundedReceiver<ToHost>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let script = Script {
            code: code.into(),
            init: r#"{"tools":[{"name":"t","description":"d"}],"aliases":[],"store":{}}"#.into(),
            deadline,
            memory_limit: 64 << 20,
        };
        (spawn(script, Box::new(NoQueries), tx).unwrap(), rx)
    }

    fn done(rx: &mut mpsc::UnboundedReceiver<ToHost>) -> Outcome {
        loop {
            match rx.blocking_recv() {
                Some(ToHost::Done(o)) => return o,
                Some(_) => {}
                None => panic!("no outcome"),
            }
        }
    }

    #[test]
    fn stop_ends_a_spinning_script_at_once() {
        let (running, mut rx) = start("while (true) {}", None);
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        running.stop();
        assert_eq!(done(&mut rx).failure, Some(Failure::Aborted));
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn memory_and_stack_limits_fail_the_script_only() {
        let (_r, mut rx) = start(
            "const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length);",
            None,
        );
        let o = done(&mut rx);
        assert!(
            matches!(&o.failure, Some(Failure::Script(t)) if t.contains("out of memory")),
            "{o:?}"
        );
        let (_r, mut rx) = start("function f() { return f() + 1; } f();", None);
        let o = done(&mut rx);
        assert!(
            matches!(&o.failure, Some(Failure::Script(t)) if t.starts_with("RangeError")),
            "{o:?}"
        );
    }

    #[test]
    fn calls_answers_and_output() {
        let (running, mut rx) = start(
            "console.log('c'); const r = await tools.t({a: 1}); text(r); return 'end';",
            Some(Instant::now() + Duration::from_secs(10)),
        );
        match rx.blocking_recv() {
            Some(ToHost::Call { id, name, args }) => {
                assert_eq!((name.as_str(), args.as_str()), ("t", r#"{"a":1}"#));
                running
                    .tx
                    .send(ToJs::Reply {
                        id,
                        ok: true,
                        payload: r#""answer""#.into(),
                    })
                    .unwrap();
            }
            other => panic!("{other:?}"),
        }
        let o = done(&mut rx);
        assert_eq!(o.failure, None);
        assert_eq!(
            o.items,
            [
                Item::Console("c".into()),
                Item::Text("answer".into()),
                Item::Text("end".into())
            ]
        );
    }
}
