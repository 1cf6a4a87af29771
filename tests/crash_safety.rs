//! Crash safety of the store, with the real binary and the real registry: the one-shot
//! reconcile (`ocisource reconcile -f`) is killed with SIGKILL at random points of a pull
//! (download, merge, compression, commit, state save) at least 50 times, each time
//! switching the object to another tag so every run writes a new artifact. After every
//! kill the published artifact (named by the saved state) verifies against its digest,
//! the last good one is unchanged on disk and is served byte for byte by the artifact
//! server over the same store; after a complete rerun no temp file is left.
//!
//! The kill delays are random in [0, window], from a seed printed on failure; the window
//! starts at the length of a full run and follows the machine's speed (shorter after a
//! run that finished before its kill, longer after a kill), so about a fifth of the runs
//! finish and the kills cover every phase. Runs that finished do not count towards the 50.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use ocisource::server::{serve_artifacts, ConnectionLimits};
use support::oneshot::{self, Rng};
use support::{sha256, tar_gz, RegistryOpts, TestRegistry};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// Kills that must land in a running reconcile, and the most attempts to get them.
const KILLS: usize = 50;
const ATTEMPTS: usize = 150;
const TAGS: usize = 4;
/// Incompressible bytes per artifact: long enough that kills land inside the write.
const PAYLOAD: usize = 3 << 20;

/// The last good artifact: where, its digest, its bytes as first published.
struct Good {
    path: String,
    digest: String,
    bytes: Vec<u8>,
}

/// Checks what the saved state publishes and returns it as the new last good artifact
/// (or the old one, which must then be unchanged).
fn check_store(storage: &Path, last: Option<Good>, context: &str) -> Good {
    let (path, digest) = oneshot::published(storage, "team", "app")
        .unwrap_or_else(|| panic!("{context}: no published artifact in the saved state"));
    let bytes = std::fs::read(storage.join(&path))
        .unwrap_or_else(|e| panic!("{context}: the published artifact {path} is gone: {e}"));
    assert_eq!(
        sha256(&bytes),
        digest,
        "{context}: the published artifact {path} does not match its digest"
    );
    match last {
        Some(good) if good.path == path => {
            assert!(
                good.bytes == bytes && good.digest == digest,
                "{context}: the last good artifact {path} changed"
            );
            good
        }
        _ => Good {
            path,
            digest,
            bytes,
        },
    }
}

async fn served(addr: SocketAddr, good: &Good, context: &str) {
    let url = format!("http://{addr}/{}", good.path);
    let response = reqwest::get(&url).await.unwrap();
    assert_eq!(response.status(), 200, "{context}: {url}");
    let body = response.bytes().await.unwrap();
    assert!(
        body[..] == good.bytes[..],
        "{context}: {url} served other bytes than the last good artifact"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_points_never_loses_or_corrupts_the_published_artifact() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let mut data = Rng::new(0x5eed);
    // Artifact file name (the manifest digest's hex) → tag index.
    let mut tag_of = std::collections::HashMap::new();
    for i in 0..TAGS {
        let layers = [
            (LAYER, tar_gz(&[("data.bin", &data.bytes(PAYLOAD)[..])])),
            (LAYER, tar_gz(&[(&format!("tag-{i}.txt")[..], b"x")])),
        ];
        let pushed = reg
            .push_artifact("team/app", &format!("v{i}"), &layers, &[])
            .await;
        let hex = pushed.manifest_digest["sha256:".len()..].to_string();
        tag_of.insert(format!("ocirepository/team/app/{hex}.tar.gz"), i);
    }
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage");
    let file = dir.path().join("app.yaml");
    let url = format!("oci://{}/team/app", reg.host());
    let write_tag = |i: usize| {
        let yaml = oneshot::object("team", "app", &url, &format!("v{}", i % TAGS), "5m");
        std::fs::write(&file, yaml).unwrap();
    };

    write_tag(0);
    let started = Instant::now();
    let first = oneshot::run(&file, &storage);
    let full_run = started.elapsed();
    assert_eq!(first.code, 0, "{}", first.stderr);
    let mut good = check_store(&storage, None, "first run");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_artifacts(
        listener,
        storage.clone(),
        ConnectionLimits::default(),
        std::future::pending(),
    ));
    served(addr, &good, "first run").await;

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = Rng::new(seed);
    let mut window = full_run.as_micros() as u64;
    let (mut kills, mut left_temps, mut finished, mut published_new) = (0, 0, 0, 0);
    for attempt in 0..ATTEMPTS {
        if kills == KILLS {
            break;
        }
        // Always another tag than the published one: every run has a new artifact to write.
        write_tag(tag_of[&good.path] + 1 + (rng.next_u64() % (TAGS as u64 - 1)) as usize);
        let delay = Duration::from_micros(rng.next_u64() % window.max(1));
        let mut child = oneshot::command(&file, &storage)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        tokio::time::sleep(delay).await;
        if child.try_wait().unwrap().is_some() {
            finished += 1;
            window = window * 17 / 20;
        } else {
            kills += 1;
            window = window * 21 / 20;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        if !oneshot::temp_files(&storage).is_empty() {
            left_temps += 1;
        }
        let context = format!("attempt {attempt} killed after {delay:?} (seed {seed})");
        let before = good.path.clone();
        good = check_store(&storage, Some(good), &context);
        if good.path != before {
            published_new += 1;
        }
        served(addr, &good, &context).await;
    }
    eprintln!(
        "{kills} kills (window at the end {window} µs, a first run took {full_run:?}): {left_temps} left temp files, \
         {published_new} published a new artifact, {finished} more runs had finished (seed {seed})"
    );
    assert_eq!(
        kills, KILLS,
        "too few runs were still running when killed (seed {seed})"
    );
    assert!(
        left_temps > 0,
        "no kill landed inside a write: the test did not test anything (seed {seed})"
    );

    // A rerun (or a start-up) removes every temp file a killed run left, and publishes.
    write_tag(tag_of[&good.path] + 1);
    let rerun = oneshot::run(&file, &storage);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    assert_eq!(
        oneshot::temp_files(&storage),
        Vec::<std::path::PathBuf>::new()
    );
    let good = check_store(&storage, Some(good), "the final rerun");
    served(addr, &good, "the final rerun").await;
    assert_eq!(
        rerun.status()["artifact"]["digest"],
        good.digest,
        "the printed status and the saved state disagree"
    );
}
