//! The docker CLI user's own config (`$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`), whose credential helpers may run: `docker-credential-<name>
//! get` for a `credHelpers` entry or the `credsStore`, as the docker CLI does. Only the
//! CLI uses this. A [`UserDockerConfig`] can be made only by reading that file, so bytes
//! from anywhere else (a Kubernetes Secret, which the controller treats as data only)
//! can never reach [`run_helper`]: they parse into a `docker_config::DockerConfig`, which
//! has no way to run a program. No HTTP here.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::docker_config::{DockerConfig, DockerConfigError, HelperSource};
use crate::domain::secret::{Credentials, Redacted};

/// The CLI user's docker config, with its credential helpers.
#[derive(Debug)]
pub struct UserDockerConfig {
    config: DockerConfig,
}

impl UserDockerConfig {
    /// Reads the config at [`default_path`]; `None` when there is no such file.
    pub fn load_default() -> Result<Option<Self>, DockerConfigError> {
        match default_path().filter(|p| p.exists()) {
            Some(p) => Self::from_file(&p).map(Some),
            None => Ok(None),
        }
    }

    fn from_file(path: &Path) -> Result<Self, DockerConfigError> {
        Ok(Self {
            config: DockerConfig::load(path)?,
        })
    }

    /// Credentials for `host` (host[:port]), in the docker CLI's order: a `credHelpers`
    /// helper, then `auths`, then the `credsStore` helper. `None` when nothing has any.
    pub fn credentials_for(&self, host: &str) -> Result<Option<Credentials>, DockerConfigError> {
        let helper = self.config.helper_for(host);
        if let Some(h) = helper
            .as_ref()
            .filter(|h| h.source == HelperSource::PerHost)
        {
            return run_helper(&h.name, host);
        }
        if let Some(c) = self.config.credentials_for(host)? {
            return Ok(Some(c));
        }
        match helper {
            Some(h) => run_helper(&h.name, host),
            None => Ok(None),
        }
    }
}

#[derive(serde::Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username")]
    username: String,
    #[serde(rename = "Secret")]
    secret: String,
}

/// Runs `docker-credential-<helper> get` with `host` on stdin.
fn run_helper(helper: &str, host: &str) -> Result<Option<Credentials>, DockerConfigError> {
    let fail = |message: String| DockerConfigError::Helper {
        helper: helper.into(),
        host: host.into(),
        message,
    };
    if !helper
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return Err(fail("invalid helper name".into()));
    }
    let mut child = Command::new(format!("docker-credential-{helper}"))
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(host.as_bytes())
            .map_err(|e| fail(e.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        // Helpers exit non-zero with "credentials not found" for unknown hosts.
        return Ok(None);
    }
    let a: HelperAnswer =
        serde_json::from_slice(&out.stdout).map_err(|_| fail("unreadable answer".into()))?;
    Ok(Some(Credentials {
        username: a.username,
        password: Redacted::new(a.secret),
    }))
}

/// The docker CLI's config file: `$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`; `None` when neither variable is set.
pub fn default_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".docker").join("config.json"))
}

/// Credentials for `host` from the CLI user's own docker config (helpers included);
/// `None` when the file is absent or has nothing for the host.
pub fn default_credentials(host: &str) -> Result<Option<Credentials>, DockerConfigError> {
    match UserDockerConfig::load_default()? {
        Some(c) => c.credentials_for(host),
        None => Ok(None),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_helper_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(
            &path,
            br#"{"credHelpers":{"h.example":"ocisource-absent"}}"#,
        )
        .unwrap();
        let e = UserDockerConfig::from_file(&path)
            .unwrap()
            .credentials_for("h.example")
            .unwrap_err();
        assert!(
            e.to_string().contains("docker-credential-ocisource-absent"),
            "{e}"
        );
    }
}
