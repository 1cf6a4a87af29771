//! Object lifecycle on the REAL API server (see `tests/support/cluster.rs`): deletion and
//! garbage collection, suspend/resume and `reconcile.fluxcd.io/requestedAt` as in Flux,
//! two replicas with leader election behind one Service address, and failures the
//! status must still show against the server's limits: a registry's huge, hostile
//! message ends in a bounded Ready=False and an Event, and a status write the server
//! refuses is reported by an Event and a metric and retried.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::cluster::{condition, has_condition, ready_now, Cluster, Controller, Env, Service};
use support::{sha256, tar_gz, RegistryOpts, TestRegistry};

const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const OCIREPO: &str = "ocirepositories.ocisource.dev";
const EA: &str = "externalartifacts.source.toolkit.fluxcd.io";
const WAIT: Duration = Duration::from_secs(90);

fn oci_repository(ns: &str, name: &str, url: &str, extra: &str) -> String {
    format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  url: {url}\n  interval: 10m\n  insecure: true\n{extra}"
    )
}

/// Creates OCIRepository `name` in the test's namespace for tag v1 of `repo` in the
/// test's registry.
fn apply_v1(env: &Env, name: &str, repo: &str) {
    let yaml = oci_repository(&env.ns.name, name, &env.url(repo), "  ref:\n    tag: v1\n");
    env.cluster.apply(&yaml);
}

/// Deleting the OCIRepository removes its ExternalArtifact and, after GC, its file.
#[tokio::test(flavor = "multi_thread")]
async fn delete_removes_external_artifact_and_file() {
    let Some(env) = Env::start("delete", &json!({})) else {
        return;
    };
    let (cluster, registry, ns, storage) =
        (&env.cluster, &env.registry, &env.ns.name, env.storage());
    registry
        .push_artifact(
            "app/del",
            "v1",
            &[(FLUX_LAYER, tar_gz(&[("a", b"a")]))],
            &[],
        )
        .await;
    let url = format!("oci://{}/app/del", registry.host());
    cluster.apply(&oci_repository(ns, "del", &url, "  ref:\n    tag: v1\n"));
    let obj = cluster.wait_for(OCIREPO, ns, "del", WAIT, "Ready", ready_now);
    cluster.wait_for(EA, ns, "del", WAIT, "ExternalArtifact exists", |_| true);
    let file = storage.join(obj["status"]["artifact"]["path"].as_str().unwrap());
    assert!(file.is_file(), "{} should exist", file.display());

    cluster.kubectl_ok(&[
        "delete",
        "-n",
        ns,
        &format!("{OCIREPO}/del"),
        "--wait=true",
        "--timeout=60s",
    ]);
    cluster.wait_gone(EA, ns, "del", WAIT);
    let deadline = Instant::now() + WAIT;
    while file.exists() {
        assert!(
            Instant::now() < deadline,
            "{} was not garbage-collected",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `suspend: true` stops reconciling (a new tag and a requested reconcile change
/// nothing but lastHandledReconcileAt, as in Flux); resuming picks the new tag up;
/// `reconcile.fluxcd.io/requestedAt` is echoed in `status.lastHandledReconcileAt`.
#[tokio::test(flavor = "multi_thread")]
async fn suspend_resume_and_requested_at() {
    let Some(env) = Env::start("suspend", &json!({})) else {
        return;
    };
    let (cluster, registry, ns) = (&env.cluster, &env.registry, &env.ns.name);
    let v1 = registry
        .push_artifact(
            "app/s",
            "latest",
            &[(FLUX_LAYER, tar_gz(&[("a", b"1")]))],
            &[],
        )
        .await;
    let url = format!("oci://{}/app/s", registry.host());
    cluster.apply(&oci_repository(ns, "s", &url, ""));
    cluster.wait_for(OCIREPO, ns, "s", WAIT, "Ready", ready_now);

    cluster.request_reconcile(OCIREPO, ns, "s", "first");
    cluster.wait_for(
        OCIREPO,
        ns,
        "s",
        WAIT,
        "lastHandledReconcileAt=first",
        |o| o["status"]["lastHandledReconcileAt"] == "first",
    );

    cluster.kubectl_ok(&[
        "patch",
        "-n",
        ns,
        &format!("{OCIREPO}/s"),
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
    // As in Flux, a suspended object's status is left alone (observedGeneration too),
    // except for the requested reconcile it records below.
    let v2 = registry
        .push_artifact(
            "app/s",
            "latest",
            &[(FLUX_LAYER, tar_gz(&[("a", b"2")]))],
            &[],
        )
        .await;
    cluster.request_reconcile(OCIREPO, ns, "s", "while-suspended");
    let o = cluster.wait_for(
        OCIREPO,
        ns,
        "s",
        WAIT,
        "suspended object records the request",
        |o| o["status"]["lastHandledReconcileAt"] == "while-suspended",
    );
    assert_eq!(
        o["status"]["artifact"]["revision"],
        format!("latest@{}", v1.manifest_digest),
        "a suspended object must not fetch"
    );

    cluster.kubectl_ok(&[
        "patch",
        "-n",
        ns,
        &format!("{OCIREPO}/s"),
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    cluster.wait_for(
        OCIREPO,
        ns,
        "s",
        WAIT,
        "resumed object fetches the moved tag",
        |o| {
            ready_now(o)
                && o["status"]["artifact"]["revision"] == format!("latest@{}", v2.manifest_digest)
        },
    );
}

/// Two replicas with `--leader-elect` (the chart's `replicas: 2`) share the store and a
/// Service address: only the Lease holder reconciles; killing it hands over within the
/// lease duration, and the artifact is served throughout.
#[tokio::test(flavor = "multi_thread")]
async fn leader_election_hands_over_and_keeps_serving() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let registry = TestRegistry::start(RegistryOpts::plain());
    let values = json!({"replicas": 2});
    let ns = cluster.namespace("leader", &values);
    let ns = &ns.name;
    let work = tempfile::tempdir().unwrap();
    let storage = work.path().join("data");
    let svc = Service::bind();
    let service = svc.addr.clone();
    let mut a = Controller::start_advertising(
        &cluster,
        ns,
        &values,
        &storage,
        "ocisource-a",
        Some(&service),
    );
    let mut b = Controller::start_advertising(
        &cluster,
        ns,
        &values,
        &storage,
        "ocisource-b",
        Some(&service),
    );
    svc.serve(vec![a.storage_addr.clone(), b.storage_addr.clone()]);

    registry
        .push_artifact("app/l", "v1", &[(FLUX_LAYER, tar_gz(&[("a", b"1")]))], &[])
        .await;
    let url = format!("oci://{}/app/l", registry.host());
    cluster.apply(&oci_repository(ns, "l", &url, "  ref:\n    tag: v1\n"));
    let obj = cluster.wait_for(OCIREPO, ns, "l", WAIT, "Ready", ready_now);
    let lease = cluster.wait_for(
        "lease",
        ns,
        "ocisource-leader-election",
        WAIT,
        "a holder",
        |l| l["spec"]["holderIdentity"].is_string(),
    );
    let holder = lease["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_string();
    let (leader, follower, follower_name) = if holder.starts_with("ocisource-a") {
        (&mut a, &mut b, "ocisource-b")
    } else {
        assert!(
            holder.starts_with("ocisource-b"),
            "unexpected holder {holder}"
        );
        (&mut b, &mut a, "ocisource-a")
    };
    assert!(
        follower.running(),
        "the follower must wait, not exit: {}",
        follower.log_text()
    );
    let artifact_url = obj["status"]["artifact"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    let digest = obj["status"]["artifact"]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        artifact_url.contains(&service),
        "{artifact_url} should use the Service address {service}"
    );

    let killed_at = Instant::now();
    leader.kill();
    // Served throughout: the follower serves the shared store while it campaigns.
    let body = follower.fetch(&artifact_url).unwrap();
    assert_eq!(support::sha256(&body), digest);
    let lease = cluster.wait_for(
        "lease",
        ns,
        "ocisource-leader-election",
        Duration::from_secs(60),
        "hand-over",
        |l| {
            l["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| h.starts_with(follower_name))
        },
    );
    let duration = lease["spec"]["leaseDurationSeconds"].as_u64().unwrap();
    // Not a timing assertion on our speed: the hand-over bound is the Lease contract.
    assert!(
        killed_at.elapsed() <= Duration::from_secs(duration * 2 + 5),
        "hand-over took {:?}, lease duration {duration}s",
        killed_at.elapsed()
    );
    // The new leader reconciles: a new tag is picked up.
    let v2 = registry
        .push_artifact("app/l", "v1", &[(FLUX_LAYER, tar_gz(&[("a", b"2")]))], &[])
        .await;
    cluster.request_reconcile(OCIREPO, ns, "l", "after-handover");
    let obj = cluster.wait_for(OCIREPO, ns, "l", WAIT, "new leader reconciles", |o| {
        o["status"]["artifact"]["revision"] == format!("v1@{}", v2.manifest_digest)
    });
    let body = follower
        .fetch(obj["status"]["artifact"]["url"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        support::sha256(&body),
        obj["status"]["artifact"]["digest"].as_str().unwrap()
    );
}

/// A replica that loses the Lease (another holder took it over) stops reconciling and
/// turns unready, but does not exit: it campaigns again and leads once the Lease is free.
#[tokio::test(flavor = "multi_thread")]
async fn lost_lease_stops_reconciling_and_campaigns_again() {
    let values = json!({"replicas": 2});
    let Some(mut env) = Env::start("lostlease", &values) else {
        return;
    };
    let ns = env.ns.name.clone();
    let lease = "ocisource-leader-election";
    let held_by = |who: &'static str| {
        move |l: &serde_json::Value| {
            l["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| h.starts_with(who))
        }
    };
    env.cluster.wait_for(
        "lease",
        &ns,
        lease,
        WAIT,
        "held by ocisource-0",
        held_by("ocisource-0"),
    );
    let now = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let patch = json!({"spec": {"holderIdentity": "intruder", "renewTime": now, "leaseDurationSeconds": 20}});
    env.cluster.kubectl_ok(&[
        "patch",
        "lease",
        "-n",
        &ns,
        lease,
        "--type=merge",
        "-p",
        &patch.to_string(),
    ]);
    let readyz = format!("http://{}/readyz", env.controller.health_addr);
    let deadline = Instant::now() + WAIT;
    while env.controller.fetch(&readyz).is_ok() {
        assert!(
            Instant::now() < deadline,
            "still ready after losing the Lease:\n{}",
            env.controller.log_text()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        env.controller.running(),
        "a lost Lease must not end the process:\n{}",
        env.controller.log_text()
    );
    // The intruder never renews: once its Lease expires, the replica leads again.
    env.cluster.wait_for(
        "lease",
        &ns,
        lease,
        WAIT,
        "taken back",
        held_by("ocisource-0"),
    );
    registry_reconciles(&env, &ns).await;
    assert!(env.controller.running());
}

/// After a (re)gained Lease, a new object is reconciled to Ready.
async fn registry_reconciles(env: &Env, ns: &str) {
    env.registry
        .push_artifact(
            "app/back",
            "v1",
            &[(FLUX_LAYER, tar_gz(&[("a", b"1")]))],
            &[],
        )
        .await;
    apply_v1(env, "back", "app/back");
    env.cluster.wait_for(
        OCIREPO,
        ns,
        "back",
        WAIT,
        "Ready after leading again",
        ready_now,
    );
}

/// The Events about `name` with `reason`.
fn events_of(cluster: &Cluster, ns: &str, name: &str, reason: &str) -> Vec<serde_json::Value> {
    let events = cluster.events(ns).into_iter();
    events
        .filter(|e| e["regarding"]["name"] == name && e["reason"] == reason)
        .collect()
}

/// A manifest of 12,000 layers, none of them tar, each of its own media type (one with
/// a terminal escape in it): the layer error once listed them all, a 1.9 MB message the
/// API server refused with the whole status (the CRD allows 32,768 characters), so the
/// object never showed Ready=False. Now it does, with a short escaped message and an
/// Event.
#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_of_12000_unselected_layers_ends_ready_false_with_a_bounded_message() {
    let Some(env) = Env::start("huge-message", &json!({})) else {
        return;
    };
    let (cluster, registry, ns) = (&env.cluster, &env.registry, &env.ns.name);
    let (blob, config) = (b"not a tar".as_slice(), b"{}".as_slice());
    registry.push_blob("app/many", blob).await;
    registry.push_blob("app/many", config).await;
    let layers: Vec<serde_json::Value> = (0..12_000)
        .map(|i| {
            let escape = if i == 0 { "\u{1b}[2J" } else { "" };
            json!({
                "mediaType": format!("application/vnd.example.unselected{escape}.layer.{i:05}+json"),
                "digest": sha256(blob),
                "size": blob.len(),
            })
        })
        .collect();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.cncf.flux.config.v1+json", "digest": sha256(config), "size": config.len()},
        "layers": layers,
    });
    let body = serde_json::to_vec(&manifest).unwrap();
    registry
        .put_manifest(
            "app/many",
            "v1",
            "application/vnd.oci.image.manifest.v1+json",
            &body,
        )
        .await;
    apply_v1(&env, "many", "app/many");

    let obj = cluster.wait_for(OCIREPO, ns, "many", WAIT, "Ready=False", |o| {
        has_condition(o, "Ready", "False")
    });
    let ready = condition(&obj, "Ready").unwrap();
    let message = ready["message"].as_str().unwrap();
    assert!(message.len() <= 4096, "{} bytes: {message}", message.len());
    assert!(
        message.contains("application/vnd.example.unselected\\x1b[2J.layer.00000+json")
            && message.ends_with("and 11995 more media types (12000 layers)"),
        "{message}"
    );
    assert!(!message.contains('\u{1b}'), "{message}");
    let reason = ready["reason"].as_str().unwrap();
    let warnings = events_of(cluster, ns, "many", reason);
    let warning = warnings
        .first()
        .unwrap_or_else(|| panic!("no {reason} Event:\n{}", env.controller.log_text()));
    assert_eq!(warning["type"], "Warning");
    assert!(
        warning["note"].as_str().unwrap().len() <= 1024,
        "{warning:#}"
    );
}

/// A status the API server refuses (a manifest annotation of 2 MB, which Flux copies
/// into `status.artifact.metadata`, makes the object larger than the server stores):
/// the object cannot show it, so a Warning Event `PatchOperationFailed` says so, the
/// refusal is counted in `ocisource_status_write_failures_total`, and the write is tried
/// again with backoff.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_status_write_is_reported_and_retried() {
    let Some(env) = Env::start("refused-status", &json!({})) else {
        return;
    };
    let (cluster, registry, ns) = (&env.cluster, &env.registry, &env.ns.name);
    let huge = "x".repeat(2_000_000);
    registry
        .push_artifact(
            "app/big",
            "v1",
            &[(FLUX_LAYER, tar_gz(&[("a", b"a")]))],
            &[("org.example/huge", huge.as_str())],
        )
        .await;
    apply_v1(&env, "big", "app/big");

    let metrics = format!("http://{}/metrics", env.controller.metrics_addr);
    let refusals = || {
        let text = env.controller.fetch(&metrics).unwrap();
        let text = String::from_utf8(text).unwrap();
        text.lines()
            .find_map(|l| {
                l.strip_prefix("ocisource_status_write_failures_total{group=\"ocisource.dev\"} ")
            })
            .map_or(0, |n| n.parse::<u64>().unwrap())
    };
    let deadline = Instant::now() + WAIT;
    // Two refusals: the first, and the retry after the backoff.
    while refusals() < 2 {
        assert!(
            Instant::now() < deadline,
            "refused status writes not counted twice; log:\n{}",
            env.controller.log_text()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let events = events_of(cluster, ns, "big", "PatchOperationFailed");
    let event = events.first().unwrap_or_else(|| {
        panic!(
            "no PatchOperationFailed Event:\n{}",
            env.controller.log_text()
        )
    });
    assert_eq!(event["type"], "Warning");
    let note = event["note"].as_str().unwrap();
    assert!(
        note.starts_with(&format!("failed to write the status of {ns}/big: "))
            && note.len() <= 1024,
        "{note}"
    );
    let obj = cluster.get(OCIREPO, ns, "big").unwrap();
    assert!(!ready_now(&obj), "the refused status shows Ready: {obj:#}");
}
