//! Artifacts shared between objects: a fleet of objects that follow one artifact (a tag
//! many tenants track, one artifact per environment) builds it once. The first object's
//! store step pulls and merges the layers; the next object that resolves the same
//! manifest of the same repository with the same recipe (layer selection, ignore rules)
//! gets a hard link to that file under its own path (`ArtifactStore::link_artifact`),
//! with no blob request and no merge. Flux's source-controller pulls and unpacks per
//! object: at 1,000 objects over 50 artifacts, 950 pulls and merges for nothing.
//!
//! Shared only with a session that proved it may pull those layers itself
//! (`Registry::prove_pull`: the registry answered its own manifest request, no proxy of
//! the object's choosing stood between them, and it answers that session's request for
//! the first byte of each selected layer), so a tenant never obtains through the share
//! what its own login could not pull, even from a registry that authorises manifests and
//! blobs separately (ECR's IAM actions `BatchGetImage` and `GetDownloadUrlForLayer`). The
//! proof costs one small request per layer, made only when there is a build to link, and
//! none when the build's download and the linking session were both anonymous (no
//! credentials, client certificate or proxy: the registry cannot tell them apart). The
//! proof goes over the scheme the proving session's own settings learnt, never one
//! another tenant's proxy or `insecure` taught (the adapter keys that memory by them). Not
//! a `HEAD`: it asks whether a blob exists, which a registry may authorise apart from
//! reading it (ECR has a third action for existence, `BatchCheckLayerAvailability`).
//! The key binds the bytes: the manifest digest names every layer digest, and the recipe
//! is all the merge depends on besides (the controller's limits are the same for every
//! object). Verification is not shared: every object's own `spec.verify` ran before its
//! store step.
//!
//! What a hard link cannot tell: a file renamed over the first object's path later
//! (that object rebuilt the same revision with other settings) is another file, so every
//! store at a path first forgets the entries naming it; a file removed (garbage
//! collection, a deleted object) makes the link fail, and the object builds its own.
//! A file changed in place keeps its path and size, so the store checks the digest
//! recorded here before it links (`ArtifactStore::link_artifact`). A link is stamped
//! modified now, as a new file would be (`Last-Modified`, the newest-first order of
//! garbage collection); both names share the stamp, so the first object's file looks
//! newer than it is: at worst a client downloads it once more.
//! Bounded (`domain::fifo`): [`BUDGET`] bytes of keys and paths, oldest out first.

use std::sync::Mutex;

use crate::domain::digest::Digest;
use crate::domain::fifo::Fifo;
use crate::domain::ignore::IgnoreRules;
use crate::domain::layers::LayerSelector;
use crate::domain::reference::RepositoryUrl;

/// Bytes of keys and paths kept in all (a few thousand entries).
pub const BUDGET: usize = 1 << 20;
/// Largest entry kept (a long `spec.ignore` makes a long key; such objects build their own).
pub const MAX_ENTRY: usize = 4 << 10;

/// What an artifact is built from: where, which manifest, and how.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Recipe {
    host: String,
    repository: String,
    manifest: Digest,
    layers: LayerSelector,
    flux_rules: bool,
    ignore: String,
}

impl Recipe {
    /// The recipe of the artifact built from `manifest` of `url` with `layers` and `ignore`.
    pub fn new(
        url: &RepositoryUrl,
        manifest: &Digest,
        layers: &LayerSelector,
        ignore: &IgnoreRules,
    ) -> Self {
        let (flux_rules, text) = ignore.origin();
        Self {
            host: url.host.clone(),
            repository: url.repository.clone(),
            manifest: manifest.clone(),
            layers: layers.clone(),
            flux_rules,
            ignore: text.to_string(),
        }
    }

    /// Roughly the bytes the entry holds.
    fn cost(&self, built: &Built) -> usize {
        const FIXED: usize = 256;
        FIXED
            + self.host.len()
            + self.repository.len()
            + self.layers.media_type.as_ref().map_or(0, String::len)
            + self.ignore.len()
            + built.path.len()
    }
}

/// An artifact built once: its path in the store, digest and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// Path relative to the storage root.
    pub path: String,
    /// sha256 of the file.
    pub digest: Digest,
    /// Its size in bytes.
    pub size: u64,
    /// Its layers were downloaded by an anonymous session (`Registry::anonymous`).
    pub anonymous: bool,
}

/// The artifacts built so far, by recipe.
#[derive(Debug)]
pub struct SharedBuilds {
    inner: Mutex<Fifo<Recipe, Built>>,
}

impl Default for SharedBuilds {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Fifo::new(BUDGET, MAX_ENTRY)),
        }
    }
}

impl SharedBuilds {
    /// The artifact built with `recipe`, when one is known.
    pub fn get(&self, recipe: &Recipe) -> Option<Built> {
        self.inner.lock().ok()?.get(recipe).cloned()
    }

    /// Records that `built` was made with `recipe`; entries that named a file now
    /// replaced at the same path are forgotten first.
    pub fn put(&self, recipe: Recipe, built: Built) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        forget_path(&mut inner, &built.path);
        let cost = recipe.cost(&built);
        inner.put(recipe, built, cost);
    }

    /// Forgets every entry naming `path` (a file just stored there replaced it).
    pub fn stored_at(&self, path: &str) {
        if let Ok(mut inner) = self.inner.lock() {
            forget_path(&mut inner, path);
        }
    }

    /// Forgets `recipe` (its file could not be linked).
    pub fn forget(&self, recipe: &Recipe) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.remove(recipe);
        }
    }
}

fn forget_path(inner: &mut Fifo<Recipe, Built>, path: &str) {
    let stale: Vec<Recipe> = inner
        .iter()
        .filter(|(_, b)| b.path == path)
        .map(|(r, _)| r.clone())
        .collect();
    for r in stale {
        inner.remove(&r);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn url(repo: &str) -> RepositoryUrl {
        RepositoryUrl {
            host: "r.example".into(),
            repository: repo.into(),
        }
    }

    fn built(path: &str) -> Built {
        Built {
            path: path.into(),
            digest: Digest::of(path.as_bytes()),
            size: 1,
            anonymous: false,
        }
    }

    #[test]
    fn a_build_is_found_only_for_the_same_repository_manifest_and_recipe() {
        let shared = SharedBuilds::default();
        let m = Digest::of(b"manifest");
        let all = LayerSelector::default();
        let rules = IgnoreRules::flux_default();
        let key = Recipe::new(&url("team/app"), &m, &all, &rules);
        shared.put(key.clone(), built("a/app/x.tar.gz"));
        assert_eq!(shared.get(&key), Some(built("a/app/x.tar.gz")));
        let first = LayerSelector {
            first_only: true,
            ..LayerSelector::default()
        };
        let others = [
            Recipe::new(&url("team/other"), &m, &all, &rules),
            Recipe::new(&url("team/app"), &Digest::of(b"other"), &all, &rules),
            Recipe::new(&url("team/app"), &m, &first, &rules),
            Recipe::new(&url("team/app"), &m, &all, &IgnoreRules::none()),
            Recipe::new(
                &url("team/app"),
                &m,
                &all,
                &IgnoreRules::from_spec("*.md").unwrap(),
            ),
        ];
        for other in &others {
            assert_eq!(shared.get(other), None, "{other:?}");
        }
    }

    #[test]
    fn a_file_stored_again_at_a_path_ends_the_entries_that_named_it() {
        let shared = SharedBuilds::default();
        let rules = IgnoreRules::flux_default();
        let all = LayerSelector::default();
        let old = Recipe::new(&url("team/app"), &Digest::of(b"m"), &all, &rules);
        let new = Recipe::new(
            &url("team/app"),
            &Digest::of(b"m"),
            &all,
            &IgnoreRules::from_spec("*.md").unwrap(),
        );
        shared.put(old.clone(), built("a/app/x.tar.gz"));
        shared.put(new.clone(), built("a/app/x.tar.gz"));
        assert_eq!(shared.get(&old), None);
        assert!(shared.get(&new).is_some());
        shared.stored_at("a/app/x.tar.gz");
        assert_eq!(shared.get(&new), None);
        shared.put(old.clone(), built("b/app/x.tar.gz"));
        shared.forget(&old);
        assert_eq!(shared.get(&old), None);
    }
}
