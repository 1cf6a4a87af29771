//! The source steps, on the spec validated at the door (`domain::desired::Desired`):
//! build the registry session from its Secrets (or the cloud identity, `spec.provider`)
//! and resolve the ref (one HEAD for a tag) into [`Resolved`]; then verify the signature,
//! before any layer is downloaded, into [`Verified`], which the artifact step requires.
//! The verdict is cached per digest and policy.

use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use crate::api::conditions::SOURCE_VERIFIED;
use crate::api::OciRepositoryStatus;
use crate::domain::desired::Desired;
use crate::domain::reference::RepositoryUrl;
use crate::domain::status::Verification;
use crate::domain::verification::VerifyPolicy;
use crate::pipeline::{self, PinnedRef as Target};
use crate::ports::Registry;

use super::cloud;
use super::context::Context;
use super::credentials;
use super::error::ReconcileError;

/// The source as resolved for this reconcile: the first step's result.
pub struct Resolved {
    /// Repository.
    pub url: RepositoryUrl,
    /// Registry session.
    pub registry: Arc<dyn Registry>,
    /// What the ref resolved to (revision and manifest digest).
    pub target: Target,
    /// Verification policy, when `spec.verify` is set.
    pub policy: Option<VerifyPolicy>,
}

/// A resolved source whose signature was checked as `spec.verify` asks (or which has no
/// `spec.verify`): the second step's result, the only way to the artifact step.
pub struct Verified {
    /// The source.
    pub source: Resolved,
    /// The verification outcome, for SourceVerified.
    pub verification: Verification,
}

/// Builds the registry session from the Secrets (or the cloud identity) the validated
/// spec names, and resolves the ref (one HEAD for a tag).
pub async fn resolve(
    desired: &Desired,
    namespace: &str,
    ctx: &Context,
) -> Result<Resolved, ReconcileError> {
    let url = &desired.url;
    let mut options = credentials::registry_options(
        &desired.access,
        desired.timeout,
        namespace,
        &url.host,
        ctx.secrets.as_ref(),
    )
    .await?;
    cloud::login(&desired.access, namespace, url, ctx, &mut options).await?;
    let registry = ctx
        .connector
        .connect(&url.host, &url.repository, &options)
        .map_err(ReconcileError::Client)?;
    let target = pipeline::resolve(registry.as_ref(), url, &desired.reference).await?;
    let policy =
        credentials::verify_policy(desired.verify.as_ref(), namespace, ctx.secrets.as_ref())
            .await?;
    Ok(Resolved {
        url: url.clone(),
        registry,
        target,
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
pub fn verdict_key(source: &Resolved) -> Option<String> {
    let policy = source.policy.as_ref()?;
    Some(format!(
        "{}|{}",
        source.target.digest,
        policy_fingerprint(policy)
    ))
}

/// The verification message, if the signature is already known to be good: cached in
/// this process, or recorded in the status for this `generation`, revision and policy.
pub fn known_verdict(
    source: &Resolved,
    generation: i64,
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
        .is_some_and(|a| a.revision == source.target.revision);
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

/// Verifies the signature (unless already known good), before any layer is fetched.
pub async fn verify(
    source: Resolved,
    generation: i64,
    previous: &OciRepositoryStatus,
    ctx: &Context,
) -> Result<Verified, ReconcileError> {
    let Some(policy) = &source.policy else {
        return Ok(Verified {
            source,
            verification: Verification::NotConfigured,
        });
    };
    let message = match known_verdict(&source, generation, previous, ctx) {
        Some(message) => message,
        None => {
            let verified = ctx
                .verifier
                .verify(
                    source.registry.as_ref(),
                    &source.url.to_string(),
                    &source.target.digest,
                    policy,
                )
                .await?;
            let message = format!(
                "verified signature of revision '{}' ({}, {}){}",
                source.target.revision,
                verified.method,
                verified.identity,
                policy_suffix(policy)
            );
            if let Some(key) = verdict_key(&source) {
                ctx.remember_verified(key, message.clone());
            }
            message
        }
    };
    Ok(Verified {
        source,
        verification: Verification::Verified { message },
    })
}
