//! Manifests: `HEAD` for the digest only (falling back to `GET` when the registry sends
//! no `Docker-Content-Digest`), and `GET` with a size cap whose body digest is checked
//! against the header and against the reference when it is a digest, then kept by digest
//! for the connector's other sessions (`memo.rs`, read only by a session the repository
//! has answered). Requests go through `RegistryClient::send`; no auth or retry logic here.

use std::sync::atomic::Ordering;

use reqwest::header::{ACCEPT, CONTENT_TYPE};

use super::body::read_capped;
use super::client::{Access, RegistryClient};
use super::failure::{err, unexpected};
use crate::domain::digest::Digest;
use crate::domain::manifest::ACCEPTED_MANIFESTS;
use crate::domain::reference::valid_reference;
use crate::ports::{FetchedManifest, RegistryError, RegistryErrorKind};

impl RegistryClient {
    /// `HEAD` the manifest; falls back to `GET` when no `Docker-Content-Digest` is sent,
    /// and when the HEAD is refused or not found (for the registry's error body).
    pub(crate) async fn head_manifest(&self, reference: &str) -> Result<Digest, RegistryError> {
        check_reference(reference)?;
        let url = self.url(&format!("manifests/{reference}"));
        let build =
            |c: &reqwest::Client| Ok(c.head(&url).header(ACCEPT, ACCEPTED_MANIFESTS.join(", ")));
        let resp = match self
            .send("resolve manifest", &url, Access::Pull, true, &build)
            .await
        {
            Ok(resp) => resp,
            // A HEAD answer has no body: the registry's own words for the failure come
            // from a GET, as go-containerregistry (and so Flux) falls back to one.
            Err(e)
                if e.registry_text.is_none()
                    && matches!(
                        e.kind,
                        RegistryErrorKind::NotFound | RegistryErrorKind::Unauthorized
                    ) =>
            {
                return match self.get_manifest(reference).await {
                    Ok(m) => Ok(m.digest),
                    Err(g) if g.registry_text.is_some() => Err(g),
                    Err(_) => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        if !resp.status().is_success() {
            return Err(unexpected("resolve manifest", &url, resp.status()));
        }
        self.answered.store(true, Ordering::Relaxed);
        match header_digest(&resp) {
            Some(d) => {
                if let Ok(want) = reference.parse::<Digest>() {
                    if want != d {
                        return Err(err(
                            RegistryErrorKind::Integrity,
                            format!(
                                "failed to resolve manifest {url}: the registry reports digest {d}"
                            ),
                        ));
                    }
                }
                Ok(d)
            }
            None => Ok(self.get_manifest(reference).await?.digest),
        }
    }

    /// `GET` the manifest, capped at `max_manifest_bytes`, its digest checked against the
    /// `Docker-Content-Digest` header and against `reference` when it is a digest.
    pub(crate) async fn get_manifest(
        &self,
        reference: &str,
    ) -> Result<FetchedManifest, RegistryError> {
        check_reference(reference)?;
        let host = self.registry_url.authority().to_string();
        let by_digest = reference.parse::<Digest>().ok();
        if let Some(digest) = by_digest.as_ref() {
            if self.answered.load(Ordering::Relaxed) {
                if let Some(kept) = self.settings.manifests.get(&host, &self.repository, digest) {
                    return Ok(kept);
                }
            }
        }
        let url = self.url(&format!("manifests/{reference}"));
        let what = "fetch manifest";
        let build =
            |c: &reqwest::Client| Ok(c.get(&url).header(ACCEPT, ACCEPTED_MANIFESTS.join(", ")));
        let resp = self.send(what, &url, Access::Pull, true, &build).await?;
        if !resp.status().is_success() {
            return Err(unexpected(what, &url, resp.status()));
        }
        let media_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let claimed = header_digest(&resp);
        let body = read_capped(resp, self.settings.max_manifest_bytes, what, &url).await?;
        let digest = Digest::of(&body);
        let mismatch = |other: &Digest, source: &str| {
            err(
                RegistryErrorKind::Integrity,
                format!(
                    "failed to {what} {url}: body has digest {digest} but {source} says {other}"
                ),
            )
        };
        if let Some(c) = claimed.as_ref().filter(|c| **c != digest) {
            return Err(mismatch(c, "the Docker-Content-Digest header"));
        }
        if let Some(want) = by_digest.filter(|w| *w != digest) {
            return Err(mismatch(&want, "the reference"));
        }
        self.answered.store(true, Ordering::Relaxed);
        let fetched = FetchedManifest {
            digest,
            media_type,
            body,
        };
        self.settings
            .manifests
            .put(&host, &self.repository, &fetched);
        Ok(fetched)
    }
}

fn check_reference(reference: &str) -> Result<(), RegistryError> {
    if valid_reference(reference) {
        Ok(())
    } else {
        Err(err(
            RegistryErrorKind::Config,
            format!("invalid reference '{reference}': expected a tag or a sha256 digest"),
        ))
    }
}

fn header_digest(resp: &reqwest::Response) -> Option<Digest> {
    resp.headers()
        .get("docker-content-digest")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
