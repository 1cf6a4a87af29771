//! End to end through the one-shot mode (`ocisource reconcile -f`) against the real
//! registry, logging in: secretRef basic auth, where a wrong password fails and keeps the
//! last artifact, and TLS via certSecretRef; and tenants whose own proxy (refusing
//! CONNECT, or intercepting TLS) must not change the scheme another tenant speaks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashMap;

use base64::Engine as _;
use support::oneshot_parity::{condition, object, reconcile, status, write};
use support::proxy::{ConnectProxy, Mode, Seen};
use support::{tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn docker_config_secret(name: &str, host: &str, user: &str, pass: &str) -> String {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    let json = format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: team\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{json}'\n"
    )
}

#[tokio::test]
async fn secret_ref_basic_auth_and_a_wrong_password_keeps_the_last_artifact() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("alice", "s3cret"));
    reg.push_artifact(
        "team/private",
        "v1",
        &[(LAYER, tar_gz(&[("x", b"1")]))],
        &[],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let url = format!("oci://{}/team/private", reg.host());
    let obj = write(
        dir.path(),
        "o.yaml",
        &object(
            "private",
            &url,
            "    tag: v1",
            "  insecure: true\n  secretRef:\n    name: creds",
        ),
    );
    let good = write(
        dir.path(),
        "good.yaml",
        &docker_config_secret("creds", &reg.host(), "alice", "s3cret"),
    );
    let run = reconcile(&[&obj, &good], &storage, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let first = status(&run);

    // Without credentials: AuthenticationFailed, Ready False, last artifact kept and on disk.
    let bad = write(
        dir.path(),
        "bad.yaml",
        &docker_config_secret("creds", &reg.host(), "alice", "wrong"),
    );
    let run = reconcile(&[&obj, &bad], &storage, &[]);
    assert_eq!(run.code, 1, "not Ready must exit 1");
    assert!(
        !run.stdout.contains("wrong") && !run.stderr.contains("wrong"),
        "the password leaked"
    );
    let st = status(&run);
    let ready = condition(&st, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "AuthenticationFailed");
    assert_eq!(
        condition(&st, "FetchFailed")["reason"],
        "AuthenticationFailed"
    );
    assert_eq!(st["artifact"], first["artifact"]);
    assert!(storage
        .join(st["artifact"]["path"].as_str().unwrap())
        .exists());
}

#[tokio::test]
async fn tls_through_cert_secret_ref() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_tls());
    reg.push_artifact("team/tls", "v1", &[(LAYER, tar_gz(&[("t", b"tls")]))], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let url = format!("oci://{}/team/tls", reg.host());
    let ca = base64::engine::general_purpose::STANDARD.encode(reg.ca_pem().unwrap());
    let obj = write(
        dir.path(),
        "o.yaml",
        &object("tls", &url, "    tag: v1", "  certSecretRef:\n    name: ca"),
    );
    let secret = write(dir.path(), "ca.yaml", &format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: ca\n  namespace: team\ndata:\n  ca.crt: {ca}\n"));
    let run = reconcile(&[&obj, &secret], &storage, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(condition(&status(&run), "Ready")["status"], "True");

    // Without the CA the registry's certificate is not trusted: a clear failure.
    let obj2 = write(
        dir.path(),
        "o2.yaml",
        &object("tls-noca", &url, "    tag: v1", ""),
    );
    let run = reconcile(&[&obj2], &storage, &[]);
    assert_eq!(run.code, 1);
    let st = status(&run);
    assert_eq!(condition(&st, "Ready")["reason"], "OCIArtifactPullFailed");
}

/// The one-shot run's objects' statuses, by name.
fn statuses(run: &support::oneshot_parity::Run) -> HashMap<String, serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", run.stdout, run.stderr));
    let items = v["items"].as_array().unwrap();
    items
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().into(),
                o["status"].clone(),
            )
        })
        .collect()
}

/// Tenant `a` (`insecure: true`, its own proxy in `mode`) reconciled first, then tenant
/// `b` with `b_extra` spec lines, both for `team/app:v1` of `reg`, in one process (one
/// connector). Returns the run, the statuses and the proxy.
async fn a_proxied_tenant_then_b(
    reg: &TestRegistry,
    mode: Mode,
    b_extra: &str,
) -> (
    support::oneshot_parity::Run,
    HashMap<String, serde_json::Value>,
    ConnectProxy,
) {
    let proxy = ConnectProxy::start_with(mode).await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("oci://{}/team/app", reg.host());
    let ca = reg.ca_pem().map_or(String::new(), |pem| {
        base64::engine::general_purpose::STANDARD.encode(pem)
    });
    let docs = [
        object(
            "tenant-a",
            &url,
            "    tag: v1",
            "  insecure: true\n  proxySecretRef:\n    name: a-proxy",
        ),
        object("tenant-b", &url, "    tag: v1", b_extra),
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a-proxy\n  namespace: team\nstringData:\n  address: {}\n",
            proxy.address
        ),
        format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: b-ca\n  namespace: team\ndata:\n  ca.crt: '{ca}'\n"),
    ];
    let file = write(dir.path(), "tenants.yaml", &docs.join("---\n"));
    let run = reconcile(&[&file], &dir.path().join("s"), &[]);
    let st = statuses(&run);
    (run, st, proxy)
}

/// Issue 31 finding 1: one object's proxy must not decide another object's scheme. Tenant
/// A's proxy refuses CONNECT and answers plain HTTP itself; A's `insecure` lets its
/// session fall back to plain HTTP, which "works". Tenant B (no `insecure`, its own CA, no
/// proxy) must still speak HTTPS to the TLS-only registry and store what IT answers.
// Multi-threaded: the proxy runs while the test waits on the one-shot process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_refusing_proxy_does_not_send_another_tenant_to_plain_http() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_tls());
    let pushed = reg
        .push_artifact("team/app", "v1", &[(LAYER, tar_gz(&[("t", b"tls")]))], &[])
        .await;
    let before = reg.request_log().len();
    let b = "  certSecretRef:\n    name: b-ca";
    let (run, st, proxy) = a_proxied_tenant_then_b(&reg, Mode::Refuse, b).await;

    // A's session tried HTTPS through its proxy, was refused, and was answered over plain HTTP.
    let seen = proxy.seen();
    assert_eq!(seen.first(), Some(&Seen::Connect(reg.host())), "{seen:?}");
    assert!(
        seen.iter().any(|s| matches!(s, Seen::Plain(l) if l.contains(&format!("http://{}/v2/team/app/", reg.host())))),
        "A's session did not fall back to plain HTTP: {seen:?}"
    );
    assert_eq!(condition(&st["tenant-a"], "Ready")["status"], "False");

    let ready = condition(&st["tenant-b"], "Ready");
    assert_eq!(ready["status"], "True", "{ready}\n{}", run.stderr);
    let revision = st["tenant-b"]["artifact"]["revision"].as_str().unwrap();
    assert_eq!(revision, format!("v1@{}", pushed.manifest_digest));
    // The TLS registry logs only requests that reached it over HTTPS: B's all did.
    let log = reg.request_log()[before..].to_vec();
    assert!(
        log.iter()
            .any(|r| r.path.contains("/manifests/") && r.status == 200)
            && log
                .iter()
                .any(|r| r.path.contains("/blobs/") && r.status == 200),
        "{log:?}"
    );
    assert!(
        !proxy
            .seen()
            .iter()
            .any(|s| matches!(s, Seen::Plain(l) if l.contains("/blobs/"))),
        "nothing but A's session went to the proxy"
    );
}

/// The reverse lesson: tenant A's proxy intercepts TLS (A's `insecure` accepts its
/// certificate), so A's session learns "this host answers HTTPS". Tenant B (no
/// `insecure`, no proxy) reaches a local plain-HTTP registry, where go-containerregistry
/// and ocisource fall back to plain HTTP after HTTPS fails: A's lesson must not take
/// that fallback away from B.
// Multi-threaded: the proxy runs while the test waits on the one-shot process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_intercepting_proxy_does_not_take_another_tenants_fallback() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let pushed = reg
        .push_artifact(
            "team/app",
            "v1",
            &[(LAYER, tar_gz(&[("p", b"plain")]))],
            &[],
        )
        .await;
    let (run, st, proxy) = a_proxied_tenant_then_b(&reg, Mode::Intercept, "").await;

    let seen = proxy.seen();
    assert!(
        seen.iter()
            .any(|s| matches!(s, Seen::Intercepted(l) if l.contains("/v2/team/app/manifests/v1"))),
        "A's requests were not intercepted: {seen:?}"
    );
    assert_eq!(condition(&st["tenant-a"], "Ready")["status"], "False");
    let ready = condition(&st["tenant-b"], "Ready");
    assert_eq!(ready["status"], "True", "{ready}\n{}", run.stderr);
    let revision = st["tenant-b"]["artifact"]["revision"].as_str().unwrap();
    assert_eq!(revision, format!("v1@{}", pushed.manifest_digest));
}
