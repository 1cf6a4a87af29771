//! The one HTTP client of the cloud logins and its request helper: short timeouts, no
//! redirects (a token request is never forwarded elsewhere, as the Azure SDK does), the
//! settings' resolver overrides, answers read whole but capped, error statuses turned
//! into [`CloudError::Refused`] with the start of the body (the providers' error bodies
//! name the problem, never a credential).

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use serde::de::DeserializeOwned;

use super::{CloudError, CloudSettings};

/// Longest wait for one token request.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for a connection (metadata endpoints answer at once or not at all).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read from a token endpoint.
const MAX_BODY: usize = 1 << 20;
/// Characters of an error body kept in the message.
const ERROR_EXCERPT: usize = 300;

/// The cloud logins' HTTP client.
#[derive(Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
}

impl Http {
    pub(crate) fn new(settings: &CloudSettings) -> Result<Self, CloudError> {
        let mut b = reqwest::Client::builder()
            .user_agent(format!("ocisource/{}", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        for (host, addr) in &settings.resolve {
            b = b.resolve(host, *addr);
        }
        if let Some(pem) = &settings.extra_ca_pem {
            let certs =
                reqwest::Certificate::from_pem_bundle(pem).map_err(|e| CloudError::Config {
                    setting: "the cloud login's extra CA certificates",
                    problem: crate::domain::error_chain::chain(&e),
                })?;
            b = b.tls_certs_merge(certs);
        }
        let client = b.build().map_err(|e| CloudError::Config {
            setting: "the cloud login HTTP client",
            problem: crate::domain::error_chain::chain(&e),
        })?;
        Ok(Self { client })
    }

    /// A request builder on the shared client.
    pub(crate) fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        self.client.request(method, url)
    }

    /// Sends `request` to `what` at `url` and returns the body of a 2xx answer.
    pub(crate) async fn send(
        &self,
        what: &'static str,
        url: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Bytes, CloudError> {
        let unreachable = |source| CloudError::Unreachable {
            what,
            url: url.to_string(),
            source,
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(unreachable)?;
            if body.len() + chunk.len() > MAX_BODY {
                return Err(CloudError::Answer {
                    what,
                    url: url.to_string(),
                    problem: format!("the answer is larger than {MAX_BODY} bytes"),
                });
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            return Err(CloudError::Refused {
                what,
                url: url.to_string(),
                status: status.as_u16(),
                body: text.trim().chars().take(ERROR_EXCERPT).collect(),
            });
        }
        Ok(Bytes::from(body))
    }

    /// [`Http::send`], then the body as JSON.
    pub(crate) async fn json<T: DeserializeOwned>(
        &self,
        what: &'static str,
        url: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<T, CloudError> {
        let body = self.send(what, url, request).await?;
        serde_json::from_slice(&body).map_err(|e| CloudError::Answer {
            what,
            url: url.to_string(),
            problem: format!("invalid JSON: {e}"),
        })
    }
}

/// `k=v&...` with form encoding, for `application/x-www-form-urlencoded` bodies.
pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// A POST of `pairs` as a form to `url`.
pub(crate) fn post_form(http: &Http, url: &str, pairs: &[(&str, &str)]) -> reqwest::RequestBuilder {
    http.request(reqwest::Method::POST, url)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form(pairs))
}

/// Reads a token file, trimmed; `what` names it in the error.
pub(crate) async fn read_token_file(
    what: &'static str,
    path: &std::path::Path,
) -> Result<crate::domain::secret::Redacted<String>, CloudError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|source| CloudError::ReadFile {
            what,
            path: path.display().to_string(),
            source,
        })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(CloudError::Config {
            setting: what,
            problem: format!("'{}' is empty", path.display()),
        });
    }
    Ok(crate::domain::secret::Redacted::new(token.to_string()))
}
