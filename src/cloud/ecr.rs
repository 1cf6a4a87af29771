//! ECR logins: `GetAuthorizationToken` of ECR (private registries, the registry's region)
//! or ECR Public (`public.ecr.aws`, always us-east-1), a SigV4-signed AWS JSON 1.1 call.
//! The answer's token decodes to `user:password` (the user is `AWS`) and carries its
//! expiry; the registry then takes it as basic credentials, as in Flux.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::aws::AwsCredentials;
use super::http::Http;
use super::sigv4;
use super::{AwsSettings, CloudError, Expiring};
use crate::domain::cloud_hosts::EcrRegistry;
use crate::domain::secret::{Credentials, Redacted};

/// The region ECR Public issues tokens in.
pub(crate) const PUBLIC_REGION: &str = "us-east-1";

/// One authorization entry of either API.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthorizationData {
    authorization_token: String,
    /// Seconds since the epoch.
    expires_at: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PrivateAnswer {
    authorization_data: Vec<AuthorizationData>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PublicAnswer {
    authorization_data: AuthorizationData,
}

/// One `GetAuthorizationToken` flavour.
struct Api<'a> {
    what: &'static str,
    url: String,
    region: &'a str,
    service: &'static str,
    target: &'static str,
}

/// The ECR API endpoint of `registry`: `AWS_ENDPOINT_URL_ECR`, `AWS_ENDPOINT_URL`, or
/// the regional (FIPS for a FIPS registry or `AWS_USE_FIPS_ENDPOINT`) endpoint.
pub(crate) fn private_endpoint(settings: &AwsSettings, registry: &EcrRegistry) -> String {
    settings
        .endpoint_url_ecr
        .clone()
        .or_else(|| settings.endpoint_url.clone())
        .unwrap_or_else(|| {
            let service = if registry.fips || settings.use_fips_endpoint {
                "ecr-fips"
            } else {
                "api.ecr"
            };
            format!(
                "https://{service}.{}.{}",
                registry.region,
                registry.api_dns_suffix()
            )
        })
}

fn public_endpoint(settings: &AwsSettings) -> String {
    settings
        .endpoint_url_ecr_public
        .clone()
        .or_else(|| settings.endpoint_url.clone())
        .unwrap_or_else(|| format!("https://api.ecr-public.{PUBLIC_REGION}.amazonaws.com"))
}

/// The registry login for a private ECR registry.
pub(crate) async fn private_login(
    settings: &AwsSettings,
    http: &Http,
    registry: &EcrRegistry,
    credentials: &AwsCredentials,
) -> Result<Expiring<Credentials>, CloudError> {
    let api = Api {
        what: "AWS ECR (GetAuthorizationToken)",
        url: private_endpoint(settings, registry),
        region: &registry.region,
        service: "ecr",
        target: "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
    };
    let body = call(http, &api, credentials).await?;
    let answer: PrivateAnswer = parse(&api, &body)?;
    let data = answer
        .authorization_data
        .into_iter()
        .next()
        .ok_or_else(|| bad(&api, "no authorizationData".into()))?;
    login(&api, data)
}

/// The registry login for `public.ecr.aws`.
pub(crate) async fn public_login(
    settings: &AwsSettings,
    http: &Http,
    credentials: &AwsCredentials,
) -> Result<Expiring<Credentials>, CloudError> {
    let api = Api {
        what: "AWS ECR Public (GetAuthorizationToken)",
        url: public_endpoint(settings),
        region: PUBLIC_REGION,
        service: "ecr-public",
        target: "SpencerFrontendService.GetAuthorizationToken",
    };
    let body = call(http, &api, credentials).await?;
    let answer: PublicAnswer = parse(&api, &body)?;
    login(&api, answer.authorization_data)
}

fn bad(api: &Api<'_>, problem: String) -> CloudError {
    CloudError::Answer {
        what: api.what,
        url: api.url.clone(),
        problem,
    }
}

fn parse<T: for<'de> Deserialize<'de>>(api: &Api<'_>, body: &[u8]) -> Result<T, CloudError> {
    serde_json::from_slice(body).map_err(|e| bad(api, format!("invalid JSON: {e}")))
}

async fn call(
    http: &Http,
    api: &Api<'_>,
    credentials: &AwsCredentials,
) -> Result<bytes::Bytes, CloudError> {
    let url = url::Url::parse(&api.url).map_err(|e| CloudError::Config {
        setting: "the AWS ECR endpoint (AWS_ENDPOINT_URL_ECR, AWS_ENDPOINT_URL)",
        problem: format!("'{}' is not a URL: {e}", api.url),
    })?;
    let host = match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        (None, _) => String::new(),
    };
    const CONTENT_TYPE: &str = "application/x-amz-json-1.1";
    let body = b"{}";
    let signed = sigv4::sign(
        &sigv4::Request {
            method: "POST",
            host: &host,
            path: url.path(),
            headers: &[("content-type", CONTENT_TYPE), ("x-amz-target", api.target)],
            body,
        },
        &sigv4::Signer {
            access_key_id: &credentials.access_key_id,
            secret_access_key: credentials.secret_access_key.expose(),
            session_token: credentials
                .session_token
                .as_ref()
                .map(|t| t.expose().as_str()),
            region: api.region,
            service: api.service,
            time: Utc::now(),
        },
    );
    let mut request = http
        .request(reqwest::Method::POST, url.as_str())
        .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
        .header("x-amz-target", api.target)
        .body(body.to_vec());
    for (name, value) in signed {
        request = request.header(name, value);
    }
    http.send(api.what, &api.url, request).await
}

fn login(api: &Api<'_>, data: AuthorizationData) -> Result<Expiring<Credentials>, CloudError> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(data.authorization_token.trim())
        .map_err(|e| bad(api, format!("the authorization token is not base64: {e}")))?;
    let text = String::from_utf8(decoded)
        .map_err(|_| bad(api, "the authorization token is not UTF-8".into()))?;
    let (user, password) = text
        .split_once(':')
        .filter(|(u, p)| !u.is_empty() && !p.is_empty())
        .ok_or_else(|| bad(api, "the authorization token is not 'user:password'".into()))?;
    let expires_at = DateTime::from_timestamp_millis((data.expires_at * 1000.0) as i64)
        .ok_or_else(|| bad(api, format!("invalid expiresAt {}", data.expires_at)))?;
    Ok(Expiring {
        value: Credentials {
            username: user.to_string(),
            password: Redacted::new(password.to_string()),
        },
        expires_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::cloud_hosts::{registry, CloudProvider, CloudRegistry};

    fn ecr(host: &str) -> EcrRegistry {
        match registry(CloudProvider::Aws, host).unwrap() {
            CloudRegistry::Ecr(e) => e,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn api_endpoints_follow_region_partition_and_fips() {
        let s = AwsSettings::default();
        let cases = [
            (
                "012345678901.dkr.ecr.eu-west-1.amazonaws.com",
                "https://api.ecr.eu-west-1.amazonaws.com",
            ),
            (
                "012345678901.dkr.ecr.cn-north-1.amazonaws.com.cn",
                "https://api.ecr.cn-north-1.amazonaws.com.cn",
            ),
            (
                "012345678901.dkr.ecr-fips.us-east-1.amazonaws.com",
                "https://ecr-fips.us-east-1.amazonaws.com",
            ),
            (
                "012345678901.dkr-ecr.us-west-2.on.aws",
                "https://api.ecr.us-west-2.amazonaws.com",
            ),
        ];
        for (host, url) in cases {
            assert_eq!(private_endpoint(&s, &ecr(host)), url, "{host}");
        }
        assert_eq!(
            public_endpoint(&s),
            "https://api.ecr-public.us-east-1.amazonaws.com"
        );
    }

    fn api() -> Api<'static> {
        Api {
            what: "ECR",
            url: "https://api.ecr.us-east-1.amazonaws.com".into(),
            region: "us-east-1",
            service: "ecr",
            target: "t",
        }
    }

    #[test]
    fn tokens_decode_to_user_and_password() {
        let data = AuthorizationData {
            authorization_token: "QVdTOnNlY3JldDpwYXJ0".into(), // AWS:secret:part
            expires_at: 1_420_070_400.5,
        };
        let got = login(&api(), data).unwrap();
        assert_eq!(got.value.username, "AWS");
        assert_eq!(got.value.password.expose(), "secret:part");
        assert_eq!(got.expires_at.timestamp_millis(), 1_420_070_400_500);
    }

    #[test]
    fn malformed_tokens_are_refused_without_echoing_them() {
        for token in ["bm9jb2xvbg==", "!!!", "OnBhc3N3b3Jk"] {
            let err = login(
                &api(),
                AuthorizationData {
                    authorization_token: token.into(),
                    expires_at: 0.0,
                },
            )
            .unwrap_err()
            .to_string();
            assert!(!err.contains(token), "{err}");
        }
    }
}
