//! The Secrets port: Secret data and a ServiceAccount's `imagePullSecrets`, read per
//! reconcile (the Kubernetes reader in `controller`, the file-backed one in `oneshot`).
//! Names no adapter; imports only `domain`.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::domain::secret::Redacted;

/// The data of a Kubernetes Secret, values decoded.
pub type SecretData = BTreeMap<String, Redacted<Vec<u8>>>;

/// A failed Secret lookup.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// No such Secret.
    #[error("secret '{namespace}/{name}' not found")]
    NotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The API call failed.
    #[error("failed to read secret '{namespace}/{name}': {message}")]
    Api {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What failed.
        message: String,
    },
}

/// Reads Secrets and ServiceAccounts for credentials, per reconcile, never caching to disk.
#[async_trait]
pub trait Secrets: Send + Sync {
    /// The Secret's data.
    async fn secret(&self, namespace: &str, name: &str) -> Result<SecretData, SecretsError>;
    /// Names of the ServiceAccount's `imagePullSecrets`.
    async fn image_pull_secrets(
        &self,
        namespace: &str,
        service_account: &str,
    ) -> Result<Vec<String>, SecretsError>;
}
