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
