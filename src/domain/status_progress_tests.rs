//! Tests of the in-progress conditions and the ExternalArtifact's conditions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use chrono::TimeZone;
use rstest::rstest;

use super::*;
use ConditionStatus::{False, True, Unknown};
use ConditionType::*;

fn t(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 7, 2, 10, minute, 0).unwrap()
}

fn cond(type_: ConditionType, status: ConditionStatus, reason: &str, generation: i64) -> Condition {
    Condition {
        type_,
        status,
        reason: reason.into(),
        message: format!("{reason} message"),
        observed_generation: generation,
        last_transition_time: t(0),
    }
}

fn ready_at(generation: i64) -> Vec<Condition> {
    vec![
        cond(Ready, True, reason::SUCCEEDED, generation),
        cond(ArtifactInStorage, True, reason::SUCCEEDED, generation),
    ]
}

fn failed_at(generation: i64) -> Vec<Condition> {
    vec![
        cond(Ready, False, "OCIArtifactPullFailed", generation),
        cond(
            Reconciling,
            True,
            reason::PROGRESSING_WITH_RETRY,
            generation,
        ),
        cond(FetchFailed, True, "OCIArtifactPullFailed", generation),
    ]
}

fn get(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn shows(conditions: &[Condition], type_: ConditionType) -> Option<(ConditionStatus, &str)> {
    get(conditions, type_).map(|c| (c.status, c.reason.as_str()))
}

#[test]
fn a_new_object_reads_reconciling_and_ready_unknown_from_the_start() {
    let c = starting(&[], None, 1, false, t(5)).expect("announced");
    assert_eq!(shows(&c, Ready), Some((Unknown, reason::PROGRESSING)));
    assert_eq!(shows(&c, Reconciling), Some((True, reason::PROGRESSING)));
    let ready = get(&c, Ready).unwrap();
    assert_eq!(ready.message, "processing object: new generation 0 -> 1");
    assert_eq!(
        (ready.observed_generation, ready.last_transition_time),
        (1, t(5))
    );
}

#[test]
fn a_new_generation_hides_the_old_ready_and_keeps_the_stored_artifact_condition() {
    let c = starting(&ready_at(1), Some(1), 2, false, t(5)).expect("announced");
    assert_eq!(shows(&c, Ready), Some((Unknown, reason::PROGRESSING)));
    assert_eq!(
        get(&c, Ready).unwrap().message,
        "processing object: new generation 1 -> 2"
    );
    // ArtifactInStorage still describes the stored artifact, of generation 1.
    assert_eq!(get(&c, ArtifactInStorage).unwrap().observed_generation, 1);
}

#[rstest]
#[case::same_generation(ready_at(2), Some(2), false)]
#[case::retry_of_a_failed_generation(failed_at(2), Some(1), false)]
fn nothing_is_announced_when_nothing_is_new(
    #[case] previous: Vec<Condition>,
    #[case] observed: Option<i64>,
    #[case] requested: bool,
) {
    assert_eq!(starting(&previous, observed, 2, requested, t(5)), None);
}

#[test]
fn a_requested_reconcile_reads_reconciling_and_leaves_ready() {
    let c = starting(&ready_at(2), Some(2), 2, true, t(5)).unwrap();
    assert_eq!(shows(&c, Reconciling), Some((True, reason::PROGRESSING)));
    assert_eq!(shows(&c, Ready), Some((True, reason::SUCCEEDED)));
}

#[test]
fn a_new_generation_after_a_failed_one_is_announced() {
    let c = starting(&failed_at(1), Some(1), 2, false, t(5)).unwrap();
    assert_eq!(shows(&c, Ready), Some((Unknown, reason::PROGRESSING)));
}

#[test]
fn building_marks_the_stored_artifact_outdated() {
    let previous = ready_at(1);
    let shown = starting(&previous, Some(1), 2, false, t(5)).unwrap();
    let c = building(
        &previous,
        &shown,
        true,
        "v2@sha256:bb",
        "r.io/app:v2",
        2,
        t(6),
    )
    .unwrap();
    let outdated = get(&c, ArtifactOutdated).unwrap();
    assert_eq!(
        (
            outdated.status,
            outdated.reason.as_str(),
            outdated.message.as_str()
        ),
        (
            True,
            reason::NEW_REVISION,
            "new revision 'v2@sha256:bb' for 'r.io/app:v2'"
        )
    );
    let ready = get(&c, Ready).unwrap();
    assert_eq!(ready.status, Unknown);
    assert_eq!(
        ready.message,
        "building artifact: new revision 'v2@sha256:bb' for 'r.io/app:v2'"
    );
    // Unknown since the start: the transition time stays.
    assert_eq!(ready.last_transition_time, t(5));
}

#[rstest]
#[case::no_artifact_yet(vec![], false)]
#[case::retry(failed_at(2), true)]
fn building_is_silent_without_artifact_or_on_retry(
    #[case] previous: Vec<Condition>,
    #[case] had_artifact: bool,
) {
    assert_eq!(
        building(
            &previous,
            &previous,
            had_artifact,
            "v2@sha256:bb",
            "r.io/app:v2",
            2,
            t(6)
        ),
        None
    );
}

#[test]
fn retime_moves_transitions_that_happened_in_between() {
    let previous = ready_at(1);
    let shown = starting(&previous, Some(1), 2, false, t(5)).unwrap();
    let mut last = ready_at(2);
    retime(&mut last, &previous, &shown, t(9));
    assert_eq!(get(&last, Ready).unwrap().last_transition_time, t(9));
    // ArtifactInStorage was True throughout.
    assert_eq!(
        get(&last, ArtifactInStorage).unwrap().last_transition_time,
        t(0)
    );
}

fn ea(conditions: &[Condition], generation: i64, observed: Option<i64>) -> Vec<Condition> {
    external_artifact_conditions(
        SourceState {
            conditions,
            generation,
            observed_generation: observed,
        },
        7,
    )
}

#[test]
fn external_artifact_is_ready_only_for_the_sources_current_generation() {
    let done = ea(&ready_at(2), 2, Some(2));
    assert_eq!(shows(&done, Ready), Some((True, reason::SUCCEEDED)));
    assert_eq!(get(&done, Ready).unwrap().observed_generation, 7);

    // Generation 2 written but not reconciled yet: the old Ready must not show through.
    let pending = ea(&ready_at(1), 2, Some(1));
    assert_eq!(shows(&pending, Ready), Some((Unknown, reason::PROGRESSING)));

    let shown = starting(&ready_at(1), Some(1), 2, false, t(5)).unwrap();
    let working = ea(&shown, 2, Some(1));
    let ready = get(&working, Ready).unwrap();
    assert_eq!((ready.status, ready.observed_generation), (Unknown, 7));
    assert_eq!(ready.message, "processing object: new generation 1 -> 2");

    // A requested reconcile of an unchanged generation is work under way too.
    let requested = starting(&ready_at(2), Some(2), 2, true, t(5)).unwrap();
    assert_eq!(
        shows(&ea(&requested, 2, Some(2)), Ready),
        Some((Unknown, reason::PROGRESSING))
    );
}

#[test]
fn external_artifact_reads_false_while_the_new_generation_fails() {
    // A failed generation does not advance status.observedGeneration (as in Flux).
    let failing = ea(&failed_at(2), 2, Some(1));
    let ready = get(&failing, Ready).unwrap();
    assert_eq!(
        (
            ready.status,
            ready.reason.as_str(),
            ready.observed_generation
        ),
        (False, reason::FETCH_FAILED, 7)
    );
}
