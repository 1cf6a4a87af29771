//! Temp files of the store: created hidden (`.tmp-*`) in the directory of the file they
//! become, and locked (`flock`, exclusive) by their writer for as long as it lives. The
//! kernel drops the lock when the writer's process dies, however it dies (`kill -9`, OOM,
//! power loss), so "unlocked" means "stale": no age guess that could delete a slow live
//! writer's file, and no pid scheme that breaks when every replica is PID 1 in its
//! container. Stale temp files are removed at start-up and before every write to their
//! directory. std's `File::try_lock` is that lock; no crate needed.

use std::fs::{self, File, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::StorageError;

/// Names that mark a temp file: ours (`.tmp-`) and `tempfile`'s default (`.tmp`).
const TEMP_PREFIX: &str = ".tmp";
/// Prefix of the temp files this store creates.
const NEW_PREFIX: &str = ".tmp-";
/// Folder levels under the root that hold files: kind, namespace, object.
const MAX_DEPTH: usize = 3;
/// Attempts at a temp file when a cleaner takes each one away before the writer locks it.
const CREATE_ATTEMPTS: usize = 3;

/// Creates a temp file in `dir` and locks it. A cleaner may remove the new file between
/// its creation and the lock (it saw an unlocked temp file); the link count then reads 0,
/// and another one is made.
pub(super) fn create_locked(dir: &Path) -> io::Result<tempfile::NamedTempFile> {
    for _ in 0..CREATE_ATTEMPTS {
        let tmp = tempfile::Builder::new()
            .prefix(NEW_PREFIX)
            .tempfile_in(dir)?;
        match tmp.as_file().try_lock() {
            Ok(()) => {}
            // A cleaner holds it and is removing it.
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(e)) => return Err(e),
        }
        if tmp.as_file().metadata()?.nlink() > 0 {
            return Ok(tmp);
        }
    }
    Err(io::Error::other(format!(
        "every new temp file was removed before it could be locked ({CREATE_ATTEMPTS} attempts): is another program cleaning this directory?"
    )))
}

/// Removes the temp files in `dir` that no live writer holds. Returns their names.
pub(super) fn remove_stale(dir: &Path) -> Result<Vec<String>, StorageError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StorageError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // Only regular files are opened: never a FIFO or a device.
        if !name.starts_with(TEMP_PREFIX) || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let file = match File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => return Err(StorageError::Read { path, source }),
        };
        match file.try_lock() {
            // Held while it is removed, so a writer that locks it afterwards sees nlink 0.
            Ok(()) => match fs::remove_file(&path) {
                Ok(()) => removed.push(name),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(StorageError::Remove { path, source }),
            },
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(source)) => return Err(StorageError::Read { path, source }),
        }
    }
    Ok(removed)
}

/// [`remove_stale`] in `root` and every folder below it down to the object folders (not
/// through symlinks). Returns the removed files relative to `root`.
pub(super) fn remove_stale_under(root: &Path) -> Result<Vec<String>, StorageError> {
    let mut removed = Vec::new();
    let mut dirs = vec![(root.to_path_buf(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = dirs.pop() {
        for name in remove_stale(&dir)? {
            removed.push(format!("{rel}{name}"));
        }
        if depth == MAX_DEPTH {
            continue;
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let name = entry.file_name().to_string_lossy().into_owned();
                dirs.push((entry.path(), format!("{rel}{name}/"), depth + 1));
            }
        }
    }
    removed.sort();
    Ok(removed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Write;

    use super::super::tests::store;
    use super::super::Storage;
    use super::*;
    use crate::ports::ArtifactStore;

    /// What a killed writer leaves: a temp file nobody holds.
    fn leave_stale(dir: &Path, name: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join(name), b"partial").unwrap();
    }

    #[test]
    fn live_writers_keep_their_temp_files_and_stale_ones_go() {
        let (d, s) = store();
        let rel = Storage::artifact_path("ns", "app", "a.tar.gz").unwrap();
        let dir = d.path().join("ocirepository/ns/app");
        let mut live = s.begin_write(&rel, None).unwrap();
        live.write_all(b"in progress").unwrap();
        leave_stale(&dir, ".tmp-killed");
        leave_stale(&dir, ".tmpXYZ");
        leave_stale(&d.path().join(".state/ns"), ".tmp-state");
        fs::write(dir.join("keep.tar.gz"), b"artifact").unwrap();

        let removed = s.remove_stale_temps().unwrap();
        assert_eq!(
            removed,
            vec![
                ".state/ns/.tmp-state".to_string(),
                "ocirepository/ns/app/.tmp-killed".into(),
                "ocirepository/ns/app/.tmpXYZ".into(),
            ]
        );
        // The live writer's file is still there and commits.
        live.commit().unwrap();
        let mut left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec!["a.tar.gz", "keep.tar.gz"]);
    }

    #[test]
    fn every_write_cleans_its_directory_first() {
        let (d, s) = store();
        let dir = d.path().join("ocirepository/ns/app");
        leave_stale(&dir, ".tmp-killed");
        let mut p = s
            .begin_write(
                &Storage::artifact_path("ns", "app", "b.tar.gz").unwrap(),
                None,
            )
            .unwrap();
        assert!(!dir.join(".tmp-killed").exists());
        p.write_all(b"b").unwrap();
        p.commit().unwrap();
    }

    #[test]
    fn fifos_and_symlinks_named_like_temp_files_are_left_alone() {
        let (d, s) = store();
        let dir = d.path().join("ocirepository/ns/app");
        fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(dir.join(".tmp-fifo"))
            .status()
            .unwrap();
        assert!(status.success());
        std::os::unix::fs::symlink(d.path().join("elsewhere"), dir.join(".tmp-link")).unwrap();
        assert_eq!(s.remove_stale_temps().unwrap(), Vec::<String>::new());
    }
}
