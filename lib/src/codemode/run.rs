//! One `codemode` call: the input parsed, the servers the script may reach
//! waited for, the callable tools and the stored values handed to a fresh
//! engine, and then, until the script ends, its tool calls sent through the
//! agent loop's gate (each one a partial result listing the calls) and
//! their answers sent back. Cancellation stops the script at once; calls
//! still running when it ends are cancelled; a successful script's store
//! writes become a `codemode-store` entry.

use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::catalog::{self, Lookup};
use super::engine::{self, Failure, Outcome, Script, ToHost, ToJs};
use super::output::{self, CallRecord};
use super::{source, CodemodeTool};
use crate::agent::nested::NestedCall;
use crate::format::ContentBlock;
use crate::tools::{ToolContext, ToolOutput, UpdateSink};

/// How long a stopped script may take to notice before its result is
/// made without it.
const GRACE: Duration = Duration::from_millis(500);

/// The entries that keep `store()` values.
pub const STORE_ENTRY: &str = "codemode-store";

fn refused(text: impl Into<String>) -> ToolOutput {
    ToolOutput {
        details: Some(Value::Object(Map::new())),
        ..ToolOutput::error(text)
    }
}

fn partial(calls: &[CallRecord]) -> ToolOutput {
    ToolOutput {
        content: Vec::new(),
        details: Some(output::details(calls)),
        ..Default::default()
    }
}

/// The stored values on the branch: each entry's `set` and `delete`
/// applied in order.
fn replay(entries: Vec<Value>) -> Map<String, Value> {
    let mut store = Map::new();
    for e in entries {
        if let Some(Value::Object(set)) = e.get("set") {
            for (k, v) in set {
                store.insert(k.clone(), v.clone());
            }
        }
        for k in e
            .get("delete")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(k) = k.as_str() {
                store.remove(k);
            }
        }
    }
    store
}

fn text_of(out: &ToolOutput) -> String {
    out.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a nested call's result is to the script: `(true, JSON value)` or
/// `(false, error text)`. A tool with an output schema resolves to its
/// structured result, also on failure when it made one.
fn answer(has_schema: bool, out: &ToolOutput) -> (bool, String) {
    if out.is_error {
        return match &out.structured {
            Some(s @ Value::Object(_)) if has_schema => (true, s.to_string()),
            _ => (false, text_of(out)),
        };
    }
    match &out.structured {
        Some(s) => (true, s.to_string()),
        None => (true, Value::String(text_of(out)).to_string()),
    }
}

pub(super) async fn execute(
    tool: &CodemodeTool,
    args: Value,
    ctx: ToolContext,
    mut on_update: UpdateSink,
) -> ToolOutput {
    let code = args.get("code").and_then(Value::as_str).unwrap_or("");
    let src = match source::parse(code) {
        Ok(s) => s,
        Err(e) => return refused(e),
    };
    let started = Instant::now();
    let Some(host) = crate::agent::nested::Host::of(&ctx) else {
        return refused("codemode scripts run only inside the agent loop");
    };
    let mut calls: Vec<CallRecord> = Vec::new();
    on_update(partial(&calls));
    if let Some(c) = &tool.catalog {
        tokio::select! {
            _ = c.ready(&src.code) => {}
            _ = ctx.cancel.cancelled() => {}
        }
    }
    let more = tool
        .listed()
        .into_iter()
        .chain(tool.catalog.as_ref().map(|c| c.tools()).unwrap_or_default())
        .collect::<Vec<_>>();
    let active = host.active_tools();
    let entries = catalog::entries(&active, &more, tool.catalog.as_deref());
    let store = replay(host.entries(STORE_ENTRY).await);
    let init = json!({
        "tools": entries.iter().map(|e| json!({"name": e.id, "description": e.description})).collect::<Vec<_>>(),
        "aliases": entries.iter().map(|e| json!([e.tool.name().into_owned(), e.id])).collect::<Vec<_>>(),
        "store": store,
    });
    let lookup = Lookup {
        entries: entries.clone(),
        namespaces: tool
            .catalog
            .as_ref()
            .map(|c| c.namespaces())
            .unwrap_or_default(),
        declared: active.iter().map(|t| t.name().into_owned()).collect(),
    };
    let deadline = src.timeout_ms.map(|ms| started + Duration::from_millis(ms));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let script = Script {
        code: src.code.clone(),
        init: init.to_string(),
        deadline,
        memory_limit: super::MEMORY_LIMIT,
    };
    let running = match engine::spawn(script, Box::new(lookup), tx) {
        Ok(r) => r,
        Err(e) => return refused(e),
    };
    // The nested calls' scope: cancelled when the script ends.
    let scope = ctx.cancel.child_token();
    let mut inflight = FuturesUnordered::new();
    let mut stopped_at: Option<Instant> = None;
    let mut stop_reason: Option<Failure> = None;
    let outcome: Outcome = loop {
        let limit = match (stopped_at, deadline) {
            (Some(t), _) => Some(t + GRACE),
            (None, Some(d)) => Some(d + GRACE),
            (None, None) => None,
        };
        let sleep = async {
            match limit {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            m = rx.recv() => match m {
                Some(ToHost::Call { id, name, args }) => {
                    let Some(e) = entries.iter().find(|e| e.id == name) else {
                        let _ = running.tx.send(ToJs::Reply { id, ok: false, payload: format!("Tool {name} not found") });
                        continue;
                    };
                    let value: Value = serde_json::from_str(&args).unwrap_or(Value::Object(Map::new()));
                    calls.push(CallRecord {
                        id: format!("{}/?", ctx.tool_call_id),
                        name: e.tool.name().into_owned(),
                        args,
                        status: "running",
                        duration_ms: None,
                        error: None,
                    });
                    let index = calls.len() - 1;
                    let has_schema = e.tool.output_schema().is_some();
                    let call = NestedCall { tool: e.tool.clone(), args: value, cancel: scope.child_token() };
                    let t = Instant::now();
                    let pending = host.call(call);
                    inflight.push(async move {
                        let r = pending.await;
                        (id, index, has_schema, r, t.elapsed())
                    });
                    on_update(partial(&calls));
                }
                Some(ToHost::Done(o)) => break o,
                None => break Outcome { failure: Some(Failure::Sandbox("the script engine stopped".into())), items: Vec::new(), writes: None },
            },
            Some((id, index, has_schema, r, took)) = inflight.next(), if !inflight.is_empty() => {
                let (ok, payload) = answer(has_schema, &r.output);
                let c = &mut calls[index];
                c.id = r.id.clone();
                c.status = if r.output.is_error { "error" } else { "ok" };
                c.duration_ms = Some(took.as_secs_f64() * 1000.0);
                if r.output.is_error {
                    c.error = Some(text_of(&r.output));
                }
                let _ = running.tx.send(ToJs::Reply { id, ok, payload });
                on_update(partial(&calls));
            }
            _ = ctx.cancel.cancelled(), if stopped_at.is_none() => {
                running.stop();
                stopped_at = Some(Instant::now());
                stop_reason = Some(Failure::Aborted);
            }
            _ = sleep => {
                // The engine did not notice in time (a built-in that does
                // not poll the interrupt handler): the result is made
                // without it, and its thread ends on its own.
                running.stop();
                break Outcome { failure: Some(stop_reason.take().unwrap_or(Failure::Timeout)), items: Vec::new(), writes: None };
            }
        }
    };
    // Calls still running are cancelled.
    scope.cancel();
    for c in calls.iter_mut().filter(|c| c.status == "running") {
        c.status = "cancelled";
    }
    if outcome.failure.is_none() {
        if let Some(w) = outcome.writes.as_deref() {
            if let Ok(v) = serde_json::from_str::<Value>(w) {
                if let Err(e) = host.append(STORE_ENTRY, v).await {
                    let failed = Outcome {
                        failure: Some(Failure::Sandbox(format!(
                            "cannot keep the stored values: {e}"
                        ))),
                        ..outcome
                    };
                    return output::result(
                        &failed,
                        &calls,
                        started.elapsed(),
                        src.max_output_tokens,
                        src.timeout_ms,
                    );
                }
            }
        }
    }
    output::result(
        &outcome,
        &calls,
        started.elapsed(),
        src.max_output_tokens,
        src.timeout_ms,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_replay_in_order() {
        let s = replay(vec![
            json!({"set": {"a": 1, "b": 2}, "delete": []}),
            json!({"set": {"a": 3}, "delete": ["b"]}),
        ]);
        assert_eq!(Value::Object(s), json!({"a": 3}));
    }

    #[test]
    fn answers_follow_the_output_schema() {
        let bash = ToolOutput {
            content: vec![ContentBlock::text("x")],
            is_error: true,
            structured: Some(json!({"output": "x", "exit_code": 3})),
            ..Default::default()
        };
        assert_eq!(
            answer(true, &bash),
            (true, r#"{"output":"x","exit_code":3}"#.into())
        );
        assert_eq!(answer(false, &bash), (false, "x".into()));
        let edit = ToolOutput {
            content: vec![ContentBlock::text("done")],
            ..Default::default()
        };
        assert_eq!(answer(false, &edit), (true, "\"done\"".into()));
    }
}
