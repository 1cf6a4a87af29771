//! `ocisource pull` and `push` end to end against the real registry, with artifacts pushed
//! by independent clients (skopeo, raw HTTP): multi-layer merge checked against GNU tar,
//! determinism, `copy`, platforms, and the push → pull round trip with Flux's media types
//! seen by skopeo. Hostile layers: `e2e_pull_hostile.rs`; logins: `e2e_pull_auth.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
mod support;

use std::path::Path;
use std::process::Command;

use cli_common::{arg, ocisource, pull, tree};
use support::{sha256, tar_gz, write_oci_layout, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn gnu_extract(archive: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    let st = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(st.success());
}

/// Applies layers the way an OCI runtime does, with GNU tar and whiteouts.
fn oci_apply(layers: &[Vec<u8>], into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    for (i, layer) in layers.iter().enumerate() {
        let f = into.parent().unwrap().join(format!("layer{i}.tar.gz"));
        std::fs::write(&f, layer).unwrap();
        let st = Command::new("tar")
            .arg("-xzf")
            .arg(&f)
            .arg("-C")
            .arg(into)
            .status()
            .unwrap();
        assert!(st.success());
        let mut whiteouts = Vec::new();
        for (rel, _) in tree(into) {
            let name = Path::new(&rel)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if name == ".wh..wh..opq" {
                whiteouts.push((rel.clone(), None));
            } else if let Some(target) = name.strip_prefix(".wh.") {
                whiteouts.push((rel.clone(), Some(Path::new(&rel).with_file_name(target))));
            }
        }
        for (marker, target) in whiteouts {
            let marker = into.join(marker);
            match target {
                Some(t) => {
                    let t = into.join(t);
                    if t.is_dir() {
                        std::fs::remove_dir_all(&t).unwrap();
                    } else if t.exists() {
                        std::fs::remove_file(&t).unwrap();
                    }
                }
                None => {
                    // Opaque: only this layer's own entries survive; they were just written,
                    // so rebuild the dir from this layer alone.
                    let dir = marker.parent().unwrap().to_path_buf();
                    let rel = dir.strip_prefix(into).unwrap().to_path_buf();
                    std::fs::remove_dir_all(&dir).unwrap();
                    let tmp = into.parent().unwrap().join(format!("opq{i}"));
                    std::fs::create_dir_all(&tmp).unwrap();
                    Command::new("tar")
                        .arg("-xzf")
                        .arg(&f)
                        .arg("-C")
                        .arg(&tmp)
                        .status()
                        .unwrap();
                    std::fs::rename(tmp.join(&rel), &dir).unwrap();
                }
            }
            let _ = std::fs::remove_file(&marker);
        }
    }
}

#[tokio::test]
async fn four_layers_pushed_by_skopeo_match_gnu_tar_in_order() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let layers = vec![
        tar_gz(&[
            ("base/", b""),
            ("base/a.yaml", b"a1"),
            ("base/b.yaml", b"b1"),
            ("base/gone.yaml", b"x"),
            ("keep/k.yaml", b"k1"),
            ("opq/lower.yaml", b"l"),
        ]),
        tar_gz(&[("base/a.yaml", b"a2"), ("new/n.yaml", b"n1")]),
        tar_gz(&[
            ("base/.wh.gone.yaml", b""),
            ("opq/.wh..wh..opq", b""),
            ("opq/upper.yaml", b"u"),
        ]),
        tar_gz(&[
            ("base/b.yaml", b"b4"),
            ("keep/k.yaml", b"k4"),
            (".git/config", b"excluded by default"),
            ("logo.png", b"excluded"),
        ]),
    ];
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let refs: Vec<(&str, &[u8])> = layers.iter().map(|l| (LAYER, l.as_slice())).collect();
    write_oci_layout(
        &layout,
        "v1",
        ("application/vnd.oci.image.config.v1+json", b"{}"),
        &refs,
        &[],
    );
    reg.skopeo_copy(&layout, "v1", "team/four", "v1");

    let out = dir.path().join("out.tar.gz");
    let run = pull(&reg.host(), "team/four", &out, &["--tag", "v1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let printed: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(printed["archiveDigest"], sha256(&bytes));
    assert_eq!(printed["layers"], 4);

    let ours = dir.path().join("ours");
    gnu_extract(&out, &ours);
    let theirs = dir.path().join("gnu").join("tree");
    oci_apply(&layers, &theirs);
    let mut expected = tree(&theirs);
    expected.retain(|k, _| !k.starts_with(".git") && !k.ends_with(".png"));
    assert_eq!(tree(&ours), expected);

    // Each path once, normalised headers.
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let mut seen = std::collections::HashSet::new();
    for e in archive.entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        let p = e
            .path()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches('/')
            .to_string();
        assert!(seen.insert(p.clone()), "{p} appears twice");
        assert_eq!(
            (h.uid().unwrap(), h.gid().unwrap(), h.mtime().unwrap()),
            (0, 0, 0),
            "{p}"
        );
        let mode = h.mode().unwrap() & 0o7777;
        match h.entry_type() {
            tar::EntryType::Directory => assert_eq!(mode, 0o750, "{p}"),
            tar::EntryType::Regular => assert_eq!(mode, 0o600, "{p}"),
            other => panic!("{p}: unexpected entry type {other:?}"),
        }
    }

    // Same digest on every run.
    let again = dir.path().join("again.tar.gz");
    assert_eq!(
        pull(&reg.host(), "team/four", &again, &["--tag", "v1"]).code,
        0
    );
    assert_eq!(std::fs::read(&again).unwrap(), bytes);
}

#[tokio::test]
async fn copy_stores_the_layer_blob_byte_for_byte() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let helm = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
    let chart = tar_gz(&[("mychart/Chart.yaml", b"name: mychart\n")]);
    let pushed = reg
        .push_artifact(
            "charts/my",
            "1.0.0",
            &[(LAYER, tar_gz(&[("x", b"y")])), (helm, chart.clone())],
            &[],
        )
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("chart.tgz");
    let run = pull(
        &reg.host(),
        "charts/my",
        &out,
        &[
            "--tag",
            "1.0.0",
            "--layer-media-type",
            helm,
            "--layer-operation",
            "copy",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read(&out).unwrap(), chart);
    let printed: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(printed["archiveDigest"], pushed.layer_digests[1]);
}

/// Raw tar bytes with headers written by hand, so hostile names and types survive.

#[tokio::test]
async fn image_index_resolves_the_wanted_platform() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let amd = reg
        .push_artifact(
            "team/multiarch",
            "amd64",
            &[(LAYER, tar_gz(&[("arch", b"amd64")]))],
            &[],
        )
        .await;
    let arm = reg
        .push_artifact(
            "team/multiarch",
            "arm64",
            &[(LAYER, tar_gz(&[("arch", b"arm64")]))],
            &[],
        )
        .await;
    let entry = |p: &support::Pushed, arch: &str| serde_json::json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": p.manifest_digest, "size": p.manifest.len(), "platform": {"os": "linux", "architecture": arch}});
    let index = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [entry(&amd, "amd64"), entry(&arm, "arm64")]});
    reg.put_manifest(
        "team/multiarch",
        "v1",
        "application/vnd.oci.image.index.v1+json",
        &serde_json::to_vec(&index).unwrap(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tar.gz");
    let run = pull(
        &reg.host(),
        "team/multiarch",
        &out,
        &["--tag", "v1", "--platform", "linux/arm64"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let got = Command::new("tar")
        .arg("-xzOf")
        .arg(&out)
        .arg("arch")
        .output()
        .unwrap()
        .stdout;
    assert_eq!(got, b"arm64");
    let run = pull(
        &reg.host(),
        "team/multiarch",
        &out,
        &["--tag", "v1", "--platform", "linux/s390x"],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("platforms present: linux/amd64, linux/arm64"),
        "{}",
        run.stderr
    );
}

/// A temp directory holding `src/` with `apps/web/deploy.yaml` and `kustomization.yaml`.
fn app_tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("apps/web")).unwrap();
    std::fs::write(src.join("apps/web/deploy.yaml"), "replicas: 2\n").unwrap();
    std::fs::write(
        src.join("kustomization.yaml"),
        "resources: [apps/web/deploy.yaml]\n",
    )
    .unwrap();
    (dir, src)
}

/// A registry with [`app_tree`] pushed by `ocisource push` as `repo:v1`, no other flag:
/// the registry, the temp directory, `src` and the URL.
fn pushed_app(repo: &str) -> (TestRegistry, tempfile::TempDir, std::path::PathBuf, String) {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let (dir, src) = app_tree();
    let url = format!("oci://{}/{repo}:v1", reg.host());
    let run = ocisource(&["push", &url, "--path", arg(&src), "--insecure"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    (reg, dir, src, url)
}

#[tokio::test]
async fn push_then_pull_round_trips_with_flux_media_types() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let (dir, src) = app_tree();
    let dest = format!("oci://{}/team/pushed:v1", reg.host());
    let run = ocisource(&[
        "push",
        &dest,
        "--path",
        src.to_str().unwrap(),
        "--insecure",
        "--source",
        "https://github.com/org/repo",
        "--revision",
        "main@sha1:abc",
        "--annotation",
        "team=platform",
        "-o",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pushed: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();

    let raw = Command::new("skopeo")
        .args([
            "inspect",
            "--raw",
            "--tls-verify=false",
            &format!("docker://{}/team/pushed:v1", reg.host()),
        ])
        .output()
        .unwrap();
    assert!(
        raw.status.success(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    let manifest: serde_json::Value = serde_json::from_slice(&raw.stdout).unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.cncf.flux.config.v1+json"
    );
    assert_eq!(
        manifest["layers"][0]["mediaType"],
        "application/vnd.cncf.flux.content.v1.tar+gzip"
    );
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.source"],
        "https://github.com/org/repo"
    );
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.revision"],
        "main@sha1:abc"
    );
    assert_eq!(manifest["annotations"]["team"], "platform");
    assert!(manifest["annotations"]["org.opencontainers.image.created"]
        .as_str()
        .is_some());
    assert_eq!(pushed["digest"], sha256(&raw.stdout));

    let out = dir.path().join("back.tar.gz");
    let run = pull(&reg.host(), "team/pushed", &out, &["--tag", "v1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let back = dir.path().join("back");
    gnu_extract(&out, &back);
    assert_eq!(tree(&back), tree(&src));
}

#[test]
fn bad_input_exits_2_with_the_flag_named() {
    let run = ocisource(&[
        "pull",
        "oci://reg.example.com/app:v1",
        "--tag",
        "v2",
        "--output-file",
        "/tmp/x.tar.gz",
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--tag"), "{}", run.stderr);
    let run = ocisource(&[
        "pull",
        "oci://reg.example.com/app",
        "--semver",
        "not-a-range",
        "--output-file",
        "/tmp/x.tar.gz",
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("invalid --semver 'not-a-range'") && !run.stderr.contains("spec."),
        "{}",
        run.stderr
    );
}

/// `--output-file -`: standard output carries the archive, byte for byte the file a
/// `--output-file FILE` pull writes, and nothing else (no result, no progress).
#[tokio::test]
async fn output_file_dash_writes_the_archive_and_only_it_to_stdout() {
    let (reg, dir, _, url) = pushed_app("team/stdout");
    let file = dir.path().join("app.tar.gz");
    let run = pull(&reg.host(), "team/stdout", &file, &["--tag", "v1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let piped = cli_common::command(&["pull", &url, "--insecure", "--output-file", "-"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(piped.status.success(), "{stderr}");
    assert_eq!(piped.stdout, std::fs::read(&file).unwrap(), "{stderr}");
    assert!(!stderr.contains("manifestDigest"), "{stderr}");
    assert!(!dir.path().join("-").exists(), "a file named - was written");
}

/// `--extract DIR` unpacks the artifact as pushed into a new directory (as `flux pull
/// artifact -o DIR`); a directory that is not empty is refused before any download and
/// left as it was.
#[tokio::test]
async fn extract_unpacks_into_a_new_directory_and_refuses_a_non_empty_one() {
    let (_reg, dir, src, url) = pushed_app("team/extract");

    let into = dir.path().join("new/app");
    let pulled = ocisource(&["pull", &url, "--insecure", "--extract", arg(&into)]);
    assert_eq!(pulled.code, 0, "{}", pulled.stderr);
    assert_eq!(tree(&into), tree(&src));

    let busy = dir.path().join("busy");
    std::fs::create_dir_all(&busy).unwrap();
    std::fs::write(busy.join("keep.txt"), "mine\n").unwrap();
    let refused = ocisource(&["pull", &url, "--insecure", "--extract", arg(&busy)]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--extract") && refused.stderr.contains("not empty"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("started"), "{}", refused.stderr);
    assert_eq!(tree(&busy).len(), 1);
}
