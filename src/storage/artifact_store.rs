//! The store's operations, as the [`ArtifactStore`] port: begin a write (a
//! [`PendingArtifact`]), check a file's digest, give an artifact a second name, point
//! `latest.tar.gz` at the current one, garbage-collect by count and age, remove a file or
//! an object's folder, clean stale temp files, list what is stored. The trait impl holds
//! the code: there is no inherent twin of any of these methods, so callers import the
//! trait. Temp files are left to `temp`, which knows whether a writer still holds them.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{
    open_regular, sync_dir, temp, PendingArtifact, Storage, StorageError, StoredFile, LATEST,
};
use crate::domain::digest::{Digest, Hasher};
use crate::ports::store::KIND_DIRS;
use crate::ports::{ArtifactStore, PendingWrite};

impl ArtifactStore for Storage {
    /// A hidden, locked temp file in the target's directory; stale temp files in that
    /// directory (left by a killed writer) are removed first when the store owns it.
    fn begin_write(
        &self,
        rel: &str,
        known: Option<Digest>,
    ) -> Result<Box<dyn PendingWrite>, StorageError> {
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
        Ok(Box::new(PendingArtifact::new(
            rel,
            target,
            tmp,
            known,
            self.durable,
        )))
    }

    /// True when `rel` exists as a regular file.
    fn exists(&self, rel: &str) -> bool {
        self.resolve(rel)
            .is_ok_and(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
    }

    /// Only regular files are read: a FIFO or device in its place counts as missing and
    /// never blocks.
    fn verify(&self, rel: &str, digest: &Digest) -> Result<bool, StorageError> {
        verify_path(&self.resolve(rel)?, digest)
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
    fn link_artifact(&self, from: &StoredFile, to: &str) -> Result<(), StorageError> {
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

    /// Points `<dir of artifact_rel>/latest.tar.gz` at the artifact (a relative symlink,
    /// replaced atomically, left alone when already right), as Flux's `Storage.Symlink`
    /// does for `status.url`. Returns the link's relative path. Garbage collection skips
    /// links; the server follows them only inside the root.
    fn link_latest(&self, artifact_rel: &str) -> Result<String, StorageError> {
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

    /// Deletes old artifacts in `dir_rel`: the file `keep` always stays, the newest
    /// `records` files stay, and of the rest those older than `ttl` go. Hidden files
    /// (temp files) are left to the stale-temp cleanup. Returns the relative paths deleted.
    fn garbage_collect(
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
            if name.starts_with('.') {
                continue;
            }
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
            kept += 1;
            if name != keep_name && kept > records && old {
                let path = dir.join(&name);
                fs::remove_file(&path).map_err(|source| StorageError::Remove { path, source })?;
                removed.push(format!("{dir_rel}/{name}"));
            }
        }
        Ok(removed)
    }

    /// Removes every artifact of an object (finalizer).
    fn remove_dir(&self, dir_rel: &str) -> Result<(), StorageError> {
        let dir = self.resolve(dir_rel)?;
        let removed = fs::remove_dir_all(&dir);
        gone(dir, removed)
    }

    /// Every artifact file under the kind folders, as relative paths (temp files excluded).
    fn list_artifacts(&self) -> Result<Vec<String>, StorageError> {
        let mut out = Vec::new();
        for kind in KIND_DIRS {
            let base = self.root().join(kind);
            for ns in read_dir_names(&base)? {
                for name in read_dir_names(&base.join(&ns))? {
                    for file in read_dir_names(&base.join(&ns).join(&name))? {
                        if !file.starts_with('.') {
                            out.push(format!("{kind}/{ns}/{name}/{file}"));
                        }
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// A missing file is not an error.
    fn remove_object(&self, rel: &str) -> Result<(), StorageError> {
        let path = self.resolve(rel)?;
        let removed = fs::remove_file(&path);
        gone(path, removed)
    }

    /// Removes every temp file under the root that no live writer holds (start-up, after
    /// a crash). Returns their paths relative to the root.
    fn remove_stale_temps(&self) -> Result<Vec<String>, StorageError> {
        temp::remove_stale_under(&self.root)
    }
}

/// The outcome of removing `path`: done, also when it was already gone.
fn gone(path: PathBuf, removed: io::Result<()>) -> Result<(), StorageError> {
    match removed {
        Err(source) if source.kind() != io::ErrorKind::NotFound => {
            Err(StorageError::Remove { path, source })
        }
        _ => Ok(()),
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
#[path = "artifact_store_tests.rs"]
mod tests;
