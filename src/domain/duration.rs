//! Go duration strings (`60s`, `5m`, `1h30m`, `250ms`), as Flux's `interval`, `timeout`
//! and the controller flags write them: the ONE parser of the crate (the API validation,
//! the reconciler and the CLI flags all call [`parse`]).
//!
//! The syntax is the CRD's pattern `([0-9]+(\.[0-9]+)?(ms|s|m|h))+`, plus Go's bare `0`.
//! Values are bounded as Go's `time.Duration` bounds them (an int64 of nanoseconds, about
//! 292 years): Flux cannot represent a longer interval either. The arithmetic is integer
//! nanoseconds with checked operations, so no input can overflow or panic.

use std::time::Duration;

/// The longest duration: Go's `time.Duration` maximum, `2562047h47m16.854775807s`.
pub const MAX: Duration = Duration::new(9_223_372_036, 854_775_807);
const MAX_NANOS: u128 = i64::MAX as u128;

/// A duration that does not parse, or is longer than [`MAX`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DurationError {
    /// Not a sequence of numbers with units.
    #[error("invalid duration '{0}': expected a sequence of numbers with units ms, s, m or h, e.g. 1m30s")]
    Syntax(String),
    /// Longer than Go's `time.Duration` can hold.
    #[error("invalid duration '{0}': longer than the maximum 2562047h47m16.854775807s (about 292 years, Go's time.Duration)")]
    TooLong(String),
}

/// Parses a Go duration with units `ms`, `s`, `m`, `h` (fractions allowed: `1.5h`).
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let syntax = || DurationError::Syntax(s.to_string());
    let too_long = || DurationError::TooLong(s.to_string());
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(syntax());
    }
    let mut rest = s;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(syntax)?;
        if int_len == 0 {
            return Err(syntax());
        }
        let (int, tail) = rest.split_at(int_len);
        let (frac, tail) = match tail.strip_prefix('.') {
            Some(t) => {
                let len = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
                if len == 0 {
                    return Err(syntax());
                }
                t.split_at(len)
            }
            None => ("", tail),
        };
        let (unit, tail) = if let Some(t) = tail.strip_prefix("ms") {
            (1_000_000u128, t)
        } else if let Some(t) = tail.strip_prefix('s') {
            (1_000_000_000, t)
        } else if let Some(t) = tail.strip_prefix('m') {
            (60_000_000_000, t)
        } else if let Some(t) = tail.strip_prefix('h') {
            (3_600_000_000_000, t)
        } else {
            return Err(syntax());
        };
        // More digits than fit in u128 are too long anyway (leading zeros aside).
        let int: u128 = match int.trim_start_matches('0') {
            "" => 0,
            digits if digits.len() > 30 => return Err(too_long()),
            digits => digits.parse().map_err(|_| syntax())?,
        };
        let term = int.checked_mul(unit).ok_or_else(too_long)?;
        total = total
            .checked_add(term)
            .and_then(|t| t.checked_add(fraction_nanos(frac, unit)))
            .ok_or_else(too_long)?;
        if total > MAX_NANOS {
            return Err(too_long());
        }
        rest = tail;
    }
    let nanos = u64::try_from(total).map_err(|_| too_long())?;
    Ok(Duration::from_nanos(nanos))
}

/// `0.<frac>` of `unit` nanoseconds, truncated; digits past nanosecond precision are ignored.
fn fraction_nanos(frac: &str, unit: u128) -> u128 {
    // unit ≤ 3.6e12 and 19 digits < 1e19: the product stays far below u128::MAX.
    let digits = &frac[..frac.len().min(19)];
    let value: u128 = digits.parse().unwrap_or(0);
    let scale = 10u128.pow(digits.len() as u32);
    value * unit / scale
}

/// Formats a duration the Go way for status and messages (`1m30s`, `250ms`).
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&format!("{s}s"));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("60s", 60_000_000_000)]
    #[case("5m", 300_000_000_000)]
    #[case("1h30m", 5_400_000_000_000)]
    #[case("250ms", 250_000_000)]
    #[case("1.5h", 5_400_000_000_000)]
    #[case("1.5s", 1_500_000_000)]
    #[case("0.001ms", 1_000)]
    #[case("1.0000000001s", 1_000_000_000)]
    #[case("0", 0)]
    #[case("0s", 0)]
    #[case("00010s", 10_000_000_000)]
    #[case("2562047h47m16.854775807s", i64::MAX as u128)]
    #[case("2562047h", 2_562_047 * 3_600_000_000_000)]
    fn parses(#[case] s: &str, #[case] nanos: u128) {
        assert_eq!(parse(s).unwrap().as_nanos(), nanos);
    }

    #[rstest]
    #[case("")]
    #[case("10")]
    #[case("5d")]
    #[case("m5")]
    #[case("-1s")]
    #[case(".5s")]
    #[case("5.s")]
    #[case("1h ")]
    #[case(" 1h")]
    #[case("1us")]
    #[case("1.2.3s")]
    fn rejects_syntax(#[case] s: &str) {
        assert_eq!(parse(s), Err(DurationError::Syntax(s.to_string())));
    }

    #[rstest]
    #[case("5000000000000000h")]
    #[case("2562048h")]
    #[case("2562047h47m16.854775808s")]
    #[case("9223372037s")]
    #[case("99999999999999999999999999999999999999999h")]
    #[case("2562047h2562047h")]
    fn rejects_what_go_cannot_hold(#[case] s: &str) {
        assert_eq!(parse(s), Err(DurationError::TooLong(s.to_string())));
    }

    #[test]
    fn max_is_go_max() {
        assert_eq!(MAX.as_nanos(), i64::MAX as u128);
        assert_eq!(parse("2562047h47m16.854775807s"), Ok(MAX));
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format(Duration::from_millis(250)), "250ms");
        assert_eq!(format(MAX), "2562047h47m16s");
    }
}
