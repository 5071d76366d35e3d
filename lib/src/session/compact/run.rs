//! The one compaction orchestration. Every compaction — `pi-session
//! compact`, the agent's automatic and overflow compactions, an RPC
//! `compact` command — runs these steps in this order: `compaction_start`;
//! the host's say before the summary (cancel, or a summary of its own);
//! the summary calls, their retries reported as they happen; on failure
//! `compaction_end` with the error (or the abort) and the host told; the
//! `compaction` entry appended below the leaf; the host told it was
//! written; `compaction_end` with the result and the estimate of the
//! rebuilt context. What differs between callers sits behind [`Host`]:
//! where the records go, how the entry is written, whether extensions are
//! asked, and what the caller serves while the model writes.

use std::future::Future;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::format::compaction::{
    CompactionEnd, CompactionEventResult, CompactionReason, CompactionStart, SummaryRetry,
    SummarySource,
};
use crate::format::Entry;
use crate::session::Session;
use crate::timefmt::now_ms;

use super::cut::Preparation;
use super::result::{compact, CompactionResult};
use super::summarize::{reporting_retries, SummaryModel};

/// The message of a cancelled compaction (an abort, or a host that said
/// no), whatever the model call said.
pub const CANCELLED: &str = "Compaction cancelled";

/// What a compaction reports as it goes, in order.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    Start(&'a CompactionStart),
    /// A summary call's retry progress.
    Retry(&'a SummaryRetry, SummarySource),
    End(&'a CompactionEnd),
}

impl Event<'_> {
    /// The event as pi's record (`compaction_start`,
    /// `summarization_retry_*`, `compaction_end`).
    pub fn record(&self) -> Value {
        match self {
            Event::Start(s) => serde_json::to_value(s).unwrap_or(Value::Null),
            Event::Retry(r, source) => r.record(*source),
            Event::End(e) => serde_json::to_value(e).unwrap_or(Value::Null),
        }
    }
}

/// Why and how a compaction runs.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub reason: CompactionReason,
    /// A focus for the summary (`/compact <instructions>`).
    pub instructions: Option<&'a str>,
    /// A run is retried after it (overflow recovery); reported in
    /// `compaction_end` and to the host.
    pub will_retry: bool,
}

/// The host's say before the summary is written.
#[derive(Debug, Clone, PartialEq)]
pub enum Before {
    /// Write the summary through the model.
    Proceed,
    /// Do not compact (`compaction_end` reports an abort).
    Cancel,
    /// Use this `compaction` object (`summary`, and optionally
    /// `firstKeptEntryId`, `tokensBefore`, `details`) instead of asking the
    /// model; the entry is marked `fromHook`.
    Own(Value),
}

/// Why a compaction wrote nothing.
#[derive(Debug)]
pub enum Failure<E> {
    /// Aborted, or cancelled by the host ([`CANCELLED`]).
    Cancelled,
    /// The summary call failed (its message).
    Summary(String),
    /// The entry could not be written (the host's error).
    Write(E),
}

/// What a compaction came to.
#[derive(Debug)]
pub enum Outcome<E> {
    /// The entry was appended: the `compaction_end` result and the
    /// entries written.
    Done {
        result: Box<CompactionEventResult>,
        written: Vec<Entry>,
    },
    Failed(Failure<E>),
}

/// What a caller of [`run`] provides. The hooks have defaults for a caller
/// without extensions; a host runs on one thread (no `Send` bound).
#[allow(async_fn_in_trait)]
pub trait Host {
    /// Why an append failed.
    type WriteError: std::fmt::Display;

    /// The session being compacted (read for the estimate after the
    /// entry is written).
    fn session(&self) -> &Session;

    /// One event, as it happens.
    fn event(&mut self, ev: Event<'_>);

    /// Asked before the summary is written. Default: go on.
    async fn before(&mut self, _prep: &Preparation<'_>, _req: &Request<'_>) -> Before {
        Before::Proceed
    }

    /// Waits for the summary calls, handing their retry reports (from
    /// `retries`) to [`Host::event`] as they come. A host that serves other
    /// requests meanwhile does so here.
    async fn wait<T>(
        &mut self,
        job: impl Future<Output = T>,
        retries: &mut UnboundedReceiver<SummaryRetry>,
        source: SummarySource,
    ) -> T {
        reporting_retries(job, retries, |r| self.event(Event::Retry(&r, source))).await
    }

    /// Appends the entry `make` builds from the session as it then is (its
    /// id fresh, its parent the leaf); returns the entries written.
    fn append(
        &mut self,
        make: &mut dyn FnMut(&Session) -> Entry,
    ) -> Result<Vec<Entry>, Self::WriteError>;

    /// Told after a failed or cancelled compaction's `compaction_end`.
    async fn failed(&mut self, _req: &Request<'_>, _error: Option<String>, _aborted: bool) {}

    /// Told after the entry is written, before `compaction_end`.
    async fn compacted(&mut self, _req: &Request<'_>, _entry: &Entry, _from_host: bool) {}
}

/// Runs a prepared compaction through `host` (see the module's steps),
/// writing the summary with `model`; `model.cancel` aborts it.
pub async fn run<H: Host>(
    host: &mut H,
    prep: Preparation<'static>,
    model: &mut SummaryModel,
    req: Request<'_>,
) -> Outcome<H::WriteError> {
    let reason = req.reason;
    host.event(Event::Start(&CompactionStart::new(reason)));
    let own = match host.before(&prep, &req).await {
        Before::Proceed => None,
        Before::Own(c) => Some(c),
        Before::Cancel => {
            host.event(Event::End(&CompactionEnd::aborted(reason)));
            host.failed(&req, None, true).await;
            return Outcome::Failed(Failure::Cancelled);
        }
    };
    let from_host = own.is_some();
    let result = match own {
        Some(c) => Ok(CompactionResult::from_own(&c, &prep)),
        None => {
            let mut retries = model.report_retries();
            let job = compact(&prep, model, req.instructions);
            let source = SummarySource::Compaction(reason);
            host.wait(job, &mut retries, source).await
        }
    };
    drop(prep);
    let result = match result {
        Ok(r) => r,
        Err(msg) => {
            let aborted = model.cancel.is_cancelled();
            let end = if aborted {
                CompactionEnd::aborted(reason)
            } else {
                CompactionEnd::failure(reason, &msg)
            };
            host.event(Event::End(&end));
            host.failed(&req, end.error_message.clone(), aborted).await;
            return Outcome::Failed(if aborted {
                Failure::Cancelled
            } else {
                Failure::Summary(msg)
            });
        }
    };
    let written = host.append(&mut |s: &Session| {
        let mut entry = result.entry(s.fresh_id(), s.leaf_id().map(str::to_string), now_ms());
        if let (Entry::Compaction(c), true) = (&mut entry, from_host) {
            // pi marks a host's own summary; it has no model usage.
            c.from_hook = Some(true);
            c.usage = None;
            c.details = Some(result.details.clone()).filter(|d| !d.is_null());
        }
        entry
    });
    let written = match written {
        Ok(w) => w,
        Err(e) => {
            let end = CompactionEnd::failure(reason, &e.to_string());
            host.event(Event::End(&end));
            return Outcome::Failed(Failure::Write(e));
        }
    };
    if let Some(entry) = written.last() {
        host.compacted(&req, entry, from_host).await;
    }
    let mut event = result.event_result(host.session().projection(None).estimate_tokens());
    if from_host {
        event.usage = None;
        event.details = event.details.filter(|d| !d.is_null());
    }
    host.event(Event::End(&CompactionEnd::success(
        reason,
        event.clone(),
        req.will_retry,
    )));
    Outcome::Done {
        result: Box::new(event),
        written,
    }
}
