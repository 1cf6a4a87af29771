//! Removing artifacts: garbage collection by count and age, the removal of an object's
//! folder (finalizer), and the listing the start-up check walks. Temp files are not
//! touched here: they belong to `temp`, which knows whether a writer still holds them.

use std::fs;
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{Storage, StorageError};
use crate::ports::store::KIND_DIRS;

impl Storage {
    /// Deletes old artifacts in `dir_rel`: the file `keep` always stays, the newest
    /// `records` files stay, and of the rest those older than `ttl` go. Hidden files
    /// (temp files) are left to the stale-temp cleanup. Returns the relative paths deleted.
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
    pub fn remove_dir(&self, dir_rel: &str) -> Result<(), StorageError> {
        let dir = self.resolve(dir_rel)?;
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StorageError::Remove { path: dir, source }),
        }
    }

    /// Every artifact file under the kind folders, as relative paths (temp files excluded).
    pub fn list_artifacts(&self) -> Result<Vec<String>, StorageError> {
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
    use super::super::tests::store;
    use super::*;

    #[test]
    fn gc_keeps_current_and_newest_records_and_drops_old_ones() {
        let (_d, s) = store();
        let dir = Storage::object_dir("ns", "app").unwrap();
        for n in ["a", "b", "c", "d"] {
            s.write_file(&format!("{dir}/{n}.tar.gz"), n.as_bytes())
                .unwrap();
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
        let rel = Storage::artifact_path("ns", "app", "a.tar.gz").unwrap();
        s.write_file(&rel, b"x").unwrap();
        let dir = Storage::object_dir("ns", "app").unwrap();
        s.remove_dir(&dir).unwrap();
        assert!(!s.exists(&rel));
        s.remove_dir(&dir).unwrap();
    }
}
