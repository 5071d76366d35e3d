//! Two compiled-in assets:
//! * the Node extension host (`src/extensions/node-host/`, JS files) as
//!   `$OUT_DIR/node_host_files.rs`: `&[(relative_path, bytes)]`. A missing
//!   folder gives an empty list (TS/JS extensions then get a diagnostic);
//! * the built-in model catalogue (`src/model/builtin-models.json`) as
//!   `$OUT_DIR/builtin_models.rs`: typed tables whose strings are byte spans
//!   into the catalogue text, so a start builds its model list without
//!   parsing 280 KB of JSON (see `src/model/builtin.rs`).

use std::path::{Path, PathBuf};

fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        println!("cargo:rerun-if-changed={}", p.display());
        if p.is_dir() {
            walk(&p, root, out);
        } else if p.is_file() {
            if let Ok(rel) = p.strip_prefix(root) {
                out.push((rel.to_string_lossy().replace('\\', "/"), p.clone()));
            }
        }
    }
}

fn main() {
    node_host();
    builtin_models();
}

fn node_host() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("src/extensions/node-host");
    // A path that does not exist would rebuild every time: watch the
    // parent until the folder appears.
    if root.is_dir() {
        println!("cargo:rerun-if-changed={}", root.display());
    } else {
        println!(
            "cargo:rerun-if-changed={}",
            manifest.join("src/extensions").display()
        );
    }
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    let mut code = String::from("&[\n");
    for (rel, abs) in files {
        code.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?}) as &[u8]),\n",
            abs.display().to_string()
        ));
    }
    code.push(']');
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("node_host_files.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}

type Object<'a> = std::collections::HashMap<&'a str, &'a serde_json::value::RawValue>;

/// Byte span of `part` (a slice of `src`) in `src`.
fn span(src: &str, part: &str) -> (usize, usize) {
    let start = part.as_ptr() as usize - src.as_ptr() as usize;
    (start, start + part.len())
}

/// The span of a JSON string's contents (without the quotes). The runtime
/// slices the text, so an escaped string cannot be a span.
fn str_span(src: &str, raw: &serde_json::value::RawValue, what: &str) -> String {
    let text = raw.get();
    if !(text.len() >= 2 && text.starts_with('"') && text.ends_with('"')) || text.contains('\\') {
        panic!("builtin-models.json: {what} must be a string without escapes, got {text}");
    }
    let (a, b) = span(src, text);
    format!("Span({}, {})", a + 1, b - 1)
}

fn raw_span(src: &str, raw: &serde_json::value::RawValue) -> String {
    let (a, b) = span(src, raw.get());
    format!("Span({a}, {b})")
}

fn object<'a>(raw: &'a serde_json::value::RawValue, what: &str) -> Object<'a> {
    serde_json::from_str(raw.get()).unwrap_or_else(|e| panic!("builtin-models.json: {what}: {e}"))
}

fn opt_str(src: &str, o: &Object, key: &str, what: &str) -> String {
    match o.get(key) {
        Some(r) => format!("Some({})", str_span(src, r, &format!("{what}.{key}"))),
        None => "None".into(),
    }
}

fn builtin_models() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let path = manifest.join("src/model/builtin-models.json");
    println!("cargo:rerun-if-changed={}", path.display());
    let src = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let src = src.as_str();
    let top: Object =
        serde_json::from_str(src).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let providers: Vec<&serde_json::value::RawValue> = top
        .get("providers")
        .map(|r| serde_json::from_str(r.get()).expect("builtin-models.json: providers"))
        .unwrap_or_default();
    let (mut prov_code, mut model_code, mut compat_code) =
        (String::new(), String::new(), String::new());
    let (mut n_models, mut n_compat) = (0usize, 0usize);
    for (pi, praw) in providers.iter().enumerate() {
        let what = format!("providers[{pi}]");
        let p = object(praw, &what);
        let field = |k: &str| {
            p.get(k)
                .map(|r| str_span(src, r, &format!("{what}.{k}")))
                .unwrap_or_else(|| panic!("builtin-models.json: {what}.{k} is missing"))
        };
        let models: Vec<&serde_json::value::RawValue> = p
            .get("models")
            .map(|r| serde_json::from_str(r.get()).expect("builtin-models.json: models"))
            .unwrap_or_default();
        let first = n_models;
        for (mi, mraw) in models.iter().enumerate() {
            let what = format!("{what}.models[{mi}]");
            let m = object(mraw, &what);
            let value = |k: &str| -> serde_json::Value {
                m.get(k)
                    .map(|r| serde_json::from_str(r.get()).expect("builtin-models.json: value"))
                    .unwrap_or(serde_json::Value::Null)
            };
            let input = match value("input") {
                serde_json::Value::Null => "Input::None".to_string(),
                serde_json::Value::Array(a) if a == [serde_json::json!("text")] => {
                    "Input::Text".into()
                }
                serde_json::Value::Array(a)
                    if a == [serde_json::json!("text"), serde_json::json!("image")] =>
                {
                    "Input::TextImage".into()
                }
                _ => format!("Input::Json({})", raw_span(src, m["input"])),
            };
            let cost = value("cost");
            let c = |k: &str| {
                cost.get(k)
                    .and_then(serde_json::Value::as_f64)
                    .unwrap_or(0.0)
            };
            let compat = match m.get("compat") {
                Some(r) => {
                    let start = n_compat;
                    // Keys borrow the catalogue text: their spans give file order.
                    let mut entries: Vec<(&str, &serde_json::value::RawValue)> =
                        object(r, &format!("{what}.compat")).into_iter().collect();
                    entries.sort_by_key(|(k, _)| span(src, k).0);
                    for (k, v) in entries {
                        let (ka, kb) = span(src, k);
                        let key = format!("Span({ka}, {kb})");
                        let val = match v.get() {
                            "true" => "CompatValue::Bool(true)".to_string(),
                            "false" => "CompatValue::Bool(false)".to_string(),
                            t if t.starts_with('"') && !t.contains('\\') => {
                                format!("CompatValue::Str({})", str_span(src, v, "compat value"))
                            }
                            _ => format!("CompatValue::Json({})", raw_span(src, v)),
                        };
                        compat_code.push_str(&format!("    ({key}, {val}),\n"));
                        n_compat += 1;
                    }
                    format!("Some(({start}, {n_compat}))")
                }
                None => "None".into(),
            };
            let headers = match m.get("headers") {
                Some(r) => format!("Some({})", raw_span(src, r)),
                None => "None".into(),
            };
            let num = |k: &str| value(k).as_u64().unwrap_or(0);
            model_code.push_str(&format!(
                "    BuiltinModel {{ text: {}, id: {}, name: {}, api: {}, base_url: {}, reasoning: {}, input: {input}, \
                 cost: [{:?}, {:?}, {:?}, {:?}], context_window: {}, max_tokens: {}, compat: {compat}, headers: {headers} }},\n",
                raw_span(src, mraw),
                str_span(src, m.get("id").expect("model id"), &format!("{what}.id")),
                str_span(src, m.get("name").expect("model name"), &format!("{what}.name")),
                opt_str(src, &m, "api", &what),
                opt_str(src, &m, "baseUrl", &what),
                value("reasoning").as_bool().unwrap_or(false),
                c("input"),
                c("output"),
                c("cacheRead"),
                c("cacheWrite"),
                num("contextWindow"),
                num("maxTokens"),
            ));
            n_models += 1;
        }
        prov_code.push_str(&format!(
            "    BuiltinProvider {{ id: {}, api: {}, base_url: {}, default_model: {}, models: ({first}, {n_models}) }},\n",
            field("id"),
            field("api"),
            field("baseUrl"),
            field("defaultModel"),
        ));
    }
    let code = format!(
        "pub(super) static PROVIDERS: [BuiltinProvider; {}] = [\n{prov_code}];\n\
         pub(super) static MODELS: [BuiltinModel; {n_models}] = [\n{model_code}];\n\
         pub(super) static COMPAT: [(Span, CompatValue); {n_compat}] = [\n{compat_code}];\n",
        providers.len()
    );
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("builtin_models.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}
