//! The HTTP side of the controller (axum): serves stored artifacts read-only by their
//! relative path, plus `/healthz`, `/readyz` and Prometheus `/metrics`. Artifact requests
//! never list directories, never leave the storage root (no `..`, no absolute or
//! percent-encoded paths, no symlink escapes), never expose temp files (names starting
//! with `.`) and serve regular files only: the file is opened non-blocking and checked
//! through its handle, so a FIFO or device in the store is a 404, not a hung request.
//! Files are streamed in chunks, never read whole. [`serve`] runs the routes on a
//! listener with timeouts, a connection cap and a bounded shutdown. This module imports
//! no reconciler code; the reconciler feeds [`Metrics`].

mod listen;
mod metrics;

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::BytesMut;
use tokio::io::AsyncReadExt;

pub use listen::{serve, Limits};
pub use metrics::Metrics;

/// Read size per chunk when streaming an artifact.
const CHUNK: usize = 64 * 1024;

/// The artifact routes only: what the artifact listener serves. `storage_root` is the
/// artifact storage directory.
pub fn artifact_router(storage_root: PathBuf) -> Router {
    Router::new()
        .fallback(artifact)
        .with_state(Arc::new(storage_root))
}

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

/// The three route sets on one router, for one-listener setups (the one-shot tests and
/// embedders); the controller serves each on its own listener.
pub fn router(storage_root: PathBuf, ready: Arc<AtomicBool>, metrics: Arc<Metrics>) -> Router {
    health_router(ready)
        .merge(metrics_router(metrics))
        .merge(artifact_router(storage_root))
}

async fn readyz(State(ready): State<Arc<AtomicBool>>) -> Response {
    if ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response()
    }
}

async fn render_metrics(State(metrics): State<Arc<Metrics>>) -> Response {
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    (
        [(header::CONTENT_TYPE, content_type)],
        metrics.render(),
    )
        .into_response()
}

async fn artifact(State(root): State<Arc<PathBuf>>, request: Request) -> Response {
    let head = match *request.method() {
        Method::GET => false,
        Method::HEAD => true,
        _ => {
            return (
                StatusCode::METHOD_NOT_ALLOWED,
                [(header::ALLOW, "GET, HEAD")],
            )
                .into_response()
        }
    };
    let Some(path) = resolve(&root, request.uri().path()).await else {
        return not_found();
    };
    let Ok(file) = tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .await
    else {
        return not_found();
    };
    let Ok(meta) = file.metadata().await else {
        return not_found();
    };
    if !meta.is_file() {
        return not_found();
    }
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type(&path)),
        ),
        (header::CONTENT_LENGTH, HeaderValue::from(meta.len())),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    if head {
        return (headers, Body::empty()).into_response();
    }
    (headers, Body::from_stream(chunks(file))).into_response()
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

/// A file as a stream of chunks of at most [`CHUNK`] bytes.
fn chunks(
    file: tokio::fs::File,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send {
    futures::stream::try_unfold(file, |mut file| async move {
        let mut buf = BytesMut::with_capacity(CHUNK);
        let n = file.read_buf(&mut buf).await?;
        Ok((n > 0).then(|| (buf.freeze(), file)))
    })
}

/// Maps a request path to a regular file inside `root`, or `None` (→ 404) when the path
/// is not a plain relative path of visible components, or resolves outside the root.
async fn resolve(root: &Path, uri_path: &str) -> Option<PathBuf> {
    let relative = safe_relative(uri_path)?;
    let root = tokio::fs::canonicalize(root).await.ok()?;
    let full = tokio::fs::canonicalize(root.join(relative)).await.ok()?;
    full.starts_with(&root).then_some(full)
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

fn content_type(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        "application/gzip"
    } else {
        "application/octet-stream"
    }
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
