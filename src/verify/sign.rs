//! Producing cosign v2 key signatures in cosign's exact format, for
//! `ocisource push --sign-key`: the SimpleSigning payload, an ECDSA-P256-SHA256 (ASN.1
//! DER) signature, the cosign image config and the `.sig` OCI manifest. Pure functions
//! returning bytes; the caller pushes them (payload and config blobs, then the manifest
//! under [`CosignSignature::tag`]). Crypto is aws-lc-rs through `sigstore-crypto`.
//! Must not import the registry adapter or `reconcile`.
//!
//! Keys: an unencrypted PEM PKCS#8 P-256 key (`openssl genpkey -algorithm EC -pkeyopt
//! ec_paramgen_curve:P-256`). cosign's `ENCRYPTED SIGSTORE PRIVATE KEY` would need scrypt
//! and NaCl secretbox crates, so it is refused with instructions to convert the key.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use sigstore_verify::crypto::{KeyAlgorithm, KeyPair};

use super::cosign_v2::{ANN_SIGNATURE, SIMPLESIGNING_MEDIA_TYPE};
use crate::domain::digest::Digest;
use crate::domain::manifest::{Descriptor, ImageManifest, OCI_MANIFEST};

/// Media type of cosign's signature image config.
pub const COSIGN_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// A P-256 signing key. Its `Debug` output never shows key material.
pub struct SigningKey {
    pair: KeyPair,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

impl SigningKey {
    /// Reads an unencrypted PEM PKCS#8 ECDSA P-256 private key.
    pub fn from_pem(pem_bytes: &[u8]) -> Result<Self, SignError> {
        let block = pem::parse(pem_bytes).map_err(|_| SignError::NotPem)?;
        match block.tag() {
            "PRIVATE KEY" => {}
            "ENCRYPTED SIGSTORE PRIVATE KEY" | "ENCRYPTED COSIGN PRIVATE KEY" => {
                return Err(SignError::EncryptedCosignKey)
            }
            "ENCRYPTED PRIVATE KEY" => return Err(SignError::EncryptedPkcs8),
            other => {
                return Err(SignError::UnsupportedPem {
                    tag: other.to_string(),
                })
            }
        }
        let pair = KeyPair::from_pkcs8_der(block.contents()).map_err(|_| SignError::NotP256)?;
        if pair.algorithm() != KeyAlgorithm::EcdsaP256 {
            return Err(SignError::NotP256);
        }
        Ok(Self { pair })
    }

    /// The public key as PEM (`-----BEGIN PUBLIC KEY-----`), to verify with.
    pub fn public_key_pem(&self) -> Result<String, SignError> {
        self.pair
            .public_key_der()
            .map(|k| k.to_pem())
            .map_err(|e| SignError::Crypto {
                message: e.to_string(),
            })
    }

    /// ECDSA-P256-SHA256 signature (ASN.1 DER) over `data`.
    pub fn sign(&self, data: &[u8]) -> Result<Vec<u8>, SignError> {
        self.pair
            .sign(data)
            .map(|s| s.as_bytes().to_vec())
            .map_err(|e| SignError::Crypto {
                message: e.to_string(),
            })
    }
}

/// Everything to push for one cosign v2 signature.
#[derive(Clone, Debug)]
pub struct CosignSignature {
    /// Tag to push the manifest under: `sha256-<hex>.sig`.
    pub tag: String,
    /// The SimpleSigning payload blob (the signed bytes).
    pub payload: Vec<u8>,
    /// Base64 of the DER signature (the annotation value).
    pub signature_b64: String,
    /// The config blob.
    pub config: Vec<u8>,
    /// The `.sig` OCI manifest JSON.
    pub manifest: Vec<u8>,
    /// The manifest as a typed value (its config and layer descriptors).
    pub manifest_value: ImageManifest,
}

/// cosign's SimpleSigning payload for `docker_reference` (`host/repo`) at `digest`.
pub fn simple_signing_payload(docker_reference: &str, digest: &Digest) -> Vec<u8> {
    let reference = serde_json::Value::String(docker_reference.to_string());
    format!(
        r#"{{"critical":{{"identity":{{"docker-reference":{reference}}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
    )
    .into_bytes()
}

/// cosign's image config for a `.sig` image whose only layer is `payload_digest`.
pub fn cosign_config(payload_digest: &Digest) -> Vec<u8> {
    format!(
        r#"{{"architecture":"","created":"0001-01-01T00:00:00Z","history":[{{"created":"0001-01-01T00:00:00Z"}}],"os":"","rootfs":{{"type":"layers","diff_ids":["{payload_digest}"]}},"config":{{}}}}"#
    )
    .into_bytes()
}

/// Signs `digest` for `docker_reference` and builds the `.sig` manifest.
pub fn sign(
    key: &SigningKey,
    docker_reference: &str,
    digest: &Digest,
) -> Result<CosignSignature, SignError> {
    let payload = simple_signing_payload(docker_reference, digest);
    let signature_b64 = B64.encode(key.sign(&payload)?);
    let payload_digest = Digest::of(&payload);
    let config = cosign_config(&payload_digest);
    let manifest_value = ImageManifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.to_string()),
        artifact_type: None,
        config: Descriptor {
            media_type: COSIGN_CONFIG_MEDIA_TYPE.to_string(),
            digest: Digest::of(&config),
            size: config.len() as u64,
            annotations: BTreeMap::new(),
            platform: None,
            artifact_type: None,
        },
        layers: vec![Descriptor {
            media_type: SIMPLESIGNING_MEDIA_TYPE.to_string(),
            digest: payload_digest,
            size: payload.len() as u64,
            annotations: BTreeMap::from([(ANN_SIGNATURE.to_string(), signature_b64.clone())]),
            platform: None,
            artifact_type: None,
        }],
        subject: None,
        annotations: BTreeMap::new(),
    };
    let manifest = serde_json::to_vec(&manifest_value).map_err(|e| SignError::Crypto {
        message: format!("failed to encode manifest: {e}"),
    })?;
    Ok(CosignSignature {
        tag: format!("{}.sig", digest.tag_form()),
        payload,
        signature_b64,
        config,
        manifest,
        manifest_value,
    })
}

/// Why a signature could not be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignError {
    /// Not PEM.
    #[error("failed to read signing key: not a PEM file")]
    NotPem,
    /// cosign's own encrypted key format.
    #[error("failed to read signing key: cosign's encrypted key format is not supported; use an unencrypted PKCS#8 P-256 key (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`; `cosign import-key-pair` can import the same key for cosign)")]
    EncryptedCosignKey,
    /// Encrypted PKCS#8.
    #[error("failed to read signing key: encrypted PKCS#8 is not supported; decrypt it with `openssl pkcs8 -in key.pem -out plain.pem`")]
    EncryptedPkcs8,
    /// Another PEM type (e.g. `EC PRIVATE KEY`).
    #[error("failed to read signing key: PEM type '{tag}' is not supported; convert it to PKCS#8 with `openssl pkcs8 -topk8 -nocrypt`")]
    UnsupportedPem {
        /// The PEM label.
        tag: String,
    },
    /// Not an ECDSA P-256 PKCS#8 key.
    #[error("failed to read signing key: expected an ECDSA P-256 PKCS#8 private key")]
    NotP256,
    /// The crypto backend failed.
    #[error("failed to sign: {message}")]
    Crypto {
        /// Backend message.
        message: String,
    },
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn payload_matches_cosign_bytes() {
        let d: Digest = "sha256:c05263d2ff654c3a94243662440913f045075d59c436e2c69e9145ec2b87a321"
            .parse()
            .unwrap();
        let p = simple_signing_payload("index.docker.io/salrashid123/server_image", &d);
        // sha256 of the cosign-made payload in the GHA vector (README: d8a03071…464b).
        assert_eq!(
            Digest::of(&p).hex(),
            "d8a030716080e45139ff0d6d8de7649cc500dc34ff2b9d699200c0a5d550464b"
        );
        // Its config digest in the same vector's manifest.
        assert_eq!(
            Digest::of(&cosign_config(&Digest::of(&p))).hex(),
            "3eef629b458806a1240642b3647481c811aec61f9589a3d8374d98af5d6271f6"
        );
    }

    #[test]
    fn refuses_encrypted_and_sec1_keys() {
        let enc = b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nYWJj\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        assert_eq!(
            SigningKey::from_pem(enc).unwrap_err(),
            SignError::EncryptedCosignKey
        );
        let sec1 = b"-----BEGIN EC PRIVATE KEY-----\nYWJj\n-----END EC PRIVATE KEY-----\n";
        assert!(matches!(
            SigningKey::from_pem(sec1).unwrap_err(),
            SignError::UnsupportedPem { .. }
        ));
        assert_eq!(
            SigningKey::from_pem(b"junk").unwrap_err(),
            SignError::NotPem
        );
    }
}
