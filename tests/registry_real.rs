//! The registry adapter against a real registry (distribution 2.8 via the shared
//! harness): plain HTTP, basic auth, TLS with and without the CA, mTLS, HEAD digests,
//! size caps, 10,000-tag pagination and docker config credentials.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use futures::TryStreamExt;
use ocisource::domain::digest::Digest;
use ocisource::domain::manifest::{Descriptor, FLUX_CONTENT, OCI_MANIFEST};
use ocisource::domain::secret::{Credentials, Redacted};
use ocisource::ports::{ClientIdentity, RegistryConnector, RegistryErrorKind, RegistryOptions};
use ocisource::registry::docker_config::DockerConfig;
use ocisource::registry::{HttpConnector, RetryPolicy};
use support::{RegistryOpts, TestRegistry};

fn connector() -> HttpConnector {
    HttpConnector::new().with_retry(RetryPolicy::with_base(std::time::Duration::from_millis(5)))
}

fn plain() -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        ..Default::default()
    }
}

fn creds(user: &str, pass: &str) -> Option<Credentials> {
    Some(Credentials {
        username: user.into(),
        password: Redacted::new(pass.into()),
    })
}

fn desc(digest: &str, size: usize) -> Descriptor {
    Descriptor {
        media_type: FLUX_CONTENT.into(),
        digest: digest.parse().unwrap(),
        size: size as u64,
        annotations: Default::default(),
        platform: None,
        artifact_type: None,
    }
}

#[tokio::test]
async fn plain_http_resolves_with_head_fetches_manifest_and_streams_blobs() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let layer = support::tar_gz(&[("deploy/app.yaml", b"kind: ConfigMap\n")]);
    let pushed = reg
        .push_artifact("team/app", "v1.0.0", &[(FLUX_CONTENT, layer.clone())], &[])
        .await;
    let conn = connector();
    let r = conn.connect(&reg.host(), "team/app", &plain()).unwrap();

    let before = reg.request_log().len();
    let digest = r.manifest_digest("v1.0.0").await.unwrap();
    assert_eq!(digest.to_string(), pushed.manifest_digest);
    let log = reg.request_log();
    assert!(log[before..]
        .iter()
        .any(|q| q.method == "HEAD" && q.path == "/v2/team/app/manifests/v1.0.0"));
    assert!(
        !log[before..].iter().any(|q| q.method == "GET"),
        "resolving a tag must not GET: {log:?}"
    );

    let m = r.manifest(&pushed.manifest_digest).await.unwrap();
    assert_eq!(m.body.as_ref(), pushed.manifest.as_slice());
    assert_eq!(m.media_type, OCI_MANIFEST);
    assert_eq!(m.digest, digest);

    let stream = r
        .blob(&desc(&pushed.layer_digests[0], layer.len()))
        .await
        .unwrap();
    let got: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    assert_eq!(got.concat(), layer);
    let config = r
        .blob_bytes(&desc(&pushed.config_digest, 2), 1024)
        .await
        .unwrap();
    assert_eq!(config.as_ref(), b"{}");
    let too_small = r
        .blob_bytes(&desc(&pushed.layer_digests[0], layer.len()), 10)
        .await
        .unwrap_err();
    assert_eq!(too_small.kind, RegistryErrorKind::Integrity);

    assert_eq!(r.tags().await.unwrap(), vec!["v1.0.0".to_string()]);
    let missing = r.manifest_digest("v9").await.unwrap_err();
    assert_eq!(missing.kind, RegistryErrorKind::NotFound);
    assert!(
        missing
            .message
            .contains(&format!("{}/v2/team/app/manifests/v9", reg.host())),
        "{}",
        missing.message
    );
    assert_eq!(
        conn.request_count(),
        8,
        "one HTTPS try (Flux's insecure starts with HTTPS; the host is then remembered as plain HTTP), then one request per operation, two for the missing tag (HEAD, then GET for the registry's error body)"
    );
}

#[tokio::test]
async fn a_blob_whose_bytes_do_not_match_the_descriptor_digest_fails_integrity() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let d = reg.push_blob("x/y", b"real bytes").await;
    let r = connector().connect(&reg.host(), "x/y", &plain()).unwrap();
    // Same size, other digest: the registry serves by digest, so ask for the right blob
    // with a descriptor claiming a different size.
    let err = r.blob_bytes(&desc(&d, 4), 100).await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Integrity, "{}", err.message);
}

#[tokio::test]
async fn manifest_bodies_over_the_cap_are_refused() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    reg.push_artifact(
        "cap/app",
        "v1",
        &[(FLUX_CONTENT, b"l".to_vec())],
        &[("k", &"v".repeat(500))],
    )
    .await;
    let conn = connector().with_max_manifest_bytes(256);
    let r = conn.connect(&reg.host(), "cap/app", &plain()).unwrap();
    let err = r.manifest("v1").await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Integrity);
    assert!(
        err.message.contains("limit of 256 bytes"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn basic_auth_accepts_the_right_password_and_names_credentials_on_the_wrong_one() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("alice", "correct-horse"));
    let pushed = reg
        .push_artifact("private/app", "v1", &[(FLUX_CONTENT, b"x".to_vec())], &[])
        .await;
    let conn = connector();
    let good = RegistryOptions {
        credentials: creds("alice", "correct-horse"),
        ..plain()
    };
    let r = conn.connect(&reg.host(), "private/app", &good).unwrap();
    assert_eq!(
        r.manifest_digest("v1").await.unwrap().to_string(),
        pushed.manifest_digest
    );

    let bad = RegistryOptions {
        credentials: creds("alice", "wrong-battery"),
        ..plain()
    };
    let err = conn
        .connect(&reg.host(), "private/app", &bad)
        .unwrap()
        .manifest("v1")
        .await
        .unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Unauthorized);
    assert!(
        err.message.contains("check the credentials"),
        "{}",
        err.message
    );
    assert!(
        !err.message.contains("wrong-battery") && !format!("{err:?}").contains("wrong-battery")
    );

    let anon = conn
        .connect(&reg.host(), "private/app", &plain())
        .unwrap()
        .tags()
        .await
        .unwrap_err();
    assert_eq!(anon.kind, RegistryErrorKind::Unauthorized);
}

#[tokio::test]
async fn tls_works_with_the_ca_and_fails_clearly_without_it() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_tls());
    let pushed = reg
        .push_artifact("tls/app", "v1", &[(FLUX_CONTENT, b"x".to_vec())], &[])
        .await;
    let conn = connector();
    let with_ca = RegistryOptions {
        ca_pem: reg.ca_pem(),
        ..Default::default()
    };
    let r = conn.connect(&reg.host(), "tls/app", &with_ca).unwrap();
    assert_eq!(
        r.manifest_digest("v1").await.unwrap().to_string(),
        pushed.manifest_digest
    );

    let r = conn
        .connect(&reg.host(), "tls/app", &RegistryOptions::default())
        .unwrap();
    let err = r.manifest_digest("v1").await.unwrap_err();
    assert_eq!(err.kind, RegistryErrorKind::Tls);
    assert!(err.message.contains("certificate"), "{}", err.message);
    assert!(
        err.message
            .contains(&format!("https://{}/v2/tls/app/manifests/v1", reg.host())),
        "{}",
        err.message
    );

    let bad = RegistryOptions {
        ca_pem: Some(b"not a pem".to_vec()),
        ..Default::default()
    };
    assert_eq!(
        conn.connect(&reg.host(), "tls/app", &bad)
            .err()
            .unwrap()
            .kind,
        RegistryErrorKind::Config
    );
}

#[tokio::test]
async fn mtls_needs_the_client_certificate() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_mtls());
    let pushed = reg
        .push_artifact("mtls/app", "v1", &[(FLUX_CONTENT, b"x".to_vec())], &[])
        .await;
    let (cert, key) = reg.client_cert_and_key().unwrap();
    let conn = connector();
    let opts = RegistryOptions {
        ca_pem: reg.ca_pem(),
        client_identity: Some(ClientIdentity {
            cert_pem: cert,
            key_pem: Redacted::new(key),
        }),
        ..Default::default()
    };
    let r = conn.connect(&reg.host(), "mtls/app", &opts).unwrap();
    assert_eq!(
        r.manifest_digest("v1").await.unwrap().to_string(),
        pushed.manifest_digest
    );
    let no_cert = RegistryOptions {
        ca_pem: reg.ca_pem(),
        ..Default::default()
    };
    let err = conn
        .connect(&reg.host(), "mtls/app", &no_cert)
        .unwrap()
        .manifest_digest("v1")
        .await
        .unwrap_err();
    // TLS 1.3: the registry refuses the missing certificate after the client's side of the
    // handshake is done; the client reads its alert (Tls) unless the connection is
    // closed before the alert is read (Connect: "connection closed").
    assert!(
        matches!(
            err.kind,
            RegistryErrorKind::Tls | RegistryErrorKind::Connect
        ),
        "{:?}: {}",
        err.kind,
        err.message
    );
}

#[tokio::test]
async fn ten_thousand_tags_are_listed_across_pages() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let pushed = reg
        .push_artifact("many/tags", "seed", &[(FLUX_CONTENT, b"x".to_vec())], &[])
        .await;
    // 9,999 more tags on the same manifest, written the way the registry's filesystem
    // driver stores a tag (PUTting them one by one takes minutes on two cores); the
    // registry itself then lists and resolves them.
    let tags_dir = reg
        .storage_root()
        .join("docker/registry/v2/repositories/many/tags/_manifests/tags");
    let hex = &pushed.manifest_digest["sha256:".len()..];
    for i in 0..9_999 {
        let tag = tags_dir.join(format!("v0.0.{i}"));
        std::fs::create_dir_all(tag.join("current")).unwrap();
        std::fs::write(tag.join("current/link"), &pushed.manifest_digest).unwrap();
        let index = tag.join("index/sha256").join(hex);
        std::fs::create_dir_all(&index).unwrap();
        std::fs::write(index.join("link"), &pushed.manifest_digest).unwrap();
    }
    let conn = connector();
    let r = conn.connect(&reg.host(), "many/tags", &plain()).unwrap();
    let mut got = r.tags().await.unwrap();
    assert_eq!(got.len(), 10_000);
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 10_000);
    // distribution 2.8 answers `?n=1000` with every tag at once; `Link` pagination is
    // exercised against the fault server (`registry_faults.rs`).
    assert!(reg
        .request_log()
        .iter()
        .any(|q| q.path == "/v2/many/tags/tags/list?n=1000"));
    // A semver ref over all of them resolves to the highest, with one HEAD.
    let url = ocisource::domain::reference::RepositoryUrl::parse(&format!(
        "oci://{}/many/tags",
        reg.host()
    ))
    .unwrap();
    let range = ocisource::domain::reference::RefSpec::from_fields(None, Some("0.0.x"), None, None)
        .unwrap();
    let resolved = ocisource::pipeline::resolve(r.as_ref(), &url, &range)
        .await
        .unwrap();
    assert_eq!(resolved.tag.as_deref(), Some("v0.0.9998"));
    assert_eq!(resolved.digest.to_string(), pushed.manifest_digest);
    let capped = connector()
        .with_max_tags(5_000)
        .connect(&reg.host(), "many/tags", &plain())
        .unwrap();
    match capped.tags().await {
        Err(e) => assert_eq!(e.kind, RegistryErrorKind::Integrity, "{}", e.message),
        Ok(t) => panic!("the tag cap was not applied: {} tags", t.len()),
    }
}

#[tokio::test]
async fn docker_config_credentials_log_in() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("carol", "from-config"));
    let pushed = reg
        .push_artifact("cfg/app", "v1", &[(FLUX_CONTENT, b"x".to_vec())], &[])
        .await;
    let json = format!(
        r#"{{"auths":{{"http://{}/v1/":{{"username":"carol","password":"from-config"}}}}}}"#,
        reg.host()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), json).unwrap();
    let cfg = DockerConfig::load(&dir.path().join("config.json")).unwrap();
    let c = cfg.credentials_for(&reg.host()).unwrap();
    assert!(c.is_some());
    let opts = RegistryOptions {
        credentials: c,
        ..plain()
    };
    let r = connector().connect(&reg.host(), "cfg/app", &opts).unwrap();
    let d: Digest = r.manifest_digest("v1").await.unwrap();
    assert_eq!(d.to_string(), pushed.manifest_digest);
}

#[tokio::test]
async fn push_helpers_upload_blobs_and_tag_manifests_readable_by_an_independent_client() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("pusher", "pw"));
    let conn = connector();
    let opts = RegistryOptions {
        credentials: creds("pusher", "pw"),
        ..plain()
    };
    let c = conn.client(&reg.host(), "pushed/app", &opts).unwrap();
    let layer = support::tar_gz(&[("a.txt", b"A")]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("layer.tgz");
    std::fs::write(&path, &layer).unwrap();
    let (ld, lsize) = c.push_blob_file(&path).await.unwrap();
    assert_eq!(ld.to_string(), support::sha256(&layer));
    assert!(c.blob_exists(&ld).await.unwrap());
    let cd = c.push_blob(bytes::Bytes::from_static(b"{}")).await.unwrap();
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.cncf.flux.config.v1+json","digest":"{cd}","size":2}},"layers":[{{"mediaType":"{FLUX_CONTENT}","digest":"{ld}","size":{lsize}}}]}}"#
    );
    let md = c
        .put_manifest("v1", OCI_MANIFEST, manifest.clone().into())
        .await
        .unwrap();
    let got = reg
        .raw_http()
        .get(format!("{}/v2/pushed/app/blobs/{ld}", reg.base_url()))
        .basic_auth("pusher", Some("pw"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(got.as_ref(), layer.as_slice());
    let head = reg
        .raw_http()
        .head(format!("{}/v2/pushed/app/manifests/v1", reg.base_url()))
        .header("accept", OCI_MANIFEST)
        .basic_auth("pusher", Some("pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        head.headers()["docker-content-digest"].to_str().unwrap(),
        md.to_string()
    );
    let before = reg
        .request_log()
        .iter()
        .filter(|q| q.method == "POST")
        .count();
    c.push_blob(bytes::Bytes::from_static(b"{}")).await.unwrap();
    let after = reg
        .request_log()
        .iter()
        .filter(|q| q.method == "POST")
        .count();
    assert_eq!(before, after, "an existing blob must not be uploaded again");
}
