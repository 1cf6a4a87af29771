//! ACR logins with Microsoft Entra Workload ID: the federated token the AKS webhook
//! mounts (`AZURE_FEDERATED_TOKEN_FILE`) is a client assertion for the app
//! `AZURE_CLIENT_ID` in `AZURE_TENANT_ID`, exchanged at `AZURE_AUTHORITY_HOST` for an
//! Entra token scoped to ACR (per Azure cloud); the registry's `/oauth2/exchange` turns
//! that into an ACR refresh token, whose JWT `exp` is its expiry. The registry login is
//! the all-zero user with that token, as in Flux and `az acr login --expose-token`.
//!
//! The exchange is always HTTPS with certificate verification, whatever the object's
//! `spec.insecure` says, and never falls back to plain HTTP: it carries the Entra token,
//! which a plain-HTTP listener (or anyone on the path) could otherwise replay against
//! every registry the identity can read (issue 31). An ACR is never plain HTTP.

use base64::Engine as _;
use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;

use super::http::{post_form, read_token_file, Http};
use super::{AccessToken, AzureSettings, CloudError, Expiring};
use crate::domain::cloud_hosts::AzureCloud;
use crate::domain::secret::{Credentials, Redacted};

/// The ACR user name for a refresh token.
const ACR_TOKEN_USER: &str = "00000000-0000-0000-0000-000000000000";

const NO_IDENTITY: &str = "enable Microsoft Entra Workload ID for the controller (the \
     azure.workload.identity/client-id annotation on its ServiceAccount and the \
     azure.workload.identity/use: \"true\" label on its pod), which sets AZURE_CLIENT_ID, \
     AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE";

/// `expires_in` is a number in v2.0 answers and a string in some others.
#[derive(Deserialize)]
#[serde(untagged)]
enum Seconds {
    Number(i64),
    Text(String),
}

#[derive(Deserialize)]
struct EntraToken {
    access_token: String,
    expires_in: Seconds,
}

#[derive(Deserialize)]
struct AcrExchange {
    refresh_token: String,
}

/// An Entra access token for ACR in `cloud`, at `now`.
pub(crate) async fn entra_token(
    settings: &AzureSettings,
    http: &Http,
    cloud: AzureCloud,
    now: DateTime<Utc>,
) -> Result<Expiring<AccessToken>, CloudError> {
    let (Some(client), Some(tenant), Some(file)) = (
        &settings.client_id,
        &settings.tenant_id,
        &settings.federated_token_file,
    ) else {
        return Err(CloudError::NoIdentity {
            provider: "azure",
            hint: NO_IDENTITY,
        });
    };
    let assertion = read_token_file(
        "the federated token file (AZURE_FEDERATED_TOKEN_FILE)",
        file,
    )
    .await?;
    let app = EntraApp { client, tenant };
    exchange_assertion(settings, http, cloud, &app, &assertion, now).await
}

/// An Entra application: the client ID in its tenant.
pub(crate) struct EntraApp<'a> {
    /// Client (application) ID.
    pub client: &'a str,
    /// Tenant ID.
    pub tenant: &'a str,
}

/// Exchanges a federated `assertion` (the controller's token file, or a ServiceAccount's
/// TokenRequest token) for an Entra access token of `app`, scoped to ACR in `cloud`.
pub(crate) async fn exchange_assertion(
    settings: &AzureSettings,
    http: &Http,
    cloud: AzureCloud,
    app: &EntraApp<'_>,
    assertion: &Redacted<String>,
    now: DateTime<Utc>,
) -> Result<Expiring<AccessToken>, CloudError> {
    const WHAT: &str = "Microsoft Entra ID (token)";
    let authority = settings
        .authority_host
        .clone()
        .unwrap_or_else(|| cloud.default_authority().to_string());
    let url = format!(
        "{}/{}/oauth2/v2.0/token",
        authority.trim_end_matches('/'),
        app.tenant
    );
    let request = post_form(
        http,
        &url,
        &[
            ("client_id", app.client),
            ("scope", cloud.acr_scope()),
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            ),
            ("client_assertion", assertion.expose()),
            ("grant_type", "client_credentials"),
        ],
    );
    let t: EntraToken = http.json(WHAT, &url, request).await?;
    let seconds = match t.expires_in {
        Seconds::Number(n) => n,
        Seconds::Text(s) => s.trim().parse().map_err(|_| CloudError::Answer {
            what: WHAT,
            url: url.clone(),
            problem: format!("invalid expires_in '{s}'"),
        })?,
    };
    Ok(Expiring {
        value: AccessToken::Bearer(Redacted::new(t.access_token)),
        expires_at: now + TimeDelta::seconds(seconds),
    })
}

/// The URL of the token exchange on ACR `host`: always HTTPS (see the module comment).
fn exchange_url(host: &str) -> String {
    format!("https://{host}/oauth2/exchange")
}

/// The ACR login for `host`: the Entra `token` exchanged on the registry itself, over
/// verified HTTPS only.
pub(crate) async fn acr_login(
    http: &Http,
    host: &str,
    token: &Expiring<AccessToken>,
) -> Result<Expiring<Credentials>, CloudError> {
    const WHAT: &str = "the ACR token exchange";
    let AccessToken::Bearer(entra) = &token.value else {
        return Err(CloudError::Config {
            setting: "spec.provider",
            problem: "an AWS credential cannot log in to ACR".into(),
        });
    };
    let url = exchange_url(host);
    let request = post_form(
        http,
        &url,
        &[
            ("grant_type", "access_token"),
            ("service", host),
            ("access_token", entra.expose()),
        ],
    );
    let answer: AcrExchange = http.json(WHAT, &url, request).await?;
    let expires_at = jwt_expiry(&answer.refresh_token).ok_or_else(|| CloudError::Answer {
        what: WHAT,
        url: url.clone(),
        problem: "the refresh token is not a JWT with an 'exp' claim".into(),
    })?;
    Ok(Expiring {
        value: Credentials {
            username: ACR_TOKEN_USER.to_string(),
            password: Redacted::new(answer.refresh_token),
        },
        expires_at,
    })
}

/// The `exp` claim of a JWT, read without checking the signature (the token is only
/// passed on to the registry that issued it; this only decides when to renew it).
fn jwt_expiry(jwt: &str) -> Option<DateTime<Utc>> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    DateTime::from_timestamp(claims.get("exp")?.as_i64()?, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", b64(r#"{"alg":"RS256"}"#), b64(claims))
    }

    #[test]
    fn refresh_token_expiry_is_the_exp_claim() {
        assert_eq!(
            jwt_expiry(&jwt(r#"{"exp":1735689600,"grant_type":"refresh_token"}"#)),
            DateTime::from_timestamp(1_735_689_600, 0)
        );
        assert_eq!(jwt_expiry(&jwt(r#"{"iat":1}"#)), None);
        assert_eq!(jwt_expiry("opaque-token"), None);
        assert_eq!(jwt_expiry("a.!!!.c"), None);
    }
}
