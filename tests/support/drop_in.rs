//! What the drop-in tests share (tests/cluster_drop_in*.rs): Flux's own OCIRepository
//! kind as YAML, the sharding label, and the chart values of drop-in mode.

pub mod compare;

use std::time::Duration;

use serde_json::{json, Value};

/// Flux's artifact layer (`flux push artifact`).
pub const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
/// How long a drop-in test waits for a state.
pub const WAIT: Duration = Duration::from_secs(120);
/// Flux's sharding label.
pub const SHARD: &str = "sharding.fluxcd.io/key";
/// Flux's OCIRepository resource, for kubectl.
pub const FLUX_OCI: &str = "ocirepositories.source.toolkit.fluxcd.io";

/// A ConfigMap manifest, the content of the test artifacts.
pub fn configmap_yaml(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  greeting: {value}\n"
    )
}

/// A Flux OCIRepository (Flux's own kind, unchanged), with `labels` (YAML flow mapping).
pub fn flux_oci_repository(ns: &str, name: &str, url: &str, labels: &str) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {labels}\n\
         spec:\n  url: {url}\n  interval: 5s\n  insecure: true\n  ref:\n    tag: v1\n"
    )
}

/// A Flux Kustomization applying the OCIRepository `source` (Flux's kind) into `ns`.
pub fn kustomization(ns: &str, name: &str, source: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
         spec:\n  interval: 5s\n  retryInterval: 2s\n  path: ./\n  prune: true\n  targetNamespace: {ns}\n  \
         sourceRef:\n    kind: OCIRepository\n    name: {source}\n"
    )
}

/// The chart values of drop-in mode: objects labelled `sharding.fluxcd.io/key=ocisource`.
pub fn drop_in_values() -> Value {
    json!({"controller": {"fluxDropInSelector": format!("{SHARD}=ocisource")}})
}

/// True when the source-controller `hack/cluster.sh flux source-controller` started runs;
/// false (skip) when it does not, or a failure under OCISOURCE_REQUIRE_CLUSTER=1.
pub fn source_controller_runs(cluster: &super::cluster::Cluster) -> bool {
    let running = std::fs::read_to_string(cluster.dir.join("source-controller.pid"))
        .ok()
        .and_then(|pid| pid.trim().parse::<u32>().ok())
        .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
    if !running {
        assert!(
            std::env::var("OCISOURCE_REQUIRE_CLUSTER").as_deref() != Ok("1"),
            "OCISOURCE_REQUIRE_CLUSTER=1 but Flux's source-controller is not running: \
             SOURCE_CONTROLLER_ARGS='--watch-label-selector=!{SHARD}' hack/cluster.sh flux source-controller"
        );
        eprintln!("skipped: Flux's source-controller is not running (hack/cluster.sh flux source-controller)");
    }
    running
}
