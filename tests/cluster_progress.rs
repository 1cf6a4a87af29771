//! Status while work is under way, on the REAL API server with the real controller binary
//! and Flux's real kustomize-controller (see `tests/support/cluster.rs`): a registry
//! behind a gate (`support::proxy::Gate`) stops the reconcile half-way, so what a watch
//! sees in between is asserted without any timing. Also the ExternalArtifact while the
//! source's new generation fails, and artifact URLs rewritten by a consumer's
//! `SOURCE_CONTROLLER_LOCALHOST`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::cluster::{condition, has_condition, ready_now, Controller, Env};
use support::proxy::Gate;
use support::shard::{KustomizeShard, SHARD_KEY};
use support::tar_gz;
use support::watch::Watch;

const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const REPO: &str = "ocirepositories.ocisource.dev";
const EA: &str = "externalartifacts.source.toolkit.fluxcd.io";
const WAIT: Duration = Duration::from_secs(90);

fn oci_repository(ns: &str, name: &str, url: &str, tag: &str) -> String {
    format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  url: {url}\n  interval: 10m\n  insecure: true\n  ref:\n    tag: {tag}\n"
    )
}

fn configmap_layer(value: &str) -> Vec<u8> {
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  greeting: {value}\n"
    );
    tar_gz(&[("cm.yaml", cm.as_bytes())])
}

/// Pushes a Flux artifact holding the ConfigMap `greeting` with `value`.
async fn push_configmap(
    registry: &support::TestRegistry,
    repo: &str,
    tag: &str,
    value: &str,
) -> support::Pushed {
    registry
        .push_artifact(repo, tag, &[(FLUX_LAYER, configmap_layer(value))], &[])
        .await
}

/// `(status, reason)` of condition `type_`.
fn shows<'a>(obj: &'a Value, type_: &str) -> Option<(&'a str, &'a str)> {
    condition(obj, type_).map(|c| (c["status"].as_str().unwrap(), c["reason"].as_str().unwrap()))
}

/// What kstatus computes for an object with Ready/Reconciling/Stalled conditions: Current
/// only when the status describes the current generation and nothing is in progress.
fn kstatus_current(obj: &Value) -> bool {
    obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
        && !has_condition(obj, "Reconciling", "True")
        && !has_condition(obj, "Stalled", "True")
        && has_condition(obj, "Ready", "True")
}

/// One version of the object, as far as the sequence assertions look.
#[derive(Debug)]
struct Step<'a> {
    generation: i64,
    ready: Option<(&'a str, &'a str)>,
    outdated: bool,
}

/// The versions `watch` saw, once one of them satisfies `done`.
fn seen_until(watch: &Watch, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let seen = watch.seen();
        if seen.iter().any(&done) {
            return seen;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the watch never saw it: {seen:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A new object, then a new generation, each stopped half-way by the gate: from the start
/// of the reconcile the object reads Reconciling=True and Ready=Unknown (Progressing),
/// `ArtifactOutdated=True` (NewRevision) once the new revision is resolved and an artifact
/// exists, and the ExternalArtifact is not Ready meanwhile. No version the watch saw is
/// kstatus-Current without the artifact of its own generation.
#[tokio::test(flavor = "multi_thread")]
async fn status_shows_work_under_way_until_the_artifact_is_stored() {
    let Some(s) = Env::start("progress", &json!({})) else {
        return;
    };
    let ns = &s.ns.name;
    let mut revisions = std::collections::HashMap::new();
    for (generation, tag, value) in [(1, "v1", "one"), (2, "v2", "two")] {
        let pushed = push_configmap(&s.registry, "app/progress", tag, value).await;
        revisions.insert(generation, format!("{tag}@{}", pushed.manifest_digest));
    }
    let gate = Gate::start(s.registry.host());
    let url = format!("oci://{}/app/progress", gate.addr);
    let watch = Watch::start(&s.cluster, REPO, ns, "p");

    // A new object: nothing reaches the registry yet.
    gate.hold("/v2/");
    s.cluster.apply(&oci_repository(ns, "p", &url, "v1"));
    let working = s
        .cluster
        .wait_for(REPO, ns, "p", WAIT, "Reconciling at the start", |o| {
            shows(o, "Reconciling") == Some(("True", "Progressing"))
        });
    assert_eq!(
        shows(&working, "Ready"),
        Some(("Unknown", "Progressing")),
        "{working:#}"
    );
    assert_eq!(
        condition(&working, "Ready").unwrap()["message"],
        "processing object: new generation 0 -> 1"
    );
    assert!(
        working["status"]["observedGeneration"].is_null(),
        "{working:#}"
    );
    assert!(gate.held() > 0, "the reconcile is waiting for the registry");
    gate.release();
    let first = s.cluster.wait_for(REPO, ns, "p", WAIT, "Ready", ready_now);
    assert_eq!(first["status"]["artifact"]["revision"], revisions[&1]);
    let ea = s
        .cluster
        .wait_for(EA, ns, "p", WAIT, "ExternalArtifact Ready", |o| {
            has_condition(o, "Ready", "True")
        });
    let ea_generation = ea["metadata"]["generation"].clone();
    assert_eq!(
        condition(&ea, "Ready").unwrap()["observedGeneration"],
        ea_generation
    );

    // A new generation asking for v2: the manifest resolves, the layer is held.
    gate.hold("/blobs/");
    s.cluster.apply(&oci_repository(ns, "p", &url, "v2"));
    let outdated = s
        .cluster
        .wait_for(REPO, ns, "p", WAIT, "ArtifactOutdated", |o| {
            has_condition(o, "ArtifactOutdated", "True")
        });
    assert_eq!(outdated["metadata"]["generation"], 2);
    assert_eq!(
        shows(&outdated, "ArtifactOutdated"),
        Some(("True", "NewRevision"))
    );
    assert_eq!(shows(&outdated, "Ready"), Some(("Unknown", "Progressing")));
    assert_eq!(
        shows(&outdated, "Reconciling"),
        Some(("True", "Progressing"))
    );
    let message = condition(&outdated, "ArtifactOutdated").unwrap()["message"].clone();
    assert_eq!(
        message,
        format!(
            "new revision '{}' for '{}/app/progress:v2'",
            revisions[&2], gate.addr
        )
    );
    assert_eq!(outdated["status"]["observedGeneration"], 1, "{outdated:#}");
    assert_eq!(outdated["status"]["artifact"]["revision"], revisions[&1]);
    assert!(!kstatus_current(&outdated), "{outdated:#}");
    // The ExternalArtifact keeps the stored artifact but does not read Ready.
    let ea = s
        .cluster
        .wait_for(EA, ns, "p", WAIT, "ExternalArtifact not Ready", |o| {
            shows(o, "Ready") == Some(("Unknown", "Progressing"))
        });
    assert_eq!(ea["status"]["artifact"]["revision"], revisions[&1]);
    assert_eq!(
        condition(&ea, "Ready").unwrap()["observedGeneration"],
        ea_generation
    );
    assert!(gate.held() > 0, "the layer download is waiting");

    gate.release();
    let second = s
        .cluster
        .wait_for(REPO, ns, "p", WAIT, "Ready for v2", ready_now);
    assert_eq!(second["status"]["artifact"]["revision"], revisions[&2]);
    assert!(
        condition(&second, "ArtifactOutdated").is_none(),
        "{second:#}"
    );
    assert!(condition(&second, "Reconciling").is_none(), "{second:#}");
    let ea = s
        .cluster
        .wait_for(EA, ns, "p", WAIT, "ExternalArtifact Ready for v2", |o| {
            has_condition(o, "Ready", "True")
                && o["status"]["artifact"]["revision"] == revisions[&2]
        });
    assert_eq!(
        condition(&ea, "Ready").unwrap()["observedGeneration"],
        ea_generation
    );

    // Every version the API server delivered: Current only with its generation's artifact,
    // and in order, the new generation went Unknown, then outdated, then Ready.
    let seen = seen_until(&watch, |o| ready_now(o) && o["metadata"]["generation"] == 2);
    for o in &seen {
        if kstatus_current(o) {
            let generation = o["metadata"]["generation"].as_i64().unwrap();
            assert_eq!(
                o["status"]["artifact"]["revision"], revisions[&generation],
                "Current before the artifact of generation {generation} was stored: {o:#}"
            );
        }
    }
    let steps: Vec<Step> = seen
        .iter()
        .map(|o| Step {
            generation: o["metadata"]["generation"].as_i64().unwrap(),
            ready: shows(o, "Ready"),
            outdated: has_condition(o, "ArtifactOutdated", "True"),
        })
        .collect();
    let at = |want: &dyn Fn(&Step) -> bool| {
        steps
            .iter()
            .position(want)
            .unwrap_or_else(|| panic!("{steps:?}"))
    };
    let unknown =
        at(&|s| s.generation == 2 && s.ready == Some(("Unknown", "Progressing")) && !s.outdated);
    let outdated = at(&|s| s.generation == 2 && s.outdated);
    // The last version of generation 2 reads Ready (the first ones still carry
    // generation 1's Ready until the controller starts; kstatus reads them as in progress
    // since status.observedGeneration is 1, which the loop above checks).
    let ready = steps.len() - 1;
    assert_eq!(steps[ready].ready, Some(("True", "Succeeded")), "{steps:?}");
    assert!(unknown < outdated && outdated < ready, "{steps:?}");
}

/// A Kustomization applying the ExternalArtifact: when the OCIRepository's new
/// generation cannot be fetched, the ExternalArtifact reads Ready=False (its own
/// generation) with the last stored artifact, and the real kustomize-controller applies
/// no other revision; once the new generation is stored, exactly that revision is applied.
#[tokio::test(flavor = "multi_thread")]
async fn kustomization_applies_no_other_revision_while_the_new_generation_fails() {
    let Some(s) = Env::start("stale", &json!({})) else {
        return;
    };
    let ns = &s.ns.name;
    let v1 = push_configmap(&s.registry, "app/stale", "v1", "one").await;
    let url = s.url("app/stale");
    s.cluster.apply(&oci_repository(ns, "app", &url, "v1"));
    s.cluster
        .wait_for(REPO, ns, "app", WAIT, "Ready", ready_now);
    s.cluster.apply(&kustomization(ns, "app", None));
    let v1_revision = format!("v1@{}", v1.manifest_digest);
    s.cluster
        .wait_for("kustomization", ns, "app", WAIT, "v1 applied", |o| {
            o["status"]["lastAppliedRevision"] == v1_revision.as_str()
        });

    // Generation 2 names a tag that does not exist (yet).
    s.cluster.apply(&oci_repository(ns, "app", &url, "v2"));
    let failed = s
        .cluster
        .wait_for(REPO, ns, "app", WAIT, "generation 2 failed", |o| {
            condition(o, "Ready")
                .is_some_and(|c| c["status"] == "False" && c["observedGeneration"] == 2)
        });
    assert_eq!(failed["status"]["observedGeneration"], 1, "{failed:#}");
    assert_eq!(
        shows(&failed, "Reconciling"),
        Some(("True", "ProgressingWithRetry"))
    );
    let ea = s
        .cluster
        .wait_for(EA, ns, "app", WAIT, "ExternalArtifact Ready=False", |o| {
            has_condition(o, "Ready", "False")
        });
    assert_eq!(shows(&ea, "Ready"), Some(("False", "FetchFailed")));
    assert_eq!(
        condition(&ea, "Ready").unwrap()["observedGeneration"],
        ea["metadata"]["generation"]
    );
    assert_eq!(ea["status"]["artifact"]["revision"], v1_revision.as_str());

    // The Kustomization, asked to reconcile now, stays on v1.
    s.cluster
        .request_reconcile("kustomization", ns, "app", "while-failing");
    let ks = s
        .cluster
        .wait_for("kustomization", ns, "app", WAIT, "handled", |o| {
            o["status"]["lastHandledReconcileAt"] == "while-failing"
        });
    assert_eq!(
        ks["status"]["lastAppliedRevision"],
        v1_revision.as_str(),
        "{ks:#}"
    );
    assert_eq!(
        ks["status"]["lastAttemptedRevision"],
        v1_revision.as_str(),
        "{ks:#}"
    );
    let cm = s.cluster.get("configmap", ns, "greeting").unwrap();
    assert_eq!(cm["data"]["greeting"], "one");

    // v2 appears: stored for generation 2, then applied.
    let v2 = push_configmap(&s.registry, "app/stale", "v2", "two").await;
    s.cluster.request_reconcile(REPO, ns, "app", "v2-pushed");
    let v2_revision = format!("v2@{}", v2.manifest_digest);
    s.cluster
        .wait_for("kustomization", ns, "app", WAIT, "v2 applied", |o| {
            o["status"]["lastAppliedRevision"] == v2_revision.as_str()
        });
    let cm = s.cluster.get("configmap", ns, "greeting").unwrap();
    assert_eq!(cm["data"]["greeting"], "two");
}

fn kustomization(ns: &str, name: &str, shard: Option<&str>) -> String {
    let labels = shard
        .map(|key| format!("  labels:\n    {SHARD_KEY}: {key}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: {ns}\n{labels}\
         spec:\n  interval: 1m\n  retryInterval: 2s\n  path: ./\n  prune: true\n  targetNamespace: {ns}\n  \
         sourceRef:\n    kind: ExternalArtifact\n    name: {name}\n"
    )
}

/// The artifact URL advertises an in-cluster name the test machine cannot resolve; a
/// kustomize-controller with `SOURCE_CONTROLLER_LOCALHOST=<artifact server host:port>`
/// replaces the URL's host, as Flux's consumers do, and applies the artifact (the other
/// tests fetch the advertised URL as it is).
#[tokio::test(flavor = "multi_thread")]
async fn consumer_rewrites_the_artifact_host_with_source_controller_localhost() {
    let Some(env) = Env::start("localhost", &json!({})) else {
        return;
    };
    let Env {
        cluster,
        registry,
        ns: namespace,
        controller,
        work,
    } = env;
    let ns = &namespace.name;
    // The same controller, advertising an in-cluster name instead of its own address.
    drop(controller);
    let advertised = "ocisource.flux-system.svc.cluster.local.:80";
    let controller = Controller::start_advertising(
        &cluster,
        ns,
        &json!({}),
        &work.path().join("adv-data"),
        "ocisource-adv",
        Some(advertised),
    );
    let pushed = push_configmap(&registry, "app/local", "v1", "local").await;
    let url = format!("oci://{}/app/local", registry.host());
    cluster.apply(&oci_repository(ns, "app", &url, "v1"));
    let obj = cluster.wait_for(REPO, ns, "app", WAIT, "Ready", ready_now);
    let artifact_url = obj["status"]["artifact"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        artifact_url.starts_with(&format!("http://{advertised}/ocirepository/")),
        "{artifact_url}"
    );
    let ea = cluster.wait_for(EA, ns, "app", WAIT, "ExternalArtifact Ready", |o| {
        has_condition(o, "Ready", "True")
    });
    assert_eq!(ea["status"]["artifact"]["url"], artifact_url.as_str());

    let shard = KustomizeShard::start(
        &cluster,
        ns,
        ns,
        &[(
            "SOURCE_CONTROLLER_LOCALHOST",
            controller.storage_addr.as_str(),
        )],
        work.path(),
    );
    cluster.apply(&kustomization(ns, "app", Some(ns)));
    let revision = format!("v1@{}", pushed.manifest_digest);
    let deadline = std::time::Instant::now() + WAIT;
    let ks = loop {
        let ks = cluster.get("kustomization", ns, "app");
        if ks.as_ref().is_some_and(|k| {
            has_condition(k, "Ready", "True")
                && k["status"]["lastAppliedRevision"] == revision.as_str()
        }) {
            break ks.unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Kustomization never Ready: {ks:#?}\nshard log:\n{}",
            shard.log_text()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(ks["metadata"]["labels"][SHARD_KEY], ns.as_str());
    let cm = cluster.get("configmap", ns, "greeting").unwrap();
    assert_eq!(cm["data"]["greeting"], "local");
}
