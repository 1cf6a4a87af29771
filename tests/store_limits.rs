//! The store at its limits, through the real binary: a full disk (a small tmpfs mounted as
//! the store) fails the reconcile with StorageOperationFailed naming the path and "No
//! space left on device" while the last good artifact stays published and intact; names
//! that Kubernetes refuses never become paths (nothing is written outside `--storage`);
//! durations too long for Go's `time.Duration` are clear errors, not panics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::oneshot::{self, Rng};
use support::{sha256, tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// A tmpfs of `size` mounted at a new directory; unmounted on drop. Needs root (the
/// test machine and CI run as root); without it the test fails saying so.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: PathBuf, size: &str) -> Self {
        std::fs::create_dir_all(&at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mounting a tmpfs needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(at)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test]
async fn a_full_disk_is_a_storage_failure_and_keeps_the_last_good_artifact() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let small = tar_gz(&[("app/config.yaml", b"replicas: 1\n")]);
    let large = tar_gz(&[("app/blob.bin", &Rng::new(7).bytes(6 << 20)[..])]);
    reg.push_artifact("team/app", "small", &[(LAYER, small)], &[])
        .await;
    let pushed = reg
        .push_artifact("team/app", "large", &[(LAYER, large)], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(dir.path().join("storage"), "2m");
    let storage = tmpfs.0.clone();
    let file = dir.path().join("app.yaml");
    let url = format!("oci://{}/team/app", reg.host());

    std::fs::write(&file, oneshot::object("team", "app", &url, "small", "5m")).unwrap();
    let first = oneshot::run(&file, &storage);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let good = first.status()["artifact"].clone();
    let good_path = storage.join(good["path"].as_str().unwrap());
    let good_bytes = std::fs::read(&good_path).unwrap();

    std::fs::write(&file, oneshot::object("team", "app", &url, "large", "5m")).unwrap();
    let full = oneshot::run(&file, &storage);
    assert_eq!(full.code, 1, "{}", full.stderr);
    assert!(!full.stderr.contains("panicked"), "{}", full.stderr);
    let ready = full.condition("Ready");
    assert_eq!(ready["status"], "False", "{ready}");
    assert_eq!(ready["reason"], "StorageOperationFailed", "{ready}");
    let message = ready["message"].as_str().unwrap();
    let hex = &pushed.manifest_digest["sha256:".len()..];
    let target = storage.join(format!("ocirepository/team/app/{hex}.tar.gz"));
    assert!(
        message.contains(&target.display().to_string()),
        "the message names no path: {message}"
    );
    assert!(
        message.contains("No space left on device"),
        "the message does not say the disk is full: {message}"
    );
    // The last good artifact is still published, in the status and on disk.
    assert_eq!(full.status()["artifact"], good);
    assert_eq!(std::fs::read(&good_path).unwrap(), good_bytes);
    assert_eq!(sha256(&good_bytes), good["digest"]);
    assert!(!target.exists());
    assert_eq!(oneshot::temp_files(&storage), Vec::<PathBuf>::new());
    drop(tmpfs);
}

/// Every file under `root`, relative to it.
fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn names_kubernetes_refuses_never_become_paths() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let storage = work.join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    let url = "oci://127.0.0.1:1/team/app";
    for (namespace, name, field) in [
        ("team", "../../../escaped", "metadata.name"),
        ("team", "a/b", "metadata.name"),
        ("../..", "app", "metadata.namespace"),
        ("team.x", "app", "metadata.namespace"),
        ("team", "App", "metadata.name"),
    ] {
        let file = dir.path().join("o.yaml");
        let yaml = oneshot::object(
            &format!("'{namespace}'"),
            &format!("'{name}'"),
            url,
            "v1",
            "5m",
        );
        std::fs::write(&file, yaml).unwrap();
        let run = oneshot::run(&file, &storage);
        assert_eq!(run.code, 2, "{namespace}/{name}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("invalid {field}")) && run.stderr.contains("RFC 1123"),
            "{namespace}/{name}: {}",
            run.stderr
        );
    }
    assert_eq!(files_under(dir.path()), vec!["o.yaml".to_string()]);
    assert!(files_under(&storage).is_empty());
}

#[tokio::test]
async fn durations_past_gos_limit_are_errors_not_panics() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    reg.push_artifact("team/app", "v1", &[(LAYER, tar_gz(&[("a", b"a")]))], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("o.yaml");
    let url = format!("oci://{}/team/app", reg.host());
    std::fs::write(
        &file,
        oneshot::object("team", "app", &url, "v1", "5000000000000000h"),
    )
    .unwrap();
    let run = oneshot::run(&file, &dir.path().join("s"));
    assert_eq!(run.code, 1, "{}", run.stderr);
    let ready = run.condition("Ready");
    assert_eq!(ready["reason"], "InvalidSpec", "{ready}");
    assert!(
        ready["message"].as_str().unwrap().contains(
            "spec.interval: invalid duration '5000000000000000h': longer than the maximum"
        ),
        "{ready}"
    );
    // The largest value Go accepts still works.
    std::fs::write(
        &file,
        oneshot::object("team", "app", &url, "v1", "2562047h47m16.854775807s"),
    )
    .unwrap();
    let run = oneshot::run(&file, &dir.path().join("s"));
    assert_eq!(run.code, 0, "{}", run.stderr);

    let flag = Command::new(oneshot::bin())
        .args([
            "controller",
            "--artifact-retention-ttl",
            "5000000000000000h",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&flag.stderr);
    assert_eq!(flag.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("longer than the maximum"), "{stderr}");
}
