//! Drop-in mode on the REAL API server, with Flux's own source-controller running beside
//! ocisource (built from its module, started by `hack/cluster.sh flux source-controller`
//! with Flux's sharding exclusion `--watch-label-selector=!sharding.fluxcd.io/key`):
//! Flux's `source.toolkit.fluxcd.io/v1` OCIRepository objects labelled
//! `sharding.fluxcd.io/key=ocisource` are reconciled by ocisource and never touched by
//! source-controller, the others by source-controller; an object that moves (label added,
//! then removed) keeps its Kustomization applying with no Ready=False in between, and the
//! status ocisource writes is the one source-controller wrote. The flux CLI on these
//! objects: tests/cluster_drop_in_cli.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::cluster::{condition, has_condition, ready_now, Cluster, Env};
use support::drop_in::{
    configmap_yaml, drop_in_values, flux_oci_repository, kustomization, FLUX_LAYER, FLUX_OCI,
    SHARD, WAIT,
};
use support::tar_gz;
use support::watch::Watch;

const OTHER_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// The artifact server address of the source-controller `hack/cluster.sh flux
/// source-controller` started, or `None` (skip, or fail under OCISOURCE_REQUIRE_CLUSTER).
fn source_controller(cluster: &Cluster) -> Option<String> {
    if !support::drop_in::source_controller_runs(cluster) {
        return None;
    }
    let port = std::fs::read_to_string(cluster.dir.join("source-controller.storage-port"))
        .expect("source-controller.storage-port");
    Some(format!("127.0.0.1:{}", port.trim()))
}

/// The field managers that ever wrote `obj`.
fn managers(obj: &Value) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|f| f["manager"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn artifact_url(obj: &Value) -> String {
    obj["status"]["artifact"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Labelled objects are ours (Flux's status shape, Flux's first-layer default, our store),
/// unlabelled ones are source-controller's; the moving object keeps its Kustomization
/// applying (no Ready=False on it or on the Kustomization), and moves back.
#[tokio::test(flavor = "multi_thread")]
async fn labelled_flux_objects_move_to_ocisource_and_back_without_a_gap() {
    let Some(s) = Env::start("dropin", &drop_in_values()) else {
        return;
    };
    let Some(sc_addr) = source_controller(&s.cluster) else {
        return;
    };
    let ns = &s.ns.name;
    let ours_addr = s.controller.storage_addr.clone();
    // Two layers: Flux takes the first only; the second would override the ConfigMap.
    let first = tar_gz(&[("cm.yaml", configmap_yaml("greeting", "first").as_bytes())]);
    let second = tar_gz(&[("cm.yaml", configmap_yaml("greeting", "second").as_bytes())]);
    let pushed = s
        .registry
        .push_artifact(
            "app/config",
            "v1",
            &[(FLUX_LAYER, first), (OTHER_LAYER, second.clone())],
            &[],
        )
        .await;
    let url = s.url("app/config");

    // 1. Labelled from the start: ours, never source-controller's.
    s.cluster.apply(&flux_oci_repository(
        ns,
        "ours",
        &url,
        &format!("{{{SHARD}: ocisource}}"),
    ));
    let ours = s
        .cluster
        .wait_for(FLUX_OCI, ns, "ours", WAIT, "ours Ready", ready_now);
    let hex = pushed.manifest_digest.trim_start_matches("sha256:");
    let artifact = &ours["status"]["artifact"];
    assert_eq!(
        artifact["revision"],
        format!("v1@{}", pushed.manifest_digest)
    );
    assert_eq!(
        artifact["path"],
        format!("flux/ocirepository/{ns}/ours/{hex}.tar.gz")
    );
    assert_eq!(
        artifact_url(&ours),
        format!("http://{ours_addr}/flux/ocirepository/{ns}/ours/{hex}.tar.gz")
    );
    assert_eq!(
        condition(&ours, "Ready").unwrap()["message"],
        format!("stored artifact for digest 'v1@{}'", pushed.manifest_digest)
    );
    assert_eq!(ours["status"]["observedGeneration"], 1);
    assert!(ours["status"].get("observedPlatform").is_none());
    assert!(
        ours["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "finalizers.fluxcd.io"),
        "Flux's finalizer: {ours:#}"
    );
    // Flux's default: the first layer only, so the stored tarball has the first content.
    let body = s.controller.fetch(&artifact_url(&ours)).unwrap();
    assert_eq!(support::sha256(&body), artifact["digest"].as_str().unwrap());
    let listing = untar_text(&body, "cm.yaml");
    assert!(listing.contains("greeting: first"), "{listing}");
    // No ExternalArtifact for Flux's kind: its consumers read it directly.
    assert!(s
        .cluster
        .get("externalartifacts.source.toolkit.fluxcd.io", ns, "ours")
        .is_none());

    // 2. Unlabelled: source-controller's. A Kustomization consumes it.
    s.cluster
        .apply(&flux_oci_repository(ns, "moving", &url, "{team: a}"));
    let moving = s.cluster.wait_for(
        FLUX_OCI,
        ns,
        "moving",
        WAIT,
        "moving Ready (source-controller)",
        ready_now,
    );
    assert!(
        artifact_url(&moving).starts_with(&format!("http://{sc_addr}/")),
        "source-controller serves it: {moving:#}"
    );
    s.cluster.apply(&kustomization(ns, "app", "moving"));
    let cm = s.cluster.wait_for(
        "configmap",
        ns,
        "greeting",
        WAIT,
        "ConfigMap applied",
        |_| true,
    );
    assert_eq!(cm["data"]["greeting"], "first");
    s.cluster.wait_for(
        "kustomization",
        ns,
        "app",
        WAIT,
        "Kustomization Ready",
        |o| has_condition(o, "Ready", "True"),
    );

    // 3. The move: label it. Watch both objects throughout.
    let watch_source = Watch::start(&s.cluster, FLUX_OCI, ns, "moving");
    let watch_ks = Watch::start(&s.cluster, "kustomization", ns, "app");
    std::thread::sleep(Duration::from_secs(1));
    s.cluster.kubectl_ok(&[
        "label",
        FLUX_OCI,
        "moving",
        "-n",
        ns,
        &format!("{SHARD}=ocisource"),
    ]);
    let moved = s.cluster.wait_for(
        FLUX_OCI,
        ns,
        "moving",
        WAIT,
        "moving served by ocisource",
        |o| ready_now(o) && artifact_url(o).starts_with(&format!("http://{ours_addr}/")),
    );
    assert_eq!(moved["metadata"]["generation"], 1, "the spec never changed");
    // The same object and revision, written by each controller: the status is Flux's.
    let taken = s.cluster.get(FLUX_OCI, ns, "moving").unwrap();
    assert_same_status(&moving, &taken);
    // A new revision upstream reaches the cluster through ocisource.
    let newer = tar_gz(&[("cm.yaml", configmap_yaml("greeting", "newer").as_bytes())]);
    let pushed2 = s
        .registry
        .push_artifact("app/config", "v1", &[(FLUX_LAYER, newer)], &[])
        .await;
    s.cluster
        .wait_for("configmap", ns, "greeting", WAIT, "new data applied", |o| {
            o["data"]["greeting"] == "newer"
        });
    let after = s.cluster.get(FLUX_OCI, ns, "moving").unwrap();
    assert_eq!(
        after["status"]["artifact"]["revision"],
        format!("v1@{}", pushed2.manifest_digest)
    );
    assert!(artifact_url(&after).starts_with(&format!("http://{ours_addr}/")));

    // 4. Back to source-controller: remove the label.
    s.cluster
        .kubectl_ok(&["label", FLUX_OCI, "moving", "-n", ns, &format!("{SHARD}-")]);
    s.cluster.wait_for(
        FLUX_OCI,
        ns,
        "moving",
        WAIT,
        "moving served by source-controller again",
        |o| ready_now(o) && artifact_url(o).starts_with(&format!("http://{sc_addr}/")),
    );
    std::thread::sleep(Duration::from_secs(6));
    let (versions, ks_versions) = (watch_source.seen(), watch_ks.seen());
    drop((watch_source, watch_ks));

    // Nothing between: neither the source nor the Kustomization ever read Ready=False,
    // and the watch saw both controllers serve the object.
    for (what, seen) in [
        ("OCIRepository", &versions),
        ("Kustomization", &ks_versions),
    ] {
        assert!(!seen.is_empty(), "the watch of the {what} saw nothing");
        for v in seen.iter() {
            assert!(
                !has_condition(v, "Ready", "False"),
                "the {what} read Ready=False during the move: {:#}",
                v["status"]
            );
        }
    }
    // From the label to ocisource's artifact, the object stays Ready=True: the same
    // revision rebuilt in another store is not announced as a new one.
    let labelled = |v: &Value| v["metadata"]["labels"][SHARD] == "ocisource";
    let served_here = |v: &Value| artifact_url(v).starts_with(&format!("http://{ours_addr}/"));
    let start = versions.iter().position(labelled).unwrap();
    let end = versions.iter().position(served_here).unwrap();
    for v in &versions[start..=end] {
        assert!(
            has_condition(v, "Ready", "True"),
            "Ready left True while moving: {:#}",
            v["status"]
        );
    }
    for addr in [&ours_addr, &sc_addr] {
        assert!(
            versions
                .iter()
                .any(|v| artifact_url(v).starts_with(&format!("http://{addr}/"))),
            "no version served from {addr}"
        );
    }

    // 5. source-controller never wrote the object that was ours from the start.
    let ours = s.cluster.get(FLUX_OCI, ns, "ours").unwrap();
    let writers = managers(&ours);
    assert!(
        !writers.iter().any(|m| m.contains("source-controller")),
        "source-controller wrote an object labelled for ocisource: {writers:?}"
    );
    assert!(artifact_url(&ours).starts_with(&format!("http://{ours_addr}/")));
}

/// The conditions (type, status, reason, message, observedGeneration), the status keys,
/// the artifact's revision and metadata, observedGeneration and lastHandledReconcileAt
/// of `flux` (written by Flux's source-controller) and `ours` (written by ocisource) are
/// the same; only where the artifact lives and its timestamps may differ.
fn assert_same_status(flux: &Value, ours: &Value) {
    let conditions = |o: &Value| {
        let mut c: Vec<(String, String, String, String, i64)> = o["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (
                    text("type"),
                    text("status"),
                    text("reason"),
                    text("message"),
                    c["observedGeneration"].as_i64().unwrap_or(-1),
                )
            })
            .collect();
        c.sort();
        c
    };
    assert_eq!(conditions(ours), conditions(flux), "conditions differ");
    let keys = |o: &Value| {
        let mut k: Vec<String> = o["status"].as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(ours), keys(flux), "status keys differ");
    for field in [
        "observedGeneration",
        "lastHandledReconcileAt",
        "observedIgnore",
    ] {
        assert_eq!(
            ours["status"][field], flux["status"][field],
            "status.{field}"
        );
    }
    let artifact_keys = |o: &Value| {
        let mut k: Vec<String> = o["status"]["artifact"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    };
    assert_eq!(
        artifact_keys(ours),
        artifact_keys(flux),
        "artifact keys differ"
    );
    for field in ["revision", "metadata"] {
        assert_eq!(
            ours["status"]["artifact"][field], flux["status"]["artifact"][field],
            "status.artifact.{field}"
        );
    }
}

/// The text of `file` in the gzip'd tarball `body`.
fn untar_text(body: &[u8], file: &str) -> String {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(body));
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().to_str() == Some(file) {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            return text;
        }
    }
    panic!("{file} not in the artifact");
}
