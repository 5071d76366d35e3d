//! Reading child runs back from session files (pi-web's `readSubagentRun`):
//! a child is a session whose first `pi-web:subagent` entry (version 1)
//! names its parent; its status is the last `pi-web:subagent-status` or
//! `pi-web:subagent-result` entry. Used by `pi-session agents` and to mark
//! children in listings; works on files pi-web wrote as well.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::tools::RunStatus;
use crate::format::Entry;
use crate::session::Session;

/// A child run as its session file records it.
#[derive(Debug, Clone, PartialEq)]
pub struct PersistedRun {
    pub session_id: String,
    pub session_path: PathBuf,
    pub parent_session_id: String,
    pub parent_session_path: String,
    pub parent_tool_call_id: String,
    pub profile: String,
    pub description: String,
    pub task: String,
    pub run_in_background: bool,
    pub status: RunStatus,
    pub created_at: String,
    pub completed_at: Option<String>,
    pub result: Option<String>,
    pub error: Option<String>,
    pub worktree_path: Option<String>,
    pub worktree_branch: Option<String>,
    pub worktree_cleanup_error: Option<String>,
    /// Set when the child's branch was deleted with its worktree.
    pub worktree_branch_removed: bool,
    /// Who runs it, when its last record is a `queued`/`running` status
    /// entry that says so.
    pub owner: Option<Owner>,
}

impl PersistedRun {
    /// A `queued` or `running` record whose process has provably ended
    /// (see [`Owner::ended`]): it will never finish.
    pub fn stale(&self) -> bool {
        matches!(
            self.status,
            RunStatus::Queued | RunStatus::Running | RunStatus::Starting
        ) && self.owner.as_ref().is_some_and(Owner::ended)
    }
}

/// The process that runs a child, as its `queued`/`running` status entries
/// name it: `pid` and `host`, the toolkit's addition to pi-web's `{version,
/// status}` (pi-web reads neither), so a later reader can tell a child
/// whose process is gone.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    pub pid: u32,
    pub host: String,
}

impl Owner {
    /// This process.
    pub fn this_process() -> Owner {
        Owner {
            pid: std::process::id(),
            host: hostname(),
        }
    }

    /// Adds `pid` and `host` to a status entry's data.
    pub fn mark(&self, data: &mut Value) {
        if let Some(m) = data.as_object_mut() {
            m.insert("pid".into(), self.pid.into());
            m.insert("host".into(), self.host.clone().into());
        }
    }

    fn read(data: &Value) -> Option<Owner> {
        Some(Owner {
            pid: u32::try_from(data.get("pid")?.as_u64()?).ok()?,
            host: data.get("host")?.as_str()?.to_string(),
        })
    }

    /// Whether the process has provably ended: it ran on this host and no
    /// process has its pid now. Anything else (another host, a pid in use
    /// again, this very process) counts as alive, so a record is never
    /// closed under a child that still runs.
    pub fn ended(&self) -> bool {
        if self.host != hostname() || self.pid == std::process::id() || self.pid == 0 {
            return false;
        }
        let Ok(pid) = i32::try_from(self.pid) else {
            return false;
        };
        // SAFETY: kill(2) with signal 0 sends nothing; it only asks whether
        // the process exists.
        let r = unsafe { libc::kill(pid, 0) };
        r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
}

/// This machine's name (empty when it cannot be read).
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `buf.len()` bytes into `buf`.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return String::new();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn custom<'a>(e: &'a Entry, ty: &str) -> Option<&'a Value> {
    match e {
        Entry::Custom(c) if c.custom_type == ty => Some(c.data.as_ref().unwrap_or(&Value::Null)),
        _ => None,
    }
}

fn string(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

/// The run a session records, or `None` when it is not a child.
pub fn read_run(s: &Session) -> Option<PersistedRun> {
    let meta = metadata(s)?;
    let parent_session_id = string(meta, "parentSessionId")?;
    let parent_session_path = string(meta, "parentSessionPath")?;
    let last = s.entries.iter().rev().find_map(|e| {
        custom(e, "pi-web:subagent-status")
            .map(|v| (false, v))
            .or_else(|| custom(e, "pi-web:subagent-result").map(|v| (true, v)))
    });
    let parse = |v: &Value| {
        v.get("status")
            .cloned()
            .and_then(|s| serde_json::from_value::<RunStatus>(s).ok())
    };
    let (status, result) = match last {
        Some((true, v)) => match parse(v) {
            Some(st @ (RunStatus::Completed | RunStatus::Failed | RunStatus::Aborted)) => {
                (st, Some(v))
            }
            _ => (RunStatus::Interrupted, None),
        },
        Some((false, v)) if v.get("version") == Some(&Value::from(1)) => match parse(v) {
            Some(st @ (RunStatus::Queued | RunStatus::Running)) => (st, None),
            _ => (RunStatus::Interrupted, None),
        },
        _ => (RunStatus::Interrupted, None),
    };
    let from_result = |k: &str| result.and_then(|r| string(r, k));
    let owner = match last {
        Some((false, v)) => Owner::read(v),
        _ => None,
    };
    Some(PersistedRun {
        session_id: s.id().to_string(),
        session_path: s.path.clone(),
        parent_session_id,
        parent_session_path,
        parent_tool_call_id: string(meta, "parentToolCallId").unwrap_or_default(),
        profile: string(meta, "profile").unwrap_or_else(|| "general-purpose".into()),
        description: string(meta, "description").unwrap_or_else(|| "Subagent".into()),
        task: string(meta, "task").unwrap_or_default(),
        run_in_background: meta.get("runInBackground") == Some(&Value::Bool(true)),
        status,
        created_at: string(meta, "createdAt").unwrap_or_default(),
        completed_at: from_result("completedAt"),
        result: from_result("result"),
        error: from_result("error"),
        worktree_path: string(meta, "worktreePath"),
        worktree_branch: string(meta, "worktreeBranch"),
        worktree_cleanup_error: from_result("worktreeCleanupError"),
        worktree_branch_removed: result
            .is_some_and(|r| r.get("worktreeBranchRemoved") == Some(&Value::Bool(true))),
        owner,
    })
}

/// A child's `resourceSnapshot` (what its session was built from), when
/// valid: version 1, `appendSystemPrompt` all strings, and every tool a
/// non-empty name that is no control tool and is a built-in unless the
/// child loads extensions. One bad item invalidates the whole snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub append_system_prompt: Vec<String>,
    pub tools: Vec<String>,
    pub load_skills: bool,
    pub load_extensions: bool,
    pub exact_system_prompt: Option<String>,
}

/// The child an entry of a parent names: an `Agent` tool result or a
/// background completion, whose details are `kind: "pi-web-subagent"`.
pub fn child_named_by(e: &Entry) -> Option<String> {
    let details = match e {
        Entry::Message(m) => match &m.message {
            crate::format::AgentMessage::ToolResult(t) => t.details.as_ref(),
            _ => None,
        },
        Entry::CustomMessage(c) => c.details.as_ref(),
        _ => None,
    }?;
    if details.get("kind").and_then(Value::as_str) != Some("pi-web-subagent") {
        return None;
    }
    details
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The child's metadata entry (the first `pi-web:subagent`, version 1).
pub fn metadata(s: &Session) -> Option<&Value> {
    s.entries
        .iter()
        .find_map(|e| custom(e, "pi-web:subagent"))
        .filter(|m| m.get("version") == Some(&Value::from(1)))
}

/// The validated snapshot of a child's metadata (pi-web's
/// `readSubagentSessionResources`), `None` when absent or invalid.
pub fn read_snapshot(meta: &Value) -> Option<Snapshot> {
    let snap = meta.get("resourceSnapshot")?;
    if snap.get("version") != Some(&Value::from(1)) {
        return None;
    }
    let append = snap
        .get("appendSystemPrompt")?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()?;
    let load_skills = snap.get("loadSkills") == Some(&Value::Bool(true));
    let load_extensions = snap.get("loadExtensions") == Some(&Value::Bool(true));
    let mut tools: Vec<String> = Vec::new();
    for t in snap.get("tools")?.as_array()? {
        let t = t.as_str().filter(|t| !t.is_empty())?;
        if super::is_control_tool(t)
            || !(load_extensions || crate::tools::BUILTIN_TOOLS.contains(&t))
        {
            return None;
        }
        if !tools.iter().any(|x| x == t) {
            tools.push(t.to_string());
        }
    }
    Some(Snapshot {
        append_system_prompt: append,
        tools,
        load_skills,
        load_extensions,
        exact_system_prompt: snap
            .get("exactSystemPrompt")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The session file of child `id` in `dir` (pi's `<ts>_<id>.jsonl` names).
pub fn find_in_dir(dir: &Path, id: &str) -> Option<PathBuf> {
    if id.is_empty() || id.contains(['/', '\\']) {
        return None;
    }
    let suffix = format!("_{id}.jsonl");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix))
        })
}

impl Snapshot {
    /// The snapshot as stored in the metadata entry (pi-web's key order).
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("version".into(), Value::from(1));
        m.insert(
            "appendSystemPrompt".into(),
            Value::from(self.append_system_prompt.clone()),
        );
        m.insert("tools".into(), Value::from(self.tools.clone()));
        m.insert("loadSkills".into(), Value::Bool(self.load_skills));
        m.insert("loadExtensions".into(), Value::Bool(self.load_extensions));
        if let Some(p) = &self.exact_system_prompt {
            m.insert("exactSystemPrompt".into(), Value::from(p.clone()));
        }
        Value::Object(m)
    }
}

/// A persisted run as the tools report it. `live` says whether a process
/// still runs it; when not, a `queued` or `running` record reads as
/// `interrupted` (the process that ran it is gone).
pub fn live_view(r: &PersistedRun, live: bool) -> super::tools::RunInfo {
    let status = match r.status {
        RunStatus::Queued | RunStatus::Running | RunStatus::Starting if !live => {
            RunStatus::Interrupted
        }
        s => s,
    };
    super::tools::RunInfo {
        session_id: r.session_id.clone(),
        profile: r.profile.clone(),
        description: r.description.clone(),
        status,
        run_in_background: r.run_in_background,
        created_at: r.created_at.clone(),
        completed_at: r.completed_at.clone(),
        result: r.result.clone(),
        error: r.error.clone(),
        worktree_path: r.worktree_path.clone(),
        worktree_branch: r.worktree_branch.clone(),
        worktree_cleanup_error: r.worktree_cleanup_error.clone(),
        worktree_branch_removed: r.worktree_branch_removed,
    }
}

/// Whether a file's first lines look like a child of `parent` (its header's
/// `parentSession`, a `pi-web:subagent` entry soon after): a cheap filter
/// before loading the whole file.
pub fn looks_like_child_of(path: &Path, parent: &Path) -> bool {
    let Ok((file, _)) = crate::regular_file::open(path) else {
        return false;
    };
    let mut lines = std::io::BufReader::new(file).lines();
    let Some(Ok(header)) = lines.next() else {
        return false;
    };
    let Ok(h) = serde_json::from_str::<Value>(&header) else {
        return false;
    };
    let parent_text = parent.display().to_string();
    if h.get("parentSession").and_then(Value::as_str) != Some(parent_text.as_str()) {
        return false;
    }
    lines
        .take(4)
        .map_while(Result::ok)
        .any(|l| l.contains("\"pi-web:subagent\""))
}

/// The child runs of `parent` among `files`, oldest first.
pub fn children_of(parent: &Session, files: &[PathBuf]) -> Vec<(PersistedRun, Session)> {
    let mut out: Vec<(PersistedRun, Session)> = files
        .iter()
        .filter(|f| **f != parent.path && looks_like_child_of(f, &parent.path))
        .filter_map(|f| Session::load(f).ok())
        .filter_map(|s| {
            read_run(&s)
                .filter(|r| r.parent_session_id == parent.id())
                .map(|r| (r, s))
        })
        .collect();
    out.sort_by(|a, b| a.0.created_at.cmp(&b.0.created_at));
    out
}

/// Milliseconds between two ISO timestamps, when both parse.
pub fn duration_ms(from: &str, to: &str) -> Option<i64> {
    let a = crate::timefmt::parse_iso_ms(from)?;
    let b = crate::timefmt::parse_iso_ms(to)?;
    Some(b - a)
}

/// A `pi-web:subagent-status` entry's data, naming this process as the
/// one that runs the child (see [`Owner`]).
pub(super) fn status_data(status: &str) -> Value {
    let mut data = serde_json::json!({"version": 1, "status": status});
    Owner::this_process().mark(&mut data);
    data
}

/// Closes the record of a child whose process has ended (it would read
/// `queued` or `running` for ever): a `pi-web:subagent-result` entry with
/// status `interrupted`, which pi-web and [`read_run`] read as such.
pub(super) fn close_stale(session: crate::session::Session) -> crate::session::Session {
    let mut store = crate::session::store::SessionStore::open(session);
    let e = store.session.new_custom(
        store.session.leaf_id(),
        "pi-web:subagent-result",
        serde_json::json!({"version": 1, "status": "interrupted", "completedAt": crate::timefmt::now_iso()}),
    );
    let _ = store.append_ref(e);
    store.session
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(entries: &[Value]) -> (tempfile::TempDir, Session) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("child.jsonl");
        let mut lines = vec![json_line(&serde_json::json!({
            "type": "session", "version": 3, "id": "child-session",
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp", "parentSession": "/p.jsonl"
        }))];
        let mut parent: Option<String> = None;
        for (i, e) in entries.iter().enumerate() {
            let id = format!("e{i:07}");
            let mut v = serde_json::json!({"type": "custom", "id": id, "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z"});
            v.as_object_mut()
                .unwrap()
                .extend(e.as_object().unwrap().clone());
            lines.push(json_line(&v));
            parent = Some(id);
        }
        std::fs::write(&p, lines.join("")).unwrap();
        let s = Session::load(&p).unwrap();
        (d, s)
    }
    fn json_line(v: &Value) -> String {
        format!("{v}\n")
    }
    fn meta() -> Value {
        serde_json::json!({"customType": "pi-web:subagent", "data": {"version": 1,
            "parentSessionId": "p", "parentSessionPath": "/p.jsonl", "profile": "explore",
            "description": "Look", "task": "t", "runInBackground": true,
            "createdAt": "2026-01-01T00:00:00.000Z"}})
    }
    fn result(status: &str) -> Value {
        serde_json::json!({"customType": "pi-web:subagent-result", "data": {"version": 1,
            "status": status, "completedAt": "2026-01-01T00:00:02.500Z", "error": "boom"}})
    }
    fn status(s: &str) -> Value {
        serde_json::json!({"customType": "pi-web:subagent-status", "data": {"version": 1, "status": s}})
    }

    #[test]
    fn a_snapshot_is_valid_all_or_nothing() {
        let meta = |snap: Value| serde_json::json!({"version": 1, "resourceSnapshot": snap});
        let ok = read_snapshot(&meta(serde_json::json!({"version": 1,
            "appendSystemPrompt": ["Look."], "tools": ["read", "grep", "read"],
            "exactSystemPrompt": "X"})))
        .unwrap();
        assert_eq!(ok.tools, ["read", "grep"]);
        assert_eq!(ok.append_system_prompt, ["Look."]);
        assert_eq!(ok.exact_system_prompt.as_deref(), Some("X"));
        assert!(!ok.load_skills && !ok.load_extensions);
        for bad in [
            serde_json::json!({"version": 2, "appendSystemPrompt": [], "tools": []}),
            serde_json::json!({"version": 1, "appendSystemPrompt": [1], "tools": []}),
            serde_json::json!({"version": 1, "appendSystemPrompt": [], "tools": ["read", "Agent"]}),
            serde_json::json!({"version": 1, "appendSystemPrompt": [], "tools": ["read", ""]}),
            serde_json::json!({"version": 1, "appendSystemPrompt": [], "tools": ["web_search"]}),
            serde_json::json!({"version": 1, "appendSystemPrompt": [], "tools": "read"}),
        ] {
            assert_eq!(read_snapshot(&meta(bad.clone())), None, "{bad}");
        }
        let ext = read_snapshot(&meta(
            serde_json::json!({"version": 1, "appendSystemPrompt": [],
            "tools": ["read", "web_search"], "loadExtensions": true, "loadSkills": "yes"}),
        ))
        .unwrap();
        assert_eq!(ext.tools, ["read", "web_search"]);
        assert!(ext.load_extensions && !ext.load_skills);
        assert!(read_snapshot(&meta(
            serde_json::json!({"version": 1, "appendSystemPrompt": [],
            "tools": ["steer_subagent"], "loadExtensions": true})
        ))
        .is_none());
    }

    #[test]
    fn the_last_status_or_result_decides() {
        let (_d, s) = session(&[meta()]);
        assert_eq!(read_run(&s).unwrap().status, RunStatus::Interrupted);
        let (_d, s) = session(&[meta(), result("failed")]);
        let r = read_run(&s).unwrap();
        assert_eq!(
            (r.status, r.error.as_deref()),
            (RunStatus::Failed, Some("boom"))
        );
        assert_eq!(
            duration_ms(&r.created_at, r.completed_at.as_deref().unwrap()),
            Some(2500)
        );
        assert!(r.run_in_background);
        let (_d, s) = session(&[meta(), result("failed"), result("aborted")]);
        assert_eq!(read_run(&s).unwrap().status, RunStatus::Aborted);
        let (_d, s) = session(&[meta(), result("failed"), status("queued")]);
        let r = read_run(&s).unwrap();
        assert_eq!((r.status, r.error.clone()), (RunStatus::Queued, None));
        assert_eq!(live_view(&r, true).status, RunStatus::Queued);
        assert_eq!(live_view(&r, false).status, RunStatus::Interrupted);
        assert_eq!(
            live_view(&r, false).final_text(),
            "Subagent child-session was interrupted before completion."
        );
        // A record naming a process that has ended is stale; one naming
        // this process, another host or none is not.
        let mut dead = status("running");
        let gone = {
            let mut c = std::process::Command::new("true").spawn().unwrap();
            let pid = c.id();
            c.wait().unwrap();
            pid
        };
        Owner {
            pid: gone,
            host: hostname(),
        }
        .mark(&mut dead["data"]);
        let (_d, s) = session(&[meta(), dead.clone()]);
        let r = read_run(&s).unwrap();
        assert_eq!(r.status, RunStatus::Running);
        assert!(r.stale(), "{r:?}");
        dead["data"]["host"] = serde_json::json!("elsewhere");
        let (_d, s) = session(&[meta(), dead]);
        assert!(!read_run(&s).unwrap().stale());
        let mut mine = status("queued");
        Owner::this_process().mark(&mut mine["data"]);
        let (_d, s) = session(&[meta(), mine]);
        assert!(!read_run(&s).unwrap().stale());
        let (_d, s) = session(&[meta(), status("running")]);
        assert!(!read_run(&s).unwrap().stale());
        let (_d, s) = session(&[meta(), status("bogus")]);
        assert_eq!(read_run(&s).unwrap().status, RunStatus::Interrupted);
        let mut v2 = meta();
        v2["data"]["version"] = serde_json::json!(2);
        let (_d, s) = session(&[v2]);
        assert!(read_run(&s).is_none());
    }
}
