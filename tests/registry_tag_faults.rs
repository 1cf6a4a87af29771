//! Hostile tag lists, from in-process fakes (`fake_registry`): a page linking to itself
//! or back through a repeated `last`, a page of nothing valid that links on, an endless
//! page body, tags longer than the spec's 128 characters, a listing that outgrows its
//! memory cap, and one that never ends. Each ends in a clear error naming the repository
//! (or, for invalid tags, in skipping them). The memory bound is checked on the real
//! binary: `ocisource pull --semver` over pages each holding a 15 MiB tag, its peak RSS
//! read from the kernel by GNU time (`%M`, the process's `hiwater_rss`, as `VmHWM`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fake_registry;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, Uri};
use bytes::Bytes;
use fake_registry::{respond, serve, tag_page, Handler};
use futures::StreamExt as _;
use ocisource::ports::{Registry, RegistryConnector, RegistryErrorKind, RegistryOptions};
use ocisource::registry::{HttpConnector, RetryPolicy};

fn connector() -> HttpConnector {
    HttpConnector::new().with_retry(RetryPolicy::with_base(Duration::from_millis(5)))
}

fn session(conn: &HttpConnector, host: &str, timeout: Option<Duration>) -> Arc<dyn Registry> {
    let options = RegistryOptions {
        insecure: true,
        timeout,
        ..RegistryOptions::default()
    };
    conn.connect(host, "a/b", &options).unwrap()
}

/// The `last` query parameter of a request.
fn last(uri: &Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("last=").map(str::to_string))
}

/// The page a request asks for: 0 without `last`, else one past the number after
/// `prefix` in `last`.
fn page_index(uri: &Uri, prefix: &str) -> u64 {
    last(uri).map_or(0, |l| {
        l.strip_prefix(prefix).unwrap().parse::<u64>().unwrap() + 1
    })
}

/// Pages without end: page `i` holds `tags(i)` and links to page `i + 1`.
fn endless(tags: impl Fn(u64) -> Vec<String> + Send + Sync + 'static) -> Handler {
    Arc::new(move |_, uri, _| {
        let i = page_index(uri, "p");
        let page = tags(i);
        let refs: Vec<&str> = page.iter().map(String::as_str).collect();
        tag_page(&refs, Some(&format!("/v2/a/b/tags/list?last=p{i}&n=1000")))
    })
}

async fn list_error(handler: Handler, conn: HttpConnector) -> (String, RegistryErrorKind, usize) {
    let origin = serve(handler).await;
    let r = session(&conn, &origin.host, Some(Duration::from_secs(30)));
    let e = tokio::time::timeout(Duration::from_secs(120), r.tags())
        .await
        .expect("the listing must end")
        .unwrap_err();
    assert!(e.message.contains("'a/b'"), "{}", e.message);
    (e.message, e.kind, origin.seen().len())
}

#[tokio::test]
async fn a_page_linking_to_itself_or_repeating_last_is_a_loop_error() {
    let self_link: Handler = Arc::new(|_, uri, _| tag_page(&["v1"], Some(&uri.to_string())));
    let (message, kind, requests) = list_error(self_link, connector()).await;
    assert_eq!(kind, RegistryErrorKind::Protocol);
    assert!(message.contains("loops"), "{message}");
    assert_eq!(requests, 1);
    // Another spelling of the same page: `last` repeats.
    let reordered: Handler = Arc::new(|_, uri, _| match uri.query() {
        Some("n=1000") => tag_page(&["v1"], Some("/v2/a/b/tags/list?last=v1&n=1000")),
        _ => tag_page(&["v2"], Some("/v2/a/b/tags/list?n=1000&last=v1")),
    });
    let (message, _, requests) = list_error(reordered, connector()).await;
    assert!(message.contains("loops"), "{message}");
    assert_eq!(requests, 2);
}

#[tokio::test]
async fn a_page_without_a_valid_tag_must_not_link_on() {
    let junk = endless(|_| vec!["-not-a-tag".into(), "x".repeat(200)]);
    let (message, kind, requests) = list_error(junk, connector()).await;
    assert_eq!(kind, RegistryErrorKind::Protocol);
    assert!(message.contains("no valid tag"), "{message}");
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn an_endless_page_body_stops_at_the_page_cap() {
    let endless_body: Handler = Arc::new(|_, _, _| {
        let start = futures::stream::once(async { Ok(Bytes::from_static(br#"{"tags":["#)) });
        let chunk = Bytes::from(r#""v1","#.repeat(10_000));
        let rest = futures::stream::repeat(chunk).map(Ok::<Bytes, std::io::Error>);
        respond(StatusCode::OK, &[], Body::from_stream(start.chain(rest)))
    });
    let conn = connector().with_tag_list_limits(1 << 20, 64 << 20);
    let (message, kind, _) = list_error(endless_body, conn).await;
    assert_eq!(kind, RegistryErrorKind::Integrity);
    assert!(message.contains("larger than 1048576 bytes"), "{message}");
}

#[tokio::test]
async fn tags_longer_than_the_spec_allows_are_skipped() {
    let long = "1".repeat(15 << 20);
    let origin = serve(Arc::new(move |_, uri, _| match last(uri) {
        None => tag_page(
            &["1.0.0", &long],
            Some("/v2/a/b/tags/list?last=1.0.0&n=1000"),
        ),
        Some(_) => tag_page(&[&"v".repeat(129), "1.0.1", &"v".repeat(128)], None),
    }))
    .await;
    let r = session(&connector(), &origin.host, None);
    let tags = r.tags().await.unwrap();
    assert_eq!(tags, ["1.0.0".to_string(), "1.0.1".into(), "v".repeat(128)]);
}

#[tokio::test]
async fn a_listing_past_its_memory_cap_is_an_error_naming_the_cap() {
    let many = endless(|i| (0..1000).map(|j| format!("tag-{i}-{j:0>40}")).collect());
    let conn = connector().with_tag_list_limits(1 << 20, 256 << 10);
    let (message, kind, requests) = list_error(many, conn).await;
    assert_eq!(kind, RegistryErrorKind::Integrity);
    assert!(
        message.contains("more than 262144 bytes of memory") && message.contains("prune"),
        "{message}"
    );
    // About 76 bytes a tag: the cap is reached on the fourth page.
    assert_eq!(requests, 4);
}

#[tokio::test]
async fn a_listing_that_never_ends_hits_its_deadline() {
    // Every page is valid and new but its body trickles; the request timeout (1 s here,
    // spec.timeout in a cluster) bounds the whole listing, not each page.
    let slow: Handler = Arc::new(|_, uri, _| {
        let i = page_index(uri, "p");
        let body = serde_json::json!({"tags": [format!("v{i}")]}).to_string();
        let delayed = futures::stream::once(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<Bytes, std::io::Error>(Bytes::from(body))
        });
        respond(
            StatusCode::OK,
            &[(
                "link",
                format!(r#"</v2/a/b/tags/list?last=p{i}&n=1000>; rel="next""#),
            )],
            Body::from_stream(delayed),
        )
    });
    let origin = serve(slow).await;
    let r = session(&connector(), &origin.host, Some(Duration::from_secs(1)));
    let e = tokio::time::timeout(Duration::from_secs(60), r.tags())
        .await
        .expect("the listing must end")
        .unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::Timeout);
    assert!(
        e.message.contains("not finished within 1s") && e.message.contains("spec.timeout"),
        "{}",
        e.message
    );
    assert!(origin.seen().len() > 1);
}

/// Pages of `ocisource pull`'s semver listing: page `i` holds `1.0.<i>` and a 15 MiB
/// invalid tag, and links to page `i + 1`, up to `pages`; manifests are unknown.
fn heavy_pages(pages: u64) -> Handler {
    let big = Bytes::from("x".repeat(15 << 20));
    Arc::new(move |_, uri, _| {
        if !uri.path().ends_with("/tags/list") {
            return respond(StatusCode::NOT_FOUND, &[], Body::empty());
        }
        let i = page_index(uri, "1.0.");
        let head = Bytes::from(format!(r#"{{"name":"a/b","tags":["1.0.{i}",""#));
        let chunks = [head, big.clone(), Bytes::from_static(br#""]}"#)];
        let mut hs = vec![];
        if i + 1 < pages {
            hs.push((
                "link",
                format!(r#"</v2/a/b/tags/list?last=1.0.{i}&n=1000>; rel="next""#),
            ));
        }
        let body = futures::stream::iter(chunks.map(Ok::<Bytes, std::io::Error>));
        respond(StatusCode::OK, &hs, Body::from_stream(body))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_with_a_semver_ref_over_pages_of_15_mib_tags_stays_small() {
    const PAGES: u64 = 30;
    let origin = serve(heavy_pages(PAGES)).await;
    let dir = tempfile::tempdir().unwrap();
    let rss = dir.path().join("rss");
    let url = format!("oci://{}/a/b", origin.host);
    let out = dir.path().join("out.tar.gz");
    let mut cmd = std::process::Command::new("/usr/bin/time");
    cmd.arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss)
        .arg(env!("CARGO_BIN_EXE_ocisource"))
        .args([
            "pull",
            &url,
            "--insecure",
            "--semver",
            ">=1.0.0",
            "--output-file",
        ])
        .arg(&out);
    let run = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    // The pages, the manifest's HEAD and the GET for its error body.
    assert_eq!(origin.seen().len() as u64, PAGES + 2, "{stderr}");
    // Every page was listed, the 15 MiB tags skipped with a warning, the highest valid
    // tag chosen; the fake knows no manifest, so the pull ends there.
    assert!(
        stderr.contains("skipped tags that are not valid OCI tags"),
        "{stderr}"
    );
    assert!(stderr.contains("1.0.29"), "{stderr}");
    assert_ne!(run.status.code(), Some(0));
    let peak_kib: u64 = std::fs::read_to_string(&rss)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eprintln!("peak RSS of ocisource pull over {PAGES} pages of 15 MiB tags: {peak_kib} KiB");
    // 30 pages of 15 MiB are 450 MiB: keeping them (as before) is far above this bound.
    // One page buffer (16 MiB cap, reused from page to page) plus the process (about
    // 15 MiB) is below it, whatever the number of pages (35 MiB measured for 10, 30 and
    // 100 pages).
    assert!(peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB");
}
