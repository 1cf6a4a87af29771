//! Credentials go only to the origin (scheme, host, port) they were given for, checked
//! on what a second origin receives (another port on 127.0.0.1 is another origin): a
//! tag-list `Link` to it, a blob redirect (307) to storage on it, its own challenge, and
//! a token realm. An https registry never leads to plain http (links, redirects,
//! realms). In-process fakes (`fake_registry`), since a real registry will not send these.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fake_registry;
mod support;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use base64::Engine as _;
use bytes::Bytes;
use fake_registry::{challenge, respond, serve, serve_tls, tag_page, Handler};
use futures::StreamExt;
use ocisource::domain::digest::Digest;
use ocisource::domain::manifest::{Descriptor, FLUX_CONTENT, OCI_MANIFEST};
use ocisource::domain::secret::{Credentials, Redacted};
use ocisource::ports::{Registry, RegistryConnector, RegistryErrorKind, RegistryOptions};
use ocisource::registry::{HttpConnector, RetryPolicy};

const MANIFEST: &[u8] = br#"{"schemaVersion":2,"layers":[]}"#;

fn basic() -> String {
    let raw = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
    format!("Basic {raw}")
}

fn creds() -> Option<Credentials> {
    Some(Credentials {
        username: "alice".into(),
        password: Redacted::new("s3cret".into()),
    })
}

#[derive(Clone)]
enum Guard {
    /// `Basic` login required.
    Basic,
    /// Bearer flow with the token service at `realm`, or at the registry's own `/token`
    /// when `None`.
    Bearer { realm: Option<String> },
}

/// A registry that demands `guard` on every path but `/token`, then answers with `rest`.
/// Its own `/token` hands out `t0k3n` for the Basic login.
fn guarded(
    guard: Guard,
    rest: impl Fn(&Method, &Uri, &HeaderMap) -> Response + Send + Sync + 'static,
) -> Handler {
    Arc::new(move |m, uri, h| {
        let auth = h.get("authorization").and_then(|v| v.to_str().ok());
        if uri.path() == "/token" {
            return token_service(auth);
        }
        match &guard {
            Guard::Basic if auth != Some(basic().as_str()) => {
                challenge(r#"Basic realm="fake""#.into())
            }
            Guard::Bearer { realm } if auth != Some("Bearer t0k3n") => {
                let own = || format!("http://{}/token", h["host"].to_str().unwrap());
                let realm = realm.clone().unwrap_or_else(own);
                challenge(format!(
                    r#"Bearer realm="{realm}",service="fake",scope="repository:a/b:pull""#
                ))
            }
            _ => rest(m, uri, h),
        }
    })
}

/// A token service: `t0k3n` for the Basic login, 401 otherwise.
fn token_service(auth: Option<&str>) -> Response {
    if auth == Some(basic().as_str()) {
        respond(
            StatusCode::OK,
            &[],
            Body::from(r#"{"token":"t0k3n","expires_in":300}"#),
        )
    } else {
        respond(StatusCode::UNAUTHORIZED, &[], Body::empty())
    }
}

const GUARDS: [Guard; 2] = [Guard::Basic, Guard::Bearer { realm: None }];

fn manifest() -> Response {
    respond(
        StatusCode::OK,
        &[
            ("content-type", OCI_MANIFEST.to_string()),
            ("docker-content-digest", Digest::of(MANIFEST).to_string()),
        ],
        Body::from(MANIFEST),
    )
}

fn session(host: &str, options: RegistryOptions) -> Arc<dyn Registry> {
    HttpConnector::new()
        .with_retry(RetryPolicy::with_base(std::time::Duration::from_millis(5)))
        .connect(host, "a/b", &options)
        .unwrap()
}

fn plain_with_login() -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        credentials: creds(),
        ..RegistryOptions::default()
    }
}

fn blob() -> (Bytes, Descriptor) {
    let bytes: Bytes = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let d = Descriptor {
        media_type: FLUX_CONTENT.into(),
        digest: Digest::of(&bytes),
        size: bytes.len() as u64,
        annotations: Default::default(),
        platform: None,
        artifact_type: None,
    };
    (bytes, d)
}

async fn fetch(r: &dyn Registry, d: &Descriptor) -> Result<Vec<u8>, String> {
    let mut s = r.blob(d).await.map_err(|e| e.message)?;
    let mut out = Vec::new();
    while let Some(item) = s.next().await {
        out.extend_from_slice(&item.map_err(|e| e.message)?);
    }
    Ok(out)
}

#[tokio::test]
async fn a_tag_link_to_another_origin_is_followed_without_credentials() {
    let other = serve(Arc::new(|_, _, _| tag_page(&["v2"], None))).await;
    for guard in GUARDS {
        let next = format!("{}/v2/a/b/tags/list?last=v1&n=1000", other.base);
        let reg = serve(guarded(guard, move |_, _, _| {
            tag_page(&["v1"], Some(&next))
        }))
        .await;
        let before = other.seen().len();
        let tags = session(&reg.host, plain_with_login()).tags().await.unwrap();
        assert_eq!(tags, ["v1", "v2"]);
        assert!(reg.authorized_requests() >= 1, "the login was in play");
        assert_eq!(other.seen().len(), before + 1);
        assert_eq!(
            other.authorized_requests(),
            0,
            "the other origin received credentials: {:?}",
            other.seen()
        );
    }
}

#[tokio::test]
async fn a_challenge_from_another_origin_is_refused_and_never_changes_the_login() {
    // The other origin asks for a token from its own realm: the client must neither
    // learn that challenge nor send the registry's login anywhere but the registry.
    let other = serve(Arc::new(|_, uri, h| {
        let auth = h.get("authorization").and_then(|v| v.to_str().ok());
        if uri.path() == "/token" {
            return token_service(auth);
        }
        let host = h["host"].to_str().unwrap();
        challenge(format!(r#"Bearer realm="http://{host}/token",service="x""#))
    }))
    .await;
    let next = format!("{}/v2/a/b/tags/list?last=v1&n=1000", other.base);
    let reg = serve(guarded(Guard::Basic, move |_, uri, _| {
        if uri.path().contains("/manifests/") {
            manifest()
        } else {
            tag_page(&["v1"], Some(&next))
        }
    }))
    .await;
    let r = session(&reg.host, plain_with_login());
    let e = r.tags().await.unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::Unauthorized, "{}", e.message);
    assert!(
        e.message.contains(&other.base) && e.message.contains("never sends"),
        "{}",
        e.message
    );
    assert_eq!(
        other.seen().len(),
        1,
        "no token request: {:?}",
        other.seen()
    );
    assert_eq!(other.authorized_requests(), 0);
    // The session still logs in to the registry with Basic.
    assert_eq!(r.manifest_digest("v1").await.unwrap(), Digest::of(MANIFEST));
    let last = reg.seen().pop().unwrap();
    assert_eq!(last.authorization.as_deref(), Some(basic().as_str()));
}

#[tokio::test]
async fn a_blob_redirected_to_another_origin_is_fetched_without_credentials_and_checked() {
    let (bytes, desc) = blob();
    for tamper in [false, true] {
        let served = bytes.clone();
        let storage = serve(Arc::new(move |_, uri, _| {
            if uri.path() != "/storage/blob" {
                return respond(StatusCode::NOT_FOUND, &[], Body::empty());
            }
            let mut b = served.to_vec();
            if tamper {
                b[10] ^= 1;
            }
            respond(StatusCode::OK, &[], Body::from(b))
        }))
        .await;
        for guard in GUARDS {
            let location = format!("{}/storage/blob", storage.base);
            let reg = serve(guarded(guard, move |_, _, _| {
                respond(
                    StatusCode::TEMPORARY_REDIRECT,
                    &[("location", location.clone())],
                    Body::empty(),
                )
            }))
            .await;
            let got = fetch(session(&reg.host, plain_with_login()).as_ref(), &desc).await;
            match got {
                Ok(b) if !tamper => assert_eq!(b, bytes.as_ref()),
                Err(m) if tamper => assert!(m.contains("digest"), "{m}"),
                other => panic!("tamper={tamper}: {other:?}"),
            }
            assert!(reg.authorized_requests() >= 1, "the login was in play");
        }
        assert!(!storage.seen().is_empty());
        assert_eq!(
            storage.authorized_requests(),
            0,
            "storage received credentials: {:?}",
            storage.seen()
        );
    }
}

#[tokio::test]
async fn a_token_realm_gets_the_login_only_on_the_registry_domain() {
    let tokens = serve(Arc::new(|_, _, h| {
        token_service(h.get("authorization").and_then(|v| v.to_str().ok()))
    }))
    .await;
    let port = tokens.host.rsplit(':').next().unwrap().to_string();
    // Another port of the registry's own address: the Docker token flow sends it the
    // Basic login, as go-containerregistry does.
    let same_domain = format!("http://127.0.0.1:{port}/token");
    let reg = serve(guarded(
        Guard::Bearer {
            realm: Some(same_domain),
        },
        |_, _, _| manifest(),
    ))
    .await;
    let r = session(&reg.host, plain_with_login());
    assert_eq!(r.manifest_digest("v1").await.unwrap(), Digest::of(MANIFEST));
    assert_eq!(tokens.seen().len(), 1);
    assert_eq!(
        tokens.seen()[0].authorization.as_deref(),
        Some(basic().as_str())
    );
    // The same service named by another domain ('localhost' is not 127.0.0.1): refused
    // before any request.
    let other_domain = format!("http://localhost:{port}/token");
    let reg = serve(guarded(
        Guard::Bearer {
            realm: Some(other_domain),
        },
        |_, _, _| manifest(),
    ))
    .await;
    let e = session(&reg.host, plain_with_login())
        .manifest_digest("v1")
        .await
        .unwrap_err();
    assert!(e.message.contains("not on the domain"), "{}", e.message);
    assert_eq!(tokens.seen().len(), 1, "the foreign realm was contacted");
}

#[tokio::test]
async fn an_https_registry_never_leads_to_plain_http() {
    let plain = serve(Arc::new(|_, _, _| tag_page(&["x"], None))).await;
    let pki = tempfile::tempdir().unwrap();
    support::pki::make_pki(pki.path());
    let target = plain.base.clone();
    let secure = serve_tls(
        Arc::new(move |_, uri, _| {
            let path = uri.path();
            if path.ends_with("/tags/list") {
                tag_page(
                    &["v1"],
                    Some(&format!("{target}/v2/a/b/tags/list?last=v1&n=1000")),
                )
            } else if path.contains("/blobs/") {
                respond(
                    StatusCode::TEMPORARY_REDIRECT,
                    &[("location", format!("{target}/storage/blob"))],
                    Body::empty(),
                )
            } else {
                challenge(format!(r#"Bearer realm="{target}/token",service="x""#))
            }
        }),
        pki.path(),
    )
    .await;
    let options = RegistryOptions {
        credentials: creds(),
        ca_pem: Some(std::fs::read(pki.path().join("ca.pem")).unwrap()),
        ..RegistryOptions::default()
    };
    let r = session(&secure.host, options);
    let tags = r.tags().await.unwrap_err();
    let blob = fetch(r.as_ref(), &blob().1).await.unwrap_err();
    let realm = r.manifest_digest("v1").await.unwrap_err();
    for message in [&tags.message, &blob, &realm.message] {
        assert!(message.contains("never downgrades"), "{message}");
    }
    assert_eq!(tags.kind, RegistryErrorKind::Protocol);
    assert_eq!(secure.seen().len(), 3, "{:?}", secure.seen());
    assert!(
        plain.seen().is_empty(),
        "plain http was contacted: {:?}",
        plain.seen()
    );
}
