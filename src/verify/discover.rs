//! Finding candidate signatures of a digest through `ports::Registry`: the cosign v2
//! `sha256-<hex>.sig` manifest's layers, and cosign v3 referrer manifests whose layer is
//! a Sigstore bundle, listed by the referrers API (OCI distribution v1.1) or, only when
//! the registry does not serve that API, by the referrers tag schema `sha256-<hex>` (an
//! index of the same referrer manifests). A missing tag means "no signature of that
//! kind"; other registry errors abort. At most [`MAX_CANDIDATES`] referrers are read;
//! blobs are size-capped and their digests re-checked. No verification happens here.

use crate::domain::digest::Digest;
use crate::domain::manifest::{Descriptor, ImageManifest, Manifest};
use crate::ports::{Referrers, Registry, RegistryError, RegistryErrorKind};

use super::cosign_v2::{SignatureLayer, ANN_SIGNATURE, SIMPLESIGNING_MEDIA_TYPE};
use super::cosign_v3::BUNDLE_MEDIA_TYPE_PREFIX;
use super::Rejection;

/// Largest SimpleSigning payload or bundle read.
pub const MAX_SIGNATURE_BLOB: u64 = 1024 * 1024;
/// Most signature layers or referrers looked at per digest.
pub const MAX_CANDIDATES: usize = 32;
/// The artifact type of cosign v3's bundle referrers (its manifest's `artifactType`);
/// the referrers API is asked for this type only.
pub const COSIGN_BUNDLE_ARTIFACT_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// A signature found in the registry, ready to check.
#[derive(Clone, Debug)]
pub enum Candidate {
    /// A cosign v2 `.sig` layer.
    V2 {
        /// Payload and annotations.
        layer: SignatureLayer,
        /// Where it came from, for messages.
        source: String,
    },
    /// A Sigstore bundle referrer.
    V3 {
        /// Bundle JSON.
        bundle: Vec<u8>,
        /// Where it came from, for messages.
        source: String,
    },
    /// Something signature-shaped that cannot be used (too big, malformed).
    Unusable(Rejection),
}

/// `None` for a missing tag, the parsed manifest otherwise.
async fn manifest_at(
    registry: &dyn Registry,
    reference: &str,
) -> Result<Option<Manifest>, RegistryError> {
    let fetched = match registry.manifest(reference).await {
        Ok(m) => m,
        Err(e) if e.kind == RegistryErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Manifest::parse(&fetched.media_type, &fetched.body)
        .map(Some)
        .map_err(|e| {
            RegistryError::new(
                RegistryErrorKind::Protocol,
                format!("failed to parse manifest '{reference}': {e}"),
            )
        })
}

async fn small_blob(
    registry: &dyn Registry,
    descriptor: &Descriptor,
    source: &str,
) -> Result<Result<Vec<u8>, Rejection>, RegistryError> {
    if descriptor.size > MAX_SIGNATURE_BLOB {
        return Ok(Err(Rejection::new(
            source,
            "discovery",
            format!(
                "blob of {} bytes exceeds the {MAX_SIGNATURE_BLOB}-byte limit",
                descriptor.size
            ),
        )));
    }
    let bytes = registry.blob_bytes(descriptor, MAX_SIGNATURE_BLOB).await?;
    if Digest::of(&bytes) != descriptor.digest {
        return Ok(Err(Rejection::new(
            source,
            "discovery",
            format!("blob does not match its digest {}", descriptor.digest),
        )));
    }
    Ok(Ok(bytes.to_vec()))
}

/// The layers of `sha256-<hex>.sig`.
pub async fn v2_candidates(
    registry: &dyn Registry,
    digest: &Digest,
) -> Result<Vec<Candidate>, RegistryError> {
    let tag = format!("{}.sig", digest.tag_form());
    let manifest = match manifest_at(registry, &tag).await? {
        None => return Ok(Vec::new()),
        Some(Manifest::Image(m)) => m,
        Some(Manifest::Index(_)) => {
            let source = format!("tag {tag}");
            return Ok(vec![Candidate::Unusable(Rejection::new(
                &source,
                "discovery",
                "signature tag is an index, expected a manifest",
            ))]);
        }
    };
    let mut out = Vec::new();
    for (i, layer) in manifest.layers.iter().enumerate().take(MAX_CANDIDATES) {
        let source = format!("tag {tag} layer {i}");
        if layer.media_type != SIMPLESIGNING_MEDIA_TYPE
            && !layer.annotations.contains_key(ANN_SIGNATURE)
        {
            continue;
        }
        out.push(match small_blob(registry, layer, &source).await? {
            Ok(payload) => Candidate::V2 {
                layer: SignatureLayer {
                    payload,
                    annotations: layer.annotations.clone(),
                },
                source,
            },
            Err(r) => Candidate::Unusable(r),
        });
    }
    Ok(out)
}

/// The referrer manifests among `entries` (index descriptors) that may hold a bundle:
/// those without an artifact type or with a Sigstore bundle one, at most
/// [`MAX_CANDIDATES`], each fetched by digest (a missing one is skipped).
async fn bundle_referrers(
    registry: &dyn Registry,
    entries: &[Descriptor],
    listed_by: &str,
) -> Result<Vec<(String, ImageManifest)>, RegistryError> {
    let mut list = Vec::new();
    let bundles = entries.iter().filter(|entry| {
        entry
            .artifact_type
            .as_deref()
            .is_none_or(|t| t.starts_with(BUNDLE_MEDIA_TYPE_PREFIX))
    });
    for entry in bundles.take(MAX_CANDIDATES) {
        let reference = entry.digest.to_string();
        if let Some(Manifest::Image(m)) = manifest_at(registry, &reference).await? {
            list.push((format!("{listed_by} referrer {reference}"), m));
        }
    }
    Ok(list)
}

/// The referrer manifests of the `sha256-<hex>` referrers tag schema (cosign's fallback
/// for registries without the referrers API).
async fn fallback_referrers(
    registry: &dyn Registry,
    digest: &Digest,
) -> Result<Vec<(String, ImageManifest)>, RegistryError> {
    let tag = digest.tag_form();
    match manifest_at(registry, &tag).await? {
        None => Ok(Vec::new()),
        Some(Manifest::Image(m)) => Ok(vec![(format!("tag {tag}"), m)]),
        Some(Manifest::Index(index)) => {
            bundle_referrers(registry, &index.manifests, &format!("tag {tag}")).await
        }
    }
}

/// The bundles of the referrers of `digest`: through the referrers API, or through the
/// `sha256-<hex>` fallback tag when the registry does not serve that API.
pub async fn v3_candidates(
    registry: &dyn Registry,
    digest: &Digest,
) -> Result<Vec<Candidate>, RegistryError> {
    let referrers = match registry
        .referrers(digest, Some(COSIGN_BUNDLE_ARTIFACT_TYPE))
        .await?
    {
        Referrers::Listed(entries) => bundle_referrers(registry, &entries, "referrers API").await?,
        Referrers::Unsupported => fallback_referrers(registry, digest).await?,
    };
    let mut out = Vec::new();
    for (source, manifest) in referrers {
        if let Some(subject) = &manifest.subject {
            if &subject.digest != digest {
                out.push(Candidate::Unusable(Rejection::new(
                    &source,
                    "referrer subject",
                    format!("referrer is attached to {}, not {digest}", subject.digest),
                )));
                continue;
            }
        }
        for layer in manifest
            .layers
            .iter()
            .filter(|l| l.media_type.starts_with(BUNDLE_MEDIA_TYPE_PREFIX))
        {
            out.push(match small_blob(registry, layer, &source).await? {
                Ok(bundle) => Candidate::V3 {
                    bundle,
                    source: source.clone(),
                },
                Err(r) => Candidate::Unusable(r),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "discover_tests.rs"]
mod tests;
