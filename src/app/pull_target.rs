//! Where `ocisource pull` writes its tar.gz: a file (`--output-file FILE.tar.gz`, written
//! beside its target and renamed into place) or standard output (`--output-file -`).
//! Standard output gets the archive only once it is whole and checked: the merge may run
//! twice (a `.sourceignore` found late) and a layer may fail its digest at the end, so the
//! bytes go to a temp file first and are copied out after. The flag is checked before
//! any registry request: an existing directory is refused, naming the flags to use.

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
}

/// The name the archive gets in the temp directory of [`Target::Stdout`].
const STDOUT_FILE: &str = "artifact.tar.gz";

impl Target {
    /// Checks `--output-file` (`-` means standard output).
    pub(super) fn of(path: &Path) -> Result<Self, AppError> {
        if path == Path::new("-") {
            let dir = tempfile::Builder::new()
                .prefix("ocisource-pull-")
                .tempdir()
                .map_err(|e| {
                    AppError::Failed(format!(
                        "failed to create a temp directory for --output-file -: {e}"
                    ))
                })?;
            return Ok(Self::Stdout(dir));
        }
        if path.is_dir() {
            return Err(AppError::Input(format!(
                "invalid --output-file '{}': it is a directory; --output-file takes the \
                 tar.gz file to write (or - for standard output)",
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
            Self::Stdout(tmp) => tmp.path(),
        }
    }

    /// The file name within [`Target::dir`].
    pub(super) fn file(&self) -> &str {
        match self {
            Self::File { file, .. } => file,
            Self::Stdout(_) => STDOUT_FILE,
        }
    }

    /// After a successful pull: copies the archive to standard output when that is the
    /// target. Returns whether it did (then nothing else may be printed there).
    pub(super) fn deliver(&self) -> Result<bool, AppError> {
        let Self::Stdout(tmp) = self else {
            return Ok(false);
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
