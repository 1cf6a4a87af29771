//! End to end through the one-shot mode (`ocisource reconcile -f`) against the real
//! registry, logging in: secretRef basic auth, where a wrong password fails and keeps the
//! last artifact, and TLS via certSecretRef.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use base64::Engine as _;
use support::oneshot_parity::{condition, object, reconcile, status, write};
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
