//! Flux's own OCIRepository kind through the one-shot reconcile against the real registry,
//! with the defaults of drop-in mode: the first layer only (Flux's `layers[0]`), Flux's
//! status keys, its own store folder; the opt-in annotations (`ocisource.dev/layers: all`
//! merges every layer, and changing it rebuilds the artifact); a bad annotation stalls
//! naming itself; and an artifact published by another store is rebuilt in this one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::oneshot::run;
use support::{tar_gz, RegistryOpts, TestRegistry};

const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const TAR_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn flux_object(url: &str, annotations: &str) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: app\n  namespace: team\n  annotations: {annotations}\n\
         spec:\n  url: {url}\n  interval: 5m\n  insecure: true\n  ref:\n    tag: v1\n"
    )
}

/// The files in the stored tarball at `path` (relative to `storage`).
fn files(storage: &Path, path: &str) -> Vec<(String, String)> {
    let bytes = std::fs::read(storage.join(path)).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
    let mut out = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.header().entry_type().is_file() {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            out.push((entry.path().unwrap().display().to_string(), text));
        }
    }
    out.sort();
    out
}

async fn two_layers() -> (TestRegistry, String, String) {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let first = tar_gz(&[("a.yaml", b"first"), ("same.yaml", b"from first")]);
    let second = tar_gz(&[("b.yaml", b"second"), ("same.yaml", b"from second")]);
    let pushed = reg
        .push_artifact(
            "team/app",
            "v1",
            &[(FLUX_LAYER, first), (TAR_LAYER, second)],
            &[],
        )
        .await;
    let url = format!("oci://{}/team/app", reg.host());
    (reg, url, pushed.manifest_digest)
}

fn reconcile(dir: &Path, yaml: &str) -> (i32, Value, Value) {
    let file = dir.join("o.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = run(&file, &dir.join("s"));
    let list: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr));
    let item = list["items"][0].clone();
    (out.code, item["status"].clone(), item)
}

#[tokio::test]
async fn fluxs_kind_takes_the_first_layer_and_keeps_its_status_shape() {
    let (_reg, url, digest) = two_layers().await;
    let dir = tempfile::tempdir().unwrap();
    let (code, status, item) = reconcile(dir.path(), &flux_object(&url, "{}"));
    assert_eq!(code, 0, "{status:#}");
    assert_eq!(item["apiVersion"], "source.toolkit.fluxcd.io/v1");
    let hex = digest.trim_start_matches("sha256:");
    let path = status["artifact"]["path"].as_str().unwrap();
    assert_eq!(path, format!("flux/ocirepository/team/app/{hex}.tar.gz"));
    assert_eq!(
        files(&dir.path().join("s"), path),
        vec![
            ("a.yaml".to_string(), "first".to_string()),
            ("same.yaml".to_string(), "from first".to_string())
        ],
        "Flux's default is the first layer only"
    );
    assert!(status.get("observedPlatform").is_none(), "{status:#}");
    assert!(
        status["artifact"].get("metadata").is_none(),
        "no options, no manifest annotations: no metadata: {status:#}"
    );
}

#[tokio::test]
async fn the_layers_annotation_merges_every_layer_and_changing_it_rebuilds() {
    let (_reg, url, _) = two_layers().await;
    let dir = tempfile::tempdir().unwrap();
    let (code, status, _) = reconcile(dir.path(), &flux_object(&url, "{}"));
    assert_eq!(code, 0, "{status:#}");
    let first_digest = status["artifact"]["digest"].clone();

    let (code, status, _) = reconcile(
        dir.path(),
        &flux_object(&url, "{ocisource.dev/layers: all}"),
    );
    assert_eq!(code, 0, "{status:#}");
    assert_ne!(status["artifact"]["digest"], first_digest, "rebuilt");
    assert_eq!(
        status["artifact"]["metadata"]["ocisource.dev/options"],
        "layers=all"
    );
    let path = status["artifact"]["path"].as_str().unwrap();
    assert_eq!(
        files(&dir.path().join("s"), path),
        vec![
            ("a.yaml".to_string(), "first".to_string()),
            ("b.yaml".to_string(), "second".to_string()),
            ("same.yaml".to_string(), "from second".to_string())
        ],
        "every layer, the later one overriding"
    );

    // Back to Flux's default: rebuilt again, the note gone.
    let (code, status, _) = reconcile(dir.path(), &flux_object(&url, "{}"));
    assert_eq!(code, 0);
    assert_eq!(status["artifact"]["digest"], first_digest);
    assert!(status["artifact"].get("metadata").is_none(), "{status:#}");
}

#[tokio::test]
async fn a_bad_annotation_stalls_naming_it() {
    let (_reg, url, _) = two_layers().await;
    let dir = tempfile::tempdir().unwrap();
    let (code, status, _) = reconcile(
        dir.path(),
        &flux_object(&url, "{ocisource.dev/platform: 'not a platform'}"),
    );
    assert_eq!(code, 1);
    let stalled = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Stalled")
        .cloned()
        .unwrap_or_else(|| panic!("not stalled: {status:#}"));
    assert_eq!(stalled["reason"], "InvalidSpec");
    assert!(
        stalled["message"]
            .as_str()
            .unwrap()
            .starts_with("metadata.annotations[ocisource.dev/platform]:"),
        "{stalled:#}"
    );
}

/// An object whose status names an artifact in another store (Flux's source-controller's,
/// before it moved) is rebuilt here (that no new revision is announced meanwhile is
/// checked on the real API server, tests/cluster_drop_in.rs).
#[tokio::test]
async fn an_artifact_from_another_store_is_rebuilt_here() {
    let (_reg, url, digest) = two_layers().await;
    let dir = tempfile::tempdir().unwrap();
    let hex = digest.trim_start_matches("sha256:");
    let theirs = format!(
        "{}status:\n  observedGeneration: 1\n  conditions:\n  - {{type: Ready, status: 'True', reason: Succeeded, message: \"stored artifact for digest 'v1@{digest}'\", lastTransitionTime: '2026-07-02T10:00:00Z', observedGeneration: 1}}\n  \
         artifact: {{path: ocirepository/team/app/{hex}.tar.gz, url: 'http://source-controller/ocirepository/team/app/{hex}.tar.gz', revision: 'v1@{digest}', digest: 'sha256:00', lastUpdateTime: '2026-07-02T10:00:00Z'}}\n",
        flux_object(&url, "{}")
    );
    let file = dir.path().join("o.yaml");
    std::fs::write(&file, &theirs).unwrap();
    let out = run(&file, &dir.path().join("s"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let status = out.status();
    assert_eq!(
        status["artifact"]["path"],
        format!("flux/ocirepository/team/app/{hex}.tar.gz")
    );
    assert!(
        !status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "ArtifactOutdated"),
        "{status:#}"
    );
}
