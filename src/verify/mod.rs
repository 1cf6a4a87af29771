//! Signature adapter: cosign v2 (`sha256-<hex>.sig` SimpleSigning layers) and cosign v3
//! (Sigstore bundles attached as OCI referrers, found through the `sha256-<hex>` fallback
//! tag) on top of `sigstore-verify`, plus cosign v2 key signing for `push --sign-key`.
//! Everything reaches the registry through `ports::Registry`; this module must not
//! import `reconcile`, kube, axum or any concrete registry adapter.
//!
//! Files: `discover` (finding candidate signatures), `cosign_v2`, `cosign_v3`, `keys`
//! (trusted public keys), `trust` (trusted roots and calls into `sigstore-verify`),
//! `sign` (producing cosign v2 signatures).
//!
//! The OCI referrers API (`GET /v2/<repo>/referrers/<digest>`) is not in the registry
//! port, so v3 discovery uses only the referrers tag schema fallback, which cosign also
//! writes when a registry lacks the API.

pub(crate) mod cosign_v2;
mod cosign_v3;
mod discover;
mod keys;
pub mod sign;
mod trust;

use std::fmt;

pub use cosign_v2::{
    SignatureLayer, ANN_BUNDLE, ANN_CERTIFICATE, ANN_CHAIN, ANN_SIGNATURE, SIMPLESIGNING_MEDIA_TYPE,
};
pub use cosign_v3::{BundleSubject, BUNDLE_MEDIA_TYPE_PREFIX};
pub use keys::{KeyError, ParsedKey};

use crate::domain::digest::Digest;
use crate::domain::verification::{IdentityMatch, PolicyError, VerifyPolicy};
pub use crate::ports::VerifiedSignature;
use crate::ports::{Registry, RegistryError, SignatureVerifier, VerifyFailure, VerifyFailureKind};
use discover::Candidate;
use trust::Trust;

/// One signature that was found and rejected, with the check that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Where the signature came from, e.g. `tag sha256-….sig layer 0`.
    pub source: String,
    /// The check that failed: `signature`, `payload digest`, `certificate chain`,
    /// `certificate SCT`, `transparency log`, `identity`, `digest binding`, `bundle`, ...
    pub check: &'static str,
    /// What exactly was wrong.
    pub detail: String,
}

impl Rejection {
    /// Builds a rejection.
    pub fn new(source: &str, check: &'static str, detail: impl Into<String>) -> Self {
        Self {
            source: source.to_string(),
            check,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} check failed: {}",
            self.source, self.check, self.detail
        )
    }
}

fn join(failures: &[Rejection]) -> String {
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The verification spec cannot be used as written (stalled until it changes).
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The policy itself is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A trusted public key cannot be parsed.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The configured trusted root JSON cannot be used.
    #[error("failed to load trusted root: {message}")]
    TrustedRoot {
        /// Parser message.
        message: String,
    },
}

/// A failed verification.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Neither a v2 `.sig` tag nor a v3 referrer was found.
    #[error("no cosign signature found for {image}@{digest}, tried tags {tried}")]
    NoSignature {
        /// Image reference, for messages.
        image: String,
        /// The verified digest.
        digest: Digest,
        /// The tags looked up.
        tried: String,
    },
    /// Signatures were found but none passed; each says which check failed.
    #[error(
        "failed to verify cosign signature of {image}@{digest}: {}",
        join(failures)
    )]
    Invalid {
        /// Image reference, for messages.
        image: String,
        /// The verified digest.
        digest: Digest,
        /// One entry per rejected signature.
        failures: Vec<Rejection>,
    },
    /// The verification spec is unusable.
    #[error("invalid verification spec: {0}")]
    Spec(#[from] SpecError),
    /// The registry failed while fetching signatures.
    #[error("failed to fetch cosign signatures of {image}@{digest}: {error}")]
    Registry {
        /// Image reference, for messages.
        image: String,
        /// The verified digest.
        digest: Digest,
        /// What the registry said.
        error: RegistryError,
    },
}

impl From<VerifyError> for VerifyFailure {
    /// The port's failure, of this error's [`VerifyError::kind`], reading as this error.
    fn from(e: VerifyError) -> Self {
        VerifyFailure::new(e.kind(), e)
    }
}

impl VerifyError {
    /// The port's classification of this failure.
    pub fn kind(&self) -> VerifyFailureKind {
        match self {
            Self::NoSignature { .. } => VerifyFailureKind::NoSignature,
            Self::Invalid { .. } => VerifyFailureKind::Invalid,
            Self::Spec(_) => VerifyFailureKind::Spec,
            Self::Registry { .. } => VerifyFailureKind::Registry,
        }
    }
}

/// A policy with its keys parsed and its trusted root loaded.
enum Mode {
    Keys {
        keys: Vec<keys::ParsedKey>,
        trust: Trust,
    },
    Keyless {
        identities: Vec<IdentityMatch>,
        trust: Trust,
    },
}

/// Verifies cosign signatures of an image digest against a [`VerifyPolicy`].
#[derive(Clone, Debug)]
pub struct CosignVerifier {
    public_good: Trust,
}

impl CosignVerifier {
    /// Loads the public-good Sigstore trusted root embedded in the binary.
    pub fn new() -> Result<Self, VerifyError> {
        let public_good =
            Trust::public_good().map_err(|message| SpecError::TrustedRoot { message })?;
        Ok(Self { public_good })
    }

    fn prepare(&self, policy: &VerifyPolicy) -> Result<Mode, VerifyError> {
        Ok(match policy {
            VerifyPolicy::Keys(keys) => Mode::Keys {
                keys: keys::parse_all(keys).map_err(SpecError::from)?,
                trust: self.public_good.clone(),
            },
            VerifyPolicy::Keyless {
                identities,
                trusted_root_json,
            } => {
                if identities.is_empty() {
                    return Err(SpecError::Policy(PolicyError::NoIdentities).into());
                }
                let trust = match trusted_root_json {
                    Some(json) => Trust::from_json(json)
                        .map_err(|message| SpecError::TrustedRoot { message })?,
                    None => self.public_good.clone(),
                };
                Mode::Keyless {
                    identities: identities.clone(),
                    trust,
                }
            }
        })
    }

    /// Checks one cosign v2 `.sig` layer already in hand (no registry access).
    pub fn verify_simple_signing(
        &self,
        layer: &SignatureLayer,
        digest: &Digest,
        policy: &VerifyPolicy,
    ) -> Result<VerifiedSignature, VerifyError> {
        let mode = self.prepare(policy)?;
        let candidate = Candidate::V2 {
            layer: layer.clone(),
            source: "signature layer".into(),
        };
        check(&mode, &candidate, digest).map_err(|r| VerifyError::Invalid {
            image: String::new(),
            digest: digest.clone(),
            failures: vec![r],
        })
    }

    /// Checks one Sigstore bundle already in hand against a digest or raw bytes.
    pub fn verify_bundle(
        &self,
        bundle_json: &[u8],
        subject: BundleSubject<'_>,
        policy: &VerifyPolicy,
    ) -> Result<VerifiedSignature, VerifyError> {
        let mode = self.prepare(policy)?;
        let source = "bundle";
        let (method, result) = match &mode {
            Mode::Keys { keys, trust } => (
                "cosign v3 key",
                cosign_v3::verify_with_keys(bundle_json, subject, trust, keys, source),
            ),
            Mode::Keyless { identities, trust } => (
                "cosign v3 keyless",
                cosign_v3::verify_keyless(bundle_json, subject, trust, identities, source),
            ),
        };
        let digest = match subject {
            BundleSubject::Digest(d) => d.clone(),
            BundleSubject::Blob(b) => Digest::of(b),
        };
        result
            .map(|identity| VerifiedSignature { method, identity })
            .map_err(|r| VerifyError::Invalid {
                image: String::new(),
                digest,
                failures: vec![r],
            })
    }
}

fn check(
    mode: &Mode,
    candidate: &Candidate,
    digest: &Digest,
) -> Result<VerifiedSignature, Rejection> {
    match (mode, candidate) {
        (_, Candidate::Unusable(rejection)) => Err(rejection.clone()),
        (Mode::Keys { keys, .. }, Candidate::V2 { layer, source }) => {
            cosign_v2::verify_with_keys(layer, digest, keys, source).map(|identity| {
                VerifiedSignature {
                    method: "cosign v2 key",
                    identity,
                }
            })
        }
        (Mode::Keyless { identities, trust }, Candidate::V2 { layer, source }) => {
            cosign_v2::verify_keyless(layer, digest, trust, identities, source).map(|identity| {
                VerifiedSignature {
                    method: "cosign v2 keyless",
                    identity,
                }
            })
        }
        (Mode::Keys { keys, trust }, Candidate::V3 { bundle, source }) => {
            cosign_v3::verify_with_keys(bundle, BundleSubject::Digest(digest), trust, keys, source)
                .map(|identity| VerifiedSignature {
                    method: "cosign v3 key",
                    identity,
                })
        }
        (Mode::Keyless { identities, trust }, Candidate::V3 { bundle, source }) => {
            cosign_v3::verify_keyless(
                bundle,
                BundleSubject::Digest(digest),
                trust,
                identities,
                source,
            )
            .map(|identity| VerifiedSignature {
                method: "cosign v3 keyless",
                identity,
            })
        }
    }
}

#[async_trait::async_trait]
impl SignatureVerifier for CosignVerifier {
    /// Finds the cosign v2 and v3 signatures of `digest` in `registry` and accepts the
    /// first that passes every check of `policy`.
    /// The failure is a [`VerifyError`] (see [`VerifyFailure::downcast`]).
    async fn verify(
        &self,
        registry: &dyn Registry,
        image_ref_for_messages: &str,
        digest: &Digest,
        policy: &VerifyPolicy,
    ) -> Result<VerifiedSignature, VerifyFailure> {
        let mode = self.prepare(policy)?;
        let registry_error = |error| VerifyError::Registry {
            image: image_ref_for_messages.to_string(),
            digest: digest.clone(),
            error,
        };
        let mut failures = Vec::new();
        let mut found = false;
        let v2 = discover::v2_candidates(registry, digest)
            .await
            .map_err(registry_error)?;
        for candidate in v2 {
            found = true;
            match check(&mode, &candidate, digest) {
                Ok(verified) => return Ok(verified),
                Err(rejection) => failures.push(rejection),
            }
        }
        let v3 = discover::v3_candidates(registry, digest)
            .await
            .map_err(registry_error)?;
        for candidate in v3 {
            found = true;
            match check(&mode, &candidate, digest) {
                Ok(verified) => return Ok(verified),
                Err(rejection) => failures.push(rejection),
            }
        }
        let tag = digest.tag_form();
        if !found {
            return Err(VerifyFailure::from(VerifyError::NoSignature {
                image: image_ref_for_messages.to_string(),
                digest: digest.clone(),
                tried: format!(
                    "'{tag}.sig' (cosign v2), and the referrers API or, without it, '{tag}' (cosign v3)"
                ),
            }));
        }
        Err(VerifyError::Invalid {
            image: image_ref_for_messages.to_string(),
            digest: digest.clone(),
            failures,
        }
        .into())
    }
}
