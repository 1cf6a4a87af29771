//! The registry port: one repository on one registry ([`Registry`]), how sessions are
//! opened ([`RegistryConnector`]), their transport settings, what the referrers API
//! answered ([`Referrers`]), and the failure kinds the reconciler maps to condition
//! reasons. The `registry` adapter implements it over HTTP; tests substitute their own.
//! Names no adapter; imports only `domain`.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream;

use crate::domain::digest::Digest;
use crate::domain::manifest::Descriptor;
use crate::domain::secret::{Credentials, Redacted};

/// A stream of blob bytes whose digest is checked as they flow: the stream ends with an
/// error instead of its last chunk when the digest or size does not match.
pub type BlobStream = Pin<Box<dyn Stream<Item = Result<Bytes, RegistryError>> + Send>>;

/// A manifest body as fetched, its digest already checked.
#[derive(Clone, Debug)]
pub struct FetchedManifest {
    /// Digest of the body.
    pub digest: Digest,
    /// `Content-Type` the registry sent.
    pub media_type: String,
    /// The exact bytes.
    pub body: Bytes,
}

/// Transport settings for one repository, built per reconcile from the spec and its
/// Secrets, or from CLI flags.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// `spec.insecure`: HTTPS without certificate verification when neither `ca_pem` nor
    /// `client_identity` is set, and a plain-HTTP fallback when HTTPS fails (Flux).
    pub insecure: bool,
    /// Plain HTTP from the first request, for any host (`--plain-http`, as in oras): no
    /// HTTPS attempt, no fallback.
    pub plain_http: bool,
    /// Login for the registry host, if any.
    pub credentials: Option<Credentials>,
    /// Extra CA certificates (PEM) trusted for this registry.
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub client_identity: Option<ClientIdentity>,
    /// Proxy to reach the registry through.
    pub proxy: Option<ProxySettings>,
    /// Per-request timeout; `None` means the adapter's default.
    pub timeout: Option<Duration>,
    /// User-Agent suffix or other identification; informational.
    pub user_agent: Option<String>,
    /// Who reads this session's errors, so that hints name a setting they can change.
    pub audience: Audience,
}

/// Who configured a registry session: the hints in its errors name that reader's
/// settings (`spec.certSecretRef ca.crt` for an OCIRepository, `--ca-file` on the CLI).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Audience {
    /// An OCIRepository (the controller, `ocisource reconcile -f`).
    #[default]
    Spec,
    /// Command-line flags (`ocisource pull`, `push`, `verify`).
    Cli,
}

impl Audience {
    /// Where a private CA is given.
    pub fn ca(self) -> &'static str {
        match self {
            Self::Spec => "spec.certSecretRef ca.crt",
            Self::Cli => "--ca-file",
        }
    }

    /// Where credentials come from.
    pub fn credentials(self) -> &'static str {
        match self {
            Self::Spec => "spec.secretRef or spec.serviceAccountName",
            Self::Cli => "--creds, OCISOURCE_CREDS or the docker config (docker login)",
        }
    }

    /// How certificate verification is skipped.
    pub fn insecure(self) -> &'static str {
        match self {
            Self::Spec => "spec.insecure: true",
            Self::Cli => "--insecure",
        }
    }

    /// What lets a session speak plain HTTP to a registry that is not local or private.
    pub fn plain_http(self) -> &'static str {
        match self {
            Self::Spec => "spec.insecure: true",
            Self::Cli => "--plain-http (or --insecure, which tries HTTPS first)",
        }
    }

    /// Where the request timeout is set.
    pub fn timeout(self) -> &'static str {
        match self {
            Self::Spec => "spec.timeout",
            Self::Cli => "--timeout",
        }
    }
}

/// A client certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct ClientIdentity {
    /// Certificate chain (PEM).
    pub cert_pem: Vec<u8>,
    /// Private key (PEM).
    pub key_pem: Redacted<Vec<u8>>,
}

/// An HTTP(S) proxy (`spec.proxySecretRef`).
#[derive(Clone, Debug)]
pub struct ProxySettings {
    /// Proxy URL, e.g. `http://proxy:3128`.
    pub address: String,
    /// Optional proxy login.
    pub credentials: Option<Credentials>,
}

/// What kind of failure a registry call ended in; decides the condition reason and
/// whether retrying can help.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistryErrorKind {
    /// 401/403, or the token service refused the login.
    Unauthorized,
    /// 404: repository, tag, manifest or blob unknown.
    NotFound,
    /// TLS failed: a certificate refused (unknown issuer, wrong name, expired), a
    /// handshake refused (no client certificate for mTLS), or one side not speaking TLS.
    Tls,
    /// No connection: the host name does not exist, the connection was refused or broke
    /// (after retries).
    Connect,
    /// No answer in time (after retries), or a bounded operation ran out of time.
    Timeout,
    /// The registry kept answering 5xx or 429 after the retries.
    Unavailable,
    /// Bytes did not match their digest or size; or a body exceeded its cap.
    Integrity,
    /// The registry answered something that does not follow the distribution spec.
    Protocol,
    /// The client could not be built from the given settings (bad CA PEM, bad proxy URL).
    Config,
}

/// A failed registry operation, with the URL and what happened. Never carries credentials.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct RegistryError {
    /// Classification.
    pub kind: RegistryErrorKind,
    /// Lower-case, actionable description including the URL or reference.
    pub message: String,
    /// The failure as go-containerregistry words it, where that is known: for an answer
    /// with the distribution spec's error body, the method, URL and that body
    /// (`GET <url>: MANIFEST_UNKNOWN: manifest unknown; map[Tag:v1]`); for a refused
    /// connection, Go's dial errors of its ping. It is the text Flux's source-controller
    /// quotes (drop-in mode words its messages with it).
    pub registry_text: Option<String>,
}

impl RegistryError {
    /// Builds an error.
    pub fn new(kind: RegistryErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            registry_text: None,
        }
    }

    /// The error with the registry's own words for it (see [`Self::registry_text`]).
    pub fn with_registry_text(self, text: Option<String>) -> Self {
        Self {
            registry_text: text,
            ..self
        }
    }
}

/// What the referrers API (OCI distribution v1.1) answered for one digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Referrers {
    /// The registry serves the API: the manifests whose `subject` is the digest, as index
    /// descriptors (only those of the asked artifact type, when one was asked).
    Listed(Vec<Descriptor>),
    /// The registry does not serve the API (404, or an answer that is not an image
    /// index): the referrers tag schema (`sha256-<hex>` tag) is where to look instead.
    Unsupported,
}

/// One repository on one registry, with its transport settings already applied.
#[async_trait]
pub trait Registry: Send + Sync {
    /// `HEAD /v2/<repo>/manifests/<reference>`: the digest only, no body.
    async fn manifest_digest(&self, reference: &str) -> Result<Digest, RegistryError>;
    /// `GET` a manifest or index by tag or digest: size-capped, digest checked. By digest,
    /// once the repository answered this session, it may come from the manifests the
    /// connector's sessions already fetched, without a request.
    async fn manifest(&self, reference: &str) -> Result<FetchedManifest, RegistryError>;
    /// Every tag, following pagination.
    async fn tags(&self) -> Result<Vec<String>, RegistryError>;
    /// A blob as a digest-checked stream; transient faults mid-stream are resumed.
    async fn blob(&self, descriptor: &Descriptor) -> Result<BlobStream, RegistryError>;
    /// A small blob read whole (config, signature payload, bundle), capped at `max` bytes.
    async fn blob_bytes(&self, descriptor: &Descriptor, max: u64) -> Result<Bytes, RegistryError>;
    /// `GET /v2/<repo>/referrers/<digest>`, every page of it (bounded); with
    /// `artifact_type`, only referrers of that type, filtered by the client when the
    /// registry does not apply the filter (no `OCI-Filters-Applied: artifactType`).
    async fn referrers(
        &self,
        digest: &Digest,
        artifact_type: Option<&str>,
    ) -> Result<Referrers, RegistryError>;
    /// True when this session's credentials may pull `layers` themselves, proven without
    /// downloading them: the registry answered a manifest request of this session with
    /// success, over a connection the object's own settings put no third party on (no
    /// proxy of its choosing, which could answer in the registry's name), and either
    /// answers a request for each blob's first byte with it (a registry may authorise
    /// manifests and blobs separately, as ECR's IAM actions do), or `anonymous_download`
    /// (an anonymous session downloaded them) and this session is anonymous too, so the
    /// registry cannot tell the two apart. Then what another session built from those
    /// layers may be shared with this one (`reconcile::shared`). False for no layer, and
    /// by default.
    async fn prove_pull(&self, _layers: &[Descriptor], _anonymous_download: bool) -> bool {
        false
    }
    /// True when the session sends no credentials and no client certificate, and goes
    /// through no proxy of the object's choosing: the registry itself sees it as any
    /// anonymous client. False by default.
    fn anonymous(&self) -> bool {
        false
    }
}

/// Opens [`Registry`] sessions; the reconciler holds one of these.
pub trait RegistryConnector: Send + Sync {
    /// A session for `registry_host` (host[:port]) and `repository` (path).
    fn connect(
        &self,
        registry_host: &str,
        repository: &str,
        options: &RegistryOptions,
    ) -> Result<Arc<dyn Registry>, RegistryError>;
}
