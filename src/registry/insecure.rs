//! Flux's `insecure` and go-containerregistry's plain-HTTP fallback, kept apart from the
//! request loop in `client.rs`.
//!
//! - `insecure: true` without a CA or client certificate (no `certSecretRef`) means HTTPS
//!   WITHOUT certificate verification, the one exception Flux makes
//!   ([`skips_verification`]); a warning is logged once per registry host.
//! - Every session starts with HTTPS. When `insecure` is set, or the host is one that
//!   go-containerregistry's `name.Registry.Scheme()` treats as plain HTTP
//!   ([`local_or_private`]: `localhost:<port>`, `*.localhost`, `127.0.0.1`, `::1`, RFC 1918
//!   addresses), a request whose HTTPS attempt fails is sent once more over plain HTTP;
//!   if that is answered (anything but `400`, which a TLS-only server answers to plain
//!   HTTP), the host is remembered as plain HTTP for the connector's later sessions WITH
//!   THE SAME SETTINGS (below).
//!
//! What a probe learns is keyed by the host and a sha256 of the session's settings that
//! decide what its answer means ([`SettingsKey`]: `insecure`, `plain_http`, the CA, the
//! client identity, the proxy address and login; secrets only hashed). One connector
//! serves every tenant of a controller, and a probe's answer says as much about the path
//! as about the registry: an object with `insecure: true` whose own proxy refuses `CONNECT`
//! and answers plain HTTP itself would otherwise teach every other tenant (no `insecure`,
//! its own CA) to send its requests to `http://` and store whatever answers there; a
//! proxy that intercepts TLS would teach "HTTPS answers" and take the fallback away from
//! a tenant whose local registry speaks plain HTTP. Keyed so, a session only reads what
//! sessions with its own settings learnt (the probe it would have made itself), and the
//! shared-build proof (`Registry::prove_pull`), made over the proving session's own
//! scheme, never runs over a scheme another tenant's settings chose. Flux has no such
//! memory (a transport per reconcile); the cost of keying is one more probe per distinct
//! settings.
//!
//! - `plain_http` (`--plain-http`, as in oras): every request goes over plain HTTP from
//!   the first one, for any host, and never falls back to HTTPS. A TLS-only server
//!   answers such a request with a bare `HTTP/1.0 400` (Go's net/http): that is reported
//!   as [`Cause::SpeaksTls`] so the error can say to drop the flag.
//!
//! Unlike go-containerregistry this adds no `GET /v2/` ping: the first real request is the
//! probe, so a no-op reconcile still costs one request. Must not import `reconcile`.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};

use super::failure::{Cause, TransportFailure};
use super::trust_key::{field, hash_trust};
use crate::domain::error_chain::chain;
use crate::ports::{Audience, RegistryError, RegistryOptions};

/// True when `options` ask for HTTPS without certificate verification: `insecure` with
/// neither a CA nor a client certificate, as Flux's `getTLSConfig` decides.
pub fn skips_verification(options: &RegistryOptions) -> bool {
    options.insecure && options.ca_pem.is_none() && options.client_identity.is_none()
}

/// True for the hosts go-containerregistry lets fall back to plain HTTP without
/// `insecure`: `localhost:<port>`, `<name>.localhost[:port]`, `127.0.0.1[:port]`, `::1`,
/// `[::1][:port]`, and the RFC 1918 ranges 10/8, 172.16/12, 192.168/16 (any port).
pub fn local_or_private(host: &str) -> bool {
    let port_ok = |rest: &str| {
        rest.is_empty()
            || rest.strip_prefix(':').is_some_and(|p| {
                (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit())
            })
    };
    let rfc1918 = host
        .split(':')
        .next()
        .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
        .is_some_and(|ip| ip.is_private());
    let dot_localhost = host
        .rfind(".localhost")
        .is_some_and(|i| port_ok(&host[i + ".localhost".len()..]));
    rfc1918
        || host.starts_with("localhost:")
        || dot_localhost
        || host.strip_prefix("127.0.0.1").is_some_and(port_ok)
        || host == "::1"
        || host.strip_prefix("[::1]").is_some_and(port_ok)
}

/// What the connector learnt about a host's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Learnt {
    /// HTTPS answered: no fallback for this host any more.
    Https,
    /// Only plain HTTP answers: requests go there directly.
    Http,
}

/// A sha256 over the settings that decide what a scheme probe's answer means (see the
/// module comment); two sessions share what they learn only when theirs are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SettingsKey([u8; 32]);

impl SettingsKey {
    /// The key of `options`.
    pub(crate) fn of(options: &RegistryOptions) -> Self {
        let mut h = Sha256::new();
        field(&mut h, b"scheme-probe", &[u8::from(options.plain_http)]);
        hash_trust(&mut h, options);
        Self(h.finalize().into())
    }
}

#[derive(Debug, Default)]
struct Memory {
    hosts: HashMap<(String, SettingsKey), Learnt>,
    warned_unverified: Vec<String>,
}

/// The schemes learnt per registry host and session settings ([`SettingsKey`]), kept by
/// the connector for all its sessions.
#[derive(Clone, Debug, Default)]
pub struct Schemes {
    memory: Arc<Mutex<Memory>>,
}

/// Most hosts (per settings) remembered; past this the memory starts over.
const MAX_HOSTS: usize = 1024;

impl Schemes {
    fn learnt(&self, host: &str, key: SettingsKey) -> Option<Learnt> {
        let m = self.memory.lock().ok()?;
        m.hosts.get(&(host.to_string(), key)).copied()
    }

    fn learn(&self, host: &str, key: SettingsKey, scheme: Option<Learnt>) {
        if let Ok(mut m) = self.memory.lock() {
            if m.hosts.len() >= MAX_HOSTS {
                m.hosts.clear();
            }
            let entry = (host.to_string(), key);
            match scheme {
                Some(s) => m.hosts.insert(entry, s),
                None => m.hosts.remove(&entry),
            };
        }
    }

    /// Logs, once per host, that certificates of `host` are not verified, naming the
    /// reader's settings (`--insecure without --ca-file`, or the spec's fields).
    pub fn warn_unverified(&self, host: &str, audience: Audience) {
        let first = self.memory.lock().is_ok_and(|mut m| {
            let new = !m.warned_unverified.iter().any(|h| h == host);
            if new && m.warned_unverified.len() < MAX_HOSTS {
                m.warned_unverified.push(host.to_string());
            }
            new
        });
        if first {
            tracing::warn!(
                registry = host,
                "{} without {}: TLS certificate verification is skipped for this registry; anyone on the path can impersonate it",
                audience.insecure(),
                audience.ca()
            );
        }
    }
}

/// How a refused redirect starts its message.
const REDIRECT_REFUSED: &str = "refused to follow a redirect";

/// The message of a plain-HTTP request answered by a TLS-only server.
const SPEAKS_TLS: &str =
    "the registry answered plain HTTP with a bare 400, as a TLS-only server does";

/// The failure of `e`, with a refused redirect saying so first.
fn failure(e: reqwest::Error) -> TransportFailure {
    let f = TransportFailure::of(e);
    match f.cause {
        Cause::RedirectRefused => {
            let message = format!("{REDIRECT_REFUSED}: {}", f.message);
            TransportFailure { message, ..f }
        }
        _ => f,
    }
}

/// The fallback policy of one session.
#[derive(Clone, Debug)]
pub(crate) struct Fallback {
    host: String,
    /// `--plain-http`: plain HTTP from the first request, never HTTPS.
    plain_only: bool,
    /// `https://<host>/`: only URLs of the registry itself change scheme.
    https_prefix: String,
    allowed: bool,
    schemes: Schemes,
    /// Whose lessons this session reads and writes.
    key: SettingsKey,
}

impl Fallback {
    /// The policy for `host` under `options`.
    pub(crate) fn new(host: &str, options: &RegistryOptions, schemes: &Schemes) -> Self {
        if skips_verification(options) && !options.plain_http {
            schemes.warn_unverified(host, options.audience);
        }
        Self {
            host: host.to_string(),
            plain_only: options.plain_http,
            https_prefix: format!("https://{host}/"),
            allowed: options.insecure || local_or_private(host),
            schemes: schemes.clone(),
            key: SettingsKey::of(options),
        }
    }

    /// The registry's `host[:port]`.
    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    /// Whether plain HTTP may follow HTTPS for this host.
    pub(crate) fn allowed(&self) -> bool {
        self.allowed
    }

    /// `url` as it is actually requested: with `http://` once the host is known to speak
    /// only plain HTTP, so that messages name the URL that failed.
    pub(crate) fn shown<'a>(&self, url: &'a str) -> std::borrow::Cow<'a, str> {
        match url.strip_prefix("https://") {
            Some(rest)
                if url.starts_with(&self.https_prefix)
                    && (self.plain_only || self.learnt() == Some(Learnt::Http)) =>
            {
                std::borrow::Cow::Owned(format!("http://{rest}"))
            }
            _ => std::borrow::Cow::Borrowed(url),
        }
    }

    /// What sessions with this one's settings learnt about the host.
    fn learnt(&self) -> Option<Learnt> {
        self.schemes.learnt(&self.host, self.key)
    }

    /// Teaches sessions with this one's settings (only them) the host's scheme.
    fn learn(&self, scheme: Option<Learnt>) {
        self.schemes.learn(&self.host, self.key, scheme);
    }

    fn build(
        &self,
        make: &(dyn Fn() -> Result<reqwest::RequestBuilder, RegistryError> + Sync),
        plain: bool,
    ) -> Result<
        (
            reqwest::Client,
            Result<reqwest::Request, reqwest::Error>,
            bool,
        ),
        RegistryError,
    > {
        let (client, request) = make()?.build_split();
        let request = request.map(|mut r| {
            if plain && r.url().as_str().starts_with(&self.https_prefix) {
                // https → http is always a valid scheme change for a special URL.
                let _ = r.url_mut().set_scheme("http");
            }
            r
        });
        let ours = match &request {
            Ok(r) => {
                let url = r.url().as_str();
                url.starts_with(&self.https_prefix)
                    || url.starts_with(&format!("http://{}/", self.host))
            }
            Err(_) => false,
        };
        Ok((client, request, ours))
    }

    /// Sends the request `make` builds, over plain HTTP when the host is known to speak
    /// only that, falling back to it once when allowed. `Err` of the outer result: the
    /// request could not be built; `Err` of the inner one: the transport failed, with the
    /// error chain (and the fallback's outcome). Every attempt counts in `counter`.
    pub(crate) async fn send(
        &self,
        make: &(dyn Fn() -> Result<reqwest::RequestBuilder, RegistryError> + Sync),
        counter: &AtomicU64,
    ) -> Result<Result<reqwest::Response, TransportFailure>, RegistryError> {
        if self.plain_only {
            return self.send_plain(make, counter).await;
        }
        let learnt = self.learnt();
        let plain = learnt == Some(Learnt::Http);
        let (client, request, ours) = self.build(make, plain)?;
        let request = match request {
            Ok(r) => r,
            Err(e) => return Ok(Err(failure(e))),
        };
        let https = request.url().scheme() == "https";
        counter.fetch_add(1, Ordering::Relaxed);
        let https_error = match client.execute(request).await {
            Ok(resp) => {
                if ours && https && learnt.is_none() {
                    self.learn(Some(Learnt::Https));
                }
                return Ok(Ok(resp));
            }
            Err(e) if e.is_redirect() => return Ok(Err(failure(e))),
            Err(e) if ours && plain => {
                // It spoke plain HTTP before; start over with HTTPS next time.
                self.learn(None);
                return Ok(Err(failure(e)));
            }
            Err(e) if ours && https && self.allowed && learnt.is_none() => failure(e),
            Err(e) => return Ok(Err(failure(e))),
        };
        let (client, request, _) = self.build(make, true)?;
        let outcome = match request {
            Ok(r) => {
                counter.fetch_add(1, Ordering::Relaxed);
                client.execute(r).await
            }
            Err(e) => Err(e),
        };
        Ok(match outcome {
            Ok(resp) if resp.status() != reqwest::StatusCode::BAD_REQUEST => {
                tracing::warn!(
                    registry = %self.host,
                    error = %https_error.message,
                    "the registry does not answer HTTPS; using plain HTTP (allowed by insecure or a local/private host)"
                );
                self.learn(Some(Learnt::Http));
                Ok(resp)
            }
            Ok(resp) => Err(https_error
                .with_failed_fallback(&format!("the registry answered {}", resp.status()))),
            Err(e) => Err(https_error.with_failed_fallback(&chain(&e.without_url()))),
        })
    }
}

impl Fallback {
    /// `--plain-http`: one plain-HTTP attempt; a bare `HTTP/1.0 400` (a TLS-only server)
    /// becomes a [`SPEAKS_TLS`] error.
    async fn send_plain(
        &self,
        make: &(dyn Fn() -> Result<reqwest::RequestBuilder, RegistryError> + Sync),
        counter: &AtomicU64,
    ) -> Result<Result<reqwest::Response, TransportFailure>, RegistryError> {
        let (client, request, ours) = self.build(make, true)?;
        let request = match request {
            Ok(r) => r,
            Err(e) => return Ok(Err(failure(e))),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(match client.execute(request).await {
            Ok(resp)
                if ours
                    && resp.status() == reqwest::StatusCode::BAD_REQUEST
                    && resp.version() == reqwest::Version::HTTP_10
                    && resp.headers().get(reqwest::header::CONTENT_TYPE).is_none() =>
            {
                Err(TransportFailure::new(
                    Cause::SpeaksTls,
                    SPEAKS_TLS.to_string(),
                ))
            }
            Ok(resp) => Ok(resp),
            Err(e) => Err(failure(e)),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("localhost:5000", true)]
    #[case("localhost", false)]
    #[case("registry.localhost", true)]
    #[case("registry.localhost:5000", true)]
    #[case("127.0.0.1", true)]
    #[case("127.0.0.1:5000", true)]
    #[case("127.0.0.2:5000", false)]
    #[case("::1", true)]
    #[case("[::1]:5000", true)]
    #[case("10.1.2.3:5000", true)]
    #[case("172.16.0.1", true)]
    #[case("172.31.255.255:443", true)]
    #[case("172.32.0.1", false)]
    #[case("192.168.1.10:5000", true)]
    #[case("192.169.1.10", false)]
    #[case("registry.local", false)]
    #[case("ghcr.io", false)]
    #[case("8.8.8.8:5000", false)]
    fn fallback_hosts_are_go_containerregistrys(#[case] host: &str, #[case] local: bool) {
        assert_eq!(local_or_private(host), local, "{host}");
    }

    #[test]
    fn verification_is_skipped_only_for_insecure_without_cert_secret() {
        let insecure = RegistryOptions {
            insecure: true,
            ..RegistryOptions::default()
        };
        assert!(skips_verification(&insecure));
        assert!(!skips_verification(&RegistryOptions::default()));
        let with_ca = RegistryOptions {
            ca_pem: Some(b"pem".to_vec()),
            ..insecure
        };
        assert!(!skips_verification(&with_ca), "a CA keeps verification on");
    }

    fn proxied(address: &str, password: &str) -> RegistryOptions {
        RegistryOptions {
            insecure: true,
            proxy: Some(crate::ports::ProxySettings {
                address: address.into(),
                credentials: Some(crate::domain::secret::Credentials {
                    username: "tenant".into(),
                    password: crate::domain::secret::Redacted::new(password.into()),
                }),
            }),
            ..RegistryOptions::default()
        }
    }

    #[test]
    fn what_one_settings_learnt_is_read_only_by_sessions_with_the_same_settings() {
        let schemes = Schemes::default();
        let host = "127.0.0.1:5000";
        let url = format!("https://{host}/v2/app/manifests/v1");
        let tenant_a = proxied("http://proxy.a:3128", "hunter2");
        let a = Fallback::new(host, &tenant_a, &schemes);
        a.learn(Some(Learnt::Http));
        assert!(a.shown(&url).starts_with("http://"));
        let same = Fallback::new(host, &tenant_a.clone(), &schemes);
        assert_eq!(
            same.learnt(),
            Some(Learnt::Http),
            "same settings, same lesson"
        );

        let tenant_b = RegistryOptions {
            ca_pem: Some(b"tenant b's CA".to_vec()),
            ..RegistryOptions::default()
        };
        let b = Fallback::new(host, &tenant_b, &schemes);
        assert_eq!(b.learnt(), None);
        assert_eq!(b.shown(&url), url, "B must not be sent to plain HTTP");
        b.learn(Some(Learnt::Https));
        assert_eq!(a.learnt(), Some(Learnt::Http), "nor B's lesson A's");
        let dbg = format!("{schemes:?}");
        assert!(
            !dbg.contains("hunter2") && !dbg.contains("proxy.a"),
            "{dbg}"
        );
    }

    #[test]
    fn every_setting_that_decides_a_probe_changes_the_key() {
        let base = proxied("http://proxy.a:3128", "pw");
        let key = SettingsKey::of(&base);
        let login = RegistryOptions {
            credentials: Some(crate::domain::secret::Credentials {
                username: "u".into(),
                password: crate::domain::secret::Redacted::new("p".into()),
            }),
            timeout: Some(std::time::Duration::from_secs(3)),
            ..base.clone()
        };
        assert_eq!(SettingsKey::of(&login), key, "logins go per request");
        let identity = crate::ports::ClientIdentity {
            cert_pem: b"cert".to_vec(),
            key_pem: crate::domain::secret::Redacted::new(b"key".to_vec()),
        };
        let others = [
            RegistryOptions {
                insecure: false,
                ..base.clone()
            },
            RegistryOptions {
                plain_http: true,
                ..base.clone()
            },
            RegistryOptions {
                ca_pem: Some(b"ca".to_vec()),
                ..base.clone()
            },
            RegistryOptions {
                client_identity: Some(identity),
                ..base.clone()
            },
            RegistryOptions {
                proxy: None,
                ..base.clone()
            },
            proxied("http://proxy.b:3128", "pw"),
            proxied("http://proxy.a:3128", "other"),
        ];
        for (i, other) in others.iter().enumerate() {
            assert_ne!(SettingsKey::of(other), key, "setting {i}");
        }
    }

    #[test]
    fn fallback_is_allowed_for_insecure_or_local_hosts_only() {
        let schemes = Schemes::default();
        let public = RegistryOptions::default();
        assert!(!Fallback::new("ghcr.io", &public, &schemes).allowed);
        assert!(Fallback::new("127.0.0.1:5000", &public, &schemes).allowed);
        let insecure = RegistryOptions {
            insecure: true,
            ..RegistryOptions::default()
        };
        assert!(Fallback::new("ghcr.io", &insecure, &schemes).allowed);
    }
}
