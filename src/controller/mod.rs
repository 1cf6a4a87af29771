//! The Kubernetes side of the controller: kube-runtime's `Controller` over OCIRepository
//! objects (ours, and Flux's own kind in drop-in mode: one generic path, see
//! [`kind::SourceKind`]), the finalizer, the status (the work under way when
//! `crate::reconcile` shows it, then ONE final patch), events, and the Flux
//! `ExternalArtifact` kept in step. All decisions are made by `crate::reconcile`, which
//! has no Kubernetes I/O; this module only reads and writes the API.

mod events;
pub mod external_artifact;
pub mod kind;
pub mod leader;
pub mod notify;
pub mod secrets;
pub mod service_account_tokens;
pub mod startup;
mod status;
mod watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::{Api, Client, ResourceExt};

use crate::domain::text::{bounded, CONDITION_MESSAGE_MAX};
use crate::ports::store::object_dir_in;
use crate::reconcile::{self, Context, Requeue};

pub use events::reporter;
pub use kind::SourceKind;
pub use status::{patch_status, status_patch};
pub use watch::{change_of_interest, run, WatchScope};

use events::publish_events;
use status::{show_new, write_final, Showing};

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
    /// The ExternalArtifacts published, so an unchanged one is not written again.
    pub published: external_artifact::Published,
}

/// Kubernetes I/O failures (the reconcile's own failures are in the status, not here).
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Writing the status failed (reported by an Event and a metric, see
    /// `status::write_final`).
    #[error("failed to patch status of {object}")]
    PatchStatus {
        /// `namespace/name`.
        object: String,
        /// Cause.
        #[source]
        source: kube::Error,
        /// When to reconcile again: the reconcile's backoff.
        retry_in: Duration,
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

async fn apply<K: SourceKind>(
    obj: Arc<K>,
    kctx: Arc<KubeContext>,
) -> Result<Action, ControllerError> {
    let ns = obj
        .namespace()
        .ok_or_else(|| ControllerError::NoNamespace(obj.name_any()))?;
    let (view, flavour) = obj.view();
    let api: Api<K> = Api::namespaced(kctx.client.clone(), &ns);
    let showing = Showing {
        kctx: &kctx,
        api: &api,
        obj: &view,
        published: std::sync::Mutex::new(None),
        patched: AtomicBool::new(false),
    };
    let report =
        reconcile::reconcile_as(&view, &flavour, &kctx.core, chrono::Utc::now(), &showing).await;
    let write_status = || write_final(&kctx, &api, obj.as_ref(), &report);
    if view.spec.suspend {
        tracing::debug!("suspended; not reconciling");
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
        let error = reconcile::error::chain(e);
        tracing::warn!(reason = e.reason(), error = %bounded(&error, CONDITION_MESSAGE_MAX), "reconcile failed");
    }
    // A reconcile that changed and showed nothing (the usual interval reconcile) writes
    // nothing.
    if showing.patched.load(Ordering::Relaxed) || view.status.as_ref() != Some(&report.status) {
        write_status().await?;
    }
    // The Events and the ExternalArtifact do not depend on each other: written at once,
    // the reconcile waits for the slower of the two, not their sum.
    let reference = obj.object_ref(&());
    let events = publish_events(&kctx, &reference, obj.meta(), &report.events);
    let external = async {
        if K::EXTERNAL_ARTIFACT && kctx.external_artifact {
            let mut updated = view.clone();
            updated.status = Some(report.status.clone());
            external_artifact::publish(&kctx, &updated).await;
        }
    };
    tokio::join!(events, external);
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
    kctx.core
        .metrics
        .remove_object(flavour.api_group(), &ns, &name);
    if let Some(uid) = &obj.meta().uid {
        kctx.published.forget(uid);
    }
    Ok(Action::await_change())
}

/// Reconciles one object: finalizer handling, then the steps, status, events, ExternalArtifact.
/// Everything logged meanwhile carries the object in the `reconcile` span.
#[tracing::instrument(
    name = "reconcile",
    skip_all,
    fields(kind = K::LABEL, object = %format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any()))
)]
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

/// After a failed Kubernetes API call: a refused status write comes back after the
/// reconcile's backoff, any other failure after 15 s.
fn error_policy<K: SourceKind>(
    obj: Arc<K>,
    error: &kube::runtime::finalizer::Error<ControllerError>,
    _kctx: Arc<KubeContext>,
) -> Action {
    let retry_in = match error {
        kube::runtime::finalizer::Error::ApplyFailed(ControllerError::PatchStatus {
            retry_in,
            ..
        }) => *retry_in,
        _ => Duration::from_secs(15),
    };
    tracing::warn!(object = %format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any()), kind = K::LABEL, error = %error, ?retry_in, "kubernetes API call failed; retrying");
    Action::requeue(retry_in)
}

/// True once the ExternalArtifact API was reported missing; flips it on first call.
pub(crate) fn first_missing_report(flag: &AtomicBool) -> bool {
    !flag.swap(true, Ordering::Relaxed)
}
