//! The controller's Google access token, found as Google's application default
//! credentials find it for a pod: an `external_account` file named by
//! `GOOGLE_APPLICATION_CREDENTIALS` (workload identity federation: a subject token from a
//! file or URL, exchanged at the STS `token_url`, then optionally impersonating a service
//! account), else the metadata server (GKE workload identity; `GCE_METADATA_HOST`
//! overrides its address). The registry login is user `oauth2accesstoken` with the
//! token as password, for every Google registry, as in Flux.
//!
//! Scope: a token that reaches a registry asks only for [`PULL_SCOPE`]
//! (`devstorage.read_only`), not Flux's `cloud-platform` + `userinfo.email`
//! (`fluxcd/pkg` `auth/gcp/provider.go`). Google's Artifact Registry guide "Deploying to
//! Compute Engine" (cloud.google.com/artifact-registry/docs/integrate-compute) says a pull
//! needs the `artifactregistry.reader` role and the read-only Cloud Storage access scope,
//! and that only uploads need `read-write`, `cloud-platform` or `full-control`; it is
//! also the scope of Compute Engine's default service account, which pulls from
//! Artifact Registry and the `gcr.io` repositories it now serves. A `cloud-platform`
//! token would let whoever sees it use every API the identity may call. The one token
//! that keeps `cloud-platform` is the STS token used only to call the IAM credentials
//! API (`generateAccessToken`) for impersonation, which requires it; it never reaches a
//! registry. `tests/cloud_gcp.rs` checks the scopes each endpoint is asked for.

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;

use super::http::{post_form, read_token_file, Http};
use super::{AccessToken, CloudError, Expiring, GcpSettings};
use crate::domain::secret::{Credentials, Redacted};

/// The scope of every token that reaches a registry: read-only storage, enough to pull
/// (see the module comment).
const PULL_SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_only";
/// The scope the IAM credentials API requires of the STS token that impersonates.
const IMPERSONATION_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
const DEFAULT_METADATA_HOST: &str = "metadata.google.internal";
/// The registry user name for an OAuth2 access token.
const TOKEN_USER: &str = "oauth2accesstoken";

/// An OAuth2 token answer (metadata server, STS).
#[derive(Deserialize)]
struct OAuthToken {
    access_token: String,
    expires_in: i64,
}

/// The registry login for `token`.
pub(crate) fn registry_login(
    token: &Expiring<AccessToken>,
) -> Result<Expiring<Credentials>, CloudError> {
    match &token.value {
        AccessToken::Bearer(t) => Ok(Expiring {
            value: Credentials {
                username: TOKEN_USER.to_string(),
                password: t.clone(),
            },
            expires_at: token.expires_at,
        }),
        AccessToken::Aws(_) => Err(CloudError::Config {
            setting: "spec.provider",
            problem: "an AWS credential cannot log in to a Google registry".into(),
        }),
    }
}

/// The controller's access token at `now`.
pub(crate) async fn access_token(
    settings: &GcpSettings,
    http: &Http,
    now: DateTime<Utc>,
) -> Result<Expiring<AccessToken>, CloudError> {
    let (token, expires_at) = match &settings.application_credentials {
        Some(path) => external_account(http, path, now).await?,
        None => metadata_token(settings, http, now).await?,
    };
    Ok(Expiring {
        value: AccessToken::Bearer(token),
        expires_at,
    })
}

async fn metadata_token(
    settings: &GcpSettings,
    http: &Http,
    now: DateTime<Utc>,
) -> Result<(Redacted<String>, DateTime<Utc>), CloudError> {
    const WHAT: &str = "the GCE metadata server";
    let host = settings
        .metadata_host
        .as_deref()
        .unwrap_or(DEFAULT_METADATA_HOST);
    let url = format!(
        "http://{host}/computeMetadata/v1/instance/service-accounts/default/token?scopes={PULL_SCOPE}"
    );
    let request = http
        .request(reqwest::Method::GET, &url)
        .header("Metadata-Flavor", "Google");
    let t: OAuthToken = http.json(WHAT, &url, request).await?;
    Ok((
        Redacted::new(t.access_token),
        now + TimeDelta::seconds(t.expires_in),
    ))
}

/// GKE's cluster identity, read from the metadata server at the first login that needs
/// it and then kept, as Flux's `gkeMetadataLoader` (`fluxcd/pkg` `auth/gcp/gke_metadata.go`)
/// does: a failed read is tried again at the next login, a successful one is kept for the
/// life of the process (a running pod does not change clusters).
#[derive(Default)]
pub(crate) struct GkeMetadata(tokio::sync::OnceCell<(String, String)>);

impl GkeMetadata {
    /// The TokenRequest and STS audiences of [`gke_audiences`], read once.
    pub(crate) async fn audiences(
        &self,
        settings: &GcpSettings,
        http: &Http,
    ) -> Result<(String, String), CloudError> {
        self.0
            .get_or_try_init(|| gke_audiences(settings, http))
            .await
            .cloned()
    }
}

/// GKE's workload identity audiences, from the metadata server (as Flux reads them):
/// the TokenRequest audience (`<project>.svc.id.goog`, the workload identity pool) and
/// the STS audience (`identitynamespace:<pool>:<cluster's identity provider>`).
async fn gke_audiences(
    settings: &GcpSettings,
    http: &Http,
) -> Result<(String, String), CloudError> {
    const WHAT: &str = "the GKE metadata server (cluster identity)";
    let host = settings
        .metadata_host
        .as_deref()
        .unwrap_or(DEFAULT_METADATA_HOST);
    let mut values = Vec::new();
    for path in [
        "project/project-id",
        "instance/attributes/cluster-location",
        "instance/attributes/cluster-name",
    ] {
        let url = format!("http://{host}/computeMetadata/v1/{path}");
        let request = http
            .request(reqwest::Method::GET, &url)
            .header("Metadata-Flavor", "Google");
        let body = http.send(WHAT, &url, request).await?;
        let value = String::from_utf8_lossy(&body).trim().to_string();
        if value.is_empty() {
            return Err(CloudError::Answer {
                what: WHAT,
                url,
                problem: "empty value: outside GKE, set the workload identity provider \
                          annotation on the ServiceAccount"
                    .into(),
            });
        }
        values.push(value);
    }
    let [project, location, cluster] = values.as_slice() else {
        return Err(CloudError::Answer {
            what: WHAT,
            url: host.to_string(),
            problem: "incomplete cluster metadata".into(),
        });
    };
    let pool = format!("{project}.svc.id.goog");
    let provider = format!(
        "https://container.googleapis.com/v1/projects/{project}/locations/{location}/clusters/{cluster}"
    );
    Ok((pool.clone(), format!("identitynamespace:{pool}:{provider}")))
}

/// The parts of an `external_account` credentials file this login uses.
#[derive(Deserialize)]
struct ExternalAccount {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    audience: String,
    #[serde(default)]
    subject_token_type: String,
    #[serde(default)]
    token_url: String,
    service_account_impersonation_url: Option<String>,
    #[serde(default)]
    credential_source: CredentialSource,
}

#[derive(Default, Deserialize)]
struct CredentialSource {
    file: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: HashMap<String, String>,
    format: Option<SourceFormat>,
    executable: Option<serde_json::Value>,
    environment_id: Option<String>,
}

#[derive(Deserialize)]
struct SourceFormat {
    #[serde(rename = "type")]
    kind: String,
    subject_token_field_name: Option<String>,
}

/// The impersonation answer of the IAM credentials API.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImpersonatedToken {
    access_token: String,
    expire_time: String,
}

const SETTING: &str = "the external account file (GOOGLE_APPLICATION_CREDENTIALS)";

fn config(problem: String) -> CloudError {
    CloudError::Config {
        setting: SETTING,
        problem,
    }
}

async fn external_account(
    http: &Http,
    path: &std::path::Path,
    now: DateTime<Utc>,
) -> Result<(Redacted<String>, DateTime<Utc>), CloudError> {
    let text = tokio::fs::read(path)
        .await
        .map_err(|source| CloudError::ReadFile {
            what: SETTING,
            path: path.display().to_string(),
            source,
        })?;
    let account: ExternalAccount = serde_json::from_slice(&text)
        .map_err(|e| config(format!("'{}' is not valid JSON: {e}", path.display())))?;
    if account.kind != "external_account" {
        return Err(config(format!(
            "type '{}' is not supported: use workload identity federation ('external_account') \
             or GKE workload identity (the metadata server)",
            account.kind
        )));
    }
    if account.audience.is_empty() || account.token_url.is_empty() {
        return Err(config("'audience' and 'token_url' are required".into()));
    }
    let subject = subject_token(http, &account.credential_source).await?;
    let federation = Federation {
        audience: &account.audience,
        subject_token_type: &account.subject_token_type,
        token_url: &account.token_url,
        impersonation_url: account.service_account_impersonation_url.as_deref(),
    };
    federate(http, &federation, &subject, now).await
}

/// One workload identity federation: where and how a subject token is exchanged.
pub(crate) struct Federation<'a> {
    /// The STS audience (the workload identity pool provider).
    pub audience: &'a str,
    /// The subject token's type, e.g. `urn:ietf:params:oauth:token-type:jwt`.
    pub subject_token_type: &'a str,
    /// The STS token URL.
    pub token_url: &'a str,
    /// The IAM credentials `generateAccessToken` URL of the service account to
    /// impersonate, if any.
    pub impersonation_url: Option<&'a str>,
}

/// Exchanges `subject` at Google STS, then impersonates a service account when asked.
pub(crate) async fn federate(
    http: &Http,
    federation: &Federation<'_>,
    subject: &Redacted<String>,
    now: DateTime<Utc>,
) -> Result<(Redacted<String>, DateTime<Utc>), CloudError> {
    let sts_scope = if federation.impersonation_url.is_some() {
        IMPERSONATION_SCOPE
    } else {
        PULL_SCOPE
    };
    let request = post_form(
        http,
        federation.token_url,
        &[
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("audience", federation.audience),
            ("scope", sts_scope),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("subject_token", subject.expose()),
            ("subject_token_type", federation.subject_token_type),
        ],
    );
    let sts: OAuthToken = http
        .json("Google STS (token exchange)", federation.token_url, request)
        .await?;
    let Some(url) = federation.impersonation_url else {
        return Ok((
            Redacted::new(sts.access_token),
            now + TimeDelta::seconds(sts.expires_in),
        ));
    };
    const WHAT: &str = "the Google IAM credentials API (generateAccessToken)";
    let request = http
        .request(reqwest::Method::POST, url)
        .bearer_auth(&sts.access_token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(serde_json::json!({"scope": [PULL_SCOPE], "lifetime": "3600s"}).to_string());
    let t: ImpersonatedToken = http.json(WHAT, url, request).await?;
    let expires_at = DateTime::parse_from_rfc3339(&t.expire_time)
        .map_err(|e| CloudError::Answer {
            what: WHAT,
            url: url.to_string(),
            problem: format!("invalid expireTime '{}': {e}", t.expire_time),
        })?
        .with_timezone(&Utc);
    Ok((Redacted::new(t.access_token), expires_at))
}

/// The subject token named by `credential_source` (a file or a URL, as text or JSON).
async fn subject_token(
    http: &Http,
    source: &CredentialSource,
) -> Result<Redacted<String>, CloudError> {
    let raw = match (&source.file, &source.url) {
        (Some(file), _) => {
            read_token_file(
                "the subject token file (credential_source.file)",
                file.as_ref(),
            )
            .await?
        }
        (None, Some(url)) => {
            let mut request = http.request(reqwest::Method::GET, url);
            for (k, v) in &source.headers {
                request = request.header(k, v);
            }
            let body = http.send("the subject token URL", url, request).await?;
            Redacted::new(String::from_utf8_lossy(&body).trim().to_string())
        }
        (None, None) if source.executable.is_some() || source.environment_id.is_some() => {
            return Err(config(
                "executable and AWS credential sources are not supported: use a file or URL source"
                    .into(),
            ))
        }
        (None, None) => {
            return Err(config(
                "credential_source has neither 'file' nor 'url'".into(),
            ))
        }
    };
    match &source.format {
        Some(f) if f.kind == "json" => {
            let field = f.subject_token_field_name.as_deref().unwrap_or_default();
            let value: serde_json::Value = serde_json::from_str(raw.expose())
                .map_err(|e| config(format!("the subject token is not JSON: {e}")))?;
            value
                .get(field)
                .and_then(|v| v.as_str())
                .map(|s| Redacted::new(s.to_string()))
                .ok_or_else(|| {
                    config(format!(
                        "the subject token JSON has no string field '{field}'"
                    ))
                })
        }
        _ => Ok(raw),
    }
}
