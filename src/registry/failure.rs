//! Transport failures of one registry request, classified where they happen: the
//! `reqwest::Error`'s source chain is walked and its links are downcast to the types that
//! say what went wrong (`rustls::Error` for TLS, [`NameNotResolved`] for DNS,
//! `std::io::Error` kinds, reqwest's own timeout and redirect flags). The request loop
//! (`client.rs`) decides retries, hints and the [`RegistryErrorKind`] from the
//! [`Cause`], never from the text. Also the constructors of the errors every operation
//! reports (unexpected status, refused credentials). No HTTP request is sent here.

use std::error::Error as StdError;

use super::dns::NameNotResolved;
use crate::domain::error_chain::chain;
use crate::ports::{Audience, RegistryError, RegistryErrorKind};

/// A registry error of `kind`.
pub(crate) fn err(kind: RegistryErrorKind, message: impl Into<String>) -> RegistryError {
    RegistryError::new(kind, message)
}

pub(crate) fn unexpected(what: &str, url: &str, status: reqwest::StatusCode) -> RegistryError {
    err(
        RegistryErrorKind::Protocol,
        format!("failed to {what} {url}: unexpected status {status}"),
    )
}

pub(crate) fn unauthorized(
    what: &str,
    url: &str,
    detail: &str,
    audience: Audience,
) -> RegistryError {
    err(
        RegistryErrorKind::Unauthorized,
        format!(
            "failed to {what} {url}: {detail}; check the credentials ({})",
            audience.credentials()
        ),
    )
}

/// Why a request got no HTTP answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The server's certificate does not name the host.
    CertificateName,
    /// Any other TLS failure: a certificate refused (unknown issuer, expired), a
    /// handshake alert (a client certificate missing for mTLS), no common protocol.
    Tls,
    /// An HTTPS request was answered with bytes that are not TLS (a plain-HTTP server).
    NotTls,
    /// A `--plain-http` request was answered as a TLS-only server answers plain HTTP.
    SpeaksTls,
    /// The host name does not exist.
    NoSuchHost,
    /// The host refused the connection (nothing listens on the port).
    Refused,
    /// The connection could not be made or broke (reset, a DNS failure that may heal).
    Connect,
    /// No answer in time.
    Timeout,
    /// The redirect policy refused a redirect.
    RedirectRefused,
}

impl Cause {
    /// The cause of `e`, from its type and its source chain.
    pub(crate) fn of(e: &reqwest::Error) -> Self {
        if e.is_redirect() {
            return Self::RedirectRefused;
        }
        // Only while sending: a body read's `InvalidData` is a decoding error.
        let sending = e.is_connect() || e.is_request();
        let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
        while let Some(link) = cur {
            if let Some(cause) = Self::of_link(link, sending) {
                return cause;
            }
            cur = link.source();
        }
        if e.is_timeout() {
            Self::Timeout
        } else {
            Self::Connect
        }
    }

    /// The cause one link of a chain names, if it names one. An `io::Error` wrapping
    /// another error hides it from `source()` (it returns the inner error's source), so
    /// the wrapped error is looked at through `get_ref`.
    ///
    /// rustls reports every failure of an established connection as an `InvalidData`
    /// `io::Error`; over HTTP/2 the `h2` crate keeps only the kind and the text of an
    /// I/O error (`h2::proto::Error::Io`), so a TLS alert received after the handshake
    /// (a client certificate refused by an mTLS registry) arrives untyped. While sending
    /// a request nothing else yields `InvalidData`: such a link is a TLS failure.
    fn of_link(link: &(dyn StdError + 'static), sending: bool) -> Option<Self> {
        if let Some(tls) = link.downcast_ref::<rustls::Error>() {
            return Some(Self::of_tls(tls));
        }
        if let Some(dns) = link.downcast_ref::<NameNotResolved>() {
            return Some(if dns.permanent {
                Self::NoSuchHost
            } else {
                Self::Connect
            });
        }
        if let Some(io) = link.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(cause) = Self::of_link(inner, sending) {
                    return Some(cause);
                }
            }
            match io.kind() {
                std::io::ErrorKind::TimedOut => return Some(Self::Timeout),
                std::io::ErrorKind::ConnectionRefused if sending => return Some(Self::Refused),
                std::io::ErrorKind::InvalidData if sending => return Some(Self::Tls),
                _ => {}
            }
        }
        None
    }

    fn of_tls(e: &rustls::Error) -> Self {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match e {
            rustls::Error::InvalidCertificate(NotValidForName | NotValidForNameContext { .. }) => {
                Self::CertificateName
            }
            // Not a TLS record at all: the peer speaks something else (plain HTTP).
            rustls::Error::InvalidMessage(_) => Self::NotTls,
            _ => Self::Tls,
        }
    }

    /// False for failures no retry can cure: TLS, a name that does not exist, a redirect
    /// refused. Refused connections, resets, timeouts and DNS failures that may heal are
    /// retried.
    pub(crate) fn retryable(self) -> bool {
        matches!(self, Self::Refused | Self::Connect | Self::Timeout)
    }

    /// The kind of registry error this cause ends in.
    pub(crate) fn kind(self) -> RegistryErrorKind {
        match self {
            Self::CertificateName | Self::Tls | Self::NotTls | Self::SpeaksTls => {
                RegistryErrorKind::Tls
            }
            Self::NoSuchHost | Self::Refused | Self::Connect => RegistryErrorKind::Connect,
            Self::Timeout => RegistryErrorKind::Timeout,
            Self::RedirectRefused => RegistryErrorKind::Protocol,
        }
    }
}

/// A request that got no HTTP answer: its cause and the message (the error chain,
/// and what the plain-HTTP fallback did, if it was tried).
#[derive(Clone, Debug)]
pub(crate) struct TransportFailure {
    /// What went wrong (of the first attempt, when a fallback followed).
    pub(crate) cause: Cause,
    /// The error chain as text, for the message.
    pub(crate) message: String,
    /// True when the plain-HTTP fallback was tried after HTTPS failed, and failed too.
    pub(crate) fallback_failed: bool,
}

impl TransportFailure {
    /// The failure of `e`, classified; its message leaves out the URL (the caller names
    /// the URL as it was asked for).
    pub(crate) fn of(e: reqwest::Error) -> Self {
        Self {
            cause: Cause::of(&e),
            message: chain(&e.without_url()),
            fallback_failed: false,
        }
    }

    /// A failure of `cause` with `message`.
    pub(crate) fn new(cause: Cause, message: String) -> Self {
        Self {
            cause,
            message,
            fallback_failed: false,
        }
    }

    /// This failure, after a plain-HTTP fallback that failed with `outcome`.
    pub(crate) fn with_failed_fallback(mut self, outcome: &str) -> Self {
        self.message = format!(
            "{} (plain HTTP fallback failed too: {outcome})",
            self.message
        );
        self.fallback_failed = true;
        self
    }
}

#[cfg(test)]
#[path = "failure_tests.rs"]
mod tests;
