//! One summary request through the provider layer (the shared system
//! prompt, one user message, no tools), retried on a transient failure as
//! the agent retries its turns, with the retries' progress reported as it
//! happens.

use std::time::Duration;

use serde_json::Map;
use tokio_util::sync::CancellationToken;

use crate::format::compaction::SummaryRetry;
use crate::format::model::{Model, ThinkingLevel};
use crate::format::{AgentMessage, ContentBlock, Num, Usage, UserContent};
use crate::provider::retry::{self, RetrySettings};
use crate::provider::{self, Request};
use crate::timefmt::now_ms;

use super::prompts::SUMMARY_SYSTEM_PROMPT;

/// How the summary calls are made.
#[derive(Debug, Clone)]
pub struct SummaryModel {
    pub model: Model,
    pub api_key: Option<String>,
    /// The session's thinking level (used when the model reasons).
    pub thinking: ThinkingLevel,
    pub idle_timeout: Duration,
    pub cancel: CancellationToken,
    /// `retry.*`: a transient failure of a summary call is retried.
    pub retry: RetrySettings,
    /// Where the retries' progress goes as it happens, if anywhere.
    pub retry_events: Option<tokio::sync::mpsc::UnboundedSender<SummaryRetry>>,
}

impl SummaryModel {
    /// Sends this model's retry progress to the returned receiver (see
    /// [`reporting_retries`]).
    pub fn report_retries(&mut self) -> tokio::sync::mpsc::UnboundedReceiver<SummaryRetry> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.retry_events = Some(tx);
        rx
    }

    fn report(&self, r: SummaryRetry) {
        if let Some(tx) = &self.retry_events {
            let _ = tx.send(r);
        }
    }
}

/// Runs `job` (summary calls through a model whose retries report to `rx`)
/// and hands every retry report to `on` as it comes, the last ones before
/// the job's result is returned.
pub async fn reporting_retries<T>(
    job: impl std::future::Future<Output = T>,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<SummaryRetry>,
    mut on: impl FnMut(SummaryRetry),
) -> T {
    tokio::pin!(job);
    let out = loop {
        tokio::select! {
            biased;
            Some(r) = rx.recv() => on(r),
            v = &mut job => break v,
        }
    };
    while let Ok(r) = rx.try_recv() {
        on(r);
    }
    out
}

/// A summary and what it cost.
#[derive(Debug, Clone)]
pub struct SummaryText {
    pub text: String,
    pub usage: Usage,
}

/// One summary request: our system prompt, one user message, no tools.
/// `what` names the call in errors (`Summarization`, `Turn prefix
/// summarization`, `Branch summarization`). A transient failure is retried
/// under `m.retry` as the agent retries its turns (same rules and delays);
/// a deterministic error or a cancel ends it at once.
pub async fn summarize(m: &SummaryModel, user: String, what: &str) -> Result<SummaryText, String> {
    let thinking = if m.model.reasoning {
        m.thinking
    } else {
        ThinkingLevel::Off
    };
    let req = Request {
        model: m.model.clone(),
        system_prompt: Some(SUMMARY_SYSTEM_PROMPT.to_string()),
        messages: vec![AgentMessage::User(crate::format::message::UserMessage {
            content: UserContent::Blocks(vec![ContentBlock::text(user)]),
            timestamp: Num::signed(now_ms()),
            extra: Map::new(),
        })
        .into()],
        tools: Vec::new(),
        api_key: m.api_key.clone(),
        thinking,
        max_tokens: None,
        headers: Vec::new(),
        idle_timeout: m.idle_timeout,
        cancel: m.cancel.clone(),
        session_id: Some(crate::session::ids::new_session_id()),
        response_schema: None,
    };
    let mut attempt = 0;
    let reply = loop {
        let done = provider::stream_detailed(req.clone(), &mut |_, _| {}).await;
        let reply = done.message;
        let err = reply.error_message.as_deref().unwrap_or("Unknown error");
        let again = reply.stop_reason == "error"
            && !m.cancel.is_cancelled()
            && m.retry.enabled
            && attempt < m.retry.max_retries
            && retry::should_retry(err, done.failure.as_ref());
        if !again {
            if attempt > 0 {
                m.report(SummaryRetry::Finished);
            }
            break reply;
        }
        attempt += 1;
        let delay = m.retry.delay_for(attempt, done.failure.as_ref());
        m.report(SummaryRetry::Scheduled {
            attempt,
            max_attempts: m.retry.max_retries,
            delay_ms: delay,
            error_message: err.to_string(),
        });
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(delay)) => {}
            _ = m.cancel.cancelled() => {
                m.report(SummaryRetry::Finished);
                return Err(format!("{what} failed: Request was aborted"));
            }
        }
        m.report(SummaryRetry::AttemptStart);
    };
    match reply.stop_reason.as_str() {
        "error" | "aborted" => {
            return Err(format!(
                "{what} failed: {}",
                reply.error_message.as_deref().unwrap_or("Unknown error")
            ))
        }
        "length" => {
            return Err(format!(
                "{what} failed: generation hit the token cap and the summary is incomplete"
            ))
        }
        _ => {}
    }
    if reply
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolCall(_)))
    {
        return Err(format!("{what} attempted to call a tool"));
    }
    Ok(SummaryText {
        text: crate::format::message::blocks_text(&reply.content, "\n"),
        usage: reply.usage,
    })
}
