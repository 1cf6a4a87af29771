//! The CRD's schema judged by the real API server (hack/cluster.sh), not by a checker of our
//! own: every sample in `testdata/samples/` is accepted by a server-side dry-run create with
//! strict field validation (as `kubectl apply` does by default), and each malformed spec
//! below is refused with the field named, before any controller sees it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{json, Value};
use support::cluster::{repo_root, serde_yaml_doc, Cluster};

/// A server-side dry-run create of `object`; `Err(stderr)` when the server refuses it.
fn dry_run_create(cluster: &Cluster, object: &Value) -> Result<(), String> {
    let args = [
        "create",
        "--dry-run=server",
        "--validate=strict",
        "-o",
        "name",
        "-f",
        "-",
    ];
    cluster.kubectl_input(&args, &object.to_string()).map(drop)
}

#[test]
fn the_api_server_accepts_every_sample_and_refuses_malformed_specs_naming_the_field() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let ns = cluster.namespace("crd_schema", &json!({}));

    let dir = repo_root().join("testdata/samples");
    let mut samples: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    samples.sort();
    assert!(samples.len() >= 6, "samples in {}", dir.display());
    for file in samples {
        let mut object = serde_yaml_doc(&std::fs::read_to_string(&file).unwrap());
        object["metadata"]["namespace"] = json!(ns.name);
        if let Err(e) = dry_run_create(&cluster, &object) {
            panic!("{}: the API server refuses it: {e}", file.display());
        }
    }

    let object = |spec: &str| {
        let mut o = serde_yaml_doc(&format!(
            "apiVersion: ocisource.dev/v1beta1\nkind: OCIRepository\nmetadata: {{name: x}}\nspec: {spec}"
        ));
        o["metadata"]["namespace"] = json!(ns.name);
        o
    };
    dry_run_create(&cluster, &object("{interval: 5m, url: 'oci://r/a'}"))
        .expect("a minimal spec is accepted");
    let cases = [
        ("{interval: 5m, url: 'https://r/a'}", "spec.url"),
        ("{interval: 5d, url: 'oci://r/a'}", "spec.interval"),
        (
            "{interval: 5m, url: 'oci://r/a', timeout: 1h}",
            "spec.timeout",
        ),
        (
            "{interval: 5m, url: 'oci://r/a', provider: oracle}",
            "spec.provider",
        ),
        (
            "{interval: 5m, url: 'oci://r/a', layerSelector: {operation: move}}",
            "spec.layerSelector.operation",
        ),
        (
            "{interval: 5m, url: 'oci://r/a', platform: linux}",
            "spec.platform",
        ),
        (
            "{interval: 5m, url: 'oci://r/a', ref: {semverfilter: x}}",
            "spec.ref.semverfilter",
        ),
        ("{url: 'oci://r/a'}", "spec.interval"),
    ];
    for (spec, field) in cases {
        match dry_run_create(&cluster, &object(spec)) {
            Ok(()) => panic!("{spec}: accepted, but {field} is malformed"),
            Err(e) => assert!(
                e.contains(field),
                "{spec}: refused without naming {field}: {e}"
            ),
        }
    }
}
