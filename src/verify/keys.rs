//! Trusted public keys (the `*.pub` entries of the verification Secret) parsed into
//! SubjectPublicKeyInfo DER, and raw signature checks with them. Key types are the ones
//! cosign produces: ECDSA P-256/P-384, RSA (PKCS#1 v1.5) and Ed25519. Nothing here talks
//! to a registry or knows about manifests.

use sha2::{Digest as _, Sha256};
use sigstore_verify::crypto::{verify_signature, KeyAlgorithm};
use sigstore_verify::types::{DerPublicKey, SignatureBytes};

use crate::domain::verification::TrustedKey;

/// A parsed trusted key with a printable fingerprint.
#[derive(Clone, Debug)]
pub struct ParsedKey {
    /// Secret entry the key came from.
    pub name: String,
    /// SubjectPublicKeyInfo DER.
    pub der: DerPublicKey,
    /// Key algorithm, which fixes the signature scheme.
    pub algorithm: KeyAlgorithm,
}

impl ParsedKey {
    /// Parses one PEM `PUBLIC KEY`.
    pub fn parse(key: &TrustedKey) -> Result<Self, KeyError> {
        let text = std::str::from_utf8(&key.pem).map_err(|_| KeyError::NotPem {
            name: key.name.clone(),
        })?;
        if text.contains("PRIVATE KEY-----") {
            return Err(KeyError::Parse {
                name: key.name.clone(),
                message: "this is a private key; verification takes the public key (cosign.pub, or `openssl pkey -pubout`)".into(),
            });
        }
        let der = DerPublicKey::from_pem(text.trim()).map_err(|e| KeyError::Parse {
            name: key.name.clone(),
            message: e.to_string(),
        })?;
        let algorithm = KeyAlgorithm::from_spki(&der).map_err(|e| KeyError::Parse {
            name: key.name.clone(),
            message: e.to_string(),
        })?;
        Ok(Self {
            name: key.name.clone(),
            der,
            algorithm,
        })
    }

    /// `sha256:<hex>` of the SubjectPublicKeyInfo DER.
    pub fn fingerprint(&self) -> String {
        format!(
            "sha256:{}",
            hex::encode(Sha256::digest(self.der.as_bytes()))
        )
    }

    /// `<entry> (<fingerprint>)`, for `VerifiedSignature::identity` and messages.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.name, self.fingerprint())
    }

    /// Checks `signature` over `data` with this key and its default scheme
    /// (ECDSA with the curve's hash, RSA PKCS#1 v1.5 SHA-256, pure Ed25519).
    pub fn verify(&self, data: &[u8], signature: &[u8]) -> Result<(), KeyError> {
        let scheme = self.algorithm.default_signing_scheme();
        verify_signature(
            &self.der,
            data,
            &SignatureBytes::from_bytes(signature),
            scheme,
        )
        .map_err(|_| KeyError::BadSignature {
            name: self.name.clone(),
        })
    }
}

/// Parses every key; one unreadable key makes the whole set a spec error.
pub fn parse_all(keys: &[TrustedKey]) -> Result<Vec<ParsedKey>, KeyError> {
    keys.iter().map(ParsedKey::parse).collect()
}

/// Failures with trusted keys.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// The entry is not text.
    #[error("failed to read public key '{name}': not PEM text")]
    NotPem {
        /// Entry name.
        name: String,
    },
    /// The PEM is not a supported SubjectPublicKeyInfo.
    #[error("failed to parse public key '{name}': {message}")]
    Parse {
        /// Entry name.
        name: String,
        /// Parser message.
        message: String,
    },
    /// The signature does not verify with this key.
    #[error("signature does not verify with public key '{name}'")]
    BadSignature {
        /// Entry name.
        name: String,
    },
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_key_pem() {
        let key = TrustedKey {
            name: "x.pub".into(),
            pem: b"-----BEGIN CERTIFICATE-----\nYWJj\n-----END CERTIFICATE-----\n".to_vec(),
        };
        assert!(matches!(
            ParsedKey::parse(&key),
            Err(KeyError::Parse { .. })
        ));
        let private = TrustedKey {
            name: "cosign.key".into(),
            pem: b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nYWJj\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n".to_vec(),
        };
        assert!(
            matches!(ParsedKey::parse(&private), Err(KeyError::Parse { message, .. }) if message.contains("cosign.pub"))
        );
        let bin = TrustedKey {
            name: "y.pub".into(),
            pem: vec![0xff, 0xfe],
        };
        assert!(matches!(
            ParsedKey::parse(&bin),
            Err(KeyError::NotPem { .. })
        ));
    }
}
