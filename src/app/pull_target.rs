//! Where `ocisource pull` writes its tar.gz: a file (`--output-file FILE.tar.gz`, written
//! beside its target and renamed into place), standard output (`--output-file -`), or a
//! directory it is unpacked into (`--extract DIR`). Standard output and the directory get
//! the archive only once it is whole and checked: the merge may run twice (a
//! `.sourceignore` found late) and a layer may fail its digest at the end, so the bytes go
//! to a temp file first. The flags are checked before any registry request: an existing
//! directory given to `--output-file` and a non-empty `--extract` directory are refused.
//!
//! Unpacking reads the archive the merge just normalised (names checked, no `..`, no
//! absolute path, entries and bytes within the pull's limits) and still writes regular
//! files and directories only, through `tar`'s `unpack_in`, which refuses a path that
//! leaves the directory: no symlink is created, so none can be followed.

use std::path::{Path, PathBuf};

use super::AppError;

/// The destination of the tar.gz.
pub(super) enum Target {
    /// The file `dir/file`.
    File {
        /// The directory the store writes its temp file in.
        dir: PathBuf,
        /// The file name within it.
        file: String,
    },
    /// Standard output, through a temp file in this directory.
    Stdout(tempfile::TempDir),
    /// The new or empty directory `into`, through a temp file in `tmp`.
    Extract {
        /// Where the tar.gz is written first.
        tmp: tempfile::TempDir,
        /// Where it is unpacked.
        into: PathBuf,
    },
}

/// The name the archive gets in the temp directory of [`Target::Stdout`].
const STDOUT_FILE: &str = "artifact.tar.gz";

impl Target {
    /// Checks `--output-file` (`-` means standard output) and `--extract`.
    pub(super) fn of(output_file: Option<&Path>, extract: Option<&Path>) -> Result<Self, AppError> {
        match (output_file, extract) {
            (_, Some(into)) => Self::extract(into),
            (Some(path), None) if path == Path::new("-") => Ok(Self::Stdout(temp_dir()?)),
            (Some(path), None) => Self::to_file(path),
            (None, None) => Err(AppError::Input(
                "pull needs --output-file FILE.tar.gz, --output-file - or --extract DIR".into(),
            )),
        }
    }

    fn extract(into: &Path) -> Result<Self, AppError> {
        let refuse = |why: &str| {
            AppError::Input(format!(
                "invalid --extract '{}': {why}; give a new or empty directory (nothing is \
                 overwritten)",
                into.display()
            ))
        };
        if into.exists() {
            let mut entries = std::fs::read_dir(into)
                .map_err(|_| refuse("it exists and is not a readable directory"))?;
            if entries.next().is_some() {
                return Err(refuse("the directory is not empty"));
            }
        }
        Ok(Self::Extract {
            tmp: temp_dir()?,
            into: into.to_path_buf(),
        })
    }

    fn to_file(path: &Path) -> Result<Self, AppError> {
        if path.is_dir() {
            return Err(AppError::Input(format!(
                "invalid --output-file '{}': it is a directory; --output-file takes the \
                 tar.gz file to write (or - for standard output); to unpack the artifact \
                 use --extract DIR",
                path.display()
            )));
        }
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .filter(|f| !f.is_empty())
            .ok_or_else(|| {
                AppError::Input(format!(
                    "invalid --output-file '{}': expected a file path",
                    path.display()
                ))
            })?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(Self::File {
            dir,
            file: file.to_string(),
        })
    }

    /// The directory the store writes in.
    pub(super) fn dir(&self) -> &Path {
        match self {
            Self::File { dir, .. } => dir,
            Self::Stdout(tmp) | Self::Extract { tmp, .. } => tmp.path(),
        }
    }

    /// The file name within [`Target::dir`].
    pub(super) fn file(&self) -> &str {
        match self {
            Self::File { file, .. } => file,
            Self::Stdout(_) | Self::Extract { .. } => STDOUT_FILE,
        }
    }

    /// After a successful pull: copies the archive to standard output, or unpacks it,
    /// when that is the target. Returns whether standard output was used (then nothing
    /// else may be printed there).
    pub(super) fn deliver(&self) -> Result<bool, AppError> {
        let tmp = match self {
            Self::File { .. } => return Ok(false),
            Self::Extract { tmp, into } => {
                unpack(&tmp.path().join(STDOUT_FILE), into)?;
                return Ok(false);
            }
            Self::Stdout(tmp) => tmp,
        };
        let failed = |e: std::io::Error| {
            AppError::Failed(format!(
                "failed to write the tar.gz to standard output: {e}"
            ))
        };
        let mut file = std::fs::File::open(tmp.path().join(STDOUT_FILE)).map_err(failed)?;
        let mut stdout = std::io::stdout().lock();
        std::io::copy(&mut file, &mut stdout).map_err(failed)?;
        std::io::Write::flush(&mut stdout).map_err(failed)?;
        Ok(true)
    }
}

/// A temp directory for the archive before it reaches stdout or `--extract`.
fn temp_dir() -> Result<tempfile::TempDir, AppError> {
    tempfile::Builder::new()
        .prefix("ocisource-pull-")
        .tempdir()
        .map_err(|e| AppError::Failed(format!("failed to create a temp directory: {e}")))
}

/// Unpacks the normalised tar.gz `archive` into `into` (created), files and directories
/// only, none outside `into`.
fn unpack(archive: &Path, into: &Path) -> Result<(), AppError> {
    let failed = |what: String, e: std::io::Error| {
        AppError::Failed(format!(
            "failed to extract {what} into --extract '{}': {e}",
            into.display()
        ))
    };
    std::fs::create_dir_all(into).map_err(|e| failed("the artifact".into(), e))?;
    let file = std::fs::File::open(archive).map_err(|e| failed("the artifact".into(), e))?;
    let gz = flate2::read::GzDecoder::new(std::io::BufReader::new(file));
    let mut tar = tar::Archive::new(gz);
    tar.set_preserve_mtime(false);
    let entries = tar
        .entries()
        .map_err(|e| failed("the artifact".into(), e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| failed("the artifact".into(), e))?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let name = crate::domain::text::printable(&raw).into_owned();
        let what = || format!("entry '{name}'");
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            return Err(failed(
                what(),
                std::io::Error::other(format!(
                    "a {kind:?} entry; only files and directories are written"
                )),
            ));
        }
        if !entry.unpack_in(into).map_err(|e| failed(what(), e))? {
            return Err(failed(
                what(),
                std::io::Error::other("its path leaves the directory"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A tar.gz with one entry of `kind` named `name` (written raw: `tar` refuses `..`).
    fn archive(dir: &Path, name: &str, kind: tar::EntryType) -> PathBuf {
        let mut header = tar::Header::new_gnu();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(kind);
        if kind.is_symlink() {
            header.set_link_name("/etc").unwrap();
        }
        header.set_size(2);
        header.set_mode(0o600);
        header.set_cksum();
        let path = dir.join("a.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        let mut tar = tar::Builder::new(gz);
        tar.append(&header, &b"x\n"[..]).unwrap();
        tar.into_inner().unwrap().finish().unwrap();
        path
    }

    #[test]
    fn unpack_writes_files_inside_and_refuses_symlinks_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let into = dir.path().join("into");
        let ok = archive(dir.path(), "a/b.yaml", tar::EntryType::Regular);
        unpack(&ok, &into).unwrap();
        assert_eq!(std::fs::read(into.join("a/b.yaml")).unwrap(), b"x\n");
        for (name, kind, needle) in [
            (
                "link",
                tar::EntryType::Symlink,
                "only files and directories",
            ),
            ("../escape", tar::EntryType::Regular, "leaves the directory"),
        ] {
            let bad = archive(dir.path(), name, kind);
            let e = unpack(&bad, &into).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains(name), "{name}: {e}");
        }
        assert!(!dir.path().join("escape").exists() && !into.join("link").exists());
    }
}
