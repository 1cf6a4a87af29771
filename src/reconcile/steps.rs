//! The steps of one reconcile, each taking the previous one's typed result: resolve →
//! (current? keep) → verify → store, within `spec.timeout`; a failed step says what was
//! learnt before it failed. Reached only from `reconcile`.

use chrono::{DateTime, Utc};

use crate::api::validate::InvalidSpec;
use crate::api::{Flavour, OciRepositoryStatus};
use crate::domain::desired::Desired;
use crate::domain::status::Verification;

use super::artifact::{self, Stored};
use super::progress::Announcer;
use super::{source, Context, ReconcileError};

/// A failed step, with what was learnt before it failed.
pub(super) struct StepFailure {
    pub(super) error: ReconcileError,
    /// The upstream revision, when resolved.
    pub(super) revision: Option<String>,
    /// The verification outcome, when that step ran and passed.
    pub(super) verification: Option<Verification>,
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

/// The object of one reconcile, validated at the door: what its spec asks for, whose
/// defaults apply, its namespace, name and generation, and whether the stored artifact
/// was built with the settings the spec asks for now.
pub(super) struct Subject<'a> {
    pub(super) desired: &'a Desired,
    pub(super) flavour: &'a Flavour,
    pub(super) namespace: &'a str,
    pub(super) name: &'a str,
    pub(super) generation: i64,
    pub(super) same_settings: bool,
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

/// Runs the steps for a valid spec within its `spec.timeout`; an invalid one fails at
/// once with the problems found at the door.
pub(super) async fn attempt(
    subject: Result<Subject<'_>, &InvalidSpec>,
    previous: &OciRepositoryStatus,
    ctx: &Context,
    now: DateTime<Utc>,
    announcer: &mut Announcer<'_>,
) -> Result<Stored, StepFailure> {
    let subject = subject.map_err(|invalid| StepFailure::new(invalid.clone()))?;
    let timeout = subject.desired.timeout;
    let work = steps(&subject, previous, ctx, now, announcer);
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(StepFailure::new(ReconcileError::Timeout(timeout))),
    }
}
