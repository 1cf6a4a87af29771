//! Where each cloud's identity comes from: the standard environment variables the EKS,
//! GKE and AKS webhooks (or an operator) set on the controller's pod, read once at start.
//! Token files named here are read again at every login, since they rotate. Tests build
//! these settings from a map instead of the process environment.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::domain::secret::Redacted;

/// AWS identity settings (the names are the AWS SDKs' environment variables).
#[derive(Clone, Debug, Default)]
pub struct AwsSettings {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: Option<String>,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Option<Redacted<String>>,
    /// `AWS_SESSION_TOKEN`.
    pub session_token: Option<Redacted<String>>,
    /// `AWS_ROLE_ARN` (IRSA).
    pub role_arn: Option<String>,
    /// `AWS_WEB_IDENTITY_TOKEN_FILE` (IRSA).
    pub web_identity_token_file: Option<PathBuf>,
    /// `AWS_ROLE_SESSION_NAME`; `ocisource` when unset.
    pub role_session_name: Option<String>,
    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI` (EKS Pod Identity).
    pub container_credentials_full_uri: Option<String>,
    /// `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (ECS).
    pub container_credentials_relative_uri: Option<String>,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
    pub container_authorization_token: Option<Redacted<String>>,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (EKS Pod Identity).
    pub container_authorization_token_file: Option<PathBuf>,
    /// `AWS_ENDPOINT_URL`: every AWS API at this URL.
    pub endpoint_url: Option<String>,
    /// `AWS_ENDPOINT_URL_STS`.
    pub endpoint_url_sts: Option<String>,
    /// `AWS_ENDPOINT_URL_ECR`.
    pub endpoint_url_ecr: Option<String>,
    /// `AWS_ENDPOINT_URL_ECR_PUBLIC`.
    pub endpoint_url_ecr_public: Option<String>,
    /// `AWS_USE_FIPS_ENDPOINT=true`.
    pub use_fips_endpoint: bool,
}

/// Google identity settings.
#[derive(Clone, Debug, Default)]
pub struct GcpSettings {
    /// `GCE_METADATA_HOST` (`host[:port]`); `metadata.google.internal` when unset.
    pub metadata_host: Option<String>,
    /// `GOOGLE_APPLICATION_CREDENTIALS`: an `external_account` credentials file.
    pub application_credentials: Option<PathBuf>,
}

/// Microsoft Entra workload identity settings (set by the AKS workload identity webhook).
#[derive(Clone, Debug, Default)]
pub struct AzureSettings {
    /// `AZURE_CLIENT_ID`.
    pub client_id: Option<String>,
    /// `AZURE_TENANT_ID`.
    pub tenant_id: Option<String>,
    /// `AZURE_FEDERATED_TOKEN_FILE`.
    pub federated_token_file: Option<PathBuf>,
    /// `AZURE_AUTHORITY_HOST`; the registry's cloud's authority when unset.
    pub authority_host: Option<String>,
}

/// Everything the cloud logins need from outside.
#[derive(Clone, Debug, Default)]
pub struct CloudSettings {
    /// AWS.
    pub aws: AwsSettings,
    /// Google Cloud.
    pub gcp: GcpSettings,
    /// Azure.
    pub azure: AzureSettings,
    /// Host names answered with these addresses instead of DNS, for every cloud endpoint
    /// (tests point the real endpoint names at local fakes; the port of the address is
    /// used when the URL names none).
    pub resolve: Vec<(String, SocketAddr)>,
    /// Extra CA certificates (PEM) trusted for every cloud endpoint besides the platform's
    /// roots (tests trust their HTTPS fakes this way, without the process-wide
    /// `SSL_CERT_FILE` that a pod would use). Never from the environment.
    pub extra_ca_pem: Option<Vec<u8>>,
}

impl CloudSettings {
    /// Settings from the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Settings from `lookup(name)`; empty values count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let path = |k: &str| get(k).map(PathBuf::from);
        let secret = |k: &str| get(k).map(Redacted::new);
        Self {
            aws: AwsSettings {
                access_key_id: get("AWS_ACCESS_KEY_ID"),
                secret_access_key: secret("AWS_SECRET_ACCESS_KEY"),
                session_token: secret("AWS_SESSION_TOKEN"),
                role_arn: get("AWS_ROLE_ARN"),
                web_identity_token_file: path("AWS_WEB_IDENTITY_TOKEN_FILE"),
                role_session_name: get("AWS_ROLE_SESSION_NAME"),
                container_credentials_full_uri: get("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
                container_credentials_relative_uri: get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
                container_authorization_token: secret("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
                container_authorization_token_file: path("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
                endpoint_url: get("AWS_ENDPOINT_URL"),
                endpoint_url_sts: get("AWS_ENDPOINT_URL_STS"),
                endpoint_url_ecr: get("AWS_ENDPOINT_URL_ECR"),
                endpoint_url_ecr_public: get("AWS_ENDPOINT_URL_ECR_PUBLIC"),
                use_fips_endpoint: get("AWS_USE_FIPS_ENDPOINT")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            },
            gcp: GcpSettings {
                metadata_host: get("GCE_METADATA_HOST"),
                application_credentials: path("GOOGLE_APPLICATION_CREDENTIALS"),
            },
            azure: AzureSettings {
                client_id: get("AZURE_CLIENT_ID"),
                tenant_id: get("AZURE_TENANT_ID"),
                federated_token_file: path("AZURE_FEDERATED_TOKEN_FILE"),
                authority_host: get("AZURE_AUTHORITY_HOST"),
            },
            resolve: Vec::new(),
            extra_ca_pem: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_sdk_variable_names_and_ignores_empty_values() {
        let env = std::collections::HashMap::from([
            ("AWS_ROLE_ARN", "arn:aws:iam::012345678901:role/ecr"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("AWS_ACCESS_KEY_ID", ""),
            ("AWS_USE_FIPS_ENDPOINT", "TRUE"),
            ("GCE_METADATA_HOST", "127.0.0.1:8080"),
            ("AZURE_CLIENT_ID", "c"),
        ]);
        let s = CloudSettings::from_lookup(|k| env.get(k).map(|v| (*v).to_string()));
        assert_eq!(
            s.aws.role_arn.as_deref(),
            Some("arn:aws:iam::012345678901:role/ecr")
        );
        assert_eq!(
            s.aws.web_identity_token_file,
            Some(PathBuf::from("/var/run/token"))
        );
        assert_eq!(s.aws.access_key_id, None);
        assert!(s.aws.use_fips_endpoint);
        assert_eq!(s.gcp.metadata_host.as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(s.azure.client_id.as_deref(), Some("c"));
        assert_eq!(s.azure.tenant_id, None);
    }
}
