//! Docker config JSON as data: parses `auths` (keyed by host or URL; `auth` as base64
//! `user:pass`, or `username`/`password`, or `identitytoken`; also the legacy
//! `.dockercfg` form) and reports which credential helper (`credHelpers`, `credsStore`)
//! the config names for a host. Pure: bytes in, a typed config out, no file reads and no
//! program runs. A [`DockerConfig`] built from any bytes (a tenant's `dockerconfigjson`
//! Secret) can only ever yield the credentials written in it. Reading the CLI user's
//! config file and running its helpers is the registry adapter's business
//! (`registry::docker_config`, `registry::credential_helper`). Never prints secrets.

use std::collections::BTreeMap;

use base64::Engine as _;

use crate::domain::secret::{Credentials, Redacted};

/// Docker config bytes that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DockerConfigError {
    /// The JSON is malformed. The parser's message is kept with every quoted value
    /// replaced by `"…"`: serde quotes the offending value (`invalid type: string "…"`),
    /// which in a docker config may be a password or a token.
    #[error("failed to parse docker config: {message}")]
    Parse {
        /// What is wrong and where, values left out.
        message: String,
    },
    /// An `auth` entry is not base64 of `user:password`.
    #[error("failed to decode the auth entry for '{host}': expected base64 of 'user:password'")]
    Auth {
        /// Registry host of the entry.
        host: String,
    },
}

#[derive(Clone, Default, serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// Where a config names a credential helper for a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelperSource {
    /// `credHelpers` has an entry for the host.
    PerHost,
    /// `credsStore`, the default helper for every host.
    Store,
}

impl HelperSource {
    /// The config key, as docker spells it.
    pub fn key(self) -> &'static str {
        match self {
            Self::PerHost => "credHelpers",
            Self::Store => "credsStore",
        }
    }
}

/// A credential helper a config names for a host: the program would be
/// `docker-credential-<name>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedHelper {
    /// The helper's name.
    pub name: String,
    /// Which key named it.
    pub source: HelperSource,
}

/// A parsed docker config: data only, it cannot run a credential helper.
#[derive(Clone, Default, serde::Deserialize)]
pub struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

impl std::fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerConfig")
            .field("auths", &self.auths.keys().collect::<Vec<_>>())
            .field("cred_helpers", &self.cred_helpers)
            .field("creds_store", &self.creds_store)
            .finish()
    }
}

/// `https://index.docker.io/v1/` → `index.docker.io`; `host:5000/path` → `host:5000`.
pub fn normalize_host(key: &str) -> String {
    let k = key.trim();
    let k = k
        .strip_prefix("https://")
        .or_else(|| k.strip_prefix("http://"))
        .unwrap_or(k);
    let host = k.split('/').next().unwrap_or(k).to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "registry-1.docker.io" => "index.docker.io".into(),
        _ => host,
    }
}

/// `text` with the content of every double-quoted string (Rust `Debug` quoting, as serde
/// writes values into its messages) replaced by `…`.
fn without_quoted_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '"' {
            continue;
        }
        out.push('…');
        let mut escaped = false;
        for inner in chars.by_ref() {
            match (escaped, inner) {
                (false, '\\') => escaped = true,
                (false, '"') => {
                    out.push('"');
                    break;
                }
                _ => escaped = false,
            }
        }
    }
    out
}

fn parse_error(e: serde_json::Error) -> DockerConfigError {
    DockerConfigError::Parse {
        message: without_quoted_values(&e.to_string()),
    }
}

impl DockerConfig {
    /// Parses config JSON (`config.json` or a `.dockerconfigjson` Secret value).
    pub fn parse(json: &[u8]) -> Result<Self, DockerConfigError> {
        serde_json::from_slice(json).map_err(parse_error)
    }

    /// Parses the legacy `.dockercfg` format (a `kubernetes.io/dockercfg` Secret): the
    /// `auths` map itself, without the wrapping object, as Kubernetes and Flux read it.
    pub fn parse_legacy(json: &[u8]) -> Result<Self, DockerConfigError> {
        let auths = serde_json::from_slice(json).map_err(parse_error)?;
        Ok(Self {
            auths,
            ..Self::default()
        })
    }

    /// Credentials written in `auths` for `host` (host[:port]); `None` when there are
    /// none. Never asks a credential helper.
    pub fn credentials_for(&self, host: &str) -> Result<Option<Credentials>, DockerConfigError> {
        let want = normalize_host(host);
        match self.auths.iter().find(|(k, _)| normalize_host(k) == want) {
            Some((key, entry)) => entry_credentials(key, entry),
            None => Ok(None),
        }
    }

    /// The credential helper the docker CLI would ask for `host`: its `credHelpers`
    /// entry, else `credsStore`. Only reports the name.
    pub fn helper_for(&self, host: &str) -> Option<NamedHelper> {
        let want = normalize_host(host);
        let per_host = self
            .cred_helpers
            .iter()
            .find(|(k, _)| normalize_host(k) == want)
            .map(|(_, v)| (v, HelperSource::PerHost));
        let (name, source) = per_host.or_else(|| {
            self.creds_store
                .as_ref()
                .filter(|s| !s.is_empty())
                .map(|s| (s, HelperSource::Store))
        })?;
        Some(NamedHelper {
            name: name.clone(),
            source,
        })
    }
}

fn entry_credentials(host: &str, e: &AuthEntry) -> Result<Option<Credentials>, DockerConfigError> {
    let (mut user, mut pass) = (e.username.clone(), e.password.clone());
    if let Some(auth) = e.auth.as_deref().filter(|a| !a.is_empty()) {
        let bad = || DockerConfigError::Auth {
            host: host.to_string(),
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| bad())?;
        let text = String::from_utf8(raw).map_err(|_| bad())?;
        let (u, p) = text.split_once(':').ok_or_else(bad)?;
        user = Some(u.to_string());
        pass = Some(p.to_string());
    }
    // An identity token is sent as the password of the token request, as the docker
    // CLI's "<token>" user convention expects.
    if let Some(tok) = e.identitytoken.as_deref().filter(|t| !t.is_empty()) {
        return Ok(Some(Credentials {
            username: user
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "<token>".into()),
            password: Redacted::new(tok.to_string()),
        }));
    }
    Ok(match (user, pass) {
        (Some(u), Some(p)) if !u.is_empty() => Some(Credentials {
            username: u,
            password: Redacted::new(p),
        }),
        _ => None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    /// Found by the long fuzz run: an `auths` entry that is a string had its value (a
    /// credential) quoted in the parse error.
    #[test]
    fn a_parse_error_never_quotes_a_value() {
        let json = br#"{"auths": {"gio": {"auth": "cqqqqqqqqqqwc"}, "h": "c2VjcmV0LXRva2Vu"}}"#;
        let err = DockerConfig::parse(json).err().unwrap();
        let text = crate::domain::error_chain::chain(&err);
        assert!(!text.contains("c2VjcmV0LXRva2Vu"), "{text}");
        assert!(text.contains("invalid type: string \"…\""), "{text}");
        assert!(text.contains("line 1"), "{text}");
        let legacy = DockerConfig::parse_legacy(br#"{"h": "c2VjcmV0"}"#)
            .err()
            .unwrap();
        assert!(!legacy.to_string().contains("c2VjcmV0"), "{legacy}");
        assert_eq!(
            without_quoted_values(r#"a "x\"y" b "" c"#),
            r#"a "…" b "…" c"#
        );
    }

    use super::*;

    #[test]
    fn reads_auth_and_username_password_entries_by_normalised_host() {
        let auth = base64::engine::general_purpose::STANDARD.encode("bob:p@ss:word");
        let json = format!(
            r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{auth}"}},
                "reg.example:5000":{{"username":"amy","password":"pw"}},
                "https://tok.example/":{{"identitytoken":"idtok"}}}}}}"#
        );
        let cfg = DockerConfig::parse(json.as_bytes()).unwrap();
        let c = cfg.credentials_for("docker.io").unwrap().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.expose().as_str()),
            ("bob", "p@ss:word")
        );
        let c = cfg.credentials_for("reg.example:5000").unwrap().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.expose().as_str()),
            ("amy", "pw")
        );
        let c = cfg.credentials_for("tok.example").unwrap().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.expose().as_str()),
            ("<token>", "idtok")
        );
        assert!(cfg.credentials_for("other.example").unwrap().is_none());
        assert!(!format!("{cfg:?}").contains(&auth));
    }

    #[test]
    fn legacy_dockercfg_is_the_auths_map_itself() {
        let auth = base64::engine::general_purpose::STANDARD.encode("old:timer");
        let json =
            format!(r#"{{"https://index.docker.io/v1/":{{"auth":"{auth}","email":"a@b.c"}}}}"#);
        let cfg = DockerConfig::parse_legacy(json.as_bytes()).unwrap();
        let c = cfg.credentials_for("index.docker.io").unwrap().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.expose().as_str()),
            ("old", "timer")
        );
        assert!(
            DockerConfig::parse(json.as_bytes())
                .unwrap()
                .credentials_for("index.docker.io")
                .unwrap()
                .is_none(),
            "the new format has no such top-level key"
        );
    }

    #[test]
    fn rejects_malformed_auth_without_echoing_it() {
        let cfg = DockerConfig::parse(br#"{"auths":{"h":{"auth":"bm9jb2xvbg=="}}}"#).unwrap();
        let e = cfg.credentials_for("h").unwrap_err();
        assert!(matches!(e, DockerConfigError::Auth { .. }));
        assert!(!e.to_string().contains("bm9jb2xvbg"));
    }

    #[test]
    fn helpers_are_named_but_never_asked() {
        let cfg = DockerConfig::parse(
            br#"{"credHelpers":{"h.example":"perhost"},"credsStore":"store",
                 "auths":{"a.example":{"username":"u","password":"p"}}}"#,
        )
        .unwrap();
        assert_eq!(
            cfg.helper_for("h.example"),
            Some(NamedHelper {
                name: "perhost".into(),
                source: HelperSource::PerHost
            })
        );
        assert_eq!(
            cfg.helper_for("other.example").map(|h| h.source),
            Some(HelperSource::Store)
        );
        assert!(cfg.credentials_for("h.example").unwrap().is_none());
        assert!(cfg.credentials_for("a.example").unwrap().is_some());
        assert_eq!(DockerConfig::default().helper_for("h.example"), None);
    }
}
