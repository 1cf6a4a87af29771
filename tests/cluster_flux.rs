//! End to end on the REAL API server with the REAL Flux consumers (see
//! `tests/support/cluster.rs`): an OCIRepository reconciled by ocisource running as the
//! chart's ServiceAccount becomes Ready from the real registry, publishes its
//! ExternalArtifact, and Flux's kustomize-controller and helm-controller apply it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::cluster::{condition, has_condition, ready_now, Env};
use support::tar_gz;

const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const HELM_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
const WAIT: Duration = Duration::from_secs(90);

fn configmap_yaml(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  greeting: {value}\n"
    )
}

fn oci_repository(ns: &str, name: &str, url: &str, extra: &str) -> String {
    format!(
        "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  url: {url}\n  interval: 10s\n{extra}"
    )
}

fn setup(test: &str) -> Option<Env> {
    Env::start(test, &json!({}))
}

/// The CRD installs and the API server's own validation applies its schema; an object
/// becomes Ready from the real registry; its ExternalArtifact appears, owned by it; the
/// artifact is served at the advertised URL with the published digest.
#[tokio::test(flavor = "multi_thread")]
async fn ready_from_real_registry_with_external_artifact() {
    let Some(s) = setup("ready") else { return };
    let ns = &s.ns.name;
    // The API server refuses what the CRD schema refuses.
    let bad = oci_repository(ns, "bad", "https://not-oci.example.com/x", "");
    let err = s
        .cluster
        .apply_as(&s.cluster.admin_kubeconfig, &bad)
        .unwrap_err();
    assert!(
        err.contains("spec.url"),
        "the API server should reject a non-oci URL via the CRD schema: {err}"
    );

    let layer = tar_gz(&[("cm.yaml", configmap_yaml("hello", "one").as_bytes())]);
    let pushed = s
        .registry
        .push_artifact("app/config", "v1", &[(FLUX_LAYER, layer)], &[])
        .await;
    let url = s.url("app/config");
    s.cluster.apply(&oci_repository(
        ns,
        "app",
        &url,
        "  insecure: true\n  ref:\n    tag: v1\n",
    ));

    let obj = s.cluster.wait_for(
        "ocirepositories.ocisource.dev",
        ns,
        "app",
        WAIT,
        "Ready",
        ready_now,
    );
    let artifact = &obj["status"]["artifact"];
    let hex = pushed.manifest_digest.trim_start_matches("sha256:");
    assert_eq!(
        artifact["revision"],
        format!("v1@{}", pushed.manifest_digest)
    );
    assert_eq!(
        artifact["path"],
        format!("ocirepository/{ns}/app/{hex}.tar.gz")
    );

    let ea = s.cluster.wait_for(
        "externalartifacts.source.toolkit.fluxcd.io",
        ns,
        "app",
        WAIT,
        "ExternalArtifact Ready",
        |o| has_condition(o, "Ready", "True"),
    );
    assert_eq!(ea["status"]["artifact"]["digest"], artifact["digest"]);
    let owner = &ea["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "OCIRepository");
    assert_eq!(owner["name"], "app");
    assert_eq!(owner["uid"], obj["metadata"]["uid"]);
    assert_eq!(owner["controller"], true);
    assert_eq!(owner["apiVersion"], "ocisource.dev/v1beta1");
    let source_ref = &ea["spec"]["sourceRef"];
    assert_eq!(
        (source_ref["kind"].as_str(), source_ref["name"].as_str()),
        (Some("OCIRepository"), Some("app"))
    );
    // status.url is Flux's link to the latest artifact, which serves the same bytes.
    assert_eq!(
        obj["status"]["url"],
        format!(
            "http://{}/ocirepository/{ns}/app/latest.tar.gz",
            s.controller.storage_addr
        )
    );
    let latest = s
        .controller
        .fetch(obj["status"]["url"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        support::sha256(&latest),
        artifact["digest"].as_str().unwrap()
    );

    // The NewArtifact event, written by the controller's own identity into events.k8s.io.
    let events = s.cluster.events(ns);
    let new_artifact = events
        .iter()
        .find(|e| e["reason"] == "NewArtifact" && e["regarding"]["name"] == "app")
        .unwrap_or_else(|| panic!("no NewArtifact event: {events:#?}"));
    assert_eq!(new_artifact["type"], "Normal");
    assert_eq!(new_artifact["regarding"]["uid"], obj["metadata"]["uid"]);
    assert!(new_artifact["note"]
        .as_str()
        .unwrap()
        .contains(artifact["revision"].as_str().unwrap()));

    // Each listener serves only its own routes: no metrics or probes where artifacts are.
    let c = &s.controller;
    let path = artifact["path"].as_str().unwrap();
    for (addr, route, served) in [
        (&c.storage_addr, "metrics", false),
        (&c.storage_addr, "healthz", false),
        (&c.metrics_addr, "metrics", true),
        (&c.metrics_addr, path, false),
        (&c.health_addr, "readyz", true),
        (&c.health_addr, path, false),
    ] {
        let got = c.fetch(&format!("http://{addr}/{route}"));
        assert_eq!(got.is_ok(), served, "GET http://{addr}/{route}: {got:?}");
    }
    let body = s
        .controller
        .fetch(artifact["url"].as_str().unwrap())
        .unwrap();
    assert_eq!(support::sha256(&body), artifact["digest"].as_str().unwrap());
}

/// A Flux Kustomization whose source is our ExternalArtifact is applied by the real
/// kustomize-controller; a new tag leads to the new data being applied; a Kustomization
/// that health-checks the OCIRepository waits for it.
#[tokio::test(flavor = "multi_thread")]
async fn kustomization_applies_external_artifact_and_follows_new_tags() {
    let Some(s) = setup("kustomize") else { return };
    let ns = &s.ns.name;
    // `v1` is no version for Flux (a version has three parts), so the range picks 1.0.0.
    for tag in ["v1", "1.0.0"] {
        let layer = tar_gz(&[("cm.yaml", configmap_yaml("greeting", tag).as_bytes())]);
        s.registry
            .push_artifact("app/config", tag, &[(FLUX_LAYER, layer)], &[])
            .await;
    }
    let url = s.url("app/config");
    s.cluster.apply(&oci_repository(
        ns,
        "app",
        &url,
        "  insecure: true\n  ref:\n    semver: \">=1.0.0\"\n",
    ));

    s.cluster.apply(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app\n  namespace: {ns}\n\
         spec:\n  interval: 1m\n  retryInterval: 2s\n  path: ./\n  prune: true\n  targetNamespace: {ns}\n  \
         sourceRef:\n    kind: ExternalArtifact\n    name: app\n  healthChecks:\n  - apiVersion: ocisource.dev/v1beta1\n    kind: OCIRepository\n    name: app\n    namespace: {ns}\n"
    ));
    let cm = s.cluster.wait_for(
        "configmap",
        ns,
        "greeting",
        WAIT,
        "ConfigMap from the artifact",
        |_| true,
    );
    assert_eq!(cm["data"]["greeting"], "1.0.0");
    let ks = s.cluster.wait_for(
        "kustomization",
        ns,
        "app",
        WAIT,
        "Kustomization Ready",
        |o| has_condition(o, "Ready", "True"),
    );
    let applied = ks["status"]["lastAppliedRevision"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(applied.starts_with("1.0.0@sha256:"), "{applied}");

    let layer = tar_gz(&[("cm.yaml", configmap_yaml("greeting", "two").as_bytes())]);
    let pushed = s
        .registry
        .push_artifact("app/config", "1.1.0", &[(FLUX_LAYER, layer)], &[])
        .await;
    // Ask for a reconcile now rather than waiting for the interval, as `flux reconcile` does.
    s.cluster
        .request_reconcile("ocirepositories.ocisource.dev", ns, "app", "now1");
    let cm = s
        .cluster
        .wait_for("configmap", ns, "greeting", WAIT, "new data applied", |o| {
            o["data"]["greeting"] == "two"
        });
    assert_eq!(cm["data"]["greeting"], "two");
    s.cluster.wait_for(
        "kustomization",
        ns,
        "app",
        WAIT,
        "new revision applied",
        |o| o["status"]["lastAppliedRevision"] == format!("1.1.0@{}", pushed.manifest_digest),
    );
}

/// A HelmRelease whose chartRef is the ExternalArtifact of a Helm chart (copy mode) is
/// installed by the real helm-controller.
#[tokio::test(flavor = "multi_thread")]
async fn helm_release_installs_chart_from_external_artifact() {
    let Some(s) = setup("helm") else { return };
    let ns = &s.ns.name;
    let chart = tar_gz(&[
        ("demo/Chart.yaml", b"apiVersion: v2\nname: demo\nversion: 0.1.0\n"),
        ("demo/values.yaml", b"greeting: hello\n"),
        (
            "demo/templates/cm.yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-demo\ndata:\n  greeting: {{ .Values.greeting }}\n",
        ),
    ]);
    s.registry
        .push_artifact("charts/demo", "0.1.0", &[(HELM_LAYER, chart)], &[])
        .await;
    let url = s.url("charts/demo");
    s.cluster.apply(&oci_repository(
        ns,
        "demo",
        &url,
        &format!("  insecure: true\n  ref:\n    tag: 0.1.0\n  layerSelector:\n    mediaType: {HELM_LAYER}\n    operation: copy\n"),
    ));
    s.cluster.wait_for(
        "ocirepositories.ocisource.dev",
        ns,
        "demo",
        WAIT,
        "Ready",
        ready_now,
    );
    s.cluster.apply(&format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: demo\n  namespace: {ns}\n\
         spec:\n  interval: 1m\n  chartRef:\n    kind: ExternalArtifact\n    name: demo\n  values:\n    greeting: from-release\n"
    ));
    let cm = s.cluster.wait_for(
        "configmap",
        ns,
        "demo-demo",
        WAIT,
        "ConfigMap from the chart",
        |_| true,
    );
    assert_eq!(cm["data"]["greeting"], "from-release");
    let hr = s
        .cluster
        .wait_for("helmrelease", ns, "demo", WAIT, "HelmRelease Ready", |o| {
            has_condition(o, "Ready", "True")
        });
    assert!(condition(&hr, "Released").is_some(), "{hr}");
}

/// `kubectl wait --for=condition=Ready` on a new object does not return before the
/// object is reconciled for its generation (kstatus must not read it as Current early).
#[tokio::test(flavor = "multi_thread")]
async fn kubectl_wait_does_not_return_early() {
    let Some(s) = setup("wait") else { return };
    let ns = &s.ns.name;
    let url = s.url("app/wait");
    // Generation 1, then generation 2: each time, kubectl wait must wait for the
    // reconcile of THAT generation (it compares the condition's observedGeneration), not
    // return on a Ready=True that a status written too early or the old generation shows.
    for (tag, content) in [("v1", "a"), ("v2", "b")] {
        let layer = tar_gz(&[("f.txt", content.as_bytes())]);
        let pushed = s
            .registry
            .push_artifact("app/wait", tag, &[(FLUX_LAYER, layer)], &[])
            .await;
        let spec = format!("  insecure: true\n  ref:\n    tag: {tag}\n");
        s.cluster.apply(&oci_repository(ns, "w", &url, &spec));
        s.cluster.kubectl_ok(&[
            "wait",
            "--for=condition=Ready",
            "--timeout=90s",
            "-n",
            ns,
            "ocirepositories.ocisource.dev/w",
        ]);
        let obj = s
            .cluster
            .get("ocirepositories.ocisource.dev", ns, "w")
            .unwrap();
        assert_eq!(
            obj["status"]["artifact"]["revision"],
            format!("{tag}@{}", pushed.manifest_digest),
            "kubectl wait returned before the generation asking for {tag} was reconciled"
        );
        assert!(ready_now(&obj), "{obj}");
    }
}
