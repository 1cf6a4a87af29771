//! The artifact store on local disk: `<root>/ocirepository/<namespace>/<name>/<file>`.
//!
//! Every artifact is written to a hidden temp file in its target directory while its
//! sha256 and size are computed, fsynced, then renamed into place: readers see the old
//! file or the new one, never a partial one, and a failed write leaves nothing behind.
//! A writer holds a lock on its temp file until it commits or drops it, so temp files left
//! by a killed process are told apart from live ones and removed at start-up and before
//! every write to their directory ([`temp`]). Names become paths only after the
//! Kubernetes name rules passed (`domain::names`). Also garbage collection by count and
//! age ([`gc`]) and the integrity check used at start-up.
//! Sync `std::fs` only; callers run it in `spawn_blocking`.

mod gc;
mod pending;
mod port;
mod temp;

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use crate::domain::digest::{Digest, Hasher};

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

    /// Starts writing `rel`: a hidden, locked temp file in the same directory. Stale temp
    /// files in that directory (left by a killed writer) are removed first.
    pub fn create(&self, rel: &str) -> Result<PendingArtifact, StorageError> {
        self.create_inner(rel, None)
    }

    /// Like [`Storage::create`], for bytes whose digest is checked as they arrive (a
    /// layer copied from a digest-checked blob stream): they are not hashed a second time,
    /// and the stored file reports `digest`. Commit only after that check passed.
    pub fn create_known(&self, rel: &str, digest: Digest) -> Result<PendingArtifact, StorageError> {
        self.create_inner(rel, Some(digest))
    }

    /// The folder `target` (a resolved path) goes in.
    fn folder_of(&self, target: &Path) -> PathBuf {
        target
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.root.clone())
    }

    fn create_inner(
        &self,
        rel: &str,
        known: Option<Digest>,
    ) -> Result<PendingArtifact, StorageError> {
        let target = self.resolve(rel)?;
        let dir = self.folder_of(&target);
        let cerr = |source| StorageError::Create {
            dir: dir.clone(),
            source,
        };
        fs::create_dir_all(&dir).map_err(cerr)?;
        if self.owned {
            if let Err(e) = temp::remove_stale(&dir) {
                tracing::warn!(error = %e, "failed to remove stale temp files");
            }
        }
        let tmp = temp::create_locked(&dir).map_err(cerr)?;
        Ok(PendingArtifact::new(rel, target, tmp, known, self.durable))
    }

    /// Writes `bytes` to `rel` atomically (small files: the one-shot state).
    pub fn write_file(&self, rel: &str, bytes: &[u8]) -> Result<StoredFile, StorageError> {
        let mut pending = self.create(rel)?;
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

    /// True when `rel` exists and its sha256 is `digest`. Only regular files are read: a
    /// FIFO or device in its place counts as missing and never blocks.
    pub fn verify(&self, rel: &str, digest: &Digest) -> Result<bool, StorageError> {
        verify_path(&self.resolve(rel)?, digest)
    }

    /// Points `<dir of artifact_rel>/latest.tar.gz` at the artifact (a relative symlink,
    /// replaced atomically, left alone when already right), as Flux's `Storage.Symlink`
    /// does for `status.url`. Returns the link's relative path. Garbage collection skips
    /// links; the server follows them only inside the root.
    pub fn link_latest(&self, artifact_rel: &str) -> Result<String, StorageError> {
        let target = self.resolve(artifact_rel)?;
        let (dir_rel, file) = artifact_rel.rsplit_once('/').unwrap_or(("", artifact_rel));
        let link_rel = if dir_rel.is_empty() {
            LATEST.to_string()
        } else {
            format!("{dir_rel}/{LATEST}")
        };
        let link = self.resolve(&link_rel)?;
        if fs::read_link(&link).is_ok_and(|t| t == Path::new(file)) {
            return Ok(link_rel);
        }
        let dir = target.parent().unwrap_or(&self.root).to_path_buf();
        let tmp = dir.join(format!(".{LATEST}.tmp"));
        let werr = |source| StorageError::Write {
            path: link.clone(),
            source,
        };
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(werr(e)),
            _ => {}
        }
        std::os::unix::fs::symlink(file, &tmp).map_err(werr)?;
        fs::rename(&tmp, &link).map_err(werr)?;
        Ok(link_rel)
    }

    /// Gives the artifact `from` (as it was stored: path, digest, size) a second name
    /// `to`: a hard link made under a hidden temp name in `to`'s folder, checked, then
    /// renamed over `to` (readers see the old file or the new one). The bytes are not
    /// copied: both names are one file, which stays until its last name goes, so either
    /// object's garbage collection leaves the other's artifact whole. Fails, leaving
    /// nothing behind (and logging a warning for a changed file), when `from` is not a
    /// regular file of its size and digest any more or the filesystem refuses hard links.
    ///
    /// The digest is checked by hashing the file once per link, on the inode just linked
    /// (what `to` will name, so nothing can be renamed in between). That read is bounded:
    /// a fixed buffer, the artifact's size (capped by the pipeline's limits), and it
    /// replaces a build that downloads, decompresses, recompresses and hashes those same
    /// bytes; an identity check (inode, size, ctime) would be cheaper but every link moves
    /// the ctime and the modification time of the shared file, and a stale identity would
    /// let a file rewritten in place through.
    pub fn link_artifact(&self, from: &StoredFile, to: &str) -> Result<(), StorageError> {
        let (size, digest) = (from.size, &from.digest);
        let from = from.path.as_str();
        let source = self.resolve(from)?;
        let target = self.resolve(to)?;
        let dir = self.folder_of(&target);
        let rerr = |source_path: &Path, source| StorageError::Read {
            path: source_path.to_path_buf(),
            source,
        };
        let meta = fs::symlink_metadata(&source).map_err(|e| rerr(&source, e))?;
        if !meta.is_file() || meta.len() != size {
            return Err(rerr(
                &source,
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "expected a regular file of {size} bytes, found {} bytes",
                        meta.len()
                    ),
                ),
            ));
        }
        fs::create_dir_all(&dir).map_err(|source| StorageError::Create {
            dir: dir.clone(),
            source,
        })?;
        let werr = |source| StorageError::Write {
            path: target.clone(),
            source,
        };
        // A name the stale-temp cleanup may take away before the rename: then the rename
        // fails and the caller builds the artifact instead.
        let link = tempfile::Builder::new()
            .prefix(".tmp-link-")
            .make_in(&dir, |tmp| fs::hard_link(&source, tmp))
            .map_err(werr)?;
        let linked = fs::symlink_metadata(link.path()).map_err(werr)?;
        if linked.len() != size {
            return Err(werr(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("'{from}' changed while it was linked"),
            )));
        }
        if !verify_path(link.path(), digest)? {
            tracing::warn!(
                artifact = from,
                expected = %digest,
                "the stored artifact's bytes no longer match the digest recorded when it was built; not sharing it (the object builds its own)"
            );
            return Err(rerr(
                &source,
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("its sha256 is not {digest}, the digest recorded when it was built"),
                ),
            ));
        }
        // Modified now, as a new file would be: `to` may replace a newer artifact behind
        // `latest.tar.gz`, and a client holding that one's `Last-Modified` must not be
        // told 304. The first name's time moves forward too: at worst a spare download.
        File::open(link.path())
            .and_then(|f| f.set_modified(std::time::SystemTime::now()))
            .map_err(werr)?;
        link.persist(&target).map_err(|e| werr(e.error))?;
        if self.durable {
            sync_dir(&dir);
        }
        Ok(())
    }

    /// True when `rel` exists as a regular file.
    pub fn exists(&self, rel: &str) -> bool {
        self.resolve(rel)
            .is_ok_and(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
    }

    /// Deletes the file `rel` (a tampered artifact); a missing file is not an error.
    pub fn remove_file(&self, rel: &str) -> Result<(), StorageError> {
        let path = self.resolve(rel)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StorageError::Remove { path, source }),
        }
    }

    /// Removes every temp file under the root that no live writer holds (start-up, after
    /// a crash). Returns their paths relative to the root.
    pub fn remove_stale_temps(&self) -> Result<Vec<String>, StorageError> {
        temp::remove_stale_under(&self.root)
    }
}

/// True when `path` is a regular file whose sha256 is `digest` (read through a fixed
/// buffer); a FIFO or device in its place counts as missing and never blocks.
fn verify_path(path: &Path, digest: &Digest) -> Result<bool, StorageError> {
    let rerr = |source| StorageError::Read {
        path: path.to_path_buf(),
        source,
    };
    let Some(mut file) = open_regular(path).map_err(rerr)? else {
        return Ok(false);
    };
    let mut hasher = Hasher::default();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = file.read(&mut buf).map_err(rerr)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(&hasher.finish() == digest)
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
    use std::io::Write;
    use std::time::{Duration, SystemTime};

    pub(super) fn store() -> (tempfile::TempDir, Storage) {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::new(dir.path());
        (dir, s)
    }

    #[test]
    fn commit_renames_into_place_with_digest_and_size() {
        let (_d, s) = store();
        let rel = Storage::artifact_path("ns", "app", "abc.tar.gz").unwrap();
        let mut p = s.create(&rel).unwrap();
        p.write_all(b"hello world").unwrap();
        let stored = p.commit().unwrap();
        assert_eq!(stored.size, 11);
        assert_eq!(stored.digest, Digest::of(b"hello world"));
        assert_eq!(fs::read(s.resolve(&rel).unwrap()).unwrap(), b"hello world");
        assert!(s.verify(&rel, &stored.digest).unwrap());
        assert!(!s.verify(&rel, &Digest::of(b"other")).unwrap());
        assert_eq!(s.list_artifacts().unwrap(), vec![rel]);
    }

    /// team-a's build of "shared bytes" and team-b's own artifact of `own` bytes at the
    /// path a link would take.
    fn build_and_own(s: &Storage, own: &[u8]) -> (StoredFile, StoredFile) {
        let from = Storage::artifact_path("team-a", "app", "d.tar.gz").unwrap();
        let to = Storage::artifact_path("team-b", "app", "d.tar.gz").unwrap();
        (
            s.write_file(&from, b"shared bytes").unwrap(),
            s.write_file(&to, own).unwrap(),
        )
    }

    #[test]
    fn a_linked_artifact_is_one_file_under_two_names_and_outlives_the_first() {
        use std::os::unix::fs::MetadataExt;
        let (_d, s) = store();
        let (built, at_to) = build_and_own(&s, b"an older build");
        let (from, to) = (built.path.clone(), at_to.path.clone());
        let (a, b) = (s.resolve(&from).unwrap(), s.resolve(&to).unwrap());
        let past = SystemTime::now() - Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(&a)
            .unwrap()
            .set_modified(past)
            .unwrap();
        let before = SystemTime::now() - Duration::from_secs(1);
        s.link_artifact(&built, &to).unwrap();
        // Modified as a new file would be, not an hour ago.
        assert!(fs::metadata(&b).unwrap().modified().unwrap() >= before);
        assert_eq!(fs::read(&b).unwrap(), b"shared bytes");
        assert_eq!(
            fs::metadata(&a).unwrap().ino(),
            fs::metadata(&b).unwrap().ino()
        );
        s.remove_dir(&Storage::object_dir("team-a", "app").unwrap())
            .unwrap();
        assert!(s.verify(&to, &Digest::of(b"shared bytes")).unwrap());
        // Gone or of another size: refused, and nothing is left behind.
        let other = Storage::artifact_path("team-c", "app", "d.tar.gz").unwrap();
        assert!(s.link_artifact(&built, &other).is_err());
        let shorter = StoredFile {
            size: 11,
            ..at_to.clone()
        };
        assert!(s.link_artifact(&shorter, &other).is_err());
        assert!(!s.exists(&other));
        let dir = s.resolve("ocirepository/team-b/app").unwrap();
        let names: Vec<_> = fs::read_dir(dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "a temp link was left behind");
    }

    #[test]
    fn a_file_whose_bytes_changed_since_its_build_is_not_linked() {
        let (_d, s) = store();
        let (built, own) = build_and_own(&s, b"team b's own");
        let (from, to) = (built.path.clone(), own.path);
        // Rewritten in place, same size, same inode: only the bytes tell.
        fs::write(s.resolve(&from).unwrap(), b"SHARED BYTES").unwrap();
        let e = s.link_artifact(&built, &to).unwrap_err();
        let text = crate::domain::error_chain::chain(&e);
        assert!(text.contains(&built.digest.to_string()), "{text}");
        assert_eq!(fs::read(s.resolve(&to).unwrap()).unwrap(), b"team b's own");
        let dir = s.resolve("ocirepository/team-b/app").unwrap();
        assert_eq!(
            fs::read_dir(dir).unwrap().count(),
            1,
            "a temp link was left"
        );
        // Its own bytes again: linked.
        fs::write(s.resolve(&from).unwrap(), b"shared bytes").unwrap();
        s.link_artifact(&built, &to).unwrap();
        assert_eq!(fs::read(s.resolve(&to).unwrap()).unwrap(), b"shared bytes");
    }

    #[test]
    fn latest_link_follows_the_current_artifact_and_gc_leaves_it() {
        let (_d, s) = store();
        let put = |name: &str, body: &[u8]| {
            let rel = Storage::artifact_path("ns", "app", name).unwrap();
            let mut p = s.create(&rel).unwrap();
            p.write_all(body).unwrap();
            p.commit().unwrap().path
        };
        let first = put("a.tar.gz", b"one");
        let link = s.link_latest(&first).unwrap();
        assert_eq!(link, "ocirepository/ns/app/latest.tar.gz");
        assert_eq!(fs::read(s.resolve(&link).unwrap()).unwrap(), b"one");
        assert_eq!(s.link_latest(&first).unwrap(), link, "idempotent");
        let second = put("b.tar.gz", b"two");
        s.link_latest(&second).unwrap();
        assert_eq!(fs::read(s.resolve(&link).unwrap()).unwrap(), b"two");
        let dir = Storage::object_dir("ns", "app").unwrap();
        let gone = s
            .garbage_collect(
                &dir,
                &second,
                0,
                Duration::ZERO,
                SystemTime::now() + Duration::from_secs(5),
            )
            .unwrap();
        assert_eq!(gone, vec![first]);
        assert_eq!(fs::read(s.resolve(&link).unwrap()).unwrap(), b"two");
    }

    #[test]
    fn known_digest_files_report_it_and_their_size() {
        let (_d, s) = store();
        let s = s.without_fsync();
        let rel = Storage::artifact_path("ns", "app", "layer.tgz").unwrap();
        let mut p = s.create_known(&rel, Digest::of(b"blob")).unwrap();
        p.write_all(b"blob").unwrap();
        assert_eq!(p.written(), 4);
        let stored = p.commit().unwrap();
        assert_eq!((stored.digest, stored.size), (Digest::of(b"blob"), 4));
        assert!(s.verify(&rel, &Digest::of(b"blob")).unwrap());
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
    fn a_fifo_is_neither_an_artifact_nor_readable() {
        let (d, s) = store();
        let rel = "ocirepository/ns/app/fifo.tar.gz";
        fs::create_dir_all(d.path().join("ocirepository/ns/app")).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(d.path().join(rel))
            .status()
            .unwrap();
        assert!(status.success());
        assert!(!s.exists(rel));
        // Opening a FIFO for reading would block until a writer comes; this returns.
        assert!(!s.verify(rel, &Digest::of(b"")).unwrap());
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
