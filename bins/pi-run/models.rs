//! Model, key and thinking level for a run, from flags, settings.json,
//! models.json, auth.json and the environment (via `pi_lib::model`).

use std::path::Path;

use pi_lib::cli::{CliError, EXIT_OK};
use pi_lib::format::model::{Model, ThinkingLevel};
use pi_lib::model::ModelRegistry;
use pi_lib::settings::Settings;

use crate::cli::Cli;

/// What a run uses.
pub struct Resolved {
    pub model: Model,
    pub api_key: Option<String>,
    pub thinking: ThinkingLevel,
}

fn parse_level(s: &str, what: &str) -> Result<ThinkingLevel, CliError> {
    ThinkingLevel::parse(s).ok_or_else(|| {
        CliError::input(format!(
            "{what}: invalid thinking level \"{s}\" (valid: {})",
            ThinkingLevel::ALL.map(|l| l.as_str()).join(", ")
        ))
    })
}

/// Resolves the model selection.
pub fn resolve(cli: &Cli, settings: &Settings, agent_dir: &Path) -> Result<Resolved, CliError> {
    let registry = ModelRegistry::load(agent_dir).map_err(|e| CliError::input(e.to_string()))?;
    // `--model x:level` suffix, then `--thinking`, then settings.
    let mut suffix_level = None;
    let model_arg = cli.model.as_deref().map(|m| match m.rsplit_once(':') {
        Some((id, lvl)) if ThinkingLevel::parse(lvl).is_some() => {
            suffix_level = ThinkingLevel::parse(lvl);
            id.to_string()
        }
        _ => m.to_string(),
    });
    let (provider, model_id) = match (&cli.provider, &model_arg) {
        (p, Some(m)) => (p.clone(), m.clone()),
        (Some(p), None) => (Some(p.clone()), String::new()),
        (None, None) => (
            settings.str("defaultProvider").map(str::to_string),
            settings.str("defaultModel").unwrap_or("").to_string(),
        ),
    };
    if model_id.is_empty() {
        return Err(CliError::input("no model selected").with_hint(
            "pass --model provider/id, or set defaultProvider and defaultModel in settings.json",
        ));
    }
    let model = registry
        .find(provider.as_deref(), &model_id)
        .map_err(|e| CliError::input(e.to_string()))?;
    let api_key = registry
        .api_key(&model.provider, cli.api_key.as_deref())
        .map_err(|e| CliError::input(e.to_string()))?;
    if api_key.is_none() && model.api != "faux" {
        return Err(
            CliError::input(format!("No API key found for {}.", model.provider)).with_hint(
                format!(
            "pass --api-key, add it to {}/auth.json, or set the provider's environment variable",
            agent_dir.display()
        ),
            ),
        );
    }
    let thinking = match (
        &cli.thinking,
        suffix_level,
        settings.str("defaultThinkingLevel"),
    ) {
        (Some(t), _, _) => parse_level(t, "--thinking")?,
        (None, Some(l), _) => l,
        (None, None, Some(s)) => parse_level(s, "settings.json defaultThinkingLevel")?,
        _ => ThinkingLevel::Off,
    };
    // A model without reasoning runs with thinking off, as pi clamps it.
    let thinking = if model.reasoning {
        thinking
    } else {
        ThinkingLevel::Off
    };
    Ok(Resolved {
        model,
        api_key,
        thinking,
    })
}

/// `--list-models [search]`.
pub fn list(agent_dir: &Path, search: &str) -> Result<i32, CliError> {
    let registry = ModelRegistry::load(agent_dir).map_err(|e| CliError::input(e.to_string()))?;
    let search = (!search.is_empty()).then_some(search);
    print!(
        "{}",
        pi_lib::model::list::render_model_list(&pi_lib::model::list::list_models(
            &registry, search
        ))
    );
    Ok(EXIT_OK)
}
