//! [`crate::ports::Secrets`] backed by the Kubernetes API: Secrets and ServiceAccounts are
//! read on every reconcile, kept in memory only for its duration, never logged.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::{Api, Client};

use crate::domain::secret::Redacted;
use crate::ports::{SecretData, Secrets, SecretsError};

/// Reads Secrets through the API server.
#[derive(Clone)]
pub struct KubeSecrets {
    client: Client,
}

impl KubeSecrets {
    /// A reader using `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn api_error(namespace: &str, name: &str, e: kube::Error) -> SecretsError {
    match e {
        kube::Error::Api(s) if s.is_not_found() => SecretsError::NotFound {
            namespace: namespace.to_string(),
            name: name.to_string(),
        },
        other => SecretsError::Api {
            namespace: namespace.to_string(),
            name: name.to_string(),
            message: other.to_string(),
        },
    }
}

#[async_trait]
impl Secrets for KubeSecrets {
    async fn secret(&self, namespace: &str, name: &str) -> Result<SecretData, SecretsError> {
        let secret = Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| api_error(namespace, name, e))?;
        let mut data: SecretData = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, Redacted::new(v.0)))
            .collect();
        for (k, v) in secret.string_data.unwrap_or_default() {
            data.insert(k, Redacted::new(v.into_bytes()));
        }
        Ok(data)
    }

    async fn image_pull_secrets(
        &self,
        namespace: &str,
        service_account: &str,
    ) -> Result<Vec<String>, SecretsError> {
        let sa = Api::<ServiceAccount>::namespaced(self.client.clone(), namespace)
            .get(service_account)
            .await
            .map_err(|e| api_error(namespace, &format!("serviceaccount/{service_account}"), e))?;
        Ok(sa
            .image_pull_secrets
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect())
    }
}
