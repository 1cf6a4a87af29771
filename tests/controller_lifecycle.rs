//! The controller's Kubernetes I/O around the artifact path, with a mock API server
//! (tower-test): the finalizer is added before anything else, deletion removes the
//! object's storage folder and then the finalizer, suspend makes no request (but records
//! a requested reconcile, as Flux does), an invalid
//! URL stalls without requeue; plus the start-up storage check and the leader Lease's
//! races and conflicts (409s a real API server gives only by chance). requestedAt, the
//! Lease's creation and hand-over run on the real API server (`tests/cluster_*.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod controller_fixtures;
mod support;

use std::time::Duration;

use http::Method;
use kube::runtime::controller::Action;
use serde_json::json;

use controller_fixtures::{
    condition, events_path, last, mock_client, only, repo, repo_path, Env, EventCall, Expect,
    RepoExt, Scenario, Shown, NS,
};
use ocisource::api::OciRepository;
use ocisource::controller::leader::{try_acquire, LeaseConfig};
use ocisource::controller::startup::{check_storage, check_storage_kinds, StartupReport};
use ocisource::ports::ArtifactStore;
use ocisource::storage::Storage;
use support::{sha256, tar_gz, RegistryOpts};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

async fn env_with_artifact() -> (Env, OciRepository) {
    let env = Env::new(RegistryOpts::plain());
    env.reg
        .push_artifact(
            "team/app",
            "v1",
            &[(LAYER, tar_gz(&[("a.txt", b"a")]))],
            &[],
        )
        .await;
    let obj = repo("app", &env.url("team/app")).with_tag("v1");
    (env, obj)
}

#[tokio::test]
async fn object_without_finalizer_shows_reconciling_then_gets_the_finalizer() {
    let (mut env, obj) = env_with_artifact().await;
    let obj = obj.without_finalizer();
    let pushed = env.reg.request_log().len();
    let (action, calls) = env
        .reconcile(&obj, Scenario::AddFinalizer(obj.clone()))
        .await;
    assert_eq!(action.unwrap(), Action::await_change());
    assert_eq!(calls.len(), 2);
    // Reconciling from the start: a status is shown before the finalizer round-trip.
    let shown = &calls[0].body["status"];
    assert_eq!(condition(shown, "Reconciling")["reason"], "Progressing");
    assert_eq!(condition(shown, "Ready")["status"], "Unknown");
    assert_eq!(
        env.reg.request_log().len(),
        pushed,
        "nothing is pulled before the finalizer"
    );
    assert!(env.storage().list_artifacts().unwrap().is_empty());
}

#[tokio::test]
async fn deletion_removes_the_objects_storage_then_the_finalizer() {
    let (mut env, obj) = env_with_artifact().await;
    let (_, calls) = env
        .reconcile_as(
            &obj,
            Expect::events(&[EventCall::Create]).showing(&[Shown::Status]),
        )
        .await;
    let obj = obj.with_status_of(last(&calls, Method::PATCH, &repo_path("app", "/status")));
    let path = obj
        .status
        .as_ref()
        .unwrap()
        .artifact
        .as_ref()
        .unwrap()
        .path
        .clone();
    assert!(env.storage().exists(&path));
    // Another object's artifact in the same namespace must survive.
    let other = Storage::artifact_path(NS, "other", "keep.tar.gz").unwrap();
    std::fs::create_dir_all(
        env.dir
            .path()
            .join(Storage::object_dir(NS, "other").unwrap()),
    )
    .unwrap();
    std::fs::write(env.dir.path().join(&other), b"x").unwrap();

    let obj = obj.deleting();
    let (action, _) = env
        .reconcile(&obj, Scenario::RemoveFinalizer(obj.clone()))
        .await;
    assert_eq!(action.unwrap(), Action::await_change());
    assert!(!env
        .dir
        .path()
        .join(Storage::object_dir(NS, "app").unwrap())
        .exists());
    assert_eq!(env.storage().list_artifacts().unwrap(), vec![other]);
}

#[tokio::test]
async fn suspended_object_makes_no_request() {
    let (mut env, obj) = env_with_artifact().await;
    let obj = obj.suspended();
    let pushed = env.reg.request_log().len();
    let (action, calls) = env.reconcile(&obj, Scenario::NoRequests).await;
    assert_eq!(action.unwrap(), Action::await_change());
    assert!(calls.is_empty());
    assert_eq!(
        env.reg.request_log().len(),
        pushed,
        "a suspended object is not pulled"
    );
}

#[tokio::test]
async fn suspended_object_still_records_a_requested_reconcile() {
    // Flux's RecordReconcileReq runs for suspended objects too: `flux reconcile` on a
    // suspended source must not wait forever for lastHandledReconcileAt.
    let (mut env, obj) = env_with_artifact().await;
    let obj = obj.suspended().requested_at("2026-07-02T11:00:00Z");
    let pushed = env.reg.request_log().len();
    let (action, calls) = env.reconcile(&obj, Scenario::StatusOnly(obj.clone())).await;
    assert_eq!(action.unwrap(), Action::await_change());
    let status = &last(&calls, Method::PATCH, &repo_path("app", "/status")).body["status"];
    assert_eq!(status["lastHandledReconcileAt"], "2026-07-02T11:00:00Z");
    assert!(
        status["artifact"].is_null(),
        "nothing else happened: {status:#}"
    );
    assert_eq!(env.reg.request_log().len(), pushed, "not pulled");
    // Once recorded, the same request costs nothing.
    let handled = obj.with_status_of(last(&calls, Method::PATCH, &repo_path("app", "/status")));
    let (_, calls) = env.reconcile(&handled, Scenario::NoRequests).await;
    assert!(calls.is_empty());
}

#[tokio::test]
async fn invalid_url_stalls_and_waits_for_a_spec_change() {
    let (mut env, _) = env_with_artifact().await;
    let obj = repo("bad", "https://example.com/not-oci");
    let (action, calls) = env
        .reconcile_as(
            &obj,
            Expect::events(&[EventCall::Create]).showing(&[Shown::Status]),
        )
        .await;
    assert_eq!(action.unwrap(), Action::await_change());
    let status = &last(&calls, Method::PATCH, &repo_path("bad", "/status")).body["status"];
    let stalled = condition(status, "Stalled");
    assert_eq!(stalled["status"], "True");
    assert_eq!(stalled["reason"], "URLInvalid");
    let ready = condition(status, "Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (&json!("False"), &json!("URLInvalid"))
    );
    assert!(
        status["artifact"].is_null(),
        "no artifact was ever stored: {status:#}"
    );
    assert_eq!(status["observedGeneration"], 1);
    let event = &only(&calls, Method::POST, &events_path()).body;
    assert_eq!(
        (&event["type"], &event["reason"]),
        (&json!("Warning"), &json!("URLInvalid"))
    );
}

fn with_artifact(name: &str, path: &str, digest: &str) -> OciRepository {
    let mut obj = repo(name, "oci://127.0.0.1:1/x");
    obj.status = Some(
        serde_json::from_value(json!({"artifact": {
            "path": path, "url": format!("http://h/{path}"), "revision": "v1@sha256:00",
            "digest": digest, "lastUpdateTime": "2026-07-02T10:00:00Z"}}))
        .unwrap(),
    );
    obj
}

#[test]
fn startup_check_deletes_tampered_reports_missing_and_removes_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new(dir.path());
    let write = |name: &str, bytes: &[u8]| {
        let rel = Storage::artifact_path(NS, name, "a.tar.gz").unwrap();
        std::fs::create_dir_all(dir.path().join(Storage::object_dir(NS, name).unwrap())).unwrap();
        std::fs::write(dir.path().join(&rel), bytes).unwrap();
        rel
    };
    let good = write("good", b"good bytes");
    let tampered = write("tampered", b"changed after publishing");
    let orphan = write("gone", b"no object");
    let missing = Storage::artifact_path(NS, "missing", "a.tar.gz").unwrap();
    // What a writer killed mid-pull leaves: a temp file nobody holds a lock on.
    let stale = format!("{}/.tmp-killed", Storage::object_dir(NS, "good").unwrap());
    std::fs::write(dir.path().join(&stale), b"partial").unwrap();
    let objects = [
        with_artifact("good", &good, &sha256(b"good bytes")),
        with_artifact("tampered", &tampered, &sha256(b"published bytes")),
        with_artifact("missing", &missing, &sha256(b"whatever")),
    ];

    let report = check_storage(&storage, &objects).unwrap();
    assert_eq!(
        report,
        StartupReport {
            tampered: vec![tampered.clone()],
            missing: vec![missing],
            orphans: vec![Storage::object_dir(NS, "gone").unwrap()],
            stale_temps: vec![stale.clone()],
        }
    );
    assert!(storage.exists(&good));
    assert!(
        !storage.exists(&tampered),
        "a tampered artifact is deleted for rebuild"
    );
    assert!(!storage.exists(&orphan));
    assert!(!dir.path().join(&stale).exists());
    assert_eq!(storage.list_artifacts().unwrap(), vec![good]);
}

/// Drop-in mode: Flux's kind has its own folder; its orphans go only while the mode is on
/// (with it off, the folders are left for when it comes back); an artifact path in Flux's
/// source-controller's store (an object just taken over) is neither checked nor missing.
#[test]
fn startup_check_covers_fluxs_kind_only_in_drop_in_mode() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::new(dir.path());
    let write = |rel: &str, bytes: &[u8]| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        rel.to_string()
    };
    let kept = write(
        &format!("flux/ocirepository/{NS}/kept/a.tar.gz"),
        b"flux bytes",
    );
    let orphan = write(
        &format!("flux/ocirepository/{NS}/gone/a.tar.gz"),
        b"no object",
    );
    let flux_object = |name: &str, path: &str, digest: &str| -> ocisource::api::FluxOciRepository {
        serde_json::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"url": "oci://127.0.0.1:1/x", "interval": "1m"},
            "status": {"artifact": {"path": path, "url": format!("http://h/{path}"),
                "revision": "v1@sha256:00", "digest": digest,
                "lastUpdateTime": "2026-07-02T10:00:00Z"}}}))
        .unwrap()
    };
    let flux = [
        flux_object("kept", &kept, &sha256(b"flux bytes")),
        // Taken over from source-controller: its path is in that controller's store.
        flux_object(
            "moved",
            &format!("ocirepository/{NS}/moved/b.tar.gz"),
            &sha256(b"x"),
        ),
    ];

    let off = check_storage_kinds(&storage, &[], None).unwrap();
    assert_eq!(
        off,
        StartupReport::default(),
        "drop-in off: Flux's folders are left alone"
    );
    assert!(storage.exists(&orphan));

    let on = check_storage_kinds(&storage, &[], Some(&flux)).unwrap();
    assert_eq!(
        on,
        StartupReport {
            orphans: vec![format!("flux/ocirepository/{NS}/gone")],
            ..StartupReport::default()
        }
    );
    assert_eq!(storage.list_artifacts().unwrap(), vec![kept]);
}

fn lease_config(name: &str) -> LeaseConfig {
    LeaseConfig {
        namespace: NS.into(),
        name: name.into(),
        identity: "ocisource-0".into(),
        duration: Duration::from_secs(15),
    }
}

#[tokio::test]
async fn leader_loses_a_create_race_without_error() {
    let (client, mut api) = mock_client();
    let cfg = lease_config("leader");
    let (held, _) = api
        .run(
            Scenario::LeaseCreateConflict("leader".into()),
            try_acquire(&client, &cfg),
        )
        .await;
    assert!(
        !held.unwrap(),
        "a 409 on create means another replica leads"
    );
}

fn existing_lease(holder: &str, renewed_secs_ago: i64, transitions: i32) -> serde_json::Value {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let at = |s: i64| {
        k8s_openapi::jiff::Timestamp::from_second(s)
            .unwrap()
            .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
            .to_string()
    };
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader", "namespace": NS, "resourceVersion": "41"},
        "spec": {
            "holderIdentity": holder, "leaseDurationSeconds": 15,
            "acquireTime": at(now - 3600), "renewTime": at(now - renewed_secs_ago),
            "leaseTransitions": transitions,
        }
    })
}

/// `try_acquire` for ocisource-0 against an existing Lease `lease` whose replace is answered
/// with `put` (`None`: no replace expected). Returns whether it holds the lease and the
/// body of the replace, if any.
async fn acquire_existing(lease: serde_json::Value, put: Option<u16>) -> (bool, serde_json::Value) {
    let (client, mut api) = mock_client();
    let (held, calls) = api
        .run(
            Scenario::LeaseExists {
                name: "leader".into(),
                lease,
                put,
            },
            try_acquire(&client, &lease_config("leader")),
        )
        .await;
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/leader");
    let body = match put {
        Some(_) => only(&calls, Method::PUT, &path).body.clone(),
        None => {
            assert_eq!(calls.len(), 1, "only the GET: {calls:?}");
            serde_json::Value::Null
        }
    };
    (held.unwrap(), body)
}

#[tokio::test]
async fn leader_renews_its_own_lease_keeping_acquire_time_and_transitions() {
    let before = existing_lease("ocisource-0", 5, 3);
    let (held, put) = acquire_existing(before.clone(), Some(200)).await;
    assert!(held);
    assert_eq!(
        put["metadata"]["resourceVersion"], "41",
        "a stale write must 409"
    );
    assert_eq!(put["spec"]["holderIdentity"], "ocisource-0");
    assert_eq!(put["spec"]["acquireTime"], before["spec"]["acquireTime"]);
    assert_eq!(put["spec"]["leaseTransitions"], 3);
    assert_ne!(put["spec"]["renewTime"], before["spec"]["renewTime"]);
}

#[tokio::test]
async fn leader_takes_an_expired_lease_and_counts_the_transition() {
    let (held, put) = acquire_existing(existing_lease("ocisource-1", 60, 3), Some(200)).await;
    assert!(held);
    assert_eq!(put["spec"]["holderIdentity"], "ocisource-0");
    assert_eq!(put["spec"]["leaseTransitions"], 4);
    assert_eq!(put["spec"]["acquireTime"], put["spec"]["renewTime"]);
}

#[tokio::test]
async fn a_valid_lease_of_another_replica_is_left_alone() {
    let (held, _) = acquire_existing(existing_lease("ocisource-1", 2, 0), None).await;
    assert!(!held);
}

#[tokio::test]
async fn a_conflicting_renewal_means_the_lease_is_lost() {
    let (held, _) = acquire_existing(existing_lease("ocisource-0", 5, 0), Some(409)).await;
    assert!(
        !held,
        "a 409 on replace means another replica wrote the lease first"
    );
}
