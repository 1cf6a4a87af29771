//! The artifact store port: where artifacts live (`ocirepository/<namespace>/<name>/<file>`
//! for our kind, `flux/ocirepository/<namespace>/<name>/<file>` for Flux's kind in drop-in
//! mode, so objects of the two kinds with one name never share a folder; paths relative
//! to the store's root), how one is written (begin a write, stream bytes
//! in, commit: readers see the old file or the new one, never a partial one), checked,
//! linked as `latest`, garbage-collected and removed. The `storage` adapter implements
//! it on local disk; reconcile, pipeline and controller use only this trait. Every
//! method may block on disk: async callers use `spawn_blocking` for the long ones
//! (commit, digest checks). Names no adapter; imports only `domain`.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::domain::digest::Digest;
use crate::domain::names::{self, NameError};

/// Kind folder for `ocisource.dev` OCIRepository artifacts.
pub const OCI_KIND_DIR: &str = "ocirepository";

/// Kind folder for Flux's `source.toolkit.fluxcd.io` OCIRepository artifacts (drop-in mode).
pub const FLUX_OCI_KIND_DIR: &str = "flux/ocirepository";

/// Every kind folder, as the start-up check and the listing walk them.
pub const KIND_DIRS: [&str; 2] = [OCI_KIND_DIR, FLUX_OCI_KIND_DIR];

/// `ocirepository/<namespace>/<name>`: the folder of one object's artifacts. Fails when
/// the namespace is not an RFC 1123 label or the name not an RFC 1123 subdomain.
pub fn object_dir(namespace: &str, name: &str) -> Result<String, StoreError> {
    object_dir_in(OCI_KIND_DIR, namespace, name)
}

/// `<kind_dir>/<namespace>/<name>`, with the checks of [`object_dir`].
pub fn object_dir_in(kind_dir: &str, namespace: &str, name: &str) -> Result<String, StoreError> {
    names::check_object(namespace, name)?;
    Ok(format!("{kind_dir}/{namespace}/{name}"))
}

/// True when the store path `path` lies in the kind folder `kind_dir`.
pub fn in_kind_dir(kind_dir: &str, path: &str) -> bool {
    path.strip_prefix(kind_dir)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// `ocirepository/<namespace>/<name>/<file_name>`, with the checks of [`object_dir`].
pub fn artifact_path(namespace: &str, name: &str, file_name: &str) -> Result<String, StoreError> {
    Ok(format!("{}/{file_name}", object_dir(namespace, name)?))
}

/// A file that was stored: where, its digest, its size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredFile {
    /// Path relative to the storage root, `/`-separated.
    pub path: String,
    /// sha256 of the file's bytes.
    pub digest: Digest,
    /// Size in bytes.
    pub size: u64,
}

/// A failed store operation, naming the path.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Directory or temp file could not be created.
    #[error("failed to create artifact file in '{dir}'")]
    Create {
        /// Target directory.
        dir: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// Writing, syncing or renaming failed.
    #[error("failed to write artifact '{path}'")]
    Write {
        /// Target path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// Reading failed.
    #[error("failed to read artifact '{path}'")]
    Read {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// Removal failed.
    #[error("failed to remove '{path}'")]
    Remove {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// A relative path tried to leave the storage root.
    #[error("artifact path '{0}' is not a plain relative path inside the storage root")]
    BadPath(String),
    /// An object name that Kubernetes would refuse cannot name a folder of the store.
    #[error("refusing to build an artifact path from an invalid object name")]
    BadName(#[from] NameError),
}

impl StoreError {
    /// The store error carried inside an I/O error that a [`PendingWrite`] returned from
    /// `write` (writers in between, such as a compressor, pass it on unchanged), or the
    /// I/O error itself when it carries none.
    pub fn recover(e: io::Error) -> Result<StoreError, io::Error> {
        if !e.get_ref().is_some_and(|inner| inner.is::<StoreError>()) {
            return Err(e);
        }
        let kind = e.kind();
        match e.into_inner().map(|inner| inner.downcast::<StoreError>()) {
            Some(Ok(store)) => Ok(*store),
            Some(Err(other)) => Err(io::Error::new(kind, other)),
            None => Err(io::Error::from(kind)),
        }
    }
}

/// An artifact being written: bytes go in through [`io::Write`] (a failure of the store
/// itself comes back as an I/O error carrying a [`StoreError`], see
/// [`StoreError::recover`]); [`PendingWrite::commit`] puts it in place. Dropped without
/// a commit, it leaves nothing behind.
pub trait PendingWrite: io::Write + Send {
    /// Bytes written so far.
    fn written(&self) -> u64;
    /// Syncs the file and renames it into place; returns what was stored.
    fn commit(self: Box<Self>) -> Result<StoredFile, StoreError>;
}

/// Where artifacts are kept.
pub trait ArtifactStore: Send + Sync {
    /// Starts writing `rel`. With `known`, the bytes are checked against that digest as
    /// they arrive (a layer copied from a digest-checked blob stream): they are not hashed
    /// a second time, and the stored file reports `known`; commit only after the check.
    fn begin_write(
        &self,
        rel: &str,
        known: Option<Digest>,
    ) -> Result<Box<dyn PendingWrite>, StoreError>;
    /// True when `rel` exists as a regular file.
    fn exists(&self, rel: &str) -> bool;
    /// True when `rel` exists and its sha256 is `digest` (reads the whole file).
    fn verify(&self, rel: &str, digest: &Digest) -> Result<bool, StoreError>;
    /// Gives the stored artifact `from` a second name `to` (put in place atomically,
    /// over any file of that name) without copying its bytes; the file stays until its
    /// last name is removed. Fails, leaving nothing behind, when `from.path` is no longer
    /// a regular file of `from.size` bytes whose sha256 is `from.digest` (the digest
    /// recorded when it was built), or the store cannot share files: the caller then
    /// writes the artifact instead.
    fn link_artifact(&self, from: &StoredFile, to: &str) -> Result<(), StoreError>;
    /// Points `<dir of artifact_rel>/latest.tar.gz` at the artifact; returns the link's
    /// relative path (what `status.url` names).
    fn link_latest(&self, artifact_rel: &str) -> Result<String, StoreError>;
    /// Deletes old artifacts in `dir_rel`: the file `keep` always stays, the newest
    /// `records` files stay, and of the rest those older than `ttl` at `now` go. Returns
    /// the relative paths deleted.
    fn garbage_collect(
        &self,
        dir_rel: &str,
        keep: &str,
        records: usize,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<Vec<String>, StoreError>;
    /// Deletes the file `rel` (a tampered artifact); a missing file is not an error.
    fn remove_object(&self, rel: &str) -> Result<(), StoreError>;
    /// Deletes the folder `dir_rel` and everything in it (a deleted object).
    fn remove_dir(&self, dir_rel: &str) -> Result<(), StoreError>;
    /// Removes every temp file no live writer holds (left by a crash); returns their paths.
    fn remove_stale_temps(&self) -> Result<Vec<String>, StoreError>;
    /// Every file under the kind folder, as relative paths (temp files left out).
    fn list_artifacts(&self) -> Result<Vec<String>, StoreError>;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn object_names_that_kubernetes_refuses_never_become_paths() {
        for (ns, name) in [
            ("..", "app"),
            ("ns", ".."),
            ("ns", "a/b"),
            ("a/b", "x"),
            ("", "x"),
        ] {
            let err = object_dir(ns, name).unwrap_err();
            assert!(matches!(err, StoreError::BadName(_)), "{ns}/{name}");
            assert!(artifact_path(ns, name, "f.tar.gz").is_err());
        }
        assert_eq!(
            object_dir("team-1", "app.v2").unwrap(),
            "ocirepository/team-1/app.v2"
        );
        assert_eq!(
            artifact_path("ns", "app", "x.tar.gz").unwrap(),
            "ocirepository/ns/app/x.tar.gz"
        );
    }
}
