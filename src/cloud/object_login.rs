//! The access token of a ServiceAccount's cloud identity (object-level workload
//! identity): a TokenRequest token with the cloud's audience, exchanged exactly as the
//! controller's own token file is (`aws::assume_role_with_web_identity`,
//! `gcp::federate`, `azure::exchange_assertion`), as Flux's `fluxcd/pkg/auth` providers
//! do in `NewTokenForServiceAccount`. The Google STS and IAM credentials URLs are
//! Google's fixed public endpoints, as in Flux.

use chrono::{DateTime, Utc};

use super::http::Http;
use super::object::{
    aws_session_name, ObjectIdentity, ServiceAccountTokens, AWS_AUDIENCE, AZURE_AUDIENCE,
};
use super::{aws, azure, ecr, gcp, AccessToken, CloudError, CloudSettings, Expiring};
use crate::domain::cloud_hosts::CloudRegistry;

/// Google's STS token exchange endpoint.
const GOOGLE_STS_URL: &str = "https://sts.googleapis.com/v1/token";
/// The subject token type of a Kubernetes ServiceAccount token.
const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// The IAM credentials URL that impersonates Google service account `email`.
fn impersonation_url(email: &str) -> String {
    format!(
        "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{email}:generateAccessToken"
    )
}

/// Who a login is for: the ServiceAccount and its identity.
pub(crate) struct ServiceAccountIdentity<'a> {
    /// The ServiceAccount's namespace (the object's).
    pub namespace: &'a str,
    /// The ServiceAccount's name (`spec.serviceAccountName`).
    pub name: &'a str,
    /// What its annotations say.
    pub identity: &'a ObjectIdentity,
}

/// The access token of `who` for `registry` at `now` (`gke`: the cluster's identity on
/// GKE, read once).
pub(crate) async fn access_token(
    settings: &CloudSettings,
    http: &Http,
    gke: &gcp::GkeMetadata,
    tokens: &dyn ServiceAccountTokens,
    who: &ServiceAccountIdentity<'_>,
    registry: &CloudRegistry,
    now: DateTime<Utc>,
) -> Result<Expiring<AccessToken>, CloudError> {
    let (namespace, name) = (who.namespace, who.name);
    match (who.identity, registry) {
        (ObjectIdentity::Aws { role_arn }, CloudRegistry::Ecr(_) | CloudRegistry::PublicEcr) => {
            let region = match registry {
                CloudRegistry::Ecr(e) => e.region.as_str(),
                _ => ecr::PUBLIC_REGION,
            };
            let token = tokens.token(namespace, name, AWS_AUDIENCE).await?;
            let session = aws_session_name(namespace, name, region);
            let c = aws::assume_role_with_web_identity(
                &settings.aws,
                http,
                region,
                role_arn,
                &session,
                &token.token,
            )
            .await?;
            Ok(Expiring {
                value: AccessToken::Aws(c.value),
                expires_at: c.expires_at,
            })
        }
        (
            ObjectIdentity::Gcp {
                provider_audience,
                email,
            },
            CloudRegistry::Google { .. },
        ) => {
            let (token_audience, sts_audience) = match provider_audience {
                Some(a) => (a.clone(), a.clone()),
                None => gke.audiences(&settings.gcp, http).await?,
            };
            let token = tokens.token(namespace, name, &token_audience).await?;
            let impersonate = email.as_deref().map(impersonation_url);
            let federation = gcp::Federation {
                audience: &sts_audience,
                subject_token_type: JWT_TOKEN_TYPE,
                token_url: GOOGLE_STS_URL,
                impersonation_url: impersonate.as_deref(),
            };
            let (t, expires_at) = gcp::federate(http, &federation, &token.token, now).await?;
            Ok(Expiring {
                value: AccessToken::Bearer(t),
                expires_at,
            })
        }
        (
            ObjectIdentity::Azure {
                client_id,
                tenant_id,
            },
            CloudRegistry::Acr { cloud, .. },
        ) => {
            let token = tokens.token(namespace, name, AZURE_AUDIENCE).await?;
            let app = azure::EntraApp {
                client: client_id,
                tenant: tenant_id,
            };
            azure::exchange_assertion(&settings.azure, http, *cloud, &app, &token.token, now).await
        }
        _ => Err(CloudError::Config {
            setting: "spec.provider",
            problem: format!(
                "serviceaccount '{namespace}/{name}' holds no {} identity",
                registry.provider().name()
            ),
        }),
    }
}
