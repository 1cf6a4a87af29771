//! When to reconcile again: at `interval` with jitter after a success, with bounded
//! exponential backoff after a retryable failure, never on its own after a stall. The
//! interval comes from the user: nothing here can overflow or panic, whatever its size.

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

/// Backoff after the `failures`-th failure in a row: 1s, 2s, 4s … capped by `interval`
/// (and by five minutes).
pub fn backoff(failures: u32, interval: Duration) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    let d = Duration::from_secs(1u64 << exp);
    d.min(interval)
        .min(Duration::from_secs(300))
        .max(Duration::from_secs(1))
}

#[cfg(test)]
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
        assert_eq!(backoff(u32::MAX, Duration::MAX), Duration::from_secs(300));
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let i = Duration::from_secs(60);
        let got: Vec<u64> = (1..=8).map(|n| backoff(n, i).as_secs()).collect();
        assert_eq!(got, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(
            backoff(40, Duration::from_secs(3600)),
            Duration::from_secs(300)
        );
    }
}
