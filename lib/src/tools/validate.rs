//! Tool-call argument validation against the tool's JSON Schema, with the
//! type coercion pi applies (AJV `coerceTypes`: `"10"` → 10, `"true"` →
//! true, a scalar → a one-element array), and pi's error text:
//!
//! ```text
//! Validation failed for tool "<name>":
//!   - <dotted.path>: missing | expected <type>, got <type>
//!
//! Received arguments:
//! <arguments as 2-space JSON>
//! ```

use serde_json::{Map, Value};

/// Validates (and coerces) `args` against `schema`; `Err` is the text the
/// model receives as the tool result.
pub fn validate_args(tool: &str, schema: &Value, args: &Value) -> Result<Value, String> {
    let mut value = args.clone();
    let mut errors = Vec::new();
    check(schema, &mut value, "", &mut errors);
    if errors.is_empty() {
        return Ok(value);
    }
    let list: Vec<String> = errors
        .iter()
        .map(|(p, m)| format!("  - {p}: {m}"))
        .collect();
    let received = pretty2(args);
    Err(format!(
        "Validation failed for tool \"{tool}\":\n{}\n\nReceived arguments:\n{received}",
        list.join("\n")
    ))
}

/// `JSON.stringify(v, null, 2)`.
pub fn pretty2(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// AJV-style coercion of a scalar to `ty`; `None` when impossible.
fn coerce(ty: &str, v: &Value) -> Option<Value> {
    match (ty, v) {
        // pi 1.6.0 takes `""` as 0 (a bash timeout of "" is "Invalid
        // timeout", not a validation error).
        ("number" | "integer", Value::String(s)) if s.is_empty() => Some(Value::from(0)),
        ("number" | "integer", Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() {
                return None;
            }
            let n: f64 = t.parse().ok()?;
            if ty == "integer" && n.fract() != 0.0 {
                return None;
            }
            serde_json::Number::from_f64(n).map(|num| {
                if n.fract() == 0.0 && n.abs() < 9.0e15 {
                    Value::from(n as i64)
                } else {
                    Value::Number(num)
                }
            })
        }
        ("number" | "integer", Value::Bool(b)) => Some(Value::from(*b as i64)),
        // A null number passes as null, which the tools read as absent: pi
        // 1.6.0 runs bash with `"timeout": null` without a timeout and ls
        // with `"limit": null` with its default limit.
        ("number" | "integer", Value::Null) => Some(Value::Null),
        ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        ("string", Value::Null) => Some(Value::String(String::new())),
        ("boolean", Value::String(s)) if s == "true" => Some(Value::Bool(true)),
        ("boolean", Value::String(s)) if s == "false" => Some(Value::Bool(false)),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(1.0) => Some(Value::Bool(true)),
        ("boolean", Value::Number(n)) if n.as_f64() == Some(0.0) => Some(Value::Bool(false)),
        ("boolean", Value::Null) => Some(Value::Bool(false)),
        ("null", Value::String(s)) if s.is_empty() => Some(Value::Null),
        ("array", v) if !v.is_array() && !v.is_object() => Some(Value::Array(vec![v.clone()])),
        _ => None,
    }
}

/// `a.b.0.c`, as pi prints paths.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The path as printed; the root itself shows as `root`.
fn shown(path: &str) -> String {
    if path.is_empty() {
        "root".into()
    } else {
        path.to_string()
    }
}

/// JavaScript-ish type name of a value.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn describe_type(schema: &Map<String, Value>) -> String {
    match schema.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(","),
        _ => "valid".into(),
    }
}

fn check(schema: &Value, v: &mut Value, path: &str, errors: &mut Vec<(String, String)>) {
    let Value::Object(s) = schema else { return };
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|alt| {
            let mut probe = v.clone();
            let mut e = Vec::new();
            check(alt, &mut probe, path, &mut e);
            if e.is_empty() {
                *v = probe;
                true
            } else {
                false
            }
        });
        if !ok {
            errors.push((shown(path), "must match a schema in anyOf".into()));
        }
        return;
    }
    let types: Vec<String> = match s.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| type_matches(t, v)) {
        match types.iter().find_map(|t| coerce(t, v)) {
            Some(c) => *v = c,
            None => {
                errors.push((
                    shown(path),
                    format!("expected {}, got {}", describe_type(s), json_type(v)),
                ));
                return;
            }
        }
    }
    if let Some(Value::Array(options)) = s.get("enum") {
        if !options.contains(v) {
            errors.push((
                shown(path),
                "must be equal to one of the allowed values".into(),
            ));
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errors.push((shown(path), "must be equal to constant".into()));
        }
    }
    match v {
        Value::Object(obj) => {
            if let Some(Value::Array(req)) = s.get("required") {
                for r in req.iter().filter_map(Value::as_str) {
                    if !obj.contains_key(r) {
                        errors.push((join(path, r), "missing".into()));
                    }
                }
            }
            if let Some(Value::Object(props)) = s.get("properties") {
                for (k, sub) in props {
                    if let Some(val) = obj.get_mut(k) {
                        check(sub, val, &join(path, k), errors);
                    }
                }
            }
            if s.get("additionalProperties") == Some(&Value::Bool(false)) {
                let props = s.get("properties").and_then(Value::as_object);
                for k in obj.keys() {
                    if !props.is_some_and(|p| p.contains_key(k)) {
                        errors.push((shown(path), "must NOT have additional properties".into()));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (i, it) in items.iter_mut().enumerate() {
                    check(item_schema, it, &join(path, &i.to_string()), errors);
                }
            }
            if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
                if (items.len() as u64) < min {
                    errors.push((shown(path), format!("must NOT have fewer than {min} items")));
                }
            }
        }
        Value::String(st) => {
            if let Some(min) = s.get("minLength").and_then(Value::as_u64) {
                if (st.chars().count() as u64) < min {
                    errors.push((
                        shown(path),
                        format!("must NOT have fewer than {min} characters"),
                    ));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type":"object","required":["path"],"properties":{"path":{"type":"string"},"offset":{"type":"number"}}})
    }

    #[test]
    fn coerces_and_reports() {
        assert_eq!(
            validate_args("read", &schema(), &json!({"path":"a","offset":"10"})).unwrap(),
            json!({"path":"a","offset":10})
        );
        assert_eq!(
            validate_args("read", &schema(), &json!({"path":"a","offset":null})).unwrap(),
            json!({"path":"a","offset":null})
        );
        assert_eq!(
            validate_args("read", &schema(), &json!({"path":"a","offset":""})).unwrap(),
            json!({"path":"a","offset":0})
        );
        let e = validate_args("read", &schema(), &json!({"offset":"x"})).unwrap_err();
        assert!(
            e.starts_with("Validation failed for tool \"read\":\n"),
            "{e}"
        );
        assert!(
            e.contains("  - path: missing\n  - offset: expected number, got string"),
            "{e}"
        );
        let edit = json!({"type":"object","required":["edits"],"properties":{"edits":{"type":"array","items":{"type":"object","required":["oldText","newText"],"properties":{"oldText":{"type":"string"},"newText":{"type":"string"}}}}}});
        let e = validate_args("edit", &edit, &json!({"edits":[{"oldText":1}]})).unwrap_err();
        assert!(e.contains("  - edits.0.newText: missing\n\n"), "{e}");
        let e = validate_args("edit", &edit, &json!({"edits":"nope"})).unwrap_err();
        assert!(
            e.contains("  - edits.0: expected object, got string\n"),
            "{e}"
        );
        assert!(
            e.ends_with("Received arguments:\n{\n  \"edits\": \"nope\"\n}"),
            "{e}"
        );
    }
}
