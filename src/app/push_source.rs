//! What `ocisource push --path` publishes, as `flux push artifact` takes it: a directory,
//! one file (stored under its own name), or `-` for standard input (stored as one file
//! named [`STDIN_NAME`]; Flux gives it a random temp-file name, a fixed one keeps the
//! layer digest reproducible). Everything becomes one tar stream for the archive merger.
//!
//! Exclusions follow Flux's push: VCS files (`sourceignore.ExcludeVCS`) and, unless
//! `--ignore-paths` replaces them, media and archive files (`ExcludeExt`). Unlike Flux,
//! `--ignore-paths` does not bring VCS files back: source-controller itself always drops
//! them, so a pushed `.git/` would never reach a consumer anyway. Excluded directories are
//! not entered; `.sourceignore` files are honoured by the merger as on pull.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::domain::ignore::IgnoreRules;

use super::{reference, AppError};

/// The name standard input gets inside the artifact.
pub const STDIN_NAME: &str = "stdin.yaml";

/// Always left out (Flux's `sourceignore.ExcludeVCS`).
const VCS: &str = ".git/\n.gitignore\n.gitmodules\n.gitattributes\n";

/// Left out unless `--ignore-paths` is given (Flux's `sourceignore.ExcludeExt`).
const DEFAULT_PATTERNS: &str = "*.jpg\n*.jpeg\n*.gif\n*.png\n*.wmv\n*.flv\n*.tar.gz\n*.zip\n";

/// A resolved `--path`.
#[derive(Clone, Debug)]
pub enum Source {
    /// A directory, walked in sorted order.
    Dir(PathBuf),
    /// One file, stored as `name` at the artifact's root.
    File {
        /// Where its bytes are.
        path: PathBuf,
        /// Its name in the artifact.
        name: String,
    },
}

/// The source and, for standard input, the temp file holding it (removed on drop).
#[derive(Debug)]
pub struct Prepared {
    /// What to archive.
    pub source: Source,
    _stdin: Option<tempfile::NamedTempFile>,
}

/// The ignore rules of a push: VCS files, then `--ignore-paths` or Flux's default patterns.
pub fn rules(ignore_paths: Option<&[String]>) -> Result<IgnoreRules, AppError> {
    let patterns = match ignore_paths {
        Some(list) => list.join("\n"),
        None => DEFAULT_PATTERNS.to_string(),
    };
    reference::ignore_rules("--ignore-paths", &format!("{VCS}{patterns}"))
}

/// Resolves `--path`; reads standard input into a temp file for `-`.
pub fn prepare(path: &Path, rules: &IgnoreRules) -> Result<Prepared, AppError> {
    if path.as_os_str() == "-" {
        let mut stdin = std::io::stdin().lock();
        if stdin.is_terminal() {
            return Err(AppError::Input(
                "--path - reads standard input, which is a terminal: pipe the content in, e.g. kustomize build . | ocisource push ... --path -".into(),
            ));
        }
        let mut tmp = tempfile::NamedTempFile::new()
            .map_err(|e| AppError::Failed(format!("failed to create a temp file: {e}")))?;
        std::io::copy(&mut stdin, &mut tmp)
            .and_then(|_| tmp.flush())
            .map_err(|e| {
                AppError::Input(format!("failed to read standard input (--path -): {e}"))
            })?;
        return Ok(Prepared {
            source: Source::File {
                path: tmp.path().to_path_buf(),
                name: STDIN_NAME.into(),
            },
            _stdin: Some(tmp),
        });
    }
    let meta = std::fs::metadata(path).map_err(|e| {
        AppError::Input(format!(
            "invalid --path '{}': {e}; expected a directory, a file, or - for standard input",
            path.display()
        ))
    })?;
    let source = if meta.is_dir() {
        Source::Dir(path.to_path_buf())
    } else {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                AppError::Input(format!(
                    "invalid --path '{}': the file name is not UTF-8",
                    path.display()
                ))
            })?
            .to_string();
        if rules.is_ignored(&name, false) {
            return Err(AppError::Input(format!(
                "--path '{}' is left out by the ignore patterns (VCS files, then --ignore-paths or the default *.jpg, *.png, *.tar.gz, *.zip, ...): give --ignore-paths to choose other patterns",
                path.display()
            )));
        }
        Source::File {
            path: path.to_path_buf(),
            name,
        }
    };
    Ok(Prepared {
        source,
        _stdin: None,
    })
}

/// Writes `source` as a tar stream into `builder`, leaving out what `rules` exclude.
pub fn append<W: Write>(
    builder: &mut tar::Builder<W>,
    source: &Source,
    rules: &IgnoreRules,
) -> std::io::Result<()> {
    match source {
        Source::Dir(root) => append_sorted(builder, root, Path::new(""), rules),
        Source::File { path, name } => builder.append_path_with_name(path, name),
    }
}

fn append_sorted<W: Write>(
    builder: &mut tar::Builder<W>,
    root: &Path,
    rel: &Path,
    rules: &IgnoreRules,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    // .sourceignore first in each directory, so its rules are known before its siblings.
    entries.sort_by_key(|e| e.file_name() != ".sourceignore");
    for entry in entries {
        let name = rel.join(entry.file_name());
        let kind = entry.file_type()?;
        if rules.is_ignored(&name.to_string_lossy(), kind.is_dir()) {
            continue;
        }
        builder.append_path_with_name(entry.path(), &name)?;
        if kind.is_dir() {
            append_sorted(builder, root, &name, rules)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn vcs_files_stay_out_whatever_ignore_paths_say() {
        let default = rules(None).unwrap();
        let own = rules(Some(&["*.md".to_string(), "tests/".to_string()])).unwrap();
        for r in [&default, &own] {
            assert!(r.is_ignored(".git", true) && r.is_ignored(".git/config", false));
            assert!(r.is_ignored("sub/.gitignore", false));
            assert!(!r.is_ignored("deploy.yaml", false));
        }
        assert!(default.is_ignored("logo.png", false) && !own.is_ignored("logo.png", false));
        assert!(own.is_ignored("README.md", false) && own.is_ignored("tests/a.yaml", false));
        assert!(!default.is_ignored("README.md", false));
    }
}
