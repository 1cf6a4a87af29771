//! Object-level workload identity in process (`spec.serviceAccountName` with
//! `provider: aws`, the gate on): the login asks a ServiceAccount token source (a fake
//! standing in for the TokenRequest API, which `cluster_cloud_identity` covers) for a
//! token with the STS audience, moto exchanges it for the annotated role, and logins
//! are cached per ServiceAccount and role: objects sharing a ServiceAccount share one
//! STS call, another ServiceAccount or a changed role makes a new one. Issue 31: the
//! controller's own identity is refused, before any token request, to an object that
//! chooses its proxy (a recording CONNECT proxy), `insecure` or its own CA; and with
//! `--default-service-account`, objects without `serviceAccountName` log in as that
//! ServiceAccount of their namespace, never as the controller.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cloud_common;
mod support;

use std::sync::Arc;

use cloud_common::moto::Moto;
use cloud_common::tokens::FakeTokens;
use cloud_common::{
    addr, assert_condition, assert_ready, context_with_login, context_with_secrets, push,
    reconcile, repo, ManualClock, MapSecrets,
};
use ocisource::api::ocirepository::LocalObjectReference;
use ocisource::api::OciRepository;
use ocisource::cloud::{AwsSettings, CloudSettings, WorkloadLogin, AWS_ROLE_ARN};
use support::proxy::ConnectProxy;
use support::{RegistryOpts, TestRegistry};

const ECR_HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const ECR_PASSWORD: &str = "123456789012-auth-token";
/// Before moto's ECR token expiry (2015-01-01), so logins are cached too.
const BEFORE_EXPIRY: &str = "2014-12-31T12:00:00Z";

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

/// The controller's own identity (IRSA: a role and a web identity token file), with moto
/// as STS and ECR.
async fn controller_irsa(moto: &Moto, dir: &std::path::Path) -> CloudSettings {
    CloudSettings {
        aws: AwsSettings {
            role_arn: Some(moto.ecr_role("controller").await),
            web_identity_token_file: Some(cloud_common::token_file(dir, "token", "eyJ.ctl")),
            endpoint_url: Some(moto.url()),
            ..AwsSettings::default()
        },
        ..CloudSettings::default()
    }
}

async fn ecr_registry() -> TestRegistry {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("AWS", ECR_PASSWORD));
    push(&reg, "team/app").await;
    reg
}

/// How a case's object chooses the way to the registry.
type Choose = fn(&mut OciRepository);

fn secret_ref(name: &str) -> Option<LocalObjectReference> {
    Some(LocalObjectReference { name: name.into() })
}

#[tokio::test]
async fn the_controllers_identity_is_refused_to_an_object_choosing_proxy_insecure_or_ca() {
    let (moto, dir, reg) = (
        Moto::start().await,
        tempfile::tempdir().unwrap(),
        ecr_registry().await,
    );
    let proxy = ConnectProxy::start(reg.host()).await;
    let login = WorkloadLogin::new(
        controller_irsa(&moto, dir.path()).await,
        ManualClock::at(BEFORE_EXPIRY),
    )
    .unwrap();
    let secrets = MapSecrets::default()
        .with("hostile-proxy", &[("address", proxy.address.as_bytes())])
        .with("own-ca", &[("ca.crt", b"-----BEGIN CERTIFICATE-----\n")]);
    let registry = [(ECR_HOST, addr(&reg))];
    let ctx = context_with_secrets(dir.path(), &registry, login, Arc::new(secrets));
    moto.record().await;
    let url = format!("oci://{ECR_HOST}/team/app");
    let cases: [(&str, Choose, &str); 3] = [
        (
            "proxied",
            |o| o.spec.proxy_secret_ref = secret_ref("hostile-proxy"),
            "spec.proxySecretRef names Secret 'hostile-proxy'",
        ),
        (
            "insecure",
            |o| o.spec.insecure = true,
            "spec.insecure is true",
        ),
        (
            "own-ca",
            |o| o.spec.cert_secret_ref = secret_ref("own-ca"),
            "spec.certSecretRef Secret 'own-ca' holds a ca.crt",
        ),
    ];
    for (name, choose, chosen) in cases {
        let mut obj = repo(name, &url, "aws");
        choose(&mut obj);
        let report = reconcile(&mut obj, &ctx).await;
        let needles = [
            chosen,
            "refusing to log in with the controller's own aws identity",
            "Set spec.serviceAccountName",
        ];
        assert_condition(&report, "Ready", "False", "AuthenticationFailed", &needles);
    }
    assert!(moto.recorded().await.is_empty(), "no token was requested");
    assert!(proxy.targets().is_empty(), "{:?}", proxy.targets());

    // The fakes do answer: the same identity logs in for an object that leaves the way
    // to the registry to the controller.
    assert_ready(&reconcile(&mut repo("plain", &url, "aws"), &ctx).await);
    assert_eq!(moto.assume_role_calls().await.len(), 1);
}

#[tokio::test]
async fn with_a_default_service_account_objects_never_log_in_as_the_controller() {
    let (moto, dir, reg) = (
        Moto::start().await,
        tempfile::tempdir().unwrap(),
        ecr_registry().await,
    );
    let tenant_role = moto.ecr_role("tenant").await;
    let tokens = Arc::new(FakeTokens::default());
    tokens.annotate("default/lockdown", &[(AWS_ROLE_ARN, &tenant_role)]);
    let login = WorkloadLogin::new(
        controller_irsa(&moto, dir.path()).await,
        ManualClock::at(BEFORE_EXPIRY),
    )
    .unwrap()
    .with_object_identity(tokens.clone());
    let ctx = context_with_login(dir.path(), &[(ECR_HOST, addr(&reg))], login)
        .with_default_service_account("lockdown");
    moto.record().await;
    let url = format!("oci://{ECR_HOST}/team/app");

    // No serviceAccountName: the default ServiceAccount of the object's namespace logs
    // in (insecure is then the object's own business, as with serviceAccountName).
    let mut obj = repo("app", &url, "aws");
    obj.spec.insecure = true;
    assert_ready(&reconcile(&mut obj, &ctx).await);
    assert_eq!(
        tokens.requests(),
        [(
            "default/lockdown".to_string(),
            "sts.amazonaws.com".to_string()
        )]
    );
    let assumed = moto.assume_role_calls().await;
    assert_eq!(assumed.len(), 1, "{assumed:?}");
    assert_eq!(assumed[0]["RoleArn"], tenant_role);
    assert_eq!(
        assumed[0]["WebIdentityToken"],
        "token-1-for-default/lockdown"
    );

    // A namespace without that ServiceAccount fails naming the lockdown; the controller's
    // identity is still not used.
    let mut other = repo("app", &url, "aws");
    other.metadata.namespace = Some("team-b".into());
    let needles = [
        "as the default ServiceAccount 'lockdown' of namespace 'team-b'",
        "--default-service-account",
        "serviceaccount 'team-b/lockdown' not found",
    ];
    let report = reconcile(&mut other, &ctx).await;
    assert_condition(&report, "Ready", "False", "AuthenticationFailed", &needles);
    assert_eq!(moto.assume_role_calls().await.len(), 1);
}
