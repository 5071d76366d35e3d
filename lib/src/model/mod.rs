//! Models and API keys, as pi 1.6.0 resolves them: the built-in catalogue,
//! `<agentDir>/models.json`, `<agentDir>/auth.json`, provider environment
//! variables, `--provider`/`--model`/`--thinking` selection and
//! `--list-models`.
//!
//! * [`ModelRegistry::load`] reads what makes the model list: the built-in
//!   catalogue (`builtin-models.json`, pi 1.6.0's bundled models for
//!   anthropic, openai, deepseek, google, openrouter, xai, groq, cerebras and
//!   mistral, dumped from the real pi by `tests/oracle/dump-models.sh`) with
//!   `models.json` applied on top (see [`models_json`]). Models are built
//!   when asked for: one provider's for a model named by provider and id,
//!   the whole list for listing and fuzzy matching.
//! * [`ModelRegistry::api_key`] resolves a provider's key in pi's order:
//!   `--api-key` → `auth.json` → `models.json` `apiKey` → environment (see
//!   [`auth`]). Verified against `pi auth print-api-key`.
//! * [`resolve_selection`] picks the model and thinking level from the CLI
//!   flags and settings like pi's startup (see [`select`]).
//! * [`list_models`] / [`render_model_list`] print what `pi --list-models`
//!   prints (see [`list`]).
//!
//! Every Model also keeps pi's full JSON object ([`ModelRegistry::pi_json`]),
//! because [`Model`] has no room for `thinkingLevelMap`, `cost.tiers`,
//! `promptCache`, `inputLimits` and the like.

pub mod auth;
mod builtin;
pub mod list;
pub mod models_json;
pub mod select;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::format::model::Model;
use builtin::RawSlot;

pub use auth::{AuthEntry, AuthFile};
pub use list::{list_models, render_model_list, ModelRow};
pub use select::{
    clamp_thinking, parse_thinking, resolve_selection, Selection, SelectionDefaults,
    SelectionRequest,
};

/// Everything that can go wrong while loading models or resolving keys and
/// selections. Messages name the file (and line:column) they come from;
/// selection messages follow pi's wording.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A JSON file that does not parse (`models.json`, `auth.json`,
    /// `settings.json`).
    #[error("{}:{line}:{column}: invalid JSON: {message}", path.display())]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A file that parses but breaks pi's schema; `at` is pi's dotted path
    /// (`providers.mock.models.0.contextWindow`).
    #[error("{}: {at}: {message}", path.display())]
    Schema {
        path: PathBuf,
        at: String,
        message: String,
    },
    /// A file that cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `--provider` names no known provider.
    #[error("Unknown provider \"{0}\". Use --list-models to see available providers/models.")]
    UnknownProvider(String),
    /// `--model` matches nothing.
    #[error("Model \"{0}\" not found. Use --list-models to see available models.")]
    UnknownModel(String),
    /// An exact model id offered by several providers.
    #[error("Model \"{pattern}\" is ambiguous across providers: {}. {}. Use --provider or provider/model.",
        candidates.join(", "),
        if *authenticated == 0 { "No matching provider is authenticated" } else { "More than one matching provider is authenticated" })]
    Ambiguous {
        pattern: String,
        /// `provider/id` of every candidate, sorted.
        candidates: Vec<String>,
        /// How many of the candidates' providers have credentials.
        authenticated: usize,
    },
    /// `--provider` without `--model`.
    #[error("--provider requires --model (for example: --provider {0} --model <pattern>)")]
    ProviderWithoutModel(String),
    /// No credential for the selected model's provider.
    #[error("No API key found for {provider}.\n\nhint: set {hint}")]
    NoApiKey { provider: String, hint: String },
    /// No provider has credentials, so there is nothing to select.
    #[error("No models available.\n\nhint: set a provider's API key variable (e.g. ANTHROPIC_API_KEY), add an api_key entry to {}, or add a provider with an apiKey to {}", auth.display(), models.display())]
    NoModels { auth: PathBuf, models: PathBuf },
    /// A thinking level pi does not know.
    #[error("Invalid thinking level \"{0}\". Valid values: {levels}", levels = select::valid_levels())]
    InvalidThinking(String),
    /// `auth.json` holds an OAuth login for the provider and nothing else
    /// supplies a key; the toolkit cannot use OAuth logins yet.
    #[error("{}: provider \"{provider}\" is configured with OAuth, not an API key; OAuth logins are not supported by the pi toolkit yet (set an API key instead)", path.display())]
    OAuthUnsupported { provider: String, path: PathBuf },
    /// A `$VAR`/`!command` credential or header value that does not resolve.
    #[error("{source_desc}: failed to resolve credential: {message}")]
    Credential {
        /// Where the value is configured (file and key).
        source_desc: String,
        message: String,
    },
}

/// One provider the registry knows (built-in or from `models.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderInfo {
    /// Provider id (`anthropic`, `ollama`, …).
    pub id: String,
    /// Environment variables that hold its key, in priority order.
    pub env_keys: Vec<String>,
    /// The model pi selects at startup when this provider is the first with
    /// credentials (built-ins only).
    pub default_model: Option<String>,
    /// `true` for pi's built-in providers.
    pub builtin: bool,
    /// `models.json` `apiKey` (unresolved), if any.
    pub api_key: Option<String>,
    /// `models.json` `authHeader`: send the key as `Authorization: Bearer`.
    pub auth_header: bool,
}

/// The built-in providers in pi's startup preference order, with the
/// environment variables pi reads for them (pi's providers.md).
pub const BUILTIN_ENV_KEYS: &[(&str, &[&str])] = &[
    ("anthropic", &["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"]),
    ("openai", &["OPENAI_API_KEY"]),
    ("deepseek", &["DEEPSEEK_API_KEY"]),
    ("google", &["GEMINI_API_KEY"]),
    ("openrouter", &["OPENROUTER_API_KEY"]),
    ("xai", &["XAI_API_KEY"]),
    ("groq", &["GROQ_API_KEY"]),
    ("cerebras", &["CEREBRAS_API_KEY"]),
    ("mistral", &["MISTRAL_API_KEY"]),
];

/// Every environment variable that may hold a provider key: the built-in
/// providers' variables and the `$NAME` / `${NAME}` references in
/// models.json (`apiKey`, header values) and auth.json (`key`) of
/// `agent_dir`. The sandbox withholds them from commands whatever their
/// name. Unreadable files add nothing.
pub fn key_variables(agent_dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = BUILTIN_ENV_KEYS
        .iter()
        .flat_map(|(_, vars)| vars.iter().map(|v| v.to_string()))
        .collect();
    // Bounded and never a FIFO, like every read of these files.
    let read = |name: &str| -> Value {
        crate::regular_file::read_config(&agent_dir.join(name), crate::regular_file::CONFIG_CAP)
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    };
    let mut values: Vec<String> = Vec::new();
    if let Some(Value::Object(providers)) = read("models.json").get("providers") {
        for p in providers.values() {
            if let Some(k) = p.get("apiKey").and_then(Value::as_str) {
                values.push(k.to_string());
            }
            if let Some(Value::Object(h)) = p.get("headers") {
                values.extend(h.values().filter_map(Value::as_str).map(str::to_string));
            }
        }
    }
    if let Value::Object(auth) = read("auth.json") {
        values.extend(
            auth.values()
                .filter_map(|e| e.get("key").and_then(Value::as_str))
                .map(str::to_string),
        );
    }
    static VAR: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    if let Some(re) = VAR
        .get_or_init(|| regex::Regex::new(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?").ok())
        .as_ref()
    {
        for v in &values {
            for c in re.captures_iter(v) {
                let name = c[1].to_string();
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    out
}

pub use builtin::BUILTIN_MODELS_JSON;

/// A list of models with pi's JSON object for each (same index).
#[derive(Debug, Clone, Default)]
struct Models {
    models: Vec<Model>,
    raw: Vec<RawSlot>,
}

/// The models of a provider nobody configured.
static NO_MODELS: Models = Models {
    models: Vec::new(),
    raw: Vec::new(),
};

impl Models {
    fn index_of(&self, provider: &str, id: &str) -> Option<usize> {
        self.models
            .iter()
            .position(|m| m.provider == provider && m.id == id)
    }

    /// Appends (or replaces, by provider and id) one model given as pi JSON.
    fn push_raw(&mut self, raw: Map<String, Value>) -> Option<usize> {
        let model: Model = serde_json::from_value(Value::Object(raw.clone())).ok()?;
        if let Some(i) = self.index_of(&model.provider, &model.id) {
            self.models[i] = model;
            self.raw[i] = RawSlot::owned(raw);
            return Some(i);
        }
        // Keep a provider's models together: insert after its last model.
        let at = self
            .models
            .iter()
            .rposition(|m| m.provider == model.provider)
            .map(|i| i + 1)
            .unwrap_or(self.models.len());
        self.models.insert(at, model);
        self.raw.insert(at, RawSlot::owned(raw));
        Some(at)
    }

    /// Re-derives the typed model at `i` after its JSON changed.
    fn set_raw(&mut self, i: usize, raw: Map<String, Value>) {
        if let Ok(m) = serde_json::from_value::<Model>(Value::Object(raw.clone())) {
            self.models[i] = m;
            self.raw[i] = RawSlot::owned(raw);
        }
    }

    fn raw_at(&self, i: usize) -> &Map<String, Value> {
        self.raw[i].get()
    }
}

/// The models pi knows, with the files that configure them.
///
/// Models are built from the compiled-in catalogue and `models.json` only
/// when asked for: a run that names its model (`provider` and id) builds
/// that provider's models alone ([`ModelRegistry::model`],
/// [`ModelRegistry::provider_models`]); listing, fuzzy matching and
/// [`ModelRegistry::all`] build the whole list once, in the same order and
/// with the same content as the per-provider lists.
#[derive(Debug, Clone)]
pub struct ModelRegistry {
    providers: Vec<ProviderInfo>,
    /// Each provider's own models (same index as `providers`), built on
    /// first use while `all` is not built.
    groups: Vec<std::sync::OnceLock<Models>>,
    /// Every model, grouped by provider in `providers` order.
    all: std::sync::OnceLock<Models>,
    /// The validated `models.json` provider entries, in file order,
    /// applied whenever models are built.
    custom: Vec<(String, Map<String, Value>)>,
    /// A `models.json` override sets some model's `provider`: that model
    /// may sit among another provider's models, so look-ups by provider
    /// search the whole list.
    moved: bool,
    auth: AuthFile,
    env: HashMap<String, String>,
    agent_dir: PathBuf,
}

impl ModelRegistry {
    /// Built-ins plus `<agent_dir>/models.json` and `<agent_dir>/auth.json`,
    /// with the process environment. A malformed `models.json` or
    /// `auth.json` is an error (see [`ModelRegistry::load_lenient`] for pi's
    /// warn-and-continue behaviour).
    pub fn load(agent_dir: &Path) -> Result<Self, ModelError> {
        Self::load_with_env(agent_dir, std::env::vars().collect())
    }

    /// [`ModelRegistry::load`] with an explicit environment (tests, or a
    /// caller that filters the environment).
    pub fn load_with_env(
        agent_dir: &Path,
        env: HashMap<String, String>,
    ) -> Result<Self, ModelError> {
        let mut reg = Self::builtin_with_env(agent_dir, env);
        reg.auth = AuthFile::load(&agent_dir.join("auth.json"))?;
        let path = agent_dir.join("models.json");
        if let Some(file) = models_json::read(&path)? {
            models_json::apply(&mut reg, &file, &path)?;
        }
        Ok(reg)
    }

    /// Like pi: a broken `models.json` is reported and only the built-in
    /// models are used; a broken `auth.json` is reported and ignored.
    /// Returns the registry and the problems found.
    pub fn load_lenient(agent_dir: &Path, env: HashMap<String, String>) -> (Self, Vec<ModelError>) {
        let mut errors = Vec::new();
        let mut reg = Self::builtin_with_env(agent_dir, env);
        match AuthFile::load(&agent_dir.join("auth.json")) {
            Ok(a) => reg.auth = a,
            Err(e) => errors.push(e),
        }
        let path = agent_dir.join("models.json");
        match models_json::read(&path) {
            Ok(Some(file)) => {
                let mut trial = reg.clone();
                match models_json::apply(&mut trial, &file, &path) {
                    Ok(()) => reg = trial,
                    Err(e) => errors.push(e),
                }
            }
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
        (reg, errors)
    }

    /// Only the built-in catalogue (no files read), with `env`.
    pub fn builtin_with_env(agent_dir: &Path, env: HashMap<String, String>) -> Self {
        let mut reg = ModelRegistry {
            providers: Vec::new(),
            groups: Vec::new(),
            all: std::sync::OnceLock::new(),
            custom: Vec::new(),
            moved: false,
            auth: AuthFile::default(),
            env,
            agent_dir: agent_dir.to_path_buf(),
        };
        for p in &builtin::PROVIDERS {
            let id = p.id.text();
            let env_keys = BUILTIN_ENV_KEYS
                .iter()
                .find(|(k, _)| *k == id)
                .map(|(_, keys)| keys.iter().map(|k| k.to_string()).collect())
                .unwrap_or_default();
            reg.add_provider(ProviderInfo {
                id: id.to_string(),
                env_keys,
                default_model: Some(p.default_model.text().to_string()),
                builtin: true,
                api_key: None,
                auth_header: false,
            });
        }
        reg
    }

    /// The models of every provider (`only: None`) or of provider `only`:
    /// the built-in catalogue's, then each `models.json` entry applied in
    /// file order.
    fn build(&self, only: Option<&str>) -> Models {
        let mut out = Models::default();
        if only.is_none() {
            out.models.reserve(builtin::MODELS.len());
            out.raw.reserve(builtin::MODELS.len());
        }
        for (pi, p) in builtin::PROVIDERS.iter().enumerate() {
            if only.is_some_and(|o| o != p.id.text()) {
                continue;
            }
            // Built-ins are unique and grouped by provider already: append
            // the typed model; pi's full object is parsed on demand.
            for (mi, m) in (p.models.0..).zip(p.models()) {
                out.models.push(m.to_model(p));
                out.raw.push(RawSlot::builtin(pi, mi));
            }
        }
        for (pid, p) in &self.custom {
            if only.is_some_and(|o| o != pid) {
                continue;
            }
            let builtin = self.providers.iter().any(|i| &i.id == pid && i.builtin);
            models_json::apply_models(&mut out, pid, p, builtin);
        }
        out
    }

    /// Every model, built on first use.
    fn everything(&self) -> &Models {
        self.all.get_or_init(|| self.build(None))
    }

    /// Where the models of provider `id` are: the whole list once built
    /// (or when an override moved a model), else the provider's own list,
    /// built on first use.
    fn models_for(&self, id: &str) -> &Models {
        if self.moved {
            return self.everything();
        }
        if let Some(all) = self.all.get() {
            return all;
        }
        match self.providers.iter().position(|p| p.id == id) {
            Some(i) => self.groups[i].get_or_init(|| self.build(Some(id))),
            None => &NO_MODELS,
        }
    }

    /// The providers whose own lists were built, and whether the whole
    /// list was.
    #[cfg(test)]
    pub(crate) fn built(&self) -> (Vec<&str>, bool) {
        let groups = self.providers.iter().zip(&self.groups);
        (
            groups
                .filter(|(_, g)| g.get().is_some())
                .map(|(p, _)| p.id.as_str())
                .collect(),
            self.all.get().is_some(),
        )
    }

    /// Records a validated `models.json` provider entry (its provider is
    /// already known); what was built so far is rebuilt with it.
    fn add_custom(&mut self, pid: &str, p: &Map<String, Value>) {
        if let Some(Value::Object(ov)) = p.get("modelOverrides") {
            self.moved |= ov.values().any(|o| o.get("provider").is_some());
        }
        self.custom.push((pid.to_string(), p.clone()));
        self.all = std::sync::OnceLock::new();
        for g in &mut self.groups {
            *g = std::sync::OnceLock::new();
        }
    }

    pub(crate) fn provider_mut(&mut self, id: &str) -> Option<&mut ProviderInfo> {
        self.providers.iter_mut().find(|p| p.id == id)
    }

    pub(crate) fn add_provider(&mut self, info: ProviderInfo) {
        self.providers.push(info);
        self.groups.push(std::sync::OnceLock::new());
    }

    pub(crate) fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// pi's JSON object for the model `provider`/`id`.
    fn raw_of(&self, provider: &str, id: &str) -> Option<&Map<String, Value>> {
        let models = self.models_for(provider);
        models.index_of(provider, id).map(|i| models.raw_at(i))
    }

    /// Every model, built-in and custom, grouped by provider (built on
    /// first use).
    pub fn all(&self) -> &[Model] {
        &self.everything().models
    }

    /// The models of provider `id` (exact), in registry order, without
    /// building any other provider's models.
    pub fn provider_models<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Model> + 'a {
        self.models_for(id)
            .models
            .iter()
            .filter(move |m| m.provider == id)
    }

    /// The model `provider`/`id` (both exact), building no other
    /// provider's models.
    pub fn model(&self, provider: &str, id: &str) -> Option<&Model> {
        self.models_for(provider)
            .models
            .iter()
            .find(|m| m.provider == provider && m.id == id)
    }

    /// The models of every provider named `id` in any case (how
    /// `--provider` filters), in registry order.
    pub(crate) fn models_ignore_case(&self, id: &str) -> Vec<&Model> {
        if self.moved || self.all.get().is_some() {
            return self
                .all()
                .iter()
                .filter(|m| m.provider.eq_ignore_ascii_case(id))
                .collect();
        }
        self.providers
            .iter()
            .filter(|p| p.id.eq_ignore_ascii_case(id))
            .flat_map(|p| self.provider_models(&p.id))
            .collect()
    }

    /// Every known provider (built-ins in pi's preference order, then
    /// `models.json` providers in file order).
    pub fn providers(&self) -> &[ProviderInfo] {
        &self.providers
    }

    /// The provider named `id` (case-insensitive, as pi's `--provider`).
    pub fn provider(&self, id: &str) -> Option<&ProviderInfo> {
        self.providers.iter().find(|p| p.id == id).or_else(|| {
            self.providers
                .iter()
                .find(|p| p.id.eq_ignore_ascii_case(id))
        })
    }

    /// The agent directory the registry was loaded from.
    pub fn agent_dir(&self) -> &Path {
        &self.agent_dir
    }

    /// The parsed `auth.json`.
    pub fn auth(&self) -> &AuthFile {
        &self.auth
    }

    /// pi's JSON object for `model` (the shape `get_available_models`
    /// answers with; `headers` are not part of it, as in pi).
    pub fn pi_json(&self, model: &Model) -> Option<Map<String, Value>> {
        let mut raw = self.raw_of(&model.provider, &model.id)?.clone();
        raw.shift_remove("headers");
        Some(raw)
    }

    /// The model's `thinkingLevelMap` (`null` entries mark unsupported
    /// levels), if it has one.
    pub fn thinking_level_map(&self, model: &Model) -> Option<&Map<String, Value>> {
        self.raw_of(&model.provider, &model.id)?
            .get("thinkingLevelMap")
            .and_then(Value::as_object)
    }

    /// Finds a model like pi's `--model` (with `--provider` when given):
    /// exact id, `provider/id`, then a case-insensitive substring of id or
    /// name. No thinking suffix and no "custom model id" fallback here; see
    /// [`resolve_selection`] for the full CLI behaviour.
    pub fn find(&self, provider: Option<&str>, model: &str) -> Result<Model, ModelError> {
        if let Some(p) = provider {
            if self.provider(p).is_none() {
                return Err(ModelError::UnknownProvider(p.to_string()));
            }
        }
        match select::match_pattern(self, model, provider)? {
            Some(m) => Ok(m),
            None => Err(ModelError::UnknownModel(model.to_string())),
        }
    }

    /// True when the provider has any credential pi would count: an
    /// `auth.json` entry (API key or OAuth), a `models.json` `apiKey`, or a
    /// non-empty environment variable. `--list-models` and fuzzy matching
    /// only consider models of such providers.
    pub fn has_credentials(&self, provider: &str) -> bool {
        if self.auth.get(provider).is_some() {
            return true;
        }
        let Some(p) = self.provider(provider) else {
            return false;
        };
        p.api_key.is_some() || p.env_keys.iter().any(|k| self.env_var(k).is_some())
    }

    /// Models whose provider has credentials, in registry order.
    pub fn available(&self) -> Vec<&Model> {
        self.all()
            .iter()
            .filter(|m| self.has_credentials(&m.provider))
            .collect()
    }

    /// The key for `provider`, in pi's order: `cli_key` (`--api-key`, only
    /// pass it for the selected model's provider) → `auth.json` `api_key`
    /// → `models.json` `apiKey` → environment. `$VAR`/`${VAR}` and
    /// `!command` values are resolved. `Ok(None)` when nothing is
    /// configured; an `auth.json` OAuth login with no other source is
    /// [`ModelError::OAuthUnsupported`].
    pub fn api_key(
        &self,
        provider: &str,
        cli_key: Option<&str>,
    ) -> Result<Option<String>, ModelError> {
        if let Some(k) = cli_key.filter(|k| !k.is_empty()) {
            return Ok(Some(k.to_string()));
        }
        let auth_path = self.agent_dir.join("auth.json");
        let mut oauth = false;
        match self.auth.get(provider) {
            Some(AuthEntry::ApiKey { key, .. }) => {
                let desc = format!("{} ({provider}.key)", auth_path.display());
                return auth::resolve_value(key, &self.env, &desc, true).map(Some);
            }
            Some(AuthEntry::OAuth(_)) => oauth = true,
            Some(AuthEntry::Other(_)) | None => {}
        }
        let p = self.provider(provider);
        if let Some(key) = p.and_then(|p| p.api_key.as_deref()) {
            let desc = format!(
                "{} (providers.{provider}.apiKey)",
                self.agent_dir.join("models.json").display()
            );
            return auth::resolve_value(key, &self.env, &desc, false).map(Some);
        }
        if let Some(p) = p {
            for k in &p.env_keys {
                if let Some(v) = self.env_var(k) {
                    return Ok(Some(v.to_string()));
                }
            }
        }
        if oauth {
            return Err(ModelError::OAuthUnsupported {
                provider: provider.to_string(),
                path: auth_path,
            });
        }
        Ok(None)
    }

    /// A hint naming where a key for `provider` can go (for error messages).
    pub fn key_hint(&self, provider: &str) -> String {
        let auth = self.agent_dir.join("auth.json");
        match self.provider(provider).map(|p| p.env_keys.as_slice()) {
            Some([.., last]) => format!(
                "{last} or add {{\"{provider}\": {{\"type\": \"api_key\", \"key\": \"…\"}}}} to {}",
                auth.display()
            ),
            _ => format!(
                "\"apiKey\" for provider \"{provider}\" in {} or add an api_key entry to {}",
                self.agent_dir.join("models.json").display(),
                auth.display()
            ),
        }
    }

    /// `model` with its header values resolved (`$VAR`, `!command`) and,
    /// when the provider sets `authHeader`, `Authorization: Bearer <key>`
    /// added. Call before handing the model to a provider.
    pub fn resolve_headers(
        &self,
        model: &Model,
        api_key: Option<&str>,
    ) -> Result<Model, ModelError> {
        let mut out = model.clone();
        let models_path = self.agent_dir.join("models.json");
        if let Some(h) = &mut out.headers {
            for (name, v) in h.iter_mut() {
                if let Value::String(s) = v {
                    let desc = format!(
                        "{} (providers.{}.headers.{name})",
                        models_path.display(),
                        model.provider
                    );
                    *s = auth::resolve_value(s, &self.env, &desc, false)?;
                }
            }
        }
        let auth_header = self
            .provider(&model.provider)
            .map(|p| p.auth_header)
            .unwrap_or(false);
        if let (true, Some(key)) = (auth_header, api_key) {
            out.headers
                .get_or_insert_with(Map::new)
                .insert("Authorization".into(), format!("Bearer {key}").into());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg() -> ModelRegistry {
        ModelRegistry::builtin_with_env(Path::new("/nonexistent"), HashMap::new())
    }

    #[test]
    fn catalogue_parses_and_has_every_provider() {
        let r = reg();
        assert!(r.all().len() > 500, "{}", r.all().len());
        for (p, _) in BUILTIN_ENV_KEYS {
            assert!(r.all().iter().any(|m| m.provider == *p), "{p}");
            let info = r.provider(p).expect("provider");
            let def = info.default_model.as_deref().expect("default");
            assert!(
                r.all().iter().any(|m| m.provider == *p && m.id == def),
                "{p}/{def}"
            );
        }
    }

    #[test]
    fn builtin_numbers_are_sane() {
        for m in reg().all() {
            assert!(m.context_window >= 1000, "{}/{}", m.provider, m.id);
            assert!(m.max_tokens > 0, "{}/{}", m.provider, m.id);
            assert!(
                m.input.iter().any(|i| i == "text"),
                "{}/{}",
                m.provider,
                m.id
            );
            assert!(
                m.base_url.starts_with("https://"),
                "{}/{}",
                m.provider,
                m.id
            );
            assert!(m.cost.input >= 0.0 && m.cost.output >= 0.0);
        }
        let r = reg();
        let gpt4o = r.find(Some("openai"), "gpt-4o").expect("gpt-4o");
        assert_eq!(gpt4o.api, "openai-responses");
        assert_eq!(gpt4o.base_url, "https://api.openai.com/v1");
        assert_eq!(gpt4o.cost.input, 2.5);
        assert_eq!(gpt4o.context_window, 128000);
        assert_eq!(gpt4o.max_tokens, 16384);
        assert!(!gpt4o.reasoning);
    }

    #[test]
    fn pi_json_keeps_fields_model_lacks() {
        let r = reg();
        let m = r.find(Some("deepseek"), "deepseek-v4-pro").expect("model");
        let tl = r.thinking_level_map(&m).expect("map");
        assert_eq!(tl.get("medium"), Some(&Value::Null));
        let j = r.pi_json(&m).expect("json");
        let keys: Vec<&str> = j.keys().map(String::as_str).take(5).collect();
        assert_eq!(keys, ["id", "name", "api", "provider", "baseUrl"]);
    }

    #[test]
    fn env_key_order_prefers_anthropic_oauth_token() {
        let env: HashMap<String, String> = [
            ("ANTHROPIC_API_KEY".to_string(), "key".to_string()),
            ("ANTHROPIC_OAUTH_TOKEN".to_string(), "tok".to_string()),
        ]
        .into();
        let r = ModelRegistry::builtin_with_env(Path::new("/x"), env);
        assert_eq!(
            r.api_key("anthropic", None).ok().flatten().as_deref(),
            Some("tok")
        );
        assert_eq!(r.api_key("openai", None).ok().flatten(), None);
        assert_eq!(
            r.api_key("openai", Some("cli")).ok().flatten().as_deref(),
            Some("cli")
        );
    }
    /// Overrides of built-in providers (provider-level `baseUrl` and
    /// `compat`, a replaced and a new model, `modelOverrides`) and custom
    /// providers, two of them differing only in case.
    const MODELS_JSON: &str = r#"{"providers":{
        "anthropic":{"baseUrl":"https://proxy.example/v1","compat":{"zzz":1},
            "models":[{"id":"claude-opus-4-6","name":"Replaced"},{"id":"new-one"}],
            "modelOverrides":{"claude-fable-5":{"cost":{"input":1}},"nope":{"name":"x"}}},
        "ollama":{"baseUrl":"http://l/v1","api":"openai-completions","apiKey":"k",
            "models":[{"id":"q"},{"id":"r","reasoning":true}]},
        "Ollama":{"baseUrl":"http://m/v1","api":"openai-completions","apiKey":"k",
            "models":[{"id":"q"}]},
        "openai":{"modelOverrides":{"gpt-4o":{"contextWindow":5}}}}}"#;

    fn with_models_json(json: &str) -> ModelRegistry {
        let path = Path::new("/agent/models.json");
        let mut r = ModelRegistry::builtin_with_env(Path::new("/agent"), HashMap::new());
        let file = models_json::parse(json, path).expect("parse");
        models_json::apply(&mut r, &file, path).expect("apply");
        r
    }

    fn with_objects<'a>(
        r: &ModelRegistry,
        models: impl Iterator<Item = &'a Model>,
    ) -> Vec<(Model, Option<Map<String, Value>>)> {
        models.map(|m| (m.clone(), r.pi_json(m))).collect()
    }

    #[test]
    fn a_provider_built_on_demand_equals_the_eager_list() {
        for json in ["{}", MODELS_JSON] {
            let eager = with_models_json(json);
            let all = eager.all();
            assert!(eager.built().1);
            for p in eager.providers() {
                let lazy = with_models_json(json);
                let got = with_objects(&lazy, lazy.provider_models(&p.id));
                let want = with_objects(&eager, all.iter().filter(|m| m.provider == p.id));
                assert!(!got.is_empty(), "{}", p.id);
                assert_eq!(got, want, "{}", p.id);
                assert_eq!(lazy.built(), (vec![p.id.as_str()], false));
            }
        }
    }

    #[test]
    fn all_after_a_lazy_find_equals_the_eager_list() {
        let eager = with_models_json(MODELS_JSON);
        let lazy = with_models_json(MODELS_JSON);
        assert!(lazy.model("anthropic", "claude-fable-5").is_some());
        assert!(lazy.model("ollama", "q").is_some());
        assert_eq!(lazy.built(), (vec!["anthropic", "ollama"], false));
        assert_eq!(lazy.all(), eager.all());
        assert_eq!(
            with_objects(&lazy, lazy.all().iter()),
            with_objects(&eager, eager.all().iter())
        );
        // Once the whole list is built, look-ups answer from it.
        let m = lazy.model("openai", "gpt-4o").expect("gpt-4o");
        assert_eq!(m.context_window, 5);
        assert_eq!(lazy.built(), (vec!["anthropic", "ollama"], true));
    }

    #[test]
    fn models_json_overrides_of_a_builtin_provider_apply_lazily() {
        let r = with_models_json(MODELS_JSON);
        let fable = r.model("anthropic", "claude-fable-5").expect("fable");
        assert_eq!(fable.cost.input, 1.0);
        assert_eq!(fable.base_url, "https://proxy.example/v1");
        assert_eq!(fable.compat_value("zzz"), Some(&Value::from(1)));
        assert_eq!(
            r.model("anthropic", "claude-opus-4-6")
                .map(|m| m.name.as_str()),
            Some("Replaced")
        );
        let new = r.model("anthropic", "new-one").expect("new");
        assert_eq!(new.api, "anthropic-messages");
        assert_eq!(new.base_url, "https://proxy.example/v1");
        let last = r.provider_models("anthropic").last().map(|m| m.id.as_str());
        assert_eq!(last, Some("new-one"));
        assert_eq!(
            r.pi_json(fable)
                .and_then(|j| j.get("cost").cloned())
                .map(|c| c["input"].clone()),
            Some(Value::from(1))
        );
        assert_eq!(r.built(), (vec!["anthropic"], false));
    }

    #[test]
    fn provider_patterns_ignore_case_as_on_the_eager_list() {
        let eager = with_models_json(MODELS_JSON);
        eager.all();
        for (p, pattern) in [
            ("ollama", "q"),
            ("OLLAMA", "r"),
            ("Ollama", "q"),
            ("anthropic", "opus"),
            ("openai", "nosuch"),
            ("nosuch", "q"),
        ] {
            let lazy = with_models_json(MODELS_JSON);
            assert_eq!(
                format!("{:?}", lazy.find(Some(p), pattern)),
                format!("{:?}", eager.find(Some(p), pattern)),
                "{p} {pattern}"
            );
            assert!(!lazy.built().1, "{p} {pattern}");
        }
    }

    /// An override that sets a model's `provider` leaves it among its
    /// provider's models: look-ups by provider then search the whole list.
    #[test]
    fn an_override_moving_a_model_is_found_where_the_eager_list_has_it() {
        let json = r#"{"providers":{"anthropic":{"modelOverrides":{"claude-fable-5":{"provider":"openai"}}}}}"#;
        let eager = with_models_json(json);
        let want = eager
            .all()
            .iter()
            .find(|m| m.provider == "openai" && m.id == "claude-fable-5")
            .cloned();
        assert!(want.is_some());
        let lazy = with_models_json(json);
        assert_eq!(lazy.model("openai", "claude-fable-5").cloned(), want);
        assert_eq!(lazy.model("anthropic", "claude-fable-5"), None);
    }
}
