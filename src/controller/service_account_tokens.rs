//! [`crate::ports::ServiceAccountTokens`] backed by the Kubernetes API, for object-level
//! workload identity: a ServiceAccount's annotations (`get serviceaccounts`) and a token
//! for it from the TokenRequest API (`create serviceaccounts/token`), bound to the
//! requested audience and valid for one hour. Tokens are returned to the cloud login,
//! which caches them in memory only; nothing here logs or stores them.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::{Api, Client};

use crate::domain::secret::Redacted;
use crate::ports::{ServiceAccountError, ServiceAccountToken, ServiceAccountTokens};

/// Lifetime asked of every token: Flux's, and the cloud exchanges need it only briefly.
const TOKEN_SECONDS: i64 = 3600;

/// Reads ServiceAccounts and requests their tokens through the API server.
#[derive(Clone)]
pub struct KubeServiceAccountTokens {
    client: Client,
}

impl KubeServiceAccountTokens {
    /// An adapter using `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<ServiceAccount> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn api_error(
    action: &'static str,
    namespace: &str,
    name: &str,
    e: kube::Error,
) -> ServiceAccountError {
    match e {
        kube::Error::Api(s) if s.is_not_found() => ServiceAccountError::NotFound {
            namespace: namespace.to_string(),
            name: name.to_string(),
        },
        other => ServiceAccountError::Api {
            action,
            namespace: namespace.to_string(),
            name: name.to_string(),
            message: other.to_string(),
        },
    }
}

#[async_trait]
impl ServiceAccountTokens for KubeServiceAccountTokens {
    async fn annotations(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, ServiceAccountError> {
        let sa = self
            .api(namespace)
            .get(name)
            .await
            .map_err(|e| api_error("read", namespace, name, e))?;
        Ok(sa.metadata.annotations.unwrap_or_default())
    }

    async fn token(
        &self,
        namespace: &str,
        name: &str,
        audience: &str,
    ) -> Result<ServiceAccountToken, ServiceAccountError> {
        const ACTION: &str = "request a token for";
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec![audience.to_string()]),
                expiration_seconds: Some(TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let answer = self
            .api(namespace)
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|e| api_error(ACTION, namespace, name, e))?;
        let status = answer.status.unwrap_or_default();
        let (Some(token), Some(expiry)) = (status.token, status.expiration_timestamp) else {
            return Err(ServiceAccountError::Api {
                action: ACTION,
                namespace: namespace.to_string(),
                name: name.to_string(),
                message: "the API server answered without a token or its expiry".into(),
            });
        };
        Ok(ServiceAccountToken {
            token: Redacted::new(token),
            expires_at: chrono::DateTime::from_timestamp(expiry.0.as_second(), 0)
                .unwrap_or_default(),
        })
    }
}
