//! The controller's Prometheus metrics and their text exposition (format 0.0.4), written
//! by hand to avoid a metrics crate: reconcile duration histogram by result, reconcile
//! results by reason, bytes pulled, and artifact size per object. Imports nothing from
//! the reconciler; it records through the `ports::ReconcileMetrics` port.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::domain::status::reason::SUCCEEDED;

/// Upper bounds (seconds) of the reconcile duration histogram buckets.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Default)]
struct Histogram {
    /// Non-cumulative counts per bucket; the last slot is `+Inf`.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Inner {
    durations: BTreeMap<String, Histogram>,
    results: BTreeMap<(String, String), u64>,
    artifact_sizes: BTreeMap<(String, String), u64>,
}

/// Metrics shared by the reconciler (which records) and the server (which renders).
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
    bytes_pulled: AtomicU64,
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that
        // matters for counters; keep serving them.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records one finished reconcile by its Ready reason: `Succeeded` counts as result
    /// `success`, any other reason as `failure`.
    pub fn observe_reconcile(&self, reason: &str, duration: Duration) {
        let result = if reason == SUCCEEDED {
            "success"
        } else {
            "failure"
        };
        let seconds = duration.as_secs_f64();
        let mut inner = self.lock();
        let histogram = inner.durations.entry(result.to_string()).or_default();
        let slot = BUCKETS
            .iter()
            .position(|&le| seconds <= le)
            .unwrap_or(BUCKETS.len());
        histogram.counts[slot] += 1;
        histogram.sum += seconds;
        histogram.count += 1;
        *inner
            .results
            .entry((result.to_string(), reason.to_string()))
            .or_default() += 1;
    }

    /// Adds bytes downloaded from registries.
    pub fn add_bytes_pulled(&self, bytes: u64) {
        self.bytes_pulled.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Sets the stored artifact size of one object (`status.artifact.size`; negative
    /// values count as 0).
    pub fn observe_artifact(&self, namespace: &str, name: &str, size: i64) {
        let bytes = u64::try_from(size).unwrap_or(0);
        self.lock()
            .artifact_sizes
            .insert((namespace.to_string(), name.to_string()), bytes);
    }

    /// Forgets an object (deleted), so its gauge disappears.
    pub fn remove_object(&self, namespace: &str, name: &str) {
        self.lock()
            .artifact_sizes
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let inner = self.lock();
        let mut out = String::new();
        // Writing to a String cannot fail; the results of write! are ignored below.
        let _ = writeln!(
            out,
            "# HELP ocisource_reconcile_duration_seconds Duration of reconciles."
        );
        let _ = writeln!(out, "# TYPE ocisource_reconcile_duration_seconds histogram");
        for (result, h) in &inner.durations {
            let result = escape(result);
            let mut cumulative = 0;
            for (le, count) in BUCKETS.iter().zip(h.counts) {
                cumulative += count;
                let _ = writeln!(
                    out,
                    "ocisource_reconcile_duration_seconds_bucket{{result=\"{result}\",le=\"{le}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "ocisource_reconcile_duration_seconds_bucket{{result=\"{result}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "ocisource_reconcile_duration_seconds_sum{{result=\"{result}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "ocisource_reconcile_duration_seconds_count{{result=\"{result}\"}} {}",
                h.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP ocisource_reconcile_results_total Finished reconciles by result and reason."
        );
        let _ = writeln!(out, "# TYPE ocisource_reconcile_results_total counter");
        for ((result, reason), n) in &inner.results {
            let _ = writeln!(
                out,
                "ocisource_reconcile_results_total{{result=\"{}\",reason=\"{}\"}} {n}",
                escape(result),
                escape(reason)
            );
        }
        let _ = writeln!(
            out,
            "# HELP ocisource_bytes_pulled_total Bytes downloaded from registries."
        );
        let _ = writeln!(out, "# TYPE ocisource_bytes_pulled_total counter");
        let _ = writeln!(
            out,
            "ocisource_bytes_pulled_total {}",
            self.bytes_pulled.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP ocisource_artifact_size_bytes Size of the stored artifact per object."
        );
        let _ = writeln!(out, "# TYPE ocisource_artifact_size_bytes gauge");
        for ((namespace, name), bytes) in &inner.artifact_sizes {
            let _ = writeln!(
                out,
                "ocisource_artifact_size_bytes{{namespace=\"{}\",name=\"{}\"}} {bytes}",
                escape(namespace),
                escape(name)
            );
        }
        out
    }
}

impl crate::ports::ReconcileMetrics for Metrics {
    fn observe_reconcile(&self, reason: &str, duration: Duration) {
        Metrics::observe_reconcile(self, reason, duration)
    }

    fn add_bytes_pulled(&self, bytes: u64) {
        Metrics::add_bytes_pulled(self, bytes)
    }

    fn observe_artifact(&self, namespace: &str, name: &str, size: i64) {
        Metrics::observe_artifact(self, namespace, name, size)
    }

    fn remove_object(&self, namespace: &str, name: &str) {
        Metrics::remove_object(self, namespace, name)
    }
}

/// Escapes a label value: backslash, double quote and newline.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
