//! The cloud login port (`spec.provider`): registry credentials from a workload identity.
//! The `cloud` adapter implements it. Names no adapter; imports only `domain`.

use async_trait::async_trait;

use crate::domain::cloud_hosts::CloudRegistry;
use crate::domain::secret::Credentials;

/// Whose cloud identity logs in to a registry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CloudIdentity {
    /// The controller's own identity (its pod's workload identity), as Flux does by default.
    Controller,
}

/// One cloud registry login to obtain.
#[derive(Clone, Debug)]
pub struct CloudLoginRequest<'a> {
    /// The registry, already recognised as the provider's (`domain::cloud_hosts`).
    pub registry: &'a CloudRegistry,
    /// Whose identity.
    pub identity: &'a CloudIdentity,
    /// The registry is reached over plain HTTP (`spec.insecure`); the ACR token exchange,
    /// which happens on the registry itself, then uses plain HTTP too.
    pub insecure: bool,
}

/// A cloud login that failed, with the provider's answer; never carries a credential.
#[derive(Debug, thiserror::Error)]
#[error("failed to log in to {registry} with the {provider} identity: {message}")]
pub struct CloudLoginError {
    /// `aws`, `gcp` or `azure`.
    pub provider: &'static str,
    /// The registry or login scope, e.g. `ECR in us-east-1`.
    pub registry: String,
    /// What failed, lower-case, with the cause chain.
    pub message: String,
}

/// Logs in to cloud registries with a workload identity (`spec.provider`); logins are
/// cached until shortly before they expire, so many objects on one registry share one.
#[async_trait]
pub trait CloudLogin: Send + Sync {
    /// Registry credentials for `request`.
    async fn registry_credentials(
        &self,
        request: &CloudLoginRequest<'_>,
    ) -> Result<Credentials, CloudLoginError>;
}
