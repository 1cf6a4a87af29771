//! Producing cosign v2 key signatures in cosign's exact format, for
//! `ocisource push --sign-key`: the SimpleSigning payload, an ECDSA-P256-SHA256 (ASN.1
//! DER) signature, the cosign image config and the `.sig` OCI manifest. Pure functions
//! returning bytes; the caller pushes them (payload and config blobs, then the manifest
//! under [`CosignSignature::tag`]). Crypto is aws-lc-rs through `sigstore-crypto`.
//! Must not import the registry adapter or `reconcile`.
//!
//! Keys (ECDSA P-256): cosign's own `cosign.key` (`ENCRYPTED SIGSTORE PRIVATE KEY`, or
//! `ENCRYPTED COSIGN PRIVATE KEY` from older cosign: go-securesystemslib's `encrypted`
//! envelope, a JSON of scrypt parameters, salt, NaCl secretbox nonce and ciphertext
//! around a PKCS#8 key; the caller brings the password, cosign's `COSIGN_PASSWORD`),
//! PKCS#8 `PRIVATE KEY` (`openssl genpkey`) and SEC1 `EC PRIVATE KEY`
//! (`openssl ecparam -genkey`).

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::XSalsa20Poly1305;
use serde::Deserialize;
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
    /// Reads an unencrypted PKCS#8 or SEC1 ECDSA P-256 private key (PEM).
    pub fn from_pem(pem_bytes: &[u8]) -> Result<Self, SignError> {
        Self::from_pem_with_password(pem_bytes, None)
    }

    /// Reads a P-256 private key in any supported PEM form; `password` unlocks cosign's
    /// encrypted keys (cosign accepts an empty one).
    pub fn from_pem_with_password(
        pem_bytes: &[u8],
        password: Option<&[u8]>,
    ) -> Result<Self, SignError> {
        let block = pem::parse(pem_bytes).map_err(|_| SignError::NotPem)?;
        let pkcs8 = match block.tag() {
            "PRIVATE KEY" => block.contents().to_vec(),
            "EC PRIVATE KEY" => sec1_to_pkcs8(block.contents())?,
            "ENCRYPTED SIGSTORE PRIVATE KEY" | "ENCRYPTED COSIGN PRIVATE KEY" => {
                let password = password.ok_or(SignError::PasswordNeeded)?;
                decrypt_cosign_key(block.contents(), password)?
            }
            "ENCRYPTED PRIVATE KEY" => return Err(SignError::EncryptedPkcs8),
            other => {
                return Err(SignError::UnsupportedPem {
                    tag: other.to_string(),
                })
            }
        };
        let pair = KeyPair::from_pkcs8_der(&pkcs8).map_err(|_| SignError::NotP256)?;
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

/// SEC1 (RFC 5915) `EC PRIVATE KEY` DER as PKCS#8, through aws-lc-rs (P-256 only).
fn sec1_to_pkcs8(der: &[u8]) -> Result<Vec<u8>, SignError> {
    use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
    let pair = EcdsaKeyPair::from_private_key_der(&ECDSA_P256_SHA256_ASN1_SIGNING, der)
        .map_err(|_| SignError::NotP256)?;
    let doc = pair.to_pkcs8v1().map_err(|_| SignError::NotP256)?;
    Ok(doc.as_ref().to_vec())
}

/// go-securesystemslib's `encrypted` envelope, as cosign writes it into `cosign.key`.
#[derive(Deserialize)]
struct Envelope {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(Deserialize)]
struct Kdf {
    name: String,
    params: ScryptParams,
    salt: String,
}

#[derive(Deserialize)]
struct ScryptParams {
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
}

#[derive(Deserialize)]
struct Cipher {
    name: String,
    nonce: String,
}

/// Most memory scrypt may take (128·N·r bytes): cosign's N=32768, r=8 need 32 MiB; a
/// tampered envelope must not make us allocate gigabytes.
const MAX_SCRYPT_MEMORY: u64 = 256 << 20;

/// Opens cosign's envelope with `password`: scrypt gives the secretbox key, secretbox
/// (XSalsa20-Poly1305, tag first as in NaCl) gives the PKCS#8 DER.
fn decrypt_cosign_key(envelope: &[u8], password: &[u8]) -> Result<Vec<u8>, SignError> {
    let bad = |message: String| SignError::CosignKey { message };
    let env: Envelope = serde_json::from_slice(envelope)
        .map_err(|e| bad(format!("not cosign's encrypted key envelope: {e}")))?;
    if env.kdf.name != "scrypt" || env.cipher.name != "nacl/secretbox" {
        return Err(bad(format!(
            "unsupported kdf '{}' or cipher '{}' (expected scrypt and nacl/secretbox)",
            env.kdf.name, env.cipher.name
        )));
    }
    let ScryptParams { n, r, p } = env.kdf.params;
    let memory = 128u64.saturating_mul(n).saturating_mul(u64::from(r));
    if n < 2 || !n.is_power_of_two() || p == 0 || p > 16 || memory > MAX_SCRYPT_MEMORY {
        return Err(bad(format!(
            "refused scrypt parameters N={n} r={r} p={p} (N a power of two, at most {} MiB, p at most 16)",
            MAX_SCRYPT_MEMORY >> 20
        )));
    }
    let decode = |field: &str, value: &str| {
        B64.decode(value)
            .map_err(|e| bad(format!("{field} is not base64: {e}")))
    };
    let salt = decode("salt", &env.kdf.salt)?;
    let nonce = decode("nonce", &env.cipher.nonce)?;
    let ciphertext = decode("ciphertext", &env.ciphertext)?;
    if nonce.len() != 24 {
        return Err(bad(format!("nonce is {} bytes, expected 24", nonce.len())));
    }
    let params = scrypt::Params::new(n.trailing_zeros() as u8, r, p, 32)
        .map_err(|e| bad(format!("invalid scrypt parameters: {e}")))?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password, &salt, &params, &mut key)
        .map_err(|e| bad(format!("scrypt failed: {e}")))?;
    let cipher = XSalsa20Poly1305::new(&key.into());
    let plain = cipher
        .decrypt(
            crypto_secretbox::Nonce::from_slice(&nonce),
            ciphertext.as_slice(),
        )
        .map_err(|_| SignError::WrongPassword);
    key.fill(0);
    plain
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
    /// A cosign key is encrypted and no password was given.
    #[error("failed to read signing key: it is encrypted (cosign generate-key-pair): set COSIGN_PASSWORD (empty for a key made without one)")]
    PasswordNeeded,
    /// The password does not open the cosign key.
    #[error("failed to decrypt signing key: wrong password (COSIGN_PASSWORD)")]
    WrongPassword,
    /// cosign's envelope is malformed.
    #[error("failed to read cosign signing key: {message}")]
    CosignKey {
        /// What is wrong.
        message: String,
    },
    /// Encrypted PKCS#8.
    #[error("failed to read signing key: encrypted PKCS#8 is not supported; decrypt it with `openssl pkcs8 -in key.pem -out plain.pem`")]
    EncryptedPkcs8,
    /// Another PEM type (e.g. `RSA PRIVATE KEY`).
    #[error("failed to read signing key: PEM type '{tag}' is not supported; give cosign.key, a PKCS#8 `PRIVATE KEY` or an `EC PRIVATE KEY` (ECDSA P-256)")]
    UnsupportedPem {
        /// The PEM label.
        tag: String,
    },
    /// Not an ECDSA P-256 key.
    #[error("failed to read signing key: expected an ECDSA P-256 private key")]
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
    fn refuses_what_it_cannot_read_and_names_why() {
        let enc = b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nYWJj\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        assert_eq!(
            SigningKey::from_pem(enc).unwrap_err(),
            SignError::PasswordNeeded
        );
        assert!(matches!(
            SigningKey::from_pem_with_password(enc, Some(b"pw")).unwrap_err(),
            SignError::CosignKey { .. }
        ));
        let sec1 = b"-----BEGIN EC PRIVATE KEY-----\nYWJj\n-----END EC PRIVATE KEY-----\n";
        assert_eq!(SigningKey::from_pem(sec1).unwrap_err(), SignError::NotP256);
        let rsa = b"-----BEGIN RSA PRIVATE KEY-----\nYWJj\n-----END RSA PRIVATE KEY-----\n";
        assert!(matches!(
            SigningKey::from_pem(rsa).unwrap_err(),
            SignError::UnsupportedPem { .. }
        ));
        assert_eq!(
            SigningKey::from_pem(b"junk").unwrap_err(),
            SignError::NotPem
        );
    }

    #[test]
    fn tampered_scrypt_parameters_are_refused_before_any_work() {
        let envelope = |n: u64, r: u32| {
            let json = format!(
                r#"{{"kdf":{{"name":"scrypt","params":{{"N":{n},"r":{r},"p":1}},"salt":"AAAA"}},"cipher":{{"name":"nacl/secretbox","nonce":"{}"}},"ciphertext":"AAAA"}}"#,
                B64.encode([0u8; 24])
            );
            let block = pem::Pem::new("ENCRYPTED SIGSTORE PRIVATE KEY", json.into_bytes());
            pem::encode(&block).into_bytes()
        };
        for (n, r) in [(1u64 << 30, 8), (32768, 1 << 20), (1000, 8)] {
            let e = SigningKey::from_pem_with_password(&envelope(n, r), Some(b"")).unwrap_err();
            assert!(
                matches!(&e, SignError::CosignKey { message } if message.contains("refused scrypt")),
                "{e}"
            );
        }
        // Sane parameters reach the cipher, which refuses the wrong password.
        assert_eq!(
            SigningKey::from_pem_with_password(&envelope(1024, 8), Some(b"x")).unwrap_err(),
            SignError::WrongPassword
        );
    }
}
