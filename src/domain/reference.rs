//! `spec.url` and `spec.ref`: parsing `oci://host[:port]/path` with Docker Hub's names
//! as go-containerregistry (hence Flux) reads them, the ref precedence (digest > semver >
//! tag > `latest`), and the revision string Flux consumers see.
//!
//! Docker Hub: the first path component is a registry only when it is `localhost` or
//! holds a `.` or `:`; otherwise the registry is `index.docker.io`. `docker.io` means
//! `index.docker.io`, and a Docker Hub repository without a `/` is in `library/`
//! (`oci://docker.io/nginx` is `index.docker.io/library/nginx`), for pulls and for the
//! credential lookup alike.

use std::fmt;

use super::digest::Digest;
use super::semver_range::{TagMapping, VersionRange};

/// Docker Hub's registry host, as go-containerregistry names it.
pub const DOCKER_HUB: &str = "index.docker.io";

/// A parsed `oci://host[:port]/path` repository URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryUrl {
    /// `host[:port]`, as the registry is addressed.
    pub host: String,
    /// Repository path inside the registry, e.g. `team/app-config`.
    pub repository: String,
}

/// Why `spec.url` is not usable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    /// Wrong scheme.
    #[error("invalid url '{0}': must start with oci://, e.g. oci://ghcr.io/org/repo")]
    Scheme(String),
    /// A tag or digest was put in the URL.
    #[error("invalid url '{0}': a tag or digest belongs in spec.ref (tag, semver or digest), not in the url")]
    RefInUrl(String),
    /// Missing or malformed host.
    #[error("invalid url '{0}': missing or malformed registry host")]
    Host(String),
    /// Malformed repository path.
    #[error("invalid url '{url}': repository path '{path}' must be lower-case components of [a-z0-9] separated by '.', '_', '-' and '/'")]
    Path {
        /// The whole URL.
        url: String,
        /// The offending path.
        path: String,
    },
}

impl RepositoryUrl {
    /// Parses `oci://host[:port]/path` (Docker Hub names as described in the module doc).
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let rest = url
            .strip_prefix("oci://")
            .ok_or_else(|| UrlError::Scheme(url.to_string()))?;
        let rest = rest.trim_end_matches('/');
        let (host, path) = match rest.split_once('/') {
            Some((first, path)) if first == "localhost" || first.contains(['.', ':']) => {
                (first, path)
            }
            _ if rest.is_empty() => return Err(UrlError::Host(url.to_string())),
            _ => (DOCKER_HUB, rest),
        };
        if path.contains('@') {
            return Err(UrlError::RefInUrl(url.to_string()));
        }
        if path
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(':'))
        {
            return Err(UrlError::RefInUrl(url.to_string()));
        }
        if !valid_host(host) {
            return Err(UrlError::Host(url.to_string()));
        }
        if !path.split('/').all(valid_path_component) {
            return Err(UrlError::Path {
                url: url.to_string(),
                path: path.to_string(),
            });
        }
        let host = if host == "docker.io" {
            DOCKER_HUB
        } else {
            host
        };
        let repository = if host == DOCKER_HUB && !path.contains('/') {
            format!("library/{path}")
        } else {
            path.to_string()
        };
        Ok(Self {
            host: host.to_string(),
            repository,
        })
    }
}

impl fmt::Display for RepositoryUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.host, self.repository)
    }
}

fn valid_host(host: &str) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) if !n.ends_with(']') || host.starts_with('[') => (n, Some(p)),
        _ => (host, None),
    };
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'[' | b']' | b':'));
    port_ok && name_ok
}

fn valid_path_component(c: &str) -> bool {
    // distribution's grammar: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
    if c.is_empty() {
        return false;
    }
    let bytes = c.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    bytes
        .iter()
        .all(|&b| alnum(b) || matches!(b, b'.' | b'_' | b'-'))
        && !c.contains("..")
        && !c.contains("___")
        && !c.contains("._")
        && !c.contains("_.")
}

/// What `spec.ref` asks for, after precedence is applied.
#[derive(Clone, Debug)]
pub enum RefSpec {
    /// A fixed manifest digest.
    Digest(Digest),
    /// The highest tag matching a semver range, after an optional tag filter.
    Semver(SemverRef),
    /// A tag.
    Tag(String),
}

/// A semver ref as written. The range and the filter are compiled only after the tags
/// are listed, as Flux does: an invalid range is a retried read failure
/// (`ReadOperationFailed`), not a stalled spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemverRef {
    /// The range, e.g. `>=1.0.0 <2.0.0`.
    pub range: String,
    /// `semverFilter`: tags not matching this (unanchored) regex are ignored.
    pub filter: Option<String>,
    /// How tags spell versions (Helm charts write `+` as `_`).
    pub mapping: TagMapping,
}

impl SemverRef {
    /// The compiled range and filter, or what is wrong with them.
    pub fn compile(&self) -> Result<(VersionRange, Option<regex::Regex>), RefError> {
        let filter = self
            .filter
            .as_deref()
            .map(|f| {
                regex::Regex::new(f).map_err(|source| RefError::Filter {
                    filter: f.to_string(),
                    source,
                })
            })
            .transpose()?;
        let range = VersionRange::parse(&self.range).map_err(|reason| RefError::Semver {
            range: self.range.clone(),
            reason,
        })?;
        Ok((range, filter))
    }
}

/// Why `spec.ref` is not usable.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    /// Bad digest.
    #[error("invalid spec.ref.digest: {0}")]
    Digest(#[from] super::digest::DigestError),
    /// Bad range.
    #[error("invalid spec.ref.semver '{range}': {reason}")]
    Semver {
        /// The range as written.
        range: String,
        /// What is wrong.
        reason: String,
    },
    /// Bad filter.
    #[error("invalid spec.ref.semverFilter '{filter}': {source}")]
    Filter {
        /// The regex as written.
        filter: String,
        /// The regex error.
        source: regex::Error,
    },
    /// Bad tag.
    #[error("invalid spec.ref.tag '{0}': a tag is 1 to 128 characters of [A-Za-z0-9_.-] not starting with '.' or '-'")]
    Tag(String),
}

impl RefSpec {
    /// Applies Flux's precedence: digest, then semver, then tag, else `latest`.
    pub fn from_fields(
        tag: Option<&str>,
        semver: Option<&str>,
        semver_filter: Option<&str>,
        digest: Option<&str>,
    ) -> Result<Self, RefError> {
        if let Some(d) = non_empty(digest) {
            return Ok(Self::Digest(d.parse()?));
        }
        if let Some(r) = non_empty(semver) {
            return Ok(Self::Semver(SemverRef {
                range: r.to_string(),
                filter: non_empty(semver_filter).map(String::from),
                mapping: TagMapping::Plain,
            }));
        }
        let tag = non_empty(tag).unwrap_or("latest");
        if !valid_tag(tag) {
            return Err(RefError::Tag(tag.to_string()));
        }
        Ok(Self::Tag(tag.to_string()))
    }
}

impl RefSpec {
    /// Reads semver tags the way `spec.layerSelector.mediaType` implies (Helm charts spell
    /// `+` as `_`); other refs are unchanged.
    pub fn with_layer_media_type(self, media_type: Option<&str>) -> Self {
        match self {
            Self::Semver(s) => Self::Semver(SemverRef {
                mapping: TagMapping::for_layer_media_type(media_type),
                ..s
            }),
            other => other,
        }
    }

    /// Compiles a semver range and filter now, for callers that want to fail before
    /// contacting the registry (the CLI); the controller lets the resolve step do it.
    pub fn check(&self) -> Result<(), RefError> {
        match self {
            Self::Semver(s) => s.compile().map(|_| ()),
            _ => Ok(()),
        }
    }
}

/// Splits `oci://host[:port]/path:tag` or `oci://host[:port]/path@sha256:…` (the CLI's
/// image reference form) into the repository and its ref; no tag means `latest`.
pub fn parse_image_ref(s: &str) -> Result<(RepositoryUrl, RefSpec), UrlError> {
    let (repo, reference) = if let Some((repo, digest)) = s.split_once('@') {
        let d: Digest = digest
            .parse()
            .map_err(|_| UrlError::RefInUrl(s.to_string()))?;
        (repo.to_string(), RefSpec::Digest(d))
    } else {
        let after_host = s
            .strip_prefix("oci://")
            .and_then(|r| r.find('/'))
            .map(|i| i + "oci://".len());
        match after_host.and_then(|i| s[i..].rfind(':').map(|j| i + j)) {
            Some(colon) if valid_tag(&s[colon + 1..]) => (
                s[..colon].to_string(),
                RefSpec::Tag(s[colon + 1..].to_string()),
            ),
            Some(_) => return Err(UrlError::RefInUrl(s.to_string())),
            None => (s.to_string(), RefSpec::Tag("latest".into())),
        }
    };
    Ok((RepositoryUrl::parse(&repo)?, reference))
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

/// The distribution spec's tag grammar: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn valid_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// True for a manifest reference: a tag or a `sha256:` digest.
pub fn valid_reference(reference: &str) -> bool {
    reference.parse::<Digest>().is_ok() || valid_tag(reference)
}

/// The Flux revision string: `<tag>@sha256:<hex>` for tag and semver refs (the tag as
/// found in the registry), the bare digest for digest refs.
pub fn revision(tag: Option<&str>, digest: &Digest) -> String {
    match tag {
        Some(t) => format!("{t}@{digest}"),
        None => digest.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
#[path = "reference_tests.rs"]
mod tests;
