//! `RegistryClient`: one repository on one registry. Holds the HTTP client, the auth
//! state and the request counter, and implements the request loop every operation goes
//! through (authorisation challenges, retries with backoff, status → error kind), plus
//! shared helpers (reference checks; capped body reads are in `body.rs`). Credentials are attached in one
//! place, `send_retrying`, and only when the request's origin is the one they are bound
//! to (see `origin.rs`). Manifests live in `manifest.rs`, blob streaming in `blob.rs`,
//! tag listing in `tags.rs`, uploads in `push.rs`, the token request in `token.rs`. Must
//! not import `reconcile`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE};

use super::auth::{parse_challenge, AuthState, Authorization, Challenge};
use super::body::read_capped;
use super::diagnostic::{dial_refused, render, MAX_ERROR_BODY};
use super::failure::{err, unauthorized, Cause, TransportFailure};
use super::origin::{BoundCredential, Origin};
use super::retry::{retryable_status, RetryPolicy};
use super::transport::DEFAULT_TIMEOUT;
use crate::ports::{Audience, RegistryError, RegistryErrorKind, RegistryOptions};

/// Limits and retry settings shared by the sessions a connector opens.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    /// Retry policy for transient failures.
    pub retry: RetryPolicy,
    /// Largest manifest body accepted.
    pub max_manifest_bytes: u64,
    /// Most tags listed before giving up.
    pub max_tags: usize,
    /// Largest body of one tag-list page.
    pub max_tag_page_bytes: u64,
    /// Memory the whole tag listing may keep (tags and visited pages).
    pub max_tag_list_bytes: u64,
    /// Longest a tag listing may take, even with a longer request timeout.
    pub max_tag_list_duration: Duration,
    /// Counts every HTTP request sent, token requests included.
    pub counter: Arc<AtomicU64>,
    /// HTTP clients (connection pools, TLS configuration) shared by sessions with the same
    /// transport settings, so a reconcile reuses connections instead of opening new ones.
    pub http: super::transport::HttpCache,
    /// The scheme each registry host answered, per session settings: a session reads
    /// only what sessions with its own transport settings learnt (see `insecure.rs`).
    pub schemes: super::insecure::Schemes,
    /// Manifests kept by digest for the sessions answered by their repository (`memo.rs`).
    pub manifests: super::memo::Manifests,
}

impl Default for ClientSettings {
    fn default() -> Self {
        let limits = crate::domain::limits::Limits::default();
        Self {
            retry: RetryPolicy::default(),
            max_manifest_bytes: limits.max_manifest_bytes,
            max_tags: limits.max_tags,
            max_tag_page_bytes: limits.max_tag_page_bytes,
            max_tag_list_bytes: limits.max_tag_list_bytes,
            max_tag_list_duration: limits.max_tag_list_duration,
            counter: Arc::new(AtomicU64::new(0)),
            http: super::transport::HttpCache::default(),
            schemes: super::insecure::Schemes::default(),
            manifests: super::memo::Manifests::default(),
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
    /// `base` parsed; its origin is the only one the session's credentials go to.
    pub(crate) registry_url: reqwest::Url,
    origin: Origin,
    pub(crate) repository: String,
    pub(super) auth: Arc<AuthState>,
    pub(crate) settings: ClientSettings,
    pub(crate) small_timeout: Duration,
    fallback: super::insecure::Fallback,
    /// `http://<host>` when the plain-HTTP fallback is allowed (Flux's `insecure`, or a
    /// local/private host): the registry's own origin over plain HTTP, the only other
    /// place its credentials may go.
    plain_origin: Option<Origin>,
    /// Whose settings the hints in errors name.
    pub(crate) audience: Audience,
    /// Set once the registry answered a manifest request of this session with success:
    /// its credentials may pull from the repository, so manifests kept by digest
    /// (`memo.rs`) may be read instead of fetched again.
    pub(crate) answered: Arc<AtomicBool>,
    /// The session goes through a proxy the object named (`spec.proxySecretRef`).
    pub(crate) proxied: bool,
    /// No credentials, no client certificate and no proxy of the object's choosing: the
    /// registry itself sees an anonymous client, as it sees any other.
    pub(crate) anonymous: bool,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("base", &self.base)
            .field("repository", &self.repository)
            .finish()
    }
}

/// A repository name safe to put in a request path (no empty, `.` or `..` component, no
/// character outside the grammar's alphabet). Looser than the grammar itself
/// (`domain::reference`, which `spec.url` is held to): the registry judges the rest.
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
        let base = format!("https://{host}");
        let registry_url = reqwest::Url::parse(&base).map_err(|_| {
            err(
                RegistryErrorKind::Config,
                format!("invalid registry host '{host}'"),
            )
        })?;
        let fallback = super::insecure::Fallback::new(host, options, &settings.schemes);
        // `http://host` is the registry too when this session may speak plain HTTP to it:
        // by fallback (insecure, local or private hosts) or from the first request
        // (`--plain-http`, where it is the only origin spoken to).
        let plain_origin = (fallback.allowed() || options.plain_http)
            .then(|| reqwest::Url::parse(&format!("http://{host}")).ok())
            .flatten()
            .map(|u| Origin::of(&u));
        Ok(Self {
            fallback,
            http: settings.http.client(options)?,
            origin: Origin::of(&registry_url),
            plain_origin,
            registry_url,
            base,
            repository: repository.to_string(),
            auth: Arc::new(AuthState::new(options.credentials.clone())),
            settings,
            small_timeout: options.timeout.unwrap_or(DEFAULT_TIMEOUT),
            audience: options.audience,
            answered: Arc::new(AtomicBool::new(false)),
            proxied: options.proxy.is_some(),
            anonymous: options.credentials.is_none()
                && options.client_identity.is_none()
                && options.proxy.is_none(),
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

    /// `url` (one of the registry's own) with the scheme the host is known to speak.
    pub(crate) fn url_as_spoken(&self, url: &str) -> String {
        self.fallback.shown(url).into_owned()
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

    /// True when `url` is on the registry's origin (scheme, host, port).
    pub(crate) fn is_registry_origin(&self, url: &reqwest::Url) -> bool {
        self.origin.matches(url) || self.plain_origin.as_ref().is_some_and(|o| o.matches(url))
    }

    /// Sends a request with authorisation, retries and status mapping: 401/403 →
    /// `Unauthorized`, 404 → `NotFound`, persistent 5xx/429 → `Unavailable`, no answer →
    /// `Tls`, `Connect` or `Timeout` (see `failure.rs`). Other statuses are returned for the caller to judge. A request to
    /// another origin than the registry's (a `Link` elsewhere) carries no credentials, and
    /// its challenges, or those of a redirect target, never change the session's auth.
    pub(crate) async fn send(
        &self,
        what: &str,
        url: &str,
        access: Access,
        small: bool,
        build: Build<'_>,
    ) -> Result<reqwest::Response, RegistryError> {
        let scope = self.scope(access);
        let ours = reqwest::Url::parse(url).is_ok_and(|u| self.is_registry_origin(&u));
        let mut challenged = false;
        loop {
            let header = match self.auth.authorization(&scope) {
                _ if !ours => None,
                Authorization::None => None,
                Authorization::Header(h) => Some(h),
                Authorization::NeedToken { realm, service } => {
                    Some(self.fetch_token(&realm, service.as_deref(), &scope).await?)
                }
            };
            let credential = header.map(|h| {
                BoundCredential::new(h, self.origin.clone()).also_for(self.plain_origin.clone())
            });
            let resp = self
                .send_retrying(what, url, small, build, credential.as_ref())
                .await?;
            let status = resp.status().as_u16();
            if matches!(status, 401 | 403) && !self.is_registry_origin(resp.url()) {
                return Err(err(
                    RegistryErrorKind::Unauthorized,
                    format!(
                        "failed to {what} {url}: {} answered {status}; it is not the registry's origin ({}), and ocisource never sends the registry's credentials to another origin",
                        resp.url().origin().ascii_serialization(),
                        self.base
                    ),
                ));
            }
            let shown = self.fallback.shown(url);
            match status {
                401 => {
                    let challenge = resp
                        .headers()
                        .get(WWW_AUTHENTICATE)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_challenge);
                    let detail = match challenge {
                        Some(ch) if !challenged => {
                            challenged = true;
                            if ch == Challenge::Basic && self.auth.credentials().is_none() {
                                Some("the registry requires a login and no credentials are configured")
                            } else {
                                self.auth.drop_token(&scope);
                                self.auth.learn(&ch);
                                None
                            }
                        }
                        _ => Some("the registry answered 401 Unauthorized"),
                    };
                    if let Some(detail) = detail {
                        let text = registry_text(&shown, resp).await;
                        return Err(unauthorized(what, &shown, detail, self.audience)
                            .with_registry_text(text));
                    }
                }
                403 => {
                    let text = registry_text(&shown, resp).await;
                    return Err(unauthorized(
                        what,
                        &shown,
                        "the registry answered 403 Forbidden",
                        self.audience,
                    )
                    .with_registry_text(text));
                }
                404 => {
                    let text = registry_text(&shown, resp).await;
                    return Err(err(
                        RegistryErrorKind::NotFound,
                        format!("failed to {what} {shown}: not found (404)"),
                    )
                    .with_registry_text(text));
                }
                _ => return Ok(resp),
            }
        }
    }

    /// One request with transport retries only (no auth logic); `credential` is attached
    /// only when the request's URL is on its origin.
    pub(super) async fn send_retrying(
        &self,
        what: &str,
        url: &str,
        small: bool,
        build: Build<'_>,
        credential: Option<&BoundCredential>,
    ) -> Result<reqwest::Response, RegistryError> {
        let policy = &self.settings.retry;
        let attempts = policy.attempts.max(1);
        let mut attempt = 1;
        let make = || -> Result<reqwest::RequestBuilder, RegistryError> {
            let mut rb = build(&self.http)?;
            if small {
                rb = rb.timeout(self.small_timeout);
            }
            // The one place credentials are attached: only for their own origin.
            if let Some(c) = credential {
                let target = reqwest::Url::parse(url).map_err(|_| {
                    err(
                        RegistryErrorKind::Protocol,
                        format!("failed to {what}: invalid URL {url}"),
                    )
                })?;
                if let Some(a) = c.header_for(&target) {
                    let mut v = HeaderValue::from_str(a.expose())
                        .map_err(|_| err(RegistryErrorKind::Config, "failed to build the Authorization header: invalid characters in the credentials"))?;
                    v.set_sensitive(true);
                    rb = rb.header(AUTHORIZATION, v);
                }
            }
            Ok(rb)
        };
        loop {
            let delay = match self.fallback.send(&make, &self.settings.counter).await? {
                Err(f) => match self.transport_error(what, url, attempt, f) {
                    Some(e) => return Err(e),
                    None => policy.backoff(attempt),
                },
                Ok(resp) if retryable_status(resp.status().as_u16()) => {
                    let status = resp.status();
                    if attempt >= attempts {
                        return Err(err(
                            RegistryErrorKind::Unavailable,
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
}

impl RegistryClient {
    /// The error attempt number `attempt` of a request to `url` ends in after `f`, or
    /// `None` when another attempt may cure it. TLS failures get a hint about the CA
    /// (unless the certificate names another host); an HTTPS request answered in plain
    /// HTTP, or the reverse, a hint about the scheme.
    fn transport_error(
        &self,
        what: &str,
        url: &str,
        attempt: u32,
        f: TransportFailure,
    ) -> Option<RegistryError> {
        let shown = self.fallback.shown(url);
        let msg = &f.message;
        let message = match f.cause {
            Cause::RedirectRefused => format!("failed to {what} {url}: {msg}"),
            Cause::SpeaksTls => format!(
                "failed to {what} {shown}: {msg}; the registry speaks HTTPS: drop --plain-http"
            ),
            Cause::NotTls if !f.fallback_failed => format!(
                "failed to {what} {shown} after {attempt} attempt(s): {msg}; the registry speaks plain HTTP, not HTTPS: set {}",
                self.audience.plain_http()
            ),
            Cause::Tls => format!(
                "failed to {what} {shown} after {attempt} attempt(s): {msg}; if the registry uses a private CA, provide it ({}), or set {} to skip verification",
                self.audience.ca(),
                self.audience.insecure()
            ),
            cause if cause.retryable() && attempt < self.settings.retry.attempts.max(1) => {
                tracing::debug!(url, attempt, error = %msg, "registry request failed; retrying");
                return None;
            }
            _ => format!("failed to {what} {shown} after {attempt} attempt(s): {msg}"),
        };
        let go_text = match f.cause {
            Cause::Refused => dial_refused(self.fallback.host(), self.fallback.allowed()),
            _ => None,
        };
        Some(err(f.cause.kind(), message).with_registry_text(go_text))
    }
}

/// A failed answer's error body, when it is the distribution spec's, as
/// go-containerregistry words it after the method and the request's URL `shown` (see
/// `diagnostic.rs`; only a GET has a body to read).
async fn registry_text(shown: &str, resp: reqwest::Response) -> Option<String> {
    let body = read_capped(resp, MAX_ERROR_BODY, "read the error answer of", shown)
        .await
        .ok()?;
    render(&body).map(|d| format!("GET {shown}: {d}"))
}
