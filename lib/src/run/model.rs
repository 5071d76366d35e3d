//! Model, key and thinking level for a run, from flags, settings.json,
//! models.json, auth.json and the environment — all decided by
//! `crate::model` exactly as pi 1.6.0 decides them. `--provider faux
//! --model SCRIPT.jsonl` selects the scripted offline provider.

use std::io::Write;
use std::path::Path;

use crate::cli::{CliError, EXIT_OK};
use crate::format::model::{Model, ModelCost, ThinkingLevel};
use crate::model::select::{resolve_selection, SelectionDefaults, SelectionRequest};
use crate::model::ModelRegistry;
use crate::settings::Settings;

use super::ModelChoice;

/// What a run uses.
pub struct Resolved {
    pub model: Model,
    pub api_key: Option<String>,
    pub thinking: ThinkingLevel,
    /// The registry the model came from (none for the faux model), for
    /// RPC mode's model commands (loaded once).
    pub registry: Option<ModelRegistry>,
}

/// The faux model replaying `script` (no models.json entry needed).
fn faux_model(script: &str) -> Model {
    Model {
        id: script.to_string(),
        name: format!("faux ({script})"),
        api: "faux".into(),
        provider: "faux".into(),
        base_url: String::new(),
        reasoning: true,
        input: vec!["text".into(), "image".into()],
        cost: ModelCost::default(),
        context_window: 200_000,
        max_tokens: 32_000,
        headers: None,
        compat: None,
    }
}

/// A stand-in model for what needs one but never calls it (a plan).
pub fn placeholder() -> Model {
    faux_model("")
}

/// What a continued session brings to the selection: its model (the last
/// `model_change` or assistant message on the branch) and its thinking
/// level (the last `thinking_level_change`), each `None` when the branch
/// has none.
#[derive(Debug, Clone, Default)]
pub struct Restore {
    pub model: Option<(String, String)>,
    pub thinking: Option<String>,
}

/// Resolves the model selection. Continuing a session (`restore`), pi
/// 1.6.0 keeps the session's model unless `--model`/`--provider` name one,
/// and its thinking level unless `--thinking` does; a session model that
/// no longer resolves falls back to the usual selection.
pub fn resolve(
    cli: &ModelChoice,
    continuing: bool,
    agent_dir: &Path,
    settings: &Settings,
    restore: Option<&Restore>,
    prog: &str,
) -> Result<Resolved, CliError> {
    let input = |e: crate::model::ModelError| CliError::input(e.to_string());
    let registry = ModelRegistry::load(agent_dir).map_err(input)?;
    let faux_script = match (cli.provider.as_deref(), cli.model.as_deref()) {
        (Some("faux"), Some(m)) if registry.provider("faux").is_none() => Some(m.to_string()),
        (None, Some(m)) if registry.provider("faux").is_none() => {
            m.strip_prefix("faux/").map(str::to_string)
        }
        _ => None,
    };
    if let Some(script) = faux_script {
        let thinking = match &cli.thinking {
            Some(t) => crate::model::select::parse_thinking(t).map_err(input)?,
            None => ThinkingLevel::Off,
        };
        return Ok(Resolved {
            model: faux_model(&script),
            api_key: None,
            thinking,
            registry: None,
        });
    }
    let defaults = SelectionDefaults::from_settings(settings);
    let req = SelectionRequest {
        provider: cli.provider.clone(),
        model: cli.model.clone(),
        thinking: cli.thinking.clone(),
        api_key: cli.api_key.clone(),
        scope: cli.scope.clone(),
        continuing,
    };
    let mut req = req;
    if let Some(r) = restore {
        if req.thinking.is_none() {
            req.thinking = r.thinking.clone();
        }
    }
    let restored = restore
        .and_then(|r| r.model.clone())
        .filter(|_| req.provider.is_none() && req.model.is_none())
        .and_then(|(provider, id)| {
            let mut with = req.clone();
            with.provider = Some(provider);
            with.model = Some(id);
            resolve_selection(&registry, &with, &defaults).ok()
        });
    let sel = match restored {
        Some(sel) => sel,
        None => resolve_selection(&registry, &req, &defaults).map_err(input)?,
    };
    for w in &sel.warnings {
        crate::cli::warn(prog, w);
    }
    let model = registry
        .resolve_headers(&sel.model, sel.api_key.as_deref())
        .map_err(input)?;
    Ok(Resolved {
        model,
        api_key: sel.api_key,
        thinking: sel.thinking,
        registry: Some(registry),
    })
}

/// `--list-models [search]`.
pub fn list(agent_dir: &Path, search: &str) -> Result<i32, CliError> {
    let registry = ModelRegistry::load(agent_dir).map_err(|e| CliError::input(e.to_string()))?;
    let search = (!search.is_empty()).then_some(search);
    let mut out = crate::cli::Stdout::new();
    write!(
        out,
        "{}",
        crate::model::list::render_model_list(&crate::model::list::list_models(&registry, search))
    )
    .map_err(crate::cli::stdout_error)?;
    out.finish()?;
    Ok(EXIT_OK)
}
