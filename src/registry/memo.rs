//! Manifests kept by digest, shared by every session of a connector: a fleet of objects
//! that follow a few artifacts (a tag many tenants track, one artifact per environment)
//! fetches each manifest once, not once per object. Flux's source-controller fetches it
//! per object; at 1,000 objects over 50 artifacts that is 950 `GET`s the registry serves
//! for nothing.
//!
//! Safe to share because a digest names its bytes (the body was checked against it when
//! fetched), and only a session that was itself answered by the registry for the same
//! repository may read it ([`RegistryClient`](super::RegistryClient) tracks that): a
//! tenant without pull access to the repository never gets a manifest from here, even
//! one another tenant fetched.
//!
//! Bounded: only manifests of up to [`MAX_ENTRY`] bytes are kept, [`BUDGET`] bytes in
//! all, the oldest dropped first (`domain::fifo`).

use std::sync::{Arc, Mutex};

use crate::domain::digest::Digest;
use crate::domain::fifo::Fifo;
use crate::ports::FetchedManifest;

/// Largest manifest kept (an artifact's manifest is a few KiB; an index of many
/// platforms stays out).
pub const MAX_ENTRY: usize = 16 << 10;
/// Bytes of manifest bodies kept in all.
pub const BUDGET: usize = 1 << 20;

/// (registry host, repository, digest).
type Key = (String, String, Digest);

/// The shared manifests; clones share the same map.
#[derive(Clone)]
pub struct Manifests {
    inner: Arc<Mutex<Fifo<Key, FetchedManifest>>>,
}

impl Default for Manifests {
    fn default() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Fifo::new(BUDGET, MAX_ENTRY))),
        }
    }
}

impl std::fmt::Debug for Manifests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manifests").finish_non_exhaustive()
    }
}

impl Manifests {
    /// The manifest `digest` of `repository` on `host`, when kept.
    pub fn get(&self, host: &str, repository: &str, digest: &Digest) -> Option<FetchedManifest> {
        let inner = self.inner.lock().ok()?;
        inner
            .get(&(host.to_string(), repository.to_string(), digest.clone()))
            .cloned()
    }

    /// Keeps `manifest` (already checked against its digest) unless it is too large.
    pub fn put(&self, host: &str, repository: &str, manifest: &FetchedManifest) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let key = (
            host.to_string(),
            repository.to_string(),
            manifest.digest.clone(),
        );
        if inner.get(&key).is_none() {
            inner.put(key, manifest.clone(), manifest.body.len());
        }
    }

    /// Bytes of manifest bodies kept now.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner.lock().map(|i| i.cost()).unwrap_or(0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn manifest(body: Vec<u8>) -> FetchedManifest {
        FetchedManifest {
            digest: Digest::of(&body),
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            body: body.into(),
        }
    }

    #[test]
    fn a_manifest_is_found_only_under_its_own_host_and_repository() {
        let memo = Manifests::default();
        let m = manifest(b"{\"schemaVersion\":2}".to_vec());
        memo.put("r.example", "team-a/app", &m);
        assert_eq!(
            memo.get("r.example", "team-a/app", &m.digest).unwrap().body,
            m.body
        );
        assert!(memo.get("r.example", "team-b/app", &m.digest).is_none());
        assert!(memo.get("other.example", "team-a/app", &m.digest).is_none());
    }

    #[test]
    fn large_manifests_are_not_kept_and_the_oldest_go_first_past_the_budget() {
        let memo = Manifests::default();
        let big = manifest(vec![b'x'; MAX_ENTRY + 1]);
        memo.put("r", "a", &big);
        assert!(memo.get("r", "a", &big.digest).is_none());
        let all: Vec<_> = (0..(BUDGET / MAX_ENTRY + 8))
            .map(|i| manifest(vec![u8::try_from(i % 251).unwrap(); MAX_ENTRY - i]))
            .collect();
        for m in &all {
            memo.put("r", "a", m);
            assert!(memo.bytes() <= BUDGET);
        }
        assert!(memo.get("r", "a", &all[0].digest).is_none());
        assert!(memo.get("r", "a", &all[all.len() - 1].digest).is_some());
    }
}
