//! The model and thinking level an extension switches (`pi.setModel`,
//! `pi.setThinkingLevel`), resolved through the model registry as pi does,
//! with pi's `model_select` / `thinking_level_select` events, which a
//! command waits for before it returns.

use super::*;

impl Runner {
    pub(super) fn registry(&self) -> Result<crate::model::ModelRegistry, String> {
        let dir = lock(&self.agent_dir)
            .clone()
            .ok_or("pi-toolkit host: no model registry in this run")?;
        crate::model::ModelRegistry::load(&dir).map_err(|e| e.to_string())
    }

    /// `pi.setModel`: `false` for an unknown model or one without a key
    /// (pi: false without auth); otherwise the agent uses it from the next
    /// request, the thinking level is clamped to it, the change is recorded
    /// (`model_change`, `thinking_level_change`), and the extensions get
    /// `thinking_level_select` (when the level moved) and `model_select`
    /// with pi's payload before the call returns, as in pi.
    pub(super) fn set_model(
        self: Arc<Self>,
        provider: String,
        id: String,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let reg = match self.registry() {
            Ok(r) => r,
            Err(e) => return ready(Err(e)),
        };
        let Some(model) = reg.model(&provider, &id).cloned() else {
            return ready(Ok(false.into()));
        };
        let Ok(Some(key)) = reg.api_key(&provider, None) else {
            return ready(Ok(false.into()));
        };
        match reg.resolve_headers(&model, Some(&key)) {
            Ok(model) => self.switch_model(reg, model, key),
            Err(e) => ready(Err(e.to_string())),
        }
    }

    pub(super) fn switch_model(
        self: Arc<Self>,
        reg: crate::model::ModelRegistry,
        model: crate::format::model::Model,
        key: String,
    ) -> BoxFuture<'static, Result<Value, String>> {
        use crate::model::select::clamp_thinking;
        let map = reg.thinking_level_map(&model).cloned();
        let new_json = model_json(&reg, &model);
        let chosen = model.clone();
        let busy = Followup::new(&self.followups);
        let change = self.ask(move |a| {
            let (prev, prev_level) = (a.opts.model.clone(), a.opts.thinking);
            if prev.provider == chosen.provider && prev.id == chosen.id {
                return Ok(Value::Null);
            }
            let level = clamp_thinking(&chosen, map.as_ref(), prev_level);
            a.opts.model = chosen;
            a.opts.api_key = Some(key);
            a.opts.thinking = level;
            a.prepare_session()?;
            Ok(json!({"provider": prev.provider, "id": prev.id,
                          "previousLevel": prev_level.as_str(), "level": level.as_str()}))
        });
        Box::pin(async move {
            let _busy = busy;
            let change = change.await?;
            if change.is_null() {
                return Ok(true.into());
            }
            let previous = change["provider"]
                .as_str()
                .zip(change["id"].as_str())
                .and_then(|(p, id)| reg.model(p, id))
                .map(|m| model_json(&reg, m))
                .unwrap_or_else(|| json!({"provider": change["provider"], "id": change["id"]}));
            {
                let mut s = lock(&self.shared);
                s.state.provider = model.provider.clone();
                s.state.model = model.id.clone();
                s.state.thinking_level = change["level"].as_str().unwrap_or("off").to_string();
            }
            if change["level"] != change["previousLevel"] {
                self.notify_all(json!({"type": "thinking_level_select", "level": change["level"], "previousLevel": change["previousLevel"]}))
                .await;
            }
            self.notify_all(json!({"type": "model_select", "model": new_json, "previousModel": previous, "source": "set"}))
            .await;
            Ok(true.into())
        })
    }

    /// `pi.setThinkingLevel`: clamped to the model; a change is recorded
    /// (`thinking_level_change`) and sent as `thinking_level_select`.
    ///
    /// The change is queued when the call is read (before the answers read
    /// after it), so the handler's next event already sees it.
    pub(super) fn set_thinking(
        self: Arc<Self>,
        level: String,
    ) -> BoxFuture<'static, Result<Value, String>> {
        use crate::model::select::{clamp_thinking, parse_thinking};
        let want = match parse_thinking(&level) {
            Ok(w) => w,
            Err(e) => return ready(Err(e.to_string())),
        };
        // Without a registry (the faux provider) no map clamps the level.
        let reg = self.registry().ok();
        let busy = Followup::new(&self.followups);
        let change = self.ask(move |a| {
            let map = reg
                .as_ref()
                .and_then(|r| r.thinking_level_map(&a.opts.model).cloned());
            let prev = a.opts.thinking;
            let level = clamp_thinking(&a.opts.model, map.as_ref(), want);
            if level == prev {
                return Ok(Value::Null);
            }
            a.opts.thinking = level;
            a.prepare_session()?;
            Ok(json!({"type": "thinking_level_select", "level": level.as_str(), "previousLevel": prev.as_str()}))
        });
        Box::pin(async move {
            let _busy = busy;
            let change = change.await?;
            if !change.is_null() {
                lock(&self.shared).state.thinking_level =
                    change["level"].as_str().unwrap_or("off").to_string();
                self.notify_all(change).await;
            }
            Ok(Value::Null)
        })
    }
}

/// A model as pi's events carry it (its `models.json` / built-in object).
pub(super) fn model_json(
    reg: &crate::model::ModelRegistry,
    m: &crate::format::model::Model,
) -> Value {
    reg.pi_json(m)
        .map(Value::Object)
        .unwrap_or_else(|| json!({"provider": m.provider, "id": m.id}))
}

/// Counts one model/level change until its `*_select` events went out
/// (`Hooks::quiesce` waits for none to be left).
pub(super) struct Followup(tokio::sync::watch::Sender<usize>);

impl Followup {
    pub(super) fn new(tx: &tokio::sync::watch::Sender<usize>) -> Followup {
        tx.send_modify(|n| *n += 1);
        Followup(tx.clone())
    }
}

impl Drop for Followup {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}
