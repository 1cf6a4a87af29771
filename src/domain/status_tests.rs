//! Table-driven tests of the status rules in `domain::status`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use chrono::TimeZone;
use rstest::rstest;

use super::*;
use ConditionStatus::{False, True};
use ConditionType::*;

const REV: &str = "v1@sha256:aaaa";
const DIGEST: &str = "sha256:1111";

fn t(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 7, 2, 10, minute, 0).unwrap()
}

fn cond(
    type_: ConditionType,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    at: u32,
) -> Condition {
    Condition {
        type_,
        status,
        reason: reason.into(),
        message: message.into(),
        observed_generation: 1,
        last_transition_time: t(at),
    }
}

fn ready_state() -> Vec<Condition> {
    let msg = stored_message(REV);
    vec![
        cond(Ready, True, reason::SUCCEEDED, &msg, 0),
        cond(ArtifactInStorage, True, reason::SUCCEEDED, &msg, 0),
    ]
}

fn failing_state() -> Vec<Condition> {
    let mut c = ready_state();
    c[0] = cond(Ready, False, "AuthenticationFailed", "failed to log in", 1);
    c.push(cond(
        Reconciling,
        True,
        reason::PROGRESSING_WITH_RETRY,
        "failed to log in",
        1,
    ));
    c.push(cond(
        FetchFailed,
        True,
        "AuthenticationFailed",
        "failed to log in",
        1,
    ));
    c
}

fn stored(verification: Verification) -> Outcome {
    Outcome::Stored {
        revision: REV.into(),
        digest: DIGEST.into(),
        verification,
        origin: None,
    }
}

fn failed(step: FailedStep, disposition: Disposition, reason: &str) -> Outcome {
    Outcome::Failed(Failure {
        step,
        reason: reason.into(),
        message: "failed to do it".into(),
        disposition,
        new_revision: None,
        verification: None,
    })
}

fn run(previous: &[Condition], previous_digest: Option<&str>, outcome: &Outcome) -> Decision {
    fold(Input {
        previous,
        previous_digest,
        previous_revision: previous_digest.map(|_| REV),
        generation: 2,
        url: "oci://r.io/app",
        now: t(30),
        outcome,
        shown: &[],
        flux_retry: None,
        trace: None,
    })
}

fn get(d: &Decision, type_: ConditionType) -> Option<&Condition> {
    d.conditions.iter().find(|c| c.type_ == type_)
}

fn types(d: &Decision) -> Vec<ConditionType> {
    d.conditions.iter().map(|c| c.type_).collect()
}

#[test]
fn first_success_is_ready_with_flux_message_and_new_artifact_event() {
    let d = run(&[], None, &stored(Verification::NotConfigured));
    assert_eq!(types(&d), vec![Ready, ArtifactInStorage]);
    let ready = get(&d, Ready).unwrap();
    assert_eq!((ready.status, ready.reason.as_str()), (True, "Succeeded"));
    assert_eq!(
        ready.message, "stored artifact for digest 'v1@sha256:aaaa'",
        "Flux's wording, revision printed"
    );
    assert_eq!(ready.last_transition_time, t(30));
    assert!(d.conditions.iter().all(|c| c.observed_generation == 2));
    assert_eq!(d.events.len(), 1);
    assert_eq!(
        (d.events[0].type_, d.events[0].reason.as_str()),
        (EventType::Normal, "NewArtifact")
    );
    assert_eq!(
        d.events[0].message, "stored artifact with revision 'v1@sha256:aaaa' from 'oci://r.io/app'",
        "Flux's notify wording"
    );
}

#[test]
fn new_artifact_event_names_the_origin_when_the_manifest_has_it() {
    let outcome = Outcome::Stored {
        revision: REV.into(),
        digest: DIGEST.into(),
        verification: Verification::NotConfigured,
        origin: Some(Origin {
            source: "https://github.com/org/repo".into(),
            revision: "main@sha1:abc".into(),
        }),
    };
    let d = run(&[], None, &outcome);
    assert_eq!(
        d.events[0].message,
        "stored artifact with revision 'v1@sha256:aaaa' from 'oci://r.io/app', \
         origin source 'https://github.com/org/repo', origin revision 'main@sha1:abc'"
    );
}

#[test]
fn unchanged_success_keeps_transition_times_and_emits_nothing() {
    let d = run(
        &ready_state(),
        Some(DIGEST),
        &stored(Verification::NotConfigured),
    );
    assert_eq!(get(&d, Ready).unwrap().last_transition_time, t(0));
    assert_eq!(
        get(&d, ArtifactInStorage).unwrap().last_transition_time,
        t(0)
    );
    assert!(
        d.conditions.iter().all(|c| c.observed_generation == 2),
        "generation refreshed"
    );
    assert!(d.events.is_empty());
}

#[rstest]
#[case::same_digest(Some(DIGEST), "Succeeded")]
#[case::new_digest(Some("sha256:2222"), "NewArtifact")]
fn recovery_clears_failure_conditions_and_emits_one_event(
    #[case] prev: Option<&str>,
    #[case] event: &str,
) {
    let d = run(&failing_state(), prev, &stored(Verification::NotConfigured));
    assert_eq!(types(&d), vec![Ready, ArtifactInStorage]);
    assert_eq!(
        get(&d, Ready).unwrap().last_transition_time,
        t(30),
        "False -> True is a transition"
    );
    assert_eq!(d.events.len(), 1);
    assert_eq!(d.events[0].reason, event);
    assert_eq!(
        d.events[0].artifact,
        Some(EventArtifact {
            revision: REV.into(),
            digest: DIGEST.into(),
        }),
        "a recovery names the stored artifact (Flux's revision metadata)"
    );
}

#[rstest]
#[case::fetch_retry(
    FailedStep::Fetch,
    Disposition::Retry,
    "AuthenticationFailed",
    FetchFailed,
    True,
    Reconciling
)]
#[case::fetch_stalled(
    FailedStep::Fetch,
    Disposition::Stalled,
    "URLInvalid",
    FetchFailed,
    True,
    Stalled
)]
#[case::storage(
    FailedStep::Storage,
    Disposition::Retry,
    "ArchiveOperationFailed",
    StorageOperationFailed,
    True,
    Reconciling
)]
#[case::verify(
    FailedStep::Verify,
    Disposition::Retry,
    "VerificationError",
    SourceVerified,
    False,
    Reconciling
)]
fn failure_sets_step_condition_ready_false_and_what_next(
    #[case] step: FailedStep,
    #[case] disposition: Disposition,
    #[case] reason: &str,
    #[case] step_type: ConditionType,
    #[case] step_status: ConditionStatus,
    #[case] next_type: ConditionType,
) {
    let d = run(
        &ready_state(),
        Some(DIGEST),
        &failed(step, disposition, reason),
    );
    let ready = get(&d, Ready).unwrap();
    assert_eq!(
        (ready.status, ready.reason.as_str(), ready.message.as_str()),
        (False, reason, "failed to do it")
    );
    assert_eq!(ready.last_transition_time, t(30));
    let c = get(&d, step_type).unwrap();
    assert_eq!((c.status, c.reason.as_str()), (step_status, reason));
    assert!(get(&d, next_type).is_some());
    let other = if next_type == Stalled {
        Reconciling
    } else {
        Stalled
    };
    assert!(get(&d, other).is_none());
    if disposition == Disposition::Retry {
        assert_eq!(get(&d, Reconciling).unwrap().reason, "ProgressingWithRetry");
    }
    // the last good artifact is still stored and reported, as of the generation that
    // stored it (generation 1; this reconcile is of generation 2), as Flux leaves it
    let kept = get(&d, ArtifactInStorage).unwrap();
    assert_eq!(
        (
            kept.status,
            kept.last_transition_time,
            kept.observed_generation
        ),
        (True, t(0), 1)
    );
    assert_eq!(d.events.len(), 1);
    assert_eq!(
        (d.events[0].type_, d.events[0].reason.as_str()),
        (EventType::Warning, reason)
    );
    assert_eq!(
        d.events[0].artifact, None,
        "Flux sends no revision with a failure"
    );
}

#[test]
fn repeated_failure_keeps_times_and_does_not_repeat_the_warning() {
    let previous = failing_state();
    let outcome = Outcome::Failed(Failure {
        step: FailedStep::Fetch,
        reason: "AuthenticationFailed".into(),
        message: "failed to log in".into(),
        disposition: Disposition::Retry,
        new_revision: None,
        verification: None,
    });
    let d = run(&previous, Some(DIGEST), &outcome);
    assert_eq!(get(&d, Ready).unwrap().last_transition_time, t(1));
    assert_eq!(get(&d, FetchFailed).unwrap().last_transition_time, t(1));
    assert!(d.events.is_empty());
}

#[test]
fn a_later_failure_replaces_an_earlier_failure_condition() {
    let d = run(
        &failing_state(),
        Some(DIGEST),
        &failed(
            FailedStep::Storage,
            Disposition::Retry,
            "ArchiveOperationFailed",
        ),
    );
    assert!(get(&d, FetchFailed).is_none());
    assert!(get(&d, StorageOperationFailed).is_some());
}

#[rstest]
#[case::new_upstream_revision(Some("v2@sha256:bbbb"), true)]
#[case::same_revision(Some(REV), false)]
#[case::unresolved(None, false)]
fn failure_marks_artifact_outdated_only_for_a_new_revision(
    #[case] rev: Option<&str>,
    #[case] outdated: bool,
) {
    let outcome = Outcome::Failed(Failure {
        step: FailedStep::Storage,
        reason: "ArchiveOperationFailed".into(),
        message: "failed to write".into(),
        disposition: Disposition::Retry,
        new_revision: rev.map(String::from),
        verification: None,
    });
    let d = run(&ready_state(), Some(DIGEST), &outcome);
    let c = get(&d, ArtifactOutdated);
    assert_eq!(c.is_some(), outdated);
    if let Some(c) = c {
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            ("NewRevision", "new revision 'v2@sha256:bbbb'")
        );
    }
}

#[test]
fn success_clears_artifact_outdated_and_unconfigured_verification() {
    let mut previous = ready_state();
    previous.push(cond(
        ArtifactOutdated,
        True,
        "NewRevision",
        "new revision 'x'",
        3,
    ));
    previous.push(cond(SourceVerified, True, "Succeeded", "verified", 3));
    let d = run(
        &previous,
        Some(DIGEST),
        &stored(Verification::NotConfigured),
    );
    assert_eq!(types(&d), vec![Ready, ArtifactInStorage]);

    let d = run(
        &previous,
        Some(DIGEST),
        &stored(Verification::Verified {
            message: "verified".into(),
        }),
    );
    let v = get(&d, SourceVerified).unwrap();
    assert_eq!((v.status, v.last_transition_time), (True, t(3)));
}

#[test]
fn verification_failure_flips_source_verified_with_a_new_transition_time() {
    let mut previous = ready_state();
    previous.push(cond(SourceVerified, True, "Succeeded", "verified", 3));
    let d = run(
        &previous,
        Some(DIGEST),
        &failed(FailedStep::Verify, Disposition::Retry, "VerificationError"),
    );
    let v = get(&d, SourceVerified).unwrap();
    assert_eq!(
        (v.status, v.reason.as_str(), v.last_transition_time),
        (False, "VerificationError", t(30))
    );
}

#[rstest]
#[case::ok(stored(Verification::NotConfigured), True, "Succeeded")]
#[case::fetch(
    failed(FailedStep::Fetch, Disposition::Retry, "AuthenticationFailed"),
    False,
    "FetchFailed"
)]
#[case::storage(
    failed(FailedStep::Storage, Disposition::Retry, "ArchiveOperationFailed"),
    False,
    "StorageOperationFailed"
)]
#[case::verify(
    failed(FailedStep::Verify, Disposition::Retry, "VerificationError"),
    False,
    "VerificationFailed"
)]
fn external_artifact_ready_uses_rfc_0012_reasons(
    #[case] outcome: Outcome,
    #[case] status: ConditionStatus,
    #[case] reason: &str,
) {
    let d = run(&[], None, &outcome);
    let source = SourceState {
        conditions: &d.conditions,
        generation: 2,
        observed_generation: Some(2),
    };
    let ea = external_artifact_conditions(source, 1);
    assert!(ea.iter().all(|c| c.observed_generation == 1), "{ea:?}");
    let ready = ea.iter().find(|c| c.type_ == Ready).unwrap();
    assert_eq!((ready.status, ready.reason.as_str()), (status, reason));
    let verify_failed = matches!(&outcome, Outcome::Failed(f) if f.step == FailedStep::Verify);
    assert_eq!(ea.iter().any(|c| c.type_ == SourceVerified), verify_failed);
}

#[test]
fn condition_type_names_round_trip() {
    for t in ConditionType::ALL {
        assert_eq!(ConditionType::parse(t.as_str()), Some(t));
    }
    assert_eq!(ConditionType::parse("Healthy"), None);
}

#[test]
fn no_artifact_outdated_before_any_artifact_exists() {
    // Flux: `if obj.GetArtifact() != nil { MarkTrue(ArtifactOutdated) }`.
    let outcome = Outcome::Failed(Failure {
        step: FailedStep::Storage,
        reason: "ArchiveOperationFailed".into(),
        message: "failed to write".into(),
        disposition: Disposition::Retry,
        new_revision: Some("v2@sha256:bbbb".into()),
        verification: None,
    });
    let d = run(&[], None, &outcome);
    assert!(get(&d, ArtifactOutdated).is_none(), "{:?}", types(&d));
}

fn storage_failure_after(verification: Option<Verification>) -> Outcome {
    Outcome::Failed(Failure {
        step: FailedStep::Storage,
        reason: "ArchiveOperationFailed".into(),
        message: "failed to write".into(),
        disposition: Disposition::Retry,
        new_revision: Some("v2@sha256:bbbb".into()),
        verification,
    })
}

#[test]
fn source_verified_stays_true_when_a_later_step_fails() {
    let verified = Verification::Verified {
        message: "verified signature of revision 'v2@sha256:bbbb'".into(),
    };
    // First reconcile ever: verification passed, storing failed.
    let d = run(&[], None, &storage_failure_after(Some(verified.clone())));
    let v = get(&d, SourceVerified).expect("SourceVerified kept");
    assert_eq!(
        (v.status, v.reason.as_str(), v.message.as_str()),
        (
            True,
            "Succeeded",
            "verified signature of revision 'v2@sha256:bbbb'"
        )
    );
    // A previous failed verification is replaced by this one's success.
    let mut previous = ready_state();
    previous.push(cond(SourceVerified, False, "VerificationError", "bad", 3));
    let d = run(
        &previous,
        Some(DIGEST),
        &storage_failure_after(Some(verified)),
    );
    let v = get(&d, SourceVerified).unwrap();
    assert_eq!((v.status, v.last_transition_time), (True, t(30)));
    assert_eq!(get(&d, Ready).unwrap().status, False);
}

#[rstest]
#[case::earlier_success_kept_when_not_reached(True, None, Some(True))]
#[case::earlier_failure_dropped_when_not_reached(False, None, None)]
#[case::removed_when_verify_is_unset(True, Some(Verification::NotConfigured), None)]
fn source_verified_on_a_failure_outside_verification(
    #[case] before: ConditionStatus,
    #[case] verification: Option<Verification>,
    #[case] after: Option<ConditionStatus>,
) {
    let mut previous = ready_state();
    previous.push(cond(SourceVerified, before, "x", "earlier", 3));
    let d = run(
        &previous,
        Some(DIGEST),
        &storage_failure_after(verification),
    );
    assert_eq!(get(&d, SourceVerified).map(|c| c.status), after);
}

/// The fold is the one writer of conditions and events: Flux's `Reconciling` message for
/// a retried failure of its kind, the Trace event before the failure's Warning, and the
/// transition time of a condition that changed and came back while the reconcile ran.
#[test]
fn the_fold_writes_fluxs_retry_message_the_trace_event_and_the_times_shown() {
    let previous = ready_state();
    let outcome = failed(
        FailedStep::Fetch,
        Disposition::Retry,
        "AuthenticationFailed",
    );
    let retried = Retried {
        observed_generation: Some(1),
        generation: 2,
        stored_revision: Some(REV),
        resolved: None,
    };
    let trace = Event {
        type_: EventType::Trace,
        reason: "AuthenticationFailed".into(),
        message: "auth secret 'pull' not found".into(),
        artifact: None,
    };
    // ArtifactInStorage was True, showed Unknown while the reconcile ran, is True again.
    let shown = vec![cond(
        ArtifactInStorage,
        ConditionStatus::Unknown,
        "Progressing",
        "",
        20,
    )];
    let d = fold(Input {
        previous: &previous,
        previous_digest: Some(DIGEST),
        previous_revision: Some(REV),
        generation: 2,
        url: "oci://r.io/app",
        now: t(30),
        outcome: &outcome,
        shown: &shown,
        flux_retry: Some(&retried),
        trace: Some(&trace),
    });
    let reconciling = get(&d, Reconciling).unwrap();
    assert_eq!(
        reconciling.message,
        "processing object: new generation 1 -> 2"
    );
    assert_eq!(get(&d, Ready).unwrap().message, "failed to do it");
    let reasons: Vec<_> = d.events.iter().map(|e| e.type_).collect();
    assert_eq!(reasons, vec![EventType::Trace, EventType::Warning]);
    assert_eq!(
        get(&d, ArtifactInStorage).unwrap().last_transition_time,
        t(30)
    );

    // Our own kind keeps its wording; no Warning (a repeat) means no Trace either.
    let own = fold(Input {
        previous: &d.conditions,
        flux_retry: None,
        shown: &[],
        ..Input {
            previous: &previous,
            previous_digest: Some(DIGEST),
            previous_revision: Some(REV),
            generation: 2,
            url: "oci://r.io/app",
            now: t(40),
            outcome: &outcome,
            shown: &[],
            flux_retry: None,
            trace: Some(&trace),
        }
    });
    assert_eq!(get(&own, Reconciling).unwrap().message, "failed to do it");
    assert!(own.events.is_empty(), "{:?}", own.events);
}
