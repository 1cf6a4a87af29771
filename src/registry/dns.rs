//! Host name resolution for the registry client: the system resolver (`getaddrinfo`, as
//! reqwest's default), whose failures come back as a typed [`NameNotResolved`] saying
//! whether the name does not exist (no retry can help) or the lookup failed for now, so
//! `failure.rs` classifies them by type instead of by the text of a library's message.
//! Resolver overrides (`HttpCache::with_resolve`) are applied by reqwest on top of this.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The resolver every registry session uses.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SystemResolver;

/// A failed lookup of `host`. Prints the resolver's own message, as reqwest's default
/// resolver does, so error texts do not change.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct NameNotResolved {
    /// The host looked up.
    pub(crate) host: String,
    /// True when the name does not exist, false when the lookup may succeed later.
    pub(crate) permanent: bool,
    message: String,
}

/// `getaddrinfo` answers that mean the name does not exist (glibc, musl and BSD
/// wordings of `EAI_NONAME`/`EAI_NODATA`). std reports `getaddrinfo` failures as an
/// `io::Error` carrying only `gai_strerror`'s text, not the `EAI_*` code, so the text is
/// the only signal; it is read here, once, where the failure is created.
const NO_SUCH_NAME: [&str; 3] = [
    "name or service not known",
    "no address associated with hostname",
    "nodename nor servname provided",
];

impl NameNotResolved {
    /// The failure of looking up `host` with `source`.
    pub(crate) fn new(host: String, source: &std::io::Error) -> Self {
        let message = source.to_string();
        let lower = message.to_ascii_lowercase();
        Self {
            permanent: NO_SUCH_NAME.iter().any(|p| lower.contains(p)),
            host,
            message,
        }
    }
}

impl Resolve for SystemResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: std::io::Result<Vec<SocketAddr>> =
                tokio::net::lookup_host((host.as_str(), 0))
                    .await
                    .map(Iterator::collect);
            match found {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as Addrs),
                Err(e) => Err(Box::new(NameNotResolved::new(host, &e)) as _),
            }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_that_do_not_exist_are_permanent_and_others_are_not() {
        for m in [
            "failed to lookup address information: Name or service not known",
            "failed to lookup address information: No address associated with hostname",
            "failed to lookup address information: nodename nor servname provided, or not known",
        ] {
            let e = NameNotResolved::new("h".into(), &std::io::Error::other(m));
            assert!(e.permanent, "{m}");
            assert_eq!(e.to_string(), m);
        }
        let again = std::io::Error::other(
            "failed to lookup address information: Temporary failure in name resolution",
        );
        assert!(!NameNotResolved::new("h".into(), &again).permanent);
    }

    #[tokio::test]
    async fn resolves_numeric_hosts() {
        let name: Name = "127.0.0.1".parse().unwrap();
        let addrs: Vec<SocketAddr> = SystemResolver.resolve(name).await.unwrap().collect();
        assert_eq!(addrs, vec!["127.0.0.1:0".parse().unwrap()]);
    }
}
