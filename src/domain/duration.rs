//! Go duration strings (`60s`, `5m`, `1h30m`, `250ms`), as Flux's `interval`, `timeout`
//! and the controller flags write them.

use std::time::Duration;

/// A malformed duration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid duration '{0}': expected a sequence of numbers with units ms, s, m or h, e.g. 1m30s"
)]
pub struct DurationError(pub String);

/// Parses a Go duration with units `ms`, `s`, `m`, `h` (fractions allowed: `1.5h`).
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let err = || DurationError(s.to_string());
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(err());
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if num_end == 0 {
            return Err(err());
        }
        let value: f64 = rest[..num_end].parse().map_err(|_| err())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_end] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(err()),
        };
        total += value * factor;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
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
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("60s", 60_000)]
    #[case("5m", 300_000)]
    #[case("1h30m", 5_400_000)]
    #[case("250ms", 250)]
    #[case("1.5h", 5_400_000)]
    #[case("0", 0)]
    fn parses(#[case] s: &str, #[case] ms: u128) {
        assert_eq!(parse(s).unwrap().as_millis(), ms);
    }

    #[rstest]
    #[case("")]
    #[case("10")]
    #[case("5d")]
    #[case("m5")]
    #[case("-1s")]
    fn rejects(#[case] s: &str) {
        assert_eq!(parse(s), Err(DurationError(s.to_string())));
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format(Duration::from_millis(250)), "250ms");
    }
}
