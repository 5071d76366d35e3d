//! `<agentDir>/models.json`: custom providers and models, and overrides of
//! built-in ones, as pi 1.6.0's models.md / models-configuration.md document
//! them and as pi's `get_available_models` shows the result.
//!
//! ```json
//! {"providers": {
//!   "ollama": {"baseUrl": "http://localhost:11434/v1", "api": "openai-completions",
//!              "apiKey": "ollama", "compat": {"supportsDeveloperRole": false},
//!              "models": [{"id": "qwen2.5-coder:7b", "contextWindow": 32768}]},
//!   "anthropic": {"baseUrl": "https://proxy.example/v1",
//!                 "modelOverrides": {"claude-opus-4-6": {"cost": {"input": 1}}}}}}
//! ```
//!
//! Rules (each checked against pi 1.6.0):
//! * The file may hold `//` line comments and trailing commas (pi accepts
//!   both; `/* */` comments are an error, as in pi). Unknown fields are
//!   ignored.
//! * Provider fields: `name`, `baseUrl`, `apiKey`, `api`, `headers`,
//!   `compat`, `authHeader`, `models[]`, `modelOverrides{id: partial}`.
//! * A built-in provider's `baseUrl` and `headers` apply to all its models;
//!   its `compat` is merged over each model's compat (provider keys win).
//! * `models[]` entries add a model or replace the one with the same id.
//!   Defaults: `name` = id, `api`/`baseUrl` = the provider's (for a built-in
//!   provider, its built-in api/baseUrl unless overridden), `reasoning`
//!   false, `input` `["text"]`, `cost` all 0, `contextWindow` 128000,
//!   `maxTokens` 16384; `compat` = provider compat with the model's merged
//!   over it. A model of a new provider without an `api` anywhere is an
//!   error (pi: `no "api" specified. Set at provider or model level.`).
//! * `modelOverrides` patch existing models: object fields (`cost`,
//!   `compat`, `headers`, …) merge field by field, other fields replace.
//!   Unknown ids are ignored.
//! * `contextWindow`/`maxTokens` must be > 0; `cost` needs all four prices.

use std::path::Path;

use serde_json::{Map, Value};

use super::{auth::json_error, ModelError, ModelRegistry, Models, ProviderInfo};

/// Default context window of a `models.json` model.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// Default max output tokens of a `models.json` model.
pub const DEFAULT_MAX_TOKENS: u64 = 16_384;

/// Optional pi model fields copied through from `models.json` entries.
const PASS_THROUGH: &[&str] = &[
    "thinkingLevelMap",
    "inputLimits",
    "promptCache",
    "samplingParams",
    "samplingParamsByThinkingLevel",
];

/// Reads and parses `path` (`None` when it does not exist or is blank);
/// only a regular file of at most [`crate::regular_file::CONFIG_CAP`].
pub fn read(path: &Path) -> Result<Option<Map<String, Value>>, ModelError> {
    let text = match crate::regular_file::read_config(path, crate::regular_file::CONFIG_CAP) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(None),
        Err(e) => {
            return Err(ModelError::Io {
                path: path.to_path_buf(),
                source: e.into(),
            })
        }
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    parse(&text, path).map(Some)
}

/// Parses `models.json` text (JSON with `//` comments and trailing commas).
/// Errors carry the line and column of the original text.
pub fn parse(text: &str, path: &Path) -> Result<Map<String, Value>, ModelError> {
    let clean = strip_jsonc(text);
    match serde_json::from_str::<Value>(&clean) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(schema(path, "(root)", "must be a JSON object")),
        Err(e) => Err(json_error(path, &e)),
    }
}

/// Blanks `//` comments and trailing commas (outside strings) with spaces,
/// so byte positions — and serde_json's line:column — stay those of the
/// original text.
pub fn strip_jsonc(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            b',' => {
                // Trailing comma: only whitespace or comments before `]`/`}`.
                let mut j = i + 1;
                loop {
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if b.get(j) == Some(&b'/') && b.get(j + 1) == Some(&b'/') {
                        while j < b.len() && b[j] != b'\n' {
                            j += 1;
                        }
                        continue;
                    }
                    break;
                }
                if matches!(b.get(j), Some(b']') | Some(b'}')) {
                    out[i] = b' ';
                }
            }
            _ => {}
        }
        i += 1;
    }
    // Only ASCII bytes were replaced by ASCII spaces, outside multi-byte
    // sequences, so this stays valid UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

fn schema(path: &Path, at: &str, message: &str) -> ModelError {
    ModelError::Schema {
        path: path.to_path_buf(),
        at: at.to_string(),
        message: message.to_string(),
    }
}

fn check_type(
    path: &Path,
    at: &str,
    v: Option<&Value>,
    want: &str,
    ok: fn(&Value) -> bool,
) -> Result<(), ModelError> {
    match v {
        Some(v) if !ok(v) => Err(schema(path, at, &format!("must be {want}"))),
        _ => Ok(()),
    }
}

fn check_model_fields(path: &Path, at: &str, m: &Map<String, Value>) -> Result<(), ModelError> {
    let f = |k: &str| format!("{at}.{k}");
    check_type(
        path,
        &f("name"),
        m.get("name"),
        "a string",
        Value::is_string,
    )?;
    check_type(path, &f("api"), m.get("api"), "a string", Value::is_string)?;
    check_type(
        path,
        &f("baseUrl"),
        m.get("baseUrl"),
        "a string",
        Value::is_string,
    )?;
    check_type(
        path,
        &f("reasoning"),
        m.get("reasoning"),
        "a boolean",
        Value::is_boolean,
    )?;
    check_type(
        path,
        &f("headers"),
        m.get("headers"),
        "an object",
        Value::is_object,
    )?;
    check_type(
        path,
        &f("compat"),
        m.get("compat"),
        "an object",
        Value::is_object,
    )?;
    check_type(
        path,
        &f("cost"),
        m.get("cost"),
        "an object",
        Value::is_object,
    )?;
    if let Some(Value::Object(h)) = m.get("headers") {
        for (k, v) in h {
            check_type(
                path,
                &f(&format!("headers.{k}")),
                Some(v),
                "a string",
                Value::is_string,
            )?;
        }
    }
    if let Some(v) = m.get("input") {
        let ok = v
            .as_array()
            .map(|a| {
                a.iter()
                    .all(|x| matches!(x.as_str(), Some("text") | Some("image")))
            })
            .unwrap_or(false);
        if !ok {
            return Err(schema(
                path,
                &f("input"),
                "must be an array of \"text\" and \"image\"",
            ));
        }
    }
    for k in ["contextWindow", "maxTokens"] {
        if let Some(v) = m.get(k) {
            match v.as_f64() {
                Some(n) if n > 0.0 => {}
                Some(_) => return Err(schema(path, &f(k), "must be > 0")),
                None => return Err(schema(path, &f(k), "must be a number")),
            }
        }
    }
    if let Some(Value::Object(c)) = m.get("cost") {
        for k in ["input", "output", "cacheRead", "cacheWrite"] {
            check_type(
                path,
                &f(&format!("cost.{k}")),
                c.get(k),
                "a number",
                Value::is_number,
            )?;
        }
    }
    Ok(())
}

/// Applies a parsed `models.json` (`file`, read from `path`) to `reg`:
/// provider keys and new providers at once, each entry's models whenever
/// models are built. Validation happens first: on error nothing is applied.
pub fn apply(
    reg: &mut ModelRegistry,
    file: &Map<String, Value>,
    path: &Path,
) -> Result<(), ModelError> {
    let providers = match file.get("providers") {
        None => return Ok(()),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(schema(path, "providers", "must be an object")),
    };
    // Validate everything first.
    for (pid, pv) in providers {
        let at = format!("providers.{pid}");
        let Value::Object(p) = pv else {
            return Err(schema(path, &at, "must be an object"));
        };
        let f = |k: &str| format!("{at}.{k}");
        for k in ["name", "baseUrl", "apiKey", "api"] {
            check_type(path, &f(k), p.get(k), "a string", Value::is_string)?;
        }
        check_type(
            path,
            &f("headers"),
            p.get("headers"),
            "an object",
            Value::is_object,
        )?;
        check_type(
            path,
            &f("compat"),
            p.get("compat"),
            "an object",
            Value::is_object,
        )?;
        check_type(
            path,
            &f("authHeader"),
            p.get("authHeader"),
            "a boolean",
            Value::is_boolean,
        )?;
        check_type(
            path,
            &f("models"),
            p.get("models"),
            "an array",
            Value::is_array,
        )?;
        check_type(
            path,
            &f("modelOverrides"),
            p.get("modelOverrides"),
            "an object",
            Value::is_object,
        )?;
        let builtin = reg.provider(pid).map(|i| i.builtin).unwrap_or(false);
        if let Some(Value::Array(models)) = p.get("models") {
            for (i, mv) in models.iter().enumerate() {
                let mat = format!("{at}.models.{i}");
                let Value::Object(m) = mv else {
                    return Err(schema(path, &mat, "must be an object"));
                };
                match m.get("id") {
                    Some(Value::String(s)) if !s.is_empty() => {}
                    _ => {
                        return Err(schema(
                            path,
                            &format!("{mat}.id"),
                            "required (a non-empty string)",
                        ))
                    }
                }
                check_model_fields(path, &mat, m)?;
                let id = m.get("id").and_then(Value::as_str).unwrap_or("");
                if !builtin {
                    if m.get("api").or(p.get("api")).is_none() {
                        return Err(schema(
                            path,
                            &at,
                            &format!("Provider {pid}, model {id}: no \"api\" specified. Set at provider or model level."),
                        ));
                    }
                    if m.get("baseUrl").or(p.get("baseUrl")).is_none() {
                        return Err(schema(
                            path,
                            &at,
                            &format!("Provider {pid}, model {id}: no \"baseUrl\" specified. Set at provider or model level."),
                        ));
                    }
                }
            }
        }
        if let Some(Value::Object(ov)) = p.get("modelOverrides") {
            for (id, o) in ov {
                let oat = format!("{at}.modelOverrides.{id}");
                let Value::Object(o) = o else {
                    return Err(schema(path, &oat, "must be an object"));
                };
                check_model_fields(path, &oat, o)?;
            }
        }
    }
    for (pid, pv) in providers {
        if let Value::Object(p) = pv {
            apply_provider(reg, pid, p);
            reg.add_custom(pid, p);
        }
    }
    Ok(())
}

/// The provider-level settings of an entry: `apiKey` and `authHeader` of
/// a built-in provider, or a new provider. Its models are applied when
/// models are built ([`apply_models`]).
fn apply_provider(reg: &mut ModelRegistry, pid: &str, p: &Map<String, Value>) {
    let api_key = p.get("apiKey").and_then(Value::as_str).map(str::to_string);
    let auth_header = p
        .get("authHeader")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match reg.provider_mut(pid) {
        Some(info) => {
            if api_key.is_some() {
                info.api_key = api_key;
            }
            info.auth_header = auth_header;
        }
        None => reg.add_provider(ProviderInfo {
            id: pid.to_string(),
            env_keys: Vec::new(),
            default_model: None,
            builtin: false,
            api_key,
            auth_header,
        }),
    }
}

/// Applies the entry of provider `pid` to `list`: for a `builtin`
/// provider, `baseUrl`, `headers` and `compat` to its existing models;
/// then `models[]` and `modelOverrides`.
pub(super) fn apply_models(list: &mut Models, pid: &str, p: &Map<String, Value>, builtin: bool) {
    let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
    let p_headers = p.get("headers").and_then(Value::as_object);
    let p_compat = p.get("compat").and_then(Value::as_object);

    // Defaults for new models: the built-in provider's api/baseUrl.
    let mut base_api = None;
    let mut base_url = None;
    if builtin {
        if let Some(first) = list.models.iter().find(|m| m.provider == pid) {
            base_api = Some(first.api.clone());
            base_url = Some(first.base_url.clone());
        }
        // Provider-level changes to the existing (built-in) models.
        let idx: Vec<usize> = (0..list.models.len())
            .filter(|&i| list.models[i].provider == pid)
            .collect();
        for i in idx {
            let mut raw = list.raw_at(i).clone();
            if let Some(u) = s("baseUrl") {
                raw.insert("baseUrl".into(), u.into());
            }
            if let Some(h) = p_headers {
                merge_object_field(&mut raw, "headers", h);
            }
            if let Some(c) = p_compat {
                merge_object_field(&mut raw, "compat", c);
            }
            list.set_raw(i, raw);
        }
    }
    let api = s("api").or(base_api);
    let url = s("baseUrl").or(base_url);

    if let Some(Value::Array(models)) = p.get("models") {
        for mv in models {
            if let Value::Object(m) = mv {
                let raw = custom_model(pid, m, api.as_deref(), url.as_deref(), p_headers, p_compat);
                list.push_raw(raw);
            }
        }
    }
    if let Some(Value::Object(ov)) = p.get("modelOverrides") {
        for (id, o) in ov {
            let Some(i) = list
                .models
                .iter()
                .position(|m| m.provider == pid && &m.id == id)
            else {
                continue; // unknown ids are ignored, as in pi
            };
            let Value::Object(o) = o else { continue };
            let mut raw = list.raw_at(i).clone();
            for (k, v) in o {
                match (raw.get_mut(k), v) {
                    (Some(Value::Object(base)), Value::Object(patch)) => {
                        for (pk, pv) in patch {
                            base.insert(pk.clone(), pv.clone());
                        }
                    }
                    _ => {
                        raw.insert(k.clone(), v.clone());
                    }
                }
            }
            list.set_raw(i, raw);
        }
    }
}

/// `raw[key]` = `patch` merged over the existing object (patch wins).
fn merge_object_field(raw: &mut Map<String, Value>, key: &str, patch: &Map<String, Value>) {
    let mut merged = raw
        .get(key)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in patch {
        merged.insert(k.clone(), v.clone());
    }
    raw.insert(key.into(), Value::Object(merged));
}

/// A `models[]` entry as pi's full Model object, defaults filled in.
fn custom_model(
    provider: &str,
    m: &Map<String, Value>,
    api: Option<&str>,
    base_url: Option<&str>,
    p_headers: Option<&Map<String, Value>>,
    p_compat: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let id = m.get("id").cloned().unwrap_or(Value::Null);
    let mut raw = Map::new();
    raw.insert("id".into(), id.clone());
    raw.insert("name".into(), m.get("name").cloned().unwrap_or(id));
    raw.insert(
        "api".into(),
        m.get("api")
            .cloned()
            .unwrap_or_else(|| api.unwrap_or("").into()),
    );
    raw.insert("provider".into(), provider.into());
    raw.insert(
        "baseUrl".into(),
        m.get("baseUrl")
            .cloned()
            .unwrap_or_else(|| base_url.unwrap_or("").into()),
    );
    raw.insert(
        "reasoning".into(),
        m.get("reasoning").cloned().unwrap_or(Value::Bool(false)),
    );
    raw.insert(
        "input".into(),
        m.get("input")
            .cloned()
            .unwrap_or_else(|| Value::Array(vec!["text".into()])),
    );
    raw.insert(
        "cost".into(),
        m.get("cost").cloned().unwrap_or_else(
            || serde_json::json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}),
        ),
    );
    raw.insert(
        "contextWindow".into(),
        m.get("contextWindow")
            .cloned()
            .unwrap_or_else(|| DEFAULT_CONTEXT_WINDOW.into()),
    );
    raw.insert(
        "maxTokens".into(),
        m.get("maxTokens")
            .cloned()
            .unwrap_or_else(|| DEFAULT_MAX_TOKENS.into()),
    );
    for k in PASS_THROUGH {
        if let Some(v) = m.get(*k) {
            raw.insert((*k).into(), v.clone());
        }
    }
    let mut headers = p_headers.cloned().unwrap_or_default();
    if let Some(Value::Object(h)) = m.get("headers") {
        for (k, v) in h {
            headers.insert(k.clone(), v.clone());
        }
    }
    if !headers.is_empty() {
        raw.insert("headers".into(), Value::Object(headers));
    }
    let mut compat = p_compat.cloned().unwrap_or_default();
    if let Some(Value::Object(c)) = m.get("compat") {
        for (k, v) in c {
            compat.insert(k.clone(), v.clone());
        }
    }
    if !compat.is_empty() {
        raw.insert("compat".into(), Value::Object(compat));
    }
    raw
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn reg_with(json: &str) -> Result<ModelRegistry, ModelError> {
        let path = Path::new("/agent/models.json");
        let mut reg = ModelRegistry::builtin_with_env(Path::new("/agent"), HashMap::new());
        let file = parse(json, path)?;
        apply(&mut reg, &file, path)?;
        Ok(reg)
    }

    #[test]
    fn jsonc_comments_and_trailing_commas() {
        let s = strip_jsonc("{\"a\": \"//x\", // c\n \"b\": [1,2,],\n}");
        let v: Value = serde_json::from_str(&s).expect("parses");
        assert_eq!(v["a"], "//x");
        assert_eq!(v["b"], serde_json::json!([1, 2]));
        // Block comments stay an error, as in pi.
        assert!(parse("{/* c */}", Path::new("m.json")).is_err());
    }

    #[test]
    fn malformed_names_file_line_and_column() {
        let e =
            reg_with("{\n  \"providers\": {\n    \"x\": {\"baseUrl\":\"u\" \"api\":\"a\"}\n  }\n}")
                .expect_err("malformed");
        assert_eq!(
            e.to_string(),
            "/agent/models.json:3:25: invalid JSON: expected `,` or `}`"
        );
    }

    #[test]
    fn custom_provider_defaults() {
        let r = reg_with(
            r#"{"providers":{"ollama":{"baseUrl":"http://l/v1","api":"openai-completions","apiKey":"k",
                "models":[{"id":"q"}]}}}"#,
        )
        .expect("ok");
        let m = r.find(Some("ollama"), "q").expect("q");
        assert_eq!(m.name, "q");
        assert_eq!(m.context_window, DEFAULT_CONTEXT_WINDOW);
        assert_eq!(m.max_tokens, DEFAULT_MAX_TOKENS);
        assert_eq!(m.input, vec!["text".to_string()]);
        assert!(!m.reasoning);
        assert_eq!(m.base_url, "http://l/v1");
    }

    #[test]
    fn validation_errors_use_pi_paths() {
        let e = reg_with(r#"{"providers":{"m":{"baseUrl":"u","models":[{"id":"a"}]}}}"#)
            .expect_err("no api");
        assert!(e.to_string().contains("no \"api\" specified"), "{e}");
        let e = reg_with(
            r#"{"providers":{"m":{"baseUrl":"u","api":"x","models":[{"id":"a","contextWindow":0}]}}}"#,
        )
        .expect_err("zero");
        assert_eq!(
            e.to_string(),
            "/agent/models.json: providers.m.models.0.contextWindow: must be > 0"
        );
    }

    #[test]
    fn builtin_compat_merges_provider_over_model() {
        let r = reg_with(
            r#"{"providers":{"anthropic":{"compat":{"supportsStrictTools":false,"zzz":1}}}}"#,
        )
        .expect("ok");
        let m = r.find(Some("anthropic"), "claude-fable-5").expect("m");
        assert!(!m.compat_flag("supportsStrictTools"));
        assert_eq!(m.compat_value("zzz"), Some(&Value::from(1)));
        assert!(m.compat_flag("forceAdaptiveThinking"));
    }
}
