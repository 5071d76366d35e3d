//! Running one assistant message's tool calls: all starts first, failures
//! answered at once, the rest concurrently; ends and results in call
//! order. Each call passes the gate (validation → `tool_call` hooks →
//! approval → the final policy right before execute → `tool_result`
//! hooks). A call that runs other tools (codemode) asks for them through
//! its [`nested::Host`]; those nested calls pass the very same steps, get
//! ids `<parent>/<n>` and events carrying `parentToolCallId`, and end
//! before the batch does (a parent that ended cancelled the ones it left).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::nested::{self, Event, NestedResult, Request};
use super::{events, hooks, Agent, Emit};
use crate::format::message::{ToolCallBlock, ToolResultMessage};
use crate::format::{AgentMessage, Num};
use crate::timefmt::now_ms;
use crate::tools::{Tool, ToolContext, ToolOutput};

/// A nested call under way.
struct Nested {
    call: ToolCallBlock,
    parent_id: String,
    input: Value,
    reply: Option<oneshot::Sender<NestedResult>>,
}

/// `event` with `parentToolCallId` added last (pi's key order).
fn with_parent(mut event: Value, parent: &str) -> Value {
    if let Value::Object(m) = &mut event {
        m.insert("parentToolCallId".into(), parent.into());
    }
    event
}

/// A call made ready to run: the tool, the arguments after the gate and
/// the approval ticket; `Err` is the error result's text.
type Prepared = Result<(Arc<dyn Tool>, Value, Option<hooks::Ticket>), String>;

impl Agent {
    /// Validation and the gate for one call (`tool` is `None` when no such
    /// tool exists).
    async fn prepare_call(
        &mut self,
        call: &ToolCallBlock,
        tool: Option<&Arc<dyn Tool>>,
        gated: bool,
        emit: Emit<'_>,
    ) -> Prepared {
        let arguments_error = call.extra.get("argumentsError").and_then(Value::as_str);
        let (tool, args) = match (tool, arguments_error) {
            (None, _) => return Err(format!("Tool {} not found", call.name)),
            // Arguments that were not JSON are never repaired and run
            // (pi 1.6.0's wording; the provider recorded why).
            (Some(_), Some(e)) => {
                return Err(format!("Invalid arguments for tool \"{}\": {e}", call.name))
            }
            (Some(tool), None) => {
                let args = crate::tools::validate::validate_args(
                    &call.name,
                    &tool.definition().parameters,
                    &tool.prepare_arguments(call.arguments.clone()),
                )?;
                (Arc::clone(tool), args)
            }
        };
        let (args, ticket) = if gated {
            self.gate_call(call, args, emit).await?
        } else {
            (args, None)
        };
        // The run was stopped (a signal, a limit reached by the response
        // that asked for this call) before the call started: it never runs.
        if self.cancel.is_cancelled() {
            return Err("Operation aborted".to_string());
        }
        Ok((tool, args, ticket))
    }

    /// Starts a prepared call on its own task; its partial results and its
    /// end come back on `tx` as `update`/`done` events.
    #[allow(clippy::too_many_arguments)]
    fn spawn_call(
        &self,
        tool: Arc<dyn Tool>,
        args: Value,
        mut ticket: Option<hooks::Ticket>,
        ctx: ToolContext,
        gated: bool,
        tx: mpsc::UnboundedSender<Event>,
        update: fn(usize, ToolOutput) -> Event,
        done: fn(usize, ToolOutput, u64) -> Event,
        i: usize,
    ) {
        let policy = gated.then(|| self.ext.limits.policy.clone());
        let (name, id) = (tool.name().into_owned(), ctx.tool_call_id.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            // The final policy, right before execute: the arguments are the
            // approved ones, the approval is used once, paths stay where the
            // policy says.
            if let Some(p) = policy {
                if let Err(text) = p.check(ticket.as_mut(), &name, &id, &args, &ctx.cwd) {
                    let _ = tx.send(done(
                        i,
                        ToolOutput::error(text),
                        started.elapsed().as_millis() as u64,
                    ));
                    return;
                }
            }
            let utx = tx.clone();
            let sink = Box::new(move |partial: ToolOutput| {
                let _ = utx.send(update(i, partial));
            });
            let out = tool.execute(args, ctx, sink).await;
            let _ = tx.send(done(i, out, started.elapsed().as_millis() as u64));
        });
    }

    fn tool_context(&self, id: &str, host: Option<nested::Host>) -> ToolContext {
        ToolContext {
            cwd: self.opts.cwd.clone(),
            cancel: self.cancel.clone(),
            auto_resize_images: self.opts.auto_resize_images,
            tool_call_id: id.to_string(),
            // A tool that starts an agent (a subagent) hands it these.
            caller: Some(self.ext.as_caller()),
            sandbox: std::sync::Arc::clone(&self.ext.limits.sandbox),
            env: self.tool_env(),
            host: host.map(|h| crate::tools::LoopHost(Arc::new(h))),
        }
    }

    /// The `tool_result` hooks on a finished call's output.
    async fn patched(
        &mut self,
        call: &ToolCallBlock,
        input: &Value,
        out: ToolOutput,
        emit: Emit<'_>,
    ) -> ToolOutput {
        let Some(h) = self.hooks_for("tool_result") else {
            return out;
        };
        let fut = h.tool_result(hooks::ToolResultEvent {
            tool_name: call.name.clone(),
            tool_call_id: call.id.clone(),
            input: input.clone(),
            output: out.clone(),
            delegation: self.ext.delegation.clone(),
        });
        let patched = self.wait(&h, fut, emit).await;
        self.settle_hook(emit);
        match patched {
            Some(Some(p)) => p,
            Some(None) => out,
            // Aborted before the handlers (a redaction, say) answered: the
            // unpatched result is not kept.
            None => ToolOutput::error(super::ABORTED),
        }
    }

    /// Validates and runs tool calls (see the module docs).
    pub(super) async fn run_tools(
        &mut self,
        calls: &[ToolCallBlock],
        emit: Emit<'_>,
    ) -> Result<Vec<AgentMessage>, String> {
        let by_name: HashMap<String, Arc<dyn Tool>> = self
            .opts
            .tools
            .iter()
            .map(|t| (t.name().into_owned(), Arc::clone(t)))
            .collect();
        let active = Arc::new(self.opts.tools.clone());
        let gated = self.ext.gates_tools();
        // Finished results by call index: immediate failures now, the rest
        // as their tasks report back.
        let mut done: Vec<Option<(ToolOutput, Option<u64>)>> = vec![None; calls.len()];
        // The arguments each call runs with (after `tool_call` rewrites).
        let mut inputs: Vec<Value> = vec![Value::Null; calls.len()];
        let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
        let mut running = 0usize;
        for (i, call) in calls.iter().enumerate() {
            self.dispatch_tool_event(
                events::tool_start(&call.id, &call.name, &call.arguments),
                emit,
            )
            .await;
            let (tool, args, ticket) = match self
                .prepare_call(call, by_name.get(&call.name), gated, emit)
                .await
            {
                Ok(p) => p,
                Err(text) => {
                    // A call that fails before running ends right after its start.
                    let out = with_empty_details(ToolOutput::error(text));
                    self.dispatch_tool_event(
                        events::tool_end(&call.id, &call.name, &out, None),
                        emit,
                    )
                    .await;
                    done[i] = Some((out, None));
                    continue;
                }
            };
            inputs[i] = args.clone();
            running += 1;
            let host = nested::Host::new(i, tx.clone(), Arc::clone(&active));
            let ctx = self.tool_context(&call.id, Some(host));
            self.spawn_call(
                tool,
                args,
                ticket,
                ctx,
                gated,
                tx.clone(),
                Event::Update,
                Event::Done,
                i,
            );
        }
        // (`tx` stays: nested calls' tasks report on it too; the loop ends
        // by count, not by the channel closing.)
        // The nested calls of this batch, and how many each parent made.
        let mut nested: Vec<Nested> = Vec::new();
        let mut made: Vec<usize> = vec![0; calls.len()];
        let mut nested_running = 0usize;
        // Ends come as tools finish; the result messages follow in call
        // order, as pi 1.6.0 does.
        let watcher = self.ext.hooks.clone();
        let q = self.inquiries.clone();
        while running > 0 || nested_running > 0 {
            let next = match &watcher {
                // An extension tool may call back into the host while it runs.
                Some(h) => loop {
                    tokio::select! {
                        m = rx.recv() => break m,
                        _ = h.ops_ready() => self.settle_hook(emit),
                        _ = hooks::inquiry_ready(&q) => if let Some(q) = &q { q.serve(self) },
                    }
                },
                None => self.serving(rx.recv()).await,
            };
            let Some(event) = next else {
                break;
            };
            match event {
                Event::Update(i, p) => {
                    self.dispatch_tool_event(
                        events::tool_update(&calls[i].id, &calls[i].name, &calls[i].arguments, &p),
                        emit,
                    )
                    .await;
                }
                Event::Done(i, out, ms) => {
                    let out = self.patched(&calls[i], &inputs[i], out, emit).await;
                    self.dispatch_tool_event(
                        events::tool_end(&calls[i].id, &calls[i].name, &out, Some(ms)),
                        emit,
                    )
                    .await;
                    done[i] = Some((out, Some(ms)));
                    running -= 1;
                }
                Event::Ask(_, Request::Entries(custom_type, reply)) => {
                    let _ = reply.send(self.branch_custom(&custom_type));
                }
                Event::Ask(_, Request::Append(custom_type, data, reply)) => {
                    let leaf = self.store.session.leaf_id().map(str::to_string);
                    let entry = self
                        .store
                        .session
                        .new_custom(leaf.as_deref(), &custom_type, data);
                    let _ = reply.send(self.append(entry, Some(&mut *emit)));
                }
                Event::Ask(i, Request::Call(req, reply)) => {
                    made[i] += 1;
                    let n = nested.len();
                    let call = ToolCallBlock {
                        id: format!("{}/{}", calls[i].id, made[i]),
                        name: req.tool.name().into_owned(),
                        arguments: req.args.clone(),
                        extra: Map::new(),
                    };
                    let parent_id = calls[i].id.clone();
                    self.dispatch_tool_event(
                        with_parent(
                            events::tool_start(&call.id, &call.name, &call.arguments),
                            &parent_id,
                        ),
                        emit,
                    )
                    .await;
                    nested.push(Nested {
                        call: call.clone(),
                        parent_id,
                        input: Value::Null,
                        reply: Some(reply),
                    });
                    let tool = Arc::clone(&req.tool);
                    let prepared = if req.cancel.is_cancelled() {
                        Err("Tool call was cancelled".to_string())
                    } else {
                        self.prepare_call(&call, Some(&tool), gated, emit).await
                    };
                    match prepared {
                        Ok((tool, args, ticket)) => {
                            nested[n].input = args.clone();
                            nested_running += 1;
                            let mut ctx = self.tool_context(&call.id, None);
                            ctx.cancel = req.cancel;
                            self.spawn_call(
                                tool,
                                args,
                                ticket,
                                ctx,
                                gated,
                                tx.clone(),
                                Event::NestedUpdate,
                                Event::NestedDone,
                                n,
                            );
                        }
                        Err(text) => {
                            let out = with_empty_details(ToolOutput::error(text));
                            self.end_nested(&mut nested[n], out, None, emit).await;
                        }
                    }
                }
                Event::NestedUpdate(n, p) => {
                    let c = &nested[n].call;
                    let ev = events::tool_update(&c.id, &c.name, &c.arguments, &p);
                    let ev = with_parent(ev, &nested[n].parent_id);
                    self.dispatch_tool_event(ev, emit).await;
                }
                Event::NestedDone(n, out, ms) => {
                    let (call, input) = (nested[n].call.clone(), nested[n].input.clone());
                    let out = self.patched(&call, &input, out, emit).await;
                    self.end_nested(&mut nested[n], out, Some(ms), emit).await;
                    nested_running -= 1;
                }
            }
        }
        let mut results = Vec::with_capacity(calls.len());
        for (i, d) in done.into_iter().enumerate() {
            let (out, ms) =
                d.unwrap_or_else(|| (ToolOutput::error("Tool execution did not complete"), None));
            let msg = tool_result_message(&calls[i], &out, ms);
            let msg = self.start_end(msg, emit).await;
            self.append_message(msg.clone())?;
            results.push(msg);
        }
        Ok(results)
    }

    /// Emits a nested call's end and answers its parent.
    async fn end_nested(
        &mut self,
        n: &mut Nested,
        out: ToolOutput,
        ms: Option<u64>,
        emit: Emit<'_>,
    ) {
        let ev = events::tool_end(&n.call.id, &n.call.name, &out, ms);
        self.dispatch_tool_event(with_parent(ev, &n.parent_id), emit)
            .await;
        if let Some(reply) = n.reply.take() {
            let _ = reply.send(NestedResult {
                id: n.call.id.clone(),
                output: out,
            });
        }
    }

    /// The `data` of the branch's `custom` entries of `custom_type`.
    fn branch_custom(&self, custom_type: &str) -> Vec<Value> {
        let s = &self.store.session;
        s.branch()
            .into_iter()
            .filter_map(|i| match &s.entries[i] {
                crate::format::Entry::Custom(c) if c.custom_type == custom_type => {
                    Some(c.data.clone().unwrap_or(Value::Null))
                }
                _ => None,
            })
            .collect()
    }
}

/// pi answers a call that fails before running with `details: {}`.
fn with_empty_details(mut out: ToolOutput) -> ToolOutput {
    out.details = Some(Value::Object(Map::new()));
    out
}

fn tool_result_message(
    call: &ToolCallBlock,
    out: &ToolOutput,
    duration_ms: Option<u64>,
) -> AgentMessage {
    AgentMessage::ToolResult(Box::new(ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: out.content.clone(),
        details: out.details.clone(),
        is_error: out.is_error,
        duration_ms: duration_ms.map(Num::int),
        timestamp: Num::signed(now_ms()),
        extra: Map::new(),
    }))
}
