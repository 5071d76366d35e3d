//! Tool declarations as the model sees them (`toolsAdded` in system
//! messages, `tools` in provider requests).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `{name, description, parameters}` — `parameters` is a JSON Schema object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The property names a JSON Schema object lists under `required` (none
/// when it lists none or the list is not an array of names).
pub fn required_names(schema: &Map<String, Value>) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}
