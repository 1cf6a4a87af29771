//! Tests of the messages `domain::status::fold` writes: a registry's huge or hostile
//! text is cut to `CONDITION_MESSAGE_MAX` with a marker and its control characters are
//! escaped, in every condition and event, and a repeat of a cut failure is still seen
//! as a repeat.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use chrono::TimeZone;

use super::*;
use crate::domain::text::CONDITION_MESSAGE_MAX;

fn fold_at(previous: &[Condition], outcome: &Outcome) -> Decision {
    fold(Input {
        previous,
        previous_digest: Some("sha256:1111"),
        previous_revision: Some("v1@sha256:aaaa"),
        generation: 1,
        url: "oci://r.io/app",
        now: Utc.with_ymd_and_hms(2026, 7, 2, 10, 0, 0).unwrap(),
        outcome,
        shown: &[],
        flux_retry: None,
        trace: None,
    })
}

fn failure(message: String) -> Outcome {
    Outcome::Failed(Failure {
        step: FailedStep::Fetch,
        reason: "OCIArtifactLayerOperationFailed".into(),
        message,
        disposition: Disposition::Retry,
        new_revision: None,
        verification: None,
    })
}

/// 12,000 media types listed in one message, as a manifest of unselected layers once
/// gave: 1.9 MB, with a terminal escape and a forged log line in it.
fn huge_hostile_message() -> String {
    let mut message =
        String::from("no layer with a tar media type in the manifest: \u{1b}[2J\nlevel=info; ");
    let long_name = "x".repeat(100);
    for i in 0..12_000 {
        message.push_str(&format!(
            "application/vnd.example.unselected.layer.{i:05}.{long_name}+json, "
        ));
    }
    assert!(message.len() > 1_800_000, "{}", message.len());
    message
}

#[test]
fn a_huge_failure_message_is_cut_and_escaped_everywhere() {
    let d = fold_at(&[], &failure(huge_hostile_message()));
    let failing: Vec<&Condition> = d
        .conditions
        .iter()
        .filter(|c| {
            matches!(
                c.type_,
                ConditionType::Ready | ConditionType::Reconciling | ConditionType::FetchFailed
            )
        })
        .collect();
    assert_eq!(failing.len(), 3, "{:?}", d.conditions);
    assert_eq!(d.events.len(), 1);
    let messages = failing
        .iter()
        .map(|c| c.message.as_str())
        .chain([d.events[0].message.as_str()]);
    for message in messages {
        assert!(message.len() <= CONDITION_MESSAGE_MAX, "{}", message.len());
        assert!(message.ends_with(" more bytes)"), "no marker: {message}");
        assert!(message.starts_with(
            "no layer with a tar media type in the manifest: \\x1b[2J\\nlevel=info; application/"
        ));
        assert!(!message.contains('\u{1b}') && !message.contains('\n'));
    }
}

#[test]
fn a_repeated_huge_failure_is_a_repeat() {
    let first = fold_at(&[], &failure(huge_hostile_message()));
    let again = fold_at(&first.conditions, &failure(huge_hostile_message()));
    assert_eq!(again.conditions, first.conditions);
    let longest = again.conditions.iter().map(|c| c.message.len()).max();
    assert!(longest <= Some(CONDITION_MESSAGE_MAX), "{longest:?}");
    assert!(again.events.is_empty(), "{:?}", again.events);
}

#[test]
fn origin_annotations_and_verified_identity_are_escaped() {
    let outcome = Outcome::Stored {
        revision: "v2@sha256:bbbb".into(),
        digest: "sha256:2222".into(),
        verification: Verification::Verified {
            message: "verified signature of subject 'ci\u{202e}moc.live'".into(),
        },
        origin: Some(Origin {
            source: "https://git.example/\u{1b}]8;;evil\u{7}repo".into(),
            revision: "main@sha1:abc\r\nforged".into(),
        }),
    };
    let d = fold_at(&[], &outcome);
    assert_eq!(
        d.events[0].message,
        "stored artifact with revision 'v2@sha256:bbbb' from 'oci://r.io/app', origin source \
         'https://git.example/\\x1b]8;;evil\\x07repo', origin revision 'main@sha1:abc\\r\\nforged'"
    );
    let verified = d
        .conditions
        .iter()
        .find(|c| c.type_ == ConditionType::SourceVerified)
        .unwrap();
    assert_eq!(
        verified.message,
        "verified signature of subject 'ci\\u{202e}moc.live'"
    );
}
