//! `spec.url` and `spec.ref`: parsing `oci://host[:port]/path`, the ref precedence
//! (digest > semver > tag > `latest`), and the revision string Flux consumers see.

use std::fmt;

use super::digest::Digest;
use super::semver_range::VersionRange;

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
    /// Parses `oci://host[:port]/path`.
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let rest = url
            .strip_prefix("oci://")
            .ok_or_else(|| UrlError::Scheme(url.to_string()))?;
        let rest = rest.trim_end_matches('/');
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| UrlError::Host(url.to_string()))?;
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
        Ok(Self {
            host: host.to_string(),
            repository: path.to_string(),
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
    Semver {
        /// The range.
        range: VersionRange,
        /// The range as written, for messages.
        range_text: String,
        /// Tags not matching this regex are ignored.
        filter: Option<regex::Regex>,
    },
    /// A tag.
    Tag(String),
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
            let range = VersionRange::parse(r).map_err(|reason| RefError::Semver {
                range: r.to_string(),
                reason,
            })?;
            let filter = non_empty(semver_filter)
                .map(|f| {
                    regex::Regex::new(f).map_err(|source| RefError::Filter {
                        filter: f.to_string(),
                        source,
                    })
                })
                .transpose()?;
            return Ok(Self::Semver {
                range,
                range_text: r.to_string(),
                filter,
            });
        }
        let tag = non_empty(tag).unwrap_or("latest");
        if !valid_tag(tag) {
            return Err(RefError::Tag(tag.to_string()));
        }
        Ok(Self::Tag(tag.to_string()))
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
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("oci://ghcr.io/org/app", "ghcr.io", "org/app")]
    #[case("oci://127.0.0.1:5000/a/b/c", "127.0.0.1:5000", "a/b/c")]
    #[case("oci://localhost:5000/app-config/", "localhost:5000", "app-config")]
    #[case(
        "oci://registry.example.com/team/my_app.v2",
        "registry.example.com",
        "team/my_app.v2"
    )]
    fn parses_valid_urls(#[case] url: &str, #[case] host: &str, #[case] repo: &str) {
        let u = RepositoryUrl::parse(url).unwrap();
        assert_eq!((u.host.as_str(), u.repository.as_str()), (host, repo));
    }

    #[rstest]
    #[case("https://ghcr.io/org/app", "must start with oci://")]
    #[case("oci://ghcr.io/org/app:v1", "a tag or digest belongs in spec.ref")]
    #[case(
        "oci://ghcr.io/org/app@sha256:abc",
        "a tag or digest belongs in spec.ref"
    )]
    #[case("oci://ghcr.io", "missing or malformed registry host")]
    #[case("oci://ghcr.io/Org/App", "must be lower-case")]
    #[case("oci://gh cr.io/org/app", "missing or malformed registry host")]
    fn rejects_invalid_urls(#[case] url: &str, #[case] msg: &str) {
        let err = RepositoryUrl::parse(url).unwrap_err().to_string();
        assert!(err.contains(msg), "{err}");
        assert!(err.contains(url), "error should name the url: {err}");
    }

    #[test]
    fn precedence_is_digest_then_semver_then_tag_then_latest() {
        let d = Digest::of(b"x").to_string();
        assert!(matches!(
            RefSpec::from_fields(Some("v1"), Some("1.x"), None, Some(&d)).unwrap(),
            RefSpec::Digest(_)
        ));
        assert!(matches!(
            RefSpec::from_fields(Some("v1"), Some("1.x"), None, None).unwrap(),
            RefSpec::Semver { .. }
        ));
        assert!(
            matches!(RefSpec::from_fields(Some("v1"), None, None, None).unwrap(), RefSpec::Tag(t) if t == "v1")
        );
        assert!(
            matches!(RefSpec::from_fields(None, None, None, None).unwrap(), RefSpec::Tag(t) if t == "latest")
        );
        assert!(
            matches!(RefSpec::from_fields(Some(""), Some(" "), None, Some("")).unwrap(), RefSpec::Tag(t) if t == "latest")
        );
    }

    #[test]
    fn field_errors_name_the_field() {
        let e = RefSpec::from_fields(None, Some("1.x"), Some("(["), None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid spec.ref.semverFilter '(['"), "{e}");
        let e = RefSpec::from_fields(None, Some("not a range"), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid spec.ref.semver 'not a range'"),
            "{e}"
        );
        let e = RefSpec::from_fields(None, None, None, Some("sha256:zz"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid spec.ref.digest"), "{e}");
        let e = RefSpec::from_fields(Some("-bad"), None, None, None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid spec.ref.tag '-bad'"), "{e}");
    }

    #[test]
    fn image_refs_split_into_repository_and_ref() {
        let (u, r) = parse_image_ref("oci://127.0.0.1:5000/a/b:v1.0").unwrap();
        assert_eq!(
            (u.host.as_str(), u.repository.as_str()),
            ("127.0.0.1:5000", "a/b")
        );
        assert!(matches!(r, RefSpec::Tag(t) if t == "v1.0"));
        let d = Digest::of(b"z");
        let (u, r) = parse_image_ref(&format!("oci://reg.io/a@{d}")).unwrap();
        assert_eq!(u.repository, "a");
        assert!(matches!(r, RefSpec::Digest(x) if x == d));
        let (_, r) = parse_image_ref("oci://reg.io:443/a").unwrap();
        assert!(matches!(r, RefSpec::Tag(t) if t == "latest"));
        assert!(parse_image_ref("oci://reg.io/a@sha256:nope").is_err());
    }

    #[test]
    fn revision_formats() {
        let d = Digest::of(b"m");
        assert_eq!(revision(Some("v1.2.0"), &d), format!("v1.2.0@{d}"));
        assert_eq!(revision(None, &d), d.to_string());
    }
}
