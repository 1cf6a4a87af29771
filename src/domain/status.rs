//! Pure status rules: fold the outcome of one reconcile into the object's conditions the
//! way Flux does (Ready summary, Reconciling/Stalled, ArtifactInStorage, ArtifactOutdated,
//! FetchFailed, StorageOperationFailed, SourceVerified) and decide which events to emit;
//! `status_progress.rs` holds the conditions shown while a reconcile runs and the
//! ExternalArtifact's. Every message it writes is escaped and bounded
//! (`domain::text::bounded`): a registry's text can neither overflow the CRD's limit,
//! which would lose the whole status write, nor carry control characters. The time is
//! passed in; nothing here reads a clock or imports kube, k8s-openapi, tokio or axum
//! (`api::conditions` converts to the wire type).

use chrono::{DateTime, Utc};

use super::flux_text::{self, Retried};
use super::text::{bounded, CONDITION_MESSAGE_MAX};

#[path = "status_conditions.rs"]
mod conditions;
#[path = "status_progress.rs"]
mod progress;

pub use conditions::{reason, Condition, ConditionStatus, ConditionType};
pub use progress::{building, external_artifact_conditions, retime, starting, SourceState};

/// Which step failed, hence which condition records the failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailedStep {
    /// Resolve or pull: `FetchFailed` True.
    Fetch,
    /// Signature check: `SourceVerified` False.
    Verify,
    /// Packaging or storing: `StorageOperationFailed` True.
    Storage,
}

/// What happens after a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Nothing helps until the spec changes (`Stalled` True, no requeue).
    Stalled,
    /// Retry with backoff (`Reconciling` True, `ProgressingWithRetry`).
    Retry,
}

/// A failed reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The step that failed.
    pub step: FailedStep,
    /// Condition (and event) reason.
    pub reason: String,
    /// Message: the error chain joined with ": ".
    pub message: String,
    /// Stalled or retry.
    pub disposition: Disposition,
    /// The upstream revision, when it was resolved before the failure.
    pub new_revision: Option<String>,
    /// The signature outcome, when the verification step ran and passed before a later
    /// step failed (`None`: not reached). Flux keeps `SourceVerified=True` then.
    pub verification: Option<Verification>,
}

/// The signature outcome of a successful reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verification {
    /// `spec.verify` is not set: `SourceVerified` is removed.
    NotConfigured,
    /// Verified: `SourceVerified` True with this message.
    Verified {
        /// E.g. "verified signature of revision '<rev>'".
        message: String,
    },
}

/// Where the artifact's content came from, from its manifest annotations
/// (`org.opencontainers.image.source` and `.revision`), as Flux adds it to events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// Source repository, e.g. a Git URL.
    pub source: String,
    /// Source revision, e.g. `main@sha1:…`.
    pub revision: String,
}

/// The result of one reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An artifact for `revision` is stored (new or unchanged).
    Stored {
        /// `<tag>@sha256:<hex>` or `sha256:<hex>`.
        revision: String,
        /// `sha256:<hex>` of the stored tar.gz.
        digest: String,
        /// Signature outcome.
        verification: Verification,
        /// Origin annotations, when the manifest has both.
        origin: Option<Origin>,
    },
    /// The reconcile failed.
    Failed(Failure),
}

/// Everything `fold` needs.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// Conditions before this reconcile.
    pub previous: &'a [Condition],
    /// `status.artifact.digest` before this reconcile.
    pub previous_digest: Option<&'a str>,
    /// `status.artifact.revision` before this reconcile.
    pub previous_revision: Option<&'a str>,
    /// Current `metadata.generation`.
    pub generation: i64,
    /// `spec.url`, named in success events.
    pub url: &'a str,
    /// The time of this reconcile.
    pub now: DateTime<Utc>,
    /// What happened.
    pub outcome: &'a Outcome,
    /// The conditions shown while the reconcile ran (`progress`): a condition that comes
    /// back to its previous status after showing another moved twice ([`retime`]).
    pub shown: &'a [Condition],
    /// Flux's kind: where a retried failure happened, for the `Reconciling` message Flux
    /// leaves then (`flux_text::reconciling_message`); `None` for ocisource's own wording.
    pub flux_retry: Option<&'a Retried<'a>>,
    /// The Trace event Flux records before this failure's Warning, if any.
    pub trace: Option<&'a Event>,
}

/// Whether an event is routine or a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
    /// Flux's `Trace`: recorded as a Normal Kubernetes Event, never posted to
    /// notification-controller (fluxcd/pkg's recorder does the same).
    Trace,
}

/// An event to emit; its reason equals the condition reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
    /// The stored artifact's revision and digest, on the events of a success (NewArtifact,
    /// recovery): Flux's `revision` and `digest` event metadata. `None` on failures.
    pub artifact: Option<EventArtifact>,
}

/// The artifact an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventArtifact {
    /// `status.artifact.revision`.
    pub revision: String,
    /// `status.artifact.digest` (of the stored tar.gz).
    pub digest: String,
}

/// The new conditions and the events to emit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Conditions in a fixed order: Ready, Reconciling, Stalled, FetchFailed,
    /// StorageOperationFailed, ArtifactOutdated, ArtifactInStorage, SourceVerified.
    pub conditions: Vec<Condition>,
    /// Events, in order.
    pub events: Vec<Event>,
}

/// The Ready and ArtifactInStorage message on success, as Flux writes it (sic: it says
/// "digest" and prints the revision).
pub fn stored_message(revision: &str) -> String {
    format!("stored artifact for digest '{revision}'")
}

/// The message of a `NewArtifact` (or recovery `Succeeded`) event, as Flux's `notify`
/// writes it: `stored artifact with revision '<rev>' from '<url>'`, plus the origin
/// source and revision when the manifest carries both.
pub fn stored_event_message(revision: &str, url: &str, origin: Option<&Origin>) -> String {
    let message = format!("stored artifact with revision '{revision}' from '{url}'");
    match origin {
        Some(o) => format!(
            "{message}, origin source '{}', origin revision '{}'",
            o.source, o.revision
        ),
        None => message,
    }
}

/// Folds an outcome into conditions and events (see [`Decision`]): the one writer of
/// both, Flux's wording for its own kind and the times of conditions shown during the
/// reconcile included.
///
/// On success, Ready and ArtifactInStorage are True, failure conditions and
/// Reconciling/Stalled are removed. On failure the failed step's condition and Ready False
/// carry the reason and message, Reconciling or Stalled says what happens next, and the
/// last stored artifact stays in ArtifactInStorage. Other failure conditions are removed:
/// the latest failure is the one reported. `lastTransitionTime` only moves when a
/// condition's status changes.
pub fn fold(input: Input<'_>) -> Decision {
    let mut next = Builder {
        input,
        out: Vec::new(),
    };
    let previous_ready = next.previous(ConditionType::Ready).cloned();
    let mut events = Vec::new();
    match input.outcome {
        Outcome::Stored {
            revision,
            digest,
            verification,
            origin,
        } => {
            let message = stored_message(revision);
            next.set(
                ConditionType::Ready,
                ConditionStatus::True,
                reason::SUCCEEDED,
                &message,
            );
            next.set(
                ConditionType::ArtifactInStorage,
                ConditionStatus::True,
                reason::SUCCEEDED,
                &message,
            );
            if let Verification::Verified { message } = verification {
                next.set(
                    ConditionType::SourceVerified,
                    ConditionStatus::True,
                    reason::SUCCEEDED,
                    message,
                );
            }
            let was_failing = previous_ready.is_some_and(|r| r.status != ConditionStatus::True);
            let message = stored_event_message(revision, input.url, origin.as_ref());
            let reason = if input.previous_digest != Some(digest.as_str()) {
                Some(reason::NEW_ARTIFACT)
            } else {
                was_failing.then_some(reason::SUCCEEDED)
            };
            if let Some(reason) = reason {
                events.push(Event {
                    type_: EventType::Normal,
                    reason: reason.into(),
                    message: bounded(&message, CONDITION_MESSAGE_MAX).into_owned(),
                    artifact: Some(EventArtifact {
                        revision: revision.clone(),
                        digest: digest.clone(),
                    }),
                });
            }
        }
        Outcome::Failed(failure) => {
            // Cut and escaped once, so a repeat of the failure compares equal to the
            // message stored the last time.
            let message = bounded(&failure.message, CONDITION_MESSAGE_MAX);
            let (reason, message) = (failure.reason.as_str(), message.as_ref());
            next.set(
                ConditionType::Ready,
                ConditionStatus::False,
                reason,
                message,
            );
            match failure.disposition {
                Disposition::Retry => next.set(
                    ConditionType::Reconciling,
                    ConditionStatus::True,
                    reason::PROGRESSING_WITH_RETRY,
                    message,
                ),
                Disposition::Stalled => next.set(
                    ConditionType::Stalled,
                    ConditionStatus::True,
                    reason,
                    message,
                ),
            }
            match failure.step {
                FailedStep::Fetch => next.set(
                    ConditionType::FetchFailed,
                    ConditionStatus::True,
                    reason,
                    message,
                ),
                FailedStep::Storage => next.set(
                    ConditionType::StorageOperationFailed,
                    ConditionStatus::True,
                    reason,
                    message,
                ),
                FailedStep::Verify => next.set(
                    ConditionType::SourceVerified,
                    ConditionStatus::False,
                    reason,
                    message,
                ),
            }
            // Flux marks ArtifactOutdated only when an artifact is already stored.
            match &failure.new_revision {
                Some(rev)
                    if input
                        .previous_revision
                        .is_some_and(|previous| previous != rev.as_str()) =>
                {
                    let text = format!("new revision '{rev}'");
                    next.set(
                        ConditionType::ArtifactOutdated,
                        ConditionStatus::True,
                        reason::NEW_REVISION,
                        &text,
                    );
                }
                Some(_) => {}
                None => next.keep(ConditionType::ArtifactOutdated),
            }
            next.keep(ConditionType::ArtifactInStorage);
            match (&failure.verification, failure.step) {
                (_, FailedStep::Verify) | (Some(Verification::NotConfigured), _) => {}
                (Some(Verification::Verified { message }), _) => next.set(
                    ConditionType::SourceVerified,
                    ConditionStatus::True,
                    reason::SUCCEEDED,
                    message,
                ),
                // Not reached: an earlier success stays, an earlier failure is dropped to
                // be computed again (Flux deletes a False SourceVerified up front).
                (None, _) => next.keep_if(ConditionType::SourceVerified, ConditionStatus::True),
            }
            let repeated = previous_ready.is_some_and(|r| {
                r.status == ConditionStatus::False && r.reason == reason && r.message == message
            });
            if !repeated {
                events.push(Event {
                    type_: EventType::Warning,
                    reason: reason.into(),
                    message: message.into(),
                    artifact: None,
                });
            }
        }
    }
    next.out.sort_by_key(|c| c.type_);
    let mut conditions = next.out;
    retime(&mut conditions, input.previous, input.shown, input.now);
    if let (Some(retried), Outcome::Failed(failure)) = (input.flux_retry, input.outcome) {
        if failure.disposition == Disposition::Retry {
            let message = flux_text::reconciling_message(retried.clone());
            set_reconciling(&mut conditions, &message);
        }
    }
    // Flux's Trace event comes before the failure's Warning, recorded when that one is.
    if let Some(trace) = input.trace {
        if events.iter().any(|e| e.type_ == EventType::Warning) {
            events.insert(0, trace.clone());
        }
    }
    Decision { conditions, events }
}

/// Writes `message` into the `Reconciling` condition of `conditions`, if there is one.
fn set_reconciling(conditions: &mut [Condition], message: &str) {
    for c in conditions
        .iter_mut()
        .filter(|c| c.type_ == ConditionType::Reconciling)
    {
        c.message = bounded(message, CONDITION_MESSAGE_MAX).into_owned();
    }
}

struct Builder<'a> {
    input: Input<'a>,
    out: Vec<Condition>,
}

impl Builder<'_> {
    fn previous(&self, type_: ConditionType) -> Option<&Condition> {
        self.input.previous.iter().find(|c| c.type_ == type_)
    }

    fn set(&mut self, type_: ConditionType, status: ConditionStatus, reason: &str, message: &str) {
        let last_transition_time = match self.previous(type_) {
            Some(prev) if prev.status == status => prev.last_transition_time,
            _ => self.input.now,
        };
        self.out.push(Condition {
            type_,
            status,
            reason: reason.to_string(),
            message: bounded(message, CONDITION_MESSAGE_MAX).into_owned(),
            observed_generation: self.input.generation,
            last_transition_time,
        });
    }

    /// Carries a previous condition over unchanged, its `observedGeneration` included: it
    /// still says what was true at that generation (Flux leaves a condition its failed
    /// reconcile did not reach as it was).
    fn keep(&mut self, type_: ConditionType) {
        if let Some(prev) = self.previous(type_).cloned() {
            self.out.push(prev);
        }
    }

    /// [`Builder::keep`], only when the previous condition has `status`.
    fn keep_if(&mut self, type_: ConditionType, status: ConditionStatus) {
        if self.previous(type_).is_some_and(|c| c.status == status) {
            self.keep(type_);
        }
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "status_text_tests.rs"]
mod text_tests;
