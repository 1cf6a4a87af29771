//! The events of a reconcile: each as a Kubernetes Event (events.k8s.io) under the
//! controller's reporter identity, and, with `--events-addr`, queued for Flux's
//! notification-controller. An Event's note is cut to Kubernetes' 1,024 bytes (not
//! characters: a longer note is refused) and escaped.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};

use crate::domain::status::EventType;
use crate::domain::text::{bounded, EVENT_NOTE_MAX};

use super::{KubeContext, MANAGER};

fn kube_event(ev: &crate::domain::status::Event) -> KubeEvent {
    KubeEvent {
        type_: match ev.type_ {
            EventType::Normal | EventType::Trace => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        },
        reason: ev.reason.clone(),
        note: Some(bounded(&ev.message, EVENT_NOTE_MAX).into_owned()),
        action: "Reconcile".into(),
        secondary: None,
    }
}

/// Publishes the events of one reconcile, each as a new Event object, and queues each for
/// `--events-addr` when set. A fresh recorder per
/// reconcile: kube's recorder keys its series by reason, not by message, so a cached one
/// would publish a later NewArtifact as a repeat of the first, with the first revision in
/// its note. Repeats of the same failure are already suppressed by the status fold.
pub(super) async fn publish_events(
    kctx: &KubeContext,
    reference: &ObjectReference,
    meta: &kube::api::ObjectMeta,
    events: &[crate::domain::status::Event],
) {
    if events.is_empty() {
        return;
    }
    let recorder = Recorder::new(kctx.client.clone(), reporter());
    for ev in events {
        if let Some(notifier) = kctx
            .notifier
            .as_ref()
            .filter(|_| ev.type_ != EventType::Trace)
        {
            notifier.notify(reference, meta, ev);
        }
        if let Err(e) = recorder.publish(&kube_event(ev), reference).await {
            tracing::warn!(reason = %ev.reason, error = %e, "failed to publish event");
        }
    }
}

/// The event reporter identity.
pub fn reporter() -> Reporter {
    Reporter {
        controller: MANAGER.into(),
        instance: std::env::var("POD_NAME").ok(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_note_fits_kubernetes_byte_limit_and_is_escaped() {
        let ev = crate::domain::status::Event {
            type_: EventType::Warning,
            reason: "OCIArtifactPullFailed".into(),
            message: format!("\u{1b}[2J{}", "ü".repeat(2_000)),
            artifact: None,
        };
        let note = kube_event(&ev).note.unwrap();
        // Kubernetes counts the note's bytes, not its characters.
        assert!(note.len() <= EVENT_NOTE_MAX, "{} bytes", note.len());
        assert!(note.starts_with("\\x1b[2Jü"), "{note}");
        assert!(note.ends_with(" more bytes)"), "{note}");
    }
}
