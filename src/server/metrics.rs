//! The controller's Prometheus metrics, kept and exposed (OpenMetrics text) with the
//! `prometheus-client` crate: reconcile duration histogram by result, reconcile results by
//! reason, bytes pulled, artifact size per object, and status writes the API server
//! refused (the one failure the object's status cannot show). Imports nothing from the
//! reconciler; it records through the `ports::ReconcileMetrics` port.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::domain::status::reason::SUCCEEDED;

/// Upper bounds (seconds) of the reconcile duration histogram buckets.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `result`: `success` or `failure`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ByResult {
    result: &'static str,
}

/// `result` and the Ready reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ByReason {
    result: &'static str,
    reason: String,
}

/// One object: its API group (the two kinds share the name OCIRepository), namespace
/// and name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ByObject {
    group: String,
    namespace: String,
    name: String,
}

/// The API group of the objects counted.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ByGroup {
    group: String,
}

type Durations = Family<ByResult, Histogram, fn() -> Histogram>;

/// Metrics shared by the reconciler (which records) and the server (which renders).
pub struct Metrics {
    registry: Registry,
    durations: Durations,
    results: Family<ByReason, Counter>,
    bytes_pulled: Counter,
    artifact_sizes: Family<ByObject, Gauge>,
    status_write_failures: Family<ByGroup, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Self {
        let durations: Durations = Family::new_with_constructor(|| Histogram::new(BUCKETS));
        let results = Family::<ByReason, Counter>::default();
        let bytes_pulled = Counter::default();
        let artifact_sizes = Family::<ByObject, Gauge>::default();
        let mut registry = Registry::default();
        registry.register(
            "ocisource_reconcile_duration_seconds",
            "Duration of reconciles",
            durations.clone(),
        );
        registry.register(
            "ocisource_reconcile_results",
            "Finished reconciles by result and reason",
            results.clone(),
        );
        registry.register(
            "ocisource_bytes_pulled",
            "Bytes downloaded from registries",
            bytes_pulled.clone(),
        );
        registry.register(
            "ocisource_artifact_size_bytes",
            "Size of the stored artifact per object (group: the object's API group)",
            artifact_sizes.clone(),
        );
        let status_write_failures = Family::<ByGroup, Counter>::default();
        registry.register(
            "ocisource_status_write_failures",
            "Status writes the API server refused or failed, by the objects' API group",
            status_write_failures.clone(),
        );
        Self {
            registry,
            durations,
            results,
            bytes_pulled,
            artifact_sizes,
            status_write_failures,
        }
    }

    /// Records one finished reconcile by its Ready reason: `Succeeded` counts as result
    /// `success`, any other reason as `failure`.
    pub fn observe_reconcile(&self, reason: &str, duration: Duration) {
        let result = if reason == SUCCEEDED {
            "success"
        } else {
            "failure"
        };
        self.durations
            .get_or_create(&ByResult { result })
            .observe(duration.as_secs_f64());
        self.results
            .get_or_create(&ByReason {
                result,
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Adds bytes downloaded from registries.
    pub fn add_bytes_pulled(&self, bytes: u64) {
        self.bytes_pulled.inc_by(bytes);
    }

    /// Sets the stored artifact size of one object (`status.artifact.size`; negative
    /// values count as 0).
    pub fn observe_artifact(&self, group: &str, namespace: &str, name: &str, size: i64) {
        self.artifact_sizes
            .get_or_create(&object(group, namespace, name))
            .set(size.max(0));
    }

    /// Forgets an object (deleted), so its gauge disappears.
    pub fn remove_object(&self, group: &str, namespace: &str, name: &str) {
        self.artifact_sizes.remove(&object(group, namespace, name));
    }

    /// Counts a status write of an object of `group` that the API server refused.
    pub fn status_write_failed(&self, group: &str) {
        self.status_write_failures
            .get_or_create(&ByGroup {
                group: group.to_string(),
            })
            .inc();
    }

    /// The OpenMetrics text exposition of every metric ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

fn object(group: &str, namespace: &str, name: &str) -> ByObject {
    ByObject {
        group: group.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

impl crate::ports::ReconcileMetrics for Metrics {
    fn observe_reconcile(&self, reason: &str, duration: Duration) {
        Metrics::observe_reconcile(self, reason, duration)
    }

    fn add_bytes_pulled(&self, bytes: u64) {
        Metrics::add_bytes_pulled(self, bytes)
    }

    fn observe_artifact(&self, group: &str, namespace: &str, name: &str, size: i64) {
        Metrics::observe_artifact(self, group, namespace, name, size)
    }

    fn remove_object(&self, group: &str, namespace: &str, name: &str) {
        Metrics::remove_object(self, group, namespace, name)
    }

    fn status_write_failed(&self, group: &str) {
        Metrics::status_write_failed(self, group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_status_writes_are_counted_by_group() {
        let metrics = Metrics::new();
        metrics.status_write_failed("ocisource.dev");
        metrics.status_write_failed("ocisource.dev");
        let text = metrics.render();
        assert!(
            text.contains("ocisource_status_write_failures_total{group=\"ocisource.dev\"} 2\n"),
            "{text}"
        );
    }
}
