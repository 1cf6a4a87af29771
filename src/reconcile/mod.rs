//! The reconciler of one `OCIRepository`, free of Kubernetes I/O so that the controller
//! and the one-shot `ocisource reconcile -f` run the very same steps:
//! `source::resolve` → (unchanged? stop) → `source::verify` → `artifact::store`
//! (`steps`), then one pure fold of the outcome into conditions and events
//! (`domain::status::fold`, the only writer of both, Flux's wording included), and the
//! status and requeue made from them (`outcome`). Work under way is shown through
//! `progress::Progress` (a new generation at the start, a new revision once resolved); the
//! caller writes the final status, emits the events and publishes the ExternalArtifact.
//! Adapters are reached only through `ports`.

pub mod artifact;
pub mod cloud;
pub mod context;
pub mod credentials;
pub mod error;
mod outcome;
pub mod progress;
pub mod shared;
pub mod source;
mod steps;

use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::ResourceExt;

use crate::api::conditions::from_k8s;
use crate::api::ocirepository::RECONCILE_REQUESTED_AT;
use crate::api::validate;
use crate::api::{Flavour, OciRepository, OciRepositoryStatus};
use crate::domain::status::{self, Event};

pub use context::{Context, Settings};
pub use error::ReconcileError;
pub use progress::{Progress, Silent};

use outcome::{flux_retried, handled_request, next_status, outcome_of, requeue_of};
use progress::Announcer;
use steps::Subject;

/// When to reconcile again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// After this long.
    After(Duration),
    /// Only when the object changes (stalled or suspended).
    AwaitChange,
}

/// Everything one reconcile produced.
#[derive(Debug)]
pub struct Report {
    /// The new status, to be written once.
    pub status: OciRepositoryStatus,
    /// Events to emit, reason = condition reason.
    pub events: Vec<Event>,
    /// When to come back.
    pub requeue: Requeue,
    /// The error, if the reconcile failed (already folded into `status`).
    pub error: Option<ReconcileError>,
    /// True when a new artifact was stored (not just confirmed unchanged).
    pub pulled: bool,
}

impl Report {
    /// True when Ready is True.
    pub fn ready(&self) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.type_ == crate::api::conditions::READY && c.status == "True")
    }
}

/// Reconciles `obj` once at time `now`, showing nothing while it runs; see [`reconcile_showing`].
pub async fn reconcile(obj: &OciRepository, ctx: &Context, now: DateTime<Utc>) -> Report {
    reconcile_showing(obj, ctx, now, &Silent).await
}

/// Reconciles `obj` once at time `now`. Never fails: failures are folded into the status
/// of the returned report, and the last good artifact stays in it. A new object or
/// generation is shown as Reconciling (Ready Unknown) through `progress` before any work,
/// and a new revision as ArtifactOutdated once it is resolved; `status.observedGeneration`
/// advances only when the reconcile succeeded or stalled, as in Flux.
pub async fn reconcile_showing(
    obj: &OciRepository,
    ctx: &Context,
    now: DateTime<Utc>,
    progress: &dyn Progress,
) -> Report {
    reconcile_as(obj, &Flavour::Ocisource, ctx, now, progress).await
}

/// [`reconcile_showing`] for an object read with `flavour`: Flux's own OCIRepository kind
/// ([`crate::api::FluxOciRepository::view`]) runs the very same steps with Flux's
/// defaults (first matching layer, Flux's status fields only, its own store folder).
pub async fn reconcile_as(
    obj: &OciRepository,
    flavour: &Flavour,
    ctx: &Context,
    now: DateTime<Utc>,
    progress: &dyn Progress,
) -> Report {
    let previous = obj.status.clone().unwrap_or_default();
    if obj.spec.suspend {
        return suspended(obj, previous);
    }
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let name = obj.name_any();
    let generation = obj.metadata.generation.unwrap_or(0);
    // The door: the spec is validated once, into the typed value every step takes.
    let desired = validate::desired(&obj.spec, flavour);
    let started = std::time::Instant::now();
    let previous_conditions = from_k8s(&previous.conditions);
    let mut announcer = Announcer::start(
        progress,
        &previous,
        &previous_conditions,
        generation,
        requested(obj, &previous),
        now,
    )
    .await;
    let subject = desired.as_ref().map(|desired| Subject {
        desired,
        flavour,
        namespace: &namespace,
        name: &name,
        generation,
        same_settings: artifact::same_settings(&obj.spec, &previous, flavour),
    });
    let result = steps::attempt(subject, &previous, ctx, now, &mut announcer).await;
    let (outcome, success, error) = outcome_of(result, obj, flavour, desired.as_ref().ok());
    let flux_retry = flux_retried(flavour, &outcome, &previous, generation, &desired);
    let trace = error.as_ref().and_then(ReconcileError::trace_event);
    let decision = status::fold(status::Input {
        previous: &previous_conditions,
        previous_digest: previous.artifact.as_ref().map(|a| a.digest.as_str()),
        previous_revision: previous.artifact.as_ref().map(|a| a.revision.as_str()),
        generation,
        url: &obj.spec.url,
        now,
        outcome: &outcome,
        shown: &announcer.shown,
        flux_retry: flux_retry.as_ref(),
        trace: trace.as_ref(),
    });
    let key = format!("{namespace}/{name}");
    let pulled = success.as_ref().is_some_and(|s| s.pulled);
    let next = next_status(
        obj,
        flavour,
        previous,
        &decision,
        error.as_ref(),
        success,
        ctx,
    );
    if let Some(artifact) = next.artifact.as_ref().filter(|_| error.is_none()) {
        let size = artifact.size.unwrap_or(0);
        ctx.metrics
            .observe_artifact(flavour.api_group(), &namespace, &name, size);
    }
    let requeue = requeue_of(error.as_ref(), desired.as_ref().ok(), ctx, &key, now);
    let reason = error
        .as_ref()
        .map_or(status::reason::SUCCEEDED, ReconcileError::reason);
    ctx.metrics.observe_reconcile(reason, started.elapsed());
    Report {
        status: next,
        events: decision.events,
        requeue,
        error,
        pulled,
    }
}

/// True when the object asks for a reconcile it has not had yet
/// (`reconcile.fluxcd.io/requestedAt` unlike `status.lastHandledReconcileAt`).
fn requested(obj: &OciRepository, previous: &OciRepositoryStatus) -> bool {
    obj.annotations()
        .get(RECONCILE_REQUESTED_AT)
        .is_some_and(|r| previous.last_handled_reconcile_at.as_ref() != Some(r))
}

/// The report of a suspended object: its status unchanged but for a requested reconcile
/// recorded in `lastHandledReconcileAt`, as Flux does; nothing happens until it changes.
fn suspended(obj: &OciRepository, previous: OciRepositoryStatus) -> Report {
    let status = OciRepositoryStatus {
        last_handled_reconcile_at: handled_request(obj, &previous),
        ..previous
    };
    Report {
        status,
        events: Vec::new(),
        requeue: Requeue::AwaitChange,
        error: None,
        pulled: false,
    }
}
