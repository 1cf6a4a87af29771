//! Where credentials may go. An origin is (scheme, host, port) as browsers and reqwest
//! define it; registry credentials (Basic, bearer tokens) are sent only to the origin they
//! were given for. This module holds the rules the client applies to every URL a
//! registry's answer points at: `Link` pages, redirects, token realms, upload locations.
//!
//! - A target on another origin is followed without credentials (the client decides;
//!   reqwest drops `Authorization` itself on a redirect to another origin).
//! - An `https` answer never leads to plain `http` (no downgrade), and nothing leads to a
//!   scheme other than `http`/`https`.
//! - A bearer token realm receives the Basic credentials, as the Docker token flow
//!   requires, only when it is on the registry's own domain, as go-containerregistry's
//!   `validateRealmURL` checks: `https` (or `http` for a plain-http registry), the same
//!   last two DNS labels, and for an IP address the registry's own address. Unlike
//!   go-containerregistry we accept a loopback or private realm address when it is the
//!   registry's own address (the registry is already reached there); link-local
//!   addresses (cloud metadata services) are refused always.
//!
//! Pure URL logic: no HTTP here.

use std::net::IpAddr;

use reqwest::Url;

use crate::domain::secret::Redacted;

/// A URL a registry's answer points at that must not be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// A scheme other than `http` or `https`.
    #[error("'{target}' uses the scheme '{scheme}'; only http and https are followed")]
    Scheme {
        /// The target URL.
        target: String,
        /// Its scheme.
        scheme: String,
    },
    /// `https` leading to plain `http`.
    #[error("'{from}' points at plain-http '{target}'; ocisource never downgrades https to http")]
    Downgrade {
        /// The https URL that pointed there.
        from: String,
        /// The http target.
        target: String,
    },
    /// A token realm outside the registry's domain.
    #[error("the token realm '{realm}' is not on the domain of the registry '{registry}'; ocisource sends the registry's credentials only to a token service on the registry's own domain")]
    RealmDomain {
        /// The realm URL.
        realm: String,
        /// The registry host.
        registry: String,
    },
    /// A token realm at a link-local address (for example a cloud metadata service).
    #[error("the token realm '{realm}' is a link-local address; ocisource never sends credentials there")]
    RealmLinkLocal {
        /// The realm URL.
        realm: String,
    },
    /// More redirects than allowed.
    #[error("more than {max} redirects")]
    TooManyRedirects {
        /// The limit.
        max: usize,
    },
}

/// Scheme, host and port (the scheme's default when absent) of a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    /// The origin of `url`.
    pub fn of(url: &Url) -> Self {
        Self {
            scheme: url.scheme().to_ascii_lowercase(),
            host: url.host_str().unwrap_or_default().to_ascii_lowercase(),
            port: url.port_or_known_default(),
        }
    }

    /// True when `url` is on this origin.
    pub fn matches(&self, url: &Url) -> bool {
        *self == Self::of(url)
    }

    /// True for `https`.
    pub fn is_https(&self) -> bool {
        self.scheme == "https"
    }

    /// The host (name or address) without the port.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// An `Authorization` header value bound to the one origin it may be sent to: the only
/// way to read it is [`BoundCredential::header_for`] with the request's URL.
#[derive(Debug, Clone)]
pub struct BoundCredential {
    header: Redacted<String>,
    origin: Origin,
    /// The registry's own origin over plain HTTP, when Flux's fallback allows it.
    twin: Option<Origin>,
}

impl BoundCredential {
    /// Binds `header` to `origin`.
    pub fn new(header: Redacted<String>, origin: Origin) -> Self {
        Self {
            header,
            origin,
            twin: None,
        }
    }

    /// Also binds it to `twin` (the same registry over plain HTTP, where the fallback of
    /// Flux's `insecure` or a local/private host allows it).
    pub fn also_for(mut self, twin: Option<Origin>) -> Self {
        self.twin = twin;
        self
    }

    /// The header value when `url` is on a bound origin, else `None`.
    pub fn header_for(&self, url: &Url) -> Option<&Redacted<String>> {
        let bound = self.origin.matches(url) || self.twin.as_ref().is_some_and(|t| t.matches(url));
        bound.then_some(&self.header)
    }
}

/// Refuses a target that `from` (a URL the client fetched) must not lead to: another
/// scheme than http(s), or http after https.
pub fn check_target(from: &Url, target: &Url) -> Result<(), OriginError> {
    let scheme = target.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(OriginError::Scheme {
            target: target.to_string(),
            scheme: scheme.to_string(),
        });
    }
    if from.scheme() == "https" && scheme == "http" {
        return Err(OriginError::Downgrade {
            from: from.to_string(),
            target: target.to_string(),
        });
    }
    Ok(())
}

/// Refuses a token realm the registry's credentials must not be sent to.
pub fn check_realm(registry: &Url, realm: &Url) -> Result<(), OriginError> {
    check_target(registry, realm)?;
    let realm_host = Origin::of(realm).host;
    if let Ok(ip) = realm_host.trim_matches(['[', ']']).parse::<IpAddr>() {
        let link_local = match ip {
            IpAddr::V4(v4) => v4.is_link_local(),
            IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
        };
        if link_local {
            return Err(OriginError::RealmLinkLocal {
                realm: realm.to_string(),
            });
        }
    }
    let registry = Origin::of(registry);
    if effective_domain(&realm_host) != effective_domain(registry.host()) {
        return Err(OriginError::RealmDomain {
            realm: realm.to_string(),
            registry: registry.host,
        });
    }
    Ok(())
}

/// The last two DNS labels of a host name, or the whole address for an IP: the trust
/// domain go-containerregistry compares realms with.
fn effective_domain(host: &str) -> String {
    let host = host
        .trim_matches(['[', ']'])
        .trim_end_matches('.')
        .to_ascii_lowercase();
    if host.parse::<IpAddr>().is_ok() {
        return host;
    }
    let labels: Vec<&str> = host.split('.').collect();
    match labels.len() {
        0..=2 => host,
        n => format!("{}.{}", labels[n - 2], labels[n - 1]),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn origins_compare_scheme_host_and_port() {
        let o = Origin::of(&u("https://Reg.Example/v2/a"));
        assert!(o.matches(&u("https://reg.example:443/v2/b?x=1")));
        assert!(!o.matches(&u("http://reg.example/v2/a")));
        assert!(!o.matches(&u("https://reg.example:444/v2/a")));
        assert!(!o.matches(&u("https://other.example/v2/a")));
        let local = Origin::of(&u("http://127.0.0.1:5000/"));
        assert!(!local.matches(&u("http://127.0.0.1:5001/")));
    }

    #[test]
    fn a_bound_credential_is_only_given_out_for_its_origin() {
        let c = BoundCredential::new(
            Redacted::new("Basic x".into()),
            Origin::of(&u("https://reg.example")),
        );
        assert!(c
            .header_for(&u("https://reg.example/v2/a/tags/list"))
            .is_some());
        assert!(c.header_for(&u("https://cdn.example/blob")).is_none());
        assert!(c.header_for(&u("http://reg.example/v2/")).is_none());
    }

    #[test]
    fn targets_never_downgrade_or_leave_http() {
        let https = u("https://reg.example/v2/");
        assert!(check_target(&https, &u("https://cdn.example/blob")).is_ok());
        assert!(matches!(
            check_target(&https, &u("http://reg.example/v2/")),
            Err(OriginError::Downgrade { .. })
        ));
        assert!(matches!(
            check_target(&https, &u("file:///etc/passwd")),
            Err(OriginError::Scheme { .. })
        ));
        let http = u("http://127.0.0.1:5000/v2/");
        assert!(check_target(&http, &u("http://127.0.0.1:6000/")).is_ok());
        assert!(check_target(&http, &u("https://127.0.0.1:6000/")).is_ok());
    }

    #[test]
    fn realms_must_be_on_the_registry_domain() {
        let hub = u("https://registry-1.docker.io/v2/");
        assert!(check_realm(&hub, &u("https://auth.docker.io/token")).is_ok());
        let gitlab = u("https://registry.gitlab.com/v2/");
        assert!(check_realm(&gitlab, &u("https://gitlab.com/jwt/auth")).is_ok());
        assert!(matches!(
            check_realm(&hub, &u("https://evil.example/token")),
            Err(OriginError::RealmDomain { .. })
        ));
        assert!(matches!(
            check_realm(&hub, &u("http://auth.docker.io/token")),
            Err(OriginError::Downgrade { .. })
        ));
        let local = u("http://127.0.0.1:5000/v2/");
        assert!(check_realm(&local, &u("http://127.0.0.1:5001/token")).is_ok());
        assert!(matches!(
            check_realm(&local, &u("http://10.0.0.1/token")),
            Err(OriginError::RealmDomain { .. })
        ));
        assert!(matches!(
            check_realm(
                &u("http://169.254.169.254/"),
                &u("http://169.254.169.254/t")
            ),
            Err(OriginError::RealmLinkLocal { .. })
        ));
        assert!(matches!(
            check_realm(&u("http://[fe80::1]:5000/"), &u("http://[fe80::1]/t")),
            Err(OriginError::RealmLinkLocal { .. })
        ));
    }
}
