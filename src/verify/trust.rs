//! Sigstore trust material and the calls into `sigstore-verify`: the trusted root (the
//! public-good root embedded in `sigstore-trust-root`, or a custom `trusted_root.json`),
//! bundle verification for keyless and managed-key bundles, the `matchOIDCIdentity`
//! check on the verified certificate, and naming the check a `sigstore-verify` error
//! belongs to. Nothing here knows about OCI registries or cosign's `.sig` layout.
//!
//! The embedded public-good root is refreshed by upgrading `sigstore-verify` (and so
//! `sigstore-trust-root`); a cluster that needs a newer or private root supplies its own
//! `trusted_root.json` through the policy, which replaces the embedded one.

use std::sync::Arc;

use sigstore_verify::trust_root::{TrustedRoot, SIGSTORE_PRODUCTION_TRUSTED_ROOT};
use sigstore_verify::types::{Artifact, Bundle};
use sigstore_verify::{
    CertificateError, Error as SigstoreError, PublicKeyVerificationPolicy, TransparencyLogError,
    VerificationPolicy, Verifier,
};

use super::keys::ParsedKey;
use super::Rejection;
use crate::domain::verification::IdentityMatch;

/// A ready `sigstore-verify` verifier for one trusted root.
#[derive(Clone)]
pub struct Trust {
    verifier: Arc<Verifier>,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust").finish_non_exhaustive()
    }
}

impl Trust {
    /// The Sigstore public-good root bundled with this binary.
    pub fn public_good() -> Result<Self, String> {
        Self::from_json(SIGSTORE_PRODUCTION_TRUSTED_ROOT.as_bytes())
    }

    /// A custom `trusted_root.json` (Sigstore protobuf-specs JSON).
    pub fn from_json(json: &[u8]) -> Result<Self, String> {
        let text =
            std::str::from_utf8(json).map_err(|_| "trusted root is not UTF-8".to_string())?;
        let root = TrustedRoot::from_json(text).map_err(|e| e.to_string())?;
        let verifier = Verifier::new(&root).map_err(|e| e.to_string())?;
        Ok(Self {
            verifier: Arc::new(verifier),
        })
    }

    /// Verifies a keyless bundle (Fulcio certificate, SCT, Rekor evidence, signature,
    /// artifact binding) and then the identity against `identities`. Returns
    /// `"<SAN> (issuer <issuer>)"`.
    pub fn verify_keyless(
        &self,
        artifact: Artifact<'_>,
        bundle: &Bundle,
        identities: &[IdentityMatch],
        source: &str,
    ) -> Result<String, Rejection> {
        let policy = VerificationPolicy::any_identity();
        let result = self
            .verifier
            .verify(artifact, bundle, &policy)
            .map_err(|e| classify(source, &e))?;
        if !result.certificate_verified() || !result.sct_verified() {
            return Err(Rejection::new(
                source,
                "certificate chain",
                "certificate was not verified",
            ));
        }
        let san = result
            .identity()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default();
        let Some(issuer) = result.issuer() else {
            return Err(Rejection::new(
                source,
                "identity",
                format!("certificate for '{san}' has no OIDC issuer extension"),
            ));
        };
        if identities.iter().any(|m| m.matches(issuer, &san)) {
            Ok(format!("{san} (issuer {issuer})"))
        } else {
            let wanted: Vec<String> = identities
                .iter()
                .map(|m| {
                    format!(
                        "issuer '{}' subject '{}'",
                        m.issuer_pattern(),
                        m.subject_pattern()
                    )
                })
                .collect();
            Err(Rejection::new(
                source,
                "identity",
                format!(
                    "certificate identity '{san}' from issuer '{issuer}' matches none of the accepted identities ({})",
                    wanted.join(", ")
                ),
            ))
        }
    }

    /// Verifies a managed-key bundle with one of `keys`; returns the key's description.
    /// As in Flux (cosign `IgnoreTlog` for public keys), key mode checks the signature
    /// and the artifact binding only: transparency-log inclusion is not required, though
    /// `sigstore-verify` still checks that any log entry present describes this bundle
    /// and that any RFC 3161 timestamp present verifies.
    pub fn verify_with_keys(
        &self,
        artifact: &Artifact<'_>,
        bundle: &Bundle,
        keys: &[ParsedKey],
        source: &str,
    ) -> Result<String, Rejection> {
        let mut last = None;
        for key in keys {
            let policy = PublicKeyVerificationPolicy::new(key.der.clone()).skip_tlog_unsafe();
            match self.verifier.verify(artifact.clone(), bundle, &policy) {
                Ok(_) => return Ok(key.describe()),
                Err(e) => last = Some(classify(source, &e)),
            }
        }
        Err(last
            .unwrap_or_else(|| Rejection::new(source, "signature", "no public key to verify with")))
    }
}

/// Names the check a `sigstore-verify` error belongs to.
pub fn classify(source: &str, error: &SigstoreError) -> Rejection {
    let check = match error {
        SigstoreError::IdentityMismatch { .. } | SigstoreError::IssuerMismatch { .. } => "identity",
        SigstoreError::SignatureInvalid(_) => "signature",
        SigstoreError::ArtifactMismatch(_) | SigstoreError::UnsupportedArtifact(_) => {
            "digest binding"
        }
        SigstoreError::Certificate(CertificateError::Sct(_)) => "certificate SCT",
        SigstoreError::Certificate(
            CertificateError::Expired { .. } | CertificateError::NotYetValid { .. },
        ) => "certificate validity at signing time",
        SigstoreError::Certificate(_) | SigstoreError::TrustedCertificate(_) => "certificate chain",
        SigstoreError::TransparencyLog(TransparencyLogError::IntegratedTime(_)) => {
            "log time inside certificate validity"
        }
        SigstoreError::TransparencyLog(_) => "transparency log",
        SigstoreError::Timestamp(_) => "timestamp",
        SigstoreError::InvalidTrustRoot(_) | SigstoreError::TrustRoot(_) => "trusted root",
        _ => "bundle",
    };
    Rejection::new(source, check, error.to_string())
}
