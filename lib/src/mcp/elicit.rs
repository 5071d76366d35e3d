//! A server's `elicitation/create` (form mode) in a run with nobody to ask,
//! for a server whose entry opts in with `"elicitation": "defaults"` (ours:
//! pi 1.6.0 ignores the key, offers no elicitation and answers "Method not
//! found", which stays the default here). Such a server is offered form
//! elicitation; a request is accepted with the schema's own `default` values
//! when every required field has one (the user would only have confirmed
//! what the server proposed; no data of ours leaves), and declined
//! otherwise. URL-mode requests are declined (that capability is not
//! declared). This is the client behaviour the MCP conformance scenario
//! `elicitation-sep1034-client-defaults` checks.

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

/// The answer to one elicitation request.
pub fn answer(params: &ElicitRequestParams) -> ElicitResult {
    let schema = match params {
        ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } => serde_json::to_value(requested_schema).unwrap_or(Value::Null),
        _ => return ElicitResult::new(ElicitationAction::Decline),
    };
    match defaults(&schema) {
        Some(content) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        None => ElicitResult::new(ElicitationAction::Decline),
    }
}

/// The `default` of every property that has one, or `None` when a required
/// property has none.
fn defaults(schema: &Value) -> Option<Map<String, Value>> {
    let props = schema.get("properties").and_then(Value::as_object);
    let content: Map<String, Value> = props
        .into_iter()
        .flatten()
        .filter_map(|(k, p)| p.get("default").map(|d| (k.clone(), d.clone())))
        .collect();
    let required = schema.get("required").and_then(Value::as_array);
    let complete = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .all(|r| content.contains_key(r));
    complete.then_some(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> ElicitRequestParams {
        serde_json::from_value(json!({"mode": "form", "message": "?", "requestedSchema": schema}))
            .unwrap()
    }

    #[test]
    fn accepts_with_the_defaults_when_every_required_field_has_one() {
        let r = answer(&form(json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "n": {"type": "integer", "default": 3},
            "ok": {"type": "boolean", "default": true},
            "note": {"type": "string"}
        }, "required": ["name", "n"]})));
        assert_eq!(r.action, ElicitationAction::Accept);
        assert_eq!(r.content, Some(json!({"name": "Ada", "n": 3, "ok": true})));
    }

    #[test]
    fn declines_when_a_required_field_has_no_default_or_the_mode_is_url() {
        let r = answer(&form(json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "secret": {"type": "string"}
        }, "required": ["secret"]})));
        assert_eq!(r.action, ElicitationAction::Decline);
        assert_eq!(r.content, None);
        let url: ElicitRequestParams = serde_json::from_value(json!({"mode": "url",
            "message": "open", "url": "https://example.invalid/x", "elicitationId": "e1"}))
        .unwrap();
        assert_eq!(answer(&url).action, ElicitationAction::Decline);
    }
}
