//! When to reconcile again: at `interval` with jitter after a success, with Flux's
//! per-object exponential backoff after a retryable failure (`--min-retry-delay` doubled
//! at each failure in a row, capped at `--max-retry-delay`, whatever the interval), never
//! on its own after a stall. The interval and the delays come from the user: nothing here
//! can overflow or panic, whatever their size. Pure: no I/O, no clock.

use std::time::Duration;

/// Fraction of the interval the jitter may move the requeue, either way (Flux: 5%).
pub const JITTER: f64 = 0.05;

/// `interval` moved by up to ±5%, deterministically from `seed` (e.g. a hash of the
/// object and the time) so a fleet of objects does not requeue in lockstep. Saturates at
/// `Duration::MAX` instead of overflowing.
pub fn with_jitter(interval: Duration, seed: u64) -> Duration {
    // Map the seed to [-1, 1].
    let unit = (seed % 2001) as f64 / 1000.0 - 1.0;
    Duration::try_from_secs_f64(interval.as_secs_f64() * (1.0 + unit * JITTER))
        .unwrap_or(Duration::MAX)
}

/// Flux's retry delays (`--min-retry-delay`, `--max-retry-delay`): the n-th failure in a
/// row waits `min * 2^(n-1)`, capped at `max`, as controller-runtime's per-item
/// exponential failure rate limiter that Flux's controllers are built with. A success
/// forgets the count (the caller's job).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryDelays {
    min: Duration,
    max: Duration,
}

/// Delays that cannot be used together.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RetryDelaysError {
    /// A zero first delay would retry a failing object at once, forever.
    #[error("--min-retry-delay must be above zero (Flux's default is 750ms)")]
    ZeroMin,
    /// The first delay is longer than the cap.
    #[error(
        "--min-retry-delay {min} is longer than --max-retry-delay {max}: \
         lower --min-retry-delay or raise --max-retry-delay"
    )]
    MinAboveMax {
        /// `--min-retry-delay`, Go-formatted.
        min: String,
        /// `--max-retry-delay`, Go-formatted.
        max: String,
    },
}

impl Default for RetryDelays {
    /// Flux's defaults: 750ms to 15m.
    fn default() -> Self {
        Self {
            min: Duration::from_millis(750),
            max: Duration::from_secs(15 * 60),
        }
    }
}

impl RetryDelays {
    /// Delays from `min` to `max`; refuses a zero `min` and a `min` above `max`.
    pub fn new(min: Duration, max: Duration) -> Result<Self, RetryDelaysError> {
        if min.is_zero() {
            return Err(RetryDelaysError::ZeroMin);
        }
        if min > max {
            return Err(RetryDelaysError::MinAboveMax {
                min: super::duration::format(min),
                max: super::duration::format(max),
            });
        }
        Ok(Self { min, max })
    }

    /// The wait after the `failures`-th failure in a row (1 for the first): `min`,
    /// `2 * min`, `4 * min` … capped at `max`. Saturates at `max` instead of overflowing.
    pub fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1);
        2u32.checked_pow(doublings)
            .and_then(|factor| self.min.checked_mul(factor))
            .map_or(self.max, |d| d.min(self.max))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_five_percent() {
        let i = Duration::from_secs(600);
        for seed in [0u64, 1, 999, 1000, 2000, 123_456_789, u64::MAX] {
            let d = with_jitter(i, seed);
            assert!(
                d >= Duration::from_secs(570) && d <= Duration::from_secs(630),
                "{d:?}"
            );
        }
        assert_ne!(with_jitter(i, 1), with_jitter(i, 1500));
    }

    #[test]
    fn jitter_of_huge_intervals_does_not_panic() {
        // 5000000000000000h, which once passed validation, and the largest Duration.
        let huge = Duration::from_secs(5_000_000_000_000_000 * 3600);
        for seed in [0u64, 1000, 2000] {
            assert!(with_jitter(huge, seed) >= huge.mul_f64(0.94));
            assert!(with_jitter(Duration::MAX, seed) >= Duration::MAX.mul_f64(0.94));
        }
        assert_eq!(with_jitter(Duration::MAX, 2000), Duration::MAX);
    }

    fn ms(d: Duration) -> u128 {
        d.as_millis()
    }

    #[test]
    fn fluxs_default_backoff_doubles_from_750ms_to_15m() {
        let r = RetryDelays::default();
        let got: Vec<u128> = (1..=12).map(|n| ms(r.backoff(n))).collect();
        assert_eq!(
            got,
            vec![
                750, 1_500, 3_000, 6_000, 12_000, 24_000, 48_000, 96_000, 192_000, 384_000,
                768_000, 900_000
            ]
        );
        assert_eq!(r.backoff(40), Duration::from_secs(900));
    }

    #[test]
    fn custom_delays_are_used_and_a_longer_cap_is_reached() {
        let r = RetryDelays::new(Duration::from_secs(2), Duration::from_secs(3600)).unwrap();
        let got: Vec<u64> = (1..=13).map(|n| r.backoff(n).as_secs()).collect();
        assert_eq!(
            got,
            vec![2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3600, 3600]
        );
        let flat = RetryDelays::new(Duration::from_secs(5), Duration::from_secs(5)).unwrap();
        assert_eq!(flat.backoff(1), flat.backoff(30));
        assert_eq!(flat.backoff(1), Duration::from_secs(5));
    }

    #[test]
    fn any_failure_count_or_delay_stays_bounded_without_overflow() {
        let r = RetryDelays::default();
        for n in [0, 31, 32, 33, 64, u32::MAX - 1, u32::MAX] {
            assert_eq!(r.backoff(n).min(Duration::from_secs(900)), r.backoff(n));
        }
        assert_eq!(r.backoff(u32::MAX), Duration::from_secs(900));
        let huge = RetryDelays::new(Duration::from_secs(1), Duration::MAX).unwrap();
        assert_eq!(huge.backoff(2), Duration::from_secs(2));
        assert_eq!(huge.backoff(u32::MAX), Duration::MAX);
        let big_min = RetryDelays::new(Duration::MAX, Duration::MAX).unwrap();
        assert_eq!(big_min.backoff(3), Duration::MAX);
    }

    #[test]
    fn a_zero_or_a_min_above_the_max_is_refused() {
        let e = RetryDelays::new(Duration::from_secs(20), Duration::from_secs(10)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--min-retry-delay 20s is longer than --max-retry-delay 10s: \
             lower --min-retry-delay or raise --max-retry-delay"
        );
        assert_eq!(
            RetryDelays::new(Duration::ZERO, Duration::from_secs(10)),
            Err(RetryDelaysError::ZeroMin)
        );
    }
}
