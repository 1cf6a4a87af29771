//! Spec validation the CRD schema cannot express (URL shape, digest, semver range,
//! regexes, durations, unsupported providers, a registry host `spec.provider` cannot log
//! in to), reported with field paths such as `spec.url: must start with oci://`; and
//! Go-style duration parsing (`1m30s`). Pure: no kube client, no I/O.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::conditions::reason;
use super::ocirepository::{OciRepositorySpec, VerificationProvider};
use crate::domain::cloud_hosts;
use crate::domain::digest::Digest;
use crate::domain::reference::RepositoryUrl;

/// One invalid field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Field path, e.g. `spec.ref.semverFilter`.
    pub field: &'static str,
    /// What is wrong, lower-case.
    pub message: String,
    /// True when the value is valid Flux but not supported by ocisource yet.
    pub unsupported: bool,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every problem found in a spec; the object stalls until the spec changes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", join(.errors))]
pub struct InvalidSpec {
    /// The problems, in field order.
    pub errors: Vec<FieldError>,
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl InvalidSpec {
    /// The condition reason: `ProviderNotSupported`, `URLInvalid` or `InvalidSpec`.
    pub fn reason(&self) -> &'static str {
        if self.errors.iter().any(|e| e.unsupported) {
            reason::PROVIDER_NOT_SUPPORTED
        } else if self.errors.iter().any(|e| e.field == "spec.url") {
            reason::URL_INVALID
        } else {
            reason::INVALID_SPEC
        }
    }

    /// One invalid field, found outside [`OciRepositorySpec::validate`] (e.g. by a
    /// stricter parser in the reconciler).
    pub fn field(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            errors: vec![FieldError {
                field,
                message: message.into(),
                unsupported: false,
            }],
        }
    }

    /// `spec.url` is invalid (reason `URLInvalid`).
    pub fn url(message: impl Into<String>) -> Self {
        Self::field("spec.url", message)
    }

    /// `spec.ref` is invalid.
    pub fn reference(message: impl Into<String>) -> Self {
        Self::field("spec.ref", message)
    }

    /// `spec.platform` is invalid.
    pub fn platform(message: impl Into<String>) -> Self {
        Self::field("spec.platform", message)
    }

    /// The field paths that failed.
    pub fn fields(&self) -> Vec<&'static str> {
        self.errors.iter().map(|e| e.field).collect()
    }
}

pub(crate) fn spec(spec: &OciRepositorySpec) -> Result<(), InvalidSpec> {
    let mut errors = Vec::new();
    let mut bad = |field: &'static str, message: String| {
        errors.push(FieldError {
            field,
            message,
            unsupported: false,
        });
    };
    if let Err(message) = check_url(&spec.url) {
        bad("spec.url", message);
    }
    if let Some(r) = &spec.reference {
        if let Some(digest) = &r.digest {
            if let Err(e) = Digest::from_str(digest) {
                bad("spec.ref.digest", e.to_string());
            }
        }
        if let Some(range) = &r.semver {
            if !is_semver_range(range) {
                bad("spec.ref.semver", format!("invalid semver range '{range}'"));
            }
        }
        if let Some(filter) = &r.semver_filter {
            if let Err(e) = regex::Regex::new(filter) {
                bad("spec.ref.semverFilter", format!("invalid regex: {e}"));
            }
        }
        if let Some(tag) = &r.tag {
            if !is_tag(tag) {
                bad(
                    "spec.ref.tag",
                    format!("invalid tag '{tag}': expected [A-Za-z0-9_][A-Za-z0-9._-]{{0,127}}"),
                );
            }
        }
    }
    if let Some(media_type) = spec
        .layer_selector
        .as_ref()
        .and_then(|s| s.media_type.as_ref())
    {
        if !media_type.contains('/') || media_type.trim() != media_type {
            bad(
                "spec.layerSelector.mediaType",
                format!("invalid media type '{media_type}'"),
            );
        }
    }
    match parse_duration(&spec.interval) {
        None => bad(
            "spec.interval",
            format!(
                "invalid duration '{}': expected e.g. 30s, 10m, 1h",
                spec.interval
            ),
        ),
        Some(d) if d.is_zero() => bad("spec.interval", "must be greater than zero".to_string()),
        Some(_) => {}
    }
    match parse_duration(&spec.timeout) {
        Some(d) if spec.timeout.contains('h') || d.is_zero() => bad(
            "spec.timeout",
            format!(
                "invalid timeout '{}': expected e.g. 60s or 5m",
                spec.timeout
            ),
        ),
        None => bad(
            "spec.timeout",
            format!(
                "invalid timeout '{}': expected e.g. 60s or 5m",
                spec.timeout
            ),
        ),
        Some(_) => {}
    }
    let refs = [
        ("spec.secretRef.name", spec.secret_ref.as_ref()),
        ("spec.certSecretRef.name", spec.cert_secret_ref.as_ref()),
        ("spec.proxySecretRef.name", spec.proxy_secret_ref.as_ref()),
        (
            "spec.verify.secretRef.name",
            spec.verify.as_ref().and_then(|v| v.secret_ref.as_ref()),
        ),
        (
            "spec.verify.trustedRootSecretRef.name",
            spec.verify
                .as_ref()
                .and_then(|v| v.trusted_root_secret_ref.as_ref()),
        ),
    ];
    for (field, r) in refs {
        if r.is_some_and(|r| r.name.is_empty()) {
            bad(field, "must not be empty".to_string());
        }
    }
    if spec.service_account_name.as_deref() == Some("") {
        bad("spec.serviceAccountName", "must not be empty".to_string());
    }
    if let Some(verify) = &spec.verify {
        for m in &verify.match_oidc_identity {
            if let Err(e) = regex::Regex::new(&m.issuer) {
                bad(
                    "spec.verify.matchOIDCIdentity.issuer",
                    format!("invalid regex: {e}"),
                );
            }
            if let Err(e) = regex::Regex::new(&m.subject) {
                bad(
                    "spec.verify.matchOIDCIdentity.subject",
                    format!("invalid regex: {e}"),
                );
            }
        }
    }
    if let (Some(cloud), Ok(url)) = (spec.provider.cloud(), RepositoryUrl::parse(&spec.url)) {
        if let Err(e) = cloud_hosts::registry(cloud, &url.host) {
            errors.push(FieldError {
                field: "spec.provider",
                message: format!("'{cloud}' cannot log in to the registry of spec.url: {e}"),
                unsupported: false,
            });
        }
    }
    if spec
        .verify
        .as_ref()
        .is_some_and(|v| v.provider == VerificationProvider::Notation)
    {
        errors.push(FieldError {
            field: "spec.verify.provider",
            message: "'notation' is not supported yet: use 'cosign'".to_string(),
            unsupported: true,
        });
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InvalidSpec { errors })
    }
}

/// `oci://host[:port]/path` with a lower-case repository path and no tag or digest.
fn check_url(url: &str) -> Result<(), String> {
    let rest = url.strip_prefix("oci://").ok_or("must start with oci://")?;
    if rest.contains('@') {
        return Err("must not contain a digest: use spec.ref.digest".to_string());
    }
    let (host, path) = rest
        .split_once('/')
        .ok_or("must name a repository: oci://host[:port]/path")?;
    let bad_host = || format!("invalid registry host '{host}'");
    let (name, port) = match host.strip_prefix('[') {
        Some(ipv6) => {
            let (addr, after) = ipv6.split_once(']').ok_or_else(bad_host)?;
            if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
                return Err(bad_host());
            }
            (
                "ipv6",
                after
                    .strip_prefix(':')
                    .or(if after.is_empty() { None } else { Some("") }),
            )
        }
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'));
    if !name_ok || port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return Err(bad_host());
    }
    if path.contains(':') {
        return Err("must not contain a tag: use spec.ref.tag".to_string());
    }
    let component_ok = |c: &str| {
        let b = c.as_bytes();
        let alnum = |x: &u8| x.is_ascii_lowercase() || x.is_ascii_digit();
        b.first().is_some_and(alnum)
            && b.last().is_some_and(alnum)
            && b.iter()
                .all(|x| alnum(x) || matches!(x, b'.' | b'_' | b'-'))
    };
    if path.split('/').all(component_ok) {
        Ok(())
    } else {
        Err(format!(
            "invalid repository path '{path}': expected lower-case components separated by '/'"
        ))
    }
}

fn is_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    b.len() <= 128
        && b.first()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// Accepts Masterminds-style ranges as Flux does: `||` alternatives, comparators
/// separated by spaces or commas, hyphen ranges `1.2 - 1.4`, `x` wildcards, `^`, `~`,
/// `!=`, an optional `v` prefix.
fn is_semver_range(range: &str) -> bool {
    range.split("||").all(|branch| {
        let branch = branch.trim();
        if branch.is_empty() {
            return false;
        }
        let comparators: Vec<String> = match branch.split_once(" - ") {
            Some((low, high)) => vec![format!(">={}", low.trim()), format!("<={}", high.trim())],
            None => {
                let mut out: Vec<String> = Vec::new();
                for token in branch.split([' ', ',']).filter(|t| !t.is_empty()) {
                    match out.last_mut() {
                        Some(last) if last.chars().all(|c| "<>=!~^".contains(c)) => {
                            last.push_str(token)
                        }
                        _ => out.push(token.to_string()),
                    }
                }
                out
            }
        };
        comparators.iter().all(|c| {
            let op_len = c.len() - c.trim_start_matches(|ch| "<>=!~^".contains(ch)).len();
            let (op, version) = c.split_at(op_len);
            let version = version.strip_prefix(['v', 'V']).unwrap_or(version);
            let op = match op {
                "!=" => "=",
                "=" | "==" => "=",
                other => other,
            };
            !version.is_empty() && semver::VersionReq::parse(&format!("{op}{version}")).is_ok()
        })
    })
}

/// Parses a Go duration made of `ms`, `s`, `m`, `h` parts (`1h30m`, `1.5s`), the format
/// of `spec.interval` and `spec.timeout`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        let (scale, tail) = if let Some(t) = tail.strip_prefix("ms") {
            (0.001, t)
        } else if let Some(t) = tail.strip_prefix('s') {
            (1.0, t)
        } else if let Some(t) = tail.strip_prefix('m') {
            (60.0, t)
        } else if let Some(t) = tail.strip_prefix('h') {
            (3600.0, t)
        } else {
            return None;
        };
        total += value * scale;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn reasons_follow_the_worst_field() {
        assert_eq!(InvalidSpec::url("bad").reason(), "URLInvalid");
        assert_eq!(InvalidSpec::url("bad").to_string(), "spec.url: bad");
        assert_eq!(InvalidSpec::reference("bad").reason(), "InvalidSpec");
        let mut both = InvalidSpec::platform("bad");
        both.errors.push(FieldError {
            field: "spec.provider",
            message: "x".into(),
            unsupported: true,
        });
        assert_eq!(both.reason(), "ProviderNotSupported");
        assert_eq!(both.to_string(), "spec.platform: bad; spec.provider: x");
    }

    #[rstest]
    #[case("30s", Some(30_000))]
    #[case("1h30m", Some(5_400_000))]
    #[case("1.5s", Some(1_500))]
    #[case("250ms", Some(250))]
    #[case("10", None)]
    #[case("1d", None)]
    #[case("", None)]
    #[case(".5s", None)]
    fn durations(#[case] text: &str, #[case] millis: Option<u128>) {
        assert_eq!(parse_duration(text).map(|d| d.as_millis()), millis);
    }

    #[rstest]
    #[case("oci://ghcr.io/org/app", true)]
    #[case("oci://127.0.0.1:5000/a/b-c_d.e", true)]
    #[case("oci://[::1]:5000/app", true)]
    #[case("https://ghcr.io/org/app", false)]
    #[case("oci://ghcr.io", false)]
    #[case("oci://ghcr.io/org/app:v1", false)]
    #[case("oci://ghcr.io/org/app@sha256:abc", false)]
    #[case("oci://ghcr.io/Org/app", false)]
    #[case("oci://ghcr.io/org//app", false)]
    #[case("oci://host:port/app", false)]
    fn urls(#[case] url: &str, #[case] ok: bool) {
        assert_eq!(check_url(url).is_ok(), ok, "{url}: {:?}", check_url(url));
    }

    #[rstest]
    #[case("1.x", true)]
    #[case(">=1.0.0 <2.0.0", true)]
    #[case(">= 1.2, < 2", true)]
    #[case("^1.2 || ~2.0", true)]
    #[case("1.2 - 1.4.5", true)]
    #[case(">=v1.0.0-0", true)]
    #[case("*", true)]
    #[case("!=1.2.3", true)]
    #[case("not-a-range", false)]
    #[case(">=1.0 ||", false)]
    #[case("", false)]
    fn semver_ranges(#[case] range: &str, #[case] ok: bool) {
        assert_eq!(is_semver_range(range), ok, "{range}");
    }
}
