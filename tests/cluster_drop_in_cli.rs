//! The flux CLI (built from its module) on Flux's own OCIRepository objects that ocisource
//! reconciles in drop-in mode, on the REAL API server: `flux get sources oci`, `flux
//! reconcile source oci` (which waits for the new lastHandledReconcileAt), `flux
//! suspend/resume source oci` and `flux events`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cluster::{ready_now, Cluster, Env};
use support::drop_in::{
    configmap_yaml, drop_in_values, flux_oci_repository, FLUX_LAYER, FLUX_OCI, SHARD, WAIT,
};
use support::tar_gz;

/// Runs the flux CLI (built from its module) as admin; returns (success, stdout+stderr).
fn flux(cluster: &Cluster, args: &[&str]) -> (bool, String) {
    assert!(
        cluster.flux.is_file(),
        "the flux CLI is not built: hack/cluster.sh build-all ({})",
        cluster.flux.display()
    );
    let out = std::process::Command::new(&cluster.flux)
        .arg(format!(
            "--kubeconfig={}",
            cluster.admin_kubeconfig.display()
        ))
        .args(["--timeout=2m"])
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `flux get sources oci`, `flux reconcile source oci` (which waits for the new
/// lastHandledReconcileAt), `flux suspend/resume source oci` and `flux events` work on a
/// Flux OCIRepository that ocisource reconciles.
#[tokio::test(flavor = "multi_thread")]
async fn the_flux_cli_works_on_objects_ocisource_reconciles() {
    let Some(s) = Env::start("dropin-cli", &drop_in_values()) else {
        return;
    };
    let ns = s.ns.name.clone();
    let layer = tar_gz(&[("cm.yaml", configmap_yaml("greeting", "one").as_bytes())]);
    let pushed = s
        .registry
        .push_artifact("app/config", "v1", &[(FLUX_LAYER, layer)], &[])
        .await;
    s.cluster.apply(&flux_oci_repository(
        &ns,
        "app",
        &s.url("app/config"),
        &format!("{{{SHARD}: ocisource}}"),
    ));
    s.cluster
        .wait_for(FLUX_OCI, &ns, "app", WAIT, "app Ready", ready_now);
    let revision = format!("v1@{}", pushed.manifest_digest);
    // The flux CLI prints digests shortened to 8 hex digits.
    let short = &revision[..revision.find(':').unwrap() + 9];

    let (ok, out) = flux(&s.cluster, &["get", "sources", "oci", "-n", &ns]);
    assert!(ok, "flux get sources oci: {out}");
    let row = out
        .lines()
        .find(|l| l.starts_with("app "))
        .unwrap_or_else(|| panic!("no row for app: {out}"));
    assert!(row.contains("True"), "{row}");
    assert!(
        row.contains(&format!("stored artifact for digest '{short}")),
        "{row}"
    );

    let (ok, out) = flux(
        &s.cluster,
        &["reconcile", "source", "oci", "app", "-n", &ns],
    );
    assert!(ok, "flux reconcile source oci: {out}");
    assert!(out.contains(&format!("fetched revision {short}")), "{out}");
    let obj = s.cluster.get(FLUX_OCI, &ns, "app").unwrap();
    let requested = obj["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"].clone();
    assert!(requested.is_string(), "{obj:#}");
    assert_eq!(obj["status"]["lastHandledReconcileAt"], requested);

    let (ok, out) = flux(&s.cluster, &["suspend", "source", "oci", "app", "-n", &ns]);
    assert!(ok, "flux suspend: {out}");
    assert_eq!(
        s.cluster.get(FLUX_OCI, &ns, "app").unwrap()["spec"]["suspend"],
        true
    );
    let (ok, out) = flux(&s.cluster, &["get", "sources", "oci", "-n", &ns]);
    assert!(
        ok && out
            .lines()
            .any(|l| l.starts_with("app ") && l.contains("True")),
        "{out}"
    );
    let (ok, out) = flux(&s.cluster, &["resume", "source", "oci", "app", "-n", &ns]);
    assert!(ok, "flux resume: {out}");
    assert!(out.contains(&format!("fetched revision {short}")), "{out}");
    let obj = s.cluster.get(FLUX_OCI, &ns, "app").unwrap();
    assert!(
        obj["spec"].get("suspend").is_none_or(|v| v == false),
        "{obj:#}"
    );

    let (ok, out) = flux(
        &s.cluster,
        &["events", "-n", &ns, "--for", "OCIRepository/app"],
    );
    assert!(ok, "flux events: {out}");
    assert!(
        out.lines()
            .any(|l| l.contains("NewArtifact") && l.contains(short)),
        "no NewArtifact event in flux events: {out}"
    );
}
