//! Step 1: a ref becomes a manifest digest. A tag costs one HEAD; a semver range lists the
//! tags (all pages), compiles the range and filter (as Flux does, so a bad range is a read
//! failure found after listing), then HEADs the winner; a digest costs nothing.

use crate::domain::digest::Digest;
use crate::domain::reference::{revision, RefSpec, RepositoryUrl};
use crate::domain::semver_range::choose_tag;
use crate::ports::Registry;

use super::PipelineError;

/// A ref pinned to the manifest (or index) digest it points at now, with the tag it
/// was found under and the Flux revision naming both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedRef {
    /// The manifest (or index) digest the ref points at.
    pub digest: Digest,
    /// The tag it was found under (tag and semver refs).
    pub tag: Option<String>,
    /// The Flux revision: `<tag>@sha256:<hex>` or the digest.
    pub revision: String,
}

/// Resolves `reference` in `url` to the digest it points at now.
pub async fn resolve(
    registry: &dyn Registry,
    url: &RepositoryUrl,
    reference: &RefSpec,
) -> Result<PinnedRef, PipelineError> {
    let tag = match reference {
        RefSpec::Digest(d) => {
            return Ok(PinnedRef {
                digest: d.clone(),
                tag: None,
                revision: revision(None, d),
            });
        }
        RefSpec::Tag(t) => t.clone(),
        RefSpec::Semver(semver) => {
            let tags = registry
                .tags()
                .await
                .map_err(|source| PipelineError::ListTags {
                    url: url.to_string(),
                    source,
                })?;
            let (range, filter) = semver.compile().map_err(|source| PipelineError::Semver {
                url: url.to_string(),
                source,
            })?;
            let chosen = choose_tag(
                tags.iter().map(String::as_str),
                &range,
                filter.as_ref(),
                semver.mapping,
            );
            match chosen {
                Some((t, _)) => t.to_string(),
                None => {
                    return Err(PipelineError::NoMatchingTag {
                        url: url.to_string(),
                        range: semver.range.clone(),
                        filter: filter
                            .as_ref()
                            .map(|f| format!(" with filter '{f}'"))
                            .unwrap_or_default(),
                        tags: tags.len(),
                    })
                }
            }
        }
    };
    let digest = registry
        .manifest_digest(&tag)
        .await
        .map_err(|source| PipelineError::Resolve {
            url: url.to_string(),
            reference: tag.clone(),
            source,
        })?;
    Ok(PinnedRef {
        revision: revision(Some(&tag), &digest),
        digest,
        tag: Some(tag),
    })
}
