//! Retry policy for registry requests: which failures are worth another attempt,
//! bounded exponential backoff, and `Retry-After` (seconds or HTTP-date) on 429/503.
//! Pure rules: no HTTP client here beyond reading a header value. Which transport
//! failures are retried is decided by their cause (`failure.rs`).

use std::time::Duration;

/// How often and how long to retry transient failures (connection errors, 5xx, 429).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request in total, including the first (at least 1).
    pub attempts: u32,
    /// Delay before the first retry; doubled for each further retry.
    pub base: Duration,
    /// Largest backoff delay.
    pub max_delay: Duration,
    /// Largest `Retry-After` honoured; longer requests are capped to this.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            base: Duration::from_millis(500),
            max_delay: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy with `base` as the first backoff delay (tests use a few milliseconds).
    pub fn with_base(base: Duration) -> Self {
        Self {
            base,
            ..Self::default()
        }
    }

    /// Backoff before retry number `retry` (1 for the first retry).
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32 << retry.saturating_sub(1).min(16);
        self.base.saturating_mul(factor).min(self.max_delay)
    }

    /// The delay before retry number `retry`: the server's `Retry-After` when it sent
    /// one (capped at `max_retry_after`), else the backoff.
    pub fn delay(&self, retry: u32, retry_after: Option<&str>) -> Duration {
        match retry_after.and_then(|v| parse_retry_after(v, chrono::Utc::now())) {
            Some(d) => d.min(self.max_retry_after),
            None => self.backoff(retry),
        }
    }
}

/// Parses a `Retry-After` value: delta seconds or an HTTP-date (relative to `now`).
pub fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - now;
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

/// True for statuses a retry can cure: 429 and 5xx except 501/505.
pub fn retryable_status(status: u16) -> bool {
    status == 429 || (500..600).contains(&status) && status != 501 && status != 505
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy {
            base: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            ..RetryPolicy::default()
        };
        assert_eq!(p.backoff(1), Duration::from_millis(100));
        assert_eq!(p.backoff(2), Duration::from_millis(200));
        assert_eq!(p.backoff(3), Duration::from_millis(350));
        assert_eq!(p.backoff(40), Duration::from_millis(350));
    }

    #[test]
    fn retry_after_accepts_seconds_and_http_dates_and_is_capped() {
        let now = chrono::DateTime::parse_from_rfc2822("Sun, 06 Nov 1994 08:49:37 GMT")
            .unwrap()
            .to_utc();
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:49 GMT", now),
            Some(Duration::from_secs(12))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        let p = RetryPolicy {
            max_retry_after: Duration::from_secs(3),
            ..RetryPolicy::default()
        };
        assert_eq!(p.delay(1, Some("3600")), Duration::from_secs(3));
        assert_eq!(p.delay(1, None), p.backoff(1));
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for s in [429, 500, 502, 503, 504] {
            assert!(retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 416, 501] {
            assert!(!retryable_status(s), "{s}");
        }
    }
}
