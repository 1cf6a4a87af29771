//! Drop-in mode's failure statuses on the REAL API server once an object HAS an artifact,
//! and for a cosign signature made with another key, with Flux's own source-controller
//! running beside ocisource (as in tests/cluster_drop_in_failures.rs, which covers objects
//! that never had one). Each case creates the same Flux OCIRepository twice, one labelled
//! for ocisource and one for source-controller, lets both become Ready where the case
//! needs an artifact, then breaks it the same way for both:
//! - a new generation whose tag the registry does not have (`Reconciling` keeps Flux's
//!   "processing object: new generation" message, the artifact stays);
//! - the registry gone, same generation, a reconcile requested (Go's dial errors, and
//!   `reconciliation in progress`);
//! - a signature that the Secret's public key does not verify.
//!
//! The conditions, `status.observedGeneration` and the presence of an artifact must be
//! equal, messages included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)] // the signature helpers also serve the e2e_verify tests
#[path = "e2e_verify/cosign.rs"]
mod cosign;
mod support;

use support::cluster::{ready_now, Env};
use support::drop_in::compare::{compare, object, spec, Case};
use support::drop_in::{
    configmap_yaml, drop_in_values, source_controller_runs, FLUX_LAYER, FLUX_OCI, WAIT,
};
use support::{tar_gz, RegistryOpts, TestRegistry};

/// A Secret holding `pem` as `cosign.pub`, as Flux's verify.secretRef expects.
fn public_key_secret(ns: &str, name: &str, pem: &str) -> String {
    let indented = pem.trim_end().replace('\n', "\n    ");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {ns}\nstringData:\n  cosign.pub: |\n    {indented}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_after_an_artifact_and_wrong_keys_get_source_controllers_status() {
    let Some(s) = Env::start("dropafter", &drop_in_values()) else {
        return;
    };
    if !source_controller_runs(&s.cluster) {
        return;
    }
    let (cluster, ns) = (&s.cluster, s.ns.name.as_str());
    let content = tar_gz(&[("cm.yaml", configmap_yaml("greeting", "v1").as_bytes())]);
    let pushed = s
        .registry
        .push_artifact("app/config", "v1", &[(FLUX_LAYER, content.clone())], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let (signer, other) = (
        cosign::KeyPair::generate(dir.path(), "signer"),
        cosign::KeyPair::generate(dir.path(), "other"),
    );
    cosign::sign_and_attach(&s.registry, "app/config", &pushed.manifest_digest, &signer).await;
    cluster.apply(&public_key_secret(ns, "other-key", &other.public_pem()));
    let gone = TestRegistry::start(RegistryOpts::plain());
    gone.push_artifact("app/config", "v1", &[(FLUX_LAYER, content)], &[])
        .await;

    let url = s.url("app/config");
    let gone_url = format!("oci://{}/app/config", gone.host());
    let v1 = "  ref:\n    tag: v1\n";
    let cases = [
        Case {
            name: "new-generation",
            spec: spec(&url, v1),
        },
        Case {
            name: "registry-gone",
            spec: spec(&gone_url, v1),
        },
        Case {
            name: "wrong-key",
            spec: spec(
                &url,
                "  ref:\n    tag: v1\n  verify:\n    provider: cosign\n    secretRef:\n      name: other-key\n",
            ),
        },
    ];
    for case in &cases {
        for (who, shard) in [("ours", Some("ocisource")), ("flux", None)] {
            cluster.apply(&object(
                ns,
                &format!("{}-{who}", case.name),
                &case.spec,
                shard,
            ));
        }
    }
    // The first two must hold an artifact before they break.
    for case in &cases[..2] {
        for who in ["ours", "flux"] {
            let name = format!("{}-{who}", case.name);
            cluster.wait_for(FLUX_OCI, ns, &name, WAIT, "Ready", ready_now);
        }
    }
    for who in ["ours", "flux"] {
        cluster.kubectl_ok(&[
            "patch",
            FLUX_OCI,
            "-n",
            ns,
            &format!("new-generation-{who}"),
            "--type=merge",
            "-p",
            r#"{"spec":{"ref":{"tag":"nope"}}}"#,
        ]);
    }
    drop(gone);
    for who in ["ours", "flux"] {
        cluster.request_reconcile(FLUX_OCI, ns, &format!("registry-gone-{who}"), "gone");
    }

    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|case| compare(cluster, ns, case))
        .collect();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
