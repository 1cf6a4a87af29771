//! What one OCIRepository asks for, validated once at the door: the object's spec (and,
//! for Flux's kind, its opt-in annotations) parsed into domain values by
//! `api::validate::desired`, so that the reconcile steps take typed values and never
//! re-read or re-parse the raw object. Building a [`Desired`] is the only validation:
//! a spec that yields one is valid, every problem is found at once and named by field.
//!
//! The semver range and its filter stay text here ([`RefSpec::Semver`]): Flux compiles
//! them after listing the tags and retries a bad one, so they are checked by the resolve
//! step, not at the door. Secrets are names here; the steps read them.

use std::time::Duration;

use super::cloud_hosts::CloudProvider;
use super::ignore::IgnoreRules;
use super::layers::LayerSelector;
use super::manifest::Platform;
use super::reference::{RefSpec, RepositoryUrl};
use super::verification::IdentityMatch;

/// The validated spec of one object.
#[derive(Clone, Debug)]
pub struct Desired {
    /// `spec.url`.
    pub url: RepositoryUrl,
    /// `spec.ref`, after Flux's precedence (digest, semver, tag, `latest`).
    pub reference: RefSpec,
    /// `spec.interval`, greater than zero.
    pub interval: Duration,
    /// `spec.timeout`, greater than zero.
    pub timeout: Duration,
    /// `spec.layerSelector`, with the kind's default (every layer, or Flux's first match).
    pub layers: LayerSelector,
    /// `spec.ignore` compiled over Flux's defaults (the defaults alone when unset).
    pub ignore: IgnoreRules,
    /// `spec.platform` (or Flux's kind's platform annotation); `None` for the
    /// controller's default.
    pub platform: Option<Platform>,
    /// How to reach the registry.
    pub access: Access,
    /// `spec.verify`, when set.
    pub verify: Option<VerifyRequest>,
    /// `spec.suspend`.
    pub suspend: bool,
}

/// How to log in to and connect to the registry: the Secrets and ServiceAccount the spec
/// names, read by the reconcile's credentials step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// `spec.secretRef.name`: a docker config Secret.
    pub secret: Option<String>,
    /// `spec.serviceAccountName`: its image pull secrets (and, with a cloud provider,
    /// its workload identity).
    pub service_account: Option<String>,
    /// `spec.certSecretRef.name`: CA and client certificate.
    pub cert_secret: Option<String>,
    /// `spec.proxySecretRef.name`: proxy address and login.
    pub proxy_secret: Option<String>,
    /// `spec.insecure`: plain HTTP or an unverified certificate.
    pub insecure: bool,
    /// `spec.provider` when it is a cloud (`aws`, `gcp`, `azure`); `None` for `generic`.
    pub cloud: Option<CloudProvider>,
}

/// `spec.verify` (cosign): where the trusted keys or the trusted root are, and the
/// keyless identities, compiled.
#[derive(Clone, Debug, Default)]
pub struct VerifyRequest {
    /// `secretRef.name`: the `*.pub` keys (key mode).
    pub secret: Option<String>,
    /// `trustedRootSecretRef.name`: a custom `trusted_root.json` (keyless mode).
    pub trusted_root_secret: Option<String>,
    /// `matchOIDCIdentity[]`, compiled (keyless mode).
    pub identities: Vec<IdentityMatch>,
}
