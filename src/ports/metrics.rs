//! The metrics port: what the reconciler and the controller record (reconcile results
//! and durations, bytes pulled, artifact size per object). The server's Prometheus
//! registry implements it and renders it; tests and the one-shot mode may pass any
//! implementation. Names no adapter; imports nothing from the project.

use std::time::Duration;

/// Records what the reconciler observes.
pub trait ReconcileMetrics: Send + Sync {
    /// One finished reconcile by its Ready reason (`Succeeded` counts as a success, any
    /// other reason as a failure) and how long it took.
    fn observe_reconcile(&self, reason: &str, duration: Duration);
    /// Bytes downloaded from registries.
    fn add_bytes_pulled(&self, bytes: u64);
    /// The stored artifact size of one object (`status.artifact.size`; negative values
    /// count as 0). `group` is the object's API group: both kinds are named
    /// OCIRepository, and one of each may share a namespace and a name.
    fn observe_artifact(&self, group: &str, namespace: &str, name: &str, size: i64);
    /// Forgets an object (deleted), so its per-object values disappear.
    fn remove_object(&self, group: &str, namespace: &str, name: &str);
    /// The API server refused (or failed) a status write of an object of `group`.
    fn status_write_failed(&self, group: &str);
}
