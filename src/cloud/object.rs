//! Object-level workload identity (Flux's `ObjectLevelWorkloadIdentity` feature gate):
//! an object with `spec.provider` and `spec.serviceAccountName` logs in as THAT
//! ServiceAccount. Its identity is read from the ServiceAccount's annotations (the ones
//! Flux's `fluxcd/pkg/auth` reads, checked with the same shapes), a token for it is
//! requested from the TokenRequest API with the cloud's audience ([`ServiceAccountTokens`],
//! implemented by the Kubernetes adapter), and that token then goes through the same
//! exchanges as the controller's own token file (`aws`, `gcp`, `azure`).
//!
//! | provider | annotations | TokenRequest audience |
//! |---|---|---|
//! | aws | `eks.amazonaws.com/role-arn` (required) | `sts.amazonaws.com` |
//! | gcp | `gcp.auth.fluxcd.io/workload-identity-provider` (outside GKE), `iam.gke.io/gcp-service-account` (optional impersonation) | the provider, or `<project>.svc.id.goog` on GKE |
//! | azure | `azure.workload.identity/client-id`, `azure.workload.identity/tenant-id` (both required) | `api://AzureADTokenExchange` |
//!
//! Flux's object identity API also names how the credential is acquired, with
//! `credential.auth.fluxcd.io/provider`: `kubernetes` (the TokenRequest, the default when
//! the annotation is absent) or `spiffe` (a JWT-SVID from the SPIFFE Broker API). Only
//! `kubernetes` is implemented here; `spiffe` or another value is refused naming the
//! annotation, rather than logging in with a token the ServiceAccount's owner did not ask
//! for.
//!
//! Must not import `reconcile` or `kube`.

use std::collections::BTreeMap;

use super::CloudError;
use crate::domain::cloud_hosts::CloudProvider;
pub use crate::ports::{ServiceAccountError, ServiceAccountToken, ServiceAccountTokens};

/// The IAM role of an AWS ServiceAccount (IRSA's annotation).
pub const AWS_ROLE_ARN: &str = "eks.amazonaws.com/role-arn";
/// The Google service account to impersonate (GKE workload identity's annotation).
pub const GCP_SERVICE_ACCOUNT: &str = "iam.gke.io/gcp-service-account";
/// The workload identity federation provider, outside GKE (Flux's annotation).
pub const GCP_WORKLOAD_IDENTITY_PROVIDER: &str = "gcp.auth.fluxcd.io/workload-identity-provider";
/// The Entra application (Azure workload identity's annotation).
pub const AZURE_CLIENT_ID: &str = "azure.workload.identity/client-id";
/// The Entra tenant (Azure workload identity's annotation).
pub const AZURE_TENANT_ID: &str = "azure.workload.identity/tenant-id";

/// How the credential is acquired (Flux's object identity API): `kubernetes` or `spiffe`.
pub const CREDENTIAL_PROVIDER: &str = "credential.auth.fluxcd.io/provider";
/// The [`CREDENTIAL_PROVIDER`] value of the TokenRequest (the default).
const KUBERNETES_CREDENTIAL: &str = "kubernetes";

/// The TokenRequest audience AWS STS accepts.
pub const AWS_AUDIENCE: &str = "sts.amazonaws.com";
/// The TokenRequest audience Microsoft Entra accepts.
pub const AZURE_AUDIENCE: &str = "api://AzureADTokenExchange";

/// A ServiceAccount's cloud identity, read from its annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ObjectIdentity {
    /// An IAM role assumed with the ServiceAccount's token.
    Aws {
        /// `eks.amazonaws.com/role-arn`.
        role_arn: String,
    },
    /// A federated Google token, optionally impersonating a service account.
    Gcp {
        /// `//iam.googleapis.com/projects/.../providers/...`, or `None` on GKE.
        provider_audience: Option<String>,
        /// `iam.gke.io/gcp-service-account`.
        email: Option<String>,
    },
    /// An Entra application trusting the ServiceAccount's token.
    Azure {
        /// `azure.workload.identity/client-id`.
        client_id: String,
        /// `azure.workload.identity/tenant-id`.
        tenant_id: String,
    },
}

impl ObjectIdentity {
    /// The identity of ServiceAccount `namespace/name` for `provider`, from its
    /// `annotations`; a missing or malformed annotation is an error naming both.
    pub(crate) fn from_annotations(
        provider: CloudProvider,
        namespace: &str,
        name: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Self, CloudError> {
        let bad = |annotation: &'static str, problem: String| CloudError::Annotation {
            namespace: namespace.to_string(),
            name: name.to_string(),
            annotation,
            problem,
        };
        let get = |key: &str| {
            annotations
                .get(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let required = |key: &'static str, what: &str| {
            get(key).ok_or_else(|| bad(key, format!("is missing: set it to {what}")))
        };
        match get(CREDENTIAL_PROVIDER).as_deref() {
            None | Some(KUBERNETES_CREDENTIAL) => {}
            Some("spiffe") => {
                return Err(bad(
                    CREDENTIAL_PROVIDER,
                    "is 'spiffe': the SPIFFE credential provider is not supported; \
                     remove the annotation or set it to 'kubernetes' (a TokenRequest token)"
                        .into(),
                ))
            }
            Some(other) => {
                return Err(bad(
                    CREDENTIAL_PROVIDER,
                    format!(
                        "'{other}' is not a credential provider: use 'kubernetes' or remove it"
                    ),
                ))
            }
        }
        match provider {
            CloudProvider::Aws => {
                let role_arn = required(AWS_ROLE_ARN, "the ARN of the IAM role to assume")?;
                if !is_role_arn(&role_arn) {
                    return Err(bad(
                        AWS_ROLE_ARN,
                        format!("'{role_arn}' is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)"),
                    ));
                }
                Ok(Self::Aws { role_arn })
            }
            CloudProvider::Gcp => {
                let email = get(GCP_SERVICE_ACCOUNT);
                if let Some(e) = email.as_deref().filter(|e| !is_gcp_email(e)) {
                    return Err(bad(
                        GCP_SERVICE_ACCOUNT,
                        format!("'{e}' is not a service account email (<name>@<project>.iam.gserviceaccount.com)"),
                    ));
                }
                let provider_audience = match get(GCP_WORKLOAD_IDENTITY_PROVIDER) {
                    Some(p) if is_gcp_provider(&p) => Some(format!("//iam.googleapis.com/{p}")),
                    Some(p) => return Err(bad(
                        GCP_WORKLOAD_IDENTITY_PROVIDER,
                        format!("'{p}' is not projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>"),
                    )),
                    None => None,
                };
                Ok(Self::Gcp {
                    provider_audience,
                    email,
                })
            }
            CloudProvider::Azure => Ok(Self::Azure {
                client_id: required(AZURE_CLIENT_ID, "the client ID of the Entra application")?,
                tenant_id: required(AZURE_TENANT_ID, "the ID of the Entra tenant")?,
            }),
        }
    }

    /// What distinguishes this identity in the token caches.
    pub(crate) fn key(&self) -> String {
        match self {
            Self::Aws { role_arn } => role_arn.clone(),
            Self::Gcp {
                provider_audience,
                email,
            } => format!(
                "{}|{}",
                provider_audience.as_deref().unwrap_or("gke"),
                email.as_deref().unwrap_or("")
            ),
            Self::Azure {
                client_id,
                tenant_id,
            } => format!("{tenant_id}/{client_id}"),
        }
    }
}

/// `arn:<aws partition>:iam::<account>:role/<name>`, as Flux checks it.
fn is_role_arn(arn: &str) -> bool {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("iam"), Some(""), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    let role = resource.strip_prefix("role/").unwrap_or_default();
    partition.starts_with("aws")
        && partition[3..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && (1..=30).contains(&account.len())
        && account.chars().all(|c| c.is_ascii_digit())
        && (1..=200).contains(&role.chars().count())
}

/// `<name>@<project>.iam.gserviceaccount.com`.
fn is_gcp_email(email: &str) -> bool {
    let word = |s: &str| {
        (1..=100).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    email
        .strip_suffix(".iam.gserviceaccount.com")
        .and_then(|s| s.split_once('@'))
        .is_some_and(|(user, project)| word(user) && word(project))
}

/// `projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>`.
fn is_gcp_provider(p: &str) -> bool {
    let parts: Vec<&str> = p.split('/').collect();
    let named = |s: &str| (1..=100).contains(&s.len());
    matches!(
        parts.as_slice(),
        ["projects", number, "locations", "global", "workloadIdentityPools", pool, "providers", provider]
            if (1..=30).contains(&number.len())
                && number.chars().all(|c| c.is_ascii_digit())
                && named(pool)
                && named(provider)
    )
}

/// The AWS role session name of ServiceAccount `namespace/name` (Flux's shape, with this
/// controller's suffix), cut to STS's 64 characters.
pub(crate) fn aws_session_name(namespace: &str, name: &str, region: &str) -> String {
    format!("{name}.{namespace}.{region}.ocisource")
        .chars()
        .take(64)
        .collect()
}

#[cfg(test)]
#[path = "object_tests.rs"]
mod tests;
