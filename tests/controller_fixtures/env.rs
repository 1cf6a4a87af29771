//! [`Env`]: a real registry, a temp store and the controller context (HTTP connector,
//! cosign verifier, `KubeSecrets`, one event recorder) wired to the mock API server.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};

use ocisource::api::OciRepository;
use ocisource::controller::secrets::KubeSecrets;
use ocisource::controller::{self, ControllerError, KubeContext};
use ocisource::ports::ArtifactStore;
use ocisource::reconcile::{Context, Settings};
use ocisource::registry::HttpConnector;
use ocisource::server::Metrics;
use ocisource::storage::Storage;
use ocisource::verify::CosignVerifier;

use super::{mock_client, ApiServerVerifier, Call, Expect, Scenario, ADV_ADDR};
use crate::support::{RegistryOpts, TestRegistry};

/// A real registry, a temp store and the controller context wired to a mock API server.
pub struct Env {
    /// The registry.
    pub reg: TestRegistry,
    /// Storage root (kept alive for the test).
    pub dir: tempfile::TempDir,
    /// The controller context (one Recorder, as in the controller).
    pub kctx: Arc<KubeContext>,
    /// The mock API server.
    pub api: ApiServerVerifier,
}

/// What `reconcile_object` returns.
pub type ReconcileResult = Result<Action, kube::runtime::finalizer::Error<ControllerError>>;

impl Env {
    /// Starts a registry with `opts`; ExternalArtifact publishing on.
    pub fn new(opts: RegistryOpts) -> Self {
        let reg = TestRegistry::start(opts);
        let dir = tempfile::tempdir().unwrap();
        let (client, api) = mock_client();
        let core = Arc::new(Context::new(
            Arc::new(HttpConnector::new()),
            Arc::new(CosignVerifier::new().unwrap()),
            Arc::new(KubeSecrets::new(client.clone())),
            Storage::new(dir.path()),
            Settings {
                advertised_addr: ADV_ADDR.into(),
                ..Settings::default()
            },
            Arc::new(Metrics::new()),
        ));
        let kctx = Arc::new(KubeContext {
            client,
            core,
            external_artifact: true,
            external_artifact_missing: AtomicBool::new(false),
            notifier: None,
            published: Default::default(),
        });
        Self {
            reg,
            dir,
            kctx,
            api,
        }
    }

    /// `oci://<registry>/<repo>`.
    pub fn url(&self, repo: &str) -> String {
        format!("oci://{}/{repo}", self.reg.host())
    }

    /// The store.
    pub fn storage(&self) -> &dyn ArtifactStore {
        self.kctx.core.storage.as_ref()
    }

    /// `controller::reconcile_object(obj)` against `scenario`.
    pub async fn reconcile(
        &mut self,
        obj: &OciRepository,
        scenario: Scenario,
    ) -> (ReconcileResult, Vec<Call>) {
        let fut = controller::reconcile_object(Arc::new(obj.clone()), self.kctx.clone());
        self.api.run(scenario, fut).await
    }

    /// A full reconcile of `obj`, the mock answering as `expect` says.
    pub async fn reconcile_as(
        &mut self,
        obj: &OciRepository,
        expect: Expect,
    ) -> (ReconcileResult, Vec<Call>) {
        self.reconcile(obj, Scenario::Reconcile(obj.clone(), expect))
            .await
    }
}
