//! The reconciler of one `OCIRepository`, free of Kubernetes I/O so that the controller
//! and the one-shot `ocisource reconcile -f` run the very same steps:
//! `source::resolve` → (unchanged? stop) → `source::verify` → `artifact::store`, then one
//! pure fold of the outcome into the status (`domain::status::fold`) and the requeue.
//! Work under way is shown through `progress::Progress` (a new generation at the start, a
//! new revision once resolved); the caller writes the final status, emits the events and
//! publishes the ExternalArtifact. Adapters are reached only through `ports`.

pub mod artifact;
pub mod cloud;
pub mod context;
pub mod credentials;
pub mod error;
pub mod flux_text;
pub mod progress;
pub mod shared;
pub mod source;

use std::hash::{Hash, Hasher};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::ResourceExt;

use crate::api::conditions::{all_to_k8s, from_k8s};
use crate::api::ocirepository::RECONCILE_REQUESTED_AT;
use crate::api::validate;
use crate::api::{Flavour, OciRepository, OciRepositoryStatus};
use crate::domain::desired::Desired;
use crate::domain::requeue;
use crate::domain::status::{self, Disposition, Event, EventType, Failure, Outcome, Verification};

pub use context::{Context, Settings};
pub use error::ReconcileError;
pub use progress::{Progress, Silent};

use artifact::Stored;
use progress::Announcer;

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

/// A failed step, with what was learnt before it failed.
struct StepFailure {
    error: ReconcileError,
    /// The upstream revision, when resolved.
    revision: Option<String>,
    /// The verification outcome, when that step ran and passed.
    verification: Option<Verification>,
}

impl StepFailure {
    fn new(error: impl Into<ReconcileError>) -> Self {
        Self {
            error: error.into(),
            revision: None,
            verification: None,
        }
    }
}

fn jitter_seed(key: &str, now: DateTime<Utc>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    now.timestamp_nanos_opt().unwrap_or_default().hash(&mut h);
    h.finish()
}

/// The object of one reconcile, validated at the door: what its spec asks for, whose
/// defaults apply, its namespace, name and generation, and whether the stored artifact
/// was built with the settings the spec asks for now.
struct Subject<'a> {
    desired: &'a Desired,
    flavour: &'a Flavour,
    namespace: &'a str,
    name: &'a str,
    generation: i64,
    same_settings: bool,
}

/// The steps, each taking the previous one's typed result: resolve → (current? keep) →
/// verify → store.
async fn steps(
    subject: &Subject<'_>,
    previous: &OciRepositoryStatus,
    ctx: &Context,
    now: DateTime<Utc>,
    announcer: &mut Announcer<'_>,
) -> Result<Stored, StepFailure> {
    let desired = subject.desired;
    let flavour = subject.flavour;
    let resolved = source::resolve(desired, subject.namespace, ctx)
        .await
        .map_err(StepFailure::new)?;
    let revision = resolved.target.revision.clone();
    let currency = artifact::currency(previous, &resolved, subject.same_settings, ctx, flavour);
    if currency == artifact::Currency::Outdated {
        announcer.building(&resolved.url, &revision).await;
    }
    let verified = source::verify(resolved, subject.generation, previous, ctx)
        .await
        .map_err(|e| StepFailure {
            revision: Some(revision.clone()),
            ..StepFailure::new(e)
        })?;
    if currency == artifact::Currency::Current {
        if let Some(a) = &previous.artifact {
            return Ok(Stored {
                artifact: artifact::with_current_host(a, ctx),
                verification: verified.verification,
                pulled: false,
            });
        }
    }
    let stored = artifact::store(
        desired,
        flavour,
        (subject.namespace, subject.name),
        &verified,
        ctx,
        now,
    )
    .await
    .map_err(|e| StepFailure {
        error: e,
        revision: Some(revision),
        verification: Some(verified.verification.clone()),
    })?;
    Ok(Stored {
        artifact: stored,
        verification: verified.verification,
        pulled: true,
    })
}

/// `status.lastHandledReconcileAt` after this reconcile: the requested value, recorded
/// even for a suspended object, as Flux does.
fn handled_request(obj: &OciRepository, previous: &OciRepositoryStatus) -> Option<String> {
    obj.annotations()
        .get(RECONCILE_REQUESTED_AT)
        .cloned()
        .or_else(|| previous.last_handled_reconcile_at.clone())
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
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let name = obj.name_any();
    let key = format!("{namespace}/{name}");
    let previous = obj.status.clone().unwrap_or_default();
    let generation = obj.metadata.generation.unwrap_or(0);

    if obj.spec.suspend {
        let status = OciRepositoryStatus {
            last_handled_reconcile_at: handled_request(obj, &previous),
            ..previous
        };
        return Report {
            status,
            events: Vec::new(),
            requeue: Requeue::AwaitChange,
            error: None,
            pulled: false,
        };
    }

    // The door: the spec is validated once, into the typed value every step takes.
    let desired = validate::desired(&obj.spec, flavour);
    let started = std::time::Instant::now();
    let previous_conditions = from_k8s(&previous.conditions);
    let requested = obj
        .annotations()
        .get(RECONCILE_REQUESTED_AT)
        .is_some_and(|r| previous.last_handled_reconcile_at.as_ref() != Some(r));
    let mut announcer = Announcer::start(
        progress,
        &previous,
        &previous_conditions,
        generation,
        requested,
        now,
    )
    .await;
    let result = match &desired {
        Err(invalid) => Err(StepFailure::new(invalid.clone())),
        Ok(desired) => {
            let subject = Subject {
                desired,
                flavour,
                namespace: &namespace,
                name: &name,
                generation,
                same_settings: artifact::same_settings(&obj.spec, &previous, flavour),
            };
            let work = steps(&subject, &previous, ctx, now, &mut announcer);
            match tokio::time::timeout(desired.timeout, work).await {
                Ok(r) => r,
                Err(_) => Err(StepFailure::new(ReconcileError::Timeout(desired.timeout))),
            }
        }
    };

    let (outcome, success, error) = match result {
        Ok(s) => (
            Outcome::Stored {
                revision: s.artifact.revision.clone(),
                digest: s.artifact.digest.clone(),
                verification: s.verification.clone(),
                origin: artifact::origin(&s.artifact),
            },
            Some(s),
            None,
        ),
        Err(f) => {
            let failure = Failure {
                verification: f.verification,
                ..f.error.failure_as(
                    flavour,
                    &obj.spec.url,
                    f.revision,
                    desired.as_ref().ok().and_then(|d| d.verify.as_ref()),
                )
            };
            (Outcome::Failed(failure), None, Some(f.error))
        }
    };
    let mut decision = status::fold(status::Input {
        previous: &previous_conditions,
        previous_digest: previous.artifact.as_ref().map(|a| a.digest.as_str()),
        previous_revision: previous.artifact.as_ref().map(|a| a.revision.as_str()),
        generation,
        url: &obj.spec.url,
        now,
        outcome: &outcome,
    });

    status::retime(
        &mut decision.conditions,
        &previous_conditions,
        &announcer.shown,
        now,
    );
    if let (Flavour::Flux(_), Outcome::Failed(failure)) = (flavour, &outcome) {
        if failure.disposition == Disposition::Retry {
            let message = flux_text::reconciling_message(flux_text::Retried {
                observed_generation: previous.observed_generation,
                generation,
                stored_revision: previous.artifact.as_ref().map(|a| a.revision.as_str()),
                resolved: failure.new_revision.as_deref().and_then(|r| {
                    let url = &desired.as_ref().ok()?.url;
                    Some((r, flux_text::reference(url, r)))
                }),
            });
            flux_text::set_reconciling(&mut decision.conditions, &message);
        }
    }
    // Flux's Trace event comes before the failure's event, recorded when that one is.
    if let Some(trace) = error.as_ref().and_then(ReconcileError::trace_event) {
        if decision
            .events
            .iter()
            .any(|e| e.type_ == EventType::Warning)
        {
            decision.events.insert(0, trace);
        }
    }
    let finished = error
        .as_ref()
        .is_none_or(|e| e.disposition() == Disposition::Stalled);
    let mut next = previous.clone();
    next.conditions = all_to_k8s(&decision.conditions);
    if finished {
        next.observed_generation = Some(generation);
    }
    next.last_handled_reconcile_at = handled_request(obj, &previous);
    let pulled = success.as_ref().is_some_and(|s| s.pulled);
    if let Some(s) = success {
        if let Some(url) = artifact::latest_url(&s.artifact, ctx) {
            next.url = Some(url);
        }
        ctx.metrics.observe_artifact(
            flavour.api_group(),
            &namespace,
            &name,
            s.artifact.size.unwrap_or(0),
        );
        next.artifact = Some(s.artifact);
        next.observed_ignore = obj.spec.ignore.clone();
        next.observed_layer_selector = obj.spec.layer_selector.clone();
        // Flux's status schema has no observedPlatform (its opt-in is in the metadata).
        next.observed_platform = match flavour {
            Flavour::Ocisource => obj.spec.platform.clone(),
            Flavour::Flux(_) => None,
        };
    }

    // Only a valid spec succeeds or retries: an invalid one stalls.
    let interval = desired
        .as_ref()
        .map_or(Duration::from_secs(600), |d| d.interval);
    let requeue = match &error {
        None => {
            ctx.succeeded(&key);
            Requeue::After(requeue::with_jitter(interval, jitter_seed(&key, now)))
        }
        Some(e) if e.disposition() == Disposition::Stalled => Requeue::AwaitChange,
        Some(_) => Requeue::After(requeue::backoff(ctx.failed(&key), interval)),
    };
    let reason = error
        .as_ref()
        .map(ReconcileError::reason)
        .unwrap_or(crate::api::conditions::reason::SUCCEEDED);
    ctx.metrics.observe_reconcile(reason, started.elapsed());
    Report {
        status: next,
        events: decision.events,
        requeue,
        error,
        pulled,
    }
}
