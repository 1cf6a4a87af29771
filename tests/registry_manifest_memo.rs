//! Manifests are fetched once per digest for all the sessions of a connector (a fleet of
//! objects over a few artifacts), and only a session the repository itself answered may
//! read one fetched by another: a tenant without the login gets the registry's refusal,
//! never another tenant's manifest. In-process fake (`fake_registry`), so each `GET` is
//! counted and the login refused on demand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fake_registry;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use base64::Engine as _;
use fake_registry::{challenge, respond, serve, Origin};
use ocisource::domain::digest::Digest;
use ocisource::domain::manifest::OCI_MANIFEST;
use ocisource::domain::secret::{Credentials, Redacted};
use ocisource::ports::{Registry, RegistryConnector, RegistryErrorKind, RegistryOptions};
use ocisource::registry::HttpConnector;

const MANIFEST: &[u8] =
    br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}"#;

fn login(password: &str) -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        credentials: Some(Credentials {
            username: "alice".into(),
            password: Redacted::new(password.into()),
        }),
        ..RegistryOptions::default()
    }
}

/// A registry whose repositories `team/app` and `team/other` hold the manifest under the
/// tag `v1` and its digest, for alice's login only.
async fn registry() -> Origin {
    let good = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("alice:s3cret")
    );
    serve(Arc::new(move |method, uri, headers| {
        if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(good.as_str()) {
            return challenge(r#"Basic realm="fake""#.into());
        }
        let digest = Digest::of(MANIFEST).to_string();
        let known = ["team/app", "team/other"].iter().any(|repo| {
            [
                format!("/v2/{repo}/manifests/v1"),
                format!("/v2/{repo}/manifests/{digest}"),
            ]
            .contains(&uri.path().to_string())
        });
        if !known {
            return respond(StatusCode::NOT_FOUND, &[], Body::empty());
        }
        let headers = [
            ("content-type", OCI_MANIFEST.to_string()),
            ("docker-content-digest", digest),
        ];
        let body = if method == Method::HEAD {
            Body::empty()
        } else {
            Body::from(MANIFEST)
        };
        respond(StatusCode::OK, &headers, body)
    }))
    .await
}

fn manifest_gets(origin: &Origin, repo: &str) -> usize {
    origin
        .seen()
        .iter()
        .filter(|s| s.method == Method::GET && s.uri.starts_with(&format!("/v2/{repo}/manifests/")))
        .count()
}

fn session(
    connector: &HttpConnector,
    origin: &Origin,
    repo: &str,
    options: &RegistryOptions,
) -> Arc<dyn Registry> {
    connector.connect(&origin.host, repo, options).unwrap()
}

#[tokio::test]
async fn a_manifest_is_fetched_once_for_every_session_the_repository_answered() {
    let origin = registry().await;
    let connector = HttpConnector::new();
    for round in 1..=3 {
        let s = session(&connector, &origin, "team/app", &login("s3cret"));
        let digest = s.manifest_digest("v1").await.unwrap();
        let m = s.manifest(&digest.to_string()).await.unwrap();
        assert_eq!(&m.body[..], MANIFEST, "round {round}");
        assert_eq!(m.media_type, OCI_MANIFEST, "round {round}");
        assert_eq!(manifest_gets(&origin, "team/app"), 1, "round {round}");
    }
    // Another repository is asked again, even for the same digest.
    let other = session(&connector, &origin, "team/other", &login("s3cret"));
    let digest = other.manifest_digest("v1").await.unwrap();
    other.manifest(&digest.to_string()).await.unwrap();
    assert_eq!(manifest_gets(&origin, "team/other"), 1);
    // A connector of its own (another controller) shares nothing.
    let alone = session(&HttpConnector::new(), &origin, "team/app", &login("s3cret"));
    alone.manifest_digest("v1").await.unwrap();
    alone.manifest(&digest.to_string()).await.unwrap();
    assert_eq!(manifest_gets(&origin, "team/app"), 2);
}

#[tokio::test]
async fn a_session_the_repository_refused_never_reads_another_sessions_manifest() {
    let origin = registry().await;
    let connector = HttpConnector::new();
    let alice = session(&connector, &origin, "team/app", &login("s3cret"));
    let digest = alice.manifest_digest("v1").await.unwrap();
    alice.manifest(&digest.to_string()).await.unwrap();

    let mallory = session(&connector, &origin, "team/app", &login("guess"));
    let err = mallory.manifest(&digest.to_string()).await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Unauthorized, "{}", err.message);
    // Refused by the tag as well, and still not served from memory afterwards.
    assert!(mallory.manifest_digest("v1").await.is_err());
    let err = mallory.manifest(&digest.to_string()).await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Unauthorized, "{}", err.message);
    let anonymous = session(
        &connector,
        &origin,
        "team/app",
        &RegistryOptions {
            insecure: true,
            ..RegistryOptions::default()
        },
    );
    assert!(anonymous.manifest(&digest.to_string()).await.is_err());
}
