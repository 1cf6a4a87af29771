//! The HTTP side of the controller: stored artifacts served read-only by their relative
//! path on the artifact listener (`files`: an HTTP/1.1 server of its own, bodies by
//! `sendfile`), and `/healthz`, `/readyz` and Prometheus `/metrics` on their own listeners
//! (axum, through `listen`). Artifact requests never list directories, never leave the
//! storage root (no `..`, no absolute or percent-encoded paths, no symlink escapes), never
//! expose temp files (names starting with `.`) and serve regular files only: the file is
//! opened non-blocking and checked through its handle, so a FIFO or device in the store is
//! a 404, not a hung request. Files are never read whole, and are answered with a static
//! file server's HTTP semantics (`artifact`: ranges, `Last-Modified`, `ETag`, 304). Every
//! listener has timeouts, a connection cap, a share of it per peer address and a bounded
//! shutdown (`listen`); when the artifact listener is full, its connection idle longest is
//! shed for the new client (`slots`). This module
//! imports no reconciler code; the reconciler feeds [`Metrics`].

mod artifact;
mod files;
mod listen;
mod metrics;
mod slots;

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

#[cfg(feature = "fuzzing")]
pub use files::artifact_reply;
pub use files::{serve_artifacts, MAX_HEAD};
pub use listen::{serve, ConnectionLimits, ARTIFACT_CONNECTIONS, METRICS_CONNECTIONS};
pub use metrics::Metrics;

/// The probes only: `/healthz`, and `/readyz` (200 once `ready` is true).
pub fn health_router(ready: Arc<AtomicBool>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(ready)
}

/// Prometheus `/metrics` only.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .with_state(metrics)
}

/// The probes and `/metrics` on one router, for one-listener setups (tests and
/// embedders); the controller serves each on its own listener, and artifacts always on
/// theirs ([`serve_artifacts`]).
pub fn router(ready: Arc<AtomicBool>, metrics: Arc<Metrics>) -> Router {
    health_router(ready).merge(metrics_router(metrics))
}

async fn readyz(State(ready): State<Arc<AtomicBool>>) -> Response {
    if ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response()
    }
}

async fn render_metrics(State(metrics): State<Arc<Metrics>>) -> Response {
    let content_type = HeaderValue::from_static(metrics::CONTENT_TYPE);
    ([(header::CONTENT_TYPE, content_type)], metrics.render()).into_response()
}

/// The request path as a relative path, if every component is a plain, visible name.
/// Artifact paths are `ocirepository/<namespace>/<name>/<hex>.tar.gz`: they never need
/// percent-encoding, so any `%` is refused rather than decoded.
fn safe_relative(uri_path: &str) -> Option<PathBuf> {
    let trimmed = uri_path.strip_prefix('/')?;
    if trimmed.is_empty() || trimmed.contains(['%', '\\', '\0']) {
        return None;
    }
    let mut out = PathBuf::new();
    for part in trimmed.split('/') {
        if part.is_empty() || part.starts_with('.') {
            return None;
        }
        let mut components = Path::new(part).components();
        match (components.next(), components.next()) {
            (Some(Component::Normal(name)), None) => out.push(name),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(
        "/ocirepository/ns/app/abc.tar.gz",
        Some("ocirepository/ns/app/abc.tar.gz")
    )]
    #[case("/a", Some("a"))]
    #[case("/", None)]
    #[case("/a/../b", None)]
    #[case("/..", None)]
    #[case("/a/./b", None)]
    #[case("//etc/passwd", None)]
    #[case("/a//b", None)]
    #[case("/a/%2e%2e/b", None)]
    #[case("/a\\..\\b", None)]
    #[case("/ns/.tmp-123.tar.gz", None)]
    #[case("/ns/app/", None)]
    fn only_plain_relative_paths_are_accepted(#[case] uri: &str, #[case] expected: Option<&str>) {
        assert_eq!(safe_relative(uri), expected.map(PathBuf::from));
    }
}
