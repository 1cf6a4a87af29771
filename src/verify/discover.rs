//! Finding candidate signatures of a digest through `ports::Registry`: the cosign v2
//! `sha256-<hex>.sig` manifest's layers, and the cosign v3 referrers fallback tag
//! `sha256-<hex>` (an index of referrer manifests whose layer is a Sigstore bundle).
//! A missing tag means "no signature of that kind"; other registry errors abort. Blobs
//! are size-capped and their digests re-checked. No verification happens here.

use crate::domain::digest::Digest;
use crate::domain::manifest::{Descriptor, ImageManifest, Manifest};
use crate::ports::{Registry, RegistryError, RegistryErrorKind};

use super::cosign_v2::{SignatureLayer, ANN_SIGNATURE, SIMPLESIGNING_MEDIA_TYPE};
use super::cosign_v3::BUNDLE_MEDIA_TYPE_PREFIX;
use super::Rejection;

/// Largest SimpleSigning payload or bundle read.
pub const MAX_SIGNATURE_BLOB: u64 = 1024 * 1024;
/// Most signature layers or referrers looked at per digest.
pub const MAX_CANDIDATES: usize = 32;

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

/// The bundles referenced from the `sha256-<hex>` referrers fallback tag.
pub async fn v3_candidates(
    registry: &dyn Registry,
    digest: &Digest,
) -> Result<Vec<Candidate>, RegistryError> {
    let tag = digest.tag_form();
    let referrers: Vec<(String, ImageManifest)> = match manifest_at(registry, &tag).await? {
        None => return Ok(Vec::new()),
        Some(Manifest::Image(m)) => vec![(format!("tag {tag}"), m)],
        Some(Manifest::Index(index)) => {
            let mut list = Vec::new();
            for entry in index.manifests.iter().take(MAX_CANDIDATES) {
                let is_bundle = entry
                    .artifact_type
                    .as_deref()
                    .is_none_or(|t| t.starts_with(BUNDLE_MEDIA_TYPE_PREFIX));
                if !is_bundle {
                    continue;
                }
                let reference = entry.digest.to_string();
                if let Some(Manifest::Image(m)) = manifest_at(registry, &reference).await? {
                    list.push((format!("tag {tag} referrer {reference}"), m));
                }
            }
            list
        }
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
