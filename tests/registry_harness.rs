//! Checks the shared test harness itself: a real registry starts in each mode, the raw
//! uploader and skopeo push fixtures into it, and the access log is parsed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::{RegistryOpts, TestRegistry};

#[tokio::test]
async fn raw_uploader_and_skopeo_push_into_a_plain_registry() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let layer = support::tar_gz(&[("a.txt", b"hello")]);
    let pushed = reg
        .push_artifact(
            "app/config",
            "v1",
            &[(ocisource::domain::manifest::FLUX_CONTENT, layer.clone())],
            &[],
        )
        .await;
    let got = reg
        .raw_http()
        .get(format!(
            "{}/v2/app/config/blobs/{}",
            reg.base_url(),
            pushed.layer_digests[0]
        ))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(got.as_ref(), layer.as_slice());

    let layout = tempfile::tempdir().unwrap();
    let d = support::write_oci_layout(
        layout.path(),
        "v2",
        ("application/vnd.oci.image.config.v1+json", b"{}"),
        &[("application/vnd.oci.image.layer.v1.tar+gzip", &layer)],
        &[],
    );
    reg.skopeo_copy(layout.path(), "v2", "app/other", "v2");
    let head = reg
        .raw_http()
        .head(format!("{}/v2/app/other/manifests/v2", reg.base_url()))
        .header("accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(head.headers()["docker-content-digest"].to_str().unwrap(), d);

    let log = reg.request_log();
    assert!(log
        .iter()
        .any(|r| r.method == "PUT" && r.path == "/v2/app/config/manifests/v1" && r.status == 201));
    assert!(log
        .iter()
        .any(|r| r.method == "HEAD" && r.path == "/v2/app/other/manifests/v2"));
}

#[tokio::test]
async fn mtls_registry_with_basic_auth_accepts_the_harness_client_and_skopeo() {
    let reg = TestRegistry::start(
        RegistryOpts::plain()
            .with_mtls()
            .with_basic_auth("alice", "s3cret"),
    );
    assert!(reg.base_url().starts_with("https://"));
    reg.push_artifact(
        "secure/app",
        "v1",
        &[("application/octet-stream", b"x".to_vec())],
        &[],
    )
    .await;
    let layout = tempfile::tempdir().unwrap();
    support::write_oci_layout(
        layout.path(),
        "t",
        ("application/vnd.oci.image.config.v1+json", b"{}"),
        &[],
        &[],
    );
    reg.skopeo_copy(layout.path(), "t", "secure/other", "t");
    // Without a client certificate, the TLS handshake is refused.
    let no_cert = reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(&reg.ca_pem().unwrap()).unwrap())
        .build()
        .unwrap();
    assert!(no_cert
        .get(format!("{}/v2/", reg.base_url()))
        .send()
        .await
        .is_err());
}
