//! An artifact being written: a locked temp file behind a buffer, hashed as bytes pass,
//! renamed into place by [`PendingWrite::commit`] and deleted when dropped before.
//! Write errors come back as I/O errors that carry a [`StorageError`] naming the target
//! (see [`StorageError::recover`]), so a full disk is reported as a storage failure
//! with its path even through the compressor that sits between merger and file.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use crate::domain::digest::{Digest, Hasher};

use crate::ports::PendingWrite;

use super::{StorageError, StoredFile};

/// An artifact being written, as [`crate::ports::ArtifactStore::begin_write`] hands it
/// out; dropped without [`PendingWrite::commit`], it is deleted.
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
        let n = match self.file.write(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(e),
            Err(source) => return Err(self.wrap(source)),
        };
        if self.known.is_none() {
            self.hasher.update(&buf[..n]);
        }
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush().map_err(|source| self.wrap(source))
    }
}

impl PendingArtifact {
    pub(super) fn new(
        rel: &str,
        target: PathBuf,
        tmp: tempfile::NamedTempFile,
        known: Option<Digest>,
        durable: bool,
    ) -> Self {
        Self {
            rel: rel.to_string(),
            target,
            file: BufWriter::with_capacity(256 << 10, tmp),
            hasher: Hasher::default(),
            known,
            written: 0,
            durable,
        }
    }

    fn wrap(&self, source: io::Error) -> io::Error {
        let kind = source.kind();
        io::Error::new(
            kind,
            StorageError::Write {
                path: self.target.clone(),
                source,
            },
        )
    }
}

impl PendingWrite for PendingArtifact {
    fn written(&self) -> u64 {
        self.written
    }

    /// Syncs and renames the temp file into place, replacing any file of the same name.
    fn commit(self: Box<Self>) -> Result<StoredFile, StorageError> {
        let this = *self;
        let werr = |source| StorageError::Write {
            path: this.target.clone(),
            source,
        };
        let tmp = this.file.into_inner().map_err(|e| werr(e.into_error()))?;
        if this.durable {
            tmp.as_file().sync_all().map_err(werr)?;
        }
        tmp.persist(&this.target).map_err(|e| werr(e.error))?;
        if let (true, Some(dir)) = (this.durable, this.target.parent()) {
            super::sync_dir(dir);
        }
        let digest = this.known.unwrap_or_else(|| this.hasher.finish());
        Ok(StoredFile {
            path: this.rel,
            digest,
            size: this.written,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::fs;
    use std::io::Write;

    use super::super::tests::store;
    use super::super::Storage;
    use crate::ports::ArtifactStore;

    #[test]
    fn dropped_pending_artifact_leaves_the_old_file_and_no_temp() {
        let (_d, s) = store();
        let rel = Storage::artifact_path("ns", "app", "a.tar.gz").unwrap();
        s.write_file(&rel, b"v1").unwrap();
        let mut p2 = s.begin_write(&rel, None).unwrap();
        p2.write_all(b"partial v2").unwrap();
        drop(p2);
        assert_eq!(fs::read(s.resolve(&rel).unwrap()).unwrap(), b"v1");
        let names: Vec<_> = fs::read_dir(s.resolve("ocirepository/ns/app").unwrap())
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(names.len(), 1, "temp file left behind");
    }
}
