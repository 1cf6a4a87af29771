//! The OCI registry adapter: implements `ports::Registry` and `ports::RegistryConnector`
//! over HTTP(S) with `reqwest`, speaking the distribution API directly.
//!
//! This is our own small distribution client rather than the `oci-client` crate
//! (the usual choice) because ocisource needs things that client does not offer together: client
//! certificates (mTLS), `Retry-After` on 429, a size cap on manifest bodies, `Range`
//! resume of blobs cut short, `Link`-header tag pagination, and a request counter that
//! tests and benchmarks assert on.
//!
//! Layout: `client` (session, request loop: auth, retries, status mapping), `manifest`,
//! `memo` (manifests kept by digest across sessions), `body` (capped body reads), `auth`
//! (challenges, token cache), `token` (the token request), `origin` (where credentials may
//! go: links, redirects, realms), `retry` (backoff, `Retry-After`), `transport` (TLS,
//! proxy, timeouts, redirects), `dns` (the resolver, with typed failures), `failure` (why a
//! request got no answer, from the error's types), `insecure` (Flux's `insecure`,
//! plain-HTTP fallback), `blob` (checked, resuming streams), `tags` and `tag_page` (bounded
//! pagination), `referrers` (the OCI v1.1 referrers API, bounded pages, client-side
//! `artifactType` filter), `push` (uploads), `docker_config` (docker config JSON, and
//! legacy `.dockercfg`, as data) and `credential_helper` (the CLI user's own config, whose
//! helpers may run). This module must not import `reconcile`, `verify` or `storage`.

pub mod auth;
pub mod blob;
mod body;
pub mod client;
pub mod credential_helper;
mod diagnostic;
mod dns;
pub mod docker_config;
mod failure;
pub mod insecure;
pub mod manifest;
mod memo;
pub mod origin;
pub mod push;
pub mod referrers;
pub mod retry;
mod tag_page;
pub mod tags;
mod token;
pub mod transport;
mod trust_key;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

pub use client::{ClientSettings, RegistryClient};
pub use retry::RetryPolicy;

use crate::domain::digest::Digest;
use crate::domain::manifest::Descriptor;
use crate::ports::{
    BlobStream, FetchedManifest, Referrers, Registry, RegistryConnector, RegistryError,
    RegistryOptions,
};

/// Opens [`RegistryClient`] sessions; all sessions share one request counter.
#[derive(Clone, Debug, Default)]
pub struct HttpConnector {
    settings: ClientSettings,
}

impl HttpConnector {
    /// A connector with default limits and retry policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the retry policy (tests use a short backoff base).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.settings.retry = retry;
        self
    }

    /// Replaces the manifest size cap.
    pub fn with_max_manifest_bytes(mut self, max: u64) -> Self {
        self.settings.max_manifest_bytes = max;
        self
    }

    /// Answers `host` with `addr` instead of DNS in every session (tests reach a local
    /// registry under a cloud registry's name, e.g. an ECR host, this way).
    pub fn with_resolve(mut self, host: &str, addr: std::net::SocketAddr) -> Self {
        self.settings.http = self.settings.http.with_resolve(host, addr);
        self
    }

    /// Replaces the cap on listed tags.
    pub fn with_max_tags(mut self, max: usize) -> Self {
        self.settings.max_tags = max;
        self
    }

    /// Replaces the tag-listing caps: bytes of one page body, and memory kept for the
    /// whole listing.
    pub fn with_tag_list_limits(mut self, page_bytes: u64, list_bytes: u64) -> Self {
        self.settings.max_tag_page_bytes = page_bytes;
        self.settings.max_tag_list_bytes = list_bytes;
        self
    }

    /// HTTP requests sent by every session of this connector so far.
    pub fn request_count(&self) -> u64 {
        self.settings.counter.load(Ordering::Relaxed)
    }

    /// A concrete session, for pushes (the port hides the push methods).
    pub fn client(
        &self,
        registry_host: &str,
        repository: &str,
        options: &RegistryOptions,
    ) -> Result<RegistryClient, RegistryError> {
        RegistryClient::new(registry_host, repository, options, self.settings.clone())
    }

    /// The shared request counter.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.settings.counter.clone()
    }
}

impl RegistryConnector for HttpConnector {
    fn connect(
        &self,
        registry_host: &str,
        repository: &str,
        options: &RegistryOptions,
    ) -> Result<Arc<dyn Registry>, RegistryError> {
        Ok(Arc::new(self.client(registry_host, repository, options)?))
    }
}

#[async_trait]
impl Registry for RegistryClient {
    async fn manifest_digest(&self, reference: &str) -> Result<Digest, RegistryError> {
        self.head_manifest(reference).await
    }

    async fn manifest(&self, reference: &str) -> Result<FetchedManifest, RegistryError> {
        self.get_manifest(reference).await
    }

    async fn tags(&self) -> Result<Vec<String>, RegistryError> {
        self.list_tags().await
    }

    async fn blob(&self, descriptor: &Descriptor) -> Result<BlobStream, RegistryError> {
        self.blob_stream(descriptor).await
    }

    async fn blob_bytes(&self, descriptor: &Descriptor, max: u64) -> Result<Bytes, RegistryError> {
        self.blob_whole(descriptor, max).await
    }

    async fn referrers(
        &self,
        digest: &Digest,
        artifact_type: Option<&str>,
    ) -> Result<Referrers, RegistryError> {
        self.list_referrers(digest, artifact_type).await
    }

    async fn prove_pull(&self, layers: &[Descriptor], anonymous_download: bool) -> bool {
        if layers.is_empty()
            || !self.answered.load(std::sync::atomic::Ordering::Relaxed)
            || self.proxied
        {
            return false;
        }
        if anonymous_download && self.anonymous {
            return true;
        }
        for layer in layers {
            if self.blob_readable(layer).await.is_err() {
                return false;
            }
        }
        true
    }

    fn anonymous(&self) -> bool {
        self.anonymous
    }
}
