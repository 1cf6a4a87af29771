//! Object-level workload identity on the REAL API server (see `tests/support/cluster.rs`):
//! the `ocisource controller` binary runs with the chart's Deployment args and RBAC as
//! the chart's ServiceAccount. With `controller.objectLevelWorkloadIdentity: true`, an
//! OCIRepository with `provider: aws` and `serviceAccountName: tenant` makes the
//! controller request a token for `tenant` from the TokenRequest API, which moto (STS
//! `AssumeRoleWithWebIdentity`, then ECR `GetAuthorizationToken`) exchanges for the ECR
//! login that a real registry (htpasswd user `AWS`) accepts. The registry is reached
//! under its ECR host name through a CONNECT proxy (the object's `spec.proxySecretRef`)
//! that sends the tunnel to 127.0.0.1: no hosts file, no DNS. (`HTTPS_PROXY` on the
//! controller cannot be used: the kube client reads it too and refuses to start without
//! its `http-proxy` feature.) The token moto received is checked to be the API
//! server's for that ServiceAccount (TokenReview, JWT `sub` and `aud`). With the gate off
//! the object stalls, naming the gate, and the chart grants no `serviceaccounts/token`.
//! GCP: ServiceAccounts annotated `iam.gke.io/gcp-service-account` (on "GKE": the
//! audiences come from a fake metadata server, `GCE_METADATA_HOST`) or also with Flux's
//! workload identity provider annotation; the controller's token for each is exchanged at
//! a TLS fake of `sts.googleapis.com`, then `iamcredentials.googleapis.com`, reached
//! through the controller's `HTTPS_PROXY` (a CONNECT proxy to the fake; `NO_PROXY` keeps
//! the API server direct) with the fake's CA trusted by `SSL_CERT_FILE`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cloud_common;
mod fake_registry;
#[path = "cloud_common/google.rs"]
mod google;
mod support;

use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use cloud_common::moto::Moto;
use support::cluster::{condition, ready_now, Cluster, Controller};
use support::proxy::ConnectProxy;
use support::{RegistryOpts, TestRegistry};

const OCIREPO: &str = "ocirepositories.ocisource.dev";
const ECR_HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
/// What moto's ECR token decodes to: `AWS:123456789012-auth-token`.
const ECR_PASSWORD: &str = "123456789012-auth-token";
const WAIT: Duration = Duration::from_secs(90);

fn service_account(ns: &str, name: &str, role: Option<&str>) -> String {
    let role: Vec<(&str, &str)> = role
        .map(|r| ("eks.amazonaws.com/role-arn", r))
        .into_iter()
        .collect();
    annotated_service_account(ns, name, &role)
}

fn annotated_service_account(ns: &str, name: &str, annotations: &[(&str, &str)]) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {ns}\n"
    );
    if !annotations.is_empty() {
        yaml.push_str("  annotations:\n");
    }
    for (k, v) in annotations {
        yaml.push_str(&format!("    {k}: \"{v}\"\n"));
    }
    yaml
}

fn oci_repository(ns: &str, name: &str, service_account: &str) -> String {
    cloud_repository(ns, name, service_account, ECR_HOST, "aws")
}

fn cloud_repository(ns: &str, name: &str, sa: &str, host: &str, provider: &str) -> String {
    format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  url: oci://{host}/team/app\n  interval: 10m\n  insecure: true\n  provider: {provider}\n\
         \x20 serviceAccountName: {sa}\n  ref:\n    tag: v1\n"
    )
}

/// `kubectl auth can-i create serviceaccounts/token` as the chart's ServiceAccount.
fn controller_may_request_tokens(cluster: &Cluster, ns: &str) -> bool {
    let out = cluster.kubectl(&[
        "auth",
        "can-i",
        "create",
        "serviceaccounts",
        "--subresource=token",
        "-n",
        ns,
        &format!("--as=system:serviceaccount:{ns}:ocisource"),
    ]);
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

/// The claims of a JWT, decoded without checking the signature (the TokenReview does).
fn jwt_claims(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The API server's TokenReview of `token` for `audience`, as admin.
fn token_review(cluster: &Cluster, dir: &std::path::Path, token: &str, audience: &str) -> Value {
    let path = dir.join("review.json");
    let review = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token, "audiences": [audience]},
    });
    std::fs::write(&path, review.to_string()).unwrap();
    let out = cluster.kubectl_ok(&["create", "-f", path.to_str().unwrap(), "-o", "json"]);
    serde_json::from_str(&out).unwrap()
}

/// Starts the controller in `ns` with `values` and `env` (state under `work`), and the
/// Secret `proxy` naming the CONNECT proxy at `proxy` for the objects' `proxySecretRef`.
fn start_with_proxy(
    cluster: &Cluster,
    ns: &str,
    values: &Value,
    work: &std::path::Path,
    env: &[(&str, &str)],
    proxy: &str,
) -> Controller {
    let data = work.join("data");
    let controller =
        Controller::start_with_env(cluster, ns, values, &data, "ocisource-0", None, env);
    cluster.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: proxy\n  namespace: {ns}\n\
         stringData:\n  address: {proxy}\n"
    ));
    controller
}

/// Polls in a blocking thread, so the proxy's task keeps running meanwhile; on timeout,
/// fails with the controller's log.
async fn wait_for(
    cluster: &Cluster,
    controller: &Controller,
    ns: &str,
    name: &str,
    what: &'static str,
    cond: fn(&Value) -> bool,
) -> Value {
    let (cluster, ns, name) = (cluster.clone(), ns.to_string(), name.to_string());
    let polled = tokio::task::spawn_blocking(move || {
        cluster.wait_for(OCIREPO, &ns, &name, WAIT, what, cond)
    })
    .await;
    polled.unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", controller.log_text()))
}

fn message(obj: &Value, type_: &str) -> String {
    condition(obj, type_)
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_role_logs_in_to_ecr_with_the_api_servers_token() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let moto = Moto::start().await;
    let role = moto.ecr_role("tenant-ecr").await;
    moto.record().await;
    let registry = TestRegistry::start(
        RegistryOpts::plain()
            .with_tls()
            .with_basic_auth("AWS", ECR_PASSWORD),
    );
    cloud_common::push(&registry, "team/app").await;
    let proxy = ConnectProxy::start(registry.host()).await;

    let values = json!({"controller": {"objectLevelWorkloadIdentity": true}});
    let namespace = cluster.namespace("objid", &values);
    let ns = namespace.name.clone();
    assert!(
        controller_may_request_tokens(&cluster, &ns),
        "the chart grants create serviceaccounts/token with the gate on"
    );
    cluster.apply(&service_account(&ns, "tenant", Some(&role)));
    cluster.apply(&service_account(&ns, "bare", None));
    let work = tempfile::tempdir().unwrap();
    let endpoint = moto.url();
    let env = [("AWS_ENDPOINT_URL", endpoint.as_str())];
    let controller = start_with_proxy(&cluster, &ns, &values, work.path(), &env, &proxy.address);
    let via_proxy = "  proxySecretRef:\n    name: proxy\n";
    cluster.apply(&(oci_repository(&ns, "app", "tenant") + via_proxy));
    cluster.apply(&(oci_repository(&ns, "unannotated", "bare") + via_proxy));

    let obj = wait_for(&cluster, &controller, &ns, "app", "Ready", ready_now).await;
    assert!(obj["status"]["artifact"]["digest"].is_string(), "{obj}");
    assert!(
        proxy
            .targets()
            .iter()
            .any(|t| t == &format!("{ECR_HOST}:443")),
        "the registry was reached under its ECR name: {:?}",
        proxy.targets()
    );

    let assumed = moto.assume_role_calls().await;
    assert_eq!(assumed.len(), 1, "one STS call, then cached: {assumed:?}");
    let call = &assumed[0];
    assert_eq!(call["RoleArn"], role);
    let session: String = format!("tenant.{ns}.us-east-1.ocisource")
        .chars()
        .take(64)
        .collect();
    assert_eq!(call["RoleSessionName"], session);
    let token = &call["WebIdentityToken"];
    let claims = jwt_claims(token);
    assert_eq!(
        claims["sub"],
        format!("system:serviceaccount:{ns}:tenant"),
        "{claims}"
    );
    assert_eq!(claims["aud"], json!(["sts.amazonaws.com"]), "{claims}");
    let review = token_review(&cluster, work.path(), token, "sts.amazonaws.com");
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(
        review["status"]["user"]["username"],
        format!("system:serviceaccount:{ns}:tenant"),
        "{review}"
    );
    assert!(
        !moto.ecr_token_calls().await.is_empty(),
        "the ECR token came from moto"
    );

    // A ServiceAccount without the role annotation: a clear error naming both.
    let bare = wait_for(
        &cluster,
        &controller,
        &ns,
        "unannotated",
        "Ready=False",
        |o| condition(o, "Ready").is_some_and(|c| c["status"] == "False"),
    )
    .await;
    let text = message(&bare, "Ready");
    for needle in [
        format!("serviceaccount '{ns}/bare'"),
        "eks.amazonaws.com/role-arn".to_string(),
        "is missing".to_string(),
    ] {
        assert!(text.contains(&needle), "{needle} not in: {text}");
    }
    assert!(
        !text.contains(token.as_str()),
        "no token in the status message"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_the_object_stalls_naming_it_and_no_token_rule_is_granted() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let values = json!({});
    let namespace = cluster.namespace("objid-off", &values);
    let ns = namespace.name.clone();
    assert!(
        !controller_may_request_tokens(&cluster, &ns),
        "no serviceaccounts/token grant with the gate off"
    );
    cluster.apply(&service_account(
        &ns,
        "tenant",
        Some("arn:aws:iam::123456789012:role/tenant"),
    ));
    let work = tempfile::tempdir().unwrap();
    let controller = Controller::start(
        &cluster,
        &ns,
        &values,
        &work.path().join("data"),
        "ocisource-0",
    );
    cluster.apply(&oci_repository(&ns, "app", "tenant"));
    let obj = wait_for(&cluster, &controller, &ns, "app", "Stalled", |o| {
        condition(o, "Stalled").is_some_and(|c| c["status"] == "True")
    })
    .await;
    let stalled = condition(&obj, "Stalled").unwrap();
    assert_eq!(stalled["reason"], "ProviderNotSupported", "{obj}");
    let text = message(&obj, "Stalled");
    for needle in [
        "spec.serviceAccountName",
        "ObjectLevelWorkloadIdentity feature gate, which is off",
        "--feature-gates=ObjectLevelWorkloadIdentity=true",
        "controller.objectLevelWorkloadIdentity",
    ] {
        assert!(text.contains(needle), "{needle} not in: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcp_service_accounts_federate_their_api_server_token_at_google_sts() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    const GAR_HOST: &str = "europe-west1-docker.pkg.dev";
    const EMAIL: &str = "reader@ocisource-test.iam.gserviceaccount.com";
    const WIP: &str = "projects/123456/locations/global/workloadIdentityPools/fleet/providers/k8s";
    let google = google::GoogleFake::start().await;
    let registry = TestRegistry::start(
        RegistryOpts::plain()
            .with_tls()
            .with_basic_auth("oauth2accesstoken", google::IMPERSONATED_TOKEN),
    );
    cloud_common::push(&registry, "team/app").await;
    let to_registry = ConnectProxy::start(registry.host()).await;
    let to_google = ConnectProxy::start(google.tls.to_string()).await;

    let values = json!({"controller": {"objectLevelWorkloadIdentity": true}});
    let namespace = cluster.namespace("objid-gcp", &values);
    let ns = namespace.name.clone();
    let wif = format!("//iam.googleapis.com/{WIP}");
    let gke_sa = [("iam.gke.io/gcp-service-account", EMAIL)];
    let wif_sa = [
        ("gcp.auth.fluxcd.io/workload-identity-provider", WIP),
        ("iam.gke.io/gcp-service-account", EMAIL),
    ];
    cluster.apply(&annotated_service_account(&ns, "gke", &gke_sa));
    cluster.apply(&annotated_service_account(&ns, "wif", &wif_sa));
    let work = tempfile::tempdir().unwrap();
    let (metadata, ca) = (google.metadata.to_string(), google.ca.display().to_string());
    let env = [
        ("GCE_METADATA_HOST", metadata.as_str()),
        ("HTTPS_PROXY", to_google.address.as_str()),
        ("NO_PROXY", "127.0.0.1,localhost"),
        ("SSL_CERT_FILE", ca.as_str()),
    ];
    let controller = start_with_proxy(
        &cluster,
        &ns,
        &values,
        work.path(),
        &env,
        &to_registry.address,
    );
    let via_proxy = "  proxySecretRef:\n    name: proxy\n";
    for sa in ["gke", "wif"] {
        cluster.apply(&(cloud_repository(&ns, sa, sa, GAR_HOST, "gcp") + via_proxy));
    }
    for sa in ["gke", "wif"] {
        let obj = wait_for(&cluster, &controller, &ns, sa, "Ready", ready_now).await;
        assert!(obj["status"]["artifact"]["digest"].is_string(), "{obj}");
    }
    let targets = to_google.targets();
    for host in [google::STS_HOST, google::IAM_HOST] {
        let target = format!("{host}:443");
        assert!(targets.contains(&target), "{target} in {targets:?}");
    }

    let sts = google.sts();
    assert_eq!(sts.len(), 2, "one exchange per ServiceAccount: {sts:?}");
    for (sa, token_audience, sts_audience) in [
        ("gke", google::gke_pool(), google::gke_sts_audience()),
        ("wif", wif.clone(), wif.clone()),
    ] {
        let subject = format!("system:serviceaccount:{ns}:{sa}");
        let form = sts
            .iter()
            .find(|f| jwt_claims(&f["subject_token"])["sub"] == subject.as_str())
            .unwrap_or_else(|| panic!("no STS exchange for {subject}: {sts:?}"));
        assert_eq!(form["audience"], sts_audience);
        assert_eq!(
            form["subject_token_type"],
            "urn:ietf:params:oauth:token-type:jwt"
        );
        let token = &form["subject_token"];
        let claims = jwt_claims(token);
        assert_eq!(claims["aud"], json!([token_audience]), "{claims}");
        let review = token_review(&cluster, work.path(), token, &token_audience);
        assert_eq!(review["status"]["authenticated"], true, "{review}");
        assert_eq!(review["status"]["user"]["username"], subject, "{review}");
    }
    let impersonated = google.impersonations();
    assert_eq!(impersonated.len(), 2, "{impersonated:?}");
    for (target, authorization) in &impersonated {
        assert_eq!(target, &format!("{EMAIL}:generateAccessToken"));
        assert!(
            authorization.starts_with("Bearer sts-token-"),
            "{authorization}"
        );
    }
    let log = controller.log_text();
    assert!(log.contains("reconcile"), "the controller logged: {log}");
    let subject_tokens = sts.iter().map(|f| f["subject_token"].as_str());
    for secret in subject_tokens.chain(["sts-token-1", google::IMPERSONATED_TOKEN]) {
        assert!(!log.contains(secret), "a token in the controller's log");
    }
}
