//! The docker config on disk: [`DockerConfig::load`] reads a file into the domain's
//! pure [`DockerConfig`] (parsing and the `auths` lookup live in
//! `domain::docker_config`), and [`DockerConfigError`] adds the adapter's failures
//! (reading the file, a credential helper) to the domain's parse errors. Running helpers
//! is `credential_helper`'s business, reachable only from the CLI user's own config file.
//! No HTTP here.

use std::path::{Path, PathBuf};

pub use crate::domain::docker_config::{normalize_host, DockerConfig, HelperSource, NamedHelper};

/// A failure to read credentials from a docker config.
#[derive(Debug, thiserror::Error)]
pub enum DockerConfigError {
    /// The file could not be read.
    #[error("failed to read docker config {path}")]
    Read {
        /// File path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The bytes do not parse, or an entry is malformed.
    #[error(transparent)]
    Config(#[from] crate::domain::docker_config::DockerConfigError),
    /// A credential helper failed.
    #[error("failed to get credentials for '{host}' from docker-credential-{helper}: {message}")]
    Helper {
        /// Helper name.
        helper: String,
        /// Registry host.
        host: String,
        /// What went wrong (never the helper's output).
        message: String,
    },
}

/// Reading a config file is I/O, so it lives in the adapter, beside the domain type's
/// pure parsers.
impl DockerConfig {
    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Self, DockerConfigError> {
        let bytes = std::fs::read(path).map_err(|source| DockerConfigError::Read {
            path: path.into(),
            source,
        })?;
        Ok(Self::parse(&bytes)?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_and_parsed_and_a_missing_one_names_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(
            &path,
            br#"{"auths":{"reg.example":{"username":"u","password":"p"}}}"#,
        )
        .unwrap();
        let cfg = DockerConfig::load(&path).unwrap();
        assert!(cfg.credentials_for("reg.example").unwrap().is_some());
        let missing = dir.path().join("none.json");
        let e = DockerConfig::load(&missing).unwrap_err();
        assert!(matches!(e, DockerConfigError::Read { .. }));
        assert!(e.to_string().contains("none.json"), "{e}");
        std::fs::write(&path, b"{").unwrap();
        let e = DockerConfig::load(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to parse docker config: EOF while parsing an object at line 1 column 1"
        );
    }
}
