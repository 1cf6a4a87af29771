//! Test support for the `cloud_*` tests: a reconcile context whose registry connector
//! and cloud login reach local servers under real cloud host names (resolver overrides,
//! never the hosts file), a clock the test moves, `OCIRepository` builders with a
//! provider, small in-process HTTP fakes of the documented token endpoints (each counts
//! and records what it was sent), and `moto` run as a server for AWS. The registries
//! are plain HTTP, reached by a connector that falls back to plain HTTP ([`PlainHttp`]),
//! so the objects need no `spec.insecure`. Imports only the crate's public API.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod moto;
pub mod tokens;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::json;

use ocisource::api::OciRepository;
use ocisource::cloud::{Clock, CloudSettings, WorkloadLogin};
use ocisource::domain::manifest::FLUX_CONTENT;
use ocisource::ports::{
    Registry, RegistryConnector, RegistryError, RegistryOptions, SecretData, Secrets, SecretsError,
};
use ocisource::reconcile::{self, Context, Report, Settings};
use ocisource::registry::{HttpConnector, RetryPolicy};
use ocisource::server::Metrics;
use ocisource::storage::Storage;
use ocisource::verify::CosignVerifier;

use crate::support::TestRegistry;

/// A clock the test sets.
pub struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    /// A clock at `at` (RFC 3339).
    pub fn at(at: &str) -> Arc<Self> {
        Arc::new(Self(Mutex::new(at.parse().unwrap())))
    }
    /// Moves the clock.
    pub fn set(&self, at: &str) {
        *self.0.lock().unwrap() = at.parse().unwrap();
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

/// No Secrets; every ServiceAccount exists and has no image pull secrets.
pub struct NoSecrets;

#[async_trait::async_trait]
impl Secrets for NoSecrets {
    async fn secret(&self, namespace: &str, name: &str) -> Result<SecretData, SecretsError> {
        Err(SecretsError::NotFound {
            namespace: namespace.into(),
            name: name.into(),
        })
    }
    async fn image_pull_secrets(&self, _: &str, _: &str) -> Result<Vec<String>, SecretsError> {
        Ok(Vec::new())
    }
}

/// Secrets by name (any namespace); every ServiceAccount exists and has no image pull
/// secrets.
#[derive(Default)]
pub struct MapSecrets(std::collections::BTreeMap<String, SecretData>);

impl MapSecrets {
    /// Adds Secret `name` with `data`.
    pub fn with(mut self, name: &str, data: &[(&str, &[u8])]) -> Self {
        let data = data
            .iter()
            .map(|(k, v)| {
                let v = ocisource::domain::secret::Redacted::new(v.to_vec());
                ((*k).to_string(), v)
            })
            .collect();
        self.0.insert(name.to_string(), data);
        self
    }
}

#[async_trait::async_trait]
impl Secrets for MapSecrets {
    async fn secret(&self, namespace: &str, name: &str) -> Result<SecretData, SecretsError> {
        match self.0.get(name) {
            Some(data) => Ok(data.clone()),
            None => NoSecrets.secret(namespace, name).await,
        }
    }
    async fn image_pull_secrets(&self, _: &str, _: &str) -> Result<Vec<String>, SecretsError> {
        Ok(Vec::new())
    }
}

/// The test registries speak plain HTTP under real cloud names: every session may fall
/// back to it (the transport's `insecure`), so the objects need no `spec.insecure`, which
/// the controller's own identity refuses. The fallback, not `plain_http`, so that these
/// sessions still try HTTPS first, as an object's would.
pub struct PlainHttp(HttpConnector);

impl RegistryConnector for PlainHttp {
    fn connect(
        &self,
        registry_host: &str,
        repository: &str,
        options: &RegistryOptions,
    ) -> Result<Arc<dyn Registry>, RegistryError> {
        let options = RegistryOptions {
            insecure: true,
            ..options.clone()
        };
        self.0.connect(registry_host, repository, &options)
    }
}

/// The address of a test registry.
pub fn addr(reg: &TestRegistry) -> SocketAddr {
    reg.host().parse().unwrap()
}

/// A reconcile context: registry sessions resolve each `(host, addr)` of `registry`,
/// the cloud login uses `settings` and `clock`, there are no Secrets, the store is
/// `store`.
pub fn context(
    store: &Path,
    registry: &[(&str, SocketAddr)],
    settings: CloudSettings,
    clock: Arc<dyn Clock>,
) -> Context {
    context_with_login(
        store,
        registry,
        WorkloadLogin::new(settings, clock).unwrap(),
    )
}

/// [`context`] with a cloud login the test built (e.g. with object-level identity).
pub fn context_with_login(
    store: &Path,
    registry: &[(&str, SocketAddr)],
    login: WorkloadLogin,
) -> Context {
    context_with_secrets(store, registry, login, Arc::new(NoSecrets))
}

/// [`context_with_login`] with the Secrets `secrets`.
pub fn context_with_secrets(
    store: &Path,
    registry: &[(&str, SocketAddr)],
    login: WorkloadLogin,
    secrets: Arc<dyn Secrets>,
) -> Context {
    let mut connector = HttpConnector::new()
        .with_retry(RetryPolicy::with_base(std::time::Duration::from_millis(5)));
    for (host, a) in registry {
        connector = connector.with_resolve(host, *a);
    }
    Context::new(
        Arc::new(PlainHttp(connector)),
        Arc::new(CosignVerifier::new().unwrap()),
        secrets,
        Storage::new(store).without_fsync(),
        Settings::default(),
        Arc::new(Metrics::new()),
    )
    .with_cloud_login(Arc::new(login))
}

/// An `OCIRepository` `name` for `url` with `provider` (the context's connector speaks
/// plain HTTP to the test registries: [`PlainHttp`]).
pub fn repo(name: &str, url: &str, provider: &str) -> OciRepository {
    serde_json::from_value(json!({
        "apiVersion": "ocisource.dev/v1beta1", "kind": "OCIRepository",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"url": url, "interval": "5m", "provider": provider,
                 "ref": {"tag": "v1"}},
    }))
    .unwrap()
}

/// [`repo`] logging in as ServiceAccount `sa` of its namespace (object-level identity).
pub fn tenant_repo(name: &str, url: &str, provider: &str, sa: &str) -> OciRepository {
    let mut obj = repo(name, url, provider);
    obj.spec.service_account_name = Some(sa.into());
    obj
}

/// Pushes a one-file artifact tagged `v1` to `repo` on `reg`.
pub async fn push(reg: &TestRegistry, repo: &str) {
    let layer = crate::support::tar_gz(&[("app.yaml", b"kind: ConfigMap\n")]);
    reg.push_artifact(repo, "v1", &[(FLUX_CONTENT, layer)], &[])
        .await;
}

/// Reconciles `obj` now, keeping its new status on it.
pub async fn reconcile(obj: &mut OciRepository, ctx: &Context) -> Report {
    let report = reconcile::reconcile(obj, ctx, Utc::now()).await;
    obj.status = Some(report.status.clone());
    report
}

/// `(status, reason, message)` of condition `type_`.
pub fn condition(report: &Report, type_: &str) -> (String, String, String) {
    let c = report
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition: {:?}", report.status.conditions));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

/// Asserts condition `type_` has `status` and `reason` and its message holds `needles`.
pub fn assert_condition(
    report: &Report,
    type_: &str,
    status: &str,
    reason: &str,
    needles: &[&str],
) {
    let (s, r, message) = condition(report, type_);
    assert_eq!((s.as_str(), r.as_str()), (status, reason), "{message}");
    for n in needles {
        assert!(message.contains(n), "{n:?} not in {message}");
    }
}

/// Reconciles `obj` with `settings` and no registry reachable: for failures that come
/// before any registry request.
pub async fn reconcile_alone(mut obj: OciRepository, settings: CloudSettings) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(
        dir.path(),
        &[],
        settings,
        ManualClock::at("2025-01-01T00:00:00Z"),
    );
    reconcile(&mut obj, &ctx).await
}

/// Asserts the object is Ready, showing the failure otherwise.
pub fn assert_ready(report: &Report) {
    assert!(
        report.ready(),
        "not Ready: {:?}",
        report
            .error
            .as_ref()
            .map(|e| ocisource::reconcile::error::chain(e))
    );
}

/// Serves `router` on 127.0.0.1 and returns its address.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    a
}

/// The pairs of a form body.
pub fn form(body: &str) -> std::collections::HashMap<String, String> {
    form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

/// A JSON response.
pub fn json_response(value: serde_json::Value) -> axum::response::Response {
    axum::response::IntoResponse::into_response((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    ))
}

/// A file holding `content`, kept while `dir` lives.
pub fn token_file(dir: &Path, name: &str, content: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}
