//! What every reconcile needs: the ports (registry, verifier, Secrets, cloud logins),
//! the artifact store, the controller settings, and small in-memory caches (verified
//! digests, consecutive failures, artifacts shared between objects). The composition root (`app`) builds it; tests
//! build their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::domain::limits::Limits;
use crate::domain::requeue::RetryDelays;
use crate::ports::{
    ArtifactStore, CloudLogin, ReconcileMetrics, RegistryConnector, Secrets, SignatureVerifier,
};

/// Controller settings that apply to every object.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `host[:port]` written into artifact URLs (`--storage-adv-addr`).
    pub advertised_addr: String,
    /// Artifacts kept per object (`--artifact-retention-records`).
    pub retention_records: usize,
    /// Age after which older artifacts go (`--artifact-retention-ttl`).
    pub retention_ttl: Duration,
    /// Caps on what is read from registries.
    pub limits: Limits,
    /// Platform chosen from an image index when `spec.platform` is unset.
    pub default_platform: String,
    /// Backoff after failures in a row (`--min-retry-delay`, `--max-retry-delay`).
    pub retry: RetryDelays,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            advertised_addr: "localhost:9090".into(),
            retention_records: 2,
            retention_ttl: Duration::from_secs(60),
            limits: Limits::default(),
            default_platform: "linux/amd64".into(),
            retry: RetryDelays::default(),
        }
    }
}

/// Shared state of the reconciler.
pub struct Context {
    /// Opens registry sessions.
    pub connector: Arc<dyn RegistryConnector>,
    /// Verifies signatures.
    pub verifier: Arc<dyn SignatureVerifier>,
    /// Reads Secrets and ServiceAccounts.
    pub secrets: Arc<dyn Secrets>,
    /// The artifact store.
    pub storage: Arc<dyn ArtifactStore>,
    /// Settings.
    pub settings: Settings,
    /// What the reconciler records (the server renders it as Prometheus metrics).
    pub metrics: Arc<dyn ReconcileMetrics>,
    /// Cloud registry logins for `spec.provider` (none: such objects fail to log in).
    pub cloud: Option<Arc<dyn CloudLogin>>,
    /// `--default-service-account`: objects without `spec.serviceAccountName` log in to
    /// cloud registries as this ServiceAccount of their own namespace, never as the
    /// controller (Flux's multi-tenancy lockdown).
    pub default_service_account: Option<String>,
    /// Artifacts built so far, shared with objects that resolve the same manifest.
    pub(crate) shared: super::shared::SharedBuilds,
    verified: Mutex<HashMap<String, String>>,
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    /// A context with empty caches.
    pub fn new(
        connector: Arc<dyn RegistryConnector>,
        verifier: Arc<dyn SignatureVerifier>,
        secrets: Arc<dyn Secrets>,
        storage: impl ArtifactStore + 'static,
        settings: Settings,
        metrics: Arc<dyn ReconcileMetrics>,
    ) -> Self {
        Self {
            connector,
            verifier,
            secrets,
            storage: Arc::new(storage),
            settings,
            metrics,
            cloud: None,
            default_service_account: None,
            shared: Default::default(),
            verified: Mutex::default(),
            failures: Mutex::default(),
        }
    }

    /// Logs in to cloud registries (`spec.provider: aws|gcp|azure`) with `cloud`.
    pub fn with_cloud_login(mut self, cloud: Arc<dyn CloudLogin>) -> Self {
        self.cloud = Some(cloud);
        self
    }

    /// Objects without `spec.serviceAccountName` log in to cloud registries as ServiceAccount
    /// `name` of their namespace (`--default-service-account`; needs object-level identity).
    pub fn with_default_service_account(mut self, name: impl Into<String>) -> Self {
        self.default_service_account = Some(name.into());
        self
    }

    /// [`Context::with_default_service_account`] when `name` is set (the controller's
    /// `--default-service-account`), logged once at start-up; unchanged otherwise.
    pub fn with_lockdown(self, name: Option<String>) -> Self {
        match name {
            Some(name) => {
                tracing::info!(
                    service_account = %name,
                    "cloud logins of objects without spec.serviceAccountName use this ServiceAccount of their namespace, never the controller's identity (--default-service-account)"
                );
                self.with_default_service_account(name)
            }
            None => self,
        }
    }

    /// The cached verdict message for a (digest, policy) key.
    pub(crate) fn verified(&self, key: &str) -> Option<String> {
        self.verified.lock().ok()?.get(key).cloned()
    }

    /// Caches a verdict.
    pub(crate) fn remember_verified(&self, key: String, message: String) {
        if let Ok(mut m) = self.verified.lock() {
            // Bounded: a controller with many objects keeps the latest verdicts only.
            if m.len() > 10_000 {
                m.clear();
            }
            m.insert(key, message);
        }
    }

    /// Records a failure of `object` and returns how many in a row it has had.
    pub(crate) fn failed(&self, object: &str) -> u32 {
        self.failures
            .lock()
            .map(|mut m| {
                let n = m.entry(object.to_string()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            })
            .unwrap_or(1)
    }

    /// Forgets the failures of `object` after a success.
    pub(crate) fn succeeded(&self, object: &str) {
        if let Ok(mut m) = self.failures.lock() {
            m.remove(object);
        }
    }
}
