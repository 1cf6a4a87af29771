//! The conditions an object shows while a reconcile is under way, as Flux's
//! `ProgressiveStatus` writes them before the work ends: `Reconciling=True` and
//! `Ready=Unknown` (reason Progressing) from the start of the reconcile of a new object
//! or generation, and `ArtifactOutdated=True` (NewRevision) once the upstream revision is
//! known and differs from the stored artifact. The ExternalArtifact's conditions follow
//! the source's state here too. Pure: the time is passed in; no kube, tokio or axum.

use chrono::{DateTime, Utc};

use super::{reason, Condition, ConditionStatus, ConditionType};

/// What the source object shows, for [`external_artifact_conditions`].
#[derive(Clone, Copy, Debug)]
pub struct SourceState<'a> {
    /// The source's conditions.
    pub conditions: &'a [Condition],
    /// The source's `metadata.generation`.
    pub generation: i64,
    /// The source's `status.observedGeneration`.
    pub observed_generation: Option<i64>,
}

fn find(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when the last reconcile of `generation` failed and is being retried: the status
/// already says so (Ready False, Reconciling or Stalled True for this generation), and
/// announcing progress again would only flap Ready on every retry.
fn retrying(previous: &[Condition], generation: i64) -> bool {
    find(previous, ConditionType::Ready)
        .is_some_and(|r| r.status == ConditionStatus::False && r.observed_generation == generation)
}

/// Sets one condition in `conditions` (replacing one of its type); `lastTransitionTime`
/// only moves when the status changes.
fn put(
    conditions: &mut Vec<Condition>,
    type_: ConditionType,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: i64,
    now: DateTime<Utc>,
) {
    let last_transition_time = match find(conditions, type_) {
        Some(prev) if prev.status == status => prev.last_transition_time,
        _ => now,
    };
    conditions.retain(|c| c.type_ != type_);
    conditions.push(Condition {
        type_,
        status,
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: generation,
        last_transition_time,
    });
    conditions.sort_by_key(|c| c.type_);
}

/// Marks work under way: `Reconciling=True` and `Ready=Unknown`, both Progressing.
fn progressing(
    conditions: &mut Vec<Condition>,
    message: &str,
    generation: i64,
    now: DateTime<Utc>,
) {
    for (type_, status) in [
        (ConditionType::Reconciling, ConditionStatus::True),
        (ConditionType::Ready, ConditionStatus::Unknown),
    ] {
        put(
            conditions,
            type_,
            status,
            reason::PROGRESSING,
            message,
            generation,
            now,
        );
    }
}

/// The conditions to write at the start of a reconcile, or `None` when nothing is to be
/// announced: a new object or a new generation (`observed_generation` differs) reads
/// `Reconciling=True` and `Ready=Unknown` with Flux's message `processing object: new
/// generation <observed> -> <generation>`; a requested reconcile (`requested`) reads
/// `Reconciling=True`, `reconciliation in progress`. A generation whose reconcile already
/// failed and is retried keeps its failure status.
pub fn starting(
    previous: &[Condition],
    observed_generation: Option<i64>,
    generation: i64,
    requested: bool,
    now: DateTime<Utc>,
) -> Option<Vec<Condition>> {
    let mut next = previous.to_vec();
    if observed_generation != Some(generation) && !retrying(previous, generation) {
        let message = format!(
            "processing object: new generation {} -> {generation}",
            observed_generation.unwrap_or(0)
        );
        progressing(&mut next, &message, generation, now);
    } else if requested {
        put(
            &mut next,
            ConditionType::Reconciling,
            ConditionStatus::True,
            reason::PROGRESSING,
            "reconciliation in progress",
            generation,
            now,
        );
    } else {
        return None;
    }
    Some(next)
}

/// The conditions once the upstream revision is known and the stored artifact does not
/// match it (new revision, or settings that change the content), or `None` when there is
/// no stored artifact (the start already said Progressing) or the reconcile is a retry of
/// a failed one. `ArtifactOutdated=True` (NewRevision) says `new revision '<revision>' for
/// '<reference>'`, and Reconciling and Ready say `building artifact: <that>`.
pub fn building(
    previous: &[Condition],
    shown: &[Condition],
    had_artifact: bool,
    revision: &str,
    reference: &str,
    generation: i64,
    now: DateTime<Utc>,
) -> Option<Vec<Condition>> {
    if !had_artifact || retrying(previous, generation) {
        return None;
    }
    let mut next = shown.to_vec();
    let message = format!("new revision '{revision}' for '{reference}'");
    put(
        &mut next,
        ConditionType::ArtifactOutdated,
        ConditionStatus::True,
        reason::NEW_REVISION,
        &message,
        generation,
        now,
    );
    progressing(
        &mut next,
        &format!("building artifact: {message}"),
        generation,
        now,
    );
    Some(next)
}

/// Moves `lastTransitionTime` to `now` on final conditions whose status equals the one
/// before the reconcile but differs from what was shown while it ran (Ready True, then
/// Unknown while working, then True again has changed twice).
pub fn retime(
    conditions: &mut [Condition],
    previous: &[Condition],
    shown: &[Condition],
    now: DateTime<Utc>,
) {
    for c in conditions.iter_mut() {
        let was = find(previous, c.type_).map(|p| p.status);
        let showed = find(shown, c.type_).map(|s| s.status);
        if was == Some(c.status) && showed.is_some_and(|s| s != c.status) {
            c.last_transition_time = now;
        }
    }
}

/// The ExternalArtifact's conditions, from its source's state, each carrying the
/// ExternalArtifact's own `generation`:
/// - `Ready=True` (the source's reason and message) only when the source is Ready for its
///   current generation and not reconciling;
/// - `Ready=False` with an RFC-0012 reason (VerificationFailed, StorageOperationFailed or
///   FetchFailed) when the source failed or stalled;
/// - otherwise (new generation or new revision under way) `Ready=Unknown`, Progressing,
///   with the source's Reconciling message;
///
/// and `SourceVerified` copied.
pub fn external_artifact_conditions(source: SourceState<'_>, generation: i64) -> Vec<Condition> {
    let conditions = source.conditions;
    let mut out = Vec::new();
    let Some(ready) = find(conditions, ConditionType::Ready) else {
        return out;
    };
    let reconciling =
        find(conditions, ConditionType::Reconciling).filter(|c| c.status == ConditionStatus::True);
    let current = source.observed_generation == Some(source.generation)
        && ready.observed_generation == source.generation;
    let mut ea = Condition {
        observed_generation: generation,
        ..ready.clone()
    };
    match ready.status {
        ConditionStatus::False => {
            ea.reason = if find(conditions, ConditionType::SourceVerified)
                .is_some_and(|c| c.status == ConditionStatus::False)
            {
                reason::VERIFICATION_FAILED
            } else if find(conditions, ConditionType::StorageOperationFailed).is_some() {
                reason::STORAGE_OPERATION_FAILED
            } else {
                reason::FETCH_FAILED
            }
            .to_string();
        }
        ConditionStatus::True if current && reconciling.is_none() => {}
        _ => {
            let cause = reconciling.unwrap_or(ready);
            ea.status = ConditionStatus::Unknown;
            ea.reason = reason::PROGRESSING.to_string();
            ea.message = cause.message.clone();
            ea.last_transition_time = cause.last_transition_time;
        }
    }
    out.push(ea);
    out.extend(
        find(conditions, ConditionType::SourceVerified).map(|c| Condition {
            observed_generation: generation,
            ..c.clone()
        }),
    );
    out
}

#[cfg(test)]
#[path = "status_progress_tests.rs"]
mod tests;
