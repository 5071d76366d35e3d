//! The scripted offline provider (`api: "faux"`): replays assistant turns
//! from a JSONL script, streaming them like a real provider. For tests and
//! demos of the agent loop without a network or a key. Where the script
//! comes from and its format, for users: `docs/faux.md`.
//!
//! # Which turn plays
//!
//! Turn index = number of assistant messages in `req.messages` — stateless,
//! so separate process runs over the same session continue correctly. But
//! the agent drops an errored assistant message from the context before it
//! retries, so a retry would see the same count again and replay the error
//! forever. Hence an in-process counter per script path: when a request
//! arrives with the same assistant count as the previous request for that
//! script, the offset grows by one (the retry gets the next turn); when the
//! count goes down (a new conversation), the offset resets. Index = count +
//! offset. Turns past the end of the script are an error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{apply_cost, empty_message, EventSink, Request, StreamEvent};
use crate::format::message::{AssistantMessage, ThinkingBlock, ToolCallBlock};
use crate::format::{AgentMessage, ContentBlock, Num};

/// Bytes (at most; cut on a char boundary) per streamed delta.
const CHUNK: usize = 8;

/// One scripted assistant turn (one script line).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FauxTurn {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub thinking: Option<String>,
    #[serde(default, rename = "toolCalls")]
    pub tool_calls: Vec<FauxToolCall>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default, rename = "stopReason")]
    pub stop_reason: Option<String>,
    #[serde(default, rename = "delayMs")]
    pub delay_ms: Option<u64>,
    #[serde(default)]
    pub usage: Option<FauxUsage>,
}

/// A scripted tool call.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FauxToolCall {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    #[serde(default)]
    pub id: Option<String>,
}

/// Scripted token counts (missing ones are estimated).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FauxUsage {
    pub input: Option<u64>,
    pub output: Option<u64>,
    #[serde(rename = "cacheRead")]
    pub cache_read: Option<u64>,
    #[serde(rename = "cacheWrite")]
    pub cache_write: Option<u64>,
}

const STOP_REASONS: &[&str] = &["stop", "length", "toolUse", "error", "aborted"];

/// The script path of a faux model: the model's `baseUrl` (a path or a
/// `file://` URL), or its id when `baseUrl` is empty; relative to the cwd.
pub fn script_path(base_url: &str, model_id: &str) -> PathBuf {
    let s = if base_url.is_empty() {
        model_id
    } else {
        base_url
    };
    PathBuf::from(s.strip_prefix("file://").unwrap_or(s))
}

/// Reads and validates a whole script.
pub fn load_script(path: &Path) -> Result<Vec<FauxTurn>, String> {
    // Scripts are test fixtures: 64 MiB is far beyond any, and a FIFO or
    // device given as one is refused instead of hanging the run.
    let text = crate::regular_file::read_config(path, 64 << 20)
        .and_then(|t| t.ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT).into()))
        .map_err(|e| format!("faux script {}: {e}", path.display()))?;
    parse_script(&text, path)
}

/// Parses script text; errors name `path` and the 1-based line.
pub fn parse_script(text: &str, path: &Path) -> Result<Vec<FauxTurn>, String> {
    let mut turns = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("faux script {}:{}", path.display(), i + 1);
        let turn: FauxTurn = serde_json::from_str(line).map_err(|e| format!("{}: {e}", at()))?;
        if let Some(r) = &turn.stop_reason {
            if !STOP_REASONS.contains(&r.as_str()) {
                return Err(format!(
                    "{}: unknown stopReason \"{r}\" (expected one of {})",
                    at(),
                    STOP_REASONS.join(", ")
                ));
            }
        }
        if let Some(tc) = turn.tool_calls.iter().find(|t| t.name.is_empty()) {
            return Err(format!("{}: tool call without a name ({tc:?})", at()));
        }
        turns.push(turn);
    }
    Ok(turns)
}

/// Per script: (assistant count of the last request, offset).
fn counters() -> &'static Mutex<HashMap<PathBuf, (usize, usize)>> {
    static C: OnceLock<Mutex<HashMap<PathBuf, (usize, usize)>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The turn index for a request with `assistants` assistant messages.
fn turn_index(path: &Path, assistants: usize) -> usize {
    let Ok(mut c) = counters().lock() else {
        return assistants;
    };
    let key = path.to_path_buf();
    let offset = match c.get(&key) {
        Some(&(last, off)) if last == assistants => off + 1,
        Some(&(last, off)) if assistants > last => off,
        _ => 0,
    };
    c.insert(key, (assistants, offset));
    assistants + offset
}

fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

fn request_chars(req: &Request) -> usize {
    let mut n = req.system_prompt.as_ref().map_or(0, String::len);
    for m in &req.messages {
        n += m.text().len();
        if let AgentMessage::Assistant(a) = &**m {
            for b in &a.content {
                if let ContentBlock::ToolCall(t) = b {
                    n += t.name.len() + t.arguments.to_string().len();
                }
            }
        }
    }
    for t in &req.tools {
        n += serde_json::to_string(t).map_or(0, |s| s.len());
    }
    n
}

/// Splits `s` into pieces of at most [`CHUNK`] bytes on char boundaries.
fn chunks(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + CHUNK).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}

struct Player<'a, 'b> {
    msg: AssistantMessage,
    sink: EventSink<'b>,
    req: &'a Request<'a>,
}

impl Player<'_, '_> {
    fn emit(&mut self, ev: StreamEvent) {
        (self.sink)(&ev, &self.msg);
    }

    fn cancelled(&self) -> bool {
        self.req.cancel.is_cancelled()
    }

    fn finish_error(mut self, reason: &str, message: String) -> AssistantMessage {
        self.msg.stop_reason = reason.into();
        self.msg.error_message = Some(message);
        self.emit(StreamEvent::Error {
            reason: reason.into(),
        });
        self.msg
    }

    /// Streams a text (`thinking = false`) or thinking block; `false` when
    /// cancelled midway.
    async fn stream_block(&mut self, content: &str, thinking: bool) -> bool {
        let i = self.msg.content.len();
        self.msg.content.push(if thinking {
            ContentBlock::Thinking(ThinkingBlock {
                thinking: String::new(),
                extra: Map::new(),
            })
        } else {
            ContentBlock::text("")
        });
        self.emit(if thinking {
            StreamEvent::ThinkingStart { content_index: i }
        } else {
            StreamEvent::TextStart { content_index: i }
        });
        for piece in chunks(content) {
            tokio::task::yield_now().await;
            if self.cancelled() {
                return false;
            }
            match self.msg.content.get_mut(i) {
                Some(ContentBlock::Thinking(t)) => t.thinking.push_str(piece),
                Some(ContentBlock::Text(t)) => t.text.push_str(piece),
                _ => {}
            }
            self.emit(if thinking {
                StreamEvent::ThinkingDelta {
                    content_index: i,
                    delta: piece.to_string(),
                }
            } else {
                StreamEvent::TextDelta {
                    content_index: i,
                    delta: piece.to_string(),
                }
            });
        }
        self.emit(if thinking {
            StreamEvent::ThinkingEnd {
                content_index: i,
                content: content.to_string(),
            }
        } else {
            StreamEvent::TextEnd {
                content_index: i,
                content: content.to_string(),
            }
        });
        true
    }

    async fn stream_tool(&mut self, id: String, call: &FauxToolCall) -> bool {
        let i = self.msg.content.len();
        let args = Value::Object(call.arguments.clone().unwrap_or_default());
        let raw = args.to_string();
        self.msg.content.push(ContentBlock::ToolCall(ToolCallBlock {
            id: id.clone(),
            name: call.name.clone(),
            arguments: Value::Object(Map::new()),
            extra: Map::new(),
        }));
        self.emit(StreamEvent::ToolCallStart {
            content_index: i,
            id,
            tool_name: call.name.clone(),
        });
        let mut sent = String::new();
        for piece in chunks(&raw) {
            tokio::task::yield_now().await;
            if self.cancelled() {
                return false;
            }
            sent.push_str(piece);
            if let Some(ContentBlock::ToolCall(t)) = self.msg.content.get_mut(i) {
                // Partial arguments: what parses so far (complete at the end).
                if let Ok(v) = serde_json::from_str::<Value>(&sent) {
                    t.arguments = v;
                }
            }
            self.emit(StreamEvent::ToolCallDelta {
                content_index: i,
                delta: piece.to_string(),
            });
        }
        let tool_call = match self.msg.content.get_mut(i) {
            Some(ContentBlock::ToolCall(t)) => {
                t.arguments = args;
                t.clone()
            }
            _ => return true,
        };
        self.emit(StreamEvent::ToolCallEnd {
            content_index: i,
            tool_call,
        });
        true
    }
}

/// Streams one scripted assistant turn (its fields: docs/faux.md).
pub async fn stream(req: Request<'_>, on_event: EventSink<'_>) -> AssistantMessage {
    let path = script_path(&req.model.base_url, &req.model.id);
    let mut p = Player {
        msg: empty_message(&req.model),
        sink: on_event,
        req: &req,
    };
    let turns = match load_script(&path) {
        Ok(t) => t,
        Err(e) => return p.finish_error("error", e),
    };
    let assistants = req
        .messages
        .iter()
        .filter(|m| matches!(***m, AgentMessage::Assistant(_)))
        .count();
    let index = turn_index(&path, assistants);
    let Some(turn) = turns.get(index).cloned() else {
        return p.finish_error(
            "error",
            format!(
                "faux script {} has no turn {} (it has {}; the context holds {assistants} assistant messages)",
                path.display(),
                index + 1,
                turns.len()
            ),
        );
    };
    if let Some(ms) = turn.delay_ms.filter(|&ms| ms > 0) {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
            _ = req.cancel.cancelled() => {
                return p.finish_error("aborted", "Request was aborted".into());
            }
        }
    }
    if p.cancelled() {
        return p.finish_error("aborted", "Request was aborted".into());
    }
    p.emit(StreamEvent::Start);
    let mut ok = true;
    if let Some(t) = turn.thinking.as_deref() {
        ok = ok && p.stream_block(t, true).await;
    }
    if let Some(t) = turn.text.as_deref() {
        ok = ok && p.stream_block(t, false).await;
    }
    for (n, call) in turn.tool_calls.iter().enumerate() {
        if !ok {
            break;
        }
        let id = call
            .id
            .clone()
            .unwrap_or_else(|| format!("faux_{}_{}", index + 1, n + 1));
        ok = p.stream_tool(id, call).await;
    }
    // Usage, scripted or estimated.
    let out_chars = turn.thinking.as_ref().map_or(0, String::len)
        + turn.text.as_ref().map_or(0, String::len)
        + turn
            .tool_calls
            .iter()
            .map(|c| {
                c.name.len()
                    + c.arguments
                        .as_ref()
                        .map_or(2, |a| Value::Object(a.clone()).to_string().len())
            })
            .sum::<usize>();
    let u = turn.usage.clone().unwrap_or_default();
    let input = u
        .input
        .unwrap_or_else(|| estimate_tokens(request_chars(&req)));
    let output = u.output.unwrap_or_else(|| estimate_tokens(out_chars));
    let cache_read = u.cache_read.unwrap_or(0);
    let cache_write = u.cache_write.unwrap_or(0);
    let usage = &mut p.msg.usage;
    usage.input = Num::int(input);
    usage.output = Num::int(output);
    usage.cache_read = Num::int(cache_read);
    usage.cache_write = Num::int(cache_write);
    usage.total_tokens = Num::int(input + output + cache_read + cache_write);
    apply_cost(&req.model, usage);

    if !ok {
        return p.finish_error("aborted", "Request was aborted".into());
    }
    let reason = match (&turn.error, turn.stop_reason.as_deref()) {
        (Some(_), r) => r.filter(|r| *r == "aborted").unwrap_or("error"),
        (None, Some(r)) => r,
        (None, None) if !turn.tool_calls.is_empty() => "toolUse",
        (None, None) => "stop",
    };
    if reason == "error" || reason == "aborted" {
        let message = turn
            .error
            .clone()
            .unwrap_or_else(|| format!("faux script {}: scripted {reason}", path.display()));
        return p.finish_error(reason, message);
    }
    p.msg.stop_reason = reason.into();
    p.emit(StreamEvent::Done {
        reason: reason.into(),
    });
    p.msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::model::{Model, ModelCost, ThinkingLevel};
    use tokio_util::sync::CancellationToken;

    fn model(path: &Path) -> Model {
        Model {
            id: "faux".into(),
            name: "faux".into(),
            api: "faux".into(),
            provider: "faux".into(),
            base_url: format!("file://{}", path.display()),
            reasoning: true,
            input: vec!["text".into()],
            cost: ModelCost {
                input: 1.0,
                output: 2.0,
                cache_read: 0.0,
                cache_write: 0.0,
            },
            context_window: 128000,
            max_tokens: 16384,
            headers: None,
            compat: None,
        }
    }

    fn request(path: &Path, messages: Vec<AgentMessage>) -> Request<'static> {
        Request {
            model: model(path),
            system_prompt: Some("sys".into()),
            messages: messages.into_iter().map(Into::into).collect(),
            tools: Vec::new(),
            api_key: None,
            thinking: ThinkingLevel::Medium,
            max_tokens: None,
            headers: Vec::new(),
            idle_timeout: Duration::from_secs(5),
            cancel: CancellationToken::new(),
            session_id: None,
            response_schema: None,
        }
    }

    fn script(lines: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("script.jsonl");
        std::fs::write(&p, lines).expect("write");
        (d, p)
    }

    async fn run(req: Request<'_>) -> (AssistantMessage, Vec<StreamEvent>) {
        let mut events = Vec::new();
        let mut sink = |e: &StreamEvent, _: &AssistantMessage| events.push(e.clone());
        let m = stream(req, &mut sink).await;
        (m, events)
    }

    fn assistant(m: AssistantMessage) -> AgentMessage {
        AgentMessage::Assistant(Box::new(m))
    }

    #[tokio::test]
    async fn streams_thinking_text_and_tool_calls() {
        let (_d, p) = script(
            "{\"thinking\":\"hmm, let me see\",\"text\":\"Reading the file now.\",\"toolCalls\":[{\"name\":\"read\",\"arguments\":{\"path\":\"a.txt\"}}],\"usage\":{\"input\":1000,\"output\":500}}\n",
        );
        let (m, ev) = run(request(&p, Vec::new())).await;
        let kinds: Vec<&str> = ev.iter().map(StreamEvent::kind).collect();
        assert_eq!(kinds.first(), Some(&"start"));
        assert_eq!(kinds.last(), Some(&"done"));
        assert!(kinds.iter().filter(|k| **k == "text_delta").count() >= 3);
        assert!(kinds.contains(&"toolcall_delta"));
        assert_eq!(m.stop_reason, "toolUse");
        assert_eq!(m.content.len(), 3);
        match &m.content[2] {
            ContentBlock::ToolCall(t) => {
                assert_eq!(t.id, "faux_1_1");
                assert_eq!(t.arguments["path"], "a.txt");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(m.usage.cost.total.as_f64(), 0.002);
        if let Some(StreamEvent::ToolCallEnd { tool_call, .. }) =
            ev.iter().find(|e| e.kind() == "toolcall_end")
        {
            assert_eq!(tool_call.arguments["path"], "a.txt");
        } else {
            panic!("no toolcall_end");
        }
    }

    #[tokio::test]
    async fn turn_follows_assistant_count_and_retries_advance() {
        let (_d, p) =
            script("{\"text\":\"one\"}\n\n{\"error\":\"overloaded\"}\n{\"text\":\"three\"}\n");
        let (m1, _) = run(request(&p, Vec::new())).await;
        assert_eq!(crate::format::message::blocks_text(&m1.content, ""), "one");
        let ctx = vec![assistant(m1.clone())];
        let (m2, ev) = run(request(&p, ctx.clone())).await;
        assert_eq!(
            (m2.stop_reason.as_str(), m2.error_message.as_deref()),
            ("error", Some("overloaded"))
        );
        assert_eq!(ev.last().map(StreamEvent::kind), Some("error"));
        // The retry: the errored message was dropped, same count → next turn.
        let (m3, _) = run(request(&p, ctx)).await;
        assert_eq!(
            crate::format::message::blocks_text(&m3.content, ""),
            "three"
        );
        // A new conversation starts over.
        let (m4, _) = run(request(&p, Vec::new())).await;
        assert_eq!(crate::format::message::blocks_text(&m4.content, ""), "one");
        // Past the end.
        let ctx = vec![assistant(m1.clone()), assistant(m1.clone()), assistant(m1)];
        let (m5, _) = run(request(&p, ctx)).await;
        assert!(m5
            .error_message
            .unwrap_or_default()
            .contains("has no turn 4"));
    }

    #[tokio::test]
    async fn delay_honours_cancel() {
        let (_d, p) = script("{\"text\":\"late\",\"delayMs\":10000}\n");
        let req = request(&p, Vec::new());
        let cancel = req.cancel.clone();
        let ((m, ev), ()) = tokio::join!(run(req), async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            cancel.cancel();
        });
        assert_eq!(m.stop_reason, "aborted");
        assert_eq!(m.error_message.as_deref(), Some("Request was aborted"));
        assert_eq!(ev.len(), 1);
    }

    #[tokio::test]
    async fn bad_lines_name_path_and_line() {
        let (_d, p) = script("{\"text\":\"ok\"}\n{\"txet\":\"typo\"}\n");
        let (m, _) = run(request(&p, Vec::new())).await;
        let e = m.error_message.unwrap_or_default();
        assert!(
            e.starts_with(&format!(
                "faux script {}:2: unknown field `txet`",
                p.display()
            )),
            "{e}"
        );
        let e = parse_script("{\"stopReason\":\"nope\"}", Path::new("s.jsonl")).expect_err("bad");
        assert!(
            e.starts_with("faux script s.jsonl:1: unknown stopReason"),
            "{e}"
        );
        let (m, _) = run(request(Path::new("/nonexistent/s.jsonl"), Vec::new())).await;
        assert!(m
            .error_message
            .unwrap_or_default()
            .starts_with("faux script /nonexistent/s.jsonl:"));
    }

    #[tokio::test]
    async fn length_and_estimated_usage() {
        let (_d, p) = script("{\"text\":\"cut sh\",\"stopReason\":\"length\"}\n");
        let (m, _) = run(request(&p, Vec::new())).await;
        assert_eq!(m.stop_reason, "length");
        assert_eq!(m.usage.output.as_u64(), 2);
        assert_eq!(m.usage.input.as_u64(), 1);
    }

    #[test]
    fn script_path_rules() {
        assert_eq!(
            script_path("file:///a/b.jsonl", "x"),
            PathBuf::from("/a/b.jsonl")
        );
        assert_eq!(
            script_path("rel/s.jsonl", "x"),
            PathBuf::from("rel/s.jsonl")
        );
        assert_eq!(script_path("", "/m/s.jsonl"), PathBuf::from("/m/s.jsonl"));
    }
}
