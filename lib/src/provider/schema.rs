//! A JSON Schema the final answer must follow (`pi-run --output-schema`),
//! as each wire API can take it. The answer is always validated locally;
//! passing the schema natively lets the API constrain the reply so the
//! first answer already fits. Each API's constrained mode accepts only a
//! subset of JSON Schema and refuses a request whose schema uses anything
//! else, so a schema goes native only where every keyword it uses is in
//! that API's documented subset (an allowlist: anything unknown stays
//! local):
//!
//! * OpenAI strict mode (Chat `response_format` json_schema, Responses
//!   `text.format`, for models whose compat says `supportsStrictMode`):
//!   the root is an object (not `anyOf`), every object lists all its
//!   properties in `required` and has `additionalProperties: false`; no
//!   `allOf`, `not`, `if`/`then`/`else`, `dependent*`, `patternProperties`,
//!   `minLength`/`maxLength`, `uniqueItems`, `default`…; at most 5,000
//!   properties, 10 levels of nesting, 1,000 enum values and 120,000
//!   characters of names and enum values.
//! * Gemini (`responseJsonSchema`, with `responseMimeType:
//!   application/json`): its listed keywords only (`type`, `properties`,
//!   `required`, `additionalProperties`, `items`, `prefixItems`,
//!   `minItems`/`maxItems`, `minimum`/`maximum`, `enum`, `format`,
//!   `anyOf`/`oneOf`, `$defs`/`$ref`/`$anchor`, `title`, `description`),
//!   and only on a request that declares no tools (Gemini refuses function
//!   calling together with a JSON response type).
//! * Anthropic: validated locally only.

use serde_json::{Map, Value};

/// The schema and which APIs may constrain a reply to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseSchema {
    /// The schema as sent (root `$schema` and `$id` left out: metadata no
    /// API needs).
    pub wire: Value,
    /// OpenAI's strict mode takes it; else why not.
    pub openai: Result<(), String>,
    /// Gemini's `responseJsonSchema` takes it; else why not.
    pub gemini: Result<(), String>,
}

/// The `name` the OpenAI APIs require for a response format.
pub const FORMAT_NAME: &str = "output";

impl ResponseSchema {
    pub fn new(schema: &Value) -> ResponseSchema {
        let mut wire = schema.clone();
        if let Some(m) = wire.as_object_mut() {
            m.shift_remove("$schema");
            m.shift_remove("$id");
        }
        ResponseSchema {
            openai: openai_strict(&wire),
            gemini: gemini(&wire),
            wire,
        }
    }

    /// Chat Completions' `response_format`.
    pub fn openai_chat_format(&self) -> Value {
        serde_json::json!({"type": "json_schema", "json_schema": {"name": FORMAT_NAME, "schema": self.wire, "strict": true}})
    }

    /// Responses' `text.format`.
    pub fn openai_responses_format(&self) -> Value {
        serde_json::json!({"type": "json_schema", "name": FORMAT_NAME, "schema": self.wire, "strict": true})
    }
}

const OPENAI_KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

const OPENAI_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

const GEMINI_KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "enum",
    "format",
    "anyOf",
    "oneOf",
    "$ref",
    "$defs",
    "$anchor",
    "$id",
    "title",
    "description",
    "propertyOrdering",
];

/// Counts over the whole schema, for OpenAI's size limits.
#[derive(Default)]
struct Sizes {
    properties: usize,
    enum_values: usize,
    chars: usize,
}

fn openai_strict(root: &Value) -> Result<(), String> {
    let Some(obj) = root.as_object() else {
        return Err("the schema is not an object".into());
    };
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return Err("OpenAI strict mode needs a root of type \"object\"".into());
    }
    let mut sizes = Sizes::default();
    openai_node(root, "#", 0, &mut sizes)?;
    if sizes.properties > 5000 {
        return Err("more than 5,000 properties".into());
    }
    if sizes.enum_values > 1000 {
        return Err("more than 1,000 enum values".into());
    }
    if sizes.chars > 120_000 {
        return Err("more than 120,000 characters of names and enum values".into());
    }
    Ok(())
}

fn openai_node(node: &Value, at: &str, depth: usize, sizes: &mut Sizes) -> Result<(), String> {
    let Some(m) = node.as_object() else {
        return Err(format!("{at}: a schema that is not an object"));
    };
    if depth > 10 {
        return Err(format!("{at}: more than 10 levels of nesting"));
    }
    for k in m.keys() {
        if !OPENAI_KEYS.contains(&k.as_str()) {
            return Err(format!("{at}: \"{k}\" is not supported in strict mode"));
        }
    }
    if let Some(f) = m.get("format") {
        if !f.as_str().is_some_and(|f| OPENAI_FORMATS.contains(&f)) {
            return Err(format!("{at}: format {f} is not supported in strict mode"));
        }
    }
    if let Some(r) = m.get("$ref") {
        if !r.as_str().is_some_and(|r| r.starts_with('#')) {
            return Err(format!("{at}: only local $ref is supported"));
        }
    }
    let is_object =
        m.get("type").is_some_and(|t| has_type(t, "object")) || m.contains_key("properties");
    if is_object {
        if m.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Err(format!(
                "{at}: strict mode needs \"additionalProperties\": false on every object"
            ));
        }
        let props = m.get("properties").and_then(Value::as_object);
        let required = crate::format::tool::required_names(m);
        if let Some(props) = props {
            if let Some(k) = props.keys().find(|k| !required.contains(&k.as_str())) {
                return Err(format!(
                    "{at}: strict mode needs every property in \"required\" (\"{k}\" is optional)"
                ));
            }
            sizes.properties += props.len();
            sizes.chars += props.keys().map(|k| k.len()).sum::<usize>();
            for (k, v) in props {
                openai_node(v, &format!("{at}/properties/{k}"), depth + 1, sizes)?;
            }
        }
    } else if m.contains_key("additionalProperties") || m.contains_key("required") {
        return Err(format!(
            "{at}: object keywords on a schema that is not an object"
        ));
    }
    if let Some(e) = m.get("enum") {
        let values = e.as_array().map(Vec::as_slice).unwrap_or_default();
        sizes.enum_values += values.len();
        sizes.chars += values
            .iter()
            .filter_map(Value::as_str)
            .map(str::len)
            .sum::<usize>();
    }
    if let Some(c) = m.get("const").and_then(Value::as_str) {
        sizes.chars += c.len();
    }
    match m.get("items") {
        Some(i @ Value::Object(_)) => openai_node(i, &format!("{at}/items"), depth + 1, sizes)?,
        Some(_) => return Err(format!("{at}: \"items\" must be one schema")),
        None => {}
    }
    if let Some(a) = m.get("anyOf") {
        if at == "#" {
            return Err("the root must not be anyOf".into());
        }
        for (i, v) in a
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            openai_node(v, &format!("{at}/anyOf/{i}"), depth + 1, sizes)?;
        }
    }
    for defs in ["$defs", "definitions"] {
        if let Some(d) = m.get(defs).and_then(Value::as_object) {
            sizes.chars += d.keys().map(|k| k.len()).sum::<usize>();
            for (k, v) in d {
                openai_node(v, &format!("{at}/{defs}/{k}"), depth, sizes)?;
            }
        }
    }
    Ok(())
}

fn has_type(t: &Value, name: &str) -> bool {
    match t {
        Value::String(s) => s == name,
        Value::Array(a) => a.iter().any(|x| x.as_str() == Some(name)),
        _ => false,
    }
}

fn gemini(root: &Value) -> Result<(), String> {
    gemini_node(root, "#")
}

fn gemini_node(node: &Value, at: &str) -> Result<(), String> {
    let m: &Map<String, Value> = match node {
        Value::Object(m) => m,
        Value::Bool(_) => return Ok(()),
        _ => return Err(format!("{at}: a schema that is not an object")),
    };
    for k in m.keys() {
        if !GEMINI_KEYS.contains(&k.as_str()) {
            return Err(format!(
                "{at}: \"{k}\" is not in Gemini's JSON Schema subset"
            ));
        }
    }
    if m.contains_key("$ref") && m.keys().any(|k| !k.starts_with('$')) {
        return Err(format!("{at}: Gemini takes no other keyword beside $ref"));
    }
    if let Some(e) = m.get("enum").and_then(Value::as_array) {
        if e.iter().any(|v| !(v.is_string() || v.is_number())) {
            return Err(format!(
                "{at}: Gemini's enum takes strings and numbers only"
            ));
        }
    }
    if let Some(p) = m.get("properties").and_then(Value::as_object) {
        for (k, v) in p {
            gemini_node(v, &format!("{at}/properties/{k}"))?;
        }
    }
    if let Some(d) = m.get("$defs").and_then(Value::as_object) {
        for (k, v) in d {
            gemini_node(v, &format!("{at}/$defs/{k}"))?;
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(v) = m.get(key) {
            gemini_node(v, &format!("{at}/{key}"))?;
        }
    }
    for key in ["prefixItems", "anyOf", "oneOf"] {
        for (i, v) in m
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            gemini_node(v, &format!("{at}/{key}/{i}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strict_ok() -> Value {
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": {"status": {"type": "string", "enum": ["ok", "failed"]},
                           "count": {"type": ["integer", "null"], "minimum": 0},
                           "items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
            "required": ["status", "count", "items"], "additionalProperties": false,
            "$defs": {"item": {"type": "object", "properties": {"name": {"type": "string"}},
                               "required": ["name"], "additionalProperties": false}}})
    }

    #[test]
    fn a_strict_fitting_schema_goes_to_openai_without_its_metadata() {
        let r = ResponseSchema::new(&strict_ok());
        assert_eq!(r.openai, Ok(()));
        assert!(r.wire.get("$schema").is_none());
        assert_eq!(r.openai_chat_format()["json_schema"]["strict"], true);
        assert_eq!(r.openai_responses_format()["name"], FORMAT_NAME);
        // Gemini takes it too ($defs, $ref, enum, minimum are in its list).
        assert_eq!(r.gemini, Ok(()));
    }

    #[test]
    fn what_strict_mode_refuses_stays_local() {
        let refuse = |f: &dyn Fn(&mut Value), why: &str| {
            let mut s = strict_ok();
            f(&mut s);
            let e = ResponseSchema::new(&s).openai.unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        };
        refuse(
            &|s| s["required"] = json!(["status", "count"]),
            "\"items\" is optional",
        );
        refuse(
            &|s| {
                s.as_object_mut()
                    .unwrap()
                    .shift_remove("additionalProperties");
            },
            "additionalProperties",
        );
        refuse(
            &|s| s["$defs"]["item"]["additionalProperties"] = json!(true),
            "additionalProperties",
        );
        refuse(
            &|s| s["properties"]["status"]["minLength"] = json!(1),
            "\"minLength\"",
        );
        refuse(&|s| s["allOf"] = json!([{"type": "object"}]), "\"allOf\"");
        refuse(
            &|s| s["properties"]["status"]["default"] = json!("ok"),
            "\"default\"",
        );
        refuse(
            &|s| s["properties"]["status"]["format"] = json!("uri"),
            "format",
        );
        refuse(
            &|s| *s = json!({"type": "array", "items": {"type": "string"}}),
            "root of type",
        );
        refuse(
            &|s| s["$defs"]["item"]["properties"]["name"]["$ref"] = json!("https://x/y.json"),
            "local $ref",
        );
        // Deeper than ten levels.
        let mut deep = json!({"type": "string"});
        for _ in 0..11 {
            deep = json!({"type": "object", "properties": {"a": deep}, "required": ["a"], "additionalProperties": false});
        }
        assert!(ResponseSchema::new(&deep)
            .openai
            .unwrap_err()
            .contains("levels"));
        // Too many enum values.
        let many: Vec<Value> = (0..1001).map(|i| json!(i)).collect();
        let e = json!({"type": "object", "properties": {"n": {"enum": many}}, "required": ["n"], "additionalProperties": false});
        assert!(ResponseSchema::new(&e)
            .openai
            .unwrap_err()
            .contains("enum values"));
    }

    #[test]
    fn what_gemini_refuses_stays_local() {
        let s = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}});
        assert!(ResponseSchema::new(&s)
            .gemini
            .unwrap_err()
            .contains("\"pattern\""));
        let s = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a", "description": "x"}}});
        assert!(ResponseSchema::new(&s).gemini.is_err());
        let s = json!({"type": "object", "properties": {"a": {"const": 1}}});
        assert!(ResponseSchema::new(&s).gemini.is_err());
        let s = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false});
        assert_eq!(ResponseSchema::new(&s).gemini, Ok(()));
        // Optional properties are fine for Gemini, not for OpenAI.
        assert!(ResponseSchema::new(&s).openai.is_err());
    }
}
