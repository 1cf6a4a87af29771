//! Flux parity against the real registry (issue 14, items 1 and 9):
//! - `insecure: true` is HTTPS without certificate verification when no CA or client
//!   certificate is given, and a self-signed registry then works; without it the failure
//!   names the certificate problem and both ways out; a CA keeps verification on.
//! - a plain-HTTP registry on 127.0.0.1 works without `insecure` (go-containerregistry's
//!   fallback for loopback and private hosts), and the host is remembered.
//! - `docker.io/x` is pulled as `index.docker.io/library/x`, and its credentials are the
//!   Docker Hub ones, also from a legacy `.dockercfg` Secret. Docker Hub is played by a
//!   local TLS registry behind a CONNECT proxy, whose log shows the host asked for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use base64::Engine as _;
use ocisource::domain::reference::RepositoryUrl;
use ocisource::ports::{ProxySettings, RegistryConnector, RegistryErrorKind, RegistryOptions};
use ocisource::registry::docker_config::DockerConfig;
use ocisource::registry::{HttpConnector, RetryPolicy};
use support::oneshot_parity::{condition, object, reconcile, status, write};
use support::proxy::ConnectProxy;
use support::{tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn connector() -> HttpConnector {
    HttpConnector::new().with_retry(RetryPolicy::with_base(std::time::Duration::from_millis(5)))
}

fn insecure() -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        ..Default::default()
    }
}

async fn push(reg: &TestRegistry, repo: &str) -> String {
    reg.push_artifact(
        repo,
        "v1",
        &[(LAYER, tar_gz(&[("a.yaml", b"a: 1\n")]))],
        &[],
    )
    .await
    .manifest_digest
}

/// "Docker Hub": a TLS registry with a login, holding `repo:v1`, reached through a
/// CONNECT proxy that records which host the client asked for.
async fn docker_hub(repo: &str) -> (TestRegistry, ConnectProxy, String) {
    let reg = TestRegistry::start(
        RegistryOpts::plain()
            .with_tls()
            .with_basic_auth("hubuser", "hubpass"),
    );
    let digest = push(&reg, repo).await;
    let proxy = ConnectProxy::start(reg.host()).await;
    (reg, proxy, digest)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn insecure_skips_verification_of_a_self_signed_registry_and_stays_on_https() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_tls());
    let digest = push(&reg, "team/app").await;
    let r = connector()
        .connect(&reg.host(), "team/app", &insecure())
        .unwrap();
    assert_eq!(r.manifest_digest("v1").await.unwrap().to_string(), digest);
    let m = r.manifest("v1").await.unwrap();
    assert_eq!(m.digest.to_string(), digest);
}

#[tokio::test]
async fn without_insecure_a_self_signed_registry_fails_naming_both_ways_out() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_tls());
    push(&reg, "team/app").await;
    let r = connector()
        .connect(&reg.host(), "team/app", &RegistryOptions::default())
        .unwrap();
    let err = r.manifest_digest("v1").await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Tls);
    for needle in [
        "certificate",
        "certSecretRef ca.crt",
        "insecure: true",
        // 127.0.0.1 may fall back to plain HTTP, which a TLS-only registry refuses.
        "plain HTTP fallback failed too: the registry answered 400",
    ] {
        assert!(err.message.contains(needle), "{needle}: {}", err.message);
    }
}

#[tokio::test]
async fn insecure_with_a_ca_keeps_verification_on() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_tls());
    push(&reg, "team/app").await;
    let other = tempfile::tempdir().unwrap();
    support::pki::make_pki(other.path());
    let wrong_ca = RegistryOptions {
        ca_pem: Some(std::fs::read(other.path().join("ca.pem")).unwrap()),
        ..insecure()
    };
    let r = connector()
        .connect(&reg.host(), "team/app", &wrong_ca)
        .unwrap();
    let err = r.manifest_digest("v1").await.unwrap_err();
    assert!(err.message.contains("certificate"), "{}", err.message);
}

#[tokio::test]
async fn a_plain_http_registry_on_loopback_works_without_insecure_and_is_remembered() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let digest = push(&reg, "team/app").await;
    let conn = connector();
    let r = conn
        .connect(&reg.host(), "team/app", &RegistryOptions::default())
        .unwrap();
    assert_eq!(r.manifest_digest("v1").await.unwrap().to_string(), digest);
    assert_eq!(conn.request_count(), 2, "one HTTPS try, then plain HTTP");
    // A later session of the same connector goes to plain HTTP at once.
    let again = conn
        .connect(&reg.host(), "team/app", &RegistryOptions::default())
        .unwrap();
    let err = again.manifest_digest("nope").await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::NotFound);
    assert!(
        err.message
            .contains(&format!("http://{}/v2/team/app/manifests/nope", reg.host())),
        "names the URL actually requested: {}",
        err.message
    );
    // The HEAD, then a GET for the registry's error body (as go-containerregistry, whose
    // words drop-in mode quotes), both plain HTTP: no HTTPS retry.
    assert_eq!(conn.request_count(), 4, "HEAD and GET, no HTTPS retry");
    assert_eq!(
        err.registry_text.as_deref(),
        Some(
            format!(
                "GET http://{}/v2/team/app/manifests/nope: MANIFEST_UNKNOWN: manifest unknown; map[Tag:nope]",
                reg.host()
            )
            .as_str()
        )
    );
}

#[tokio::test]
async fn docker_io_is_index_docker_io_library_for_pulls_and_credentials() {
    let (reg, proxy, digest) = docker_hub("library/app").await;

    let url = RepositoryUrl::parse("oci://docker.io/app").unwrap();
    assert_eq!(
        (url.host.as_str(), url.repository.as_str()),
        ("index.docker.io", "library/app")
    );
    // The Docker CLI's key for Docker Hub, in a legacy .dockercfg.
    let legacy = format!(
        r#"{{"https://index.docker.io/v1/":{{"auth":"{}"}}}}"#,
        b64(b"hubuser:hubpass")
    );
    let credentials = DockerConfig::parse_legacy(legacy.as_bytes())
        .unwrap()
        .credentials_for(&url.host)
        .unwrap();
    assert!(credentials.is_some(), "Docker Hub credentials found");
    let options = RegistryOptions {
        credentials,
        ca_pem: reg.ca_pem(),
        proxy: Some(ProxySettings {
            address: proxy.address.clone(),
            credentials: None,
        }),
        ..Default::default()
    };
    let r = connector()
        .connect(&url.host, &url.repository, &options)
        .unwrap();
    assert_eq!(r.manifest_digest("v1").await.unwrap().to_string(), digest);
    assert!(
        proxy.targets().iter().all(|t| t == "index.docker.io:443"),
        "{:?}",
        proxy.targets()
    );
    assert!(reg.request_log().iter().any(|q| q.method == "HEAD"
        && q.path == "/v2/library/app/manifests/v1"
        && q.status == 200));
}

#[tokio::test]
async fn reconcile_pulls_docker_io_with_a_legacy_dockercfg_secret() {
    let (reg, proxy, digest) = docker_hub("org/app").await;
    let dir = tempfile::tempdir().unwrap();
    let obj = write(
        dir.path(),
        "o.yaml",
        &object(
            "hub",
            "oci://docker.io/org/app",
            "    tag: v1",
            "  secretRef:\n    name: hub\n  certSecretRef:\n    name: ca\n  proxySecretRef:\n    name: proxy",
        ),
    );
    let dockercfg = format!(
        r#"{{"docker.io":{{"auth":"{}","email":"x@example.com"}}}}"#,
        b64(b"hubuser:hubpass")
    );
    let secrets = write(
        dir.path(),
        "s.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hub\n  namespace: team\ntype: kubernetes.io/dockercfg\ndata:\n  .dockercfg: {}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata:\n  name: ca\n  namespace: team\ndata:\n  ca.crt: {}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata:\n  name: proxy\n  namespace: team\nstringData:\n  address: {}\n",
            b64(dockercfg.as_bytes()),
            b64(&reg.ca_pem().unwrap()),
            proxy.address
        ),
    );
    // The proxy runs on this test's runtime: run the process off it.
    let storage = dir.path().join("s");
    let run = tokio::task::spawn_blocking(move || reconcile(&[&obj, &secrets], &storage, &[]))
        .await
        .unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let st = status(&run);
    assert_eq!(condition(&st, "Ready")["status"], "True", "{st:#}");
    assert_eq!(st["artifact"]["revision"], format!("v1@{digest}"));
    assert_eq!(
        proxy.targets().first().map(String::as_str),
        Some("index.docker.io:443")
    );
}

#[tokio::test]
async fn reconcile_with_insecure_reaches_a_self_signed_registry_and_warns() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_tls());
    let digest = push(&reg, "team/app").await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("oci://{}/team/app", reg.host());
    let obj = write(
        dir.path(),
        "o.yaml",
        &object("tls", &url, "    tag: v1", "  insecure: true"),
    );
    let run = reconcile(&[&obj], &dir.path().join("s"), &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let st = status(&run);
    assert_eq!(condition(&st, "Ready")["status"], "True");
    assert_eq!(st["artifact"]["revision"], format!("v1@{digest}"));
    assert!(
        run.stderr
            .contains("TLS certificate verification is skipped"),
        "a warning says verification is off: {}",
        run.stderr
    );
}
