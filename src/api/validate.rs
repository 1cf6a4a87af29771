//! Spec validation the CRD schema cannot express (URL shape, digest, tag, identity
//! regexes, durations, unsupported providers, a registry host `spec.provider` cannot log
//! in to), reported with field paths such as
//! `spec.url: invalid url ...`; and Go-style duration parsing (`1m30s`). Pure: no kube
//! client, no I/O. Each rule is the domain's parser (`domain::reference`,
//! `domain::digest`, `domain::verification`), called here so that validation and the
//! reconcile can never disagree. The semver range and `semverFilter` are deliberately
//! not checked here: Flux compiles them after listing the tags and reports a bad one as
//! a retried `ReadOperationFailed`, not a stalled spec (`pipeline::resolve`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::conditions::reason;
use super::ocirepository::{OciRepository, OciRepositorySpec, VerificationProvider};
use crate::domain::cloud_hosts;
use crate::domain::digest::Digest;
use crate::domain::reference::{valid_tag, RepositoryUrl};
use crate::domain::verification::IdentityMatch;

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
    if let Err(e) = RepositoryUrl::parse(&spec.url) {
        bad("spec.url", e.to_string());
    }
    if let Some(r) = &spec.reference {
        if let Some(digest) = r.digest.as_deref().filter(|d| !d.is_empty()) {
            if let Err(e) = Digest::from_str(digest) {
                bad("spec.ref.digest", e.to_string());
            }
        }
        if let Some(tag) = r.tag.as_deref().filter(|t| !t.is_empty()) {
            if !valid_tag(tag) {
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
    match crate::domain::duration::parse(&spec.interval) {
        Err(e) => bad("spec.interval", e.to_string()),
        Ok(d) if d.is_zero() => bad("spec.interval", "must be greater than zero".to_string()),
        Ok(_) => {}
    }
    match crate::domain::duration::parse(&spec.timeout) {
        Err(e) => bad("spec.timeout", e.to_string()),
        Ok(d) if spec.timeout.contains('h') || d.is_zero() => bad(
            "spec.timeout",
            format!(
                "invalid timeout '{}': expected e.g. 60s or 5m",
                spec.timeout
            ),
        ),
        Ok(_) => {}
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
            if let Err(e) = IdentityMatch::issuer(&m.issuer) {
                bad("spec.verify.matchOIDCIdentity.issuer", e.to_string());
            }
            if let Err(e) = IdentityMatch::subject(&m.subject) {
                bad("spec.verify.matchOIDCIdentity.subject", e.to_string());
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

impl OciRepositorySpec {
    /// Checks what the schema cannot: URL shape, digest, semver range, regexes,
    /// durations, unsupported providers. Every problem is reported with its field path.
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        spec(self)
    }
}

impl OciRepository {
    /// Validates the spec (see [`OciRepositorySpec::validate`]).
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        self.spec.validate()
    }
}

/// Parses a Go duration made of `ms`, `s`, `m`, `h` parts (`1h30m`, `1.5s`), the format
/// of `spec.interval` and `spec.timeout`; `None` when it does not parse or is too long.
pub fn parse_duration(text: &str) -> Option<Duration> {
    crate::domain::duration::parse(text).ok()
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

    fn spec(yaml: &str) -> OciRepositorySpec {
        serde_yaml::from_str(&format!("{{interval: 5m, {yaml}}}")).unwrap()
    }

    fn bad_fields(yaml: &str) -> Vec<&'static str> {
        super::spec(&spec(yaml))
            .err()
            .map(|e| e.fields())
            .unwrap_or_default()
    }

    #[rstest]
    #[case("url: oci://ghcr.io/org/app", &[])]
    #[case("url: oci://127.0.0.1:5000/a/b-c_d.e", &[])]
    #[case("url: 'oci://[::1]:5000/app'", &[])]
    #[case("url: oci://docker.io/nginx", &[])]
    #[case("url: https://ghcr.io/org/app", &["spec.url"])]
    #[case("url: oci://ghcr.io/org/app:v1", &["spec.url"])]
    #[case("url: oci://ghcr.io/org/app@sha256:abc", &["spec.url"])]
    #[case("url: oci://ghcr.io/Org/app", &["spec.url"])]
    #[case("url: oci://ghcr.io/org//app", &["spec.url"])]
    #[case("url: oci://host:port/app", &["spec.url"])]
    fn urls_are_checked_by_the_domain_parser(#[case] yaml: &str, #[case] want: &[&str]) {
        assert_eq!(bad_fields(yaml), want, "{yaml}");
    }

    /// Flux compiles the range after listing tags and retries a bad one
    /// (`ReadOperationFailed`): validation must not stall it, whatever it is.
    #[rstest]
    #[case("1.x")]
    #[case("=<1.2.0")]
    #[case("=>1.2.1")]
    #[case("~>1.2")]
    #[case(">= 1.2, < 2")]
    #[case("not-a-range")]
    #[case(">=1.0 ||")]
    fn semver_ranges_never_stall(#[case] range: &str) {
        let yaml = format!("url: oci://r.io/a, ref: {{semver: '{range}', semverFilter: '(['}}");
        assert_eq!(bad_fields(&yaml), Vec::<&str>::new(), "{range}");
    }

    #[rstest]
    #[case("ref: {tag: v1.0}", &[])]
    #[case("ref: {tag: -bad}", &["spec.ref.tag"])]
    #[case("ref: {digest: 'sha256:zz'}", &["spec.ref.digest"])]
    #[case("verify: {matchOIDCIdentity: [{issuer: '(', subject: '.*'}]}", &["spec.verify.matchOIDCIdentity.issuer"])]
    #[case("verify: {matchOIDCIdentity: [{issuer: 'x', subject: '['}]}", &["spec.verify.matchOIDCIdentity.subject"])]
    fn refs_and_identities(#[case] yaml: &str, #[case] want: &[&str]) {
        assert_eq!(
            bad_fields(&format!("url: oci://r.io/a, {yaml}")),
            want,
            "{yaml}"
        );
    }
}
