//! `--verbose`: the run's progress on stderr as it happens — each turn,
//! each tool call as it starts and ends (with its time), retries — with
//! the time since the run started, and at the end one usage line (turns,
//! tokens, cost with the subagents' share, wall time). Built from the
//! events the run streams, so it says what `--mode json` would.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::Value;

use crate::agent::Event;
use crate::format::run_end::RunEnd;

/// Watches a run's events; prints only when verbose.
pub(super) struct Progress {
    prog: &'static str,
    verbose: bool,
    started: Instant,
    /// The parent's turns so far (`turn_end` events).
    pub turns: u64,
    tools: HashMap<String, Instant>,
}

fn secs(d: std::time::Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

impl Progress {
    pub fn new(prog: &'static str, verbose: bool, started: Instant) -> Progress {
        Progress {
            prog,
            verbose,
            started,
            turns: 0,
            tools: HashMap::new(),
        }
    }

    fn say(&self, what: &str) {
        crate::cli::note(
            self.prog,
            &format!("[{}] {what}", secs(self.started.elapsed())),
        );
    }

    /// One event of the run.
    pub fn event(&mut self, ev: &Event<'_>) {
        let kind = ev.kind();
        if kind == "turn_end" {
            self.turns += 1;
        }
        // Only the events said in verbose mode are read (never built).
        if !self.verbose
            || !matches!(
                kind,
                "turn_start"
                    | "tool_execution_start"
                    | "tool_execution_end"
                    | "auto_retry_start"
                    | "compaction_start"
            )
        {
            return;
        }
        let v = &*ev.to_value();
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
        match kind {
            "turn_start" => self.say(&format!("turn {}", self.turns + 1)),
            "tool_execution_start" => {
                self.tools
                    .insert(text("toolCallId").to_string(), Instant::now());
                self.say(&format!("tool {} started", text("toolName")));
            }
            "tool_execution_end" => {
                let took = self
                    .tools
                    .remove(text("toolCallId"))
                    .map(|t| format!(" after {}", secs(t.elapsed())))
                    .unwrap_or_default();
                let failed = if v.get("isError").and_then(Value::as_bool) == Some(true) {
                    " (error)"
                } else {
                    ""
                };
                self.say(&format!("tool {} ended{took}{failed}", text("toolName")));
            }
            "auto_retry_start" => self.say(&format!(
                "retry {} of {} in {} ms: {}",
                v["attempt"],
                v["maxAttempts"],
                v["delayMs"],
                text("errorMessage")
            )),
            "compaction_start" => self.say("compacting the context"),
            _ => {}
        }
    }

    /// The closing usage line (verbose only).
    pub fn finish(&self, end: &RunEnd) {
        if !self.verbose {
            return;
        }
        crate::cli::note(self.prog, &usage_line(end));
    }
}

/// `usage: 4 turns, 1,234 tokens (input …), cost $0.0123 (subagents …), 5.1s, completed`.
pub(super) fn usage_line(end: &RunEnd) -> String {
    let u = &end.usage;
    let kids: f64 = end.children.iter().map(|c| c.usage.cost.total).sum();
    let kids = if end.children.is_empty() {
        String::new()
    } else {
        format!(
            " (subagents ${kids:.4} in {} run{})",
            end.children.len(),
            if end.children.len() == 1 { "" } else { "s" }
        )
    };
    format!(
        "usage: {} turn{}, {} tokens (input {}, output {}, cache read {}, cache write {}), cost ${:.4}{kids}, {:.1}s, {} (exit {})",
        end.turns,
        if end.turns == 1 { "" } else { "s" },
        grouped(u.total_tokens),
        grouped(u.input),
        grouped(u.output),
        grouped(u.cache_read),
        grouped(u.cache_write),
        u.cost.total,
        end.duration_ms as f64 / 1000.0,
        end.stop_reason,
        end.exit_code
    )
}

/// `1234567` → `1,234,567`.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::run_end::{RunChild, UsageSum};

    #[test]
    fn the_usage_line_counts_turns_tokens_and_the_subagents_share() {
        let mut usage = UsageSum {
            input: 1_234_567,
            output: 10,
            total_tokens: 1_234_577,
            ..UsageSum::default()
        };
        usage.cost.total = 0.5;
        let mut kid = UsageSum::default();
        kid.cost.total = 0.125;
        let end = RunEnd {
            exit_code: 0,
            stop_reason: "completed".into(),
            error: None,
            model: None,
            usage,
            turns: 1,
            duration_ms: 5120,
            session_id: "s".into(),
            session_file: None,
            output: None,
            children: vec![RunChild {
                id: "c".into(),
                agent: "explore".into(),
                status: "completed".into(),
                usage: kid,
            }],
            extra: Default::default(),
        };
        assert_eq!(
            usage_line(&end),
            "usage: 1 turn, 1,234,577 tokens (input 1,234,567, output 10, cache read 0, cache write 0), cost $0.5000 (subagents $0.1250 in 1 run), 5.1s, completed (exit 0)"
        );
        let mut p = Progress::new("pi-run", false, Instant::now());
        p.event(&Event::Value(&serde_json::json!({"type": "turn_end"})));
        p.event(&Event::Value(&serde_json::json!({"type": "turn_start"})));
        assert_eq!(p.turns, 1);
    }
}
