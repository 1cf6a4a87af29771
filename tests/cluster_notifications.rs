//! Flux Alerts fire for ocisource's objects: on the REAL API server with Flux's REAL
//! notification-controller (`hack/cluster.sh flux`, its event receiver at
//! `OCISOURCE_TEST_EVENTS_ADDR`), ocisource started with the chart's
//! `controller.eventsAddr` posts its events there, and an `Alert` with a `generic`
//! `Provider` delivers them to an HTTP receiver this test runs on 127.0.0.1: the
//! NewArtifact event with its revision, a failure as an `error`, and the recovery with
//! the new revision.
//!
//! The notification-controller matches an Alert's `eventSources` on kind, name and
//! namespace only (and labels, read with the involved object's own apiVersion): an
//! `OCIRepository` source matches our `ocisource.dev` kind as well as Flux's. It keeps the
//! metadata under the involved object's API group and strips that prefix, so the
//! provider sees `revision`. It answers 429 to an event equal to one it took within
//! `--rate-limit-interval` (5 min; same object, message and revision), so a recovery to
//! the same revision after a failure is not delivered a second time, as with
//! source-controller: the recovery here moves to a new revision.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::cluster::{condition, oci_repository_yaml, ready_now, Cluster, Controller};
use support::{tar_gz, RegistryOpts, TestRegistry};

const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const OCIREPO: &str = "ocirepositories.ocisource.dev";
const WAIT: Duration = Duration::from_secs(120);

/// What the generic provider POSTs: each body with its `gotk-component` header.
type Received = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// The webhook behind the `generic` Provider: records every POST, answers 200.
async fn webhook() -> (String, Received) {
    let received: Received = Arc::default();
    let seen = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    let component = headers
                        .get("gotk-component")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let body: Value = serde_json::from_slice(&body).unwrap();
                    seen.lock().unwrap().push((component, body));
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// Polls until an event with `reason` (and, if given, `revision` metadata) is delivered.
fn delivered(
    received: &Received,
    reason: &str,
    revision: Option<&str>,
    c: &Controller,
) -> (Option<String>, Value) {
    let deadline = Instant::now() + WAIT;
    loop {
        let found = received
            .lock()
            .unwrap()
            .iter()
            .find(|(_, e)| {
                e["reason"] == reason && revision.is_none_or(|r| e["metadata"]["revision"] == r)
            })
            .cloned();
        if let Some(found) = found {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no {reason} event {revision:?} delivered; received:\n{:#?}\ncontroller log:\n{}",
            received.lock().unwrap(),
            c.log_text()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn patch_tag(cluster: &Cluster, ns: &str, tag: &str) {
    let patch = json!({"spec": {"ref": {"tag": tag}}}).to_string();
    cluster.kubectl_ok(&[
        "patch",
        OCIREPO,
        "r",
        "-n",
        ns,
        "--type=merge",
        "-p",
        &patch,
    ]);
}

#[tokio::test(flavor = "multi_thread")]
async fn alert_with_generic_provider_delivers_our_events() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let events_addr = std::env::var("OCISOURCE_TEST_EVENTS_ADDR")
        .expect("OCISOURCE_TEST_EVENTS_ADDR: run `eval \"$(hack/cluster.sh env)\"` after `hack/cluster.sh flux`");
    let values = json!({"controller": {"eventsAddr": events_addr}});
    let registry = TestRegistry::start(RegistryOpts::plain());
    let ns = cluster.namespace("notifications", &values);
    let ns = ns.name.as_str();
    let (hook, received) = webhook().await;
    // Provider and Alert before any event, so the notification-controller knows them.
    cluster.apply(&format!(
        "apiVersion: notification.toolkit.fluxcd.io/v1beta3\nkind: Provider\nmetadata:\n  name: hook\n  namespace: {ns}\n\
         spec:\n  type: generic\n  address: {hook}\n---\n\
         apiVersion: notification.toolkit.fluxcd.io/v1beta3\nkind: Alert\nmetadata:\n  name: sources\n  namespace: {ns}\n\
         spec:\n  providerRef:\n    name: hook\n  eventSeverity: info\n  eventSources:\n  - kind: OCIRepository\n    name: r\n"
    ));
    let work = tempfile::tempdir().unwrap();
    let c = Controller::start(
        &cluster,
        ns,
        &values,
        &work.path().join("data"),
        "ocisource-0",
    );

    let v1 = registry
        .push_artifact("app/r", "v1", &[(FLUX_LAYER, tar_gz(&[("a", b"1")]))], &[])
        .await;
    let url = format!("oci://{}/app/r", registry.host());
    cluster.apply(&oci_repository_yaml(ns, "r", &url, "v1"));
    let obj = cluster.wait_for(OCIREPO, ns, "r", WAIT, "Ready", ready_now);
    let revision = format!("v1@{}", v1.manifest_digest);
    assert_eq!(obj["status"]["artifact"]["revision"], revision.as_str());

    let (component, event) = delivered(&received, "NewArtifact", Some(&revision), &c);
    assert_eq!(
        component.as_deref(),
        Some("ocisource"),
        "gotk-component header"
    );
    let involved = &event["involvedObject"];
    assert_eq!(involved["apiVersion"], "ocisource.dev/v1beta1");
    assert_eq!(involved["kind"], "OCIRepository");
    assert_eq!(
        (&involved["namespace"], &involved["name"]),
        (&json!(ns), &json!("r"))
    );
    assert_eq!(involved["uid"], obj["metadata"]["uid"]);
    assert!(
        involved["resourceVersion"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{involved:#}"
    );
    assert_eq!(event["severity"], "info");
    assert_eq!(event["reportingController"], "ocisource");
    assert_eq!(
        event["message"],
        format!("stored artifact with revision '{revision}' from '{url}'")
    );

    // A tag that does not exist: the failure arrives as an error.
    patch_tag(&cluster, ns, "v2");
    let failing = cluster.wait_for(OCIREPO, ns, "r", WAIT, "Ready=False", |o| {
        condition(o, "Ready").is_some_and(|r| r["status"] == "False")
    });
    let ready = condition(&failing, "Ready").unwrap();
    let reason = ready["reason"].as_str().unwrap();
    let (_, event) = delivered(&received, reason, None, &c);
    assert_eq!(event["severity"], "error");
    assert_eq!(event["message"], ready["message"]);
    assert!(
        event["metadata"].get("revision").is_none(),
        "no revision on a failure: {event:#}"
    );

    // The tag appears: the object recovers, with a new artifact.
    let v2 = registry
        .push_artifact("app/r", "v2", &[(FLUX_LAYER, tar_gz(&[("a", b"2")]))], &[])
        .await;
    let revision = format!("v2@{}", v2.manifest_digest);
    cluster.wait_for(OCIREPO, ns, "r", WAIT, "recovered at v2", |o| {
        ready_now(o) && o["status"]["artifact"]["revision"] == revision.as_str()
    });
    let (_, event) = delivered(&received, "NewArtifact", Some(&revision), &c);
    assert_eq!(event["severity"], "info");
}
