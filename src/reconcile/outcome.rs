//! From the steps' result to the report's parts: the outcome the status fold takes, the
//! status written back, and when to come back. Reached only from `reconcile`.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::ResourceExt;

use crate::api::conditions::all_to_k8s;
use crate::api::ocirepository::RECONCILE_REQUESTED_AT;
use crate::api::validate::InvalidSpec;
use crate::api::{Flavour, OciRepository, OciRepositoryStatus};
use crate::domain::desired::Desired;
use crate::domain::flux_text::{self, Retried};
use crate::domain::requeue;
use crate::domain::status::{self, Disposition, Failure, Outcome};

use super::artifact::{self, Stored};
use super::steps::StepFailure;
use super::{Context, ReconcileError, Requeue};

fn jitter_seed(key: &str, now: DateTime<Utc>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    now.timestamp_nanos_opt().unwrap_or_default().hash(&mut h);
    h.finish()
}

/// `status.lastHandledReconcileAt` after this reconcile: the requested value, recorded
/// even for a suspended object, as Flux does.
pub(super) fn handled_request(
    obj: &OciRepository,
    previous: &OciRepositoryStatus,
) -> Option<String> {
    obj.annotations()
        .get(RECONCILE_REQUESTED_AT)
        .cloned()
        .or_else(|| previous.last_handled_reconcile_at.clone())
}

/// The steps' result as the status fold takes it, with the stored artifact on success
/// and the error on failure (worded for `flavour`).
pub(super) fn outcome_of(
    result: Result<Stored, StepFailure>,
    obj: &OciRepository,
    flavour: &Flavour,
    desired: Option<&Desired>,
) -> (Outcome, Option<Stored>, Option<ReconcileError>) {
    match result {
        Ok(s) => {
            let outcome = Outcome::Stored {
                revision: s.artifact.revision.clone(),
                digest: s.artifact.digest.clone(),
                verification: s.verification.clone(),
                origin: artifact::origin(&s.artifact),
            };
            (outcome, Some(s), None)
        }
        Err(f) => {
            let failure = Failure {
                verification: f.verification,
                ..f.error
                    .failure_as(flavour, &obj.spec.url, f.revision, desired)
            };
            (Outcome::Failed(failure), None, Some(f.error))
        }
    }
}

/// Flux's kind: where a failure happened, for the `Reconciling` message Flux leaves when
/// it is retried (the fold uses it only then). `None` for ocisource's own kind.
pub(super) fn flux_retried<'a>(
    flavour: &Flavour,
    outcome: &'a Outcome,
    previous: &'a OciRepositoryStatus,
    generation: i64,
    desired: &Result<Desired, InvalidSpec>,
) -> Option<Retried<'a>> {
    if let Flavour::Ocisource = flavour {
        return None;
    }
    let new_revision = match outcome {
        Outcome::Failed(f) => f.new_revision.as_deref(),
        Outcome::Stored { .. } => None,
    };
    Some(Retried {
        observed_generation: previous.observed_generation,
        generation,
        stored_revision: previous.artifact.as_ref().map(|a| a.revision.as_str()),
        resolved: new_revision.and_then(|r| {
            let url = &desired.as_ref().ok()?.url;
            Some((r, flux_text::reference(url, r)))
        }),
    })
}

/// The status after this reconcile: the fold's conditions; `observedGeneration` when the
/// reconcile finished (succeeded or stalled); the requested reconcile handled; on
/// success, the artifact and the recipe it was built with (Flux's kind has no
/// `observedPlatform`: its opt-in is in the metadata) and `status.url` of its
/// `latest.tar.gz`. The last good artifact stays on failure.
pub(super) fn next_status(
    obj: &OciRepository,
    flavour: &Flavour,
    previous: OciRepositoryStatus,
    decision: &status::Decision,
    error: Option<&ReconcileError>,
    success: Option<Stored>,
    ctx: &Context,
) -> OciRepositoryStatus {
    let finished = error.is_none_or(|e| e.disposition() == Disposition::Stalled);
    let mut next = OciRepositoryStatus {
        conditions: all_to_k8s(&decision.conditions),
        last_handled_reconcile_at: handled_request(obj, &previous),
        ..previous
    };
    if finished {
        next.observed_generation = obj.metadata.generation.or(Some(0));
    }
    if let Some(s) = success {
        if let Some(url) = artifact::latest_url(&s.artifact, ctx) {
            next.url = Some(url);
        }
        next.artifact = Some(s.artifact);
        next.observed_ignore = obj.spec.ignore.clone();
        next.observed_layer_selector = obj.spec.layer_selector.clone();
        next.observed_platform = match flavour {
            Flavour::Ocisource => obj.spec.platform.clone(),
            Flavour::Flux(_) => None,
        };
    }
    next
}

/// When to come back: the interval (with jitter) after a success, never after a stall
/// (only a spec change helps), Flux's backoff after a retried failure (the settings'
/// retry delays, whatever the interval). Only a valid spec
/// succeeds or retries: an invalid one stalls.
pub(super) fn requeue_of(
    error: Option<&ReconcileError>,
    desired: Option<&Desired>,
    ctx: &Context,
    key: &str,
    now: DateTime<Utc>,
) -> Requeue {
    let interval = desired.map_or(Duration::from_secs(600), |d| d.interval);
    match error {
        None => {
            ctx.succeeded(key);
            Requeue::After(requeue::with_jitter(interval, jitter_seed(key, now)))
        }
        Some(e) if e.disposition() == Disposition::Stalled => Requeue::AwaitChange,
        Some(_) => Requeue::After(ctx.settings.retry.backoff(ctx.failed(key))),
    }
}
