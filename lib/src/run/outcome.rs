//! The outcome of a text or JSON mode run ([`RunEnd`]): how it ended (exit
//! code and stop reason), what it spent (the parent's usage and each
//! subagent child's, from the run's budget, with each child's status from
//! the subagent controller), how long it took and where its session is.
//! It is appended to the session as a custom entry (pi keeps it; the
//! model never sees it) and, in JSON mode, closes the stream as the
//! `run_end` record.

use serde_json::Value;

use super::Assembly;
use crate::agent::budget::Limit;
use crate::agent::Agent;
use crate::cli::{EXIT_FAILED, EXIT_LIMIT, EXIT_OK, EXIT_OUTPUT_SCHEMA};
use crate::format::run_end::{RunChild, RunEnd, UsageSum, CUSTOM_TYPE};
use crate::interrupt::StopReason;

/// How the run ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ended {
    /// With an answer (and, with `--output-schema`, a valid document).
    Completed,
    /// A model, provider or session error; the message.
    Failed(String),
    /// A signal or a stdout that went away.
    Stopped(StopReason),
    /// A limit of the run.
    Limit(Limit),
    /// The answer never matched `--output-schema`; the last errors.
    OutputSchema(Vec<String>),
}

impl Ended {
    /// What a stop from outside means for the outcome.
    pub fn from_stop(reason: StopReason) -> Ended {
        match reason {
            StopReason::Limit(l) => Ended::Limit(l),
            other => Ended::Stopped(other),
        }
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Ended::Completed => EXIT_OK,
            Ended::Failed(_) => EXIT_FAILED,
            Ended::Stopped(r) => r.exit_code(),
            Ended::Limit(_) => EXIT_LIMIT,
            Ended::OutputSchema(_) => EXIT_OUTPUT_SCHEMA,
        }
    }

    pub fn stop_reason(&self) -> &'static str {
        match self {
            Ended::Completed => "completed",
            Ended::Failed(_) => "error",
            Ended::Stopped(_) => "aborted",
            Ended::Limit(l) => l.stop_reason(),
            Ended::OutputSchema(_) => "output_schema",
        }
    }

    /// Why the run did not complete, in one line.
    pub fn error(&self) -> Option<String> {
        match self {
            Ended::Completed => None,
            Ended::Failed(e) => Some(e.clone()),
            Ended::Stopped(r) => Some(r.message()),
            Ended::Limit(l) => Some(l.message()),
            Ended::OutputSchema(errors) => Some(format!(
                "the final answer does not match --output-schema: {}",
                errors.join("; ")
            )),
        }
    }
}

/// The outcome record of the run as it ended.
pub(super) fn build(
    asm: &Assembly,
    agent: &Agent,
    ended: &Ended,
    turns: u64,
    output: Option<Value>,
) -> RunEnd {
    let (usage, spent) = match &asm.budget {
        Some(b) => (b.total(), b.children()),
        None => (UsageSum::default(), Vec::new()),
    };
    let statuses = asm
        .subagents
        .as_ref()
        .map(|c| c.child_statuses())
        .unwrap_or_default();
    let mut children: Vec<RunChild> = statuses
        .into_iter()
        .map(|(id, agent, status)| RunChild {
            usage: spent
                .iter()
                .find(|s| s.id == id)
                .map(|s| s.usage.clone())
                .unwrap_or_default(),
            id,
            agent,
            status: status.as_str().to_string(),
        })
        .collect();
    // A child that spent but is not the controller's (none today) still
    // counts in the breakdown, so it always adds up to the total.
    for s in spent {
        if !children.iter().any(|c| c.id == s.id) {
            children.push(RunChild {
                id: s.id,
                agent: s.agent,
                status: "unknown".into(),
                usage: s.usage,
            });
        }
    }
    let m = &agent.opts.model;
    RunEnd {
        exit_code: ended.exit_code(),
        stop_reason: ended.stop_reason().into(),
        error: ended.error(),
        model: Some(format!("{}/{}", m.provider, m.id)),
        usage,
        turns,
        duration_ms: asm.opts.started.elapsed().as_millis() as u64,
        session_id: agent.store.session.id().to_string(),
        session_file: agent.store.path().map(|p| p.display().to_string()),
        output,
        children,
        extra: Default::default(),
    }
}

/// Appends the outcome to the session as a custom entry.
pub(super) fn store(agent: &mut Agent, end: &RunEnd) -> Result<(), String> {
    let mut data = end.record();
    if let Some(m) = data.as_object_mut() {
        m.shift_remove("type");
    }
    let leaf = agent.store.session.leaf_id().map(str::to_string);
    let entry = agent
        .store
        .session
        .new_custom(leaf.as_deref(), CUSTOM_TYPE, data);
    agent
        .store
        .append_ref(entry)
        .map(|_| ())
        .map_err(|e| match agent.store.path() {
            Some(p) => format!("{}: cannot write session: {e}", p.display()),
            None => format!("cannot write session: {e}"),
        })
}

/// The text of an answer: its text blocks, joined.
pub(super) fn answer_text(m: &crate::format::message::AssistantMessage) -> String {
    m.content
        .iter()
        .filter_map(|b| match b {
            crate::format::ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn each_ending_has_its_code_and_reason() {
        let cases = [
            (Ended::Completed, 0, "completed"),
            (Ended::Failed("boom".into()), 1, "error"),
            (Ended::from_stop(StopReason::Interrupt), 130, "aborted"),
            (Ended::from_stop(StopReason::Terminate), 143, "aborted"),
            (Ended::from_stop(StopReason::StdoutClosed), 141, "aborted"),
            (
                Ended::from_stop(StopReason::Limit(Limit::MaxCost(1.0))),
                3,
                "max_cost",
            ),
            (
                Ended::Limit(Limit::Timeout(Duration::from_secs(5))),
                3,
                "timeout",
            ),
            (Ended::Limit(Limit::MaxTurns(2)), 3, "max_turns"),
            (
                Ended::OutputSchema(vec!["/a: bad".into()]),
                4,
                "output_schema",
            ),
        ];
        for (e, code, reason) in cases {
            assert_eq!((e.exit_code(), e.stop_reason()), (code, reason), "{e:?}");
            assert_eq!(e.error().is_none(), code == 0, "{e:?}");
        }
        assert!(Ended::OutputSchema(vec!["/a: bad".into()])
            .error()
            .unwrap()
            .contains("/a: bad"));
    }
}
