//! `spec.provider: azure` end to end against a small local fake of Microsoft Entra's
//! documented v2.0 token endpoint (client credentials with a federated client
//! assertion) and of ACR's `/oauth2/exchange`, with a real registry that accepts the
//! all-zero user and the ACR refresh token. The cloud login reaches the exchange fake
//! under the ACR host name over HTTPS (a test CA the login trusts through
//! `CloudSettings::extra_ca_pem`), and the registry client reaches the real registry
//! under the same name, each through its own resolver override. The exchange is HTTPS
//! whatever `spec.insecure` says (issue 31).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cloud_common;
mod fake_registry;
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::Path;
use axum::routing::post;
use base64::Engine as _;
use cloud_common::tokens::FakeTokens;
use cloud_common::{
    addr, assert_condition, assert_ready, context_with_login, form, json_response, push, reconcile,
    reconcile_alone, repo, ManualClock,
};
use ocisource::cloud::{
    AzureSettings, CloudSettings, WorkloadLogin, AZURE_CLIENT_ID, AZURE_TENANT_ID,
};
use serde_json::json;
use support::{RegistryOpts, TestRegistry};

const NOW: &str = "2025-01-01T00:00:00Z";
const ZERO_USER: &str = "00000000-0000-0000-0000-000000000000";

/// An unsigned JWT whose `exp` is 2025-01-01T03:00:00Z (short enough for htpasswd).
fn refresh_token() -> String {
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!(
        "{}.{}.s",
        b64(r#"{"alg":"none"}"#),
        b64(r#"{"exp":1735700400}"#)
    )
}

/// What the fakes received: Entra token requests (tenant, form) and ACR exchanges.
#[derive(Default)]
struct Seen {
    entra: Mutex<Vec<(String, HashMap<String, String>)>>,
    exchange: Mutex<Vec<HashMap<String, String>>>,
}

/// The fakes' addresses: Entra (plain HTTP, the controller's authority host setting) and
/// the ACR exchange (HTTPS only, with a certificate for the ACR names of the tests).
struct Fakes {
    entra: std::net::SocketAddr,
    acr: std::net::SocketAddr,
    ca_pem: Vec<u8>,
}

async fn fake_entra_and_acr(seen: Arc<Seen>, pki: &std::path::Path) -> Fakes {
    let entra = seen.clone();
    let entra = axum::Router::new().route(
        "/{tenant}/oauth2/v2.0/token",
        post(move |Path(tenant): Path<String>, body: String| {
            entra.entra.lock().unwrap().push((tenant, form(&body)));
            async move { json_response(json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "entra-token"})) }
        }),
    );
    let acr = axum::Router::new().route(
        "/oauth2/exchange",
        post(move |body: String| {
            seen.exchange.lock().unwrap().push(form(&body));
            async move { json_response(json!({"refresh_token": refresh_token()})) }
        }),
    );
    support::pki::make_ca(pki, "azure fake CA");
    support::pki::make_cert(
        pki,
        "acr",
        "subjectAltName=DNS:myreg.azurecr.io,DNS:other.azurecr.io,DNS:myreg.azurecr.cn\n\
         basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    );
    Fakes {
        entra: cloud_common::serve(entra).await,
        acr: fake_registry::serve_router_tls(acr, pki, "acr").await,
        ca_pem: std::fs::read(pki.join("ca.pem")).unwrap(),
    }
}

fn settings(dir: &std::path::Path, fakes: &Fakes, acr_hosts: &[&str]) -> CloudSettings {
    CloudSettings {
        azure: AzureSettings {
            client_id: Some("11111111-2222-3333-4444-555555555555".into()),
            tenant_id: Some("tenant-id".into()),
            federated_token_file: Some(cloud_common::token_file(
                dir,
                "azure-token",
                "eyJ.federated\n",
            )),
            authority_host: Some(format!("http://{}/", fakes.entra)),
        },
        resolve: acr_hosts
            .iter()
            .map(|h| ((*h).to_string(), fakes.acr))
            .collect(),
        extra_ca_pem: Some(fakes.ca_pem.clone()),
        ..CloudSettings::default()
    }
}

/// The parts of one Azure test: a real registry that accepts the refresh token under
/// every name of `hosts`, the fakes, the store and the context.
struct Setup {
    _reg: TestRegistry,
    _dir: tempfile::TempDir,
    seen: Arc<Seen>,
    ctx: ocisource::reconcile::Context,
}

async fn setup(hosts: &[&str]) -> Setup {
    setup_with(hosts, None).await
}

/// [`setup`]; with `tokens`, object-level identity is on and the controller has no Azure
/// identity of its own (only the authority host, the fake).
async fn setup_with(hosts: &[&str], tokens: Option<Arc<FakeTokens>>) -> Setup {
    let reg =
        TestRegistry::start(RegistryOpts::plain().with_basic_auth(ZERO_USER, &refresh_token()));
    push(&reg, "team/app").await;
    let seen = Arc::new(Seen::default());
    let dir = tempfile::tempdir().unwrap();
    let fakes = fake_entra_and_acr(seen.clone(), dir.path()).await;
    let registry: Vec<_> = hosts.iter().map(|h| (*h, addr(&reg))).collect();
    let mut settings = settings(dir.path(), &fakes, hosts);
    let login = match tokens {
        None => WorkloadLogin::new(settings, ManualClock::at(NOW)).unwrap(),
        Some(tokens) => {
            settings.azure = AzureSettings {
                authority_host: settings.azure.authority_host.take(),
                ..AzureSettings::default()
            };
            WorkloadLogin::new(settings, ManualClock::at(NOW))
                .unwrap()
                .with_object_identity(tokens)
        }
    };
    let ctx = context_with_login(dir.path(), &registry, login);
    Setup {
        _reg: reg,
        _dir: dir,
        seen,
        ctx,
    }
}

#[tokio::test]
async fn workload_identity_token_is_exchanged_for_an_acr_refresh_token() {
    let hosts = ["myreg.azurecr.io", "other.azurecr.io"];
    let Setup { seen, ctx, .. } = &setup(&hosts).await;
    for name in ["a", "b", "c"] {
        let mut obj = repo(name, &format!("oci://{}/team/app", hosts[0]), "azure");
        assert_ready(&reconcile(&mut obj, ctx).await);
    }
    {
        let entra = seen.entra.lock().unwrap();
        assert_eq!(entra.len(), 1);
        let (tenant, f) = &entra[0];
        assert_eq!(tenant, "tenant-id");
        assert_eq!(f["client_id"], "11111111-2222-3333-4444-555555555555");
        assert_eq!(f["scope"], "https://containerregistry.azure.net/.default");
        assert_eq!(f["client_assertion"], "eyJ.federated");
        assert_eq!(
            f["client_assertion_type"],
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        assert_eq!(f["grant_type"], "client_credentials");
        let exchange = seen.exchange.lock().unwrap();
        assert_eq!(exchange.len(), 1, "one exchange for three objects");
        assert_eq!(exchange[0]["grant_type"], "access_token");
        assert_eq!(exchange[0]["service"], hosts[0]);
        assert_eq!(exchange[0]["access_token"], "entra-token");
    }
    // Another registry: its own refresh token, the same Entra token.
    let mut obj = repo("d", &format!("oci://{}/team/app", hosts[1]), "azure");
    assert_ready(&reconcile(&mut obj, ctx).await);
    assert_eq!(seen.entra.lock().unwrap().len(), 1);
    let exchange = seen.exchange.lock().unwrap();
    assert_eq!(exchange.len(), 2);
    assert_eq!(exchange[1]["service"], hosts[1]);
}

#[tokio::test]
async fn china_registries_ask_for_the_china_acr_scope() {
    let host = "myreg.azurecr.cn";
    let Setup { seen, ctx, .. } = &setup(&[host]).await;
    let mut obj = repo("a", &format!("oci://{host}/team/app"), "azure");
    assert_ready(&reconcile(&mut obj, ctx).await);
    assert_eq!(
        seen.entra.lock().unwrap()[0].1["scope"],
        "https://containerregistry.azure.cn/.default"
    );
}

#[tokio::test]
async fn missing_workload_identity_says_what_to_enable() {
    let obj = repo("a", "oci://myreg.azurecr.io/team/app", "azure");
    let report = reconcile_alone(obj, CloudSettings::default()).await;
    let needles = ["no azure identity", "azure.workload.identity"];
    assert_condition(&report, "Ready", "False", "AuthenticationFailed", &needles);
}

#[tokio::test]
async fn an_ecr_host_with_provider_azure_stalls() {
    let url = "oci://123456789012.dkr.ecr.us-east-1.amazonaws.com/app";
    let report = reconcile_alone(repo("a", url, "azure"), CloudSettings::default()).await;
    assert_condition(
        &report,
        "Stalled",
        "True",
        "InvalidSpec",
        &["provider 'azure'"],
    );
}

/// ServiceAccount `default/tenant`, annotated with its Entra app and tenant.
fn tenant_tokens() -> Arc<FakeTokens> {
    let tokens = Arc::new(FakeTokens::default());
    tokens.annotate(
        "default/tenant",
        &[
            (AZURE_CLIENT_ID, "tenant-app"),
            (AZURE_TENANT_ID, "tenant-dir"),
        ],
    );
    tokens
}

/// Object-level identity: the tenant's ServiceAccount annotations name the app and
/// tenant, its TokenRequest token (audience `api://AzureADTokenExchange`) is the client
/// assertion; the controller's own Azure identity is not set up at all.
#[tokio::test]
async fn a_service_account_logs_in_with_its_own_app_and_token() {
    let host = "myreg.azurecr.io";
    let tokens = tenant_tokens();
    let Setup { seen, ctx, .. } = &setup_with(&[host], Some(tokens.clone())).await;
    let mut obj = repo("app", &format!("oci://{host}/team/app"), "azure");
    obj.spec.service_account_name = Some("tenant".into());
    assert_ready(&reconcile(&mut obj, ctx).await);

    assert_eq!(
        tokens.requests(),
        [(
            "default/tenant".to_string(),
            "api://AzureADTokenExchange".to_string()
        )]
    );
    {
        let entra = seen.entra.lock().unwrap();
        assert_eq!(entra.len(), 1);
        let (tenant, f) = &entra[0];
        assert_eq!(tenant, "tenant-dir");
        assert_eq!(f["client_id"], "tenant-app");
        assert_eq!(f["client_assertion"], "token-1-for-default/tenant");
        assert_eq!(seen.exchange.lock().unwrap().len(), 1);
    }

    // Without the tenant annotation: a clear error naming the ServiceAccount and it.
    tokens.annotate("default/tenant", &[(AZURE_CLIENT_ID, "tenant-app")]);
    let mut obj = repo("b", &format!("oci://{host}/team/app"), "azure");
    obj.spec.service_account_name = Some("tenant".into());
    let needles = [
        "serviceaccount 'default/tenant'",
        AZURE_TENANT_ID,
        "is missing",
    ];
    assert_condition(
        &reconcile(&mut obj, ctx).await,
        "Ready",
        "False",
        "AuthenticationFailed",
        &needles,
    );
}

/// `spec.insecure: true` (allowed with the object's own identity) still exchanges the
/// Entra token over verified HTTPS: the exchange fake only speaks TLS, so a plain-HTTP
/// exchange, or a fallback to one, never reaches it and the object would not be Ready.
#[tokio::test]
async fn the_acr_exchange_is_https_even_for_an_insecure_object() {
    let host = "myreg.azurecr.io";
    let tokens = tenant_tokens();
    let Setup { seen, ctx, .. } = &setup_with(&[host], Some(tokens)).await;
    let url = format!("oci://{host}/team/app");
    let mut obj = cloud_common::tenant_repo("app", &url, "azure", "tenant");
    obj.spec.insecure = true;
    assert_ready(&reconcile(&mut obj, ctx).await);
    let exchange = seen.exchange.lock().unwrap();
    assert_eq!(exchange.len(), 1);
    assert_eq!(exchange[0]["service"], host);
}
