//! Automatic retry: which failed model calls are transient, and how long to
//! wait before the next attempt. Shared by the agent's turns and the
//! summary calls of compactions and branch summaries (`session::compact`),
//! so it lives here, below both.
//!
//! pi 1.6.0 decides with a regular expression over the error text, so a
//! `400` whose message happens to contain `429` is retried (observed with
//! the real pi, tests/oracle/FINDINGS.md). Here the provider says what kind of failure it was
//! ([`FailureInfo`]): an HTTP answer is judged by its status, a broken
//! transport (connection, idle timeout, cut-off or corrupted stream) is
//! always retried, and only errors a provider reported inside a well-formed
//! answer fall back to the text. Quota and billing errors and context
//! overflows are never retried. Unlike pi, a `Retry-After` /
//! `retry-after-ms` on a 429 or 503 sets the delay (capped by
//! `retry.maxAgentDelayMs`).

use std::sync::OnceLock;

use regex::Regex;

use crate::provider::{FailureInfo, FailureKind};

/// Retry settings (`retry` in settings.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    pub enabled: bool,
    pub max_retries: u32,
    pub base_delay_ms: u64,
    /// `retry.maxAgentDelayMs`: no wait is longer (0: no limit).
    pub max_delay_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2000,
            max_delay_ms: 60_000,
        }
    }
}

impl RetrySettings {
    fn cap(&self, ms: u64) -> u64 {
        if self.max_delay_ms == 0 {
            ms
        } else {
            ms.min(self.max_delay_ms)
        }
    }

    /// Backoff before retry `attempt` (1-based): base · 2^(attempt−1),
    /// capped by the maximum delay.
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        self.cap(
            self.base_delay_ms
                .saturating_mul(1u64 << attempt.saturating_sub(1).min(20)),
        )
    }

    /// The wait before retry `attempt` of `failure`: the server's requested
    /// delay on a 429 or 503, else the backoff; both capped.
    pub fn delay_for(&self, attempt: u32, failure: Option<&FailureInfo>) -> u64 {
        match failure {
            Some(FailureInfo {
                kind: FailureKind::Http(429 | 503),
                retry_after: Some(d),
            }) => self.cap(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            _ => self.delay_ms(attempt),
        }
    }
}

/// Whether an HTTP status is worth retrying: timeouts, rate limits and
/// server errors (except 501 Not Implemented).
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429) || ((500..600).contains(&status) && status != 501)
}

/// Whether the failure that ended a model call is transient.
/// `error_message` is the message's `errorMessage`; `failure` what the
/// provider said about it (`None` for sources that only give the text).
pub fn should_retry(error_message: &str, failure: Option<&FailureInfo>) -> bool {
    if is_context_overflow(error_message) || is_quota_error(error_message) {
        return false;
    }
    match failure.map(|f| &f.kind) {
        Some(FailureKind::Aborted) => false,
        Some(FailureKind::Transport) => true,
        Some(FailureKind::Http(status)) => retryable_status(*status),
        Some(FailureKind::Reported) | None => match leading_status(error_message) {
            Some(status) => retryable_status(status),
            None => transient_text(error_message),
        },
    }
}

/// [`should_retry`] for a bare error text.
pub fn is_retryable(error_message: &str) -> bool {
    should_retry(error_message, None)
}

/// A status the text starts with (`429: {…}`, `503 The model is
/// overloaded.`); a number elsewhere in the text does not count.
fn leading_status(error_message: &str) -> Option<u16> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"^([1-5]\d\d)(?::|\s|$)").ok());
    re.as_ref()?
        .captures(error_message.trim_start())?
        .get(1)?
        .as_str()
        .parse()
        .ok()
}

/// Wording of transient failures in provider-reported errors.
fn transient_text(error_message: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?i)overloaded|rate.?limit|too many requests|service.?unavailable|server.?error|internal.?error|connection.?error|connection.?refused|other side closed|fetch failed|upstream.?connect|reset before headers|terminated|retry delay|timed out|timeout")
            .ok()
    });
    re.as_ref().is_some_and(|r| r.is_match(error_message))
}

/// Whether an error says the account is out of quota or credit: waiting a
/// few seconds does not help.
pub fn is_quota_error(error_message: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?i)insufficient.?quota|quota.?exceeded|exceeded (your|the)? ?(current )?quota|billing|payment.?required|credit balance|out of credits|usage.?limit")
            .ok()
    });
    re.as_ref().is_some_and(|r| r.is_match(error_message))
}

/// Whether an error says the prompt is longer than the context window.
pub fn is_context_overflow(error_message: &str) -> bool {
    let m = error_message.to_ascii_lowercase();
    m.contains("context length")
        || m.contains("context window")
        || m.contains("prompt is too long")
        || m.contains("maximum context")
        || m.contains("too many tokens")
        || m.contains("context_length_exceeded")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn http(status: u16) -> FailureInfo {
        FailureInfo {
            kind: FailureKind::Http(status),
            retry_after: None,
        }
    }

    #[test]
    fn classifies_by_status_not_by_numbers_in_the_text() {
        let yes = |m: &str, s: u16| should_retry(m, Some(&http(s)));
        assert!(yes("429: {\"message\":\"mock error\"}", 429));
        assert!(yes("408: {}", 408));
        assert!(yes("529 {\"type\":\"overloaded_error\"}", 529));
        assert!(yes("500: boom", 500));
        assert!(!yes("501: not implemented", 501));
        assert!(!yes("401 Unauthorized", 401));
        assert!(!yes(
            "400: {\"message\":\"Invalid value 429 for max_tokens\"}",
            400
        ));
        assert!(!yes(
            "400: {\"message\":\"rate limit: too many tools\"}",
            400
        ));
        assert!(!yes("400 prompt is too long: 500000 tokens", 400));
        assert!(!yes("402: {\"code\":\"insufficient_quota\"}", 402));
        assert!(!yes(
            "429: {\"message\":\"You exceeded your current quota\"}",
            429
        ));
        assert!(!yes("503: {\"message\":\"quota exceeded\"}", 503));
    }

    #[test]
    fn transport_always_and_text_only_without_status() {
        let transport = FailureInfo {
            kind: FailureKind::Transport,
            retry_after: None,
        };
        assert!(should_retry(
            "Stream ended without finish_reason",
            Some(&transport)
        ));
        assert!(should_retry(
            "Request timed out: no data received for 1s (idle timeout)",
            Some(&transport)
        ));
        let reported = FailureInfo {
            kind: FailureKind::Reported,
            retry_after: None,
        };
        assert!(should_retry(
            "Rate limit reached for requests",
            Some(&reported)
        ));
        assert!(!should_retry(
            "Provider finish_reason: content_filter",
            Some(&reported)
        ));
        // Text only (faux, old sessions): a leading status counts, a status
        // inside the text does not.
        assert!(is_retryable("429 too many"));
        assert!(is_retryable("overloaded"));
        assert!(!is_retryable("400: max_tokens must be below 503"));
        assert!(is_retryable("Connection error."));
    }

    #[test]
    fn delays() {
        let r = RetrySettings::default();
        assert_eq!(
            (r.delay_ms(1), r.delay_ms(2), r.delay_ms(3)),
            (2000, 4000, 8000)
        );
        // pi: base 100, cap 300 → 100, 200, 300, 300.
        let r = RetrySettings {
            base_delay_ms: 100,
            max_delay_ms: 300,
            ..RetrySettings::default()
        };
        assert_eq!(
            (r.delay_ms(1), r.delay_ms(2), r.delay_ms(4)),
            (100, 200, 300)
        );
        let asked = |status: u16, secs: u64| FailureInfo {
            kind: FailureKind::Http(status),
            retry_after: Some(Duration::from_secs(secs)),
        };
        assert_eq!(r.delay_for(1, Some(&asked(429, 0))), 0);
        assert_eq!(r.delay_for(1, Some(&asked(503, 10))), 300);
        assert_eq!(r.delay_for(2, Some(&asked(500, 0))), 200);
        let r = RetrySettings::default();
        assert_eq!(r.delay_for(1, Some(&asked(429, 7))), 7000);
        assert_eq!(r.delay_for(1, Some(&asked(429, 3600))), 60_000);
    }
}
