//! The referrers API of the OCI distribution spec v1.1: `GET /v2/<repo>/referrers/<digest>
//! ?artifactType=<type>`, answered with an image index of the manifests whose `subject`
//! is the digest. As the spec says:
//!
//! - a registry without the API answers 404: that is [`Referrers::Unsupported`], and so
//!   is a first answer that is not an image index (a proxy's HTML page, a JSON error), so
//!   the caller falls back to the referrers tag schema (`sha256-<hex>`);
//! - a registry MAY ignore the `artifactType` filter; it says it applied it with
//!   `OCI-Filters-Applied: artifactType`, and without that header the filtering is done
//!   here, on each descriptor's `artifactType`;
//! - the index may come in pages linked by `Link: <...>; rel="next"` (parsed by
//!   `tags::next_link`, resolved and checked by `RegistryClient::follow_link`, as for tag
//!   pages).
//!
//! Everything the registry controls is bounded: all pages together are capped like one
//! manifest (`max_manifest_bytes`), at most [`MAX_REFERRER_PAGES`] pages are followed,
//! and a `Link` back to a page already read is an error. No auth or retry logic here:
//! every page goes through `RegistryClient::send`. Must not import `verify`.

use std::collections::HashSet;
use std::fmt;

use reqwest::header::{ACCEPT, CONTENT_TYPE, LINK};

use super::body::read_capped_into;
use super::client::{Access, RegistryClient};
use super::failure::{err, unexpected};
use super::tags::next_link;
use crate::domain::digest::Digest;
use crate::domain::manifest::{ImageIndex, OCI_INDEX};
use crate::ports::{Referrers, RegistryError, RegistryErrorKind};

/// Most pages of one referrers listing followed before giving up.
pub const MAX_REFERRER_PAGES: usize = 16;
/// The header a registry names the filters it applied in.
const FILTERS_APPLIED: &str = "oci-filters-applied";

/// True when an `OCI-Filters-Applied` value lists `artifactType`.
fn filter_applied(value: &str) -> bool {
    value.split(',').any(|f| f.trim() == "artifactType")
}

/// One page as read: its index, the filter it applied, and the next page's `Link`.
struct Page {
    index: ImageIndex,
    filtered: bool,
    next: Option<String>,
}

impl RegistryClient {
    fn referrers_error(
        &self,
        digest: &Digest,
        kind: RegistryErrorKind,
        detail: impl fmt::Display,
    ) -> RegistryError {
        err(
            kind,
            format!(
                "failed to list referrers of {digest} in '{}' on {}: {detail}",
                self.repository,
                self.base_url()
            ),
        )
    }

    /// The referrers of `digest` (of `artifact_type` only, when given), every page, or
    /// [`Referrers::Unsupported`] when the registry does not serve the API.
    pub(crate) async fn list_referrers(
        &self,
        digest: &Digest,
        artifact_type: Option<&str>,
    ) -> Result<Referrers, RegistryError> {
        let first = self.url(&format!("referrers/{digest}"));
        let mut url = reqwest::Url::parse(&first).map_err(|_| {
            self.referrers_error(
                digest,
                RegistryErrorKind::Config,
                format!("invalid URL '{first}'"),
            )
        })?;
        if let Some(t) = artifact_type {
            url.query_pairs_mut().append_pair("artifactType", t);
        }
        let budget = self.settings.max_manifest_bytes;
        let mut used = 0u64;
        let mut seen: HashSet<String> = HashSet::new();
        let mut listed = Vec::new();
        let mut body = Vec::new();
        let mut next = Some(url);
        while let Some(url) = next.take() {
            let first_page = seen.is_empty();
            if seen.len() >= MAX_REFERRER_PAGES {
                return Err(self.referrers_error(
                    digest,
                    RegistryErrorKind::Integrity,
                    format!("more than {MAX_REFERRER_PAGES} pages (the registry keeps linking to another page, {url}); the registry is broken or hostile"),
                ));
            }
            if !seen.insert(url.to_string()) {
                return Err(self.referrers_error(
                    digest,
                    RegistryErrorKind::Protocol,
                    format!("the registry's Link leads back to a page already read ({url}), so its pagination loops"),
                ));
            }
            let page = match self
                .referrers_page(digest, &url, budget - used, &mut body)
                .await
            {
                Err(e) if first_page && e.kind == RegistryErrorKind::NotFound => {
                    tracing::debug!(%digest, "the registry has no referrers API (404); using the referrers tag schema");
                    return Ok(Referrers::Unsupported);
                }
                Err(e) => return Err(e),
                Ok(None) if first_page => {
                    tracing::debug!(%digest, "the registry answered the referrers API with something other than an image index; using the referrers tag schema");
                    return Ok(Referrers::Unsupported);
                }
                Ok(None) => {
                    return Err(self.referrers_error(
                        digest,
                        RegistryErrorKind::Protocol,
                        format!("the page {url} is not an OCI image index ({OCI_INDEX})"),
                    ))
                }
                Ok(Some(page)) => page,
            };
            used += body.len() as u64;
            let keep = |d: &crate::domain::manifest::Descriptor| {
                page.filtered || artifact_type.is_none_or(|t| d.artifact_type.as_deref() == Some(t))
            };
            listed.extend(page.index.manifests.into_iter().filter(keep));
            if let Some(target) = page.next {
                next =
                    Some(self.follow_link(&url, &target).map_err(|d| {
                        self.referrers_error(digest, RegistryErrorKind::Protocol, d)
                    })?);
            }
        }
        Ok(Referrers::Listed(listed))
    }

    /// One page, read into `body` within `remaining` bytes; `None` when the answer is not
    /// an OCI image index (its `Content-Type` or its `mediaType` says otherwise).
    async fn referrers_page(
        &self,
        digest: &Digest,
        url: &reqwest::Url,
        remaining: u64,
        body: &mut Vec<u8>,
    ) -> Result<Option<Page>, RegistryError> {
        let what = "list referrers";
        let url_s = url.to_string();
        let build = |c: &reqwest::Client| Ok(c.get(url.clone()).header(ACCEPT, OCI_INDEX));
        let resp = self.send(what, &url_s, Access::Pull, true, &build).await?;
        if !resp.status().is_success() {
            return Err(unexpected(what, &url_s, resp.status()));
        }
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header(CONTENT_TYPE).unwrap_or_default();
        let filtered = header(reqwest::header::HeaderName::from_static(FILTERS_APPLIED))
            .is_some_and(|v| filter_applied(&v));
        let next = header(LINK).and_then(|v| next_link(&v));
        let base_type = content_type.split(';').next().unwrap_or_default().trim();
        if base_type != OCI_INDEX {
            return Ok(None);
        }
        read_capped_into(resp, remaining, what, &url_s, body)
            .await
            .map_err(|e| match e.kind {
                RegistryErrorKind::Integrity => self.referrers_error(
                    digest,
                    RegistryErrorKind::Integrity,
                    format!("the referrers index is larger than {} bytes (the manifest size cap), counting every page; the registry is broken or hostile, or the image has far too many referrers", self.settings.max_manifest_bytes),
                ),
                _ => e,
            })?;
        let index: ImageIndex = serde_json::from_slice(body).map_err(|e| {
            self.referrers_error(
                digest,
                RegistryErrorKind::Protocol,
                format!("invalid referrers index {url_s}: {e}"),
            )
        })?;
        if index.media_type.as_deref().is_some_and(|m| m != OCI_INDEX) {
            return Ok(None);
        }
        Ok(Some(Page {
            index,
            filtered,
            next,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_counts_as_applied_only_when_named() {
        assert!(filter_applied("artifactType"));
        assert!(filter_applied("annotation, artifactType"));
        assert!(!filter_applied(""));
        assert!(!filter_applied("artifacttype"));
        assert!(!filter_applied("artifactTypes"));
    }
}
