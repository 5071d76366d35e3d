//! Session replacement in RPC mode (`new_session`, `switch_session`,
//! `fork`, `clone`) and `export_html`. A replacement asks
//! the extensions first (`session_before_switch` / `session_before_fork`,
//! either may cancel), then tells the old session goodbye
//! (`session_shutdown` with the reason and `targetSessionFile`), puts the
//! new session in the agent, and greets it (`session_start` with
//! `previousSessionFile`, then `resources_discover`), all before the
//! response, as pi 1.6.0 does. What those handlers emit reaches the client.
//! Between the two the extensions start over, as in pi: every factory runs
//! again in the same process ([`crate::agent::Hooks::reload`]; module-level
//! state carries over, the old instances' `pi`/`ctx` are stale), and only
//! the new registrations (commands, tools, handlers) serve the new session;
//! `get_commands` lists theirs.

use crate::agent::Event;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::agent::Agent;
use crate::format::{AgentMessage, Entry};
use crate::session::store::SessionStore;
use crate::session::Session;

use super::Ctl;

/// What replaces the session.
pub(super) enum Replacement {
    New { parent: Option<String> },
    Switch { path: String },
    Fork { entry_id: String },
    Clone,
}

impl Replacement {
    /// The `reason` of `session_shutdown` / `session_start`.
    fn reason(&self) -> &'static str {
        match self {
            Replacement::New { .. } => "new",
            Replacement::Switch { .. } => "resume",
            Replacement::Fork { .. } | Replacement::Clone => "fork",
        }
    }
}

fn dir_of(store: &SessionStore) -> Option<PathBuf> {
    store.path().and_then(Path::parent).map(Path::to_path_buf)
}

/// The file a session continues from: migrated on disk first when it is
/// an older version, as pi-run's `--session` does.
fn open_existing(path: &Path) -> Result<SessionStore, String> {
    let mut s = Session::load(path).map_err(|e| e.to_string())?;
    s.migrate_on_disk()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(SessionStore::open(s))
}

impl Ctl {
    /// One replacement; the response's data (`{cancelled}`, and the
    /// forked message's `text` for `fork`).
    pub(super) async fn replace(
        &mut self,
        agent: &mut Agent,
        what: Replacement,
    ) -> Result<Option<Value>, String> {
        let out = self.out.clone();
        let mut emit = |v: &Event<'_>| {
            out.record(v);
        };
        let before = match &what {
            Replacement::New { .. } => json!({"type": "session_before_switch", "reason": "new"}),
            Replacement::Switch { path } => json!({"type": "session_before_switch",
                "reason": "resume", "targetSessionFile": path}),
            Replacement::Fork { entry_id } => json!({"type": "session_before_fork",
                "entryId": entry_id, "position": "before"}),
            Replacement::Clone => json!({"type": "session_before_fork",
                "entryId": agent.store.session.leaf_id(), "position": "at"}),
        };
        if agent.session_before(before, &mut emit).await {
            return Ok(Some(json!({"cancelled": true})));
        }
        let old = agent.store.path().map(|p| p.display().to_string());
        let cwd = agent.store.session.header.cwd.clone();
        let mut text = None;
        let store = match &what {
            Replacement::New { parent } => {
                SessionStore::create(&cwd, dir_of(&agent.store).as_deref(), parent.clone())
            }
            Replacement::Switch { path } => {
                let p = agent.opts.cwd.join(path);
                if p.exists() {
                    open_existing(&p)?
                } else {
                    // pi starts a new session at a path that does not exist.
                    SessionStore::create_at(&cwd, p)
                }
            }
            Replacement::Fork { entry_id } => {
                let s = &agent.store.session;
                let user = match s.get(entry_id) {
                    Some(e @ Entry::Message(_)) => match e.message() {
                        Some(AgentMessage::User(u)) => Some((u.content.joined_text(""), e)),
                        _ => None,
                    },
                    _ => None,
                };
                let (t, e) = user.ok_or("Invalid entry ID for forking")?;
                self.check_saved(&agent.store)?;
                text = Some(t);
                let leaf = e.parent_id().map(str::to_string);
                SessionStore::fork_of(
                    s,
                    leaf.as_deref(),
                    dir_of(&agent.store).as_deref(),
                    old.clone(),
                )
                .map_err(|e| format!("cannot write the forked session: {e}"))?
            }
            Replacement::Clone => {
                let s = &agent.store.session;
                let leaf = s
                    .leaf_id()
                    .ok_or("Cannot clone session: no current entry selected")?
                    .to_string();
                self.check_saved(&agent.store)?;
                SessionStore::fork_of(s, Some(&leaf), dir_of(&agent.store).as_deref(), old.clone())
                    .map_err(|e| format!("cannot write the cloned session: {e}"))?
            }
        };
        let mut bye = Map::new();
        bye.insert("type".into(), "session_shutdown".into());
        bye.insert("reason".into(), what.reason().into());
        if let Some(p) = store.path() {
            bye.insert("targetSessionFile".into(), p.display().to_string().into());
        }
        agent.notify_hooks(Value::Object(bye), &mut emit).await;
        agent.apply_pending(&mut emit);
        agent.store = store;
        agent.prepare_session()?;
        agent.reload_hooks(&mut emit).await;
        let mut hello = Map::new();
        hello.insert("type".into(), "session_start".into());
        hello.insert("reason".into(), what.reason().into());
        if let Some(p) = old {
            hello.insert("previousSessionFile".into(), p.into());
        }
        agent.notify_hooks(Value::Object(hello), &mut emit).await;
        // (pi names this one `startup` too; the extra paths handlers
        // return are not rediscovered here.)
        agent
            .notify_hooks(
                json!({"type": "resources_discover", "cwd": cwd, "reason": "startup"}),
                &mut emit,
            )
            .await;
        agent.apply_pending(&mut emit);
        // (After session_start: what its handlers registered is listed.)
        if let Some(f) = &self.opts.refresh_commands {
            self.opts.commands = f();
        }
        Ok(Some(match text {
            Some(t) => json!({"text": t, "cancelled": false}),
            None => json!({"cancelled": false}),
        }))
    }

    /// A fork or clone needs the session on disk (or none at all).
    fn check_saved(&self, store: &SessionStore) -> Result<(), String> {
        if store.path().is_some() && !store.is_persisted() {
            return Err(
                "This session has not been saved yet. Send a message before cloning or forking it."
                    .into(),
            );
        }
        Ok(())
    }

    /// `export_html`: the session as HTML (this toolkit's exporter), at
    /// `output` (relative to the cwd) or pi's default name
    /// `pi-session-<file name>.html` in the cwd; the path as given.
    pub(super) fn export_html(
        &self,
        agent: &Agent,
        output: Option<String>,
    ) -> Result<Option<Value>, String> {
        let Some(file) = agent.store.path() else {
            return Err("Cannot export in-memory session to HTML".into());
        };
        if !agent.store.is_persisted() {
            return Err("Nothing to export yet - start a conversation first".into());
        }
        let name = match output {
            Some(o) => o,
            None => {
                let stem = file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("pi-session-{stem}.html")
            }
        };
        let target = agent.opts.cwd.join(&name);
        let html = crate::session::export::to_html(&agent.store.session);
        std::fs::write(&target, html)
            .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
        Ok(Some(json!({ "path": name })))
    }
}
