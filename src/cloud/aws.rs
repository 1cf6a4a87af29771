//! The controller's AWS credentials, found the way the AWS SDKs' default chain finds
//! them (the subset that applies to a pod): environment keys (`AWS_ACCESS_KEY_ID`), then
//! IRSA web identity (`AWS_ROLE_ARN` + `AWS_WEB_IDENTITY_TOKEN_FILE`, exchanged with STS
//! `AssumeRoleWithWebIdentity`, an unsigned form call answered in XML), then the container
//! credentials endpoint (EKS Pod Identity's `AWS_CONTAINER_CREDENTIALS_FULL_URI` with
//! `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`, or ECS's relative URI). STS is called in the
//! registry's region, as Flux does, so no `AWS_REGION` is needed.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;

use super::http::{post_form, read_token_file, Http};
use super::{AccessToken, AwsSettings, CloudError, Expiring};
use crate::domain::cloud_hosts::partition_dns_suffix;
use crate::domain::secret::Redacted;

/// Temporary (or static) AWS credentials.
#[derive(Clone, Debug)]
pub(crate) struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: Redacted<String>,
    pub session_token: Option<Redacted<String>>,
}

/// Where ECS serves container credentials for a relative URI.
const ECS_CREDENTIALS_HOST: &str = "http://169.254.170.2";
/// Hosts allowed to serve container credentials over plain HTTP (the SDKs' rule): the
/// ECS and EKS Pod Identity agents and the loopback interface.
const PLAIN_HTTP_HOSTS: [&str; 4] = [
    "169.254.170.2",
    "169.254.170.23",
    "[fd00:ec2::23]",
    "localhost",
];

const NO_IDENTITY: &str = "set up IRSA (the eks.amazonaws.com/role-arn annotation on the \
     controller's ServiceAccount, which sets AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE) or \
     EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI), or set AWS_ACCESS_KEY_ID and \
     AWS_SECRET_ACCESS_KEY";

/// The credentials of the first source of the chain that is configured.
pub(crate) async fn credentials(
    settings: &AwsSettings,
    http: &Http,
    region: &str,
    now: DateTime<Utc>,
) -> Result<Expiring<AccessToken>, CloudError> {
    let found = if let (Some(id), Some(secret)) =
        (&settings.access_key_id, &settings.secret_access_key)
    {
        Expiring {
            value: AwsCredentials {
                access_key_id: id.clone(),
                secret_access_key: secret.clone(),
                session_token: settings.session_token.clone(),
            },
            // Static keys do not expire; the cache still renews them hourly.
            expires_at: now + TimeDelta::days(365),
        }
    } else if let (Some(role), Some(file)) = (&settings.role_arn, &settings.web_identity_token_file)
    {
        let token = read_token_file(
            "the web identity token file (AWS_WEB_IDENTITY_TOKEN_FILE)",
            file,
        )
        .await?;
        let session = settings.role_session_name.as_deref().unwrap_or("ocisource");
        assume_role_with_web_identity(settings, http, region, role, session, &token).await?
    } else if settings.container_credentials_full_uri.is_some()
        || settings.container_credentials_relative_uri.is_some()
    {
        container_credentials(settings, http).await?
    } else {
        return Err(CloudError::NoIdentity {
            provider: "aws",
            hint: NO_IDENTITY,
        });
    };
    Ok(Expiring {
        value: AccessToken::Aws(found.value),
        expires_at: found.expires_at,
    })
}

/// The STS endpoint for `region`: `AWS_ENDPOINT_URL_STS`, `AWS_ENDPOINT_URL`, or the
/// regional endpoint of the region's partition.
pub(crate) fn sts_endpoint(settings: &AwsSettings, region: &str) -> String {
    settings
        .endpoint_url_sts
        .clone()
        .or_else(|| settings.endpoint_url.clone())
        .unwrap_or_else(|| {
            let fips = if settings.use_fips_endpoint {
                "-fips"
            } else {
                ""
            };
            format!(
                "https://sts{fips}.{region}.{}",
                partition_dns_suffix(region)
            )
        })
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeRoleWithWebIdentityResponse {
    assume_role_with_web_identity_result: AssumeRoleResult,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AssumeRoleResult {
    credentials: StsCredentials,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StsCredentials {
    access_key_id: String,
    secret_access_key: String,
    session_token: String,
    expiration: String,
}

/// Exchanges a web identity `token` (the controller's IRSA token file, or a
/// ServiceAccount's TokenRequest token) for temporary credentials of `role_arn`.
pub(crate) async fn assume_role_with_web_identity(
    settings: &AwsSettings,
    http: &Http,
    region: &str,
    role_arn: &str,
    session: &str,
    token: &Redacted<String>,
) -> Result<Expiring<AwsCredentials>, CloudError> {
    const WHAT: &str = "AWS STS (AssumeRoleWithWebIdentity)";
    let url = sts_endpoint(settings, region);
    let request = post_form(
        http,
        &url,
        &[
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", role_arn),
            ("RoleSessionName", session),
            ("WebIdentityToken", token.expose()),
        ],
    );
    let body = http.send(WHAT, &url, request).await?;
    let answer = |problem: String| CloudError::Answer {
        what: WHAT,
        url: url.clone(),
        problem,
    };
    let text = std::str::from_utf8(&body).map_err(|e| answer(format!("not UTF-8: {e}")))?;
    let parsed: AssumeRoleWithWebIdentityResponse =
        quick_xml::de::from_str(text).map_err(|e| answer(format!("invalid XML: {e}")))?;
    let c = parsed.assume_role_with_web_identity_result.credentials;
    Ok(Expiring {
        expires_at: parse_time(&c.expiration).map_err(answer)?,
        value: AwsCredentials {
            access_key_id: c.access_key_id,
            secret_access_key: Redacted::new(c.secret_access_key),
            session_token: Some(Redacted::new(c.session_token)),
        },
    })
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("invalid expiration '{text}': {e}"))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ContainerCredentials {
    access_key_id: String,
    secret_access_key: String,
    token: Option<String>,
    expiration: String,
}

/// The container credentials URL, refused when it is plain HTTP to anything but the
/// ECS/EKS agents or the loopback interface (a token must not travel in the clear).
fn container_url(settings: &AwsSettings) -> Result<String, CloudError> {
    if let Some(relative) = &settings.container_credentials_relative_uri {
        return Ok(format!("{ECS_CREDENTIALS_HOST}{relative}"));
    }
    let full = settings
        .container_credentials_full_uri
        .clone()
        .unwrap_or_default();
    let bad = |problem: String| CloudError::Config {
        setting: "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        problem,
    };
    let url = url::Url::parse(&full).map_err(|e| bad(format!("'{full}' is not a URL: {e}")))?;
    let host = url.host_str().unwrap_or_default();
    let loopback = host
        .trim_matches(['[', ']'])
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => Ok(full),
        "http" if loopback || PLAIN_HTTP_HOSTS.contains(&host) => Ok(full),
        _ => Err(bad(format!(
            "'{full}' must be https, or http to the EKS Pod Identity agent, the ECS agent or loopback"
        ))),
    }
}

async fn container_credentials(
    settings: &AwsSettings,
    http: &Http,
) -> Result<Expiring<AwsCredentials>, CloudError> {
    const WHAT: &str = "the AWS container credentials endpoint";
    let url = container_url(settings)?;
    let token = match (
        &settings.container_authorization_token_file,
        &settings.container_authorization_token,
    ) {
        (Some(file), _) => Some(
            read_token_file(
                "the container authorization token file (AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE)",
                file,
            )
            .await?,
        ),
        (None, token) => token.clone(),
    };
    let mut request = http.request(reqwest::Method::GET, &url);
    if let Some(t) = &token {
        request = request.header(reqwest::header::AUTHORIZATION, t.expose().as_str());
    }
    let c: ContainerCredentials = http.json(WHAT, &url, request).await?;
    Ok(Expiring {
        expires_at: parse_time(&c.expiration).map_err(|problem| CloudError::Answer {
            what: WHAT,
            url: url.clone(),
            problem,
        })?,
        value: AwsCredentials {
            access_key_id: c.access_key_id,
            secret_access_key: Redacted::new(c.secret_access_key),
            session_token: c.token.map(Redacted::new),
        },
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::commercial("us-east-1", false, "https://sts.us-east-1.amazonaws.com")]
    #[case::china("cn-north-1", false, "https://sts.cn-north-1.amazonaws.com.cn")]
    #[case::fips("us-gov-west-1", true, "https://sts-fips.us-gov-west-1.amazonaws.com")]
    fn sts_endpoints(#[case] region: &str, #[case] fips: bool, #[case] url: &str) {
        let s = AwsSettings {
            use_fips_endpoint: fips,
            ..AwsSettings::default()
        };
        assert_eq!(sts_endpoint(&s, region), url);
        let overridden = AwsSettings {
            endpoint_url: Some("http://127.0.0.1:5000".into()),
            ..s
        };
        assert_eq!(sts_endpoint(&overridden, region), "http://127.0.0.1:5000");
    }

    #[rstest]
    #[case::eks_pod_identity("http://169.254.170.23/v1/credentials", true)]
    #[case::eks_pod_identity_v6("http://[fd00:ec2::23]/v1/credentials", true)]
    #[case::loopback("http://127.0.0.1:8080/creds", true)]
    #[case::loopback_v6("http://[::1]:8080/creds", true)]
    #[case::https_anywhere("https://creds.example.com/", true)]
    #[case::plain_http_elsewhere("http://creds.example.com/", false)]
    #[case::plain_http_lookalike("http://169.254.170.23.evil.io/", false)]
    #[case::not_a_url("169.254.170.23", false)]
    fn container_urls(#[case] uri: &str, #[case] ok: bool) {
        let s = AwsSettings {
            container_credentials_full_uri: Some(uri.into()),
            ..AwsSettings::default()
        };
        assert_eq!(container_url(&s).is_ok(), ok, "{uri}");
    }

    #[test]
    fn ecs_relative_uri_goes_to_the_ecs_agent() {
        let s = AwsSettings {
            container_credentials_relative_uri: Some("/v2/credentials/abc".into()),
            ..AwsSettings::default()
        };
        assert_eq!(
            container_url(&s).unwrap(),
            "http://169.254.170.2/v2/credentials/abc"
        );
    }
}
