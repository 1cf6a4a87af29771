//! Drop-in mode's failure statuses on the REAL API server, with Flux's own
//! source-controller running beside ocisource (`hack/cluster.sh flux source-controller`
//! with `--watch-label-selector=!sharding.fluxcd.io/key`): the same failing Flux
//! OCIRepository is created twice, once labelled for ocisource and once for
//! source-controller, and the conditions each controller writes (type, status, reason,
//! message, observedGeneration), `status.observedGeneration` and the absence of an
//! artifact must be the same, messages included, and so must the Kubernetes Events each
//! controller records for it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::Value;
use support::cluster::Env;
use support::drop_in::compare::{closed_port, compare, docker_secret, object, spec, Case};
use support::drop_in::{configmap_yaml, drop_in_values, source_controller_runs, FLUX_LAYER};
use support::tar_gz;

/// Both controllers' failure status for every case.
#[tokio::test(flavor = "multi_thread")]
async fn failing_flux_objects_get_source_controllers_status() {
    let Some(s) = Env::start("dropfail", &drop_in_values()) else {
        return;
    };
    if !source_controller_runs(&s.cluster) {
        return;
    }
    let cluster = &s.cluster;
    let ns = &s.ns.name;
    let content = tar_gz(&[("cm.yaml", configmap_yaml("greeting", "v1").as_bytes())]);
    s.registry
        .push_artifact("app/config", "v1", &[(FLUX_LAYER, content)], &[])
        .await;
    let locked = support::TestRegistry::start(
        support::RegistryOpts::plain().with_basic_auth("alice", "right"),
    );
    s.cluster.apply(&docker_secret(
        ns,
        "wrong",
        &locked.host(),
        "alice",
        "wrong",
    ));
    let url = s.url("app/config");
    let cases = vec![
        Case {
            name: "missing-tag",
            spec: spec(&url, "  ref:\n    tag: nope\n"),
        },
        Case {
            name: "missing-repo",
            spec: spec(&s.url("nothing/here"), "  ref:\n    tag: v1\n"),
        },
        Case {
            name: "refused",
            spec: spec(
                &format!("oci://{}/app", closed_port()),
                "  ref:\n    tag: v1\n",
            ),
        },
        Case {
            name: "semver-none",
            spec: spec(&url, "  ref:\n    semver: '>=9.0.0'\n"),
        },
        Case {
            name: "semver-invalid",
            spec: spec(&url, "  ref:\n    semver: 'not-a-range'\n"),
        },
        Case {
            name: "missing-secret",
            spec: spec(
                &url,
                "  ref:\n    tag: v1\n  secretRef:\n    name: absent\n",
            ),
        },
        Case {
            name: "wrong-credentials",
            spec: spec(
                &format!("oci://{}/app/config", locked.host()),
                "  ref:\n    tag: v1\n  secretRef:\n    name: wrong\n",
            ),
        },
        Case {
            name: "tag-in-url",
            spec: spec(&format!("{url}:v1"), ""),
        },
        Case {
            name: "no-repository",
            spec: spec("oci://", ""),
        },
    ];
    for case in &cases {
        s.cluster.apply(&object(
            ns,
            &format!("{}-ours", case.name),
            &case.spec,
            Some("ocisource"),
        ));
        s.cluster.apply(&object(
            ns,
            &format!("{}-flux", case.name),
            &case.spec,
            None,
        ));
    }
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|case| compare(cluster, ns, case))
        .collect();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // The Kubernetes Events each controller recorded for its object: the same types,
    // reasons and messages.
    let events: Value =
        serde_json::from_str(&cluster.kubectl_ok(&["get", "events", "-n", ns, "-o", "json"]))
            .unwrap();
    let of = |case: &Case, who: &str| -> std::collections::BTreeSet<String> {
        let name = format!("{}-{who}", case.name);
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["involvedObject"]["name"] == name.as_str())
            .map(|e| {
                let message = e["message"]
                    .as_str()
                    .unwrap_or_default()
                    .replace(&name, case.name);
                format!(
                    "{} {} {message}",
                    e["type"].as_str().unwrap_or_default(),
                    e["reason"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    let differing: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let (flux, ours) = (of(case, "flux"), of(case, "ours"));
            (flux.is_empty() || flux != ours).then(|| {
                format!(
                    "case {}: source-controller {flux:?}, ocisource {ours:?}",
                    case.name
                )
            })
        })
        .collect();
    assert!(differing.is_empty(), "{}", differing.join("\n"));
}
