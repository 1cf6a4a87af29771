//! The local-disk store as the [`ArtifactStore`] port: each method is the inherent one
//! of [`Storage`] (or [`PendingArtifact`]) of the same meaning. Reconcile, pipeline and
//! controller reach the disk only through this.

use std::time::{Duration, SystemTime};

use super::{PendingArtifact, Storage};
use crate::domain::digest::Digest;
use crate::ports::{ArtifactStore, PendingWrite, StoreError, StoredFile};

impl PendingWrite for PendingArtifact {
    fn written(&self) -> u64 {
        PendingArtifact::written(self)
    }

    fn commit(self: Box<Self>) -> Result<StoredFile, StoreError> {
        PendingArtifact::commit(*self)
    }
}

impl ArtifactStore for Storage {
    fn begin_write(
        &self,
        rel: &str,
        known: Option<Digest>,
    ) -> Result<Box<dyn PendingWrite>, StoreError> {
        let pending = match known {
            Some(digest) => self.create_known(rel, digest)?,
            None => self.create(rel)?,
        };
        Ok(Box::new(pending))
    }

    fn exists(&self, rel: &str) -> bool {
        Storage::exists(self, rel)
    }

    fn verify(&self, rel: &str, digest: &Digest) -> Result<bool, StoreError> {
        Storage::verify(self, rel, digest)
    }

    fn link_artifact(&self, from: &StoredFile, to: &str) -> Result<(), StoreError> {
        Storage::link_artifact(self, from, to)
    }

    fn link_latest(&self, artifact_rel: &str) -> Result<String, StoreError> {
        Storage::link_latest(self, artifact_rel)
    }

    fn garbage_collect(
        &self,
        dir_rel: &str,
        keep: &str,
        records: usize,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<Vec<String>, StoreError> {
        Storage::garbage_collect(self, dir_rel, keep, records, ttl, now)
    }

    fn remove_object(&self, rel: &str) -> Result<(), StoreError> {
        self.remove_file(rel)
    }

    fn remove_dir(&self, dir_rel: &str) -> Result<(), StoreError> {
        Storage::remove_dir(self, dir_rel)
    }

    fn remove_stale_temps(&self) -> Result<Vec<String>, StoreError> {
        Storage::remove_stale_temps(self)
    }

    fn list_artifacts(&self) -> Result<Vec<String>, StoreError> {
        Storage::list_artifacts(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn writes_through_the_port_land_where_the_adapter_reads() {
        let dir = tempfile::tempdir().unwrap();
        let concrete = Storage::new(dir.path());
        let store: &dyn ArtifactStore = &concrete;
        let rel = crate::ports::store::artifact_path("ns", "app", "a.tar.gz").unwrap();
        let mut pending = store.begin_write(&rel, None).unwrap();
        pending.write_all(b"one").unwrap();
        assert_eq!(pending.written(), 3);
        let stored = pending.commit().unwrap();
        assert_eq!(
            (stored.digest.clone(), stored.size),
            (Digest::of(b"one"), 3)
        );
        assert!(store.exists(&rel) && store.verify(&rel, &stored.digest).unwrap());
        assert_eq!(store.list_artifacts().unwrap(), vec![rel.clone()]);
        store.remove_object(&rel).unwrap();
        assert!(!concrete.exists(&rel));
        store.remove_object(&rel).unwrap();
    }
}
