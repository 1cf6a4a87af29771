//! The Kubernetes side of the controller: kube-runtime's `Controller` over OCIRepository
//! objects (ours, and Flux's own kind in drop-in mode: one generic path, see
//! [`kind::SourceKind`]), the finalizer, the status (the work under way when
//! `crate::reconcile` shows it, then ONE final patch), events, and the Flux
//! `ExternalArtifact` kept in step. All decisions are made by `crate::reconcile`, which
//! has no Kubernetes I/O; this module only reads and writes the API.

pub mod external_artifact;
pub mod kind;
pub mod leader;
pub mod notify;
pub mod secrets;
pub mod service_account_tokens;
pub mod startup;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};

use crate::api::{FluxOciRepository, OciRepository, OciRepositoryStatus};
use crate::domain::status::EventType;
use crate::ports::store::object_dir_in;
use crate::reconcile::{self, Context, Requeue};

pub use kind::SourceKind;

/// Field manager name for server-side apply and patches.
pub const MANAGER: &str = "ocisource";

/// What the Kubernetes side needs besides the reconcile context.
pub struct KubeContext {
    /// API client.
    pub client: Client,
    /// The reconcile context.
    pub core: Arc<Context>,
    /// Publish ExternalArtifacts (`--external-artifact`).
    pub external_artifact: bool,
    /// Set once the ExternalArtifact API was found missing, so it is said once.
    pub external_artifact_missing: AtomicBool,
    /// Posts events to Flux's notification-controller (`--events-addr`); `None`: off.
    pub notifier: Option<Arc<notify::Notifier>>,
}

/// Kubernetes I/O failures (the reconcile's own failures are in the status, not here).
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Writing the status failed.
    #[error("failed to patch status of {object}")]
    PatchStatus {
        /// `namespace/name`.
        object: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Removing the object's artifacts failed.
    #[error("failed to remove artifacts of {object}")]
    Cleanup {
        /// `namespace/name`.
        object: String,
        /// Cause.
        #[source]
        source: crate::ports::StoreError,
    },
    /// The object has no namespace (it was not read from the API server).
    #[error("object {0} has no namespace")]
    NoNamespace(String),
}

/// Writes `status` with one merge patch on the status subresource. The whole status is
/// sent, unset fields as `null` (see [`status_patch`]).
pub async fn patch_status<K: SourceKind>(
    api: &Api<K>,
    name: &str,
    status: &OciRepositoryStatus,
) -> Result<(), kube::Error> {
    let patch = status_patch_of::<K>(status).map_err(kube::Error::SerdeError)?;
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// The merge patch `{"status": ...}` that makes the stored status equal `status`. A merge
/// patch leaves absent keys untouched, so every unset status field is sent as `null`
/// (which deletes it): otherwise removing `spec.ignore`, `spec.layerSelector` or
/// `spec.platform` would leave the old `observed*` value in place, and every later
/// reconcile would see a changed setting and download and re-package the artifact.
pub fn status_patch(status: &OciRepositoryStatus) -> Result<serde_json::Value, serde_json::Error> {
    status_patch_of::<OciRepository>(status)
}

/// [`status_patch`] for kind `K`: the keys of K's status schema, and only those (Flux's
/// kind has no `observedPlatform`).
pub fn status_patch_of<K: SourceKind>(
    status: &OciRepositoryStatus,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut value = serde_json::to_value(status)?;
    if let Some(map) = value.as_object_mut() {
        map.retain(|k, _| K::status_keys().contains(k));
        for key in K::status_keys() {
            map.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
    }
    Ok(serde_json::json!({ "status": value }))
}

fn kube_event(ev: &crate::domain::status::Event) -> KubeEvent {
    KubeEvent {
        type_: match ev.type_ {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        },
        reason: ev.reason.clone(),
        note: Some(ev.message.chars().take(1024).collect()),
        action: "Reconcile".into(),
        secondary: None,
    }
}

/// Publishes the events of one reconcile, each as a new Event object, and queues each for
/// `--events-addr` when set. A fresh recorder per
/// reconcile: kube's recorder keys its series by reason, not by message, so a cached one
/// would publish a later NewArtifact as a repeat of the first, with the first revision in
/// its note. Repeats of the same failure are already suppressed by the status fold.
async fn publish_events(
    kctx: &KubeContext,
    reference: &ObjectReference,
    meta: &kube::api::ObjectMeta,
    events: &[crate::domain::status::Event],
) {
    if events.is_empty() {
        return;
    }
    let recorder = Recorder::new(kctx.client.clone(), reporter());
    for ev in events {
        if let Some(notifier) = &kctx.notifier {
            notifier.notify(reference, meta, ev);
        }
        if let Err(e) = recorder.publish(&kube_event(ev), reference).await {
            tracing::warn!(object = %format!("{}/{}", reference.namespace.clone().unwrap_or_default(), reference.name.clone().unwrap_or_default()), error = %e, "failed to publish event");
        }
    }
}

/// Shows a reconcile under way: patches the in-progress status, and the ExternalArtifact
/// when its Ready would change (a stored artifact that must not look Ready while a new
/// generation or revision is being built).
struct Showing<'a, K: SourceKind> {
    kctx: &'a KubeContext,
    api: &'a Api<K>,
    /// The object as the reconciler reads it.
    obj: &'a OciRepository,
    /// The ExternalArtifact's Ready status last published in this reconcile (`None`:
    /// nothing published yet).
    published: std::sync::Mutex<Option<Option<String>>>,
}

impl<K: SourceKind> Showing<'_, K> {
    /// The Ready status the ExternalArtifact of `obj` would show.
    fn ea_ready(obj: &OciRepository) -> Option<String> {
        crate::api::ExternalArtifactStatus::from_source(obj, 0)
            .conditions
            .into_iter()
            .find(|c| c.type_ == crate::api::conditions::READY)
            .map(|c| c.status)
    }
}

#[async_trait::async_trait]
impl<K: SourceKind> reconcile::Progress for Showing<'_, K> {
    async fn show(&self, status: &OciRepositoryStatus) {
        let name = self.obj.name_any();
        if let Err(e) = patch_status(self.api, &name, status).await {
            tracing::warn!(object = %format!("{}/{name}", self.obj.namespace().unwrap_or_default()), error = %e, "failed to show the reconcile in progress");
            return;
        }
        if !(K::EXTERNAL_ARTIFACT && self.kctx.external_artifact) || status.artifact.is_none() {
            return;
        }
        let mut updated = self.obj.clone();
        updated.status = Some(status.clone());
        let ready = Self::ea_ready(&updated);
        // The first time, the ExternalArtifact still shows the previous reconcile's
        // outcome (its Ready may be True): publish. Later, only when Ready changes.
        let before = match self.published.lock() {
            Ok(mut last) => last.replace(ready.clone()),
            Err(_) => None,
        };
        if before != Some(ready) {
            external_artifact::publish(self.kctx, &updated).await;
        }
    }
}

async fn apply<K: SourceKind>(obj: Arc<K>, kctx: Arc<KubeContext>) -> Result<Action, ControllerError> {
    let ns = obj
        .namespace()
        .ok_or_else(|| ControllerError::NoNamespace(obj.name_any()))?;
    let name = obj.name_any();
    let (view, flavour) = obj.view();
    let api: Api<K> = Api::namespaced(kctx.client.clone(), &ns);
    let showing = Showing {
        kctx: &kctx,
        api: &api,
        obj: &view,
        published: std::sync::Mutex::new(None),
    };
    let report =
        reconcile::reconcile_as(&view, &flavour, &kctx.core, chrono::Utc::now(), &showing).await;
    let write_status = || async {
        patch_status(&api, &name, &report.status)
            .await
            .map_err(|source| ControllerError::PatchStatus {
                object: format!("{ns}/{name}"),
                source,
            })
    };
    if view.spec.suspend {
        tracing::debug!(object = %format!("{ns}/{name}"), kind = K::LABEL, "suspended; not reconciling");
        // A requested reconcile is still recorded (lastHandledReconcileAt), as in Flux.
        let handled = view
            .status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_ref());
        if handled != report.status.last_handled_reconcile_at.as_ref() {
            write_status().await?;
        }
        return Ok(Action::await_change());
    }
    if let Some(e) = &report.error {
        tracing::warn!(object = %format!("{ns}/{name}"), kind = K::LABEL, reason = e.reason(), error = %reconcile::error::chain(e), "reconcile failed");
    }
    write_status().await?;
    publish_events(&kctx, &obj.object_ref(&()), obj.meta(), &report.events).await;
    if K::EXTERNAL_ARTIFACT && kctx.external_artifact {
        let mut updated = view.clone();
        updated.status = Some(report.status.clone());
        external_artifact::publish(&kctx, &updated).await;
    }
    Ok(match report.requeue {
        Requeue::After(d) => Action::requeue(d),
        Requeue::AwaitChange => Action::await_change(),
    })
}

async fn cleanup<K: SourceKind>(
    obj: Arc<K>,
    kctx: Arc<KubeContext>,
) -> Result<Action, ControllerError> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let (_, flavour) = obj.view();
    object_dir_in(reconcile::artifact::kind_dir(&flavour), &ns, &name)
        .and_then(|dir| kctx.core.storage.remove_dir(&dir))
        .map_err(|source| ControllerError::Cleanup {
            object: format!("{ns}/{name}"),
            source,
        })?;
    kctx.core.metrics.remove_object(&ns, &name);
    Ok(Action::await_change())
}

/// A new object (no finalizer yet, no condition) reads Reconciling and Ready=Unknown
/// before the finalizer round-trip, so nothing (kstatus, a health check) takes an object
/// without status for a Current one.
async fn show_new<K: SourceKind>(api: &Api<K>, obj: &K) {
    let (view, _) = obj.view();
    let fresh = view.metadata.deletion_timestamp.is_none()
        && !view.finalizers().iter().any(|f| f == K::FINALIZER)
        && !view.spec.suspend
        && view.status.as_ref().is_none_or(|s| s.conditions.is_empty());
    if !fresh {
        return;
    }
    let generation = view.metadata.generation.unwrap_or(0);
    let now = chrono::Utc::now();
    let Some(conditions) = crate::domain::status::starting(&[], None, generation, false, now)
    else {
        return;
    };
    let status = OciRepositoryStatus {
        conditions: crate::api::conditions::all_to_k8s(&conditions),
        ..view.status.clone().unwrap_or_default()
    };
    if let Err(e) = patch_status(api, &obj.name_any(), &status).await {
        tracing::warn!(object = %format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any()), error = %e, "failed to show the reconcile in progress");
    }
}

/// Reconciles one object: finalizer handling, then the steps, status, events, ExternalArtifact.
pub async fn reconcile_object<K: SourceKind>(
    obj: Arc<K>,
    kctx: Arc<KubeContext>,
) -> Result<Action, kube::runtime::finalizer::Error<ControllerError>> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(kctx.client.clone(), &ns);
    show_new(&api, obj.as_ref()).await;
    finalizer(&api, K::FINALIZER, obj, |event| async {
        match event {
            Finalizer::Apply(o) => apply(o, kctx.clone()).await,
            Finalizer::Cleanup(o) => cleanup(o, kctx.clone()).await,
        }
    })
    .await
}

fn error_policy<K: SourceKind>(
    obj: Arc<K>,
    error: &kube::runtime::finalizer::Error<ControllerError>,
    _kctx: Arc<KubeContext>,
) -> Action {
    tracing::warn!(object = %format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any()), kind = K::LABEL, error = %error, "kubernetes API call failed; retrying");
    Action::requeue(Duration::from_secs(15))
}

/// Which objects to watch.
#[derive(Clone, Debug, Default)]
pub struct WatchScope {
    /// `None` watches every namespace; else only this one.
    pub namespace: Option<String>,
    /// Label selector (sharding), e.g. `sharding.fluxcd.io/key=shard1`.
    pub label_selector: Option<String>,
    /// Drop-in mode: also reconcile Flux's own OCIRepository objects matching this label
    /// selector (`--flux-drop-in-selector`), e.g. `sharding.fluxcd.io/key=ocisource`.
    pub flux_selector: Option<String>,
    /// Objects reconciled at once.
    pub concurrency: u16,
}

/// The event reporter identity.
pub fn reporter() -> Reporter {
    Reporter {
        controller: MANAGER.into(),
        instance: std::env::var("POD_NAME").ok(),
    }
}

/// Runs the controller until `stop` completes (SIGTERM, or a lost leader Lease): work in
/// flight finishes, no new reconcile starts. Our kind always; Flux's kind too in drop-in
/// mode, each with its own watch and `concurrency` workers.
pub async fn run<F>(kctx: Arc<KubeContext>, scope: WatchScope, stop: F)
where
    F: std::future::Future<Output = ()> + Send + Sync + 'static,
{
    let stop = stop.shared();
    let ours = run_kind::<OciRepository, _>(
        kctx.clone(),
        &scope,
        scope.label_selector.as_deref(),
        stop.clone(),
    );
    match scope.flux_selector.as_deref() {
        Some(selector) => {
            let flux = run_kind::<FluxOciRepository, _>(kctx, &scope, Some(selector), stop);
            futures::join!(ours, flux);
        }
        None => ours.await,
    }
}

/// What makes a watch event worth a reconcile, as Flux's `GenerationChangedPredicate` or
/// `ReconcileRequestedPredicate`: a new generation, a new `requestedAt`, deletion, a
/// finalizer change (the finalizer round-trip), or a changed drop-in opt-in annotation.
/// A status-only change, such as the controller's own status write, is not: without this
/// every reconcile caused another (a HEAD to the registry and status and ExternalArtifact
/// writes) for nothing. A new object, or one that starts matching the label selector
/// (moved from Flux's source-controller), has no hash yet and always passes.
pub fn change_of_interest<K: SourceKind>(obj: &K) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let meta = obj.meta();
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
    let mut h = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut h);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_microsecond())
        .hash(&mut h);
    meta.finalizers.hash(&mut h);
    for key in [
        crate::api::ocirepository::RECONCILE_REQUESTED_AT,
        crate::api::flux_ocirepository::LAYERS_ANNOTATION,
        crate::api::flux_ocirepository::PLATFORM_ANNOTATION,
    ] {
        annotation(key).hash(&mut h);
    }
    Some(h.finish())
}

/// Runs kube-runtime's controller over the objects of kind `K` that `labels` selects.
async fn run_kind<K, F>(kctx: Arc<KubeContext>, scope: &WatchScope, labels: Option<&str>, stop: F)
where
    K: SourceKind,
    F: std::future::Future<Output = ()> + Send + Sync + 'static,
{
    let api: Api<K> = match &scope.namespace {
        Some(ns) => Api::namespaced(kctx.client.clone(), ns),
        None => Api::all(kctx.client.clone()),
    };
    let mut wc = watcher::Config::default();
    if let Some(sel) = labels {
        wc = wc.labels(sel);
    }
    tracing::info!(kind = K::LABEL, selector = labels.unwrap_or(""), "watching");
    let (reader, writer) = reflector::store();
    let trigger = watcher(api, wc)
        .default_backoff()
        .reflect(writer)
        .touched_objects()
        .predicate_filter(change_of_interest::<K>, Default::default());
    Controller::for_stream(trigger, reader)
        .with_config(ControllerConfig::default().concurrency(scope.concurrency))
        .graceful_shutdown_on(stop)
        .run(reconcile_object::<K>, error_policy::<K>, kctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(kind = K::LABEL, error = %e, "controller event");
            }
        })
        .await;
}

/// True once the ExternalArtifact API was reported missing; flips it on first call.
pub(crate) fn first_missing_report(flag: &AtomicBool) -> bool {
    !flag.swap(true, Ordering::Relaxed)
}
