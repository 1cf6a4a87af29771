//! Writing an object's status: the whole status as one merge patch with the keys of the
//! kind's schema, the in-progress status while a reconcile runs ([`Showing`], which also
//! keeps the ExternalArtifact's Ready in step), and Reconciling for a new object before
//! its finalizer round-trip; a final write the API server refuses is reported by an
//! Event and a metric and retried with backoff ([`write_final`]).
//!
//! A merge patch that names every key, not server-side apply: apply only clears the
//! fields its own manager set before, so an object taken over from Flux's
//! source-controller (drop-in mode) would keep that controller's stale fields. Tried on
//! the real API server: after a merge patch by `source-controller` set `observedIgnore`,
//! an apply by `ocisource` without it left `observedIgnore` in place.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::api::conditions::reason;
use crate::api::{OciRepository, OciRepositoryStatus};
use crate::domain::status::{Disposition, Event, EventType};
use crate::reconcile::{self, Requeue};

use super::events::publish_events;
use super::{external_artifact, ControllerError, KubeContext, SourceKind};

/// Writes `status` with one merge patch on the status subresource. The whole status is
/// sent, unset fields as `null` (see [`status_patch`]).
pub async fn patch_status<K: SourceKind>(
    api: &Api<K>,
    name: &str,
    status: &OciRepositoryStatus,
) -> Result<(), kube::Error> {
    let patch = status_patch::<K>(status).map_err(kube::Error::SerdeError)?;
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// The merge patch `{"status": ...}` that makes the stored status equal `status`. A merge
/// patch leaves absent keys untouched, so every unset status field is sent as `null`
/// (which deletes it): otherwise removing `spec.ignore`, `spec.layerSelector` or
/// `spec.platform` would leave the old `observed*` value in place, and every later
/// reconcile would see a changed setting and download and re-package the artifact. Only
/// the keys of K's status schema are sent (Flux's kind has no `observedPlatform`).
pub fn status_patch<K: SourceKind>(
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

/// Writes the final status of a reconcile with [`patch_status`]. A write the API server
/// refuses (422 Invalid, 413, a timeout: any error) leaves the object showing nothing
/// of this reconcile, so it is reported elsewhere: a Warning Event `PatchOperationFailed`
/// on the object (posted to `--events-addr` too) saying why, beside the reconcile's own
/// events, and the `ocisource_status_write_failures` metric. The error returned says when
/// to try again: the reconcile's backoff (the context's retry delays) over the refusals
/// in a row, or the failed reconcile's own backoff when that is longer.
pub(super) async fn write_final<K: SourceKind>(
    kctx: &KubeContext,
    api: &Api<K>,
    obj: &K,
    report: &reconcile::Report,
) -> Result<(), ControllerError> {
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    // Counted beside the reconcile's own failures, under a key no object has.
    let refusals = format!("{ns}/{name} status");
    let Err(source) = patch_status(api, &name, &report.status).await else {
        kctx.core.succeeded(&refusals);
        return Ok(());
    };
    kctx.core.metrics.status_write_failed(&K::group(&()));
    let object = format!("{ns}/{name}");
    let refused = Event {
        type_: EventType::Warning,
        reason: reason::PATCH_OPERATION_FAILED.into(),
        message: format!(
            "failed to write the status of {object}: {}",
            reconcile::error::chain(&source)
        ),
        artifact: None,
    };
    let events: Vec<Event> = report.events.iter().cloned().chain([refused]).collect();
    publish_events(kctx, &obj.object_ref(&()), obj.meta(), &events).await;
    let own = match (&report.error, report.requeue) {
        (Some(e), Requeue::After(d)) if e.disposition() == Disposition::Retry => d,
        _ => Duration::ZERO,
    };
    let core = &kctx.core;
    let retry_in = own.max(core.settings.retry.backoff(core.failed(&refusals)));
    Err(ControllerError::PatchStatus {
        object,
        source,
        retry_in,
    })
}

/// Shows a reconcile under way: patches the in-progress status, and the ExternalArtifact
/// when its Ready would change (a stored artifact that must not look Ready while a new
/// generation or revision is being built).
pub(super) struct Showing<'a, K: SourceKind> {
    pub(super) kctx: &'a KubeContext,
    pub(super) api: &'a Api<K>,
    /// The object as the reconciler reads it.
    pub(super) obj: &'a OciRepository,
    /// The ExternalArtifact's Ready status last published in this reconcile (`None`:
    /// nothing published yet).
    pub(super) published: std::sync::Mutex<Option<Option<String>>>,
    /// Set once an in-progress status was written (the final status must then be too).
    pub(super) patched: AtomicBool,
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
        self.patched.store(true, Ordering::Relaxed);
        if let Err(e) = patch_status(self.api, &name, status).await {
            tracing::warn!(error = %e, "failed to show the reconcile in progress");
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

/// A new object (no finalizer yet, no condition) reads Reconciling and Ready=Unknown
/// before the finalizer round-trip, so nothing (kstatus, a health check) takes an object
/// without status for a Current one.
pub(super) async fn show_new<K: SourceKind>(api: &Api<K>, obj: &K) {
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
        tracing::warn!(error = %e, "failed to show the reconcile in progress");
    }
}
