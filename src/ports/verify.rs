//! The signature verification port: [`SignatureVerifier`], what a passed check returns
//! ([`VerifiedSignature`]) and how a failed one is reported ([`VerifyFailure`], classified by
//! [`VerifyFailureKind`] so the reconciler can tell a spec to fix from a failure to
//! retry without knowing the adapter's error type). The `verify` adapter (cosign)
//! implements it. Names no adapter; imports only `domain`.

use std::error::Error as StdError;
use std::fmt;

use async_trait::async_trait;

use crate::domain::digest::Digest;
use crate::domain::verification::VerifyPolicy;

use super::registry::Registry;

/// A signature that passed every check of the policy: how it was checked, and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedSignature {
    /// `cosign v2 key`, `cosign v2 keyless`, `cosign v3 key` or `cosign v3 keyless`.
    pub method: &'static str,
    /// Key entry and fingerprint (key mode), or certificate SAN and issuer (keyless).
    pub identity: String,
}

/// What kind of failure a verification ended in; decides whether retrying can help.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyFailureKind {
    /// No signature of the digest was found.
    NoSignature,
    /// Signatures were found but none passed every check.
    Invalid,
    /// The verification spec cannot be used as written (keys, trusted root, identities):
    /// nothing helps until it changes.
    Spec,
    /// The registry failed while the signatures were fetched.
    Registry,
}

/// A failed verification: its kind and the adapter's error. It reads exactly as the
/// adapter's error (same text, same sources), so condition messages do not depend on
/// which side of the port formats them.
pub struct VerifyFailure {
    kind: VerifyFailureKind,
    error: Box<dyn StdError + Send + Sync + 'static>,
}

impl VerifyFailure {
    /// Wraps an adapter's error with its kind.
    pub fn new(kind: VerifyFailureKind, error: impl StdError + Send + Sync + 'static) -> Self {
        Self {
            kind,
            error: Box::new(error),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> VerifyFailureKind {
        self.kind
    }

    /// The adapter's own error, for a caller that knows the adapter (its command line,
    /// its tests); the failure unchanged when it holds another type.
    pub fn downcast<E: StdError + 'static>(self) -> Result<E, Self> {
        match self.error.downcast::<E>() {
            Ok(error) => Ok(*error),
            Err(error) => Err(Self {
                kind: self.kind,
                error,
            }),
        }
    }
}

impl fmt::Debug for VerifyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyFailure")
            .field("kind", &self.kind)
            .field("error", &self.error)
            .finish()
    }
}

impl fmt::Display for VerifyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl StdError for VerifyFailure {
    /// Transparent: the adapter's error is this error, so its source is this source.
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.error.source()
    }
}

/// Verifies the signature of a digest in a registry against a policy.
#[async_trait]
pub trait SignatureVerifier: Send + Sync {
    /// Finds the signatures of `digest` and accepts the first that satisfies `policy`.
    async fn verify(
        &self,
        registry: &dyn Registry,
        image: &str,
        digest: &Digest,
        policy: &VerifyPolicy,
    ) -> Result<VerifiedSignature, VerifyFailure>;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("invalid verification spec: bad key")]
    struct Spec(#[source] std::io::Error);

    #[test]
    fn reads_as_the_adapter_error_with_its_sources() {
        let failure =
            VerifyFailure::new(VerifyFailureKind::Spec, Spec(std::io::Error::other("pem")));
        assert_eq!(failure.kind(), VerifyFailureKind::Spec);
        assert_eq!(failure.to_string(), "invalid verification spec: bad key");
        assert_eq!(failure.source().unwrap().to_string(), "pem");
        let failure = failure.downcast::<std::io::Error>().unwrap_err();
        assert!(matches!(failure.downcast::<Spec>(), Ok(Spec(_))));
    }
}
