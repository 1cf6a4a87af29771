//! The door: an object's spec (read as its [`Flavour`]) validated once into the typed
//! value the reconcile steps take ([`desired`] → `domain::desired::Desired`), or every
//! problem the CRD schema cannot express (URL shape, digest, tag, identity regexes,
//! durations, ignore rules, platform, the ServiceAccount name, unsupported providers, a
//! registry host `spec.provider` cannot log in to), reported with field paths such as
//! `spec.url: invalid url ...`. Pure: no kube client, no I/O. Each rule is the domain's
//! parser (`domain::reference`, `domain::digest`, `domain::duration`, `domain::ignore`,
//! `domain::verification`, `domain::names`): validating and parsing are one act, so they
//! cannot disagree. The semver range and `semverFilter` are deliberately not checked
//! here: Flux compiles them after listing the tags and reports a bad one as a retried
//! `ReadOperationFailed`, not a stalled spec (`pipeline::resolve`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::conditions::reason;
use super::flux_ocirepository::{Flavour, FluxOptions};
use super::ocirepository::{
    LayerOperation, LocalObjectReference, OciRepository, OciRepositorySpec, VerificationProvider,
};
use crate::domain::desired::{Access, Desired, VerifyRequest};
use crate::domain::digest::Digest;
use crate::domain::ignore::IgnoreRules;
use crate::domain::layers::LayerSelector;
use crate::domain::manifest::Platform;
use crate::domain::names::Rule::Subdomain;
use crate::domain::reference::{valid_tag, RefSpec, RepositoryUrl};
use crate::domain::verification::IdentityMatch;
use crate::domain::{self, cloud_hosts};

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

/// Collects every problem of a spec while the fields are parsed.
#[derive(Default)]
struct Problems {
    errors: Vec<FieldError>,
}

impl Problems {
    fn bad(&mut self, field: &'static str, message: impl Into<String>) {
        self.errors.push(FieldError {
            field,
            message: message.into(),
            unsupported: false,
        });
    }

    /// The value, or `None` after recording its error under `field`.
    fn check<T, E: fmt::Display>(&mut self, field: &'static str, r: Result<T, E>) -> Option<T> {
        r.map_err(|e| self.bad(field, e.to_string())).ok()
    }

    /// `spec.interval`: a Go duration greater than zero.
    fn interval(&mut self, text: &str) -> Option<Duration> {
        match crate::domain::duration::parse(text) {
            Err(e) => self.bad("spec.interval", e.to_string()),
            Ok(d) if d.is_zero() => self.bad("spec.interval", "must be greater than zero"),
            Ok(d) => return Some(d),
        }
        None
    }

    /// `spec.timeout`: a Go duration greater than zero, without hours (Flux's pattern).
    fn timeout(&mut self, text: &str) -> Option<Duration> {
        match crate::domain::duration::parse(text) {
            Err(e) => self.bad("spec.timeout", e.to_string()),
            Ok(d) if text.contains('h') || d.is_zero() => self.bad(
                "spec.timeout",
                format!("invalid timeout '{text}': expected e.g. 60s or 5m"),
            ),
            Ok(d) => return Some(d),
        }
        None
    }
}

/// The object's spec read as `flavour`, validated into the typed value the reconcile
/// steps take, or every problem with its field path. The only validation: each rule is
/// the domain's parser.
pub fn desired(spec: &OciRepositorySpec, flavour: &Flavour) -> Result<Desired, InvalidSpec> {
    let mut p = Problems::default();
    if let Flavour::Flux(FluxOptions {
        invalid: Some((annotation, message)),
        ..
    }) = flavour
    {
        p.bad(annotation, message.clone());
    }
    let url = p.check("spec.url", RepositoryUrl::parse(&spec.url));
    let r = spec.reference.clone().unwrap_or_default();
    if let Some(digest) = r.digest.as_deref().filter(|d| !d.is_empty()) {
        p.check("spec.ref.digest", Digest::from_str(digest));
    }
    if let Some(tag) = r.tag.as_deref().filter(|t| !t.is_empty()) {
        if !valid_tag(tag) {
            p.bad(
                "spec.ref.tag",
                format!("invalid tag '{tag}': expected [A-Za-z0-9_][A-Za-z0-9._-]{{0,127}}"),
            );
        }
    }
    // Empty is unset, as in Flux (`GetLayerMediaType() == ""` takes the first layer).
    let media_type = spec
        .layer_selector
        .as_ref()
        .and_then(|s| s.media_type.as_deref())
        .filter(|m| !m.is_empty());
    if let Some(m) = media_type {
        if !m.contains('/') || m.trim() != m {
            p.bad(
                "spec.layerSelector.mediaType",
                format!("invalid media type '{m}'"),
            );
        }
    }
    // Reported by field above when the digest or tag is bad; `spec.ref` otherwise.
    let reference = if p.errors.iter().any(|e| e.field.starts_with("spec.ref.")) {
        None
    } else {
        p.check(
            "spec.ref",
            RefSpec::from_fields(
                r.tag.as_deref(),
                r.semver.as_deref(),
                r.semver_filter.as_deref(),
                r.digest.as_deref(),
            ),
        )
        .map(|r| r.with_layer_media_type(media_type))
    };
    let interval = p.interval(&spec.interval);
    let timeout = p.timeout(&spec.timeout);
    let ignore = match spec.ignore.as_deref() {
        None => Some(IgnoreRules::flux_default()),
        Some(text) => p.check("spec.ignore", IgnoreRules::from_spec(text)),
    };
    let platform = match spec.platform.as_deref() {
        None => Some(None),
        Some(text) => p.check("spec.platform", Platform::parse(text)).map(Some),
    };
    let name = |field: &'static str, r: Option<&LocalObjectReference>, p: &mut Problems| {
        let r = r?;
        if r.name.is_empty() {
            p.bad(field, "must not be empty");
        }
        Some(r.name.clone())
    };
    let access = Access {
        secret: name("spec.secretRef.name", spec.secret_ref.as_ref(), &mut p),
        service_account: spec.service_account_name.clone(),
        cert_secret: name(
            "spec.certSecretRef.name",
            spec.cert_secret_ref.as_ref(),
            &mut p,
        ),
        proxy_secret: name(
            "spec.proxySecretRef.name",
            spec.proxy_secret_ref.as_ref(),
            &mut p,
        ),
        insecure: spec.insecure,
        cloud: spec.provider.cloud(),
    };
    // A ServiceAccount name is an RFC 1123 subdomain (the API server's rule; Flux's CRD
    // has no pattern for it, so the schema cannot say it and ours keeps to Flux's).
    match access.service_account.as_deref() {
        Some("") => p.bad("spec.serviceAccountName", "must not be empty"),
        Some(sa) => {
            if let Err(e) = domain::names::check("spec.serviceAccountName", sa, Subdomain) {
                p.bad(
                    e.field,
                    format!(
                        "invalid ServiceAccount name '{}': {}; name a ServiceAccount of the object's namespace",
                        e.shown, e.rule
                    ),
                );
            }
        }
        None => {}
    }
    let verify = spec.verify.as_ref().map(|v| {
        let secret = name("spec.verify.secretRef.name", v.secret_ref.as_ref(), &mut p);
        let trusted_root_secret = name(
            "spec.verify.trustedRootSecretRef.name",
            v.trusted_root_secret_ref.as_ref(),
            &mut p,
        );
        let mut identities = Vec::new();
        for m in &v.match_oidc_identity {
            let issuer = p.check(
                "spec.verify.matchOIDCIdentity.issuer",
                IdentityMatch::issuer(&m.issuer),
            );
            let subject = p.check(
                "spec.verify.matchOIDCIdentity.subject",
                IdentityMatch::subject(&m.subject),
            );
            if issuer.is_some() && subject.is_some() {
                identities.extend(IdentityMatch::new(&m.issuer, &m.subject).ok());
            }
        }
        VerifyRequest {
            secret,
            trusted_root_secret,
            identities,
        }
    });
    if let (Some(cloud), Some(url)) = (access.cloud, &url) {
        if let Err(e) = cloud_hosts::registry(cloud, &url.host) {
            p.bad(
                "spec.provider",
                format!("'{cloud}' cannot log in to the registry of spec.url: {e}"),
            );
        }
    }
    if spec
        .verify
        .as_ref()
        .is_some_and(|v| v.provider == VerificationProvider::Notation)
    {
        p.errors.push(FieldError {
            field: "spec.verify.provider",
            message: "'notation' is not supported yet: use 'cosign'".to_string(),
            unsupported: true,
        });
    }
    match (url, reference, interval, timeout, ignore, platform) {
        (
            Some(url),
            Some(reference),
            Some(interval),
            Some(timeout),
            Some(ignore),
            Some(platform),
        ) if p.errors.is_empty() => {
            let layers = spec.layer_selector.clone().unwrap_or_default();
            Ok(Desired {
                url,
                reference,
                interval,
                timeout,
                layers: LayerSelector {
                    operation: match layers.effective_operation() {
                        LayerOperation::Extract => domain::layers::LayerOperation::Extract,
                        LayerOperation::Copy => domain::layers::LayerOperation::Copy,
                    },
                    media_type: media_type.map(str::to_string),
                    first_only: flavour.first_layer_only(),
                },
                ignore,
                platform,
                access,
                verify,
                suspend: spec.suspend,
            })
        }
        _ => Err(InvalidSpec { errors: p.errors }),
    }
}

impl OciRepositorySpec {
    /// Checks what the schema cannot: URL shape, digest, tag, regexes, durations, ignore
    /// rules, platform, unsupported providers. Every problem is reported with its field
    /// path (see [`desired`], which the reconciler calls).
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        desired(self, &Flavour::Ocisource).map(|_| ())
    }
}

impl OciRepository {
    /// Validates the spec (see [`OciRepositorySpec::validate`]).
    pub fn validate(&self) -> Result<(), InvalidSpec> {
        self.spec.validate()
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
