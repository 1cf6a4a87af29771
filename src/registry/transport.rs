//! Builds the `reqwest` client for one session from `RegistryOptions`: extra CA roots,
//! client identity (mTLS), proxy, connect and read timeouts, resolver overrides, and
//! the redirect policy.
//! TLS verification is on unless Flux's `insecure` asks otherwise
//! (`insecure::skips_verification`: `insecure` without CA or client certificate). No
//! registry protocol here.
//!
//! Redirects (blob GETs often redirect to storage on another host) are followed up to
//! [`MAX_REDIRECTS`] hops, never from https to http. reqwest itself removes the
//! `Authorization` header (and cookies) when a hop changes scheme, host or port
//! (`reqwest::redirect::remove_sensitive_headers`), so credentials stay on their origin;
//! `tests/registry_origins.rs` checks that on what the other origin receives.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use super::origin::{check_target, OriginError};
use super::trust_key::{field, hash_trust};
use crate::domain::error_chain::chain;
use crate::ports::{RegistryError, RegistryErrorKind, RegistryOptions};

/// Default per-request timeout for small requests, and the read (idle) timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for a TCP/TLS connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Most redirect hops followed for one request.
pub const MAX_REDIRECTS: usize = 10;

/// Follows a redirect unless it is one hop too many, leaves http(s), or goes from https
/// to http.
fn redirect_policy(attempt: reqwest::redirect::Attempt<'_>) -> reqwest::redirect::Action {
    if attempt.previous().len() > MAX_REDIRECTS {
        return attempt.error(OriginError::TooManyRedirects { max: MAX_REDIRECTS });
    }
    let refused = attempt
        .previous()
        .last()
        .and_then(|from| check_target(from, attempt.url()).err());
    match refused {
        Some(e) => attempt.error(e),
        None => attempt.follow(),
    }
}

fn config_err(message: impl Into<String>) -> RegistryError {
    RegistryError::new(RegistryErrorKind::Config, message)
}

/// A `reqwest::Client` for `options`. The client has a connect timeout and a read
/// timeout (no bytes for that long), but no total timeout, so long blob downloads
/// survive while bytes flow; small requests set their own total timeout.
pub fn build_http(options: &RegistryOptions) -> Result<reqwest::Client, RegistryError> {
    build_http_resolving(options, &[])
}

/// [`build_http`], with host names answered by the given addresses instead of DNS (the
/// port of an address is used when the URL names none).
pub fn build_http_resolving(
    options: &RegistryOptions,
    resolve: &[(String, SocketAddr)],
) -> Result<reqwest::Client, RegistryError> {
    let timeout = options.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let mut ua = format!("ocisource/{}", env!("CARGO_PKG_VERSION"));
    if let Some(extra) = &options.user_agent {
        ua.push(' ');
        ua.push_str(extra);
    }
    let mut b = reqwest::Client::builder()
        .user_agent(ua)
        .connect_timeout(CONNECT_TIMEOUT.min(timeout))
        .read_timeout(timeout)
        .redirect(reqwest::redirect::Policy::custom(redirect_policy))
        .referer(false)
        .dns_resolver(Arc::new(super::dns::SystemResolver));
    for (host, addr) in resolve {
        b = b.resolve(host, *addr);
    }
    if let Some(ca) = &options.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(ca)
            .map_err(|e| config_err(format!("failed to parse the CA certificate (PEM): {e}")))?;
        if certs.is_empty() {
            return Err(config_err(
                "failed to parse the CA certificate: no PEM certificate found",
            ));
        }
        b = b.tls_certs_merge(certs);
    }
    if super::insecure::skips_verification(options) {
        b = b.danger_accept_invalid_certs(true);
    }
    if let Some(id) = &options.client_identity {
        let mut pem = id.cert_pem.clone();
        pem.push(b'\n');
        pem.extend_from_slice(id.key_pem.expose());
        let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
            config_err(format!(
                "failed to load the client certificate and key (PEM): {}",
                chain(&e)
            ))
        })?;
        b = b.identity(identity);
    }
    // Without an explicit proxy, the `HTTPS_PROXY`/`NO_PROXY` environment applies, as in
    // Go's default transport that Flux uses.
    if let Some(p) = &options.proxy {
        let mut proxy = reqwest::Proxy::all(&p.address)
            .map_err(|_| config_err("failed to configure the proxy: invalid proxy address"))?;
        if let Some(c) = &p.credentials {
            proxy = proxy.basic_auth(&c.username, c.password.expose());
        }
        b = b.proxy(proxy);
    }
    b.build()
        .map_err(|e| config_err(format!("failed to build the HTTP client: {}", chain(&e))))
}

/// `reqwest` clients by transport settings. Building one loads the platform's trust
/// roots and TLS configuration, which costs milliseconds; a controller reconciling many
/// objects on the same registry shares one client and its open connections. Keyed by a
/// sha256 of the settings (credentials are sent per request, so they are not part of it;
/// client keys and proxy logins are, hashed, never stored in the clear).
#[derive(Clone, Debug, Default)]
pub struct HttpCache {
    clients: Arc<Mutex<HashMap<[u8; 32], reqwest::Client>>>,
    resolve: Arc<Vec<(String, SocketAddr)>>,
}

/// Most distinct transport settings kept; past this the cache starts over.
const HTTP_CACHE_MAX: usize = 256;

impl HttpCache {
    /// A cache whose clients answer `host` with `addr` instead of DNS (tests reach local
    /// servers under real registry names this way).
    pub fn with_resolve(mut self, host: &str, addr: SocketAddr) -> Self {
        Arc::make_mut(&mut self.resolve).push((host.to_string(), addr));
        self.clients = Arc::default();
        self
    }

    /// The client for `options`, built on first use.
    pub fn client(&self, options: &RegistryOptions) -> Result<reqwest::Client, RegistryError> {
        let key = fingerprint(options);
        if let Some(c) = self.clients.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(c);
        }
        let client = build_http_resolving(options, &self.resolve)?;
        if let Ok(mut m) = self.clients.lock() {
            if m.len() >= HTTP_CACHE_MAX {
                m.clear();
            }
            m.insert(key, client.clone());
        }
        Ok(client)
    }

    /// Distinct clients built so far.
    pub fn len(&self) -> usize {
        self.clients.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when no client was built yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn fingerprint(o: &RegistryOptions) -> [u8; 32] {
    let mut h = Sha256::new();
    hash_trust(&mut h, o);
    field(
        &mut h,
        b"timeout",
        &o.timeout.map(|t| t.as_millis()).unwrap_or(0).to_le_bytes(),
    );
    field(
        &mut h,
        b"ua",
        o.user_agent.as_deref().unwrap_or_default().as_bytes(),
    );
    h.finalize().into()
}

#[cfg(test)]
mod cache_tests {
    use super::*;
    use crate::domain::secret::{Credentials, Redacted};

    #[test]
    fn sessions_with_the_same_transport_share_one_client() {
        let cache = HttpCache::default();
        let plain = RegistryOptions {
            insecure: true,
            ..RegistryOptions::default()
        };
        let with_login = RegistryOptions {
            credentials: Some(Credentials {
                username: "u".into(),
                password: Redacted::new("p".into()),
            }),
            ..plain.clone()
        };
        cache.client(&plain).unwrap();
        cache.client(&with_login).unwrap();
        assert_eq!(
            cache.len(),
            1,
            "credentials are per request, not per client"
        );
        let slower = RegistryOptions {
            timeout: Some(Duration::from_secs(5)),
            ..plain.clone()
        };
        cache.client(&slower).unwrap();
        assert_eq!(cache.len(), 2);
        let bad_ca = RegistryOptions {
            ca_pem: Some(b"not pem".to_vec()),
            ..plain
        };
        assert!(cache.client(&bad_ca).is_err());
        assert_eq!(cache.len(), 2, "a failed build is not cached");
    }
}
