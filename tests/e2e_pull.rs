//! `ocisource pull` and `push` end to end against the real registry, with artifacts pushed
//! by independent clients (skopeo, raw HTTP): multi-layer merge checked against GNU tar,
//! determinism, `copy`, hostile layers leaving the output untouched, platforms, auth,
//! and the push → pull round trip with Flux's media types seen by skopeo.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::{sha256, tar_gz, write_oci_layout, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn ocisource(args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_ocisource"))
        .args(args)
        .output()
        .expect("run ocisource");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn pull(reg: &TestRegistry, repo: &str, out: &Path, extra: &[&str]) -> Out {
    let url = format!("oci://{}/{repo}", reg.host());
    let mut args = vec![
        "pull",
        url.as_str(),
        "--insecure",
        "--output-file",
        out.to_str().unwrap(),
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    ocisource(&args)
}

/// A file tree: relative path → (content, mode).
fn tree(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut m = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, m: &mut BTreeMap<String, Option<Vec<u8>>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                m.insert(rel, None);
                walk(root, &p, m);
            } else {
                m.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    walk(root, root, &mut m);
    m
}

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
    let run = pull(&reg, "team/four", &out, &["--tag", "v1"]);
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
    assert_eq!(pull(&reg, "team/four", &again, &["--tag", "v1"]).code, 0);
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
        &reg,
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
fn raw_tar_gz(entries: &[(&str, tar::EntryType, &str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, kind, link, data) in entries {
        let mut h = tar::Header::new_old();
        let b = h.as_old_mut();
        b.name[..name.len()].copy_from_slice(name.as_bytes());
        b.linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_entry_type(*kind);
        h.set_mtime(0);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &out).unwrap();
    gz.finish().unwrap()
}

#[tokio::test]
async fn hostile_layers_fail_clearly_and_leave_the_output_untouched() {
    use tar::EntryType::{Block, Char, Fifo, Link, Regular, Symlink};
    let reg = TestRegistry::start(RegistryOpts::plain());
    let cases: Vec<(&str, Vec<Vec<u8>>, &str)> = vec![
        (
            "absolute",
            vec![raw_tar_gz(&[("/etc/passwd", Regular, "", b"x")])],
            "/etc/passwd",
        ),
        (
            "dotdot",
            vec![raw_tar_gz(&[("a/../../escape", Regular, "", b"x")])],
            "a/../../escape",
        ),
        (
            "symlink",
            vec![
                raw_tar_gz(&[("link", Symlink, "/etc", b"")]),
                raw_tar_gz(&[("link/passwd", Regular, "", b"x")]),
            ],
            "symlink 'link'",
        ),
        (
            "hardlink",
            vec![raw_tar_gz(&[
                ("a", Regular, "", b"x"),
                ("b", Link, "a", b""),
            ])],
            "b",
        ),
        (
            "chardev",
            vec![raw_tar_gz(&[("dev/null", Char, "", b"")])],
            "dev/null",
        ),
        (
            "blockdev",
            vec![raw_tar_gz(&[("dev/sda", Block, "", b"")])],
            "dev/sda",
        ),
        ("fifo", vec![raw_tar_gz(&[("pipe", Fifo, "", b"")])], "pipe"),
        (
            "badgzip",
            vec![vec![
                0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef,
            ]],
            "gzip",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, layers, needle) in cases {
        let repo = format!("hostile/{name}");
        let pushed = reg
            .push_artifact(
                &repo,
                "v1",
                &layers
                    .iter()
                    .map(|l| (LAYER, l.clone()))
                    .collect::<Vec<_>>(),
                &[],
            )
            .await;
        let out = dir.path().join(format!("{name}.tar.gz"));
        std::fs::write(&out, b"last good").unwrap();
        let run = pull(&reg, &repo, &out, &["--tag", "v1"]);
        assert_eq!(run.code, 1, "{name}: {}", run.stderr);
        assert!(
            run.stderr.contains(needle),
            "{name}: error must name the entry: {}",
            run.stderr
        );
        let named_layer = pushed
            .layer_digests
            .iter()
            .any(|d| run.stderr.contains(d.as_str()));
        assert!(
            named_layer,
            "{name}: error must name the layer digest: {}",
            run.stderr
        );
        assert_eq!(
            std::fs::read(&out).unwrap(),
            b"last good",
            "{name}: output changed"
        );
    }
    let leftovers: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[tokio::test]
async fn decompression_bomb_limits_fail_and_leave_the_output_untouched() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    // 8 MiB of zeros compress to a few KiB: a small bomb, and three entries.
    let zeros = vec![0u8; 8 << 20];
    let layer = tar_gz(&[("a", b"1"), ("b", b"2"), ("zeros", zeros.as_slice())]);
    assert!(
        layer.len() < 1 << 20,
        "the layer should inflate well over its size"
    );
    let pushed = reg
        .push_artifact("team/bomb", "v1", &[(LAYER, layer)], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tar.gz");
    for (flag, value) in [
        ("--max-uncompressed-bytes", "1048576"),
        ("--max-entries", "2"),
    ] {
        std::fs::write(&out, b"last good").unwrap();
        let run = pull(&reg, "team/bomb", &out, &["--tag", "v1", flag, value]);
        assert_eq!(run.code, 1, "{flag}: {}", run.stderr);
        assert!(
            run.stderr.contains(&pushed.layer_digests[0]),
            "{flag}: {}",
            run.stderr
        );
        assert_eq!(std::fs::read(&out).unwrap(), b"last good");
    }
    // Within the limits the same artifact pulls.
    assert_eq!(pull(&reg, "team/bomb", &out, &["--tag", "v1"]).code, 0);
}

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
        &reg,
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
        &reg,
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

#[tokio::test]
async fn basic_auth_from_creds_and_docker_config() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("bob", "pa55"));
    reg.push_artifact("team/auth", "v1", &[(LAYER, tar_gz(&[("f", b"1")]))], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tar.gz");
    let url = format!("oci://{}/team/auth", reg.host());
    let o = out.to_str().unwrap();
    let args = [
        "pull",
        &url,
        "--insecure",
        "--tag",
        "v1",
        "--output-file",
        o,
    ];
    let anon = ocisource(&args);
    assert_eq!(anon.code, 1);
    assert!(
        anon.stderr.contains("requires a login") && anon.stderr.contains("--creds"),
        "{}",
        anon.stderr
    );
    let with = ocisource(&[&args[..], &["--creds", "bob:pa55"]].concat());
    assert_eq!(with.code, 0, "{}", with.stderr);
    assert!(!with.stderr.contains("pa55"));
    let cfg = dir.path().join("docker");
    std::fs::create_dir_all(&cfg).unwrap();
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("bob:pa55");
    std::fs::write(
        cfg.join("config.json"),
        format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, reg.host()),
    )
    .unwrap();
    let out2 = Command::new(env!("CARGO_BIN_EXE_ocisource"))
        .args(args)
        .env("DOCKER_CONFIG", &cfg)
        .output()
        .unwrap();
    assert!(
        out2.status.success(),
        "{}",
        String::from_utf8_lossy(&out2.stderr)
    );
}

/// Writes `docker-credential-<name>` into `dir`: it answers `user`/`secret` for `host`
/// and "credentials not found" (exit 1, as real helpers do) for anything else.
fn credential_helper(dir: &Path, name: &str, host: &str, user: &str, secret: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(format!("docker-credential-{name}"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n[ \"$1\" = get ] || exit 3\nread -r host\n\
             if [ \"$host\" = '{host}' ]; then\n\
             printf '{{\"ServerURL\":\"%s\",\"Username\":\"{user}\",\"Secret\":\"{secret}\"}}' \"$host\"\n\
             else echo 'credentials not found in native keychain'; exit 1; fi\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn credential_helpers_from_docker_config_log_in() {
    let reg = TestRegistry::start(RegistryOpts::plain().with_basic_auth("carol", "h3lper"));
    reg.push_artifact("team/helper", "v1", &[(LAYER, tar_gz(&[("f", b"1")]))], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    credential_helper(&bin, "ocitest", &reg.host(), "carol", "h3lper");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let url = format!("oci://{}/team/helper", reg.host());
    let out = dir.path().join("o.tar.gz");
    let run_with = |config: &str| {
        let cfg = dir.path().join("docker");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(cfg.join("config.json"), config).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_ocisource"))
            .args(["pull", &url, "--insecure", "--tag", "v1", "--output-file"])
            .arg(&out)
            .env("DOCKER_CONFIG", &cfg)
            .env("PATH", &path)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // A per-registry helper (credHelpers) and the default store (credsStore) both work.
    let per_host = format!(r#"{{"credHelpers":{{"{}":"ocitest"}}}}"#, reg.host());
    let (code, stderr) = run_with(&per_host);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("h3lper"), "{stderr}");
    let (code, stderr) = run_with(r#"{"credsStore":"ocitest"}"#);
    assert_eq!(code, Some(0), "{stderr}");
    // A helper that knows no credentials for this host means anonymous: the registry's
    // refusal is what the user sees.
    credential_helper(&bin, "other", "elsewhere.example", "x", "y");
    let (code, stderr) = run_with(r#"{"credsStore":"other"}"#);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("requires a login"), "{stderr}");
    // A named helper that is not installed is an error naming it.
    let (code, stderr) = run_with(r#"{"credsStore":"not-installed"}"#);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("docker-credential-not-installed"),
        "{stderr}"
    );
}

#[tokio::test]
async fn push_then_pull_round_trips_with_flux_media_types() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("apps/web")).unwrap();
    std::fs::write(src.join("apps/web/deploy.yaml"), "replicas: 2\n").unwrap();
    std::fs::write(
        src.join("kustomization.yaml"),
        "resources: [apps/web/deploy.yaml]\n",
    )
    .unwrap();
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
    let run = pull(&reg, "team/pushed", &out, &["--tag", "v1"]);
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
