//! Cloud registry logins without stored secrets (`spec.provider: aws|gcp|azure`): the
//! controller's workload identity is turned into registry credentials, as Flux's
//! `fluxcd/pkg/auth` does, and implements `ports::CloudLogin`.
//!
//! - aws (`aws`, `ecr`, `sigv4`): credentials from the environment keys, IRSA web
//!   identity (STS `AssumeRoleWithWebIdentity`) or EKS Pod Identity (the container
//!   credentials endpoint), then ECR `GetAuthorizationToken` (`user:password`);
//! - gcp (`gcp`): an access token from the metadata server or an `external_account`
//!   (workload identity federation) file, user `oauth2accesstoken`;
//! - azure (`azure`): a Microsoft Entra token from the federated workload identity
//!   token, exchanged on the registry for an ACR refresh token;
//! - object-level identity (`object`, `object_login`): with the `ObjectLevelWorkloadIdentity`
//!   feature gate, an object's `spec.serviceAccountName` logs in as that ServiceAccount:
//!   a TokenRequest token replaces the controller's token file in the same exchanges.
//!
//! Logins and the identity's access tokens are cached in memory (`cache`) per identity
//! and registry scope until 80% of their lifetime, at most one hour (Flux's rule), with
//! one request in flight per key; they are never logged or written to disk.
//!
//! Why no SDK crates (measured with `cargo tree` against this lock file and
//! `cargo build --timings` on this 2-core machine, shared and loaded, so wall times are
//! inflated and CPU seconds are the figure to compare): `aws-config` + `aws-sdk-ecr` +
//! `aws-sdk-sts` add 56 crates, among them a second HTTP stack (hyper 0.14, rustls 0.21,
//! ring); `azure_identity` adds 36 (openssl and a second reqwest by default);
//! `google-cloud-auth` adds 25. Even the `aws-sigv4` crate alone adds 25 crates (a second
//! sha2/hmac family, `time`, `aws-smithy-*`): about 100 CPU seconds of a debug build,
//! against about 11 for what is used instead, `hmac` (one crate, for SigV4) and
//! `quick-xml` (STS answers in XML), both figures with this crate's own rebuild. The protocols are small and documented: one
//! SigV4-signed JSON call, one unsigned STS form call, OAuth2 form posts. The signing is
//! checked against AWS's published SigV4 test vectors and, end to end, by moto
//! recomputing the signature. Not covered (said rather than guessed): the EC2 instance
//! metadata (node) identity for AWS, shared AWS config/credential files, Google
//! service-account key files, Azure client secrets and managed identity.
//!
//! Must not import `reconcile`.

mod aws;
mod azure;
mod cache;
mod ecr;
mod gcp;
mod http;
mod object;
mod object_login;
mod settings;
mod sigv4;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use cache::{Clock, SystemClock};
pub use object::{
    ServiceAccountError, ServiceAccountToken, ServiceAccountTokens, AWS_AUDIENCE, AWS_ROLE_ARN,
    AZURE_AUDIENCE, AZURE_CLIENT_ID, AZURE_TENANT_ID, CREDENTIAL_PROVIDER, GCP_SERVICE_ACCOUNT,
    GCP_WORKLOAD_IDENTITY_PROVIDER,
};
pub use settings::{AwsSettings, AzureSettings, CloudSettings, GcpSettings};

use crate::domain::cloud_hosts::CloudRegistry;
use crate::domain::secret::Credentials;
use crate::ports::{CloudIdentity, CloudLogin, CloudLoginError, CloudLoginRequest};

/// A failed step of a cloud login. Messages never carry a credential.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The endpoint could not be reached.
    #[error("failed to reach {what} at {url}")]
    Unreachable {
        /// The endpoint's role, e.g. `AWS STS`.
        what: &'static str,
        /// Its URL.
        url: String,
        /// Cause.
        #[source]
        source: reqwest::Error,
    },
    /// The endpoint answered with an error status.
    #[error("{what} at {url} answered {status}: {body}")]
    Refused {
        /// The endpoint's role.
        what: &'static str,
        /// Its URL.
        url: String,
        /// HTTP status.
        status: u16,
        /// The start of the error body.
        body: String,
    },
    /// The endpoint answered something unusable.
    #[error("unexpected answer from {what} at {url}: {problem}")]
    Answer {
        /// The endpoint's role.
        what: &'static str,
        /// Its URL.
        url: String,
        /// What is wrong.
        problem: String,
    },
    /// A token or credentials file could not be read.
    #[error("failed to read {what} '{path}'")]
    ReadFile {
        /// The file's role, e.g. `the web identity token file (AWS_WEB_IDENTITY_TOKEN_FILE)`.
        what: &'static str,
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The controller's environment holds no identity for the provider.
    #[error("no {provider} identity in the controller's environment: {hint}")]
    NoIdentity {
        /// `aws`, `gcp` or `azure`.
        provider: &'static str,
        /// What to set up.
        hint: &'static str,
    },
    /// The object's ServiceAccount could not be read or given a token.
    #[error(transparent)]
    ServiceAccount(#[from] ServiceAccountError),
    /// An annotation of the object's ServiceAccount is missing or malformed.
    #[error("serviceaccount '{namespace}/{name}': annotation {annotation} {problem}")]
    Annotation {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The annotation, e.g. `eks.amazonaws.com/role-arn`.
        annotation: &'static str,
        /// What is wrong and what to do.
        problem: String,
    },
    /// A ServiceAccount identity was asked for, but object-level identity is off.
    #[error(
        "object-level workload identity is off: start the controller with \
         --feature-gates=ObjectLevelWorkloadIdentity=true"
    )]
    ObjectIdentityOff,
    /// The identity configuration is unusable.
    #[error("invalid {setting}: {problem}")]
    Config {
        /// The setting, e.g. `AWS_CONTAINER_CREDENTIALS_FULL_URI`.
        setting: &'static str,
        /// What is wrong and what to do.
        problem: String,
    },
}

/// A value with the time it stops being valid.
#[derive(Clone, Debug)]
pub(crate) struct Expiring<T> {
    /// The token or login.
    pub value: T,
    /// When the provider said it expires.
    pub expires_at: DateTime<Utc>,
}

/// An identity's access token, before it is turned into a registry login.
#[derive(Clone, Debug)]
pub(crate) enum AccessToken {
    Aws(aws::AwsCredentials),
    Bearer(crate::domain::secret::Redacted<String>),
}

/// Logs in to ECR, Google registries and ACR with the controller's workload identity.
pub struct WorkloadLogin {
    settings: CloudSettings,
    http: http::Http,
    service_accounts: Option<Arc<dyn ServiceAccountTokens>>,
    gke: gcp::GkeMetadata,
    logins: cache::TokenCache<Credentials>,
    access: cache::TokenCache<AccessToken>,
}

impl std::fmt::Debug for WorkloadLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadLogin").finish_non_exhaustive()
    }
}

impl WorkloadLogin {
    /// A login with `settings` (usually [`CloudSettings::from_env`]) and `clock` (which
    /// decides cache expiry; tests inject their own).
    pub fn new(settings: CloudSettings, clock: Arc<dyn Clock>) -> Result<Self, CloudError> {
        Ok(Self {
            http: http::Http::new(&settings)?,
            logins: cache::TokenCache::new(clock.clone()),
            access: cache::TokenCache::new(clock),
            settings,
            service_accounts: None,
            gke: gcp::GkeMetadata::default(),
        })
    }

    /// Turns on object-level workload identity (Flux's `ObjectLevelWorkloadIdentity`
    /// feature gate): objects' ServiceAccounts are read and given tokens by `tokens`.
    pub fn with_object_identity(mut self, tokens: Arc<dyn ServiceAccountTokens>) -> Self {
        self.service_accounts = Some(tokens);
        self
    }

    /// Whose identity `request` logs in with: for a ServiceAccount, its annotations are
    /// read now, so that a changed role is a new cache key.
    async fn who(&self, request: &CloudLoginRequest<'_>) -> Result<Who, CloudError> {
        match request.identity {
            CloudIdentity::Controller => Ok(Who::Controller),
            CloudIdentity::ServiceAccount { namespace, name } => {
                let tokens = self
                    .service_accounts
                    .as_ref()
                    .ok_or(CloudError::ObjectIdentityOff)?;
                let annotations = tokens.annotations(namespace, name).await?;
                let identity = object::ObjectIdentity::from_annotations(
                    request.registry.provider(),
                    namespace,
                    name,
                    &annotations,
                )?;
                Ok(Who::ServiceAccount {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    identity,
                })
            }
        }
    }

    /// The identity's access token for `registry`, from the cache or the provider. AWS
    /// credentials are per STS region (the registry's, as in Flux), a Google token serves
    /// every Google registry, an Entra token is per Azure cloud.
    async fn access_token(
        &self,
        who: &Who,
        registry: &CloudRegistry,
    ) -> Result<Expiring<AccessToken>, CloudError> {
        let scope = match registry {
            CloudRegistry::Ecr(e) => format!("aws:{}", e.region),
            CloudRegistry::PublicEcr => format!("aws:{}", ecr::PUBLIC_REGION),
            CloudRegistry::Google { .. } => "gcp".to_string(),
            CloudRegistry::Acr { cloud, .. } => format!("azure:{}", cloud.acr_scope()),
        };
        let key = format!("{}/{scope}", who.key());
        let now = self.access.now();
        let (aws, gcp, azure, http) = (
            &self.settings.aws,
            &self.settings.gcp,
            &self.settings.azure,
            &self.http,
        );
        if let Who::ServiceAccount {
            namespace,
            name,
            identity,
        } = who
        {
            let tokens = self
                .service_accounts
                .as_deref()
                .ok_or(CloudError::ObjectIdentityOff)?;
            let sa = object_login::ServiceAccountIdentity {
                namespace,
                name,
                identity,
            };
            let (settings, gke) = (&self.settings, &self.gke);
            return self
                .access
                .get_or_fetch(&key, || async move {
                    object_login::access_token(settings, http, gke, tokens, &sa, registry, now)
                        .await
                })
                .await;
        }
        self.access
            .get_or_fetch(&key, || async move {
                match registry {
                    CloudRegistry::Ecr(e) => aws::credentials(aws, http, &e.region, now).await,
                    CloudRegistry::PublicEcr => {
                        aws::credentials(aws, http, ecr::PUBLIC_REGION, now).await
                    }
                    CloudRegistry::Google { .. } => gcp::access_token(gcp, http, now).await,
                    CloudRegistry::Acr { cloud, .. } => {
                        azure::entra_token(azure, http, *cloud, now).await
                    }
                }
            })
            .await
    }

    async fn login(&self, request: &CloudLoginRequest<'_>) -> Result<Credentials, CloudError> {
        let who = self.who(request).await?;
        let key = format!("{}/{}", who.key(), request.registry.login_scope());
        let login = self
            .logins
            .get_or_fetch(&key, || async {
                let token = self.access_token(&who, request.registry).await?;
                let (aws, http) = (&self.settings.aws, &self.http);
                match (request.registry, &token.value) {
                    (CloudRegistry::Ecr(e), AccessToken::Aws(c)) => {
                        ecr::private_login(aws, http, e, c).await
                    }
                    (CloudRegistry::PublicEcr, AccessToken::Aws(c)) => {
                        ecr::public_login(aws, http, c).await
                    }
                    (CloudRegistry::Google { .. }, _) => gcp::registry_login(&token),
                    (CloudRegistry::Acr { host, .. }, _) => {
                        azure::acr_login(http, host, &token).await
                    }
                    (CloudRegistry::Ecr(_) | CloudRegistry::PublicEcr, _) => {
                        Err(CloudError::Config {
                            setting: "spec.provider",
                            problem: "only an AWS credential can log in to ECR".into(),
                        })
                    }
                }
            })
            .await?;
        Ok(login.value)
    }
}

/// Whose identity logs in, resolved.
enum Who {
    Controller,
    ServiceAccount {
        namespace: String,
        name: String,
        identity: object::ObjectIdentity,
    },
}

impl Who {
    /// The token caches' key prefix: the identity, with the role or client it holds.
    fn key(&self) -> String {
        match self {
            Self::Controller => "controller".to_string(),
            Self::ServiceAccount {
                namespace,
                name,
                identity,
            } => format!("sa:{namespace}/{name}:{}", identity.key()),
        }
    }
}

/// How a registry is named in error messages.
fn describe(registry: &CloudRegistry) -> String {
    match registry {
        CloudRegistry::Ecr(e) => format!("ECR in {}", e.region),
        CloudRegistry::PublicEcr => "public ECR".to_string(),
        CloudRegistry::Google { host } => host.clone(),
        CloudRegistry::Acr { host, .. } => host.clone(),
    }
}

#[async_trait]
impl CloudLogin for WorkloadLogin {
    fn object_level_identity(&self) -> bool {
        self.service_accounts.is_some()
    }

    async fn registry_credentials(
        &self,
        request: &CloudLoginRequest<'_>,
    ) -> Result<Credentials, CloudLoginError> {
        self.login(request).await.map_err(|e| CloudLoginError {
            provider: request.registry.provider().name(),
            registry: describe(request.registry),
            message: crate::domain::error_chain::chain(&e),
        })
    }
}
