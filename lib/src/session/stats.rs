//! Token and cost totals of a session, per model.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::format::{AgentMessage, Entry, Usage};

use super::Session;

/// Totals for one model (or for the whole session).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub responses: u64,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub cost: f64,
}

impl Totals {
    /// Adds one usage record.
    pub fn add(&mut self, u: &Usage) {
        self.responses += 1;
        self.input += u.input.as_u64();
        self.output += u.output.as_u64();
        self.cache_read += u.cache_read.as_u64();
        self.cache_write += u.cache_write.as_u64();
        let total = u.total_tokens.as_u64();
        self.total_tokens += if total > 0 {
            total
        } else {
            u.input.as_u64() + u.output.as_u64() + u.cache_read.as_u64() + u.cache_write.as_u64()
        };
        self.cost += u.cost.total.as_f64();
    }
}

/// Session statistics over every entry of the file (all branches).
#[derive(Debug, Clone, Default)]
pub struct SessionStats {
    pub entries: usize,
    pub messages: BTreeMap<String, u64>,
    pub tool_calls: u64,
    pub total: Totals,
    /// Keyed by `provider/model`.
    pub per_model: BTreeMap<String, Totals>,
}

impl Totals {
    /// The totals as record fields, in the records' order.
    fn fields(&self) -> Map<String, Value> {
        let v = json!({
            "responses": self.responses, "input": self.input, "output": self.output,
            "cacheRead": self.cache_read, "cacheWrite": self.cache_write,
            "totalTokens": self.total_tokens, "cost": self.cost,
        });
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }
}

impl SessionStats {
    /// The records of `pi-session stats` for session `s`: one `stats`
    /// record (counts and totals), then a `model_stats` record per model.
    pub fn records(&self, s: &Session) -> Vec<Value> {
        let mut rec = Map::new();
        rec.insert("type".into(), "stats".into());
        rec.insert("sessionId".into(), s.id().into());
        rec.insert("path".into(), s.path.display().to_string().into());
        rec.insert("entries".into(), self.entries.into());
        rec.insert("messages".into(), json!(self.messages));
        rec.insert("toolCalls".into(), self.tool_calls.into());
        rec.extend(self.total.fields());
        let mut out = vec![Value::Object(rec)];
        for (model, t) in &self.per_model {
            let mut rec = Map::new();
            rec.insert("type".into(), "model_stats".into());
            rec.insert("sessionId".into(), s.id().into());
            rec.insert("model".into(), model.as_str().into());
            rec.extend(t.fields());
            out.push(Value::Object(rec));
        }
        out
    }
}

impl Session {
    /// Counts messages by role and sums usage per model: assistant messages,
    /// `usage` entries and summarisation usage of compactions and branch
    /// summaries.
    pub fn stats(&self) -> SessionStats {
        let mut st = SessionStats {
            entries: self.entries.len(),
            ..Default::default()
        };
        let add = |key: String, u: &Usage, st: &mut SessionStats| {
            st.total.add(u);
            st.per_model.entry(key).or_default().add(u);
        };
        for e in &self.entries {
            match e {
                Entry::Message(m) => {
                    *st.messages.entry(m.message.role().to_string()).or_default() += 1;
                    if let AgentMessage::Assistant(a) = &m.message {
                        st.tool_calls += a
                            .content
                            .iter()
                            .filter(|b| matches!(b, crate::format::ContentBlock::ToolCall(_)))
                            .count() as u64;
                        add(format!("{}/{}", a.provider, a.model), &a.usage, &mut st);
                    }
                }
                Entry::Usage(u) => add(format!("{}/{}", u.provider, u.model), &u.usage, &mut st),
                Entry::Compaction(c) => {
                    if let Some(u) = &c.usage {
                        add("(compaction)".into(), u, &mut st);
                    }
                }
                Entry::BranchSummary(b) => {
                    if let Some(u) = &b.usage {
                        add("(branch summary)".into(), u, &mut st);
                    }
                }
                _ => {}
            }
        }
        st
    }
}
