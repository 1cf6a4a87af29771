//! Tests of the notification poster: the JSON against the field names of Flux's Go
//! structs (`eventv1.Event`, `corev1.ObjectReference`), the metadata keys
//! source-controller sends, and Flux's retry rules against an in-process receiver that
//! answers a scripted list of status codes.

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::*;
use crate::domain::status::EventArtifact;

fn object(api_version: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some("OCIRepository".into()),
        name: Some("app".into()),
        namespace: Some("team".into()),
        uid: Some("5b0c7a7e-0000-4000-8000-000000000001".into()),
        resource_version: Some("4242".into()),
        field_path: None,
    }
}

fn new_artifact() -> Event {
    Event {
        type_: EventType::Normal,
        reason: "NewArtifact".into(),
        message: "stored artifact with revision 'v1@sha256:aa' from 'oci://r.io/app'".into(),
        artifact: Some(EventArtifact {
            revision: "v1@sha256:aa".into(),
            digest: "sha256:11".into(),
        }),
    }
}

fn failure() -> Event {
    Event {
        type_: EventType::Warning,
        reason: "OCIArtifactPullFailed".into(),
        message: "failed to pull artifact".into(),
        artifact: None,
    }
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn flux_event(object: ObjectReference, event: &Event, instance: &str) -> FluxEvent {
    FluxEvent {
        metadata: metadata(&object, &BTreeMap::new(), event),
        involved_object: object,
        severity: severity(event.type_),
        timestamp: "2026-11-23T17:30:57Z".into(),
        message: event.message.clone(),
        reason: event.reason.clone(),
        reporting_controller: "ocisource".into(),
        reporting_instance: instance.into(),
    }
}

#[test]
fn json_has_the_keys_of_fluxs_event_struct() {
    let value = serde_json::to_value(flux_event(
        object("ocisource.dev/v1beta1"),
        &new_artifact(),
        "ocisource-0",
    ))
    .unwrap();
    assert_eq!(
        value,
        json!({
            "involvedObject": {
                "kind": "OCIRepository",
                "namespace": "team",
                "name": "app",
                "uid": "5b0c7a7e-0000-4000-8000-000000000001",
                "apiVersion": "ocisource.dev/v1beta1",
                "resourceVersion": "4242",
            },
            "severity": "info",
            "timestamp": "2026-11-23T17:30:57Z",
            "message": "stored artifact with revision 'v1@sha256:aa' from 'oci://r.io/app'",
            "reason": "NewArtifact",
            "metadata": {
                "ocisource.dev/revision": "v1@sha256:aa",
                "ocisource.dev/digest": "sha256:11",
            },
            "reportingController": "ocisource",
            "reportingInstance": "ocisource-0",
        })
    );
}

#[test]
fn empty_metadata_and_instance_are_left_out_as_go_omitempty_does() {
    let value =
        serde_json::to_value(flux_event(object("ocisource.dev/v1beta1"), &failure(), "")).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "involvedObject",
            "message",
            "reason",
            "reportingController",
            "severity",
            "timestamp"
        ]
    );
    assert_eq!(value["severity"], "error");
}

#[test]
fn revision_keys_carry_the_involved_objects_group_for_both_kinds() {
    for (api_version, group) in [
        ("ocisource.dev/v1beta1", "ocisource.dev"),
        ("source.toolkit.fluxcd.io/v1", "source.toolkit.fluxcd.io"),
    ] {
        let m = metadata(&object(api_version), &BTreeMap::new(), &new_artifact());
        assert_eq!(
            m,
            annotations(&[
                (&format!("{group}/revision"), "v1@sha256:aa"),
                (&format!("{group}/digest"), "sha256:11"),
            ])
        );
    }
}

#[test]
fn only_event_group_annotations_are_copied_also_on_failures() {
    let on_object = annotations(&[
        ("event.toolkit.fluxcd.io/cluster", "prod"),
        ("reconcile.fluxcd.io/requestedAt", "now"),
        ("ocisource.dev/layers", "merge"),
    ]);
    let o = object("source.toolkit.fluxcd.io/v1");
    assert_eq!(
        metadata(&o, &on_object, &failure()),
        annotations(&[("event.toolkit.fluxcd.io/cluster", "prod")])
    );
    let m = metadata(&o, &on_object, &new_artifact());
    assert_eq!(m.len(), 3);
    assert_eq!(m["event.toolkit.fluxcd.io/cluster"], "prod");
}

#[test]
fn severity_is_info_for_normal_and_error_for_warning() {
    assert_eq!(severity(EventType::Normal), "info");
    assert_eq!(severity(EventType::Warning), "error");
}

#[test]
fn backoff_doubles_from_one_second_and_caps_at_thirty() {
    let d = Delivery::default();
    let waits: Vec<u64> = (0..6).map(|a| d.backoff(a, None).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 30]);
    assert_eq!(d.backoff(0, Some("7")).as_secs(), 7);
    assert_eq!(d.backoff(0, Some("600")).as_secs(), 30);
    assert_eq!(d.backoff(2, Some("soon")).as_secs(), 4);
}

/// A receiver answering `script` in turn (then 202), recording each body.
struct Receiver {
    address: url::Url,
    bodies: Arc<Mutex<Vec<Value>>>,
}

async fn receiver(script: Vec<StatusCode>) -> Receiver {
    let open = tokio::sync::Semaphore::MAX_PERMITS;
    gated_receiver(script, Arc::new(tokio::sync::Semaphore::new(open))).await
}

/// [`receiver`] that takes a permit of `gate` before each answer.
async fn gated_receiver(script: Vec<StatusCode>, gate: Arc<tokio::sync::Semaphore>) -> Receiver {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    let script = Arc::new(Mutex::new(script.into_iter()));
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move |body: axum::body::Bytes| {
            let (seen, script, gate) = (seen.clone(), script.clone(), gate.clone());
            async move {
                let body = serde_json::from_slice(&body).unwrap();
                seen.lock().unwrap().push(body);
                let _open = gate.acquire().await.unwrap();
                let next = script.lock().unwrap().next();
                next.unwrap_or(StatusCode::ACCEPTED)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Receiver {
        address: address.parse().unwrap(),
        bodies,
    }
}

async fn wait_for_bodies(bodies: &Mutex<Vec<Value>>, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while bodies.lock().unwrap().len() < n {
        let got = bodies.lock().unwrap().len();
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {got} of {n} events arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn quick() -> Delivery {
    Delivery {
        timeout: Duration::from_secs(5),
        retries: 4,
        wait_min: Duration::from_millis(1),
        wait_max: Duration::from_millis(5),
    }
}

async fn post_to(r: &Receiver) -> Result<(), NotifyError> {
    let client = reqwest::Client::new();
    let event = flux_event(object("ocisource.dev/v1beta1"), &new_artifact(), "i");
    post(&client, &r.address, &quick(), &event).await
}

#[tokio::test]
async fn server_errors_are_retried_until_accepted() {
    let r = receiver(vec![
        StatusCode::SERVICE_UNAVAILABLE,
        StatusCode::BAD_GATEWAY,
    ])
    .await;
    post_to(&r).await.unwrap();
    let bodies = r.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 3);
    assert!(
        bodies.iter().all(|b| *b == bodies[0]),
        "the same event each time"
    );
}

#[tokio::test]
async fn a_duplicate_429_and_a_501_are_not_retried() {
    for status in [StatusCode::TOO_MANY_REQUESTS, StatusCode::NOT_IMPLEMENTED] {
        let r = receiver(vec![status; 5]).await;
        post_to(&r).await.unwrap();
        assert_eq!(r.bodies.lock().unwrap().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn persistent_server_errors_give_up_after_four_retries() {
    let r = receiver(vec![StatusCode::INTERNAL_SERVER_ERROR; 10]).await;
    let e = post_to(&r).await.unwrap_err();
    assert!(matches!(e, NotifyError::Status { status: 500, .. }), "{e}");
    assert_eq!(r.bodies.lock().unwrap().len(), 5);
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address: url::Url = format!("http://127.0.0.1:{port}/").parse().unwrap();
    let event = flux_event(object("ocisource.dev/v1beta1"), &failure(), "i");
    let e = post(&reqwest::Client::new(), &address, &quick(), &event)
        .await
        .unwrap_err();
    let text = crate::reconcile::error::chain(&e);
    assert!(
        text.starts_with(&format!(
            "failed to post the OCIArtifactPullFailed event of OCIRepository team/app to {address}"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn notifier_posts_queued_events_in_order() {
    let r = receiver(Vec::new()).await;
    let n = Notifier::start_with(r.address.clone(), "ocisource", quick()).unwrap();
    // What kube's `Resource::object_ref` gives: no resourceVersion; the meta has it.
    let o = ObjectReference {
        resource_version: None,
        ..object("source.toolkit.fluxcd.io/v1")
    };
    let m = ObjectMeta {
        resource_version: Some("77".into()),
        annotations: Some(annotations(&[("event.toolkit.fluxcd.io/env", "prod")])),
        ..ObjectMeta::default()
    };
    n.notify(&o, &m, &failure());
    n.notify(&o, &m, &new_artifact());
    wait_for_bodies(&r.bodies, 2).await;
    let bodies = r.bodies.lock().unwrap();
    assert_eq!(
        bodies
            .iter()
            .map(|b| (
                b["reason"].as_str().unwrap(),
                b["severity"].as_str().unwrap()
            ))
            .collect::<Vec<_>>(),
        [("OCIArtifactPullFailed", "error"), ("NewArtifact", "info")]
    );
    assert_eq!(
        bodies[1]["involvedObject"]["apiVersion"],
        "source.toolkit.fluxcd.io/v1"
    );
    assert_eq!(bodies[1]["involvedObject"]["resourceVersion"], "77");
    assert_eq!(
        bodies[1]["metadata"]["source.toolkit.fluxcd.io/revision"],
        "v1@sha256:aa"
    );
    assert_eq!(
        bodies[0]["metadata"],
        json!({"event.toolkit.fluxcd.io/env": "prod"})
    );
    assert_eq!(bodies[1]["reportingController"], "ocisource");
    let stamp = bodies[1]["timestamp"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(stamp).is_ok() && stamp.ends_with('Z'));
}

#[tokio::test]
async fn a_huge_or_hostile_message_is_posted_cut_and_escaped() {
    let r = receiver(Vec::new()).await;
    let n = Notifier::start_with(r.address.clone(), "ocisource", quick()).unwrap();
    let hostile = Event {
        message: format!("failed\u{1b}[2J\n{}", "x".repeat(2_000_000)),
        ..failure()
    };
    n.notify(
        &object("ocisource.dev/v1beta1"),
        &ObjectMeta::default(),
        &hostile,
    );
    wait_for_bodies(&r.bodies, 1).await;
    let message = r.bodies.lock().unwrap()[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.len() <= CONDITION_MESSAGE_MAX, "{}", message.len());
    assert!(message.starts_with("failed\\x1b[2J\\nxxx"), "{message}");
    assert!(message.ends_with(" more bytes)"), "{message}");
}

#[tokio::test]
async fn an_object_without_a_namespace_is_not_posted() {
    let r = receiver(Vec::new()).await;
    let n = Notifier::start_with(r.address.clone(), "ocisource", quick()).unwrap();
    let mut unnamed = object("ocisource.dev/v1beta1");
    unnamed.namespace = None;
    n.notify(&unnamed, &ObjectMeta::default(), &new_artifact());
    // Then one that is posted: once it arrives, the first was not queued before it.
    n.notify(
        &object("ocisource.dev/v1beta1"),
        &ObjectMeta::default(),
        &failure(),
    );
    wait_for_bodies(&r.bodies, 1).await;
    let bodies = r.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["reason"], "OCIArtifactPullFailed");
}

#[tokio::test]
async fn a_full_queue_drops_new_events_and_keeps_the_queued_ones() {
    // A receiver that holds every answer until the gate opens.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let r = gated_receiver(Vec::new(), gate.clone()).await;
    let bodies = &r.bodies;
    let delivery = Delivery {
        timeout: Duration::from_secs(300),
        ..quick()
    };
    let n = Notifier::start_with(r.address.clone(), "ocisource", delivery).unwrap();
    let o = object("ocisource.dev/v1beta1");
    let event = |i: usize| Event {
        message: format!("event {i}"),
        ..failure()
    };
    n.notify(&o, &ObjectMeta::default(), &event(0));
    wait_for_bodies(bodies, 1).await;
    // Event 0 is in flight: the queue takes QUEUE_CAPACITY more, the rest are dropped.
    for i in 1..=QUEUE_CAPACITY + 10 {
        n.notify(&o, &ObjectMeta::default(), &event(i));
    }
    gate.add_permits(QUEUE_CAPACITY + 10);
    wait_for_bodies(bodies, QUEUE_CAPACITY + 1).await;
    n.notify(&o, &ObjectMeta::default(), &event(9999));
    wait_for_bodies(bodies, QUEUE_CAPACITY + 2).await;
    let messages: Vec<String> = bodies
        .lock()
        .unwrap()
        .iter()
        .map(|b| b["message"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..=QUEUE_CAPACITY)
        .chain([9999])
        .map(|i| format!("event {i}"))
        .collect();
    assert_eq!(messages, expected, "in order, the overflow dropped");
}
