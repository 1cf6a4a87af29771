//! cosign v2 signatures made without ocisource: keys and signatures come from the
//! `openssl` binary, the SimpleSigning payload is written here byte for byte as cosign
//! writes it, and the `.sig` image is uploaded with the harness's raw HTTP uploader
//! (`sha256-<hex>.sig` tag, one SimpleSigning layer annotated with the base64 DER
//! signature). Must not import ocisource: fixtures made by the code under test prove nothing.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;

pub use crate::support::pki::openssl;
use crate::support::{sha256, TestRegistry};

/// Media type of cosign's SimpleSigning layer.
pub const SIMPLESIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const ANN_SIGNATURE: &str = "dev.cosignproject.cosign/signature";
/// OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// An openssl ECDSA P-256 key pair: `<name>.pem` (PKCS#8 private) and `<name>.pub`.
pub struct KeyPair {
    /// Private key file.
    pub key: PathBuf,
    /// Public key file (PEM `PUBLIC KEY`).
    pub public: PathBuf,
}

impl KeyPair {
    /// `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` in `dir`.
    pub fn generate(dir: &Path, name: &str) -> Self {
        let key = dir.join(format!("{name}.pem"));
        let public = dir.join(format!("{name}.pub"));
        openssl(
            dir,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                key.to_str().unwrap(),
            ],
        );
        openssl(
            dir,
            &[
                "pkey",
                "-in",
                key.to_str().unwrap(),
                "-pubout",
                "-out",
                public.to_str().unwrap(),
            ],
        );
        Self { key, public }
    }

    /// The public key PEM text.
    pub fn public_pem(&self) -> String {
        std::fs::read_to_string(&self.public).unwrap()
    }

    /// `openssl dgst -sha256 -sign` over `data`: an ASN.1 DER ECDSA signature.
    pub fn sign(&self, data: &[u8]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("payload");
        let output = dir.path().join("sig.der");
        std::fs::write(&input, data).unwrap();
        openssl(
            dir.path(),
            &[
                "dgst",
                "-sha256",
                "-sign",
                self.key.to_str().unwrap(),
                "-out",
                output.to_str().unwrap(),
                input.to_str().unwrap(),
            ],
        );
        std::fs::read(output).unwrap()
    }
}

/// cosign's SimpleSigning payload for `docker_reference` (`host/repo`) naming `digest`.
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"{docker_reference}"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
    )
    .into_bytes()
}

/// `sha256-<hex>.sig`, the cosign v2 signature tag of `digest`.
pub fn sig_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// Uploads a cosign v2 `.sig` image for `attached_to` (a manifest digest) whose only
/// layer is `payload` annotated with `signature` (DER, stored base64), as cosign does.
pub async fn attach(
    reg: &TestRegistry,
    repo: &str,
    attached_to: &str,
    payload: &[u8],
    signature: &[u8],
) {
    attach_all(reg, repo, attached_to, &[(payload, signature)]).await;
}

/// Like [`attach`] with one SimpleSigning layer per `(payload, signature)`, in order, as
/// cosign appends a layer for each further signer.
pub async fn attach_all(
    reg: &TestRegistry,
    repo: &str,
    attached_to: &str,
    signatures: &[(&[u8], &[u8])],
) {
    let layers: Vec<(&[u8], serde_json::Value)> = signatures
        .iter()
        .map(|(payload, signature)| {
            (
                *payload,
                serde_json::json!({ANN_SIGNATURE: B64.encode(signature)}),
            )
        })
        .collect();
    attach_layers(reg, repo, attached_to, &layers).await;
}

/// Uploads a cosign v2 `.sig` image for `attached_to` whose layers are the given
/// SimpleSigning payloads with their annotations exactly as given (signature, and for
/// keyless the certificate, chain and Rekor bundle).
pub async fn attach_layers(
    reg: &TestRegistry,
    repo: &str,
    attached_to: &str,
    layers_in: &[(&[u8], serde_json::Value)],
) {
    let mut layers = Vec::new();
    let mut diff_ids = Vec::new();
    for (payload, annotations) in layers_in {
        let payload_digest = reg.push_blob(repo, payload).await;
        layers.push(serde_json::json!({
            "mediaType": SIMPLESIGNING,
            "digest": payload_digest,
            "size": payload.len(),
            "annotations": annotations,
        }));
        diff_ids.push(payload_digest);
    }
    let config = serde_json::json!({
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "config": {},
    })
    .to_string();
    let config_digest = reg.push_blob(repo, config.as_bytes()).await;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config.len(),
        },
        "layers": layers,
    });
    let body = serde_json::to_vec(&manifest).unwrap();
    reg.put_manifest(repo, &sig_tag(attached_to), OCI_MANIFEST, &body)
        .await;
}

/// Signs `digest` of `host/repo` with `key` (openssl) and attaches the signature.
pub async fn sign_and_attach(reg: &TestRegistry, repo: &str, digest: &str, key: &KeyPair) {
    let p = payload(&format!("{}/{repo}", reg.host()), digest);
    attach(reg, repo, digest, &p, &key.sign(&p)).await;
}

/// GET of a manifest with the raw harness client, returning the body (status checked).
pub async fn get_manifest(reg: &TestRegistry, repo: &str, reference: &str) -> Vec<u8> {
    let url = format!("{}/v2/{repo}/manifests/{reference}", reg.base_url());
    let resp = reg
        .raw_http()
        .get(&url)
        .header("accept", OCI_MANIFEST)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "GET {url}");
    resp.bytes().await.unwrap().to_vec()
}

/// GET of a blob with the raw harness client; its digest is checked.
pub async fn get_blob(reg: &TestRegistry, repo: &str, digest: &str) -> Vec<u8> {
    let url = format!("{}/v2/{repo}/blobs/{digest}", reg.base_url());
    let resp = reg.raw_http().get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "GET {url}");
    let bytes = resp.bytes().await.unwrap().to_vec();
    assert_eq!(sha256(&bytes), digest, "blob {digest} content");
    bytes
}
