//! The artifact store on local disk: `<root>/ocirepository/<namespace>/<name>/<file>`.
//!
//! Every artifact is written to a hidden temp file in its target directory while its
//! sha256 and size are computed, fsynced, then renamed into place: readers see the old
//! file or the new one, never a partial one, and a failed write leaves nothing behind.
//! Also garbage collection by count and age, and the integrity check used at start-up.
//! Sync `std::fs` only; callers run it in `spawn_blocking`.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::domain::digest::{Digest, Hasher};

/// Kind folder for OCIRepository artifacts.
pub const OCI_KIND_DIR: &str = "ocirepository";

/// The link to an object's current artifact that `status.url` names (Flux's name).
pub const LATEST: &str = "latest.tar.gz";

/// A failed storage operation, naming the path.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
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
}

/// The artifact store.
#[derive(Clone, Debug)]
pub struct Storage {
    root: PathBuf,
    durable: bool,
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

/// An artifact being written; dropped without [`PendingArtifact::commit`], it is deleted.
pub struct PendingArtifact {
    rel: String,
    target: PathBuf,
    file: BufWriter<tempfile::NamedTempFile>,
    hasher: Hasher,
    /// The digest the bytes are already known to have (checked upstream), or `None` to hash.
    known: Option<Digest>,
    written: u64,
    durable: bool,
}

impl Write for PendingArtifact {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        if self.known.is_none() {
            self.hasher.update(&buf[..n]);
        }
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl PendingArtifact {
    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Syncs and renames the temp file into place, replacing any file of the same name.
    pub fn commit(self) -> Result<StoredFile, StorageError> {
        let werr = |source| StorageError::Write {
            path: self.target.clone(),
            source,
        };
        let tmp = self.file.into_inner().map_err(|e| werr(e.into_error()))?;
        if self.durable {
            tmp.as_file().sync_all().map_err(werr)?;
        }
        tmp.persist(&self.target).map_err(|e| werr(e.error))?;
        if let (true, Some(dir)) = (self.durable, self.target.parent()) {
            // Make the rename durable; failure here is not fatal on filesystems without dir fsync.
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        let digest = self.known.unwrap_or_else(|| self.hasher.finish());
        Ok(StoredFile {
            path: self.rel,
            digest,
            size: self.written,
        })
    }
}

impl Storage {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            durable: true,
        }
    }

    /// A store that does not fsync before renaming, for one-off CLI output (`pull -o`),
    /// as `curl -o` or `tar` do not. The controller's store is durable: every artifact is
    /// synced to disk before it is renamed into place and published.
    pub fn without_fsync(mut self) -> Self {
        self.durable = false;
        self
    }

    /// The storage root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `ocirepository/<namespace>/<name>`: the folder of one object's artifacts.
    pub fn object_dir(namespace: &str, name: &str) -> String {
        format!("{OCI_KIND_DIR}/{namespace}/{name}")
    }

    /// `ocirepository/<namespace>/<name>/<file_name>`.
    pub fn artifact_path(namespace: &str, name: &str, file_name: &str) -> String {
        format!("{}/{file_name}", Self::object_dir(namespace, name))
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

    /// Starts writing `rel`: a hidden temp file in the same directory.
    pub fn create(&self, rel: &str) -> Result<PendingArtifact, StorageError> {
        self.create_inner(rel, None)
    }

    /// Like [`Storage::create`], for bytes whose digest is checked as they arrive (a
    /// layer copied from a digest-checked blob stream): they are not hashed a second time,
    /// and the stored file reports `digest`. Commit only after that check passed.
    pub fn create_known(&self, rel: &str, digest: Digest) -> Result<PendingArtifact, StorageError> {
        self.create_inner(rel, Some(digest))
    }

    fn create_inner(
        &self,
        rel: &str,
        known: Option<Digest>,
    ) -> Result<PendingArtifact, StorageError> {
        let target = self.resolve(rel)?;
        let dir = target
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.root.clone());
        let cerr = |source| StorageError::Create {
            dir: dir.clone(),
            source,
        };
        fs::create_dir_all(&dir).map_err(cerr)?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&dir)
            .map_err(cerr)?;
        Ok(PendingArtifact {
            rel: rel.to_string(),
            target,
            file: BufWriter::with_capacity(256 << 10, tmp),
            hasher: Hasher::default(),
            known,
            written: 0,
            durable: self.durable,
        })
    }

    /// True when `rel` exists and its sha256 is `digest`.
    pub fn verify(&self, rel: &str, digest: &Digest) -> Result<bool, StorageError> {
        let path = self.resolve(rel)?;
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(source) => return Err(StorageError::Read { path, source }),
        };
        let mut hasher = Hasher::default();
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = file.read(&mut buf).map_err(|source| StorageError::Read {
                path: path.clone(),
                source,
            })?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Ok(&hasher.finish() == digest)
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

    /// True when `rel` exists.
    pub fn exists(&self, rel: &str) -> bool {
        self.resolve(rel).is_ok_and(|p| p.is_file())
    }

    /// Deletes old artifacts in `dir_rel`: the file `keep` always stays, the newest
    /// `records` files stay, and of the rest those older than `ttl` go. Stale temp files
    /// older than `ttl` go too. Returns the relative paths deleted.
    pub fn garbage_collect(
        &self,
        dir_rel: &str,
        keep: &str,
        records: usize,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<Vec<String>, StorageError> {
        let dir = self.resolve(dir_rel)?;
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(StorageError::Read { path: dir, source }),
        };
        let mut files: Vec<(SystemTime, String)> = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let meta = match entry.metadata() {
                Ok(m) if m.is_file() => m,
                _ => continue,
            };
            files.push((meta.modified().unwrap_or(now), name));
        }
        files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let keep_name = keep.rsplit('/').next().unwrap_or(keep);
        let mut removed = Vec::new();
        let mut kept = 0usize;
        for (mtime, name) in files {
            let old = now.duration_since(mtime).unwrap_or_default() > ttl;
            let is_temp = name.starts_with('.');
            let delete = if name == keep_name {
                kept += 1;
                false
            } else if is_temp {
                old
            } else {
                kept += 1;
                kept > records && old
            };
            if delete {
                let path = dir.join(&name);
                fs::remove_file(&path).map_err(|source| StorageError::Remove { path, source })?;
                removed.push(format!("{dir_rel}/{name}"));
            }
        }
        Ok(removed)
    }

    /// Removes every artifact of an object (finalizer).
    pub fn remove_dir(&self, dir_rel: &str) -> Result<(), StorageError> {
        let dir = self.resolve(dir_rel)?;
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StorageError::Remove { path: dir, source }),
        }
    }

    /// Every artifact file under the kind folder, as relative paths (temp files excluded).
    pub fn list_artifacts(&self) -> Result<Vec<String>, StorageError> {
        let mut out = Vec::new();
        let base = self.root.join(OCI_KIND_DIR);
        for ns in read_dir_names(&base)? {
            for name in read_dir_names(&base.join(&ns))? {
                for file in read_dir_names(&base.join(&ns).join(&name))? {
                    if !file.starts_with('.') {
                        out.push(format!("{OCI_KIND_DIR}/{ns}/{name}/{file}"));
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

fn read_dir_names(dir: &Path) -> Result<Vec<String>, StorageError> {
    match fs::read_dir(dir) {
        Ok(entries) => Ok(entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(StorageError::Read {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Storage) {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::new(dir.path());
        (dir, s)
    }

    #[test]
    fn commit_renames_into_place_with_digest_and_size() {
        let (_d, s) = store();
        let rel = Storage::artifact_path("ns", "app", "abc.tar.gz");
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

    #[test]
    fn latest_link_follows_the_current_artifact_and_gc_leaves_it() {
        let (_d, s) = store();
        let put = |name: &str, body: &[u8]| {
            let rel = Storage::artifact_path("ns", "app", name);
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
        let dir = Storage::object_dir("ns", "app");
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
        let rel = Storage::artifact_path("ns", "app", "layer.tgz");
        let mut p = s.create_known(&rel, Digest::of(b"blob")).unwrap();
        p.write_all(b"blob").unwrap();
        assert_eq!(p.written(), 4);
        let stored = p.commit().unwrap();
        assert_eq!((stored.digest, stored.size), (Digest::of(b"blob"), 4));
        assert!(s.verify(&rel, &Digest::of(b"blob")).unwrap());
    }

    #[test]
    fn dropped_pending_artifact_leaves_the_old_file_and_no_temp() {
        let (_d, s) = store();
        let rel = Storage::artifact_path("ns", "app", "a.tar.gz");
        let mut p = s.create(&rel).unwrap();
        p.write_all(b"v1").unwrap();
        p.commit().unwrap();
        let mut p2 = s.create(&rel).unwrap();
        p2.write_all(b"partial v2").unwrap();
        drop(p2);
        assert_eq!(fs::read(s.resolve(&rel).unwrap()).unwrap(), b"v1");
        let names: Vec<_> = fs::read_dir(s.resolve("ocirepository/ns/app").unwrap())
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(names.len(), 1, "temp file left behind");
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
    fn gc_keeps_current_and_newest_records_and_drops_old_ones() {
        let (_d, s) = store();
        let dir = Storage::object_dir("ns", "app");
        for n in ["a", "b", "c", "d"] {
            let mut p = s.create(&format!("{dir}/{n}.tar.gz")).unwrap();
            p.write_all(n.as_bytes()).unwrap();
            p.commit().unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        let later = SystemTime::now() + Duration::from_secs(3600);
        // records = 2: d (newest) and c stay by count, a is current; b goes.
        let removed = s
            .garbage_collect(
                &dir,
                &format!("{dir}/a.tar.gz"),
                2,
                Duration::from_secs(60),
                later,
            )
            .unwrap();
        assert_eq!(removed, vec![format!("{dir}/b.tar.gz")]);
        // Nothing is old yet: nothing goes, whatever the count.
        let removed = s
            .garbage_collect(
                &dir,
                &format!("{dir}/d.tar.gz"),
                1,
                Duration::from_secs(60),
                SystemTime::now(),
            )
            .unwrap();
        assert!(removed.is_empty());
    }

    #[test]
    fn remove_dir_deletes_an_objects_artifacts() {
        let (_d, s) = store();
        let rel = Storage::artifact_path("ns", "app", "a.tar.gz");
        let mut p = s.create(&rel).unwrap();
        p.write_all(b"x").unwrap();
        p.commit().unwrap();
        s.remove_dir(&Storage::object_dir("ns", "app")).unwrap();
        assert!(!s.exists(&rel));
        s.remove_dir(&Storage::object_dir("ns", "app")).unwrap();
    }
}
