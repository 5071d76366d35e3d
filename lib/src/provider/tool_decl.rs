//! How a tool is declared to the wire APIs: the function declaration both
//! OpenAI APIs share, and the strict form of a parameter schema that
//! strict tool calling needs (OpenAI strict mode, Anthropic strict tools).

use serde_json::{Map, Value};

use crate::format::tool::ToolDefinition;

/// A function tool as both OpenAI APIs declare it (Chat Completions
/// nests it under `function`, Responses flattens it beside `type`),
/// borrowed from its definition; in strict mode the schema is made strict
/// and `strict: true` is sent (pi 1.6.0 sends no `strict` key otherwise).
#[derive(serde::Serialize)]
pub(crate) struct FunctionDecl<'a> {
    name: &'a str,
    description: &'a str,
    parameters: std::borrow::Cow<'a, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

impl<'a> FunctionDecl<'a> {
    pub(crate) fn of(t: &'a ToolDefinition, strict: bool) -> Self {
        FunctionDecl {
            name: &t.name,
            description: &t.description,
            parameters: if strict {
                std::borrow::Cow::Owned(strict_schema(&t.parameters))
            } else {
                std::borrow::Cow::Borrowed(&t.parameters)
            },
            strict: strict.then_some(true),
        }
    }
}

/// A tool schema in the form strict tool calling needs (what pi 1.6.0 sends
/// to models whose compat has `supportsStrictMode` / `supportsStrictTools`):
/// in every object with properties, all properties are required, the ones
/// that were optional accept `null` too (`anyOf: [<schema>, {"type":
/// "null"}]`), and no other properties are allowed.
pub(crate) fn strict_schema(schema: &Value) -> Value {
    let Value::Object(o) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    let props = o.get("properties").and_then(Value::as_object);
    let required = crate::format::tool::required_names(o);
    for (k, v) in o {
        let v = match (k.as_str(), props) {
            ("properties", Some(p)) => Value::Object(
                p.iter()
                    .map(|(name, sub)| {
                        let sub = strict_schema(sub);
                        let sub = if required.contains(&name.as_str()) {
                            sub
                        } else {
                            serde_json::json!({"anyOf": [sub, {"type": "null"}]})
                        };
                        (name.clone(), sub)
                    })
                    .collect(),
            ),
            ("required", Some(p)) => p.keys().cloned().map(Value::from).collect(),
            ("items", _) => strict_schema(v),
            ("anyOf" | "oneOf" | "allOf", _) => match v {
                Value::Array(a) => a.iter().map(strict_schema).collect(),
                other => other.clone(),
            },
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if let Some(p) = props {
        if !out.contains_key("required") {
            out.insert(
                "required".into(),
                p.keys().cloned().map(Value::from).collect(),
            );
        }
        out.insert("additionalProperties".into(), false.into());
    }
    Value::Object(out)
}
