//! `spec.provider: aws` end to end: the controller's identity (IRSA web identity, EKS
//! Pod Identity, environment keys) is exchanged by moto for an ECR token, moto checks
//! the SigV4 signature of the ECR call, and a real registry (htpasswd user `AWS`)
//! accepts the token under an ECR host name that a resolver override sends to
//! 127.0.0.1. Token requests are counted from moto's own recording.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cloud_common;
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::routing::get;
use cloud_common::moto::Moto;
use cloud_common::{
    addr, assert_condition, assert_ready, condition, context, push, reconcile, reconcile_alone,
    repo, ManualClock,
};
use ocisource::cloud::{AwsSettings, CloudSettings};
use support::{RegistryOpts, TestRegistry};

const ECR_HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
/// What moto's ECR token decodes to: `AWS:123456789012-auth-token`.
const ECR_PASSWORD: &str = "123456789012-auth-token";
/// moto's ECR token expires on 2015-01-01T00:00:00Z; the clock stands 12 hours before.
const BEFORE_EXPIRY: &str = "2014-12-31T12:00:00Z";

fn url(repo: &str) -> String {
    format!("oci://{ECR_HOST}/{repo}")
}

fn settings(aws: AwsSettings) -> CloudSettings {
    CloudSettings {
        aws,
        ..CloudSettings::default()
    }
}

/// A context that reaches `reg` as the ECR host, its clock before moto's token expiry.
fn ecr_context(
    dir: &std::path::Path,
    reg: &TestRegistry,
    aws: AwsSettings,
) -> ocisource::reconcile::Context {
    let clock = ManualClock::at(BEFORE_EXPIRY);
    context(dir, &[(ECR_HOST, addr(reg))], settings(aws), clock)
}

async fn registry() -> TestRegistry {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("AWS", ECR_PASSWORD));
    push(&reg, "team/app").await;
    reg
}

/// IRSA settings: the role, a web identity token file, moto as STS and ECR.
async fn irsa(moto: &Moto, dir: &std::path::Path) -> AwsSettings {
    AwsSettings {
        role_arn: Some(moto.ecr_role("flux-ecr").await),
        web_identity_token_file: Some(cloud_common::token_file(
            dir,
            "token",
            "eyJ.web-identity.token\n",
        )),
        role_session_name: Some("ocisource-test".into()),
        endpoint_url: Some(moto.url()),
        ..AwsSettings::default()
    }
}

#[tokio::test]
async fn irsa_web_identity_logs_in_to_ecr_and_the_registry_accepts_the_token() {
    let (moto, reg, dir) = (
        Moto::start().await,
        registry().await,
        tempfile::tempdir().unwrap(),
    );
    let aws = irsa(&moto, dir.path()).await;
    let role = aws.role_arn.clone().unwrap();
    let ctx = ecr_context(dir.path(), &reg, aws);
    moto.record().await;
    // The unsigned STS call is the one free action; moto checks the ECR call's signature.
    moto.require_signatures_after(1).await;

    let mut obj = repo("app", &url("team/app"), "aws");
    let report = reconcile(&mut obj, &ctx).await;
    assert_ready(&report);

    let assumed = moto.assume_role_calls().await;
    assert_eq!(assumed.len(), 1, "{assumed:?}");
    assert_eq!(assumed[0]["RoleArn"], role);
    assert_eq!(assumed[0]["WebIdentityToken"], "eyJ.web-identity.token");
    assert_eq!(assumed[0]["RoleSessionName"], "ocisource-test");
    let ecr = moto.ecr_token_calls().await;
    assert_eq!(ecr.len(), 1);
    let auth = ecr[0].header("authorization").unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=ASIA")
            && auth.contains("/us-east-1/ecr/aws4_request"),
        "signed with the assumed role's temporary key: {auth}"
    );
    assert!(ecr[0].header("x-amz-security-token").is_some());
    let (ready, _, message) = condition(&report, "Ready");
    assert_eq!(ready, "True");
    assert!(!message.contains(ECR_PASSWORD));
}

#[tokio::test]
async fn many_objects_on_one_registry_make_one_token_request_per_expiry() {
    let (moto, reg, dir) = (
        Moto::start().await,
        registry().await,
        tempfile::tempdir().unwrap(),
    );
    let aws = irsa(&moto, dir.path()).await;
    let clock = ManualClock::at(BEFORE_EXPIRY);
    let ctx = Arc::new(context(
        dir.path(),
        &[(ECR_HOST, addr(&reg))],
        settings(aws),
        clock.clone(),
    ));
    moto.record().await;
    const OBJECTS: usize = 200;
    let mut objects: Vec<_> = (0..OBJECTS)
        .map(|i| repo(&format!("app-{i}"), &url("team/app"), "aws"))
        .collect();

    let round = |objects: Vec<ocisource::api::OciRepository>| {
        let ctx = ctx.clone();
        async move {
            let tasks: Vec<_> = objects
                .into_iter()
                .map(|mut obj| {
                    let ctx = ctx.clone();
                    tokio::spawn(async move {
                        let report = reconcile(&mut obj, &ctx).await;
                        assert_ready(&report);
                        obj
                    })
                })
                .collect();
            let mut done = Vec::new();
            for t in tasks {
                done.push(t.await.unwrap());
            }
            done
        }
    };
    objects = round(objects).await;
    assert_eq!(
        moto.assume_role_calls().await.len(),
        1,
        "one STS call for {OBJECTS} objects"
    );
    assert_eq!(
        moto.ecr_token_calls().await.len(),
        1,
        "one ECR token for {OBJECTS} objects"
    );

    // 59 minutes later: still within 80% of the 12 hours left and under the 1-hour cap.
    clock.set("2014-12-31T12:59:00Z");
    objects = round(objects).await;
    assert_eq!(moto.ecr_token_calls().await.len(), 1);

    // Past the one-hour cap: exactly one new login, shared again by every object.
    clock.set("2014-12-31T13:01:00Z");
    round(objects).await;
    assert_eq!(moto.ecr_token_calls().await.len(), 2);
    assert_eq!(moto.assume_role_calls().await.len(), 2);
}

#[tokio::test]
async fn environment_keys_sign_the_ecr_call() {
    let (moto, reg, dir) = (
        Moto::start().await,
        registry().await,
        tempfile::tempdir().unwrap(),
    );
    let (id, secret) = moto.ecr_user_key("ci").await;
    let aws = AwsSettings {
        access_key_id: Some(id.clone()),
        secret_access_key: Some(ocisource::domain::secret::Redacted::new(secret)),
        endpoint_url: Some(moto.url()),
        ..AwsSettings::default()
    };
    let ctx = ecr_context(dir.path(), &reg, aws);
    moto.record().await;
    moto.require_signatures_after(0).await;
    let mut obj = repo("app", &url("team/app"), "aws");
    assert_ready(&reconcile(&mut obj, &ctx).await);
    let ecr = moto.ecr_token_calls().await;
    assert_eq!(ecr.len(), 1);
    assert!(ecr[0]
        .header("authorization")
        .unwrap()
        .contains(&format!("Credential={id}/")));
    assert!(moto.assume_role_calls().await.is_empty());
}

#[tokio::test]
async fn a_wrong_secret_key_is_refused_by_moto_and_reported_without_secrets() {
    let (moto, reg, dir) = (
        Moto::start().await,
        registry().await,
        tempfile::tempdir().unwrap(),
    );
    let (id, _) = moto.ecr_user_key("ci").await;
    let aws = AwsSettings {
        access_key_id: Some(id),
        secret_access_key: Some(ocisource::domain::secret::Redacted::new(
            "not-the-secret".into(),
        )),
        endpoint_url: Some(moto.url()),
        ..AwsSettings::default()
    };
    let ctx = ecr_context(dir.path(), &reg, aws);
    moto.require_signatures_after(0).await;
    let mut obj = repo("app", &url("team/app"), "aws");
    let report = reconcile(&mut obj, &ctx).await;
    let (ready, reason, message) = condition(&report, "Ready");
    assert_eq!(
        (ready.as_str(), reason.as_str()),
        ("False", "AuthenticationFailed"),
        "{message}"
    );
    assert!(
        message.contains("AWS ECR (GetAuthorizationToken)") && message.contains("403"),
        "{message}"
    );
    assert!(!message.contains("not-the-secret"), "{message}");
    assert!(report
        .status
        .conditions
        .iter()
        .all(|c| c.type_ != "Stalled" || c.status != "True"));
}

#[tokio::test]
async fn eks_pod_identity_credentials_come_from_the_container_endpoint() {
    let (moto, reg, dir) = (
        Moto::start().await,
        registry().await,
        tempfile::tempdir().unwrap(),
    );
    let (id, secret) = moto.ecr_user_key("pod").await;
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let agent = axum::Router::new().route(
        "/v1/credentials",
        get(move |headers: axum::http::HeaderMap| {
            let (id, secret) = (id.clone(), secret.clone());
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                assert_eq!(headers["authorization"], "pod-identity-token");
                cloud_common::json_response(serde_json::json!({
                    "AccessKeyId": id, "SecretAccessKey": secret,
                    "Expiration": "2014-12-31T18:00:00Z",
                }))
            }
        }),
    );
    let agent = cloud_common::serve(agent).await;
    let aws = AwsSettings {
        container_credentials_full_uri: Some(format!("http://{agent}/v1/credentials")),
        container_authorization_token_file: Some(cloud_common::token_file(
            dir.path(),
            "pod-token",
            "pod-identity-token",
        )),
        endpoint_url: Some(moto.url()),
        ..AwsSettings::default()
    };
    let ctx = ecr_context(dir.path(), &reg, aws);
    moto.require_signatures_after(0).await;
    for name in ["a", "b", "c"] {
        let mut obj = repo(name, &url("team/app"), "aws");
        assert_ready(&reconcile(&mut obj, &ctx).await);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the agent is asked once");
}

#[tokio::test]
async fn no_identity_in_the_environment_is_an_authentication_failure_that_says_what_to_set_up() {
    let obj = repo("app", &url("team/app"), "aws");
    let report = reconcile_alone(obj, CloudSettings::default()).await;
    assert_condition(
        &report,
        "Ready",
        "False",
        "AuthenticationFailed",
        &["no aws identity", "IRSA"],
    );
}

#[tokio::test]
async fn a_look_alike_host_stalls_naming_spec_provider_and_spec_url() {
    let obj = repo("app", &format!("oci://{ECR_HOST}.evil.io/team/app"), "aws");
    let report = reconcile_alone(obj, CloudSettings::default()).await;
    let needles = ["spec.provider", "spec.url", ".evil.io"];
    assert_condition(&report, "Stalled", "True", "InvalidSpec", &needles);
    assert_eq!(report.requeue, ocisource::reconcile::Requeue::AwaitChange);
}

#[tokio::test]
async fn service_account_with_a_provider_stalls_while_the_gate_is_off() {
    let mut obj = repo("app", &url("team/app"), "aws");
    obj.spec.service_account_name = Some("tenant".into());
    let report = reconcile_alone(obj, CloudSettings::default()).await;
    let needles = [
        "spec.serviceAccountName",
        "'tenant'",
        "ObjectLevelWorkloadIdentity feature gate, which is off",
        "--feature-gates=ObjectLevelWorkloadIdentity=true",
    ];
    assert_condition(&report, "Stalled", "True", "ProviderNotSupported", &needles);
}

/// moto has no ECR Public, so a small fake of its documented `GetAuthorizationToken`
/// (AWS JSON 1.1, target `SpencerFrontendService`) stands in; it checks the SigV4 scope.
#[tokio::test]
async fn public_ecr_logs_in_through_ecr_public_in_us_east_1() {
    use base64::Engine as _;
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("AWS", "public-pass"));
    push(&reg, "team/app").await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let fake = axum::Router::new().route(
        "/",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let get = |k: &str| headers[k].to_str().unwrap().to_string();
            record
                .lock()
                .unwrap()
                .push((get("x-amz-target"), get("authorization")));
            async move {
                let token = base64::engine::general_purpose::STANDARD.encode("AWS:public-pass");
                cloud_common::json_response(serde_json::json!({
                    "authorizationData": {"authorizationToken": token, "expiresAt": 1420070400.0}
                }))
            }
        }),
    );
    let fake = cloud_common::serve(fake).await;
    let dir = tempfile::tempdir().unwrap();
    let aws = AwsSettings {
        access_key_id: Some("AKIDPUBLIC".into()),
        secret_access_key: Some(ocisource::domain::secret::Redacted::new("s".into())),
        endpoint_url_ecr_public: Some(format!("http://{fake}")),
        ..AwsSettings::default()
    };
    let ctx = context(
        dir.path(),
        &[("public.ecr.aws", addr(&reg))],
        settings(aws),
        ManualClock::at(BEFORE_EXPIRY),
    );
    let mut obj = repo("app", "oci://public.ecr.aws/team/app", "aws");
    assert_ready(&reconcile(&mut obj, &ctx).await);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, "SpencerFrontendService.GetAuthorizationToken");
    assert!(
        seen[0].1.contains("Credential=AKIDPUBLIC/")
            && seen[0].1.contains("/us-east-1/ecr-public/aws4_request"),
        "{}",
        seen[0].1
    );
}
