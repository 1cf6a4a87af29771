//! Faults a real registry will not produce on demand, served by an in-process axum
//! server speaking just enough of the distribution API: dropped connections, 503 then
//! OK, 429 with `Retry-After`, blobs cut short mid-body (resumed with `Range`, or
//! restarted when the server ignores it), wrong blob bytes, wrong manifest digests, a
//! persistent 500, and the bearer token flow with its cache.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use ocisource::domain::digest::Digest;
use ocisource::domain::manifest::{Descriptor, FLUX_CONTENT, OCI_MANIFEST};
use ocisource::ports::{Registry, RegistryConnector, RegistryErrorKind, RegistryOptions};
use ocisource::registry::{HttpConnector, RetryPolicy};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    DropFirstConnections,
    UnavailableOnce,
    TooManyRequests(&'static str),
    CutBlob { honour_range: bool },
    WrongBlobBytes,
    Persistent500,
    WrongManifestDigest,
    Bearer,
    PagedTags,
}

struct Fault {
    scenario: Scenario,
    blob: Bytes,
    manifest: Bytes,
    hits: AtomicUsize,
    token_hits: AtomicUsize,
    ranges: Mutex<Vec<String>>,
    drop_connections: AtomicUsize,
}

const MANIFEST: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}"#;

fn respond(status: StatusCode, headers: &[(&str, String)], body: Body) -> Response {
    let mut b = Response::builder().status(status);
    for (k, v) in headers {
        b = b.header(*k, v);
    }
    b.body(body).unwrap()
}

async fn handle(
    State(f): State<Arc<Fault>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let path = uri.path();
    if path == "/token" {
        f.token_hits.fetch_add(1, Ordering::SeqCst);
        return respond(
            StatusCode::OK,
            &[],
            Body::from(r#"{"access_token":"t0k3n","expires_in":300}"#),
        );
    }
    let n = f.hits.fetch_add(1, Ordering::SeqCst);
    let ok = StatusCode::OK;
    match f.scenario {
        Scenario::Persistent500 => {
            return respond(StatusCode::INTERNAL_SERVER_ERROR, &[], Body::empty())
        }
        Scenario::UnavailableOnce if n == 0 => {
            return respond(StatusCode::SERVICE_UNAVAILABLE, &[], Body::empty())
        }
        Scenario::TooManyRequests(after) if n == 0 => {
            return respond(
                StatusCode::TOO_MANY_REQUESTS,
                &[("retry-after", after.to_string())],
                Body::empty(),
            )
        }
        Scenario::Bearer => {
            let authorised = headers
                .get("authorization")
                .is_some_and(|v| v == "Bearer t0k3n");
            if !authorised {
                let host = headers.get("host").unwrap().to_str().unwrap().to_string();
                let challenge = format!(
                    r#"Bearer realm="http://{host}/token",service="fault",scope="repository:a/b:pull""#
                );
                return respond(
                    StatusCode::UNAUTHORIZED,
                    &[("www-authenticate", challenge)],
                    Body::empty(),
                );
            }
        }
        _ => {}
    }
    if path.ends_with("/tags/list") {
        // 2,500 tags, `n` per page, continued after `last` with a relative Link.
        let q = uri.query().unwrap_or_default();
        let param = |k: &str| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")[..]).map(str::to_string))
        };
        let n: usize = param("n").and_then(|v| v.parse().ok()).unwrap_or(100);
        let all: Vec<String> = (0..2_500).map(|i| format!("t{i:05}")).collect();
        let start = param("last").map_or(0, |l| all.iter().position(|t| *t == l).unwrap() + 1);
        let page = &all[start..(start + n).min(all.len())];
        let body = serde_json::json!({"name": "a/b", "tags": page}).to_string();
        let mut hs = vec![("content-type", "application/json".to_string())];
        if start + n < all.len() {
            hs.push((
                "link",
                format!(
                    r#"</v2/a/b/tags/list?last={}&n={n}>; rel="next""#,
                    page[page.len() - 1]
                ),
            ));
        }
        return respond(ok, &hs, Body::from(body));
    }
    if path.contains("/manifests/") {
        let digest = if f.scenario == Scenario::WrongManifestDigest {
            Digest::of(b"other")
        } else {
            Digest::of(&f.manifest)
        };
        let hs = [
            ("content-type", OCI_MANIFEST.to_string()),
            ("docker-content-digest", digest.to_string()),
        ];
        let body = if method == Method::HEAD {
            Body::empty()
        } else {
            Body::from(f.manifest.clone())
        };
        return respond(ok, &hs, body);
    }
    if path.contains("/blobs/") {
        let blob = f.blob.clone();
        let len = blob.len();
        let range = headers
            .get("range")
            .map(|v| v.to_str().unwrap().to_string());
        if let Some(r) = &range {
            f.ranges.lock().unwrap().push(r.clone());
        }
        match (f.scenario, range) {
            (Scenario::CutBlob { honour_range: true }, Some(r)) => {
                let start: usize = r
                    .trim_start_matches("bytes=")
                    .trim_end_matches('-')
                    .parse()
                    .unwrap();
                let hs = [
                    ("content-length", (len - start).to_string()),
                    ("content-range", format!("bytes {start}-{}/{len}", len - 1)),
                ];
                return respond(
                    StatusCode::PARTIAL_CONTENT,
                    &hs,
                    Body::from(blob.slice(start..)),
                );
            }
            (Scenario::CutBlob { .. }, _) if n == 0 => {
                // Promise the whole blob, send a third, then fail the body: the
                // connection is cut mid-body.
                let third = blob.slice(..len / 3);
                // The pause lets the head and first part go out before the failure.
                let stream = futures::stream::iter(vec![Ok::<Bytes, std::io::Error>(third)]).chain(
                    futures::stream::once(async {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        Err(std::io::Error::other("cut"))
                    }),
                );
                return respond(
                    ok,
                    &[("content-length", len.to_string())],
                    Body::from_stream(stream),
                );
            }
            (Scenario::WrongBlobBytes, _) => {
                let mut wrong = blob.to_vec();
                wrong[len - 1] ^= 0xff;
                return respond(
                    ok,
                    &[("content-length", len.to_string())],
                    Body::from(wrong),
                );
            }
            _ => return respond(ok, &[("content-length", len.to_string())], Body::from(blob)),
        }
    }
    respond(StatusCode::NOT_FOUND, &[], Body::empty())
}

/// Drops the first N accepted connections without answering.
struct DroppingListener {
    inner: tokio::net::TcpListener,
    fault: Arc<Fault>,
}

impl axum::serve::Listener for DroppingListener {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((io, addr)) = self.inner.accept().await else {
                continue;
            };
            let left = self.fault.drop_connections.load(Ordering::SeqCst);
            if left > 0 {
                self.fault
                    .drop_connections
                    .store(left - 1, Ordering::SeqCst);
                drop(io);
                continue;
            }
            return (io, addr);
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

async fn serve(scenario: Scenario) -> (String, Arc<Fault>) {
    let blob: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let fault = Arc::new(Fault {
        scenario,
        blob: blob.into(),
        manifest: Bytes::from_static(MANIFEST.as_bytes()),
        hits: AtomicUsize::new(0),
        token_hits: AtomicUsize::new(0),
        ranges: Mutex::new(Vec::new()),
        drop_connections: AtomicUsize::new(if scenario == Scenario::DropFirstConnections {
            2
        } else {
            0
        }),
    });
    let inner = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = inner.local_addr().unwrap().to_string();
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(fault.clone());
    let listener = DroppingListener {
        inner,
        fault: fault.clone(),
    };
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (host, fault)
}

fn session(host: &str, retry: RetryPolicy) -> (HttpConnector, Arc<dyn Registry>) {
    let conn = HttpConnector::new().with_retry(retry);
    let r = conn
        .connect(
            host,
            "a/b",
            &RegistryOptions {
                insecure: true,
                ..Default::default()
            },
        )
        .unwrap();
    (conn, r)
}

fn fast() -> RetryPolicy {
    RetryPolicy::with_base(Duration::from_millis(5))
}

fn blob_desc(f: &Fault) -> Descriptor {
    Descriptor {
        media_type: FLUX_CONTENT.into(),
        digest: Digest::of(&f.blob),
        size: f.blob.len() as u64,
        annotations: Default::default(),
        platform: None,
        artifact_type: None,
    }
}

#[tokio::test]
async fn dropped_connections_are_retried() {
    let (host, _f) = serve(Scenario::DropFirstConnections).await;
    let (conn, r) = session(&host, fast());
    assert_eq!(
        r.manifest_digest("v1").await.unwrap(),
        Digest::of(MANIFEST.as_bytes())
    );
    // `insecure` on a plain-HTTP host: each attempt tries HTTPS first, then plain HTTP
    // (Flux's fallback). Attempt 1: HTTPS dropped, HTTP dropped; attempt 2: HTTPS refused
    // by the plain server, HTTP answers (and the host is remembered as plain HTTP).
    assert_eq!(
        conn.request_count(),
        4,
        "two dropped connections, then success"
    );
}

#[tokio::test]
async fn a_503_is_retried_then_succeeds() {
    let (host, f) = serve(Scenario::UnavailableOnce).await;
    let (_c, r) = session(&host, fast());
    let m = r.manifest("v1").await.unwrap();
    assert_eq!(m.body.as_ref(), MANIFEST.as_bytes());
    assert_eq!(f.hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn retry_after_is_honoured_instead_of_the_backoff() {
    // With an hour of backoff, only honouring Retry-After (0 s, or a past HTTP-date)
    // lets these finish; the guard below turns a hang into a failure.
    let slow = RetryPolicy::with_base(Duration::from_secs(3600));
    for after in ["0", "Sun, 06 Nov 1994 08:49:37 GMT"] {
        let (host, f) = serve(Scenario::TooManyRequests(after)).await;
        let (_c, r) = session(&host, slow.clone());
        let got = tokio::time::timeout(Duration::from_secs(60), r.manifest_digest("v1")).await;
        assert!(got.expect("Retry-After was not honoured").is_ok());
        assert_eq!(f.hits.load(Ordering::SeqCst), 2);
    }
    // A long Retry-After is capped by the policy.
    let capped = RetryPolicy {
        max_retry_after: Duration::from_millis(10),
        ..slow
    };
    let (host, _f) = serve(Scenario::TooManyRequests("86400")).await;
    let (_c, r) = session(&host, capped);
    let got = tokio::time::timeout(Duration::from_secs(60), r.manifest_digest("v1")).await;
    assert!(got.expect("Retry-After was not capped").is_ok());
}

#[tokio::test]
async fn a_persistent_500_ends_in_a_transport_error_naming_url_and_status() {
    let (host, f) = serve(Scenario::Persistent500).await;
    let (_c, r) = session(&host, fast());
    let err = r.manifest("v1").await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Unavailable);
    assert!(
        err.message
            .contains(&format!("http://{host}/v2/a/b/manifests/v1")),
        "{}",
        err.message
    );
    assert!(err.message.contains("500"), "{}", err.message);
    assert_eq!(f.hits.load(Ordering::SeqCst), 4, "bounded attempts");
}

async fn collect(
    r: &dyn Registry,
    d: &Descriptor,
) -> (Vec<u8>, Option<ocisource::ports::RegistryError>, usize) {
    let mut s = r.blob(d).await.unwrap();
    let (mut bytes, mut err, mut items_after_err) = (Vec::new(), None, 0);
    while let Some(item) = s.next().await {
        match item {
            Ok(b) if err.is_none() => bytes.extend_from_slice(&b),
            Ok(_) => items_after_err += 1,
            Err(e) => err = Some(e),
        }
    }
    (bytes, err, items_after_err)
}

#[tokio::test]
async fn a_blob_cut_short_is_resumed_with_range() {
    let (host, f) = serve(Scenario::CutBlob { honour_range: true }).await;
    let (_c, r) = session(&host, fast());
    let (bytes, err, _) = collect(r.as_ref(), &blob_desc(&f)).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(bytes, f.blob.as_ref());
    let ranges = f.ranges.lock().unwrap().clone();
    assert_eq!(ranges, vec![format!("bytes={}-", f.blob.len() / 3)]);
}

#[tokio::test]
async fn a_blob_cut_short_is_restarted_and_skipped_when_range_is_ignored() {
    let (host, f) = serve(Scenario::CutBlob {
        honour_range: false,
    })
    .await;
    let (_c, r) = session(&host, fast());
    let (bytes, err, _) = collect(r.as_ref(), &blob_desc(&f)).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(bytes, f.blob.as_ref());
    assert_eq!(f.ranges.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn wrong_blob_bytes_end_the_stream_with_an_integrity_error_instead_of_the_last_chunk() {
    let (host, f) = serve(Scenario::WrongBlobBytes).await;
    let (_c, r) = session(&host, fast());
    let (bytes, err, after) = collect(r.as_ref(), &blob_desc(&f)).await;
    let err = err.expect("a digest mismatch must be reported");
    assert_eq!(err.kind, RegistryErrorKind::Integrity, "{}", err.message);
    assert!(
        bytes.len() < f.blob.len(),
        "the unverified last chunk must be withheld"
    );
    assert_eq!(after, 0);
}

#[tokio::test]
async fn a_manifest_whose_digest_differs_from_the_header_is_refused() {
    let (host, _f) = serve(Scenario::WrongManifestDigest).await;
    let (_c, r) = session(&host, fast());
    let err = r.manifest("v1").await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Integrity);
    assert!(
        err.message.contains("Docker-Content-Digest"),
        "{}",
        err.message
    );
    let by_digest = r
        .manifest(&Digest::of(b"other").to_string())
        .await
        .unwrap_err();
    assert_eq!(by_digest.kind, RegistryErrorKind::Integrity);
}

#[tokio::test]
async fn bearer_tokens_are_fetched_once_and_reused() {
    let (host, f) = serve(Scenario::Bearer).await;
    let (_c, r) = session(&host, fast());
    r.manifest_digest("v1").await.unwrap();
    r.manifest("v1").await.unwrap();
    let (bytes, err, _) = collect(r.as_ref(), &blob_desc(&f)).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(bytes.len(), f.blob.len());
    assert_eq!(
        f.token_hits.load(Ordering::SeqCst),
        1,
        "one token for the pull scope"
    );
}

#[tokio::test]
async fn tags_follow_link_pagination_to_the_end() {
    let (host, f) = serve(Scenario::PagedTags).await;
    let (_c, r) = session(&host, fast());
    let tags = r.tags().await.unwrap();
    assert_eq!(tags.len(), 2_500);
    assert_eq!(tags.first().map(String::as_str), Some("t00000"));
    assert_eq!(tags.last().map(String::as_str), Some("t02499"));
    assert_eq!(f.hits.load(Ordering::SeqCst), 3, "three pages of 1000");
}
