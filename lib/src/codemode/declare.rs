//! Tools as a script sees them: JSON Schemas rendered as TypeScript
//! declarations (`declare const tools: { name(args: {...}): Promise<...>; };`),
//! the `Codemode:` line added to a declared tool's description, and the
//! description a script reads in `ALL_TOOLS` and `describeTool()`.
//!
//! The rendering follows pi: properties sorted by name, `?` for optional
//! ones, a property's description and its constraints (`@minimum 1
//! @default 3`) as `//` comment lines. An object whose properties carry
//! comments is written over several lines, indented two spaces past the
//! line it starts on; other objects stay on one line. Open objects end with
//! `[key: string]: unknown;`. Local `$ref`s are expanded; a recursive one
//! is `unknown`.

use serde_json::{Map, Value};

/// `name` as a JavaScript identifier: other characters become `_` (and a
/// leading digit gets one before it).
pub fn identifier(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) || out.is_empty() {
        out.insert(0, '_');
    }
    out
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Renders schemas relative to one root (for `$ref`s).
struct Renderer<'a> {
    root: &'a Value,
    refs: Vec<String>,
}

/// Defaults longer than this (as JSON) are not shown.
const DEFAULT_MAX: usize = 60;

fn tags(s: &Map<String, Value>) -> Vec<String> {
    let mut t = Vec::new();
    if s.get("type").and_then(Value::as_str) == Some("integer") {
        t.push("@integer".to_string());
    }
    for k in [
        "format",
        "minimum",
        "exclusiveMinimum",
        "maximum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
    ] {
        if let Some(v) = s.get(k) {
            let v = match v {
                Value::String(x) => x.clone(),
                other => other.to_string(),
            };
            t.push(format!("@{k} {v}"));
        }
    }
    // A long default (a URL, a document) says little and is left out.
    if let Some(d) = s
        .get("default")
        .map(Value::to_string)
        .filter(|d| d.len() <= DEFAULT_MAX)
    {
        t.push(format!("@default {d}"));
    }
    t
}

/// The comment lines of a property: its description, then its tags.
fn comments(s: &Value) -> Vec<String> {
    let Some(m) = s.as_object() else {
        return Vec::new();
    };
    let mut out: Vec<String> = m
        .get("description")
        .and_then(Value::as_str)
        .map(|d| d.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let t = tags(m);
    if !t.is_empty() {
        out.push(t.join(" "));
    }
    out
}

impl Renderer<'_> {
    fn resolve(&self, r: &str) -> Option<Value> {
        let path = r.strip_prefix("#/")?;
        let mut v = self.root;
        for part in path.split('/') {
            v = v.get(part.replace("~1", "/").replace("~0", "~"))?;
        }
        Some(v.clone())
    }

    fn ty(&mut self, s: &Value, indent: usize) -> String {
        let Some(m) = s.as_object() else {
            return if s == &Value::Bool(false) {
                "never".into()
            } else {
                "unknown".into()
            };
        };
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            if self.refs.iter().any(|x| x == r) {
                return "unknown".into();
            }
            let Some(target) = self.resolve(r) else {
                return "unknown".into();
            };
            self.refs.push(r.to_string());
            let out = self.ty(&target, indent);
            self.refs.pop();
            return out;
        }
        if let Some(c) = m.get("const") {
            return c.to_string();
        }
        if let Some(Value::Array(e)) = m.get("enum") {
            return e
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(" | ");
        }
        for k in ["anyOf", "oneOf"] {
            if let Some(Value::Array(v)) = m.get(k) {
                return v
                    .iter()
                    .map(|x| self.ty(x, indent))
                    .collect::<Vec<_>>()
                    .join(" | ");
            }
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            if all.len() == 1 {
                return self.ty(&all[0], indent);
            }
        }
        match m.get("type") {
            Some(Value::Array(types)) => types
                .iter()
                .map(|t| {
                    let mut one = m.clone();
                    one.insert("type".into(), t.clone());
                    self.ty(&Value::Object(one), indent)
                })
                .collect::<Vec<_>>()
                .join(" | "),
            Some(Value::String(t)) => match t.as_str() {
                "string" => "string".into(),
                "number" | "integer" => "number".into(),
                "boolean" => "boolean".into(),
                "null" => "null".into(),
                "array" => match m.get("items") {
                    Some(items) => format!("Array<{}>", self.ty(items, indent)),
                    None => "Array<unknown>".into(),
                },
                "object" => self.object(m, indent),
                _ => "unknown".into(),
            },
            _ if m.contains_key("properties") => self.object(m, indent),
            _ => "unknown".into(),
        }
    }

    fn object(&mut self, m: &Map<String, Value>, indent: usize) -> String {
        let props = m.get("properties").and_then(Value::as_object);
        let required = crate::format::tool::required_names(m);
        let extra = match m.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some("unknown".to_string()),
            Some(s @ Value::Object(_)) => Some(self.ty(s, indent)),
            _ => None,
        };
        let Some(props) = props.filter(|p| !p.is_empty()) else {
            return match (extra, m.get("additionalProperties")) {
                (_, Some(Value::Bool(false))) => "{}".into(),
                (Some(t), _) => format!("{{ [key: string]: {t}; }}"),
                (None, _) => "{ [key: string]: unknown; }".into(),
            };
        };
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        let multiline = keys
            .iter()
            .any(|k| !comments(&props[k.as_str()]).is_empty());
        let inner = if multiline { indent + 2 } else { indent };
        let mut items: Vec<(Vec<String>, String)> = Vec::new();
        for k in keys {
            let s = &props[k.as_str()];
            let key = if is_identifier(k) {
                k.clone()
            } else {
                Value::String(k.clone()).to_string()
            };
            let opt = if required.contains(&k.as_str()) {
                ""
            } else {
                "?"
            };
            items.push((comments(s), format!("{key}{opt}: {};", self.ty(s, inner))));
        }
        if let Some(t) = extra {
            items.push((Vec::new(), format!("[key: string]: {t};")));
        }
        if !multiline {
            let body: Vec<String> = items.into_iter().map(|(_, l)| l).collect();
            return format!("{{ {} }}", body.join(" "));
        }
        let pad = " ".repeat(inner);
        let mut out = String::from("{\n");
        for (c, line) in items {
            for l in c {
                out.push_str(&format!("{pad}// {l}\n"));
            }
            out.push_str(&format!("{pad}{line}\n"));
        }
        out.push_str(&" ".repeat(indent));
        out.push('}');
        out
    }
}

/// The TypeScript type of `schema` on a line indented `indent` spaces.
pub fn ts_type(schema: &Value, indent: usize) -> String {
    Renderer {
        root: schema,
        refs: Vec::new(),
    }
    .ty(schema, indent)
}

/// What a call of a tool resolves to: its output schema, or a string.
fn returns(output: Option<&Value>) -> String {
    match output {
        Some(o) => ts_type(o, 0),
        None => "string".into(),
    }
}

/// `declare const tools: { <id>(args: {...}): Promise<...>; };`
pub fn declaration(id: &str, params: &Value, output: Option<&Value>) -> String {
    format!(
        "declare const tools: {{ {id}(args: {}): Promise<{}>; }};",
        ts_type(params, 0),
        returns(output)
    )
}

/// A tool's description for scripts (`ALL_TOOLS`, `describeTool()`): its
/// own description, its prompt guidelines, and its declaration.
pub fn script_description(
    id: &str,
    description: &str,
    guidelines: &[String],
    params: &Value,
    output: Option<&Value>,
) -> String {
    let mut out = description.to_string();
    if !guidelines.is_empty() {
        let g: Vec<String> = guidelines.iter().map(|g| format!("- {g}")).collect();
        out.push_str("\n\n");
        out.push_str(&g.join("\n"));
    }
    out.push_str("\n\ncodemode tool declaration:\n```ts\n");
    out.push_str(&declaration(id, params, output));
    out.push_str("\n```");
    out
}

/// The `Codemode:` line a declared tool's description gets while codemode
/// is active: a string result is "a string", an object's property names
/// are listed in the schema's order, anything else is its type.
pub fn codemode_line(id: &str, output: Option<&Value>) -> String {
    let what = match output {
        None => "a string".to_string(),
        Some(o) if o.get("type").and_then(Value::as_str) == Some("string") => {
            "a string".to_string()
        }
        Some(o) => match o.get("properties").and_then(Value::as_object) {
            Some(p) if !p.is_empty() => {
                let required = o
                    .as_object()
                    .map(crate::format::tool::required_names)
                    .unwrap_or_default();
                let names: Vec<String> = p
                    .keys()
                    .map(|k| {
                        let opt = if required.contains(&k.as_str()) {
                            ""
                        } else {
                            "?"
                        };
                        format!("{k}{opt}")
                    })
                    .collect();
                format!("`{{ {} }}`", names.join(", "))
            }
            _ => format!("`{}`", ts_type(o, 0)),
        },
    };
    format!("\n\nCodemode: `tools.{id}(args)` resolves to {what}.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_render_as_pi_declares_them() {
        let params = json!({"type": "object", "properties": {
            "count": {"type": "number", "description": "Number of resource links to return (1-10)", "minimum": 1, "maximum": 10, "default": 3}
        }});
        assert_eq!(
            declaration("get", &params, None),
            "declare const tools: { get(args: {\n  // Number of resource links to return (1-10)\n  // @minimum 1 @maximum 10 @default 3\n  count?: number;\n}): Promise<string>; };"
        );
        assert_eq!(
            ts_type(&json!({"type": "object", "properties": {}}), 0),
            "{ [key: string]: unknown; }"
        );
        let union = json!({"type": "object", "required": ["contents"], "properties": {"contents": {"type": "array", "items": {"anyOf": [
            {"type": "object", "required": ["uri", "text"], "properties": {"uri": {"type": "string"}, "text": {"type": "string"}}},
            {"type": "object", "required": ["blob"], "properties": {"blob": {"type": "string", "description": "base64"}}}
        ]}}}});
        assert_eq!(
            ts_type(&union, 0),
            "{ contents: Array<{ text: string; uri: string; } | {\n  // base64\n  blob: string;\n}>; }"
        );
        assert_eq!(
            identifier("mcp__dev-radius__search"),
            "mcp__dev_radius__search"
        );
        assert_eq!(
            codemode_line("edit", None),
            "\n\nCodemode: `tools.edit(args)` resolves to a string."
        );
    }
}
