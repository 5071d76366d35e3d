//! The RPC `bash` command (the user's own shell command):
//! it runs at once in the session's cwd, streaming
//! `bash_execution_update`, and is recorded as a `bashExecution` message.
//! Idle, the message is appended before the response. While a run streams
//! pi 1.6.0 also runs it at once and answers when it ends, but the message
//! joins the session only after the run (the run's own requests do not
//! see it); so the process part ([`UserBash`]) needs no agent, and the
//! server keeps the finished message until the run settled. An extension
//! with a `user_bash` handler is asked first, mid-run too (through the
//! hooks, without the agent): its `{result}` is the command's result, no
//! answer runs the command here, a throw fails it.

use crate::agent::Event;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use serde_json::{json, Map, Value};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

use super::{parse, Ctl, Inbox, Input, Parsed};
use crate::agent::hooks::{BoxFuture, Hooks};
use crate::agent::Agent;
use crate::format::message::BashExecutionMessage;
use crate::format::rpc::{RpcBashResult, RpcCommand};
use crate::format::{AgentMessage, Num};
use crate::timefmt::now_ms;
use crate::tools::{Tool, ToolOutput};

static BASH: crate::tools::bash::BashTool = crate::tools::bash::BashTool;

/// One running `bash` command.
pub(super) struct UserBash {
    pub(super) id: Option<Value>,
    pub(super) command: String,
    pub(super) exclude: Option<bool>,
    pub(super) cancel: CancellationToken,
    fut: Pin<Box<dyn Future<Output = ToolOutput> + Send>>,
    updates: UnboundedReceiver<String>,
    /// The output streamed so far.
    seen: String,
}

/// What a running command did next.
pub(super) enum Step {
    /// Its whole output so far.
    Update(String),
    Done(ToolOutput),
}

/// Where the agent runs a command: its cwd, its image setting and its
/// sandbox.
pub(super) type Where = (PathBuf, bool, std::sync::Arc<crate::sandbox::Sandbox>);

impl UserBash {
    /// Starts `command` in `cwd` (the agent's), confined by the agent's
    /// sandbox.
    pub(super) fn start(
        (cwd, auto_resize_images, sandbox): Where,
        id: Option<Value>,
        command: &str,
        exclude: Option<bool>,
    ) -> UserBash {
        let cancel = CancellationToken::new();
        let (tx, updates): (UnboundedSender<String>, _) = tokio::sync::mpsc::unbounded_channel();
        let ctx = crate::tools::ToolContext {
            cwd,
            cancel: cancel.clone(),
            auto_resize_images,
            tool_call_id: String::new(),
            caller: None,
            sandbox,
            host: None,
            env: Vec::new(),
        };
        let sink = Box::new(move |p: ToolOutput| {
            let _ = tx.send(crate::format::message::blocks_text(&p.content, ""));
        });
        let fut = BASH.execute(json!({ "command": command }), ctx, sink);
        UserBash {
            id,
            command: command.to_string(),
            exclude,
            cancel,
            fut,
            updates,
            seen: String::new(),
        }
    }

    pub(super) async fn next(&mut self) -> Step {
        tokio::select! {
            Some(text) = self.updates.recv() => Step::Update(text),
            out = &mut self.fut => Step::Done(out),
        }
    }

    /// Streams what `text` has beyond the output seen so far.
    pub(super) fn update(&mut self, ctl: &Ctl, text: String) {
        if let Some(delta) = text.strip_prefix(self.seen.as_str()) {
            if !delta.is_empty() {
                ctl.out.record(
                    &json!({"type": "bash_execution_update", "id": self.id, "delta": delta}),
                );
            }
        }
        self.seen = text;
    }

    /// The result of the finished command (its last updates streamed).
    pub(super) fn finish(mut self, ctl: &Ctl, out: ToolOutput) -> (UserBash, RpcBashResult) {
        while let Ok(text) = self.updates.try_recv() {
            self.update(ctl, text);
        }
        let structured = out.structured.clone().unwrap_or(Value::Null);
        let cancelled = self.cancel.is_cancelled();
        let truncated = structured
            .get("truncated")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // The tool's last chunk may come with the exit and no progress
        // update: what the finished output has beyond the streamed text is
        // the last update (its "(no output)" stands for nothing streamed).
        if !truncated {
            if let Some(full) = structured.get("output").and_then(Value::as_str) {
                if full.len() > self.seen.len()
                    && full.starts_with(self.seen.as_str())
                    && !(self.seen.is_empty() && full == "(no output)")
                {
                    self.update(ctl, full.to_string());
                }
            }
        }
        // The raw output as it streamed (every chunk is an update with
        // the whole text so far); a truncated one is the tool's tail.
        let output = if truncated {
            structured
                .get("output")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| self.seen.clone())
        } else {
            self.seen.clone()
        };
        let result = RpcBashResult {
            output,
            exit_code: if cancelled {
                None
            } else {
                structured.get("exit_code").and_then(Value::as_i64)
            },
            cancelled,
            truncated,
            full_output_path: None,
        };
        (self, result)
    }
}

/// A `bash` command as the client sent it.
pub(super) struct Asked {
    pub(super) id: Option<Value>,
    pub(super) command: String,
    pub(super) exclude: Option<bool>,
}

impl Asked {
    /// Runs it here.
    pub(super) fn start(self, at: Where) -> UserBash {
        UserBash::start(at, self.id, &self.command, self.exclude)
    }
}

/// A command whose `user_bash` handlers are being asked.
pub(super) type Asking<'a> = (Option<Asked>, BoxFuture<'a, Result<Option<Value>, String>>);

/// pi's `user_bash` event for `command`.
fn user_bash_event(command: &str, exclude: Option<bool>, cwd: &std::path::Path) -> Value {
    json!({"type": "user_bash", "command": command,
        "excludeFromContext": exclude.unwrap_or(false), "cwd": cwd})
}

/// Asks `hooks` about `asked` (mid-run: the running agent is not needed).
pub(super) fn ask<'a>(hooks: &'a dyn Hooks, asked: Asked, cwd: &std::path::Path) -> Asking<'a> {
    let fut = hooks.user_bash(user_bash_event(&asked.command, asked.exclude, cwd));
    (Some(asked), fut)
}

/// Resolves with the asked command and the handlers' answer; never while
/// nothing is asked.
pub(super) async fn next_answer(
    a: &mut Option<Asking<'_>>,
) -> (Option<Asked>, Result<Option<Value>, String>) {
    match a {
        Some((asked, fut)) => {
            let answer = fut.await;
            let asked = asked.take();
            *a = None;
            (asked, answer)
        }
        None => std::future::pending().await,
    }
}

/// A handler's `{result}` as the command's result.
fn handler_result(r: &Value) -> RpcBashResult {
    RpcBashResult {
        output: r["output"].as_str().unwrap_or("").to_string(),
        exit_code: r["exitCode"].as_i64(),
        cancelled: r["cancelled"].as_bool().unwrap_or(false),
        truncated: r["truncated"].as_bool().unwrap_or(false),
        full_output_path: r["fullOutputPath"].as_str().map(str::to_string),
    }
}

/// Where the agent's user commands run (cwd, image resizing).
pub(super) fn where_(agent: &Agent) -> Where {
    (
        agent.opts.cwd.clone(),
        agent.opts.auto_resize_images,
        std::sync::Arc::clone(&agent.ext.limits.sandbox),
    )
}

/// Resolves with the running command's next step; never without one.
pub(super) async fn next_step(b: &mut Option<UserBash>) -> Step {
    match b {
        Some(b) => b.next().await,
        None => std::future::pending().await,
    }
}

/// The `bashExecution` message of a finished command.
pub(super) fn message(command: &str, exclude: Option<bool>, r: &RpcBashResult) -> AgentMessage {
    AgentMessage::BashExecution(Box::new(BashExecutionMessage {
        command: command.to_string(),
        output: r.output.clone(),
        exit_code: r.exit_code.map(Num::signed),
        cancelled: r.cancelled,
        truncated: r.truncated,
        full_output_path: r.full_output_path.clone(),
        timestamp: Num::signed(now_ms()),
        exclude_from_context: exclude.filter(|&x| x),
        extra: Map::new(),
    }))
}

impl Ctl {
    /// The `bash` command while idle: the extensions' `user_bash` first,
    /// then the command, reading input meanwhile (only `abort_bash` acts;
    /// the rest waits), then its message and the response.
    pub(super) async fn bash(
        &mut self,
        agent: &mut Agent,
        id: &Option<Value>,
        command: &str,
        exclude: Option<bool>,
        input: &mut Inbox,
        backlog: &mut std::collections::VecDeque<String>,
    ) -> Result<Option<i32>, String> {
        // An extension may run the command itself (or refuse it).
        let event = user_bash_event(command, exclude, &agent.opts.cwd);
        let out = self.out.clone();
        let own = agent
            .user_bash(event, &mut |v: &Event<'_>| {
                out.record(v);
            })
            .await?;
        if let Some(r) = own {
            self.bash_done(agent, id, command, exclude, handler_result(&r))?;
            return Ok(None);
        }
        let b = UserBash::start(where_(agent), id.clone(), command, exclude);
        let (result, exit) = self.bash_to_end(b, input, backlog).await;
        self.bash_done(agent, id, command, exclude, result)?;
        Ok(exit)
    }

    /// The `user_bash` handlers answered a command sent mid-run: their
    /// reports go out, then a `{result}` answers it (its message kept for
    /// after the run) and a throw fails it; with no answer the command
    /// runs here (returned).
    pub(super) fn bash_answered(
        &mut self,
        asked: Option<Asked>,
        answer: Result<Option<Value>, String>,
        at: Where,
        hooks: Option<&dyn Hooks>,
        bashed: &mut Vec<AgentMessage>,
    ) -> Option<UserBash> {
        let asked = asked?;
        if let Some(h) = hooks {
            for ev in h.drain_events() {
                self.out.record(&ev);
            }
        }
        match answer {
            Err(msg) => self.respond(asked.id, "bash", Err(msg)),
            Ok(Some(r)) => {
                let result = handler_result(&r);
                bashed.push(message(&asked.command, asked.exclude, &result));
                self.respond(asked.id, "bash", Ok(serde_json::to_value(result).ok()));
            }
            Ok(None) => return Some(asked.start(at)),
        }
        None
    }

    /// Runs `b` to its end, reading input meanwhile (`abort_bash` cancels
    /// it; a signal, or EOF unless it finishes work first, cancel it and
    /// exit; the rest waits).
    pub(super) async fn bash_to_end(
        &mut self,
        mut b: UserBash,
        input: &mut Inbox,
        backlog: &mut std::collections::VecDeque<String>,
    ) -> (RpcBashResult, Option<i32>) {
        self.bash_cancel = Some(b.cancel.clone());
        let mut exit = None;
        let out = loop {
            tokio::select! {
                step = b.next() => match step {
                    Step::Update(text) => b.update(self, text),
                    Step::Done(out) => break out,
                },
                inp = input.recv() => match inp {
                    Input::Line(l) => match parse(&l) {
                        Parsed::Command(aid, kind, RpcCommand::AbortBash) => {
                            b.cancel.cancel();
                            self.respond(aid, &kind, Ok(None));
                        }
                        Parsed::Ui(v) => self.ui_answer(v),
                        _ => backlog.push_back(l),
                    },
                    Input::Signal(code) => { exit = Some(code); b.cancel.cancel(); }
                    // The command finishes when EOF is to wait for it.
                    Input::Eof if self.opts.finish_on_eof => {}
                    Input::Eof => { exit = Some(0); b.cancel.cancel(); }
                    Input::TooLong => {}
                },
            }
        };
        self.bash_cancel = None;
        let (_, result) = b.finish(self, out);
        (result, exit)
    }

    /// A finished `bash`: its `bashExecution` entry, then the response.
    fn bash_done(
        &mut self,
        agent: &mut Agent,
        id: &Option<Value>,
        command: &str,
        exclude: Option<bool>,
        result: RpcBashResult,
    ) -> Result<(), String> {
        let e = agent
            .store
            .message_entry(message(command, exclude, &result));
        self.append(agent, e)?;
        self.respond(id.clone(), "bash", Ok(serde_json::to_value(result).ok()));
        Ok(())
    }
}
