//! The referrers API client (`Registry::referrers`) against in-process fakes
//! (`fake_registry`), for answers a real registry will not give on demand: no API (404,
//! or a page that is not an index), a filter the registry did not apply (the client
//! filters) or did, two pages linked by `Link`, and hostile ones: a `Link` back to
//! itself, pages without end, an index beyond the manifest cap (in one page or summed
//! over pages), a later page missing. The real registry is in `tests/e2e_referrers.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fake_registry;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, Uri};
use fake_registry::{respond, serve, Handler, Origin};
use ocisource::domain::digest::Digest;
use ocisource::ports::{
    Referrers, Registry, RegistryConnector, RegistryErrorKind, RegistryOptions,
};
use ocisource::registry::referrers::MAX_REFERRER_PAGES;
use ocisource::registry::{HttpConnector, RetryPolicy};
use serde_json::json;

const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const BUNDLE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
const SBOM: &str = "application/spdx+json";

fn connector() -> HttpConnector {
    HttpConnector::new().with_retry(RetryPolicy::with_base(Duration::from_millis(5)))
}

fn session(conn: &HttpConnector, origin: &Origin) -> Arc<dyn Registry> {
    let options = RegistryOptions {
        plain_http: true,
        ..RegistryOptions::default()
    };
    conn.connect(&origin.host, "a/b", &options).unwrap()
}

fn subject() -> Digest {
    Digest::of(b"the image")
}

/// An index descriptor of a referrer named `name`, of `artifact_type`.
fn entry(name: &str, artifact_type: &str) -> serde_json::Value {
    json!({
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": Digest::of(name.as_bytes()).to_string(),
        "size": 100,
        "artifactType": artifact_type,
    })
}

/// A referrers page holding `entries`, with these extra headers.
fn page(entries: &[serde_json::Value], headers: &[(&str, String)]) -> axum::response::Response {
    let body = json!({"schemaVersion": 2, "mediaType": INDEX, "manifests": entries}).to_string();
    let mut hs = vec![("content-type", INDEX.to_string())];
    hs.extend(headers.iter().cloned());
    respond(StatusCode::OK, &hs, Body::from(body))
}

fn next(target: &str) -> (&'static str, String) {
    ("link", format!(r#"<{target}>; rel="next""#))
}

/// The `page=N` of a request, 0 without one.
fn page_number(uri: &Uri) -> u64 {
    uri.query()
        .and_then(|q| q.strip_prefix("page="))
        .map_or(0, |v| v.parse().unwrap())
}

fn handler(f: impl Fn(&Uri) -> axum::response::Response + Send + Sync + 'static) -> Handler {
    Arc::new(move |_, uri, _| f(uri))
}

/// The error a listing of `origin`'s referrers ends in.
async fn refusal(
    conn: &HttpConnector,
    origin: &Origin,
    artifact_type: Option<&str>,
) -> ocisource::ports::RegistryError {
    let answer = session(conn, origin)
        .referrers(&subject(), artifact_type)
        .await;
    answer.unwrap_err()
}

/// Digests of the listed referrers, or a panic naming what came instead.
fn listed(answer: Referrers) -> Vec<Digest> {
    match answer {
        Referrers::Listed(list) => list.into_iter().map(|d| d.digest).collect(),
        Referrers::Unsupported => panic!("expected a listing, got Unsupported"),
    }
}

fn digests(names: &[&str]) -> Vec<Digest> {
    names.iter().map(|n| Digest::of(n.as_bytes())).collect()
}

#[tokio::test]
async fn a_404_or_an_answer_that_is_no_index_means_no_api() {
    let conn = connector();
    let missing = serve(handler(|_| {
        respond(StatusCode::NOT_FOUND, &[], Body::empty())
    }))
    .await;
    let answer = session(&conn, &missing)
        .referrers(&subject(), Some(BUNDLE))
        .await;
    assert_eq!(answer.unwrap(), Referrers::Unsupported);
    let html = serve(handler(|_| {
        respond(
            StatusCode::OK,
            &[("content-type", "text/html".into())],
            Body::from("<html>welcome</html>"),
        )
    }))
    .await;
    let answer = session(&conn, &html).referrers(&subject(), None).await;
    assert_eq!(answer.unwrap(), Referrers::Unsupported);
}

#[tokio::test]
async fn the_client_filters_when_the_registry_did_not() {
    let conn = connector();
    let entries = [entry("sbom", SBOM), entry("sig", BUNDLE)];
    let ignoring = serve(handler(move |_| page(&entries, &[]))).await;
    let reg = session(&conn, &ignoring);
    let answer = reg.referrers(&subject(), Some(BUNDLE)).await.unwrap();
    assert_eq!(listed(answer), digests(&["sig"]));
    let all = reg.referrers(&subject(), None).await.unwrap();
    assert_eq!(listed(all), digests(&["sbom", "sig"]));
    // The request names the digest and the (encoded) artifact type.
    let uri = &ignoring.seen()[0].uri;
    assert_eq!(
        uri,
        &format!(
            "/v2/a/b/referrers/{}?artifactType=application%2Fvnd.dev.sigstore.bundle.v0.3%2Bjson",
            subject()
        )
    );
    // A registry that says it applied the filter is taken at its word.
    let entries = [entry("sbom", SBOM), entry("sig", BUNDLE)];
    let applying = serve(handler(move |_| {
        page(&entries, &[("oci-filters-applied", "artifactType".into())])
    }))
    .await;
    let answer = session(&conn, &applying)
        .referrers(&subject(), Some(BUNDLE))
        .await;
    assert_eq!(listed(answer.unwrap()), digests(&["sbom", "sig"]));
}

#[tokio::test]
async fn pages_linked_by_link_are_all_read() {
    let origin = serve(handler(|uri| {
        if page_number(uri) == 2 {
            page(&[entry("two", BUNDLE)], &[])
        } else {
            page(
                &[entry("one", BUNDLE), entry("sbom", SBOM)],
                &[next("/v2/a/b/referrers/x?page=2")],
            )
        }
    }))
    .await;
    let answer = session(&connector(), &origin)
        .referrers(&subject(), Some(BUNDLE))
        .await;
    assert_eq!(listed(answer.unwrap()), digests(&["one", "two"]));
    assert_eq!(origin.seen().len(), 2);
}

#[tokio::test]
async fn a_link_back_to_a_page_already_read_is_refused() {
    let origin = serve(handler(|uri| {
        let me = format!("{}?{}", uri.path(), uri.query().unwrap_or_default());
        page(&[entry("one", BUNDLE)], &[next(&me)])
    }))
    .await;
    let e = refusal(&connector(), &origin, Some(BUNDLE)).await;
    assert_eq!(e.kind, RegistryErrorKind::Protocol, "{e}");
    assert!(e.message.contains("pagination loops"), "{e}");
    assert!(e.message.contains(&subject().to_string()), "{e}");
    assert_eq!(origin.seen().len(), 1);
}

#[tokio::test]
async fn pages_without_end_stop_at_the_page_cap() {
    let origin = serve(handler(|uri| {
        let n = page_number(uri);
        page(
            &[entry(&format!("r{n}"), BUNDLE)],
            &[next(&format!("/v2/a/b/referrers/x?page={}", n + 1))],
        )
    }))
    .await;
    let e = refusal(&connector(), &origin, None).await;
    assert_eq!(e.kind, RegistryErrorKind::Integrity, "{e}");
    assert!(
        e.message
            .contains(&format!("more than {MAX_REFERRER_PAGES} pages")),
        "{e}"
    );
    assert_eq!(origin.seen().len(), MAX_REFERRER_PAGES);
}

#[tokio::test]
async fn an_index_beyond_the_manifest_cap_is_refused() {
    // One page of about 34 kB against a 16 kB cap.
    let big: Vec<_> = (0..160).map(|i| entry(&format!("r{i}"), BUNDLE)).collect();
    let one_page = serve(handler(move |_| page(&big, &[]))).await;
    let conn = connector().with_max_manifest_bytes(16 * 1024);
    let e = refusal(&conn, &one_page, Some(BUNDLE)).await;
    assert_eq!(e.kind, RegistryErrorKind::Integrity, "{e}");
    assert!(e.message.contains("larger than 16384 bytes"), "{e}");
    // Pages of about 6.5 kB, each under the cap, add up beyond it on the third.
    let part: Vec<_> = (0..30).map(|i| entry(&format!("p{i}"), BUNDLE)).collect();
    let paged = serve(handler(move |uri| {
        let n = page_number(uri);
        page(
            &part,
            &[next(&format!("/v2/a/b/referrers/x?page={}", n + 1))],
        )
    }))
    .await;
    let e = refusal(&conn, &paged, None).await;
    assert_eq!(e.kind, RegistryErrorKind::Integrity, "{e}");
    assert!(e.message.contains("counting every page"), "{e}");
    assert_eq!(paged.seen().len(), 3);
}

#[tokio::test]
async fn a_later_page_missing_is_an_error_not_a_missing_api() {
    let origin = serve(handler(|uri| {
        if page_number(uri) == 2 {
            respond(StatusCode::NOT_FOUND, &[], Body::empty())
        } else {
            page(
                &[entry("one", BUNDLE)],
                &[next("/v2/a/b/referrers/x?page=2")],
            )
        }
    }))
    .await;
    let e = refusal(&connector(), &origin, None).await;
    assert_eq!(e.kind, RegistryErrorKind::NotFound, "{e}");
}
