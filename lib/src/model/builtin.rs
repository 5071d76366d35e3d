//! The compiled-in model catalogue (`builtin-models.json`, pi 1.6.0's bundled
//! models) as typed tables. `build.rs` reads the JSON once at build time and
//! emits `PROVIDERS`, `MODELS` and `COMPAT`, whose strings are byte spans into
//! the catalogue text (no pointers, so no start-up relocations), so building
//! the model list at start is a walk over arrays instead of a parse of 280 KB
//! of JSON — that parse was a fifth of `pi-run --mode rpc`'s start-up CPU.
//! pi's full JSON object for a model (with `thinkingLevelMap`, `cost.tiers`,
//! `inputLimits`…) is still parsed from its span only when asked for.

use serde_json::{Map, Value};

use crate::format::model::{Model, ModelCost};

/// pi 1.6.0's bundled models for the built-in providers (JSON, one model per
/// line, grouped by provider; regenerate with `tests/oracle/dump-models.sh`).
pub const BUILTIN_MODELS_JSON: &str = include_str!("builtin-models.json");

/// A byte range of [`BUILTIN_MODELS_JSON`].
#[derive(Clone, Copy)]
pub(super) struct Span(u32, u32);

impl Span {
    pub(super) fn text(self) -> &'static str {
        BUILTIN_MODELS_JSON
            .get(self.0 as usize..self.1 as usize)
            .unwrap_or("")
    }
}

pub(super) struct BuiltinProvider {
    pub(super) id: Span,
    pub(super) api: Span,
    pub(super) base_url: Span,
    pub(super) default_model: Span,
    /// Index range in [`MODELS`].
    pub(super) models: (usize, usize),
}

/// `build.rs` emits `None`/`Json` only for a catalogue that needs them.
#[allow(dead_code)]
#[derive(Clone, Copy)]
pub(super) enum Input {
    None,
    Text,
    TextImage,
    /// Any other list, as its JSON text.
    Json(Span),
}

#[derive(Clone, Copy)]
pub(super) enum CompatValue {
    Bool(bool),
    Str(Span),
    /// Anything else, as its JSON text.
    Json(Span),
}

pub(super) struct BuiltinModel {
    /// The model's whole JSON object.
    pub(super) text: Span,
    id: Span,
    name: Span,
    api: Option<Span>,
    base_url: Option<Span>,
    reasoning: bool,
    input: Input,
    /// input, output, cacheRead, cacheWrite.
    cost: [f64; 4],
    context_window: u64,
    max_tokens: u64,
    /// Index range in [`COMPAT`].
    compat: Option<(usize, usize)>,
    headers: Option<Span>,
}

include!(concat!(env!("OUT_DIR"), "/builtin_models.rs"));

fn json_object(span: Span) -> Map<String, Value> {
    serde_json::from_str(span.text()).unwrap_or_default()
}

impl BuiltinModel {
    /// The typed model (`api` and `baseUrl` from the provider unless the
    /// model overrides them).
    pub(super) fn to_model(&self, p: &BuiltinProvider) -> Model {
        let input = match self.input {
            Input::None => Vec::new(),
            Input::Text => vec!["text".to_string()],
            Input::TextImage => vec!["text".to_string(), "image".to_string()],
            Input::Json(s) => serde_json::from_str(s.text()).unwrap_or_default(),
        };
        let compat = self.compat.map(|(a, b)| {
            let mut m = Map::new();
            for (k, v) in COMPAT.get(a..b).unwrap_or_default() {
                let v = match *v {
                    CompatValue::Bool(b) => Value::Bool(b),
                    CompatValue::Str(s) => Value::String(s.text().to_string()),
                    CompatValue::Json(s) => serde_json::from_str(s.text()).unwrap_or(Value::Null),
                };
                m.insert(k.text().to_string(), v);
            }
            m
        });
        let [input_cost, output, cache_read, cache_write] = self.cost;
        Model {
            id: self.id.text().to_string(),
            name: self.name.text().to_string(),
            api: self.api.unwrap_or(p.api).text().to_string(),
            provider: p.id.text().to_string(),
            base_url: self.base_url.unwrap_or(p.base_url).text().to_string(),
            reasoning: self.reasoning,
            input,
            cost: ModelCost {
                input: input_cost,
                output,
                cache_read,
                cache_write,
            },
            context_window: self.context_window,
            max_tokens: self.max_tokens,
            headers: self.headers.map(json_object),
            compat,
        }
    }
}

impl BuiltinProvider {
    pub(super) fn models(&self) -> &'static [BuiltinModel] {
        MODELS.get(self.models.0..self.models.1).unwrap_or_default()
    }
}

/// pi's JSON object for one model: built lazily from the compiled-in
/// catalogue text (parsing every built-in model into a map on each start
/// would cost more than the rest of a run), or owned once changed.
#[derive(Debug, Clone)]
pub(super) struct RawSlot {
    cell: std::sync::OnceLock<Map<String, Value>>,
    /// The catalogue entry of a built-in (index in [`PROVIDERS`] and
    /// [`MODELS`]).
    builtin: Option<(usize, usize)>,
}

impl RawSlot {
    pub(super) fn owned(raw: Map<String, Value>) -> RawSlot {
        let cell = std::sync::OnceLock::new();
        let _ = cell.set(raw);
        RawSlot {
            cell,
            builtin: None,
        }
    }

    /// Model `model` of provider `provider` of the catalogue, unparsed.
    pub(super) fn builtin(provider: usize, model: usize) -> RawSlot {
        RawSlot {
            cell: std::sync::OnceLock::new(),
            builtin: Some((provider, model)),
        }
    }

    pub(super) fn get(&self) -> &Map<String, Value> {
        self.cell.get_or_init(|| {
            let Some((p, m)) = self
                .builtin
                .and_then(|(p, m)| Some((PROVIDERS.get(p)?, MODELS.get(m)?)))
            else {
                return Map::new();
            };
            match serde_json::from_str::<Map<String, Value>>(m.text.text()) {
                Ok(obj) => builtin_raw(p, obj),
                Err(_) => Map::new(),
            }
        })
    }
}

/// A catalogue entry as pi's full Model object (key order as pi prints it).
fn builtin_raw(p: &BuiltinProvider, m: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    let get = |k: &str| m.get(k).cloned();
    out.insert("id".into(), get("id").unwrap_or(Value::Null));
    out.insert("name".into(), get("name").unwrap_or(Value::Null));
    out.insert(
        "api".into(),
        get("api").unwrap_or_else(|| p.api.text().into()),
    );
    out.insert("provider".into(), p.id.text().into());
    out.insert(
        "baseUrl".into(),
        get("baseUrl").unwrap_or_else(|| p.base_url.text().into()),
    );
    for (k, v) in m {
        if !out.contains_key(&k) {
            out.insert(k, v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables say what the catalogue says: every provider and model,
    /// typed exactly as serde reads the JSON.
    #[test]
    fn tables_equal_a_parse_of_the_catalogue() {
        let cat: Value = serde_json::from_str(BUILTIN_MODELS_JSON).expect("catalogue");
        let providers = cat["providers"].as_array().expect("providers");
        assert_eq!(providers.len(), PROVIDERS.len());
        let mut n = 0;
        for (p, bp) in providers.iter().zip(PROVIDERS.iter()) {
            assert_eq!(p["id"], bp.id.text());
            assert_eq!(p["defaultModel"], bp.default_model.text());
            let models = p["models"].as_array().expect("models");
            assert_eq!(models.len(), bp.models().len());
            for (m, bm) in models.iter().zip(bp.models()) {
                let mut o = m.as_object().cloned().expect("object");
                o.entry("api").or_insert_with(|| p["api"].clone());
                o.entry("baseUrl").or_insert_with(|| p["baseUrl"].clone());
                o.insert("provider".into(), p["id"].clone());
                let want: Model = serde_json::from_value(Value::Object(o)).expect("model");
                assert_eq!(bm.to_model(bp), want);
                let whole: Value = serde_json::from_str(bm.text.text()).expect("model text");
                assert_eq!(&whole, m);
                n += 1;
            }
        }
        assert!(n > 500, "{n}");
        // Key order of compat is the file's.
        let first = &PROVIDERS[0].models()[0];
        let keys: Vec<String> = first
            .to_model(&PROVIDERS[0])
            .compat
            .unwrap_or_default()
            .keys()
            .cloned()
            .collect();
        let file: Vec<String> = serde_json::from_str::<Map<String, Value>>(first.text.text())
            .ok()
            .and_then(|m| {
                m.get("compat")
                    .and_then(Value::as_object)
                    .map(|c| c.keys().cloned().collect())
            })
            .unwrap_or_default();
        assert_eq!(keys, file);
    }
}
