//! pi's automatic retry: which errors are transient, and the backoff.

use std::sync::OnceLock;

use regex::Regex;

/// Retry settings (`retry` in settings.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    pub enabled: bool,
    pub max_retries: u32,
    pub base_delay_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2000,
        }
    }
}

impl RetrySettings {
    /// Delay before retry `attempt` (1-based): base · 2^(attempt−1).
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        self.base_delay_ms
            .saturating_mul(1u64 << attempt.saturating_sub(1).min(20))
    }
}

/// Whether an error message names a transient failure worth retrying.
pub fn is_retryable(error_message: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?i)overloaded|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|server.?error|internal.?error|connection.?error|connection.?refused|other side closed|fetch failed|upstream.?connect|reset before headers|terminated|retry delay")
            .ok()
    });
    re.as_ref().is_some_and(|r| r.is_match(error_message)) && !is_context_overflow(error_message)
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
    use super::*;

    #[test]
    fn classifies() {
        assert!(is_retryable("429: {\"message\":\"mock error\"}"));
        assert!(is_retryable("Connection error."));
        assert!(!is_retryable("401 Unauthorized"));
        assert!(!is_retryable("400 prompt is too long: 500000 tokens"));
        let r = RetrySettings::default();
        assert_eq!(
            (r.delay_ms(1), r.delay_ms(2), r.delay_ms(3)),
            (2000, 4000, 8000)
        );
    }
}
