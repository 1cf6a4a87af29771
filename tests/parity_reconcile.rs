//! Flux parity of `spec.ref.semver` through the one-shot reconcile against the real
//! registry (issue 14, items 4 and 7): Masterminds' operator spellings resolve, an
//! invalid range is a retried `ReadOperationFailed` found after listing the tags (never
//! Stalled), and `_` in a tag reads as `+` only for Helm chart layers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::oneshot_parity::{condition, object, reconcile, status, write};
use support::{tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const HELM: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

async fn registry_with(repo: &str, media_type: &str, tags: &[&str]) -> TestRegistry {
    let reg = TestRegistry::start(RegistryOpts::plain());
    for tag in tags {
        let layer = tar_gz(&[("version.txt", tag.as_bytes())]);
        reg.push_artifact(repo, tag, &[(media_type, layer)], &[])
            .await;
    }
    reg
}

/// Reconciles `team/<name>` with `ref.semver: <range>` and `extra` spec lines; returns
/// the exit code and the status.
fn run_semver(
    reg: &TestRegistry,
    repo: &str,
    name: &str,
    range: &str,
    extra: &str,
) -> (i32, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("oci://{}/{repo}", reg.host());
    let f = write(
        dir.path(),
        "o.yaml",
        &object(
            name,
            &url,
            &format!("    semver: '{range}'"),
            &format!("  insecure: true\n{extra}"),
        ),
    );
    let run = reconcile(&[&f], &dir.path().join("s"), &[]);
    (run.code, status(&run))
}

fn chosen_tag(status: &serde_json::Value) -> String {
    let revision = status["artifact"]["revision"].as_str().unwrap_or_default();
    revision.split('@').next().unwrap_or_default().to_string()
}

#[tokio::test]
async fn masterminds_operator_spellings_resolve() {
    let reg = registry_with("team/app", LAYER, &["1.1.0", "1.2.0", "1.2.5", "1.3.0"]).await;
    for (range, want) in [
        ("=<1.2.0", "1.2.0"),
        ("=>1.2.1", "1.3.0"),
        ("~>1.2", "1.2.5"),
    ] {
        let (code, st) = run_semver(&reg, "team/app", "app", range, "");
        assert_eq!(code, 0, "{range}: {st:#}");
        assert_eq!(chosen_tag(&st), want, "{range}");
    }
}

#[tokio::test]
async fn an_invalid_range_is_a_retried_read_failure_after_listing_tags() {
    let reg = registry_with("team/app", LAYER, &["1.0.0"]).await;
    let (code, st) = run_semver(&reg, "team/app", "app", "not a range", "");
    assert_eq!(code, 1, "{st:#}");
    let ready = condition(&st, "Ready");
    assert_eq!(
        (&ready["status"], &ready["reason"]),
        (
            &serde_json::json!("False"),
            &serde_json::json!("ReadOperationFailed")
        )
    );
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains("failed to determine the artifact tag") && message.contains("not a range"),
        "{message}"
    );
    assert_eq!(
        condition(&st, "Reconciling")["reason"],
        "ProgressingWithRetry"
    );
    assert_eq!(
        condition(&st, "FetchFailed")["reason"],
        "ReadOperationFailed"
    );
    let stalled = st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Stalled");
    assert!(!stalled, "Flux never stalls on a range: {st:#}");
    assert!(
        reg.request_log()
            .iter()
            .any(|q| q.method == "GET" && q.path.starts_with("/v2/team/app/tags/list")),
        "the tags were listed before the range was read"
    );
}

#[tokio::test]
async fn underscore_is_plus_only_for_helm_chart_layers() {
    let tags = ["1.4.0", "1.5.0_build1"];
    let reg = registry_with("team/chart", HELM, &tags).await;
    let helm =
        "  layerSelector:\n    mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip";
    let (code, st) = run_semver(&reg, "team/chart", "chart", ">=1.0.0", helm);
    assert_eq!(code, 0, "{st:#}");
    assert_eq!(chosen_tag(&st), "1.5.0_build1", "Helm: 1.5.0+build1");

    let (code, st) = run_semver(&reg, "team/chart", "plain", ">=1.0.0", "");
    assert_eq!(code, 0, "{st:#}");
    assert_eq!(
        chosen_tag(&st),
        "1.4.0",
        "not a chart layer selection: 1.5.0_build1 is no version"
    );
}
