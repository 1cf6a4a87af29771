//! cosign v3 Sigstore bundles found through the referrers API of a real registry, and
//! through the referrers tag schema of one without that API.
//!
//! - The registry that serves the API is the Go harness `hack/referrers-registry.sh`
//!   builds (go-containerregistry's registry; it ignores the `artifactType` filter, so
//!   the client's own filtering is exercised). A bundle referrer is attached with plain
//!   HTTP PUTs (cosign v3's manifest shape: `artifactType` bundle v0.3, empty config, the
//!   bundle as the one layer, `subject` the image) and NO `sha256-<hex>` tag: only the
//!   referrers API can find it, so `ocisource verify` fails if the API call is removed.
//! - Debian's docker-registry (distribution 2.8) has no referrers API: the same bundle
//!   under the fallback tag is found after its 404.
//!
//! The bundle is the third-party sigstore-conformance vector `managed-key-happy-path`
//! (a message signature over `a.txt`), as in `verify_discovery.rs`: its subject digest is
//! fixed, so `a.txt` itself is pushed as the "image" manifest body (the referrers
//! registry stores any bytes), or, for docker-registry, which validates manifests, the
//! library verifies that digest directly. Skips when the vectors or the referrers
//! registry are absent, unless `OCISOURCE_REQUIRE_CLUSTER=1`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)] // only the openssl key pair is used here
#[path = "e2e_verify/cosign.rs"]
mod cosign;
mod support;
mod verify_common;

use std::path::PathBuf;

use ocisource::domain::digest::Digest;
use ocisource::domain::verification::{TrustedKey, VerifyPolicy};
use ocisource::ports::SignatureVerifier;
use ocisource::ports::{Referrers, RegistryConnector, RegistryOptions};
use ocisource::registry::HttpConnector;
use ocisource::verify::CosignVerifier;
use serde_json::json;
use support::registry::referrers_registry_bin;
use support::{sha256, RegistryOpts, TestRegistry};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const EMPTY: &str = "application/vnd.oci.empty.v1+json";
const BUNDLE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
const SBOM: &str = "application/spdx+json";

/// The conformance case: the artifact (`a.txt`), its bundle and the signer's key file.
struct Case {
    artifact: Vec<u8>,
    bundle: Vec<u8>,
    key: PathBuf,
}

fn case() -> Option<Case> {
    let vectors = verify_common::vectors_dir()?;
    let dir = vectors.join("conformance/managed-key-happy-path");
    Some(Case {
        artifact: std::fs::read(vectors.join("conformance/a.txt")).unwrap(),
        bundle: std::fs::read(dir.join("bundle.sigstore.json")).unwrap(),
        key: dir.join("key.pub"),
    })
}

/// Attaches a referrer of `subject` (`size` bytes) with artifact type `artifact_type`
/// and one layer `(media type, bytes)`, cosign v3's shape, pushed by digest; its
/// index descriptor.
async fn attach(
    reg: &TestRegistry,
    subject: &str,
    size: usize,
    artifact_type: &str,
    layer: (&str, &[u8]),
) -> serde_json::Value {
    let config = reg.push_blob("app", b"{}").await;
    let blob = reg.push_blob("app", layer.1).await;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": {"mediaType": EMPTY, "digest": config, "size": 2},
        "layers": [{"mediaType": layer.0, "digest": blob, "size": layer.1.len()}],
        "subject": {"mediaType": OCI_MANIFEST, "digest": subject, "size": size},
        "annotations": {"dev.sigstore.bundle.content": "message-signature"},
    })
    .to_string();
    let digest = sha256(manifest.as_bytes());
    reg.put_manifest("app", &digest, OCI_MANIFEST, manifest.as_bytes())
        .await;
    json!({"mediaType": OCI_MANIFEST, "digest": digest, "size": manifest.len(), "artifactType": artifact_type})
}

fn session(reg: &TestRegistry) -> std::sync::Arc<dyn ocisource::ports::Registry> {
    let options = RegistryOptions {
        plain_http: true,
        ..RegistryOptions::default()
    };
    HttpConnector::new()
        .connect(&reg.host(), "app", &options)
        .unwrap()
}

fn verify_cli(reg: &TestRegistry, digest: &str, key: &std::path::Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ocisource"))
        .args(["verify", &format!("oci://{}/app@{digest}", reg.host())])
        .args(["--key", key.to_str().unwrap(), "--plain-http"])
        .env_remove("OCISOURCE_CREDS")
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_bundle_attached_only_as_a_referrer_is_found_through_the_api() {
    let Some(bin) = referrers_registry_bin() else {
        return;
    };
    let Some(case) = case() else { return };
    let reg = TestRegistry::start_referrers(&bin);
    // The "image": a.txt's bytes as a manifest body, so its digest is the bundle's subject.
    let image = reg
        .put_manifest("app", &sha256(&case.artifact), OCI_MANIFEST, &case.artifact)
        .await;
    let size = case.artifact.len();
    let sig = attach(&reg, &image, size, BUNDLE, (BUNDLE, &case.bundle)).await;
    // Another referrer, not a bundle: the registry lists it whatever the filter says.
    let sbom = attach(
        &reg,
        &image,
        size,
        SBOM,
        (SBOM, b"{\"spdxVersion\":\"SPDX-2.3\"}"),
    )
    .await;

    // No cosign fallback tag exists: the tag schema cannot be what finds the bundle.
    let tag = format!("{}/v2/app/manifests/sha256-{}", reg.base_url(), &image[7..]);
    let fallback = reg.raw_http().get(&tag).send().await.unwrap();
    assert_eq!(fallback.status(), 404, "{tag}");

    // The client: all referrers without a filter; only the bundle with it, filtered
    // here because the registry ignores the filter.
    let client = session(&reg);
    let digest: Digest = image.parse().unwrap();
    let names = |r: Referrers| match r {
        Referrers::Listed(l) => l
            .into_iter()
            .map(|d| d.digest.to_string())
            .collect::<Vec<_>>(),
        Referrers::Unsupported => panic!("the registry serves the referrers API"),
    };
    let mut all = names(client.referrers(&digest, None).await.unwrap());
    all.sort();
    let mut want = vec![
        sig["digest"].as_str().unwrap().to_string(),
        sbom["digest"].as_str().unwrap().to_string(),
    ];
    want.sort();
    assert_eq!(all, want);
    let bundles = names(client.referrers(&digest, Some(BUNDLE)).await.unwrap());
    assert_eq!(bundles, [sig["digest"].as_str().unwrap()]);

    // `ocisource verify` finds the bundle and checks it against the signer's key...
    let out = verify_cli(&reg, &image, &case.key);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "verify failed:\n{stdout}\n{stderr}\nregistry log:\n{}",
        reg.server_log()
    );
    assert!(stdout.contains("cosign v3 key"), "{stdout}\n{stderr}");
    assert!(
        reg.server_log()
            .contains(&format!("GET /v2/app/referrers/{image}?artifactType=")),
        "{}",
        reg.server_log()
    );
    // ...and refuses it for another key (exit 3: not verified).
    let dir = tempfile::tempdir().unwrap();
    let other = cosign::KeyPair::generate(dir.path(), "other");
    let out = verify_cli(&reg, &image, &other.public);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn without_the_api_the_fallback_tag_of_docker_registry_is_read() {
    let Some(case) = case() else { return };
    let reg = TestRegistry::start(RegistryOpts::plain());
    let image = sha256(&case.artifact);
    let sig = attach(
        &reg,
        &image,
        case.artifact.len(),
        BUNDLE,
        (BUNDLE, &case.bundle),
    )
    .await;
    // cosign's referrers tag schema: an index of the referrers under sha256-<hex>.
    let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [sig]}).to_string();
    let tag = format!("sha256-{}", &image[7..]);
    reg.put_manifest("app", &tag, OCI_INDEX, index.as_bytes())
        .await;

    let client = session(&reg);
    let digest: Digest = image.parse().unwrap();
    assert_eq!(
        client.referrers(&digest, Some(BUNDLE)).await.unwrap(),
        Referrers::Unsupported
    );
    let policy = VerifyPolicy::Keys(vec![TrustedKey {
        name: "key.pub".into(),
        pem: std::fs::read(&case.key).unwrap(),
    }]);
    let verified = CosignVerifier::new()
        .unwrap()
        .verify(client.as_ref(), "app", &digest, &policy)
        .await
        .unwrap();
    assert_eq!(verified.method, "cosign v3 key");
    // The API was asked first (404), then the tag.
    let log = reg.request_log();
    let api = log
        .iter()
        .position(|r| r.path.starts_with(&format!("/v2/app/referrers/{image}")) && r.status == 404);
    let fallback = log
        .iter()
        .position(|r| r.path == format!("/v2/app/manifests/{tag}") && r.status == 200);
    assert!(
        api.is_some() && fallback.is_some() && api < fallback,
        "{log:?}"
    );
}
