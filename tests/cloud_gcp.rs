//! `spec.provider: gcp` end to end against small local fakes of Google's documented
//! token endpoints (the GCE metadata server; STS token exchange and IAM credentials
//! `generateAccessToken` for workload identity federation), with a real registry that
//! accepts user `oauth2accesstoken` under Artifact Registry and GCR host names sent to
//! 127.0.0.1 by resolver overrides.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cloud_common;
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::RawQuery;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use cloud_common::{
    addr, assert_condition, assert_ready, condition, context, form, json_response, push, reconcile,
    reconcile_alone, repo, ManualClock,
};
use ocisource::cloud::{CloudSettings, GcpSettings};
use serde_json::json;
use support::{RegistryOpts, TestRegistry};

const GAR_HOST: &str = "europe-west1-docker.pkg.dev";
const GCR_HOST: &str = "eu.gcr.io";
const NOW: &str = "2025-01-01T00:00:00Z";
/// The scope of every token that reaches a registry (read-only storage).
const PULL_SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_only";

/// A fake metadata server handing out `gcp-token-<n>`, valid 3599 s; counts requests
/// and keeps the last query.
async fn metadata_server(
    calls: Arc<AtomicUsize>,
    query: Arc<Mutex<String>>,
) -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/computeMetadata/v1/instance/service-accounts/default/token",
        get(move |headers: HeaderMap, RawQuery(q): RawQuery| {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            *query.lock().unwrap() = q.unwrap_or_default();
            async move {
                if headers.get("metadata-flavor").map(|v| v.as_bytes()) != Some(b"Google") {
                    return (StatusCode::FORBIDDEN, "missing Metadata-Flavor").into_response();
                }
                json_response(json!({"access_token": format!("gcp-token-{n}"), "expires_in": 3599, "token_type": "Bearer"}))
            }
        }),
    );
    cloud_common::serve(app).await
}

#[tokio::test]
async fn metadata_server_token_serves_every_google_registry_until_it_is_due() {
    let reg = TestRegistry::start(
        RegistryOpts::plain().with_basic_auth("oauth2accesstoken", "gcp-token-1"),
    );
    push(&reg, "proj/repo/app").await;
    let (calls, query) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(String::new())),
    );
    let meta = metadata_server(calls.clone(), query.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(NOW);
    let settings = CloudSettings {
        gcp: GcpSettings {
            metadata_host: Some(meta.to_string()),
            ..GcpSettings::default()
        },
        ..CloudSettings::default()
    };
    let ctx = context(
        dir.path(),
        &[(GAR_HOST, addr(&reg)), (GCR_HOST, addr(&reg))],
        settings,
        clock.clone(),
    );
    let mut objects: Vec<_> = [GAR_HOST, GCR_HOST, GAR_HOST, GCR_HOST]
        .iter()
        .enumerate()
        .map(|(i, host)| {
            repo(
                &format!("app-{i}"),
                &format!("oci://{host}/proj/repo/app"),
                "gcp",
            )
        })
        .collect();
    for obj in &mut objects {
        assert_ready(&reconcile(obj, &ctx).await);
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one token for both hosts and four objects"
    );
    // Only the read-only storage scope a pull needs, not cloud-platform.
    assert!(
        query
            .lock()
            .unwrap()
            .ends_with(&format!("scopes={PULL_SCOPE}")),
        "{}",
        query.lock().unwrap()
    );

    // 80% of 3599 s is 47m59s.
    clock.set("2025-01-01T00:47:58Z");
    assert_ready(&reconcile(&mut objects[0], &ctx).await);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    clock.set("2025-01-01T00:48:00Z");
    let report = reconcile(&mut objects[0], &ctx).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "renewed");
    // The registry only knows gcp-token-1: the renewed token is really the one sent.
    let (_, reason, message) = condition(&report, "Ready");
    assert_eq!(reason, "AuthenticationFailed", "{message}");
    assert!(!message.contains("gcp-token-2"), "{message}");
}

/// What the fake federation endpoints received.
#[derive(Default)]
struct Federation {
    sts: Mutex<Vec<std::collections::HashMap<String, String>>>,
    impersonation: Mutex<Vec<(String, serde_json::Value)>>,
}

async fn federation_server(seen: Arc<Federation>) -> std::net::SocketAddr {
    let sts_seen = seen.clone();
    let app = axum::Router::new()
        .route(
            "/v1/token",
            post(move |body: String| {
                sts_seen.sts.lock().unwrap().push(form(&body));
                async move {
                    json_response(json!({"access_token": "sts-token", "expires_in": 3600, "token_type": "Bearer",
                        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}))
                }
            }),
        )
        .route(
            "/v1/projects/-/serviceAccounts/{target}",
            post(move |headers: HeaderMap, body: String| {
                let auth = headers["authorization"].to_str().unwrap().to_string();
                seen.impersonation.lock().unwrap().push((auth, serde_json::from_str(&body).unwrap()));
                async move { json_response(json!({"accessToken": "impersonated-token", "expireTime": "2025-01-01T01:00:00Z"})) }
            }),
        );
    cloud_common::serve(app).await
}

#[tokio::test]
async fn workload_identity_federation_exchanges_the_subject_token_and_impersonates() {
    let reg = TestRegistry::start(
        RegistryOpts::plain().with_basic_auth("oauth2accesstoken", "impersonated-token"),
    );
    push(&reg, "proj/repo/app").await;
    let seen = Arc::new(Federation::default());
    let fed = federation_server(seen.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let subject = cloud_common::token_file(dir.path(), "k8s-token", "eyJ.k8s.sa-token\n");
    let audience = "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/k8s";
    let creds = json!({
        "type": "external_account",
        "audience": audience,
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": format!("http://{fed}/v1/token"),
        "service_account_impersonation_url": format!("http://{fed}/v1/projects/-/serviceAccounts/flux@proj.iam.gserviceaccount.com:generateAccessToken"),
        "credential_source": {"file": subject, "format": {"type": "text"}},
    });
    let file = cloud_common::token_file(dir.path(), "creds.json", &creds.to_string());
    let settings = CloudSettings {
        gcp: GcpSettings {
            application_credentials: Some(file),
            ..GcpSettings::default()
        },
        ..CloudSettings::default()
    };
    let ctx = context(
        dir.path(),
        &[(GAR_HOST, addr(&reg))],
        settings,
        ManualClock::at(NOW),
    );
    let mut obj = repo("app", &format!("oci://{GAR_HOST}/proj/repo/app"), "gcp");
    assert_ready(&reconcile(&mut obj, &ctx).await);

    let sts = seen.sts.lock().unwrap().clone();
    assert_eq!(sts.len(), 1);
    assert_eq!(
        sts[0]["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(sts[0]["audience"], audience);
    assert_eq!(sts[0]["subject_token"], "eyJ.k8s.sa-token");
    assert_eq!(
        sts[0]["subject_token_type"],
        "urn:ietf:params:oauth:token-type:jwt"
    );
    assert_eq!(
        sts[0]["requested_token_type"],
        "urn:ietf:params:oauth:token-type:access_token"
    );
    let imp = seen.impersonation.lock().unwrap().clone();
    assert_eq!(imp.len(), 1);
    assert_eq!(imp[0].0, "Bearer sts-token");
    // The STS token only calls the IAM credentials API, which needs cloud-platform; the
    // impersonated token, the one the registry sees, asks for the pull scope only.
    assert_eq!(
        sts[0]["scope"],
        "https://www.googleapis.com/auth/cloud-platform"
    );
    assert_eq!(imp[0].1["scope"], json!([PULL_SCOPE]));
}

#[tokio::test]
async fn federation_without_impersonation_uses_the_sts_token_from_a_json_url_source() {
    let reg = TestRegistry::start(
        RegistryOpts::plain().with_basic_auth("oauth2accesstoken", "sts-token"),
    );
    push(&reg, "proj/repo/app").await;
    let seen = Arc::new(Federation::default());
    let fed = federation_server(seen.clone()).await;
    let source = cloud_common::serve(axum::Router::new().route(
        "/token",
        get(|headers: HeaderMap| async move {
            assert_eq!(headers["x-source"], "yes");
            json_response(json!({"id_token": "from-url"}))
        }),
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let creds = json!({
        "type": "external_account",
        "audience": "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/p/providers/q",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": format!("http://{fed}/v1/token"),
        "credential_source": {"url": format!("http://{source}/token"), "headers": {"x-source": "yes"},
                              "format": {"type": "json", "subject_token_field_name": "id_token"}},
    });
    let settings = CloudSettings {
        gcp: GcpSettings {
            application_credentials: Some(cloud_common::token_file(
                dir.path(),
                "creds.json",
                &creds.to_string(),
            )),
            ..GcpSettings::default()
        },
        ..CloudSettings::default()
    };
    let ctx = context(
        dir.path(),
        &[(GCR_HOST, addr(&reg))],
        settings,
        ManualClock::at(NOW),
    );
    let mut obj = repo("app", &format!("oci://{GCR_HOST}/proj/repo/app"), "gcp");
    assert_ready(&reconcile(&mut obj, &ctx).await);
    let sts = seen.sts.lock().unwrap().clone();
    assert_eq!(sts[0]["subject_token"], "from-url");
    // The STS token goes to the registry itself: the pull scope only.
    assert_eq!(sts[0]["scope"], PULL_SCOPE);
    assert!(seen.impersonation.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_service_account_key_file_is_refused_with_what_to_use_instead() {
    let dir = tempfile::tempdir().unwrap();
    let key =
        json!({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----secret"});
    let settings = CloudSettings {
        gcp: GcpSettings {
            application_credentials: Some(cloud_common::token_file(
                dir.path(),
                "key.json",
                &key.to_string(),
            )),
            ..GcpSettings::default()
        },
        ..CloudSettings::default()
    };
    let obj = repo("app", &format!("oci://{GAR_HOST}/proj/repo/app"), "gcp");
    let report = reconcile_alone(obj, settings).await;
    let needles = ["'service_account' is not supported", "external_account"];
    assert_condition(&report, "Ready", "False", "AuthenticationFailed", &needles);
    assert!(!condition(&report, "Ready").2.contains("PRIVATE KEY"));
}

#[tokio::test]
async fn a_non_google_host_stalls() {
    let obj = repo("app", "oci://gcr.io.evil.io/proj/app", "gcp");
    let report = reconcile_alone(obj, CloudSettings::default()).await;
    assert_condition(
        &report,
        "Stalled",
        "True",
        "InvalidSpec",
        &["provider 'gcp'"],
    );
}
