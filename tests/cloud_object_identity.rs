//! Object-level workload identity in process (`spec.serviceAccountName` with
//! `provider: aws`, the gate on): the login asks a ServiceAccount token source (a fake
//! standing in for the TokenRequest API, which `cluster_cloud_identity` covers) for a
//! token with the STS audience, moto exchanges it for the annotated role, and logins
//! are cached per ServiceAccount and role: objects sharing a ServiceAccount share one
//! STS call, another ServiceAccount or a changed role makes a new one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cloud_common;
mod support;

use std::sync::Arc;

use cloud_common::moto::Moto;
use cloud_common::tokens::FakeTokens;
use cloud_common::{addr, assert_ready, context_with_login, push, reconcile, ManualClock};
use ocisource::cloud::{AwsSettings, CloudSettings, WorkloadLogin, AWS_ROLE_ARN};
use support::{RegistryOpts, TestRegistry};

const ECR_HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const ECR_PASSWORD: &str = "123456789012-auth-token";

fn tenant_repo(name: &str, sa: &str) -> ocisource::api::OciRepository {
    cloud_common::tenant_repo(name, &format!("oci://{ECR_HOST}/team/app"), "aws", sa)
}

#[tokio::test]
async fn logins_are_per_service_account_and_role_with_the_sts_audience() {
    let (moto, dir) = (Moto::start().await, tempfile::tempdir().unwrap());
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("AWS", ECR_PASSWORD));
    push(&reg, "team/app").await;
    let (role_a, role_b) = (moto.ecr_role("a").await, moto.ecr_role("b").await);
    let tokens = Arc::new(FakeTokens::default());
    tokens.annotate("default/tenant-a", &[(AWS_ROLE_ARN, &role_a)]);
    tokens.annotate("default/tenant-b", &[(AWS_ROLE_ARN, &role_b)]);
    let settings = CloudSettings {
        aws: AwsSettings {
            endpoint_url: Some(moto.url()),
            ..AwsSettings::default()
        },
        ..CloudSettings::default()
    };
    // Before moto's ECR token expiry (2015-01-01), so logins are cached too.
    let login = WorkloadLogin::new(settings, ManualClock::at("2014-12-31T12:00:00Z"))
        .unwrap()
        .with_object_identity(tokens.clone());
    let ctx = context_with_login(dir.path(), &[(ECR_HOST, addr(&reg))], login);
    moto.record().await;

    for name in ["a1", "a2"] {
        assert_ready(&reconcile(&mut tenant_repo(name, "tenant-a"), &ctx).await);
    }
    let assumed = moto.assume_role_calls().await;
    assert_eq!(
        assumed.len(),
        1,
        "two objects, one ServiceAccount: {assumed:?}"
    );
    assert_eq!(assumed[0]["RoleArn"], role_a);
    assert_eq!(
        assumed[0]["WebIdentityToken"],
        "token-1-for-default/tenant-a"
    );
    assert_eq!(
        assumed[0]["RoleSessionName"],
        "tenant-a.default.us-east-1.ocisource"
    );
    assert_eq!(
        tokens.requests(),
        [(
            "default/tenant-a".to_string(),
            "sts.amazonaws.com".to_string()
        )]
    );

    assert_ready(&reconcile(&mut tenant_repo("b", "tenant-b"), &ctx).await);
    let assumed = moto.assume_role_calls().await;
    assert_eq!(assumed.len(), 2);
    assert_eq!(assumed[1]["RoleArn"], role_b);
    assert_eq!(
        assumed[1]["WebIdentityToken"],
        "token-2-for-default/tenant-b"
    );

    // The role annotation changes: a new identity, a new token and STS call.
    tokens.annotate("default/tenant-a", &[(AWS_ROLE_ARN, &role_b)]);
    assert_ready(&reconcile(&mut tenant_repo("a1", "tenant-a"), &ctx).await);
    let assumed = moto.assume_role_calls().await;
    assert_eq!(assumed.len(), 3);
    assert_eq!(assumed[2]["RoleArn"], role_b);
    assert_eq!(
        assumed[2]["WebIdentityToken"],
        "token-3-for-default/tenant-a"
    );
}

#[tokio::test]
async fn a_missing_service_account_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let login = WorkloadLogin::new(
        CloudSettings::default(),
        ManualClock::at("2025-01-01T00:00:00Z"),
    )
    .unwrap()
    .with_object_identity(Arc::new(FakeTokens::default()));
    let ctx = context_with_login(dir.path(), &[], login);
    let report = reconcile(&mut tenant_repo("app", "ghost"), &ctx).await;
    cloud_common::assert_condition(
        &report,
        "Ready",
        "False",
        "AuthenticationFailed",
        &["serviceaccount 'default/ghost' not found"],
    );
}
