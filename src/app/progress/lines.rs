//! The plain progress lines printed when stderr is not a terminal (CI logs): a layer's
//! start, a line every `PLAIN_EVERY` while it moves (bytes, percent, average rate, ETA)
//! and its end. Time comes from a [`Clock`], so rate and ETA are tested with a fake one.
//! No terminal escapes are written here, ever.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::HumanBytes;

/// The time since some fixed origin; a trait so tests can move time by hand.
pub trait Clock: Send + Sync {
    /// Time elapsed since the clock's origin.
    fn now(&self) -> Duration;
}

/// The real clock, from its creation.
pub(super) struct SystemClock(pub(super) Instant);

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Plain-line output of one command: the layers under way, the clock and where lines go.
pub(super) struct Plain {
    pub(super) verb: &'static str,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) emit: Box<dyn Fn(&str) + Send + Sync>,
    pub(super) layers: Mutex<Vec<Arc<PlainLayer>>>,
}

/// One layer's counters.
pub(super) struct PlainLayer {
    pub(super) name: String,
    pub(super) total: u64,
    pub(super) start: Duration,
    pub(super) pos: AtomicU64,
    pub(super) printed: AtomicU64,
    pub(super) finished: AtomicBool,
}

impl Plain {
    /// A progress line for every unfinished layer that moved since its last line.
    pub(super) fn tick(&self) {
        let now = self.clock.now();
        let Ok(mut layers) = self.layers.lock() else {
            return;
        };
        layers.retain(|l| !l.finished.load(Ordering::Relaxed));
        for l in layers.iter() {
            let pos = l.pos.load(Ordering::Relaxed);
            if l.printed.swap(pos, Ordering::Relaxed) != pos {
                (self.emit)(&moving_line(
                    self.verb,
                    &l.name,
                    pos,
                    l.total,
                    now.saturating_sub(l.start),
                ));
            }
        }
    }
}

/// `push sha256:0123456789ab: 12.00 MiB / 30.00 MiB (40%), 2.40 MiB/s, ETA 8s`.
pub fn moving_line(verb: &str, name: &str, pos: u64, total: u64, elapsed: Duration) -> String {
    let pct = (pos as f64 * 100.0 / total.max(1) as f64).min(100.0) as u64;
    let (rate, eta) = match rate(pos, elapsed) {
        Some(r) => (
            format!("{}/s", HumanBytes(r as u64)),
            format!(
                "ETA {}",
                short_duration(Duration::from_secs_f64(
                    total.saturating_sub(pos) as f64 / r
                ))
            ),
        ),
        None => ("rate unknown".to_string(), "ETA unknown".to_string()),
    };
    format!(
        "{verb} {name}: {} / {} ({pct}%), {rate}, {eta}",
        HumanBytes(pos),
        HumanBytes(total)
    )
}

/// `pull sha256:0123456789ab: done, 30.00 MiB in 12s (2.50 MiB/s)`.
pub fn done_line(verb: &str, name: &str, bytes: u64, elapsed: Duration) -> String {
    let rate =
        rate(bytes, elapsed).map_or_else(String::new, |r| format!(" ({}/s)", HumanBytes(r as u64)));
    format!(
        "{verb} {name}: done, {} in {}{rate}",
        HumanBytes(bytes),
        short_duration(elapsed)
    )
}

/// `push sha256:0123456789ab: already in the registry, 30.00 MiB`.
pub fn already_line(verb: &str, name: &str, total: u64) -> String {
    format!(
        "{verb} {name}: already in the registry, {}",
        HumanBytes(total)
    )
}

/// Average bytes per second, unknown before any time has passed.
fn rate(bytes: u64, elapsed: Duration) -> Option<f64> {
    let secs = elapsed.as_secs_f64();
    (secs > 0.0 && bytes > 0).then(|| bytes as f64 / secs)
}

/// `850ms`, `8s`, `1m05s`, `2h03m`.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_and_eta_unknown_before_time_passes_and_long_durations() {
        assert_eq!(
            moving_line("pull", "x", 0, 10, Duration::ZERO),
            "pull x: 0 B / 10 B (0%), rate unknown, ETA unknown"
        );
        assert_eq!(
            moving_line("pull", "x", 1 << 20, 61 << 20, Duration::from_secs(1)),
            "pull x: 1.00 MiB / 61.00 MiB (1%), 1.00 MiB/s, ETA 1m00s"
        );
        assert_eq!(short_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(short_duration(Duration::from_secs(7380)), "2h03m");
    }
}
