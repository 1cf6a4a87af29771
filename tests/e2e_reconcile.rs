//! End to end through the one-shot mode (`ocisource reconcile -f`) against the real
//! registry: tag, digest, semver with a filter, multi-layer, the unchanged-digest no-op
//! (checked in the registry's own access log), a consumer fetching status.artifact.url,
//! spec.ignore and spec.timeout. Logins and TLS: `e2e_reconcile_auth.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use support::oneshot_parity::{condition, object, reconcile, status, write};
use support::{sha256, tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn entries(tar_gz_path: &Path) -> Vec<String> {
    let out = Command::new("tar")
        .arg("-tzf")
        .arg(tar_gz_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "GNU tar could not list {}",
        tar_gz_path.display()
    );
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_end_matches('/').to_string())
        .collect();
    v.sort();
    v
}

fn file_of(storage: &Path, status: &serde_json::Value) -> std::path::PathBuf {
    storage.join(status["artifact"]["path"].as_str().unwrap())
}

#[tokio::test]
async fn tag_ref_stores_an_artifact_and_a_second_run_costs_one_head() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let pushed = reg
        .push_artifact(
            "team/app",
            "v1",
            &[(LAYER, tar_gz(&[("app/deploy.yaml", b"replicas: 1\n")]))],
            &[("org.opencontainers.image.source", "https://example.com/app")],
        )
        .await;
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    let url = format!("oci://{}/team/app", reg.host());
    let f = write(
        dir.path(),
        "o.yaml",
        &object("app", &url, "    tag: v1", "  insecure: true"),
    );

    let first = reconcile(&[&f], &storage, &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let st = status(&first);
    assert_eq!(
        st["artifact"]["revision"],
        format!("v1@{}", pushed.manifest_digest)
    );
    let hex = &pushed.manifest_digest["sha256:".len()..];
    assert_eq!(
        st["artifact"]["path"],
        format!("ocirepository/team/app/{hex}.tar.gz")
    );
    assert_eq!(
        st["artifact"]["metadata"]["org.opencontainers.image.source"],
        "https://example.com/app"
    );
    let ready = condition(&st, "Ready");
    assert_eq!(ready["status"], "True");
    assert_eq!(ready["reason"], "Succeeded");
    assert_eq!(
        ready["message"],
        format!("stored artifact for digest 'v1@{}'", pushed.manifest_digest)
    );
    assert_eq!(ready["observedGeneration"], 1);
    let bytes = std::fs::read(file_of(&storage, &st)).unwrap();
    assert_eq!(st["artifact"]["digest"], sha256(&bytes));
    assert_eq!(st["artifact"]["size"], bytes.len());
    assert!(first.stderr.contains("NewArtifact"), "{}", first.stderr);

    let state = storage.join(".state/team/app.json");
    let saved = std::fs::metadata(&state).unwrap();
    let before = reg.request_log().len();
    let second = reconcile(&[&f], &storage, &["--stats"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    // Nothing changed, so nothing is written either: the saved state is the same file.
    let after = std::fs::metadata(&state).unwrap();
    assert_eq!(
        (after.ino(), after.modified().unwrap()),
        (saved.ino(), saved.modified().unwrap()),
        "a no-op run must not rewrite {}",
        state.display()
    );
    let log: Vec<_> = reg.request_log().into_iter().skip(before).collect();
    let real: Vec<_> = log
        .iter()
        .filter(|r| r.path != "/v2/" && r.status != 401)
        .collect();
    assert_eq!(
        real.len(),
        1,
        "an unchanged digest must cost one request: {log:?}"
    );
    assert_eq!(real[0].method, "HEAD");
    assert!(
        real[0].path.starts_with("/v2/team/app/manifests/v1"),
        "{log:?}"
    );
    assert!(
        !log.iter().any(|r| r.path.contains("/blobs/")),
        "no blob may be fetched: {log:?}"
    );
    assert_eq!(status(&second)["artifact"], st["artifact"]);
}

#[tokio::test]
async fn moved_tag_semver_filter_and_digest_refs() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    for (tag, body) in [
        ("1.0.0", "one"),
        ("1.1.0", "one-one"),
        ("1.2.0-rc.1", "rc"),
        ("2.0.0", "two"),
        ("1.3.0-dev", "dev"),
    ] {
        reg.push_artifact(
            "team/cfg",
            tag,
            &[(LAYER, tar_gz(&[("v.txt", body.as_bytes())]))],
            &[],
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let url = format!("oci://{}/team/cfg", reg.host());
    let semver = write(
        dir.path(),
        "semver.yaml",
        &object("semver", &url, "    semver: \"1.x\"", "  insecure: true"),
    );
    let filtered = write(
        dir.path(),
        "filtered.yaml",
        &object(
            "filtered",
            &url,
            "    semver: \">=1.0.0-0\"\n    semverFilter: \".*-dev$\"",
            "  insecure: true",
        ),
    );
    let run = reconcile(&[&semver, &filtered], &storage, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let list: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let v = &list["items"];
    assert!(
        v[0]["status"]["artifact"]["revision"]
            .as_str()
            .unwrap()
            .starts_with("1.1.0@sha256:"),
        "{}",
        v[0]["status"]
    );
    assert!(
        v[1]["status"]["artifact"]["revision"]
            .as_str()
            .unwrap()
            .starts_with("1.3.0-dev@sha256:"),
        "{}",
        v[1]["status"]
    );

    // A semver upgrade: 1.4.0 appears; the next run moves to it.
    let newer = reg
        .push_artifact(
            "team/cfg",
            "1.4.0",
            &[(LAYER, tar_gz(&[("v.txt", b"one-four")]))],
            &[],
        )
        .await;
    let run = reconcile(&[&semver], &storage, &[]);
    let st = status(&run);
    assert_eq!(
        st["artifact"]["revision"],
        format!("1.4.0@{}", newer.manifest_digest)
    );
    let out = Command::new("tar")
        .arg("-xzOf")
        .arg(file_of(&storage, &st))
        .arg("v.txt")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"one-four");

    // Digest ref: the revision is the bare digest.
    let digest = write(
        dir.path(),
        "digest.yaml",
        &object(
            "pinned",
            &url,
            &format!("    digest: {}", newer.manifest_digest),
            "  insecure: true",
        ),
    );
    let st = status(&reconcile(&[&digest], &storage, &[]));
    assert_eq!(st["artifact"]["revision"], newer.manifest_digest);
}

#[tokio::test]
async fn multi_layer_artifact_merges_with_overrides_and_whiteouts() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let base = tar_gz(&[
        ("apps/a.yaml", b"a1"),
        ("apps/b.yaml", b"b1"),
        ("apps/old.yaml", b"old"),
    ]);
    let over = tar_gz(&[("apps/a.yaml", b"a2"), ("extra/c.yaml", b"c")]);
    let wh = tar_gz(&[("apps/.wh.old.yaml", b"")]);
    reg.push_artifact(
        "team/multi",
        "v1",
        &[(LAYER, base), (LAYER, over), (LAYER, wh)],
        &[],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let f = write(
        dir.path(),
        "o.yaml",
        &object(
            "multi",
            &format!("oci://{}/team/multi", reg.host()),
            "    tag: v1",
            "  insecure: true",
        ),
    );
    let run = reconcile(&[&f], &storage, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let path = file_of(&storage, &status(&run));
    assert_eq!(
        entries(&path),
        vec![
            "apps",
            "apps/a.yaml",
            "apps/b.yaml",
            "extra",
            "extra/c.yaml"
        ]
    );
    let out = Command::new("tar")
        .arg("-xzOf")
        .arg(&path)
        .arg("apps/a.yaml")
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"a2");
}

#[tokio::test]
async fn invalid_url_stalls_with_a_field_named_message() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "o.yaml",
        &object(
            "bad",
            "oci://127.0.0.1:1/team/app:v1",
            "    tag: v1",
            "  insecure: true",
        ),
    );
    let run = reconcile(&[&f], &dir.path().join("s"), &[]);
    assert_eq!(run.code, 1);
    let st = status(&run);
    assert_eq!(condition(&st, "Stalled")["status"], "True");
    let ready = condition(&st, "Ready");
    assert_eq!(ready["status"], "False");
    assert!(
        ready["message"].as_str().unwrap().contains("spec.url"),
        "{ready}"
    );
}

#[tokio::test]
async fn consumer_fetches_the_artifact_url_from_the_server() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    reg.push_artifact(
        "team/srv",
        "v1",
        &[(
            LAYER,
            tar_gz(&[("k/kustomization.yaml", b"resources: []\n")]),
        )],
        &[],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    std::fs::create_dir_all(&storage).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ocisource::server::serve_artifacts(
        listener,
        storage.clone(),
        ocisource::server::ConnectionLimits::default(),
        std::future::pending(),
    ));

    let f = write(
        dir.path(),
        "o.yaml",
        &object(
            "srv",
            &format!("oci://{}/team/srv", reg.host()),
            "    tag: v1",
            "  insecure: true",
        ),
    );
    let run = reconcile(&[&f], &storage, &["--storage-adv-addr", &addr.to_string()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let st = status(&run);
    let url = st["artifact"]["url"].as_str().unwrap();
    // status.url is Flux's: the object's latest.tar.gz, served as the same bytes.
    assert_eq!(
        st["url"],
        format!("http://{addr}/ocirepository/team/srv/latest.tar.gz")
    );
    let latest = reqwest::get(st["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(latest.status(), 200);
    let latest = latest.bytes().await.unwrap();
    let body = reqwest::get(url).await.unwrap();
    assert_eq!(body.status(), 200);
    let bytes = body.bytes().await.unwrap();
    assert_eq!(
        st["artifact"]["digest"],
        sha256(&bytes),
        "served bytes must match status.artifact.digest"
    );
    assert_eq!(latest, bytes, "status.url serves the current artifact");
    let fetched = dir.path().join("fetched.tar.gz");
    std::fs::write(&fetched, &bytes).unwrap();
    assert_eq!(entries(&fetched), vec!["k", "k/kustomization.yaml"]);
}

#[tokio::test]
async fn changing_spec_ignore_repackages_the_same_revision() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    reg.push_artifact(
        "team/ign",
        "v1",
        &[(LAYER, tar_gz(&[("app.yaml", b"a"), ("notes.md", b"n")]))],
        &[],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let url = format!("oci://{}/team/ign", reg.host());
    let plain = write(
        dir.path(),
        "o.yaml",
        &object("ign", &url, "    tag: v1", "  insecure: true"),
    );
    let first = status(&reconcile(&[&plain], &storage, &[]));
    assert_eq!(
        entries(&file_of(&storage, &first)),
        vec!["app.yaml", "notes.md"]
    );

    let before = reg.request_log().len();
    let ignoring = write(
        dir.path(),
        "o.yaml",
        &object(
            "ign",
            &url,
            "    tag: v1",
            "  insecure: true\n  ignore: \"*.md\"",
        ),
    );
    let run = reconcile(&[&ignoring], &storage, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let second = status(&run);
    assert_eq!(
        second["artifact"]["revision"],
        first["artifact"]["revision"]
    );
    assert_ne!(
        second["artifact"]["digest"], first["artifact"]["digest"],
        "the new ignore rules must re-package"
    );
    assert_eq!(second["observedIgnore"], "*.md");
    assert_eq!(entries(&file_of(&storage, &second)), vec!["app.yaml"]);
    let log: Vec<_> = reg.request_log().into_iter().skip(before).collect();
    assert!(
        log.iter().any(|r| r.path.contains("/blobs/")),
        "re-packaging pulls the layer again: {log:?}"
    );
}

#[tokio::test]
async fn spec_timeout_bounds_a_hanging_registry_and_keeps_ready_false() {
    // A registry that accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < until {
            if let Ok((c, _)) = listener.accept() {
                conns.push(c);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "o.yaml",
        &object(
            "hang",
            &format!("oci://{addr}/team/app"),
            "    tag: v1",
            "  insecure: true\n  timeout: 2s",
        ),
    );
    let started = std::time::Instant::now();
    let run = reconcile(&[&f], &dir.path().join("s"), &[]);
    let took = started.elapsed();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        took < std::time::Duration::from_secs(15),
        "spec.timeout did not bound the reconcile: {took:?}"
    );
    let st = status(&run);
    let ready = condition(&st, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "OCIArtifactPullFailed");
    assert!(
        ready["message"].as_str().unwrap().contains("timeout"),
        "{ready}"
    );
    drop(held);
}
