//! Object-level GCP identity in process, against Google's real endpoint names: a fake of
//! Google STS and the IAM credentials API over TLS (`cloud_common/google.rs`), reached
//! through the cloud login's resolver override and trusted through `SSL_CERT_FILE` (the
//! root store the cloud login's rustls verifier loads; a user trusts a private CA the
//! same way), and a fake GKE metadata server (`GCE_METADATA_HOST`). A ServiceAccount
//! with only `iam.gke.io/gcp-service-account` gets its audiences from the metadata
//! server as Flux builds them on GKE (read once for all ServiceAccounts); one with
//! Flux's workload identity provider annotation uses that provider;
//! `credential.auth.fluxcd.io/provider: spiffe` is refused before any token is requested. The TokenRequest is a fake here
//! (`cluster_cloud_identity` covers the real API server). One test: `SSL_CERT_FILE` is
//! process-wide.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cloud_common;
mod fake_registry;
#[path = "cloud_common/google.rs"]
mod google;
mod support;

use std::sync::Arc;

use cloud_common::tokens::FakeTokens;
use cloud_common::ManualClock;
use cloud_common::{addr, assert_ready, condition, context_with_login, push, reconcile};
use google::{gke_pool, gke_sts_audience, GoogleFake, IMPERSONATED_TOKEN};
use ocisource::cloud::{
    CloudSettings, GcpSettings, WorkloadLogin, CREDENTIAL_PROVIDER, GCP_SERVICE_ACCOUNT,
    GCP_WORKLOAD_IDENTITY_PROVIDER,
};
use support::{RegistryOpts, TestRegistry};

const GAR_HOST: &str = "europe-west1-docker.pkg.dev";
const EMAIL: &str = "reader@ocisource-test.iam.gserviceaccount.com";
const PROVIDER: &str = "projects/123456/locations/global/workloadIdentityPools/fleet/providers/k8s";
const JWT: &str = "urn:ietf:params:oauth:token-type:jwt";

fn tenant_repo(name: &str, sa: &str) -> ocisource::api::OciRepository {
    cloud_common::tenant_repo(name, &format!("oci://{GAR_HOST}/proj/repo/app"), "gcp", sa)
}

#[tokio::test]
async fn gcp_service_accounts_federate_at_google_sts_then_impersonate() {
    let google = GoogleFake::start().await;
    // Before the cloud login's client exists; the only test of this binary.
    std::env::set_var("SSL_CERT_FILE", &google.ca);
    let reg = TestRegistry::start(
        RegistryOpts::plain().with_basic_auth("oauth2accesstoken", IMPERSONATED_TOKEN),
    );
    push(&reg, "proj/repo/app").await;
    let tokens = Arc::new(FakeTokens::default());
    tokens.annotate("default/gke", &[(GCP_SERVICE_ACCOUNT, EMAIL)]);
    tokens.annotate("default/gke-2", &[(GCP_SERVICE_ACCOUNT, EMAIL)]);
    tokens.annotate(
        "default/wif",
        &[
            (GCP_WORKLOAD_IDENTITY_PROVIDER, PROVIDER),
            (GCP_SERVICE_ACCOUNT, EMAIL),
            (CREDENTIAL_PROVIDER, "kubernetes"),
        ],
    );
    tokens.annotate(
        "default/spiffe",
        &[
            (GCP_SERVICE_ACCOUNT, EMAIL),
            (CREDENTIAL_PROVIDER, "spiffe"),
        ],
    );
    let settings = CloudSettings {
        gcp: GcpSettings {
            metadata_host: Some(google.metadata.to_string()),
            ..GcpSettings::default()
        },
        resolve: google.resolve(),
        ..CloudSettings::default()
    };
    let login = WorkloadLogin::new(settings, ManualClock::at("2025-01-01T00:00:00Z"))
        .unwrap()
        .with_object_identity(tokens.clone());
    let dir = tempfile::tempdir().unwrap();
    let ctx = context_with_login(dir.path(), &[(GAR_HOST, addr(&reg))], login);

    // GKE: no provider annotation, so the audiences come from the metadata server.
    assert_ready(&reconcile(&mut tenant_repo("on-gke", "gke"), &ctx).await);
    assert_eq!(
        tokens.requests(),
        [("default/gke".to_string(), gke_pool())],
        "the TokenRequest audience is the workload identity pool"
    );
    let metadata = google.received.metadata.lock().unwrap().clone();
    for path in [
        "project/project-id",
        "instance/attributes/cluster-location",
        "instance/attributes/cluster-name",
    ] {
        assert!(metadata.iter().any(|p| p == path), "{path} in {metadata:?}");
    }
    let sts = google.sts();
    assert_eq!(sts.len(), 1, "{sts:?}");
    assert_eq!(sts[0]["audience"], gke_sts_audience());
    assert_eq!(sts[0]["subject_token"], "token-1-for-default/gke");
    assert_eq!(sts[0]["subject_token_type"], JWT);
    assert_eq!(
        sts[0]["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(
        google.impersonations(),
        [(
            format!("{EMAIL}:generateAccessToken"),
            "Bearer sts-token-1".to_string()
        )]
    );

    // Another ServiceAccount on GKE: its own token exchange, the cluster's identity as
    // read the first time (Flux reads the metadata server once).
    assert_ready(&reconcile(&mut tenant_repo("on-gke-2", "gke-2"), &ctx).await);
    assert_eq!(
        tokens.requests()[1],
        ("default/gke-2".to_string(), gke_pool())
    );
    assert_eq!(google.sts()[1]["audience"], gke_sts_audience());
    assert_eq!(google.received.metadata.lock().unwrap().len(), 3);

    // Outside GKE: Flux's provider annotation is both audiences.
    assert_ready(&reconcile(&mut tenant_repo("federated", "wif"), &ctx).await);
    let audience = format!("//iam.googleapis.com/{PROVIDER}");
    assert_eq!(
        tokens.requests()[2],
        ("default/wif".to_string(), audience.clone())
    );
    let sts = google.sts();
    assert_eq!(sts.len(), 3, "{sts:?}");
    assert_eq!(sts[2]["audience"], audience);
    assert_eq!(sts[2]["subject_token"], "token-3-for-default/wif");
    assert_eq!(google.impersonations()[2].1, "Bearer sts-token-3");

    // The spiffe credential provider is refused, naming the annotation; no token asked.
    let report = reconcile(&mut tenant_repo("spiffe", "spiffe"), &ctx).await;
    let (status, _, message) = condition(&report, "Ready");
    assert_eq!(status, "False", "{message}");
    for needle in [
        "serviceaccount 'default/spiffe'",
        CREDENTIAL_PROVIDER,
        "SPIFFE credential provider is not supported",
    ] {
        assert!(message.contains(needle), "{needle:?} not in {message}");
    }
    assert_eq!(tokens.requests().len(), 3);
    assert!(
        !message.contains("token-"),
        "no token in the message: {message}"
    );
}
