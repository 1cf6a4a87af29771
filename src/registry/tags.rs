//! Tag listing: `GET /v2/<repo>/tags/list?n=1000`, following `Link: <...>; rel="next"`
//! until the registry stops sending one. Everything a registry controls is bounded:
//!
//! - each page body is streamed with a byte cap (`max_tag_page_bytes`) and parsed by a
//!   streaming visitor (`tag_page.rs`) that keeps only valid tags (the distribution
//!   spec's grammar, at most 128 characters); a longer or malformed tag costs the page
//!   buffer only, and is reported once in a warning;
//! - the memory kept for the listing (tags plus visited pages) is capped
//!   (`max_tag_list_bytes`), and so is the number of tags (`max_tags`);
//! - a `Link` back to a page already listed (same URL, or the same `last`) is an error,
//!   and so is a page without any valid tag that links on;
//! - a `Link` to another origin is fetched without credentials (`client.rs`); one from
//!   https to http, or to another scheme, is refused (`origin.rs`);
//! - the whole listing has a deadline: the request timeout (`spec.timeout`, `--timeout`),
//!   at most `max_tag_list_duration`.
//!
//! No auth or retry logic here: every page goes through `RegistryClient::send`.

use std::collections::HashSet;
use std::fmt;

use reqwest::header::LINK;
use serde::de::DeserializeSeed;
use sha2::{Digest as _, Sha256};

use super::body::read_capped_into;
use super::client::{Access, RegistryClient};
use super::failure::{err, unexpected};
use super::origin::check_target;
use super::tag_page::{Cap, Page, Sink};
use crate::ports::{RegistryError, RegistryErrorKind};

/// Page size asked for.
const PAGE: usize = 1000;
/// What one visited page costs in the listing's memory budget: its URL and its `last`
/// value, each kept as a sha256 in a hash set.
const PAGE_COST: u64 = 2 * 48;

/// The target of the `rel="next"` entry of a `Link` header value.
pub fn next_link(value: &str) -> Option<String> {
    value.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        let is_next = params.split(';').any(|p| {
            let p = p.trim();
            p == r#"rel="next""# || p == "rel=next"
        });
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then(|| target.to_string())
    })
}

fn key(kind: &str, value: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    h.update([0]);
    h.update(value.as_bytes());
    h.finalize().into()
}

const ADVICE: &str = "use a tag or digest ref instead of a semver range";

impl RegistryClient {
    fn list_error(&self, kind: RegistryErrorKind, detail: impl fmt::Display) -> RegistryError {
        err(
            kind,
            format!(
                "failed to list tags of '{}' on {}: {detail}",
                self.repository,
                self.base_url()
            ),
        )
    }

    fn cap_error(&self, cap: Cap, sink: &Sink) -> RegistryError {
        let detail = match cap {
            Cap::Count => format!("more than {} tags", self.settings.max_tags),
            Cap::Memory => format!(
                "the tag list needs more than {} bytes of memory ({} tags kept)",
                self.settings.max_tag_list_bytes,
                sink.tags.len()
            ),
        };
        self.list_error(
            RegistryErrorKind::Integrity,
            format!("{detail}; prune old tags in the repository, or {ADVICE}"),
        )
    }

    /// Every valid tag of the repository, page by page, within the listing's caps and
    /// deadline.
    pub(crate) async fn list_tags(&self) -> Result<Vec<String>, RegistryError> {
        let mut sink = Sink::new(self.settings.max_tag_list_bytes, self.settings.max_tags);
        let deadline = self.small_timeout.min(self.settings.max_tag_list_duration);
        let listed = tokio::time::timeout(deadline, self.list_pages(&mut sink)).await;
        match listed {
            Ok(r) => r?,
            Err(_) => {
                return Err(self.list_error(
                    RegistryErrorKind::Timeout,
                    format!(
                        "not finished within {deadline:?} ({} pages, {} tags so far); the listing is bounded by the registry timeout ({}), at most {:?}; raise the timeout, prune old tags, or {ADVICE}",
                        sink.pages,
                        sink.tags.len(),
                        self.audience.timeout(),
                        self.settings.max_tag_list_duration
                    ),
                ))
            }
        }
        if let Some(example) = &sink.first_skipped {
            tracing::warn!(
                repository = %self.repository,
                registry = %self.base_url(),
                skipped = sink.skipped,
                example = %example,
                "skipped tags that are not valid OCI tags (at most 128 characters of [A-Za-z0-9_.-], not starting with '.' or '-'); they cannot be pulled by tag and play no part in semver selection"
            );
        }
        Ok(sink.tags)
    }

    async fn list_pages(&self, sink: &mut Sink) -> Result<(), RegistryError> {
        let what = "list tags";
        let first = self.url(&format!("tags/list?n={PAGE}"));
        let mut next = Some(reqwest::Url::parse(&first).map_err(|_| {
            self.list_error(RegistryErrorKind::Config, format!("invalid URL '{first}'"))
        })?);
        let mut seen: HashSet<[u8; 32]> = HashSet::new();
        let mut body = Vec::new();
        while let Some(url) = next.take() {
            let last = url
                .query_pairs()
                .find(|(k, _)| k == "last")
                .map(|(_, v)| v.into_owned());
            let repeated = !seen.insert(key("url", url.as_str()))
                || last.is_some_and(|l| !seen.insert(key("last", &l)));
            if repeated {
                return Err(self.list_error(
                    RegistryErrorKind::Protocol,
                    format!("the registry's Link leads back to a page already listed ({url}), so its pagination loops; {ADVICE} until the registry is fixed"),
                ));
            }
            sink.charge(PAGE_COST)
                .map_err(|cap| self.cap_error(cap, sink))?;
            sink.pages += 1;
            sink.valid_on_page = 0;
            let url_s = url.to_string();
            let build = |c: &reqwest::Client| Ok(c.get(url.clone()));
            let resp = self.send(what, &url_s, Access::Pull, true, &build).await?;
            if !resp.status().is_success() {
                return Err(unexpected(what, &url_s, resp.status()));
            }
            let link = resp
                .headers()
                .get(LINK)
                .and_then(|v| v.to_str().ok())
                .and_then(next_link);
            let cap = self.settings.max_tag_page_bytes;
            let read = read_capped_into(resp, cap, what, &url_s, &mut body).await;
            read.map_err(|e| {
                if e.kind == RegistryErrorKind::Integrity {
                    self.list_error(
                        RegistryErrorKind::Integrity,
                        format!("the page {url_s} is larger than {cap} bytes, far more than a page of {PAGE} valid tags (at most 128 characters each); the registry is broken or hostile; {ADVICE}"),
                    )
                } else {
                    e
                }
            })?;
            let mut de = serde_json::Deserializer::from_slice(&body);
            let parsed = Page(&mut *sink)
                .deserialize(&mut de)
                .and_then(|()| de.end());
            if let Err(e) = parsed {
                return Err(match sink.hit.take() {
                    Some(cap) => self.cap_error(cap, sink),
                    None => self.list_error(
                        RegistryErrorKind::Protocol,
                        format!("invalid tag list page {url_s}: {e}"),
                    ),
                });
            }
            let Some(target) = link else {
                continue;
            };
            if sink.valid_on_page == 0 {
                return Err(self.list_error(
                    RegistryErrorKind::Protocol,
                    format!("the page {url_s} holds no valid tag but links to another; {ADVICE}"),
                ));
            }
            let resolved = self
                .follow_link(&url, &target)
                .map_err(|detail| self.list_error(RegistryErrorKind::Protocol, detail))?;
            next = Some(resolved);
        }
        Ok(())
    }

    /// The page a `Link` target of page `url` names, resolved against it; refused (with
    /// the reason) when invalid, not http(s), or a step down from https to http. A page
    /// on another origin is fetched without credentials (`send`). Shared by the tag
    /// listing and the referrers listing.
    pub(super) fn follow_link(
        &self,
        url: &reqwest::Url,
        target: &str,
    ) -> Result<reqwest::Url, String> {
        let resolved = url
            .join(target)
            .map_err(|_| format!("the page {url} has an invalid Link '{target}'"))?;
        // The page as it was really fetched (plain HTTP after Flux's fallback).
        let spoken =
            reqwest::Url::parse(&self.url_as_spoken(url.as_str())).unwrap_or_else(|_| url.clone());
        check_target(&spoken, &resolved)
            .map_err(|e| format!("refused to follow the Link of {url}: {e}"))?;
        if !self.is_registry_origin(&resolved) {
            tracing::debug!(link = %resolved, "page on another origin; fetching it without credentials");
        }
        Ok(resolved)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_next_link() {
        assert_eq!(
            next_link(r#"</v2/a/tags/list?last=x&n=1000>; rel="next""#).as_deref(),
            Some("/v2/a/tags/list?last=x&n=1000")
        );
        assert_eq!(
            next_link(r#"<https://h/p?a=1>; rel="prev", <https://h/q>; rel="next""#).as_deref(),
            Some("https://h/q")
        );
        assert_eq!(next_link(r#"</v2/a/tags/list>; rel="prev""#), None);
    }
}
