//! cosign v3 signatures: a Sigstore bundle (v0.1–v0.3 JSON) attached to the image as an
//! OCI referrer. The bundle is verified by `sigstore-verify` against the image manifest
//! digest: a DSSE in-toto statement must name it as a subject, a message signature must
//! be over it. Like Flux (cosign `VerifyImageAttestations`), any verified bundle counts,
//! whatever its predicate type. Nothing here fetches anything: `mod.rs` does discovery.

use sigstore_verify::types::{Artifact, Bundle, Sha256Hash};

use super::keys::ParsedKey;
use super::trust::Trust;
use super::Rejection;
use crate::domain::digest::Digest;
use crate::domain::verification::IdentityMatch;

/// Media type prefix of Sigstore bundles (`application/vnd.dev.sigstore.bundle.v0.3+json`,
/// `application/vnd.dev.sigstore.bundle+json;version=0.2`, ...).
pub const BUNDLE_MEDIA_TYPE_PREFIX: &str = "application/vnd.dev.sigstore.bundle";

/// What the bundle must be bound to.
#[derive(Clone, Copy, Debug)]
pub enum BundleSubject<'a> {
    /// An OCI manifest digest (the normal case).
    Digest(&'a Digest),
    /// Raw artifact bytes (plain Sigstore bundles, e.g. conformance vectors).
    Blob(&'a [u8]),
}

impl BundleSubject<'_> {
    fn artifact(&self, source: &str) -> Result<Artifact<'_>, Rejection> {
        match self {
            Self::Digest(d) => Sha256Hash::from_hex(d.hex())
                .map(Artifact::from)
                .map_err(|e| Rejection::new(source, "digest binding", e.to_string())),
            Self::Blob(b) => Ok(Artifact::Blob(b)),
        }
    }
}

/// Parses bundle JSON.
pub fn parse(bundle_json: &[u8], source: &str) -> Result<Bundle, Rejection> {
    let text = std::str::from_utf8(bundle_json)
        .map_err(|_| Rejection::new(source, "bundle", "bundle is not UTF-8 JSON"))?;
    Bundle::from_json(text).map_err(|e| {
        Rejection::new(
            source,
            "bundle",
            format!("failed to parse Sigstore bundle: {e}"),
        )
    })
}

/// Key mode: verifies the bundle with one of `keys`; returns the key description.
pub fn verify_with_keys(
    bundle_json: &[u8],
    subject: BundleSubject<'_>,
    trust: &Trust,
    keys: &[ParsedKey],
    source: &str,
) -> Result<String, Rejection> {
    let bundle = parse(bundle_json, source)?;
    let artifact = subject.artifact(source)?;
    trust.verify_with_keys(&artifact, &bundle, keys, source)
}

/// Keyless mode: verifies the bundle and matches the certificate identity.
pub fn verify_keyless(
    bundle_json: &[u8],
    subject: BundleSubject<'_>,
    trust: &Trust,
    identities: &[IdentityMatch],
    source: &str,
) -> Result<String, Rejection> {
    let bundle = parse(bundle_json, source)?;
    let artifact = subject.artifact(source)?;
    trust.verify_keyless(artifact, &bundle, identities, source)
}
