//! The wire facts of subagent runs that readers below the subagent runtime
//! need: a child session names its parent in its first `custom` entry of
//! type `pi-web:subagent` (version 1), as pi-web writes it. The session
//! listing reads it from a raw line without loading the session.

use serde_json::Value;

/// The `customType` of the entry that makes a session a subagent child.
pub const METADATA_TYPE: &str = "pi-web:subagent";

/// The parent session id of a raw `pi-web:subagent` custom entry (version
/// 1); `None` for any other entry.
pub fn metadata_parent(entry: &Value) -> Option<String> {
    if entry.get("type").and_then(Value::as_str) != Some("custom")
        || entry.get("customType").and_then(Value::as_str) != Some(METADATA_TYPE)
    {
        return None;
    }
    let data = entry.get("data")?;
    if data.get("version") != Some(&Value::from(1)) {
        return None;
    }
    data.get("parentSessionId")
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_version_1_metadata_entry_names_a_parent() {
        let e = |t: &str, v: u64| {
            json!({"type": "custom", "customType": t, "id": "a", "parentId": null,
                "data": {"version": v, "parentSessionId": "P"}})
        };
        assert_eq!(metadata_parent(&e(METADATA_TYPE, 1)).as_deref(), Some("P"));
        assert_eq!(metadata_parent(&e(METADATA_TYPE, 2)), None);
        assert_eq!(metadata_parent(&e("pi-web:subagent-status", 1)), None);
        assert_eq!(metadata_parent(&json!({"type": "message"})), None);
    }
}
