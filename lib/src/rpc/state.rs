//! What the read commands answer, from the library's own types: the models
//! and thinking levels on offer, `get_commands`' list (extension commands,
//! templates, skills, the built-in `/mcp`), the session tree and its
//! statistics, the last assistant text; and the global `settings.json`
//! writes pi persists for queue modes and the compaction and retry
//! switches.

use serde_json::{json, Map, Value};

use crate::agent::Agent;
use crate::format::model::ThinkingLevel;
use crate::format::rpc::{RpcCommand, RpcContextUsage, RpcSessionStats, RpcTokens};
use crate::format::{AgentMessage, Entry};
use crate::model::ModelRegistry;
use crate::session::store::SessionStore;

pub(super) fn models(
    registry: Option<&ModelRegistry>,
    agent: &Agent,
) -> Vec<crate::format::model::Model> {
    match registry {
        Some(r) => r.available().into_iter().cloned().collect(),
        None => vec![agent.opts.model.clone()],
    }
}

pub(super) fn thinking_map(
    registry: Option<&ModelRegistry>,
    agent: &Agent,
) -> Option<Map<String, Value>> {
    registry.and_then(|r| r.thinking_level_map(&agent.opts.model).cloned())
}

pub(super) fn levels(registry: Option<&ModelRegistry>, agent: &Agent) -> Vec<ThinkingLevel> {
    let map = thinking_map(registry, agent);
    if !agent.opts.model.reasoning {
        return vec![ThinkingLevel::Off];
    }
    ThinkingLevel::ALL
        .into_iter()
        .filter(|&l| crate::model::select::clamp_thinking(&agent.opts.model, map.as_ref(), l) == l)
        .collect()
}

/// The commands that only read the agent's state and answer the same
/// idle or mid-run (pi answers them at once while a run streams); `None`
/// for every other command.
pub(crate) fn read_answer(
    registry: Option<&ModelRegistry>,
    agent: &Agent,
    cmd: &RpcCommand,
) -> Option<Result<Option<Value>, String>> {
    Some(match cmd {
        RpcCommand::GetAvailableModels => {
            let models: Vec<Value> = models(registry, agent)
                .iter()
                .filter_map(|m| match registry.and_then(|r| r.pi_json(m)) {
                    Some(raw) => Some(Value::Object(raw)),
                    None => serde_json::to_value(m).ok(),
                })
                .collect();
            Ok(Some(json!({ "models": models })))
        }
        RpcCommand::GetAvailableThinkingLevels => {
            let levels: Vec<&str> = levels(registry, agent).iter().map(|l| l.as_str()).collect();
            Ok(Some(json!({ "levels": levels })))
        }
        RpcCommand::GetEntries { since } => {
            let entries = &agent.store.session.entries;
            let start = match since {
                None => Some(0),
                Some(id) => entries
                    .iter()
                    .position(|e| e.id() == id.as_str())
                    .map(|p| p + 1),
            };
            match start {
                Some(start) => Ok(Some(json!({
                    "entries": &entries[start..],
                    "leafId": agent.store.session.leaf_id(),
                }))),
                None => Err(format!(
                    "Entry not found: {}",
                    since.as_deref().unwrap_or("")
                )),
            }
        }
        RpcCommand::GetTree => Ok(Some(tree(&agent.store))),
        RpcCommand::GetForkMessages => {
            let msgs: Vec<Value> = agent
                .store
                .session
                .entries
                .iter()
                .filter_map(|e| match (e, e.message()) {
                    (Entry::Message(m), Some(AgentMessage::User(u))) => {
                        Some(json!({"entryId": m.id, "text": u.content.joined_text("")}))
                    }
                    _ => None,
                })
                .collect();
            Ok(Some(json!({ "messages": msgs })))
        }
        RpcCommand::GetSessionStats => Ok(serde_json::to_value(stats(agent)).ok()),
        _ => return None,
    })
}

/// `get_last_assistant_text` over the context's messages: the last
/// assistant text, skipping blank ones that did not stop normally; `{}`
/// when there is none.
pub(super) fn last_assistant_text<'a>(
    messages: impl DoubleEndedIterator<Item = &'a AgentMessage>,
) -> Value {
    for m in messages.rev() {
        if let AgentMessage::Assistant(a) = m {
            let text = crate::format::message::blocks_text(&a.content, "");
            if text.trim().is_empty() && a.stop_reason != "stop" {
                continue;
            }
            return json!({ "text": text });
        }
    }
    json!({})
}

/// The `get_commands` entry of pi's built-in `/mcp` command (listed after
/// the extensions' commands while MCP is on; [`crate::mcp::status`]
/// answers it).
pub fn builtin_mcp_command() -> Value {
    json!({
        "name": crate::mcp::status::COMMAND_NAME,
        "description": crate::mcp::status::COMMAND_DESCRIPTION,
        "source": "extension",
        "sourceInfo": {"path": "builtin:mcp", "source": "builtin", "scope": "temporary", "origin": "top-level"},
    })
}

/// `get_commands`' list: extension commands, then prompt templates, then
/// skills as `skill:<name>`, each with pi's `sourceInfo`.
pub fn command_list(
    ext_commands: &[(String, crate::format::extension::CommandSpec)],
    resources: &crate::resources::Resources,
) -> Vec<Value> {
    let info =
        |path: &std::path::Path, source: &Value, scope: &Value, base: Option<&std::path::Path>| {
            let mut m = Map::new();
            m.insert("path".into(), path.display().to_string().into());
            m.insert("source".into(), source.clone());
            m.insert("scope".into(), scope.clone());
            m.insert("origin".into(), "top-level".into());
            if let Some(b) = base {
                m.insert("baseDir".into(), b.display().to_string().into());
            }
            Value::Object(m)
        };
    // pi names auto-discovered resources (the project's `.pi/` and the
    // agent dir) `auto`, with the folder holding `prompts/` or `skills/`
    // as `baseDir` (observed); other origins keep this toolkit's name.
    let origin = |source: crate::format::resources::Source, path: &std::path::Path, dir: &str| {
        use crate::format::resources::Source;
        match source {
            Source::Project | Source::User => {
                let base = path
                    .ancestors()
                    .find(|a| a.file_name().is_some_and(|n| n == dir))
                    .and_then(|a| a.parent())
                    .map(std::path::Path::to_path_buf);
                (Value::String("auto".into()), base)
            }
            other => (
                serde_json::to_value(other).unwrap_or(Value::Null),
                path.parent().map(std::path::Path::to_path_buf),
            ),
        }
    };
    // An extension's command: `-e` ones are pi's `cli`/`temporary` without
    // a `baseDir` (capture 06, 09); discovered ones as the resources above.
    let ext_info = |path: &std::path::Path| {
        use crate::format::resources::Source;
        let found = resources
            .extensions
            .iter()
            .find(|e| path == e.path || path.starts_with(&e.path));
        match found {
            Some(e) if matches!(e.source, Source::Project | Source::User) => {
                let (src, base) = origin(e.source, path, "extensions");
                let scope = serde_json::to_value(e.scope).unwrap_or(Value::Null);
                info(path, &src, &scope, base.as_deref())
            }
            _ => info(path, &"cli".into(), &"temporary".into(), None),
        }
    };
    let mut out = Vec::new();
    for (path, c) in ext_commands {
        let mut m = Map::new();
        m.insert("name".into(), c.name.clone().into());
        if let Some(d) = &c.description {
            m.insert("description".into(), d.clone().into());
        }
        m.insert("source".into(), "extension".into());
        m.insert("sourceInfo".into(), ext_info(std::path::Path::new(path)));
        out.push(Value::Object(m));
    }
    for t in &resources.prompts {
        let (src, base) = origin(t.source, &t.path, "prompts");
        let scope = serde_json::to_value(t.scope).unwrap_or(Value::Null);
        let mut m = Map::new();
        m.insert("name".into(), t.name.clone().into());
        if !t.description.is_empty() {
            m.insert("description".into(), t.description.clone().into());
        }
        m.insert("source".into(), "prompt".into());
        m.insert(
            "sourceInfo".into(),
            info(&t.path, &src, &scope, base.as_deref()),
        );
        out.push(Value::Object(m));
    }
    for sk in &resources.skills {
        let (src, base) = origin(sk.source, &sk.path, "skills");
        let scope = serde_json::to_value(sk.scope).unwrap_or(Value::Null);
        let mut m = Map::new();
        m.insert("name".into(), format!("skill:{}", sk.name).into());
        if !sk.description.is_empty() {
            m.insert("description".into(), sk.description.clone().into());
        }
        m.insert("source".into(), "skill".into());
        m.insert(
            "sourceInfo".into(),
            info(&sk.path, &src, &scope, base.as_deref()),
        );
        out.push(Value::Object(m));
    }
    out
}

/// `get_tree`: `{tree:[{entry, children, label?}], leafId}`.
fn tree(store: &SessionStore) -> Value {
    let s = &store.session;
    let (roots, kids) = s.children();
    let labels = s.labels();
    fn node(
        s: &crate::session::Session,
        kids: &crate::session::tree::Children,
        labels: &std::collections::HashMap<String, String>,
        i: usize,
    ) -> Value {
        let e = &s.entries[i];
        let mut m = Map::new();
        m.insert(
            "entry".into(),
            serde_json::to_value(e).unwrap_or(Value::Null),
        );
        let children: Vec<Value> = kids
            .of(i)
            .iter()
            .map(|&c| node(s, kids, labels, c as usize))
            .collect();
        m.insert("children".into(), Value::Array(children));
        if let Some(l) = labels.get(e.id()) {
            m.insert("label".into(), Value::String(l.clone()));
        }
        Value::Object(m)
    }
    let tree: Vec<Value> = roots.iter().map(|&r| node(s, &kids, &labels, r)).collect();
    json!({ "tree": tree, "leafId": s.leaf_id() })
}

/// `get_session_stats`: every entry of the file counts; the context usage
/// is the last answered request's tokens on the branch (none after a
/// compaction).
fn stats(agent: &Agent) -> RpcSessionStats {
    let st = agent.store.session.stats();
    let count = |r: &str| st.messages.get(r).copied().unwrap_or(0);
    let ctx = agent.store.session.context(None);
    // The last valid usage plus an estimate of what came after it (pi:
    // mid-run the prompt's user message counts).
    let mut tokens = None;
    let mut after = 0u64;
    for (_, m) in ctx.messages.iter().rev() {
        match &**m {
            AgentMessage::Assistant(a)
                if a.stop_reason != "error" && a.stop_reason != "aborted" =>
            {
                let u = &a.usage;
                let t = u.total_tokens.as_u64();
                tokens = Some(if t > 0 {
                    t
                } else {
                    u.input.as_u64()
                        + u.output.as_u64()
                        + u.cache_read.as_u64()
                        + u.cache_write.as_u64()
                });
                break;
            }
            other => after += crate::session::compact::estimate_tokens(other),
        }
    }
    let tokens = tokens.map(|t| t + after);
    let compacted = agent.store.session.projection(None).usage_is_stale();
    let window = agent.opts.model.context_window;
    let context_usage = if window == 0 {
        None
    } else if compacted {
        Some(RpcContextUsage {
            tokens: None,
            context_window: window,
            percent: None,
        })
    } else {
        let t = tokens.unwrap_or(0);
        Some(RpcContextUsage {
            tokens: Some(t),
            context_window: window,
            percent: Some(t as f64 / window as f64 * 100.0),
        })
    };
    RpcSessionStats {
        session_file: agent.store.path().map(|p| p.display().to_string()),
        session_id: agent.store.session.id().to_string(),
        user_messages: count("user"),
        assistant_messages: count("assistant"),
        tool_calls: st.tool_calls,
        tool_results: count("toolResult"),
        total_messages: st.messages.values().sum(),
        tokens: RpcTokens {
            input: st.total.input,
            output: st.total.output,
            cache_read: st.total.cache_read,
            cache_write: st.total.cache_write,
            total: st.total.total_tokens,
        },
        cost: st.total.cost,
        context_usage,
    }
}

/// Sets `path` in the global `settings.json` (created when missing), as
/// pi persists queue modes and the auto-compaction/retry switches. A file
/// that does not parse is left alone and named in the error.
pub fn persist_setting(
    agent_dir: &std::path::Path,
    path: &[&str],
    value: Value,
) -> Result<(), String> {
    let file = agent_dir.join("settings.json");
    let mut root = if file.exists() {
        crate::settings::read_file(&file).map_err(|e| e.to_string())?
    } else {
        Map::new()
    };
    let mut cur = &mut root;
    for (i, k) in path.iter().enumerate() {
        if i + 1 == path.len() {
            cur.insert((*k).to_string(), value);
            break;
        }
        let slot = cur
            .entry((*k).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(next) = slot else {
            return Ok(());
        };
        cur = next;
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(root))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    text.push('\n');
    std::fs::create_dir_all(agent_dir).map_err(|e| format!("{}: {e}", agent_dir.display()))?;
    crate::atomic_file::write_atomic(&file, text.as_bytes(), true)
        .map_err(|e| format!("{}: {e}", file.display()))
}
