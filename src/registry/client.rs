//! `RegistryClient`: one repository on one registry. Holds the HTTP client, the auth
//! state and the request counter, and implements the request loop every operation goes
//! through (authorisation challenges, retries with backoff, status → error kind), plus
//! shared helpers (capped body reads, reference checks). Manifests live in `manifest.rs`,
//! blob streaming in `blob.rs`,
//! tag listing in `tags.rs`, uploads in `push.rs`. Must not import `reconcile`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reqwest::header::{HeaderValue, AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE};

use super::auth::{parse_challenge, AuthState, Authorization, Challenge, TokenResponse};
use super::retry::{retryable_status, RetryPolicy};
use super::transport::{chain, DEFAULT_TIMEOUT};
use crate::domain::digest::Digest;
use crate::domain::secret::Redacted;
use crate::ports::{RegistryError, RegistryErrorKind, RegistryOptions};

/// Limits and retry settings shared by the sessions a connector opens.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    /// Retry policy for transient failures.
    pub retry: RetryPolicy,
    /// Largest manifest body accepted.
    pub max_manifest_bytes: u64,
    /// Most tags listed before giving up.
    pub max_tags: usize,
    /// Counts every HTTP request sent, token requests included.
    pub counter: Arc<AtomicU64>,
    /// HTTP clients (connection pools, TLS configuration) shared by sessions with the same
    /// transport settings, so a reconcile reuses connections instead of opening new ones.
    pub http: super::transport::HttpCache,
    /// Registry hosts found to speak plain HTTP only (see `insecure.rs`).
    pub schemes: super::insecure::Schemes,
}

impl Default for ClientSettings {
    fn default() -> Self {
        let limits = crate::domain::limits::Limits::default();
        Self {
            retry: RetryPolicy::default(),
            max_manifest_bytes: limits.max_manifest_bytes,
            max_tags: limits.max_tags,
            counter: Arc::new(AtomicU64::new(0)),
            http: super::transport::HttpCache::default(),
            schemes: super::insecure::Schemes::default(),
        }
    }
}

/// Whether a request reads or writes the repository (decides the token scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Pull,
    Push,
}

/// Builds one attempt of a request; called again for every retry.
pub(crate) type Build<'a> =
    &'a (dyn Fn(&reqwest::Client) -> Result<reqwest::RequestBuilder, RegistryError> + Sync);

/// A session for one repository on one registry. Clones share the HTTP connection pool,
/// the auth state (tokens) and the request counter.
#[derive(Clone)]
pub struct RegistryClient {
    pub(crate) http: reqwest::Client,
    base: String,
    pub(crate) repository: String,
    auth: Arc<AuthState>,
    pub(crate) settings: ClientSettings,
    small_timeout: Duration,
    fallback: super::insecure::Fallback,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("base", &self.base)
            .field("repository", &self.repository)
            .finish()
    }
}

pub(crate) fn err(kind: RegistryErrorKind, message: impl Into<String>) -> RegistryError {
    RegistryError::new(kind, message)
}

fn valid_repository(repo: &str) -> bool {
    !repo.is_empty()
        && repo.split('/').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
                && part != "."
                && part != ".."
        })
}

/// True for a tag (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`) or a `sha256:` digest.
pub(crate) fn valid_reference(reference: &str) -> bool {
    if reference.parse::<Digest>().is_ok() {
        return true;
    }
    let b = reference.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

impl RegistryClient {
    /// A session for `host` (host[:port]) and `repository`, with `options` applied.
    pub fn new(
        host: &str,
        repository: &str,
        options: &RegistryOptions,
        settings: ClientSettings,
    ) -> Result<Self, RegistryError> {
        if host.is_empty() || host.contains(['/', '@', ' ', '?', '#']) {
            return Err(err(
                RegistryErrorKind::Config,
                format!("invalid registry host '{host}'"),
            ));
        }
        if !valid_repository(repository) {
            return Err(err(
                RegistryErrorKind::Config,
                format!("invalid repository name '{repository}'"),
            ));
        }
        // Always HTTPS first; `insecure.rs` decides when plain HTTP may follow.
        Ok(Self {
            fallback: super::insecure::Fallback::new(host, options, &settings.schemes),
            http: settings.http.client(options)?,
            base: format!("https://{host}"),
            repository: repository.to_string(),
            auth: Arc::new(AuthState::new(options.credentials.clone())),
            settings,
            small_timeout: options.timeout.unwrap_or(DEFAULT_TIMEOUT),
        })
    }

    /// HTTP requests this session's connector has sent so far (token requests included).
    pub fn request_count(&self) -> u64 {
        self.settings.counter.load(Ordering::Relaxed)
    }

    /// `scheme://host`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `scheme://host/v2/<repo>/<path>`, with the scheme the host is known to speak.
    pub(crate) fn url(&self, path: &str) -> String {
        let url = format!("{}/v2/{}/{path}", self.base, self.repository);
        self.fallback.shown(&url).into_owned()
    }

    fn scope(&self, access: Access) -> String {
        match access {
            Access::Pull => format!("repository:{}:pull", self.repository),
            Access::Push => format!("repository:{}:pull,push", self.repository),
        }
    }

    /// Sends a request with authorisation, retries and status mapping: 401/403 →
    /// `Unauthorized`, 404 → `NotFound`, persistent 5xx/429/connection errors →
    /// `Transport`. Other statuses are returned for the caller to judge.
    pub(crate) async fn send(
        &self,
        what: &str,
        url: &str,
        access: Access,
        small: bool,
        build: Build<'_>,
    ) -> Result<reqwest::Response, RegistryError> {
        let scope = self.scope(access);
        let mut challenged = false;
        loop {
            let header = match self.auth.authorization(&scope) {
                Authorization::None => None,
                Authorization::Header(h) => Some(h),
                Authorization::NeedToken { realm, service } => {
                    Some(self.fetch_token(&realm, service.as_deref(), &scope).await?)
                }
            };
            let resp = self
                .send_retrying(what, url, small, build, header.as_ref())
                .await?;
            let shown = self.fallback.shown(url);
            match resp.status().as_u16() {
                401 => {
                    let challenge = resp
                        .headers()
                        .get(WWW_AUTHENTICATE)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_challenge);
                    match challenge {
                        Some(ch) if !challenged => {
                            challenged = true;
                            if ch == Challenge::Basic && self.auth.credentials().is_none() {
                                return Err(unauthorized(what, &shown, "the registry requires a login and no credentials are configured"));
                            }
                            self.auth.drop_token(&scope);
                            self.auth.learn(&ch);
                        }
                        _ => {
                            return Err(unauthorized(
                                what,
                                &shown,
                                "the registry answered 401 Unauthorized",
                            ))
                        }
                    }
                }
                403 => {
                    return Err(unauthorized(
                        what,
                        &shown,
                        "the registry answered 403 Forbidden",
                    ))
                }
                404 => {
                    return Err(err(
                        RegistryErrorKind::NotFound,
                        format!("failed to {what} {shown}: not found (404)"),
                    ))
                }
                _ => return Ok(resp),
            }
        }
    }

    /// One request with transport retries only (no auth logic).
    async fn send_retrying(
        &self,
        what: &str,
        url: &str,
        small: bool,
        build: Build<'_>,
        authorization: Option<&Redacted<String>>,
    ) -> Result<reqwest::Response, RegistryError> {
        let policy = &self.settings.retry;
        let attempts = policy.attempts.max(1);
        let mut attempt = 1;
        let make = || -> Result<reqwest::RequestBuilder, RegistryError> {
            let mut rb = build(&self.http)?;
            if small {
                rb = rb.timeout(self.small_timeout);
            }
            if let Some(a) = authorization {
                let mut v = HeaderValue::from_str(a.expose())
                    .map_err(|_| err(RegistryErrorKind::Config, "failed to build the Authorization header: invalid characters in the credentials"))?;
                v.set_sensitive(true);
                rb = rb.header(AUTHORIZATION, v);
            }
            Ok(rb)
        };
        loop {
            let delay = match self.fallback.send(&make, &self.settings.counter).await? {
                Err(msg) => {
                    let tls = is_tls_failure(&msg);
                    if tls || attempt >= attempts {
                        let hint = if tls {
                            "; if the registry uses a private CA, provide it (certSecretRef ca.crt), or set insecure: true (--insecure) to skip verification"
                        } else {
                            ""
                        };
                        return Err(err(
                            RegistryErrorKind::Transport,
                            format!(
                                "failed to {what} {} after {attempt} attempt(s): {msg}{hint}",
                                self.fallback.shown(url)
                            ),
                        ));
                    }
                    tracing::debug!(url, attempt, error = %msg, "registry request failed; retrying");
                    policy.backoff(attempt)
                }
                Ok(resp) if retryable_status(resp.status().as_u16()) => {
                    let status = resp.status();
                    if attempt >= attempts {
                        return Err(err(
                            RegistryErrorKind::Transport,
                            format!("failed to {what} {}: the registry answered {status} after {attempt} attempts", self.fallback.shown(url)),
                        ));
                    }
                    let retry_after = resp
                        .headers()
                        .get(RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    tracing::debug!(url, attempt, %status, "registry answered a transient status; retrying");
                    policy.delay(attempt, retry_after.as_deref())
                }
                Ok(resp) => return Ok(resp),
            };
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// Fetches and caches a bearer token for `scope`; returns the header value.
    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: &str,
    ) -> Result<Redacted<String>, RegistryError> {
        let mut url = reqwest::Url::parse(realm).map_err(|_| {
            err(
                RegistryErrorKind::Protocol,
                format!(
                    "failed to get a token: invalid realm '{realm}' in the registry's challenge"
                ),
            )
        })?;
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = service {
                q.append_pair("service", s);
            }
            q.append_pair("scope", scope);
        }
        let url_s = url.to_string();
        let basic = self.auth.basic_header();
        let build = |c: &reqwest::Client| Ok(c.get(url.clone()));
        let what = format!("get a token for {scope} from");
        let resp = self
            .send_retrying(&what, &url_s, true, &build, basic.as_ref())
            .await?;
        let status = resp.status();
        if status == 401 || status == 403 {
            return Err(unauthorized(
                &what,
                realm,
                &format!("the token service answered {status}"),
            ));
        }
        if !status.is_success() {
            return Err(err(
                RegistryErrorKind::Protocol,
                format!("failed to {what} {realm}: unexpected status {status}"),
            ));
        }
        let body = read_capped(resp, 1 << 20, &what, realm).await?;
        let (token, life) = serde_json::from_slice::<TokenResponse>(&body)
            .ok()
            .and_then(TokenResponse::into_token)
            .ok_or_else(|| {
                err(
                    RegistryErrorKind::Protocol,
                    format!("failed to {what} {realm}: no token in the answer"),
                )
            })?;
        let header = Redacted::new(format!("Bearer {}", token.expose()));
        self.auth.store_token(scope, token, life);
        Ok(header)
    }
}

pub(crate) fn unexpected(what: &str, url: &str, status: reqwest::StatusCode) -> RegistryError {
    err(
        RegistryErrorKind::Protocol,
        format!("failed to {what} {url}: unexpected status {status}"),
    )
}

fn unauthorized(what: &str, url: &str, detail: &str) -> RegistryError {
    err(
        RegistryErrorKind::Unauthorized,
        format!("failed to {what} {url}: {detail}; check the credentials (spec.secretRef or spec.serviceAccountName; --creds or the docker config for the CLI)"),
    )
}

fn is_tls_failure(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("certificate") || m.contains("unknownissuer") || m.contains("handshake")
}

/// Reads a whole body, failing with `Integrity` once it exceeds `max` bytes.
pub(crate) async fn read_capped(
    mut resp: reqwest::Response,
    max: u64,
    what: &str,
    url: &str,
) -> Result<Bytes, RegistryError> {
    let too_big = || {
        err(
            RegistryErrorKind::Integrity,
            format!("failed to {what} {url}: body exceeds the limit of {max} bytes"),
        )
    };
    if resp.content_length().is_some_and(|n| n > max) {
        return Err(too_big());
    }
    let mut buf = BytesMut::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        err(
            RegistryErrorKind::Transport,
            format!("failed to {what} {url}: {}", chain(&e)),
        )
    })? {
        if (buf.len() + chunk.len()) as u64 > max {
            return Err(too_big());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}
