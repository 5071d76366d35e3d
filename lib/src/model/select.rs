//! Model and thinking-level selection as pi 1.6.0's CLI does it
//! (`--provider`, `--model`, `--thinking`, `--api-key`, settings defaults).
//! Every rule below was observed by running pi 1.6.0 (`--mode rpc`,
//! `get_state`) with dummy keys:
//!
//! * `--provider P` without `--model` is an error; an unknown `P` is
//!   `Unknown provider "P". …`. Provider names are case-insensitive.
//! * `--model PATTERN`: an exact id (case-insensitive) wins; if several
//!   providers offer that exact id, the one with credentials is taken, else
//!   it is an "ambiguous across providers" error. Then `provider/id` (the
//!   part before the first `/` names a known provider). Then a
//!   case-insensitive substring of id or name — among models with
//!   credentials first, all models if none match there — preferring ids
//!   that are not dated (`-YYYYMMDD`, unless `-latest`) and, among those,
//!   the greatest id in `localeCompare` order (`opus` → `claude-opus-5-5`).
//! * A `:level` suffix (`sonnet:high`, `provider/id:batch:low`) is only
//!   split off when the whole pattern matches nothing and the suffix is a
//!   valid level; `claude-opus-4-6:bogus` is "not found".
//! * `provider/unknown-id` (or `--provider P --model unknown`) uses a copy
//!   of the provider's default model under that id, with pi's warning
//!   `Model "X" not found for provider "P". Using custom model id.`
//! * No `--model`: settings `defaultProvider`/`defaultModel` when that model
//!   exists and has credentials; else the default model of the first
//!   provider with credentials in pi's order (anthropic, openai, deepseek,
//!   google, openrouter, xai, groq, cerebras, mistral, then `models.json`
//!   providers, whose first model is used).
//! * `--models a,b` (no `--model`, not `-c`): each entry is a `*` glob
//!   (case-insensitive, on `provider/id` and on `id`) or a `--model`
//!   pattern, with an optional `:level` suffix, over models with
//!   credentials; an entry matching nothing is pi's warning `No models
//!   match pattern "X"`. The run starts on the settings default model when
//!   it is in the scope, else on the scope's first model, with that entry's
//!   thinking suffix.
//! * Thinking: `--thinking` (overrides the suffix) → suffix → settings
//!   `defaultThinkingLevel` → `medium`; then clamped ([`clamp_thinking`]).
//!   pi only warns about an invalid `--thinking`; this crate makes it an
//!   error listing the valid levels.
//! * The key: [`super::ModelRegistry::api_key`]; none is `No API key found
//!   for <provider>.` plus a hint (models with `api: "faux"` need none).

use std::path::Path;

use serde_json::{Map, Value};

use super::list::locale_cmp;
use super::{ModelError, ModelRegistry};
use crate::format::model::{Model, ThinkingLevel};

/// The CLI flags that choose a model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelectionRequest {
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model` (pattern, `provider/id`, optional `:thinking` suffix).
    pub model: Option<String>,
    /// `--thinking`.
    pub thinking: Option<String>,
    /// `--api-key` (for the selected model's provider only).
    pub api_key: Option<String>,
    /// `--models` (the model scope, comma-separated).
    pub scope: Option<String>,
    /// `-c`: the session's model is kept, the scope does not choose.
    pub continuing: bool,
}

/// The defaults `settings.json` supplies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelectionDefaults {
    pub default_provider: Option<String>,
    pub default_model: Option<String>,
    pub default_thinking_level: Option<String>,
}

impl SelectionDefaults {
    /// Reads `defaultProvider`, `defaultModel` and `defaultThinkingLevel`
    /// from the settings (global, then the project's when `trusted`; one
    /// reader for all settings: [`crate::settings::Settings`]). Missing
    /// files are empty; malformed ones are errors with file, line and column.
    pub fn load(agent_dir: &Path, cwd: &Path, trusted: bool) -> Result<Self, ModelError> {
        use crate::settings::{Settings, SettingsError};
        let settings = Settings::load(agent_dir, cwd, trusted).map_err(|e| match e {
            SettingsError::Json {
                path,
                line,
                column,
                message,
            } => ModelError::Json {
                path,
                line,
                column,
                message,
            },
            SettingsError::Io { path, source } => ModelError::Io { path, source },
            SettingsError::NotObject { path } => ModelError::Schema {
                path,
                at: "(top level)".into(),
                message: "settings must be a JSON object".into(),
            },
        })?;
        Ok(Self::from_settings(&settings))
    }

    /// The defaults from already-loaded settings.
    pub fn from_settings(settings: &crate::settings::Settings) -> Self {
        let s = |k: &str| settings.str(k).map(str::to_string);
        SelectionDefaults {
            default_provider: s("defaultProvider"),
            default_model: s("defaultModel"),
            default_thinking_level: s("defaultThinkingLevel"),
        }
    }
}

/// The chosen model, thinking level and key.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub model: Model,
    /// After clamping to what the model supports.
    pub thinking: ThinkingLevel,
    /// `None` only for models that need no key (`api: "faux"`).
    pub api_key: Option<String>,
    /// pi's warnings (custom model id, ignored settings values).
    pub warnings: Vec<String>,
}

/// The valid thinking level names, comma-separated.
pub fn valid_levels() -> String {
    ThinkingLevel::ALL
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses a thinking level; unknown names are [`ModelError::InvalidThinking`].
pub fn parse_thinking(s: &str) -> Result<ThinkingLevel, ModelError> {
    ThinkingLevel::parse(s).ok_or_else(|| ModelError::InvalidThinking(s.to_string()))
}

/// Clamps `level` to what the model supports, as pi does: a model without
/// `reasoning` gets `off`; otherwise a level is supported when its
/// `thinkingLevelMap` entry is non-null, or, unmapped, when it is `high` or
/// below. An unsupported level moves up to the next supported one, else
/// down.
pub fn clamp_thinking(
    model: &Model,
    map: Option<&Map<String, Value>>,
    level: ThinkingLevel,
) -> ThinkingLevel {
    if !model.reasoning {
        return ThinkingLevel::Off;
    }
    let supported = |l: ThinkingLevel| match map.and_then(|m| m.get(l.as_str())) {
        Some(Value::Null) => false,
        Some(_) => true,
        None => l <= ThinkingLevel::High,
    };
    if supported(level) {
        return level;
    }
    let all = ThinkingLevel::ALL;
    let pos = all.iter().position(|&l| l == level).unwrap_or(0);
    all[pos + 1..]
        .iter()
        .copied()
        .find(|&l| supported(l))
        .or_else(|| all[..pos].iter().rev().copied().find(|&l| supported(l)))
        .unwrap_or(level)
}

/// pi's alias test: not ending in `-YYYYMMDD`, or ending in `-latest`.
fn is_alias(id: &str) -> bool {
    if id.ends_with("-latest") {
        return true;
    }
    let b = id.as_bytes();
    !(b.len() >= 9 && b[b.len() - 9] == b'-' && b[b.len() - 8..].iter().all(u8::is_ascii_digit))
}

/// Matches a pattern without thinking suffix or custom-id fallback:
/// `Ok(None)` when nothing matches; ambiguity is an error.
pub(crate) fn match_pattern(
    reg: &ModelRegistry,
    pattern: &str,
    provider: Option<&str>,
) -> Result<Option<Model>, ModelError> {
    let pl = pattern.to_lowercase();
    // With a provider only its models are built.
    let cands: Vec<&Model> = match provider {
        Some(p) => reg.models_ignore_case(p),
        None => reg.all().iter().collect(),
    };
    let exact: Vec<&Model> = cands
        .iter()
        .copied()
        .filter(|m| m.id.to_lowercase() == pl)
        .collect();
    if let Some(first) = exact.first() {
        if exact.iter().all(|m| m.provider == first.provider) {
            return Ok(Some((*first).clone()));
        }
        let authed: Vec<&&Model> = exact
            .iter()
            .filter(|m| reg.has_credentials(&m.provider))
            .collect();
        if let [one] = authed.as_slice() {
            return Ok(Some((**one).clone()));
        }
        let mut candidates: Vec<String> = exact
            .iter()
            .map(|m| format!("{}/{}", m.provider, m.id))
            .collect();
        candidates.sort();
        return Err(ModelError::Ambiguous {
            pattern: pattern.to_string(),
            candidates,
            authenticated: authed.len(),
        });
    }
    if provider.is_none() {
        if let Some((p, rest)) = pattern.split_once('/') {
            if let Some(info) = reg.provider(p) {
                let pid = info.id.clone();
                return match_pattern(reg, rest, Some(&pid));
            }
        }
    }
    let matches =
        |m: &&Model| m.id.to_lowercase().contains(&pl) || m.name.to_lowercase().contains(&pl);
    let mut pool: Vec<&Model> = cands
        .iter()
        .copied()
        .filter(|m| reg.has_credentials(&m.provider))
        .filter(matches)
        .collect();
    if pool.is_empty() {
        pool = cands.iter().copied().filter(matches).collect();
    }
    let aliases: Vec<&Model> = pool.iter().copied().filter(|m| is_alias(&m.id)).collect();
    let from = if aliases.is_empty() { pool } else { aliases };
    Ok(from
        .into_iter()
        .max_by(|a, b| locale_cmp(&a.id, &b.id))
        .cloned())
}

/// The pattern with an optional `:level` suffix (see the module header).
fn match_with_suffix(
    reg: &ModelRegistry,
    pattern: &str,
    provider: Option<&str>,
) -> Result<Option<(Model, Option<ThinkingLevel>)>, ModelError> {
    if let Some(m) = match_pattern(reg, pattern, provider)? {
        return Ok(Some((m, None)));
    }
    if let Some((prefix, suffix)) = pattern.rsplit_once(':') {
        if let Some(level) = ThinkingLevel::parse(suffix) {
            if let Some((m, _)) = match_with_suffix(reg, prefix, provider)? {
                return Ok(Some((m, Some(level))));
            }
        }
    }
    Ok(None)
}

/// A copy of the provider's default (or first) model named `id`.
fn custom_id_model(reg: &ModelRegistry, provider: &str, id: &str) -> Option<Model> {
    let info = reg.provider(provider)?;
    let base = info
        .default_model
        .as_deref()
        .and_then(|d| reg.model(&info.id, d))
        .or_else(|| reg.provider_models(&info.id).next())?;
    let mut m = base.clone();
    m.id = id.to_string();
    m.name = id.to_string();
    Some(m)
}

/// The model pi starts with when no `--model` is given.
fn default_model(reg: &ModelRegistry, d: &SelectionDefaults) -> Option<Model> {
    if let Some(id) = &d.default_model {
        let found = match &d.default_provider {
            Some(p) => reg.model(p, id),
            None => reg.all().iter().find(|m| &m.id == id),
        };
        if let Some(m) = found.filter(|m| reg.has_credentials(&m.provider)) {
            return Some(m.clone());
        }
    }
    for p in reg.providers() {
        if !reg.has_credentials(&p.id) {
            continue;
        }
        let by_default = p.default_model.as_deref().and_then(|d| reg.model(&p.id, d));
        if let Some(m) = by_default.or_else(|| reg.provider_models(&p.id).next()) {
            return Some(m.clone());
        }
    }
    None
}

/// `*` glob, case-insensitive.
fn glob_matches(pattern: &str, text: &str) -> bool {
    crate::tools::select::pattern_matches(&pattern.to_lowercase(), &text.to_lowercase())
}

/// The models of `--models`, in order, each with its thinking suffix.
fn scope_models(
    reg: &ModelRegistry,
    patterns: &str,
    warnings: &mut Vec<String>,
) -> Vec<(Model, Option<ThinkingLevel>)> {
    let mut out: Vec<(Model, Option<ThinkingLevel>)> = Vec::new();
    let add =
        |m: &Model, l: Option<ThinkingLevel>, out: &mut Vec<(Model, Option<ThinkingLevel>)>| {
            if !out
                .iter()
                .any(|(o, _)| o.provider == m.provider && o.id == m.id)
            {
                out.push((m.clone(), l));
            }
        };
    for p in patterns.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (body, level) = match p.rsplit_once(':') {
            Some((b, l)) if ThinkingLevel::parse(l).is_some() => (b, ThinkingLevel::parse(l)),
            _ => (p, None),
        };
        let before = out.len();
        if body.contains('*') {
            for m in reg
                .all()
                .iter()
                .filter(|m| reg.has_credentials(&m.provider))
            {
                let full = format!("{}/{}", m.provider, m.id);
                if glob_matches(body, &full) || glob_matches(body, &m.id) {
                    add(m, level, &mut out);
                }
            }
        } else if let Ok(Some((m, suffix))) = match_with_suffix(reg, p, None) {
            if reg.has_credentials(&m.provider) {
                add(&m, suffix, &mut out);
            }
        }
        if out.len() == before {
            warnings.push(format!("No models match pattern \"{p}\""));
        }
    }
    out
}

/// Chooses the model, thinking level and API key from the CLI flags and
/// the settings defaults (see the module header for every rule).
pub fn resolve_selection(
    reg: &ModelRegistry,
    req: &SelectionRequest,
    defaults: &SelectionDefaults,
) -> Result<Selection, ModelError> {
    let mut warnings = Vec::new();
    // pi 1.6.0 warns about an unknown `--thinking` level and goes on as
    // if it were not given.
    let cli_thinking = match req.thinking.as_deref().map(parse_thinking) {
        Some(Ok(l)) => Some(l),
        Some(Err(e)) => {
            warnings.push(e.to_string());
            None
        }
        None => None,
    };
    let provider = match &req.provider {
        Some(p) => match reg.provider(p) {
            Some(info) => Some(info.id.clone()),
            None => return Err(ModelError::UnknownProvider(p.clone())),
        },
        None => None,
    };
    let (model, suffix) = match (&req.model, &provider) {
        (None, Some(p)) => return Err(ModelError::ProviderWithoutModel(p.clone())),
        (Some(pattern), _) => match match_with_suffix(reg, pattern, provider.as_deref())? {
            Some(found) => found,
            None => {
                let target = match &provider {
                    Some(p) => Some((p.clone(), pattern.clone())),
                    None => pattern.split_once('/').and_then(|(p, rest)| {
                        reg.provider(p).map(|i| (i.id.clone(), rest.to_string()))
                    }),
                };
                let custom = target.as_ref().and_then(|(p, id)| {
                    custom_id_model(reg, p, id).map(|m| (m, p.clone(), id.clone()))
                });
                match custom {
                    Some((m, p, id)) => {
                        warnings.push(format!(
                            "Model \"{id}\" not found for provider \"{p}\". Using custom model id."
                        ));
                        (m, None)
                    }
                    None => return Err(ModelError::UnknownModel(pattern.clone())),
                }
            }
        },
        (None, None) => match (
            req.scope
                .as_deref()
                .filter(|_| !req.continuing)
                .map(|p| scope_models(reg, p, &mut warnings))
                .filter(|s| !s.is_empty()),
            default_model(reg, defaults),
        ) {
            (Some(scope), default) => {
                let in_scope = default.as_ref().and_then(|d| {
                    scope
                        .iter()
                        .find(|(m, _)| m.provider == d.provider && m.id == d.id)
                });
                let (m, l) = in_scope.unwrap_or(&scope[0]).clone();
                (m, l)
            }
            (None, Some(m)) => (m, None),
            (None, None) => {
                return Err(ModelError::NoModels {
                    auth: reg.agent_dir().join("auth.json"),
                    models: reg.agent_dir().join("models.json"),
                })
            }
        },
    };
    let settings_level = match defaults.default_thinking_level.as_deref() {
        Some(s) => match ThinkingLevel::parse(s) {
            Some(l) => Some(l),
            None => {
                warnings.push(format!(
                    "Invalid defaultThinkingLevel \"{s}\" in settings.json. Valid values: {}",
                    valid_levels()
                ));
                None
            }
        },
        None => None,
    };
    let wanted = cli_thinking
        .or(suffix)
        .or(settings_level)
        .unwrap_or(ThinkingLevel::Medium);
    let thinking = clamp_thinking(&model, reg.thinking_level_map(&model), wanted);
    let api_key = reg.api_key(&model.provider, req.api_key.as_deref())?;
    if api_key.is_none() && model.api != "faux" {
        return Err(ModelError::NoApiKey {
            provider: model.provider.clone(),
            hint: reg.key_hint(&model.provider),
        });
    }
    Ok(Selection {
        model,
        thinking,
        api_key,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn reg(keys: &[&str]) -> ModelRegistry {
        let env = keys
            .iter()
            .map(|k| (k.to_string(), "x".to_string()))
            .collect::<HashMap<_, _>>();
        ModelRegistry::builtin_with_env(Path::new("/agent"), env)
    }

    fn pick(r: &ModelRegistry, model: &str) -> String {
        let req = SelectionRequest {
            model: Some(model.into()),
            ..Default::default()
        };
        match resolve_selection(r, &req, &SelectionDefaults::default()) {
            Ok(s) => format!("{}/{} {}", s.model.provider, s.model.id, s.thinking),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn patterns_resolve_like_pi() {
        // Expected values are pi 1.6.0's get_state answers.
        let r = reg(&["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"]);
        assert_eq!(pick(&r, "opus"), "anthropic/claude-opus-5-5 medium");
        assert_eq!(pick(&r, "opus:high"), "anthropic/claude-opus-5-5 high");
        assert_eq!(
            pick(&r, "sonnet:xhigh"),
            "anthropic/claude-sonnet-5-5 xhigh"
        );
        assert_eq!(
            pick(&r, "anthropic/claude-opus-4-6:low"),
            "anthropic/claude-opus-4-6 low"
        );
        assert_eq!(pick(&r, "gpt-4o"), "openai/gpt-4o off");
        assert_eq!(
            pick(&r, "Claude Opus 4.6"),
            "anthropic/claude-opus-4-6 medium"
        );
        assert_eq!(
            pick(&r, "CLAUDE-OPUS-4-6"),
            "anthropic/claude-opus-4-6 medium"
        );
        assert_eq!(
            pick(&r, "gemini"),
            "google/gemini-robotics-er-2-preview medium"
        );
        assert_eq!(pick(&r, "flash"), "google/gemini-flash-lite-latest medium");
        assert_eq!(pick(&r, "haiku"), "anthropic/claude-haiku-5-5 medium");
        assert_eq!(
            pick(&r, "gpt4o"),
            "error: Model \"gpt4o\" not found. Use --list-models to see available models."
        );
        assert_eq!(
            pick(&r, "claude-opus-4-6:bogus"),
            "error: Model \"claude-opus-4-6:bogus\" not found. Use --list-models to see available models."
        );
    }

    #[test]
    fn all_keys() {
        let r = reg(&[
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GEMINI_API_KEY",
            "OPENROUTER_API_KEY",
            "GROQ_API_KEY",
            "XAI_API_KEY",
            "MISTRAL_API_KEY",
            "DEEPSEEK_API_KEY",
            "CEREBRAS_API_KEY",
        ]);
        assert_eq!(pick(&r, "gpt-oss-120b"), "cerebras/gpt-oss-120b medium");
        assert_eq!(
            pick(&r, "claude-opus-4.6"),
            "openrouter/anthropic/claude-opus-4.6:batch medium"
        );
        assert_eq!(
            pick(&r, "anthropic/claude-opus-4.6"),
            "openrouter/anthropic/claude-opus-4.6 medium"
        );
        assert_eq!(
            pick(&r, "anthropic/claude-opus-4.6:batch:high"),
            "openrouter/anthropic/claude-opus-4.6:batch high"
        );
        assert_eq!(pick(&r, "5-5"), "anthropic/claude-sonnet-5-5 medium");
        let e = pick(&r, "openai/gpt-oss-120b");
        assert!(e.contains("is ambiguous across providers: groq/openai/gpt-oss-120b, openrouter/openai/gpt-oss-120b. More than one matching provider is authenticated."), "{e}");
        // Only OpenRouter has a key: fuzzy matching prefers its models.
        let r = reg(&["OPENROUTER_API_KEY"]);
        assert_eq!(
            pick(&r, "opus"),
            "openrouter/anthropic/claude-opus-5.5:batch medium"
        );
    }

    #[test]
    fn defaults_follow_pi_provider_order() {
        let d = SelectionDefaults::default();
        let sel = |keys: &[&str]| {
            resolve_selection(&reg(keys), &SelectionRequest::default(), &d)
                .map(|s| format!("{}/{} {}", s.model.provider, s.model.id, s.thinking))
                .unwrap_or_else(|e| e.to_string())
        };
        assert_eq!(
            sel(&["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]),
            "anthropic/claude-opus-5-5 medium"
        );
        assert_eq!(
            sel(&["GEMINI_API_KEY", "DEEPSEEK_API_KEY"]),
            "deepseek/deepseek-v4-pro high"
        );
        assert_eq!(
            sel(&["MISTRAL_API_KEY"]),
            "mistral/devstral-medium-latest off"
        );
        assert_eq!(
            sel(&["GROQ_API_KEY", "CEREBRAS_API_KEY"]),
            "groq/openai/gpt-oss-120b medium"
        );
        assert!(sel(&[]).starts_with("No models available."));
    }

    #[test]
    fn clamps_like_pi() {
        let r = reg(&["DEEPSEEK_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY"]);
        let c = |id: &str, l: ThinkingLevel| {
            let (p, i) = id.split_once('/').unwrap_or(("", id));
            let m = r.find(Some(p), i).expect("model");
            clamp_thinking(&m, r.thinking_level_map(&m), l).as_str()
        };
        use ThinkingLevel::*;
        assert_eq!(c("deepseek/deepseek-v4-pro", Low), "high");
        assert_eq!(c("deepseek/deepseek-v4-pro", Off), "off");
        assert_eq!(c("deepseek/deepseek-flash", Minimal), "low");
        assert_eq!(c("deepseek/deepseek-flash", Medium), "high");
        assert_eq!(c("anthropic/claude-fable-5", Off), "minimal");
        assert_eq!(c("anthropic/claude-fable-5", Xhigh), "xhigh");
        assert_eq!(c("groq/openai/gpt-oss-120b", Off), "low");
        assert_eq!(c("groq/openai/gpt-oss-120b", Xhigh), "high");
        assert_eq!(c("groq/qwen/qwen3.6-27b", Minimal), "high");
        assert_eq!(c("groq/llama-3.3-70b-versatile", High), "off");
    }

    #[test]
    fn flag_errors() {
        let r = reg(&["ANTHROPIC_API_KEY"]);
        let run = |req: SelectionRequest| {
            resolve_selection(&r, &req, &SelectionDefaults::default()).map(|s| s.warnings)
        };
        let e = run(SelectionRequest {
            provider: Some("nope".into()),
            model: Some("x".into()),
            ..Default::default()
        });
        assert_eq!(
            e.expect_err("unknown").to_string(),
            "Unknown provider \"nope\". Use --list-models to see available providers/models."
        );
        let e = run(SelectionRequest {
            provider: Some("anthropic".into()),
            ..Default::default()
        });
        assert_eq!(
            e.expect_err("no model").to_string(),
            "--provider requires --model (for example: --provider anthropic --model <pattern>)"
        );
        let e = run(SelectionRequest {
            model: Some("opus".into()),
            thinking: Some("bogus".into()),
            ..Default::default()
        });
        assert_eq!(
            e.expect("thinking"),
            ["Invalid thinking level \"bogus\". Valid values: off, minimal, low, medium, high, xhigh, max"]
        );
        let w = run(SelectionRequest {
            model: Some("anthropic/nope".into()),
            ..Default::default()
        });
        assert_eq!(
            w.expect("custom id"),
            vec![
                "Model \"nope\" not found for provider \"anthropic\". Using custom model id."
                    .to_string()
            ]
        );
        let e = run(SelectionRequest {
            model: Some("gpt-4o".into()),
            ..Default::default()
        });
        assert!(e
            .expect_err("key")
            .to_string()
            .starts_with("No API key found for openai."));
    }

    /// `--models` picks the start model as pi 1.6.0 does (cells observed
    /// with the real pi, listed in tests/oracle/FINDINGS.md).
    #[test]
    fn model_scope_picks_the_start_model() {
        let r = reg(&["ANTHROPIC_API_KEY"]);
        let defaults = SelectionDefaults {
            default_provider: Some("anthropic".into()),
            default_model: Some("claude-opus-4-6".into()),
            ..Default::default()
        };
        let run = |scope: &str, model: Option<&str>, continuing: bool| {
            let req = SelectionRequest {
                model: model.map(str::to_string),
                scope: Some(scope.into()),
                continuing,
                ..Default::default()
            };
            resolve_selection(&r, &req, &defaults)
                .map(|s| {
                    (
                        format!("{}/{} {}", s.model.provider, s.model.id, s.thinking),
                        s.warnings,
                    )
                })
                .unwrap_or_else(|e| (e.to_string(), Vec::new()))
        };
        assert_eq!(
            run("claude-sonnet-4-5", None, false).0,
            "anthropic/claude-sonnet-4-5 medium"
        );
        assert_eq!(
            run("claude-sonnet-4-5:high", None, false).0,
            "anthropic/claude-sonnet-4-5 high"
        );
        // The default model is kept when it is in scope.
        assert_eq!(
            run("claude-sonnet-4-5,claude-opus-4-6", None, false).0,
            "anthropic/claude-opus-4-6 medium"
        );
        assert_eq!(
            run("ANTHROPIC/CLAUDE-SONNET-4-5*", None, false).0,
            "anthropic/claude-sonnet-4-5 medium"
        );
        let (m, w) = run("nosuch-model-x,claude-sonnet-4-5", None, false);
        assert_eq!(m, "anthropic/claude-sonnet-4-5 medium");
        assert_eq!(w, ["No models match pattern \"nosuch-model-x\""]);
        // --model wins; -c keeps the default path; models without a key are out.
        assert_eq!(
            run("claude-sonnet-4-5", Some("claude-opus-4-6"), false).0,
            "anthropic/claude-opus-4-6 medium"
        );
        assert_eq!(
            run("claude-sonnet-4-5", None, true).0,
            "anthropic/claude-opus-4-6 medium"
        );
        assert_eq!(
            run("gpt-4o", None, false).0,
            "anthropic/claude-opus-4-6 medium"
        );
    }

    #[test]
    fn alias_rule() {
        assert!(is_alias("claude-opus-4-5"));
        assert!(!is_alias("claude-opus-4-5-20251101"));
        assert!(is_alias("gemini-flash-latest"));
    }
    /// A model named by provider and id (settings defaults, `--provider`
    /// with `--model`, a restored session model) builds no other
    /// provider's models; a pattern without a provider needs them all.
    #[test]
    fn a_named_model_builds_only_its_provider() {
        let run = |req: SelectionRequest, d: SelectionDefaults| {
            let r = reg(&["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]);
            let s = resolve_selection(&r, &req, &d).expect("selection");
            let (built, all) = r.built();
            let built: Vec<String> = built.into_iter().map(str::to_string).collect();
            (
                format!("{}/{} {}", s.model.provider, s.model.id, s.thinking),
                built,
                all,
            )
        };
        let defaults = SelectionDefaults {
            default_provider: Some("openai".into()),
            default_model: Some("gpt-4o".into()),
            ..Default::default()
        };
        assert_eq!(
            run(SelectionRequest::default(), defaults.clone()),
            ("openai/gpt-4o off".into(), vec!["openai".into()], false)
        );
        let named = SelectionRequest {
            provider: Some("anthropic".into()),
            model: Some("claude-opus-4-6:high".into()),
            ..Default::default()
        };
        assert_eq!(
            run(named, defaults),
            (
                "anthropic/claude-opus-4-6 high".into(),
                vec!["anthropic".into()],
                false
            )
        );
        // No settings default: the first provider with a key, its default.
        assert_eq!(
            run(SelectionRequest::default(), SelectionDefaults::default()),
            (
                "anthropic/claude-opus-5-5 medium".into(),
                vec!["anthropic".into()],
                false
            )
        );
        let fuzzy = SelectionRequest {
            model: Some("opus".into()),
            ..Default::default()
        };
        assert!(run(fuzzy, SelectionDefaults::default()).2);
    }
}
