//! The outcome of a `pi-run` run: the `run_end` record that closes
//! `--mode json` and the same fields stored in the session as a custom
//! entry (`customType` [`CUSTOM_TYPE`]; pi keeps custom entries it does not
//! know, and they never reach the model), so a folder of session files is a
//! report (`pi-session ls`, `pi-session stats --all`). Usage is in pi's
//! `Usage` shape, summed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Usage;

/// The `customType` of the stored outcome.
pub const CUSTOM_TYPE: &str = "pi-run:run_end";

/// Summed cost, in pi's `cost` shape (US dollars).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostSum {
    #[serde(default)]
    pub input: f64,
    #[serde(default)]
    pub output: f64,
    #[serde(rename = "cacheRead", default)]
    pub cache_read: f64,
    #[serde(rename = "cacheWrite", default)]
    pub cache_write: f64,
    #[serde(default)]
    pub total: f64,
}

/// Summed usage, in pi's `Usage` shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageSum {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(rename = "cacheRead", default)]
    pub cache_read: u64,
    #[serde(rename = "cacheWrite", default)]
    pub cache_write: u64,
    #[serde(rename = "totalTokens", default)]
    pub total_tokens: u64,
    #[serde(default)]
    pub cost: CostSum,
}

impl UsageSum {
    /// Adds one response's usage (`totalTokens`, else the sum of its parts).
    pub fn add(&mut self, u: &Usage) {
        let (i, o, r, w) = (
            u.input.as_u64(),
            u.output.as_u64(),
            u.cache_read.as_u64(),
            u.cache_write.as_u64(),
        );
        self.input += i;
        self.output += o;
        self.cache_read += r;
        self.cache_write += w;
        let total = u.total_tokens.as_u64();
        self.total_tokens += if total > 0 { total } else { i + o + r + w };
        let c = &u.cost;
        self.cost.input += finite(c.input.as_f64());
        self.cost.output += finite(c.output.as_f64());
        self.cost.cache_read += finite(c.cache_read.as_f64());
        self.cost.cache_write += finite(c.cache_write.as_f64());
        self.cost.total += finite(c.total.as_f64());
    }

    /// Adds another sum.
    pub fn merge(&mut self, o: &UsageSum) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
        self.total_tokens += o.total_tokens;
        self.cost.input += o.cost.input;
        self.cost.output += o.cost.output;
        self.cost.cache_read += o.cost.cache_read;
        self.cost.cache_write += o.cost.cache_write;
        self.cost.total += o.cost.total;
    }
}

/// A number a sum can take (a broken file's `NaN` or infinity counts as 0).
fn finite(v: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// One subagent child of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunChild {
    /// The child's session id.
    pub id: String,
    /// Its profile (`explore`, `general-purpose`, …).
    pub agent: String,
    /// `completed`, `failed`, `aborted`, `running`, …
    pub status: String,
    pub usage: UsageSum,
}

/// How a run ended, field by field (docs/ci.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    #[serde(rename = "exitCode")]
    pub exit_code: i32,
    /// `completed`, `error`, `aborted`, `max_turns`, `max_cost`,
    /// `timeout` or `output_schema`.
    #[serde(rename = "stopReason")]
    pub stop_reason: String,
    /// Why, when the run did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `provider/id` of the parent's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The parent's and every child's usage.
    pub usage: UsageSum,
    /// The parent's turns (one model response each).
    #[serde(default)]
    pub turns: u64,
    #[serde(rename = "durationMs", default)]
    pub duration_ms: u64,
    #[serde(rename = "sessionId", default)]
    pub session_id: String,
    /// `null` for `--no-session`.
    #[serde(rename = "sessionFile", default)]
    pub session_file: Option<String>,
    /// The validated document (`--output-schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default)]
    pub children: Vec<RunChild>,
    /// Fields a later version adds, kept on read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RunEnd {
    /// The `run_end` record of `--mode json`.
    pub fn record(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), "run_end".into());
        if let Ok(Value::Object(fields)) = serde_json::to_value(self) {
            m.extend(fields);
        }
        Value::Object(m)
    }

    /// The outcome stored in a session: the data of a custom entry of
    /// type [`CUSTOM_TYPE`] (`None` for any other entry, or data that is
    /// not an outcome).
    pub fn from_entry(entry: &Value) -> Option<RunEnd> {
        if entry.get("type")?.as_str()? != "custom"
            || entry.get("customType")?.as_str()? != CUSTOM_TYPE
        {
            return None;
        }
        serde_json::from_value(entry.get("data")?.clone()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_record_and_the_stored_entry_carry_the_same_fields() {
        let mut usage = UsageSum::default();
        let u: Usage = serde_json::from_value(json!({"input": 10, "output": 5, "cacheRead": 2, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.01, "cacheWrite": 0, "total": 0.31}}))
        .unwrap();
        usage.add(&u);
        usage.add(&u);
        assert_eq!(usage.total_tokens, 34, "parts summed when totalTokens is 0");
        assert!((usage.cost.total - 0.62).abs() < 1e-12);
        let end = RunEnd {
            exit_code: 3,
            stop_reason: "max_cost".into(),
            error: Some("stopped".into()),
            model: Some("p/m".into()),
            usage,
            turns: 2,
            duration_ms: 1200,
            session_id: "s1".into(),
            session_file: None,
            output: None,
            children: vec![],
            extra: Map::new(),
        };
        let rec = end.record();
        let keys: Vec<&str> = rec
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "type",
                "exitCode",
                "stopReason",
                "error",
                "model",
                "usage",
                "turns",
                "durationMs",
                "sessionId",
                "sessionFile",
                "children"
            ]
        );
        assert_eq!(rec["sessionFile"], Value::Null);
        let mut data = rec.clone();
        data.as_object_mut().unwrap().shift_remove("type");
        let entry = json!({"type": "custom", "customType": CUSTOM_TYPE, "data": data, "id": "x", "parentId": null});
        assert_eq!(RunEnd::from_entry(&entry), Some(end));
        let other = json!({"type": "custom", "customType": "other", "data": data});
        assert_eq!(RunEnd::from_entry(&other), None);
    }
}
