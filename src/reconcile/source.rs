//! The source step: validate the spec, build the registry session from its Secrets (or
//! the cloud identity, `spec.provider`), resolve the ref (one HEAD for a tag), and decide
//! whether the stored artifact is still current, in which case nothing else is fetched.
//! Then verify the signature, before any layer is downloaded; the verdict is cached per
//! digest and policy.

use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use crate::api::conditions::SOURCE_VERIFIED;
use crate::api::{Flavour, OciRepository, OciRepositoryStatus};
use crate::domain::reference::{RefSpec, RepositoryUrl};
use crate::domain::verification::VerifyPolicy;
use crate::pipeline::{self, Resolved};
use crate::ports::Registry;

use super::cloud;
use super::context::Context;
use super::credentials;
use super::error::ReconcileError;

/// The source as resolved for this reconcile.
pub struct Source {
    /// Repository.
    pub url: RepositoryUrl,
    /// Registry session.
    pub registry: Arc<dyn Registry>,
    /// Resolved ref.
    pub resolved: Resolved,
    /// Verification policy, when `spec.verify` is set.
    pub policy: Option<VerifyPolicy>,
}

/// Validates, connects and resolves.
pub async fn resolve(
    obj: &OciRepository,
    flavour: &Flavour,
    namespace: &str,
    ctx: &Context,
) -> Result<Source, ReconcileError> {
    obj.validate()?;
    flavour.check()?;
    let spec = &obj.spec;
    let url = RepositoryUrl::parse(&spec.url)
        .map_err(|e| crate::api::validate::InvalidSpec::url(e.to_string()))?;
    let r = spec.reference.clone().unwrap_or_default();
    let reference = RefSpec::from_fields(
        r.tag.as_deref(),
        r.semver.as_deref(),
        r.semver_filter.as_deref(),
        r.digest.as_deref(),
    )
    .map_err(|e| crate::api::validate::InvalidSpec::reference(e.to_string()))?
    .with_layer_media_type(
        spec.layer_selector
            .as_ref()
            .and_then(|s| s.media_type.as_deref()),
    );
    let mut options =
        credentials::registry_options(obj, namespace, &url.host, ctx.secrets.as_ref()).await?;
    cloud::login(obj, namespace, &url, ctx, &mut options).await?;
    let registry = ctx
        .connector
        .connect(&url.host, &url.repository, &options)
        .map_err(ReconcileError::Client)?;
    let resolved = pipeline::resolve(registry.as_ref(), &url, &reference).await?;
    let policy = credentials::verify_policy(obj, namespace, ctx.secrets.as_ref()).await?;
    Ok(Source {
        url,
        registry,
        resolved,
        policy,
    })
}

/// A short fingerprint of the policy (trusted keys, identities, trusted root): a verdict
/// reached under one policy says nothing under another, e.g. after a key was removed
/// from the Secret, which changes neither the digest nor the generation.
fn policy_fingerprint(policy: &VerifyPolicy) -> String {
    let hash = hex::encode(Sha256::digest(format!("{policy:?}").as_bytes()));
    format!("sha256:{}", &hash[..16])
}

/// The suffix of a SourceVerified message that records the policy it was reached under.
fn policy_suffix(policy: &VerifyPolicy) -> String {
    format!("; trust policy {}", policy_fingerprint(policy))
}

/// The key a verdict is cached under: the digest and a fingerprint of the policy.
pub fn verdict_key(source: &Source) -> Option<String> {
    let policy = source.policy.as_ref()?;
    Some(format!(
        "{}|{}",
        source.resolved.digest,
        policy_fingerprint(policy)
    ))
}

/// The verification message, if the signature is already known to be good: cached in
/// this process, or recorded in the status for this generation, revision and policy.
pub fn known_verdict(
    source: &Source,
    obj: &OciRepository,
    previous: &OciRepositoryStatus,
    ctx: &Context,
) -> Option<String> {
    let key = verdict_key(source)?;
    if let Some(message) = ctx.verified(&key) {
        return Some(message);
    }
    let same_revision = previous
        .artifact
        .as_ref()
        .is_some_and(|a| a.revision == source.resolved.revision);
    let generation = obj.metadata.generation.unwrap_or(0);
    let suffix = policy_suffix(source.policy.as_ref()?);
    previous
        .conditions
        .iter()
        .find(|c| c.type_ == SOURCE_VERIFIED)
        .filter(|c| {
            same_revision
                && c.status == "True"
                && c.observed_generation == Some(generation)
                && c.message.ends_with(&suffix)
        })
        .map(|c| c.message.clone())
}

/// Verifies the signature (unless already known good) and returns the SourceVerified message.
pub async fn verify(
    source: &Source,
    obj: &OciRepository,
    previous: &OciRepositoryStatus,
    ctx: &Context,
) -> Result<Option<String>, ReconcileError> {
    let Some(policy) = &source.policy else {
        return Ok(None);
    };
    if let Some(message) = known_verdict(source, obj, previous, ctx) {
        return Ok(Some(message));
    }
    let verified = ctx
        .verifier
        .verify(
            source.registry.as_ref(),
            &source.url.to_string(),
            &source.resolved.digest,
            policy,
        )
        .await?;
    let message = format!(
        "verified signature of revision '{}' ({}, {}){}",
        source.resolved.revision,
        verified.method,
        verified.identity,
        policy_suffix(policy)
    );
    if let Some(key) = verdict_key(source) {
        ctx.remember_verified(key, message.clone());
    }
    Ok(Some(message))
}
