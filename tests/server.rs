//! The artifact server as consumers see it, over real TCP (`server::serve_artifacts`, the
//! artifact listener's own HTTP/1.1 server): artifacts served byte-exact with length and
//! type, HEAD, 404 for directories, missing files, traversal, percent-encoded tricks,
//! symlink escapes and temp files; the `latest.tar.gz` link inside the store followed;
//! ranges and revalidation (206, 416, 304) as a static file server answers them;
//! keep-alive and pipelining; and, through `Router::oneshot`, health and readiness and
//! `/metrics` in a Prometheus text format a scraper can parse.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use http::{Method, Request, StatusCode};
use ocisource::server::{router, serve_artifacts, ConnectionLimits, Metrics};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

const ARTIFACT: &str = "ocirepository/apps/podinfo/3b1c8f2a.tar.gz";

struct Fixture {
    dir: tempfile::TempDir,
    /// The artifact listener.
    addr: SocketAddr,
    /// Probes and metrics.
    router: Router,
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
    content: Vec<u8>,
    client: reqwest::Client,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("storage");
    let file = root.join(ARTIFACT);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // larger than a socket buffer, and not a multiple of a page
    let content: Vec<u8> = (0..300_001u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&file, &content).unwrap();
    std::fs::write(root.join("ocirepository/apps/podinfo/notes.txt"), b"hello").unwrap();
    std::fs::write(
        root.join("ocirepository/apps/podinfo/.tmp-123.tar.gz"),
        b"partial",
    )
    .unwrap();
    // Flux's status.url: a relative link beside the artifact.
    symlink(
        Path::new("3b1c8f2a.tar.gz"),
        &root.join("ocirepository/apps/podinfo/latest.tar.gz"),
    );
    std::fs::write(dir.path().join("secret.txt"), b"outside the root").unwrap();
    symlink(
        &dir.path().join("secret.txt"),
        &root.join("ocirepository/apps/escape.tar.gz"),
    );
    symlink(
        Path::new("../../../secret.txt"),
        &root.join("ocirepository/apps/up.tar.gz"),
    );
    symlink(&dir.path().join("secret.txt"), &root.join("leak"));
    let ready = Arc::new(AtomicBool::new(false));
    let metrics = Arc::new(Metrics::new());
    let router = router(ready.clone(), metrics.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_artifacts(
        listener,
        root,
        ConnectionLimits::default(),
        std::future::pending(),
    ));
    Fixture {
        dir,
        addr,
        router,
        ready,
        metrics,
        content,
        client: reqwest::Client::new(),
    }
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// A request to the router (probes, metrics).
async fn send(
    router: &Router,
    method: Method,
    uri: &str,
) -> (StatusCode, http::HeaderMap, Vec<u8>) {
    let response = router
        .clone()
        .oneshot(
            Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap()
        .to_vec();
    (parts.status, parts.headers, bytes)
}

/// A request to the artifact listener, over TCP.
async fn fetch(
    f: &Fixture,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, http::HeaderMap, Vec<u8>) {
    let mut request = f.client.request(method, format!("http://{}{path}", f.addr));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap().to_vec();
    (status, headers, body)
}

async fn get(f: &Fixture, path: &str) -> (StatusCode, http::HeaderMap, Vec<u8>) {
    fetch(f, Method::GET, path, &[]).await
}

/// A raw request, for what an HTTP client library normalises away.
async fn raw(addr: SocketAddr, request: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut out))
        .await
        .expect("the server kept the connection open")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn serves_the_artifact_byte_exact_with_length_and_gzip_type() {
    let f = fixture().await;
    let (status, headers, body) = get(&f, &format!("/{ARTIFACT}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/gzip");
    assert_eq!(
        headers["content-length"],
        f.content.len().to_string().as_str()
    );
    assert!(body == f.content, "body differs from the stored file");

    let (status, headers, body) = get(&f, "/ocirepository/apps/podinfo/notes.txt").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert_eq!(body, b"hello");

    // Flux's status.url names the latest.tar.gz link: it serves the artifact's bytes.
    let (status, _, body) = get(&f, "/ocirepository/apps/podinfo/latest.tar.gz").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body == f.content, "the link served other bytes");
}

#[tokio::test]
async fn keep_alive_and_pipelined_requests_are_answered_in_order_on_one_connection() {
    let f = fixture().await;
    let small = "/ocirepository/apps/podinfo/notes.txt";
    let answer = raw(
        f.addr,
        &format!(
            "GET {small} HTTP/1.1\r\nHost: t\r\n\r\n\
             HEAD /{ARTIFACT} HTTP/1.1\r\nHost: t\r\n\r\n\
             GET /missing HTTP/1.1\r\nHost: t\r\n\r\n\
             GET {small} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    let statuses: Vec<&str> = answer
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &answer[i + 9..i + 12])
        .collect();
    assert_eq!(statuses, ["200", "200", "404", "200"], "{answer}");
    assert_eq!(answer.matches("\r\n\r\nhello").count(), 2, "{answer}");
    assert!(
        answer.contains(&format!("Content-Length: {}\r\n", f.content.len())),
        "HEAD gives the length: {answer}"
    );
    // The client's "Connection: close" is honoured (raw() reads to the end).
    assert!(answer.ends_with("hello"), "{answer}");
}

#[tokio::test]
async fn head_gives_length_and_type_without_a_body() {
    let f = fixture().await;
    let (status, headers, body) = fetch(&f, Method::HEAD, &format!("/{ARTIFACT}"), &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["content-length"],
        f.content.len().to_string().as_str()
    );
    assert_eq!(headers["content-type"], "application/gzip");
    assert!(body.is_empty());
}

async fn send_with(
    f: &Fixture,
    uri: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, http::HeaderMap, Vec<u8>) {
    fetch(f, Method::GET, uri, headers).await
}

#[tokio::test]
async fn ranges_are_served_as_a_static_file_server_does() {
    let f = fixture().await;
    let uri = format!("/{ARTIFACT}");
    let len = f.content.len();
    let (status, headers, _) = get(&f, &uri).await;
    assert_eq!(
        (status, &headers["accept-ranges"]),
        (
            StatusCode::OK,
            &"bytes".parse::<http::HeaderValue>().unwrap()
        )
    );

    // A range across several chunks, one at the end, a suffix, and one past the end.
    for (range, start, end) in [
        ("bytes=70000-200000", 70_000, 200_000),
        ("bytes=299990-", 299_990, len - 1),
        ("bytes=-11", len - 11, len - 1),
        ("bytes=5-9", 5, 9),
    ] {
        let (status, headers, body) = send_with(&f, &uri, &[("range", range)]).await;
        assert_eq!(status, StatusCode::PARTIAL_CONTENT, "{range}");
        assert_eq!(
            headers["content-range"],
            format!("bytes {start}-{end}/{len}").as_str(),
            "{range}"
        );
        assert_eq!(
            headers["content-length"],
            (end - start + 1).to_string().as_str(),
            "{range}"
        );
        assert!(body == f.content[start..=end], "{range}: body differs");
    }
    let (status, headers, body) = send_with(&f, &uri, &[("range", "bytes=400000-")]).await;
    assert_eq!(status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(headers["content-range"], format!("bytes */{len}").as_str());
    assert!(body.is_empty());
}

#[tokio::test]
async fn unchanged_artifacts_answer_304_to_etag_and_date_revalidation() {
    let f = fixture().await;
    let uri = format!("/{ARTIFACT}");
    let (_, headers, _) = get(&f, &uri).await;
    let etag = headers["etag"].to_str().unwrap().to_string();
    let modified = headers["last-modified"].to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

    for condition in [
        ("if-none-match", etag.as_str()),
        ("if-modified-since", modified.as_str()),
    ] {
        let (status, headers, body) = send_with(&f, &uri, &[condition]).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED, "{condition:?}");
        assert_eq!(headers["etag"], etag.as_str());
        assert!(body.is_empty());
    }
    // Another version's tag, or an older date: the whole file.
    let older = "Mon, 01 Jan 2001 00:00:00 GMT";
    for condition in [("if-none-match", "\"other\""), ("if-modified-since", older)] {
        let (status, _, body) = send_with(&f, &uri, &[condition]).await;
        assert_eq!(status, StatusCode::OK, "{condition:?}");
        assert!(body == f.content);
    }
    // If-Range with another version's tag ignores the Range.
    let (status, _, body) = send_with(
        &f,
        &uri,
        &[("range", "bytes=0-9"), ("if-range", "\"other\"")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.len(), f.content.len());
}

#[tokio::test]
async fn refuses_everything_that_is_not_a_visible_file_under_the_root() {
    let f = fixture().await;
    let refused = [
        "/",
        "/ocirepository",
        "/ocirepository/apps/podinfo",
        "/ocirepository/apps/podinfo/",
        "/ocirepository/apps/podinfo/missing.tar.gz",
        "/ocirepository/apps/podinfo/.tmp-123.tar.gz",
        "/../secret.txt",
        "/ocirepository/../../secret.txt",
        "/ocirepository/%2e%2e/%2e%2e/secret.txt",
        "/%2e%2e/secret.txt",
        "/ocirepository/apps/podinfo%2f3b1c8f2a.tar.gz",
        "//etc/passwd",
        "/ocirepository/apps/escape.tar.gz",
        "/ocirepository/apps/up.tar.gz",
        "/leak",
    ];
    for uri in refused {
        let (status, _, body) = get(&f, uri).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        assert!(
            !String::from_utf8_lossy(&body).contains("outside the root"),
            "{uri} leaked"
        );
        assert!(
            !String::from_utf8_lossy(&body).contains("podinfo"),
            "{uri} listed a directory"
        );
    }
}

#[tokio::test]
async fn is_read_only() {
    let f = fixture().await;
    for method in [Method::PUT, Method::POST, Method::DELETE] {
        let (status, headers, _) = fetch(&f, method.clone(), &format!("/{ARTIFACT}"), &[]).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(headers["allow"], "GET, HEAD");
    }
    // A PUT with a body: answered, and its body never read as a request.
    let smuggled = format!("GET /{ARTIFACT} HTTP/1.1\r\n\r\n");
    let answer = raw(
        f.addr,
        &format!(
            "PUT /{ARTIFACT} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{smuggled}",
            smuggled.len()
        ),
    )
    .await;
    assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "{answer}");
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    let (_, _, body) = get(&f, &format!("/{ARTIFACT}")).await;
    assert!(body == f.content);
    assert_eq!(
        std::fs::read(f.dir.path().join("storage").join(ARTIFACT)).unwrap(),
        f.content
    );
}

#[tokio::test]
async fn healthz_always_readyz_only_when_ready() {
    let f = fixture().await;
    assert_eq!(
        send(&f.router, Method::GET, "/healthz").await.0,
        StatusCode::OK
    );
    assert_eq!(
        send(&f.router, Method::GET, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    f.ready.store(true, Ordering::Release);
    assert_eq!(
        send(&f.router, Method::GET, "/readyz").await.0,
        StatusCode::OK
    );
}

/// An OpenMetrics text sample: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the OpenMetrics text exposition strictly enough that a malformed line fails the
/// test: `# HELP`, `# TYPE` and `# UNIT` comments, samples, and `# EOF` as the last line.
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    assert_eq!(text.lines().last(), Some("# EOF"), "no # EOF at the end");
    for line in text.lines().filter(|l| !l.is_empty() && *l != "# EOF") {
        if let Some(comment) = line.strip_prefix("# ") {
            assert!(
                ["HELP ", "TYPE ", "UNIT "]
                    .iter()
                    .any(|c| comment.starts_with(c)),
                "bad comment: {line}"
            );
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (
                name,
                rest.strip_suffix('}')
                    .unwrap_or_else(|| panic!("bad labels: {line}")),
            ),
            None => (series, ""),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad name: {line}"
        );
        let mut map = BTreeMap::new();
        let mut rest = labels;
        while !rest.is_empty() {
            let (key, tail) = rest
                .split_once("=\"")
                .unwrap_or_else(|| panic!("bad label: {line}"));
            let mut value = String::new();
            let mut chars = tail.char_indices();
            let end = loop {
                match chars.next() {
                    Some((_, '\\')) => value.push(chars.next().unwrap().1),
                    Some((i, '"')) => break i,
                    Some((_, c)) => value.push(c),
                    None => panic!("unterminated label: {line}"),
                }
            };
            map.insert(key.to_string(), value);
            rest = tail[end + 1..]
                .strip_prefix(',')
                .unwrap_or(&tail[end + 1..]);
        }
        samples.push((name.to_string(), map, value));
    }
    samples
}

fn find(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

#[tokio::test]
async fn metrics_are_parseable_prometheus_text_with_the_recorded_values() {
    let f = fixture().await;
    f.metrics
        .observe_reconcile("Succeeded", Duration::from_millis(40));
    f.metrics
        .observe_reconcile("Succeeded", Duration::from_secs(3));
    f.metrics
        .observe_reconcile("AuthenticationFailed", Duration::from_secs(100));
    f.metrics.add_bytes_pulled(1000);
    f.metrics.add_bytes_pulled(24);
    let (ours, flux) = ("ocisource.dev", "source.toolkit.fluxcd.io");
    f.metrics.observe_artifact(ours, "apps", "podinfo", 300_001);
    // Flux's kind has the same kind name: one object of each, same namespace and name.
    f.metrics.observe_artifact(flux, "apps", "podinfo", 12);
    f.metrics.observe_artifact(ours, "apps", "gone", 5);
    f.metrics.observe_artifact(flux, "apps", "gone", 6);
    f.metrics.remove_object(ours, "apps", "gone");
    f.metrics.observe_artifact(ours, "odd\"ns", "a\\b", 7);

    let (status, headers, body) = send(&f.router, Method::GET, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text; version=1.0.0"));
    let samples = parse_exposition(&String::from_utf8(body).unwrap());

    let bucket = "ocisource_reconcile_duration_seconds_bucket";
    assert_eq!(
        find(&samples, bucket, &[("result", "success"), ("le", "0.05")]),
        Some(1.0)
    );
    assert_eq!(
        find(&samples, bucket, &[("result", "success"), ("le", "5.0")]),
        Some(2.0)
    );
    assert_eq!(
        find(&samples, bucket, &[("result", "failure"), ("le", "30.0")]),
        Some(0.0)
    );
    assert_eq!(
        find(&samples, bucket, &[("result", "failure"), ("le", "+Inf")]),
        Some(1.0)
    );
    assert_eq!(
        find(
            &samples,
            "ocisource_reconcile_duration_seconds_count",
            &[("result", "success")]
        ),
        Some(2.0)
    );
    let sum = find(
        &samples,
        "ocisource_reconcile_duration_seconds_sum",
        &[("result", "success")],
    )
    .unwrap();
    assert!((sum - 3.04).abs() < 1e-9, "{sum}");
    for result in ["success", "failure"] {
        let buckets: Vec<f64> = samples
            .iter()
            .filter(|(n, l, _)| n == bucket && l["result"] == result)
            .map(|s| s.2)
            .collect();
        assert!(
            buckets.windows(2).all(|w| w[0] <= w[1]),
            "buckets are cumulative"
        );
    }
    let results = "ocisource_reconcile_results_total";
    assert_eq!(
        find(
            &samples,
            results,
            &[("result", "success"), ("reason", "Succeeded")]
        ),
        Some(2.0)
    );
    assert_eq!(
        find(&samples, results, &[("reason", "AuthenticationFailed")]),
        Some(1.0)
    );
    assert_eq!(
        find(&samples, "ocisource_bytes_pulled_total", &[]),
        Some(1024.0)
    );
    let size = "ocisource_artifact_size_bytes";
    assert_eq!(
        find(
            &samples,
            size,
            &[("group", ours), ("namespace", "apps"), ("name", "podinfo")]
        ),
        Some(300_001.0)
    );
    assert_eq!(
        find(
            &samples,
            size,
            &[("group", flux), ("namespace", "apps"), ("name", "podinfo")]
        ),
        Some(12.0)
    );
    // Deleting ours forgets ours only.
    assert_eq!(
        find(&samples, size, &[("group", ours), ("name", "gone")]),
        None
    );
    assert_eq!(
        find(&samples, size, &[("group", flux), ("name", "gone")]),
        Some(6.0)
    );
    assert_eq!(
        find(
            &samples,
            size,
            &[("namespace", "odd\"ns"), ("name", "a\\b")]
        ),
        Some(7.0)
    );
}
