//! The one-shot mode's saved statuses, `.state/<namespace>/<name>.json` under the storage
//! root, read and written beneath the root without following any symlink.
//!
//! A one-shot store is a folder the user names (often inside a CI workspace), so whoever
//! can write there may plant `.state/<namespace>` as a symlink to somewhere else; a path
//! walk would then read foreign JSON as a saved status or write state files through the
//! link. Every step here is relative to an open directory handle: each folder is opened
//! with `O_NOFOLLOW | O_DIRECTORY` from its parent (and created with `mkdirat` there),
//! the file with `O_NOFOLLOW`, the temp file is renamed with `renameat` inside the same
//! handle. A symlink anywhere below the root is refused with its path named; the root
//! itself is the user's choice and may be a link. The temp file carries the store's
//! `.tmp-` prefix and lock, so the start-up cleaning of `storage::temp` knows it.
//! Plain `rustix` calls, as the artifact server's `openat2`; no crate does this walk.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::storage::StorageError;

/// Largest saved status read back (a status is a few KiB; conditions are bounded).
const MAX_STATE_BYTES: u64 = 1 << 20;

/// Temp files made by this process, for unique names.
static SERIAL: AtomicU64 = AtomicU64::new(0);

/// The error for a component that is a symlink (or not a directory).
fn not_followed(path: PathBuf) -> io::Error {
    io::Error::other(format!(
        "'{}' is a symlink or not a regular directory/file: one-shot state never follows \
         links below the storage root; remove it",
        path.display()
    ))
}

/// Opens the folder `rel` (plain components, e.g. `.state/flux/default`) beneath `root`,
/// creating missing folders when `create`. `Ok(None)`: missing and not created.
fn open_dir(root: &Path, rel: &str, create: bool) -> io::Result<Option<OwnedFd>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(root, flags, Mode::empty())?;
    let mut walked = root.to_path_buf();
    for part in rel.split('/') {
        walked.push(part);
        let open =
            |d: &OwnedFd| rustix::fs::openat(d, part, flags | OFlags::NOFOLLOW, Mode::empty());
        dir = match open(&dir) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o750)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                open(&dir).map_err(|e| match e {
                    Errno::LOOP | Errno::NOTDIR => not_followed(walked.clone()),
                    e => e.into(),
                })?
            }
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP | Errno::NOTDIR) => return Err(not_followed(walked)),
            Err(e) => return Err(e.into()),
        };
    }
    Ok(Some(dir))
}

/// Splits `rel` into its folder and file name.
fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

/// Reads the saved file `rel` (a plain relative path) beneath `root`: `Ok(None)` when
/// it or a folder on the way is missing.
pub fn read(root: &Path, rel: &str) -> Result<Option<Vec<u8>>, StorageError> {
    let err = |source| StorageError::Read {
        path: root.join(rel),
        source,
    };
    let (folder, name) = split(rel);
    let Some(dir) = open_dir(root, folder, false).map_err(err)? else {
        return Ok(None);
    };
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => return Err(err(not_followed(root.join(rel)))),
        Err(e) => return Err(err(e.into())),
    };
    if !file.metadata().map_err(err)?.is_file() {
        return Err(err(not_followed(root.join(rel))));
    }
    let mut bytes = Vec::new();
    file.take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    if bytes.len() as u64 > MAX_STATE_BYTES {
        return Err(err(io::Error::other(format!(
            "larger than {MAX_STATE_BYTES} bytes: not a saved status"
        ))));
    }
    Ok(Some(bytes))
}

/// Writes `bytes` to `rel` beneath `root` atomically: a locked `.tmp-` file in the same
/// folder handle, synced, then renamed over the old one.
pub fn write(root: &Path, rel: &str, bytes: &[u8], durable: bool) -> Result<(), StorageError> {
    let (folder, name) = split(rel);
    let dir = open_dir(root, folder, true)
        .map_err(|source| StorageError::Create {
            dir: root.join(folder),
            source,
        })?
        .ok_or_else(|| StorageError::BadPath(rel.to_string()))?;
    let tmp = format!(
        ".tmp-state-{}-{}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    );
    let werr = |source| StorageError::Write {
        path: root.join(rel),
        source,
    };
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = rustix::fs::openat(&dir, tmp.as_str(), flags, Mode::from_raw_mode(0o600))
        .map(File::from)
        .map_err(|e| werr(e.into()))?;
    let written = file
        .try_lock()
        .map_err(io::Error::from)
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| if durable { file.sync_all() } else { Ok(()) })
        .and_then(|()| {
            rustix::fs::renameat(&dir, tmp.as_str(), &dir, name).map_err(io::Error::from)
        });
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty());
        return Err(werr(e));
    }
    if durable {
        let _ = rustix::fs::fsync(&dir);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn state_round_trips_and_replaces_atomically() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read(root.path(), ".state/ns/a.json").unwrap(), None);
        write(root.path(), ".state/ns/a.json", b"{\"x\":1}", true).unwrap();
        write(root.path(), ".state/ns/a.json", b"{\"x\":2}", false).unwrap();
        assert_eq!(
            read(root.path(), ".state/ns/a.json").unwrap().as_deref(),
            Some(&b"{\"x\":2}"[..])
        );
        let left: Vec<_> = std::fs::read_dir(root.path().join(".state/ns"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec!["a.json"], "no temp file left behind");
    }

    /// A link planted at any level below the root is refused for reading and writing,
    /// and nothing is written where it points.
    #[test]
    fn a_planted_symlink_is_never_followed() {
        for (planted, rel) in [
            (".state", ".state/ns/a.json"),
            (".state/ns", ".state/ns/a.json"),
            (".state/flux", ".state/flux/ns/a.json"),
        ] {
            let root = tempfile::tempdir().unwrap();
            let elsewhere = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(elsewhere.path().join("ns")).unwrap();
            std::fs::write(elsewhere.path().join("ns/a.json"), b"{}").unwrap();
            std::fs::write(elsewhere.path().join("a.json"), b"{}").unwrap();
            let at = root.path().join(planted);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            symlink(elsewhere.path(), &at).unwrap();

            let e = read(root.path(), rel).unwrap_err();
            assert!(format!("{:?}", e).contains("symlink"), "{planted}: {e:?}");
            let e = write(root.path(), rel, b"{\"x\":1}", false).unwrap_err();
            assert!(format!("{:?}", e).contains("symlink"), "{planted}: {e:?}");
            for f in ["ns/a.json", "a.json"] {
                assert_eq!(std::fs::read(elsewhere.path().join(f)).unwrap(), b"{}");
            }
            let names: Vec<_> = walk(elsewhere.path());
            assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
        }
    }

    #[test]
    fn a_symlinked_state_file_is_neither_read_nor_replaced_through() {
        let root = tempfile::tempdir().unwrap();
        let secret = root.path().join("secret.json");
        std::fs::write(&secret, b"{\"stolen\":true}").unwrap();
        std::fs::create_dir_all(root.path().join(".state/ns")).unwrap();
        symlink(&secret, root.path().join(".state/ns/a.json")).unwrap();
        assert!(read(root.path(), ".state/ns/a.json").is_err());
        // Renaming over a link replaces the link, never the file it names.
        write(root.path(), ".state/ns/a.json", b"{}", false).unwrap();
        assert_eq!(std::fs::read(&secret).unwrap(), b"{\"stolen\":true}");
        assert_eq!(
            read(root.path(), ".state/ns/a.json").unwrap().unwrap(),
            b"{}"
        );
    }

    /// Through the one-shot's own entry points: a status saved for an object whose
    /// namespace folder is a planted link is not written where the link points, and what
    /// lies there is not loaded as the object's previous status.
    #[test]
    fn one_shot_state_ignores_a_planted_namespace_link() {
        use crate::api::OciRepository;
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(
            elsewhere.path().join("app.json"),
            br#"{"observedGeneration":41}"#,
        )
        .unwrap();
        std::fs::create_dir_all(root.path().join(".state")).unwrap();
        symlink(elsewhere.path(), root.path().join(".state/team")).unwrap();
        let storage = crate::storage::Storage::new(root.path()).without_fsync();
        let mut obj: OciRepository = serde_json::from_value(serde_json::json!({
            "apiVersion": "ocisource.dev/v1beta1",
            "kind": "OCIRepository",
            "metadata": {"name": "app", "namespace": "team"},
            "spec": {"url": "oci://r.example/app", "interval": "5m"}
        }))
        .unwrap();
        assert_eq!(super::super::load_state(&storage, ".state", &mut obj), None);
        assert!(
            obj.status.is_none(),
            "loaded through the link: {:?}",
            obj.status
        );
        obj.status = Some(Default::default());
        assert!(super::super::save_state(&storage, ".state", &obj).is_err());
        assert_eq!(
            std::fs::read(elsewhere.path().join("app.json")).unwrap(),
            br#"{"observedGeneration":41}"#
        );
        assert_eq!(walk(elsewhere.path()), vec!["app.json".to_string()]);
    }

    fn walk(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            out.push(e.file_name().to_string_lossy().into_owned());
            if e.file_type().unwrap().is_dir() {
                out.extend(walk(&e.path()));
            }
        }
        out
    }
}
