//! The artifact store on local disk: `<root>/ocirepository/<namespace>/<name>/<file>`.
//!
//! Every artifact is written to a hidden temp file in its target directory while its
//! sha256 and size are computed, fsynced, then renamed into place: readers see the old
//! file or the new one, never a partial one, and a failed write leaves nothing behind.
//! A writer holds a lock on its temp file until it commits or drops it, so temp files left
//! by a killed process are told apart from live ones and removed at start-up and before
//! every write to their directory ([`temp`]). Names become paths only after the
//! Kubernetes name rules passed (`domain::names`). The store's operations (writing,
//! digest checks, links, garbage collection by count and age, removal, the listing the
//! start-up check walks) are the [`ArtifactStore`](crate::ports::ArtifactStore) port,
//! implemented in `artifact_store`; this file holds the type, its paths and the file
//! helpers.
//! Sync `std::fs` only; callers run it in `spawn_blocking`.

mod artifact_store;
mod pending;
mod temp;

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

pub use pending::PendingArtifact;

pub use crate::ports::store::OCI_KIND_DIR;
/// Store failures are the port's: the adapter names its paths in them.
pub use crate::ports::StoreError as StorageError;
pub use crate::ports::StoredFile;

/// The link to an object's current artifact that `status.url` names (Flux's name).
pub const LATEST: &str = "latest.tar.gz";

/// The artifact store.
#[derive(Clone, Debug)]
pub struct Storage {
    root: PathBuf,
    durable: bool,
    /// The store owns its directories: stale temp files in them are removed.
    owned: bool,
}

impl Storage {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            durable: true,
            owned: true,
        }
    }

    /// A store for one-off CLI output (`pull -o`) in the user's own directory: it does not
    /// fsync before renaming, as `curl -o` or `tar` do not, and it removes no file of that
    /// directory but its own temp file. The controller's store is durable (every artifact
    /// is synced to disk before it is renamed into place and published) and owns its
    /// directories (temp files left by a crash are removed).
    pub fn without_fsync(mut self) -> Self {
        self.durable = false;
        self.owned = false;
        self
    }

    /// The storage root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether writes are synced to disk before they count as done.
    pub fn durable(&self) -> bool {
        self.durable
    }

    /// `ocirepository/<namespace>/<name>`: the folder of one object's artifacts. Fails
    /// when the namespace is not an RFC 1123 label or the name not an RFC 1123 subdomain
    /// (the port's rule, [`crate::ports::store::object_dir`]).
    pub fn object_dir(namespace: &str, name: &str) -> Result<String, StorageError> {
        crate::ports::store::object_dir(namespace, name)
    }

    /// `ocirepository/<namespace>/<name>/<file_name>`, with the checks of
    /// [`Storage::object_dir`].
    pub fn artifact_path(
        namespace: &str,
        name: &str,
        file_name: &str,
    ) -> Result<String, StorageError> {
        crate::ports::store::artifact_path(namespace, name, file_name)
    }

    /// The absolute path of a relative artifact path, refusing anything that leaves the root.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, StorageError> {
        let p = Path::new(rel);
        let plain = !rel.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain {
            return Err(StorageError::BadPath(rel.to_string()));
        }
        Ok(self.root.join(p))
    }

    /// The folder `target` (a resolved path) goes in.
    fn folder_of(&self, target: &Path) -> PathBuf {
        target
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.root.clone())
    }

    /// Writes `bytes` to `rel` atomically: a test fixture since the one-shot state is
    /// written beneath the root by `oneshot::state`; no product code writes through it.
    #[cfg(test)]
    pub(crate) fn write_file(&self, rel: &str, bytes: &[u8]) -> Result<StoredFile, StorageError> {
        let mut pending = crate::ports::ArtifactStore::begin_write(self, rel, None)?;
        if let Err(e) = io::Write::write_all(&mut pending, bytes) {
            return Err(
                StorageError::recover(e).unwrap_or_else(|source| StorageError::Write {
                    path: self.root.join(rel),
                    source,
                }),
            );
        }
        pending.commit()
    }
}

/// Makes a rename into `dir` durable. Failure is not fatal: some filesystems cannot
/// fsync a directory.
pub(super) fn sync_dir(dir: &Path) {
    let _ = File::open(dir).and_then(|d| d.sync_all());
}

/// Opens `path` for reading if it is a regular file; `None` when it is missing or is
/// anything else. Opened non-blocking, so a FIFO put in its place cannot hang the caller.
pub(crate) fn open_regular(path: &Path) -> io::Result<Option<File>> {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(file.metadata()?.is_file().then_some(file))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    pub(super) fn store() -> (tempfile::TempDir, Storage) {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::new(dir.path());
        (dir, s)
    }

    #[test]
    fn rejects_paths_leaving_the_root() {
        let (_d, s) = store();
        for bad in ["../x", "/etc/passwd", "a/../../b", ""] {
            assert!(
                matches!(s.resolve(bad), Err(StorageError::BadPath(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn write_file_replaces_atomically_and_storage_errors_survive_io_wrapping() {
        let (_d, s) = store();
        s.write_file(".state/ns/app.json", b"{}").unwrap();
        s.write_file(".state/ns/app.json", b"{\"a\":1}").unwrap();
        assert_eq!(
            fs::read(s.resolve(".state/ns/app.json").unwrap()).unwrap(),
            b"{\"a\":1}"
        );
        let inner = StorageError::BadPath("x".into());
        let wrapped = io::Error::other(inner);
        assert!(matches!(
            StorageError::recover(wrapped),
            Ok(StorageError::BadPath(_))
        ));
        assert!(StorageError::recover(io::Error::other("plain")).is_err());
    }
}
