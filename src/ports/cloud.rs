//! The cloud login port (`spec.provider`): registry credentials from a workload identity.
//! The `cloud` adapter implements it; object-level identity reads ServiceAccounts and
//! requests their tokens through [`ServiceAccountTokens`], which the Kubernetes adapter
//! implements. Names no adapter; imports only `domain`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::cloud_hosts::CloudRegistry;
use crate::domain::secret::{Credentials, Redacted};

/// Whose cloud identity logs in to a registry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CloudIdentity {
    /// The controller's own identity (its pod's workload identity), as Flux does by default.
    Controller,
    /// The object's ServiceAccount (`spec.serviceAccountName`, in the object's namespace):
    /// object-level workload identity, Flux's `ObjectLevelWorkloadIdentity` feature gate.
    ServiceAccount {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

/// One cloud registry login to obtain.
#[derive(Clone, Debug)]
pub struct CloudLoginRequest<'a> {
    /// The registry, already recognised as the provider's (`domain::cloud_hosts`).
    pub registry: &'a CloudRegistry,
    /// Whose identity. Nothing about how the object reaches the registry (`spec.insecure`,
    /// a proxy, a CA) is part of a login: the token endpoints are always reached over
    /// verified HTTPS, the ACR token exchange on the registry itself included.
    pub identity: &'a CloudIdentity,
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
    /// Whether [`CloudIdentity::ServiceAccount`] logins are enabled (the
    /// `ObjectLevelWorkloadIdentity` feature gate); off unless an implementation says so.
    fn object_level_identity(&self) -> bool {
        false
    }
    /// Registry credentials for `request`.
    async fn registry_credentials(
        &self,
        request: &CloudLoginRequest<'_>,
    ) -> Result<Credentials, CloudLoginError>;
}

/// A token the API server issued for a ServiceAccount.
#[derive(Clone, Debug)]
pub struct ServiceAccountToken {
    /// The JWT.
    pub token: Redacted<String>,
    /// When it expires (`status.expirationTimestamp`).
    pub expires_at: DateTime<Utc>,
}

/// A failed ServiceAccount read or TokenRequest.
#[derive(Debug, thiserror::Error)]
pub enum ServiceAccountError {
    /// No such ServiceAccount.
    #[error("serviceaccount '{namespace}/{name}' not found")]
    NotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The API call failed.
    #[error("failed to {action} serviceaccount '{namespace}/{name}': {message}")]
    Api {
        /// `read` or `request a token for`.
        action: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What failed (the API server's message).
        message: String,
    },
}

/// Reads ServiceAccounts and requests their tokens (the TokenRequest API).
#[async_trait]
pub trait ServiceAccountTokens: Send + Sync {
    /// The ServiceAccount's annotations.
    async fn annotations(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, ServiceAccountError>;
    /// A token for the ServiceAccount with `audience`.
    async fn token(
        &self,
        namespace: &str,
        name: &str,
        audience: &str,
    ) -> Result<ServiceAccountToken, ServiceAccountError>;
}
