//! The agent loop with hooks and gates: the tool-call gate in
//! order, against the scripted faux provider.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::hooks::*;
use super::*;
use crate::format::message::UserMessage;
use crate::format::model::{Model, ModelCost, ThinkingLevel};
use crate::format::UserContent;
use crate::tools::ToolOutput;

fn model(script: &std::path::Path) -> Model {
    Model {
        id: "faux".into(),
        name: "faux".into(),
        api: "faux".into(),
        provider: "faux".into(),
        base_url: format!("file://{}", script.display()),
        reasoning: false,
        input: vec!["text".into()],
        cost: ModelCost::default(),
        context_window: 128000,
        max_tokens: 16384,
        headers: None,
        compat: None,
    }
}

fn agent(dir: &std::path::Path, lines: &[Value]) -> Agent {
    let script = dir.join("script.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&script, text.join("\n")).unwrap();
    let opts = AgentOptions {
        model: model(&script),
        api_key: None,
        thinking: ThinkingLevel::Off,
        tools: crate::tools::select::builtin_tools(&["bash".to_string(), "write".to_string()]),
        cwd: dir.to_path_buf(),
        sections: vec![("preamble".into(), "sys".into())],
        forced_prompt: None,
        max_turns: None,
        idle_timeout: Duration::from_secs(5),
        auto_resize_images: true,
        retry: RetrySettings::default(),
    };
    let store = SessionStore::create(&dir.display().to_string(), None, None);
    Agent::new(opts, store, CancellationToken::new())
}

fn user(text: &str) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: UserContent::Text(text.into()),
        timestamp: Num::int(0),
        extra: Map::new(),
    })
}

/// Blocks `touch`, rewrites what `write` writes, patches every result, and
/// logs the events it sees.
#[derive(Default)]
struct Probe {
    seen: Mutex<Vec<String>>,
}

impl Hooks for Probe {
    fn handles(&self, _event: &str) -> bool {
        true
    }
    fn tool_call(&self, ev: ToolCallEvent) -> BoxFuture<'_, ToolCallOutcome> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("tool_call {}", ev.tool_name));
        let cmd = ev
            .input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("");
        ready(if cmd.contains("touch") {
            ToolCallOutcome::Block("no touching".into())
        } else if ev.tool_name == "write" {
            let mut input = ev.input.clone();
            input["content"] = json!("rewritten");
            ToolCallOutcome::Continue(Some(input))
        } else {
            ToolCallOutcome::Continue(None)
        })
    }
    fn tool_result(&self, ev: ToolResultEvent) -> BoxFuture<'_, Option<ToolOutput>> {
        let mut out = ev.output;
        out.content = vec![ContentBlock::text(format!("patched {}", ev.tool_name))];
        ready(Some(out))
    }
    fn before_agent_start(&self, _ev: BeforeAgentStart) -> BoxFuture<'_, BeforeAgentStartOutcome> {
        ready(BeforeAgentStartOutcome {
            system_prompt: Some("FORCED".into()),
            ..Default::default()
        })
    }
    fn boundary(&self, payload: Value) -> BoxFuture<'_, BoundaryOutcome> {
        self.seen
            .lock()
            .unwrap()
            .push(payload["type"].as_str().unwrap_or("").to_string());
        ready(BoundaryOutcome::default())
    }
    fn notify(&self, ev: Value) -> BoxFuture<'_, ()> {
        self.seen
            .lock()
            .unwrap()
            .push(ev["type"].as_str().unwrap_or("").to_string());
        ready(())
    }
}

fn results(a: &Agent) -> Vec<(bool, String)> {
    let ctx = a.store.session.context(None);
    ctx.messages
        .iter()
        .filter_map(|(_, m)| match &**m {
            AgentMessage::ToolResult(r) => Some((
                r.is_error,
                UserContent::Blocks(r.content.clone()).joined_text(""),
            )),
            _ => None,
        })
        .collect()
}

fn two_calls() -> Vec<Value> {
    vec![
        json!({"toolCalls": [
            {"name": "bash", "arguments": {"command": "touch marker"}},
            {"name": "write", "arguments": {"path": "w.txt", "content": "orig"}}
        ]}),
        json!({"text": "done"}),
    ]
}

#[tokio::test]
async fn tool_call_blocks_rewrites_and_results_are_patched() {
    let t = tempfile::tempdir().unwrap();
    let mut a = agent(t.path(), &two_calls());
    let probe = Arc::new(Probe::default());
    a.ext.hooks = Some(probe.clone());
    let mut evs = Vec::new();
    let out = a
        .run(user("go"), &mut |v: &Event<'_>| {
            evs.push(v.to_value().into_owned())
        })
        .await;
    assert_eq!(out.error, None);
    assert!(
        !t.path().join("marker").exists(),
        "a blocked call never runs"
    );
    assert_eq!(
        std::fs::read_to_string(t.path().join("w.txt")).unwrap(),
        "rewritten"
    );
    assert_eq!(
        results(&a),
        [
            (true, "no touching".to_string()),
            (false, "patched write".to_string())
        ]
    );
    let seen = probe.seen.lock().unwrap().clone();
    // Hooks see the start of a call before its tool_call, and the run's
    // notifications in pi's order.
    let pos = |s: &str| seen.iter().position(|x| x == s).unwrap_or(usize::MAX);
    assert!(pos("agent_start") < pos("turn_start"));
    assert!(pos("tool_execution_start") < pos("tool_call bash"));
    assert!(pos("turn_end") < pos("agent_end"));
    assert!(pos("agent_end") < pos("agent_settled"));
    // The forced prompt is sent but never recorded.
    let recorded = serde_json::to_string(&a.store.session.entries).unwrap();
    assert!(!recorded.contains("FORCED"));
}

struct Deny(&'static str);
impl Gate for Deny {
    fn approve(&self, req: ApprovalRequest) -> BoxFuture<'_, Approval> {
        ready(if req.tool_name == self.0 {
            Approval::Block(format!("denied {}", req.tool_name))
        } else {
            Approval::Allow
        })
    }
}

#[tokio::test]
async fn gates_approve_the_final_arguments() {
    let t = tempfile::tempdir().unwrap();
    let mut a = agent(
        t.path(),
        &[
            json!({"toolCalls": [
                {"name": "bash", "arguments": {"command": "touch marker"}},
                {"name": "write", "arguments": {"path": "w.txt", "content": "orig"}}
            ]}),
            json!({"text": "done"}),
        ],
    );
    a.ext.limits.gates = vec![Arc::new(Deny("bash"))];
    let out = a.run(user("go"), &mut |_: &Event<'_>| {}).await;
    assert_eq!(out.error, None);
    assert!(!t.path().join("marker").exists());
    assert_eq!(
        std::fs::read_to_string(t.path().join("w.txt")).unwrap(),
        "orig"
    );
    assert_eq!(results(&a)[0], (true, "denied bash".to_string()));
}

#[tokio::test]
async fn final_policy_keeps_paths_in_the_workspace() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut a = agent(
        &ws,
        &[
            json!({"toolCalls": [{"name": "write", "arguments": {"path": "../out.txt", "content": "x"}}]}),
            json!({"text": "done"}),
        ],
    );
    a.ext.limits.policy.workspace_paths = true;
    a.run(user("go"), &mut |_: &Event<'_>| {}).await;
    assert!(!t.path().join("out.txt").exists());
    assert!(results(&a)[0].1.contains("outside the workspace"));
}

/// A tool that runs other tools (as the `codemode` tool does): one nested
/// `write` out of the workspace through its host, answering with what the
/// nested call gave back.
struct Nester;
impl crate::tools::Tool for Nester {
    fn definition(&self) -> crate::format::tool::ToolDefinition {
        crate::format::tool::ToolDefinition {
            name: "nester".into(),
            description: "runs a nested write".into(),
            parameters: json!({"type": "object", "properties": {}}),
            extra: Map::new(),
        }
    }
    fn execute<'a>(
        &'a self,
        _args: Value,
        ctx: crate::tools::ToolContext,
        _on_update: crate::tools::UpdateSink,
    ) -> crate::tools::ToolFuture<'a> {
        Box::pin(async move {
            let Some(host) = nested::Host::of(&ctx) else {
                return ToolOutput::error("no host");
            };
            let write = crate::tools::select::builtin_tools(&["write".to_string()]);
            let r = host
                .call(nested::NestedCall {
                    tool: Arc::clone(&write[0]),
                    args: json!({"path": "../nested.txt", "content": "x"}),
                    cancel: ctx.cancel.clone(),
                })
                .await;
            let text = UserContent::Blocks(r.output.content.clone()).joined_text("");
            ToolOutput::error(format!("{} {}: {text}", r.id, r.output.is_error))
        })
    }
}

/// A nested call passes the final policy as a call of the model does: a
/// write out of the workspace made through the host never happens.
#[tokio::test]
async fn final_policy_holds_for_nested_calls() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut a = agent(
        &ws,
        &[
            json!({"toolCalls": [{"name": "nester", "arguments": {}}]}),
            json!({"text": "done"}),
        ],
    );
    a.opts.tools.push(Arc::new(Nester));
    a.ext.limits.policy.workspace_paths = true;
    let mut events = Vec::new();
    a.run(user("go"), &mut |e: &Event<'_>| {
        events.push(e.to_value().into_owned())
    })
    .await;
    assert!(!t.path().join("nested.txt").exists());
    let (_, text) = &results(&a)[0];
    assert!(
        text.contains("/1 true: ") && text.contains("outside the workspace"),
        "{text}"
    );
    let nested_end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolName"] == "write")
        .expect("the nested call's end");
    assert!(nested_end["parentToolCallId"].is_string(), "{nested_end}");
}

/// A `tool_call` handler (or an approver) that never answers.
struct Hang;
impl Hooks for Hang {
    fn handles(&self, event: &str) -> bool {
        event == "tool_call"
    }
    fn tool_call(&self, _ev: ToolCallEvent) -> BoxFuture<'_, ToolCallOutcome> {
        Box::pin(std::future::pending())
    }
}
impl Gate for Hang {
    fn approve(&self, _req: ApprovalRequest) -> BoxFuture<'_, Approval> {
        Box::pin(std::future::pending())
    }
}

/// An abort ends the wait for a hook or an approver at once, whether it
/// comes while they are asked or just before, and the call they were to
/// decide on never runs.
#[tokio::test]
async fn an_abort_ends_a_hung_tool_call_wait_and_blocks_the_call() {
    for (gate, during) in [(false, true), (true, true), (false, false), (true, false)] {
        let what = format!("gate {gate}, during {during}");
        let t = tempfile::tempdir().unwrap();
        let mut a = agent(
            t.path(),
            &[
                json!({"toolCalls": [{"name": "bash", "arguments": {"command": "touch marker"}}]}),
                json!({"text": "done"}),
            ],
        );
        if gate {
            a.ext.limits.gates = vec![Arc::new(Hang)];
        } else {
            a.ext.hooks = Some(Arc::new(Hang));
        }
        let cancel = a.cancel.clone();
        let started = std::time::Instant::now();
        let mut emit = |v: &Event<'_>| {
            if v.kind() == "tool_execution_start" {
                if during {
                    let c = cancel.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        c.cancel();
                    });
                } else {
                    cancel.cancel();
                }
            }
        };
        let run = a.run(user("go"), &mut emit);
        let out = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .unwrap_or_else(|_| panic!("{what}: the abort was kept waiting"));
        assert!(out.aborted, "{what}");
        assert!(started.elapsed() < Duration::from_secs(5), "{what}");
        assert!(!t.path().join("marker").exists(), "{what}: it ran");
        assert_eq!(
            results(&a),
            [(true, "Operation aborted".to_string())],
            "{what}"
        );
    }
}

/// Handlers that never answer anything.
struct Deaf;
impl Hooks for Deaf {
    fn handles(&self, _event: &str) -> bool {
        true
    }
    fn notify(&self, _ev: Value) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
    fn message_end(&self, _m: AgentMessage) -> BoxFuture<'_, Option<AgentMessage>> {
        Box::pin(std::future::pending())
    }
    fn boundary(&self, _p: Value) -> BoxFuture<'_, BoundaryOutcome> {
        Box::pin(std::future::pending())
    }
    fn before_agent_start(&self, _ev: BeforeAgentStart) -> BoxFuture<'_, BeforeAgentStartOutcome> {
        Box::pin(std::future::pending())
    }
    fn context(&self, _m: Vec<AgentMessage>) -> BoxFuture<'_, Option<Vec<AgentMessage>>> {
        Box::pin(std::future::pending())
    }
}

/// An aborted run winds down in about the grace period however many
/// events a hung extension is sent on the way (each used to cost its full
/// time limit).
#[tokio::test]
async fn an_aborted_run_gives_hung_handlers_one_grace_period_in_all() {
    let t = tempfile::tempdir().unwrap();
    let mut a = agent(t.path(), &[json!({"text": "never"})]);
    a.ext.hooks = Some(Arc::new(Deaf));
    a.cancel.cancel();
    let started = std::time::Instant::now();
    let mut n = 0;
    let mut count = |_: &Event<'_>| n += 1;
    let run = a.run(user("go"), &mut count);
    let out = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the aborted run ends");
    assert!(out.aborted);
    assert!(n > 5, "the run's events still went out ({n})");
    let took = started.elapsed();
    assert!(
        took >= ABORT_GRACE && took < ABORT_GRACE * 3,
        "{took:?} for {n} events"
    );
}

/// Records the delegation each approval request carries.
#[derive(Default)]
struct Seen(Mutex<Vec<(String, Option<Delegation>)>>);
impl Gate for Seen {
    fn approve(&self, req: ApprovalRequest) -> BoxFuture<'_, Approval> {
        self.0.lock().unwrap().push((req.tool_name, req.delegation));
        ready(Approval::Allow)
    }
}

/// A child built with `for_child` passes its parent's whole gate: the
/// hooks block, rewrite and patch; every gate and the final policy hold;
/// the hooks see only the child's tool events, and everything names the
/// child.
#[tokio::test]
async fn a_child_passes_its_parent_s_gate_and_is_named() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let probe = Arc::new(Probe::default());
    let seen = Arc::new(Seen::default());
    let mut parent = AgentExt {
        hooks: Some(probe.clone()),
        ..Default::default()
    };
    parent.limits.gates = vec![seen.clone(), Arc::new(Deny("write"))];
    parent.limits.policy.workspace_paths = true;
    let d = Delegation {
        session_id: "child-1".into(),
        profile: "general-purpose".into(),
        parent_tool_call_id: "call_9".into(),
    };
    let mut a = agent(
        &ws,
        &[
            json!({"toolCalls": [
                {"name": "bash", "arguments": {"command": "touch marker"}},
                {"name": "write", "arguments": {"path": "w.txt", "content": "x"}},
                {"name": "bash", "arguments": {"command": "echo hi"}}
            ]}),
            json!({"text": "done"}),
        ],
    );
    a.ext = parent.for_child(d.clone());
    let out = a.run(user("go"), &mut |_: &Event<'_>| {}).await;
    assert_eq!(out.error, None);
    assert!(!ws.join("marker").exists(), "the hook's block holds");
    assert!(!ws.join("w.txt").exists(), "the gate's block holds");
    assert_eq!(
        results(&a),
        [
            (true, "no touching".to_string()),
            (true, "denied write".to_string()),
            (false, "patched bash".to_string())
        ]
    );
    // Only tool events reach the parent's hooks (no forced prompt, no
    // turns of the child's own).
    let got = probe.seen.lock().unwrap().clone();
    assert!(got.iter().all(|e| e.starts_with("tool_")), "{got:?}");
    assert!(got.contains(&"tool_call bash".to_string()));
    let recorded = serde_json::to_string(&a.store.session.entries).unwrap();
    assert!(!recorded.contains("FORCED"));
    let gated = seen.0.lock().unwrap().clone();
    assert_eq!(gated.len(), 2, "{gated:?}");
    assert!(gated.iter().all(|(_, x)| x.as_ref() == Some(&d)));
    // The limits are the parent's, whole; the parent's late tools are not.
    assert_eq!(a.ext.limits.gates.len(), 2);
    assert!(a.ext.limits.policy.workspace_paths);
    assert!(a.ext.late_tools.is_none());
}
