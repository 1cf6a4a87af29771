//! The API server goes away in the middle of a run (REAL kube-apiserver, stopped and
//! started again by `hack/cluster.sh`; etcd keeps the data): the controller keeps serving
//! the last artifact, does not exit, and catches up when the API is back. Its own test
//! binary, so no other test shares the outage.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use support::cluster::{oci_repository_yaml, ready_now, Cluster, Env};
use support::tar_gz;

const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const OCIREPO: &str = "ocirepositories.ocisource.dev";
const WAIT: Duration = Duration::from_secs(120);

fn cluster_sh(cluster: &Cluster, what: &str) {
    let out = Command::new("bash")
        .arg(support::cluster::repo_root().join("hack/cluster.sh"))
        .arg(what)
        .env("CLUSTER_DIR", &cluster.dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hack/cluster.sh {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn api_server_restart_keeps_serving_and_catches_up() {
    let Some(mut env) = Env::start("restart", &json!({})) else {
        return;
    };
    let (cluster, registry, ns) = (env.cluster.clone(), &env.registry, env.ns.name.clone());
    let ns = &ns;
    let c = &mut env.controller;
    registry
        .push_artifact("app/r", "v1", &[(FLUX_LAYER, tar_gz(&[("a", b"1")]))], &[])
        .await;
    let url = format!("oci://{}/app/r", registry.host());
    cluster.apply(&oci_repository_yaml(ns, "r", &url, "v1"));
    let obj = cluster.wait_for(OCIREPO, ns, "r", WAIT, "Ready", ready_now);
    let artifact_url = obj["status"]["artifact"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    let digest = obj["status"]["artifact"]["digest"]
        .as_str()
        .unwrap()
        .to_string();

    cluster_sh(&cluster, "stop-apiserver");
    let restarted = scopeguard(&cluster);
    // Longer than the interval, so reconciles and watches hit the outage.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            c.running(),
            "the controller exited while the API server was down:\n{}",
            c.log_text()
        );
        let body = c
            .fetch(&artifact_url)
            .unwrap_or_else(|e| panic!("artifact not served during the outage: {e}"));
        assert_eq!(support::sha256(&body), digest);
    }
    // A new tag while the API is down: the controller must pick it up once it is back.
    let v2 = registry
        .push_artifact("app/r", "v1", &[(FLUX_LAYER, tar_gz(&[("a", b"2")]))], &[])
        .await;
    drop(restarted);
    let obj = cluster.wait_for(OCIREPO, ns, "r", WAIT, "caught up after the outage", |o| {
        ready_now(o) && o["status"]["artifact"]["revision"] == format!("v1@{}", v2.manifest_digest)
    });
    assert!(c.running(), "{}", c.log_text());
    let body = c
        .fetch(obj["status"]["artifact"]["url"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        support::sha256(&body),
        obj["status"]["artifact"]["digest"].as_str().unwrap()
    );
}

/// Starts the API server again when dropped, even if the test failed halfway.
struct Restart<'a>(&'a Cluster);

impl Drop for Restart<'_> {
    fn drop(&mut self) {
        cluster_sh(self.0, "start-apiserver");
    }
}

fn scopeguard(cluster: &Cluster) -> Restart<'_> {
    Restart(cluster)
}
