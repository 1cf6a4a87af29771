//! Two replicas with the SAME pod name (a host-network pod, a StatefulSet pod recreated
//! while the old one still runs, two processes on one host) on the real API server: the
//! Lease identity is the pod name plus a random suffix, so they never both hold the Lease
//! (never both ready and reconciling), and the second takes over when the first dies.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::cluster::{Cluster, Controller};

const WAIT: Duration = Duration::from_secs(90);
const LEASE: &str = "ocisource-leader-election";

#[tokio::test(flavor = "multi_thread")]
async fn replicas_with_one_pod_name_never_lead_together() {
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    let values = json!({"replicas": 2});
    let ns = cluster.namespace("samename", &values);
    let ns = &ns.name;
    let work = tempfile::tempdir().unwrap();
    let storage = work.path().join("data");
    let same = [("POD_NAME", "ocisource-0")];
    // Told apart only by their log files; both run as pod "ocisource-0".
    let mut first = Controller::start_with_env(&cluster, ns, &values, &storage, "a", None, &same);
    let mut second = Controller::start_with_env(&cluster, ns, &values, &storage, "b", None, &same);

    let lease = cluster.wait_for("lease", ns, LEASE, WAIT, "a holder", |l| {
        l["spec"]["holderIdentity"].is_string()
    });
    let holder = lease["spec"]["holderIdentity"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(holder.starts_with("ocisource-0_"), "{holder}");

    let ready = |c: &Controller| c.fetch(&format!("http://{}/readyz", c.health_addr)).is_ok();
    // Wait for the holder to be ready, then watch both for a while: never both ready.
    let deadline = Instant::now() + WAIT;
    while !(ready(&first) || ready(&second)) {
        assert!(Instant::now() < deadline, "no replica became ready");
        std::thread::sleep(Duration::from_millis(200));
    }
    for _ in 0..25 {
        let (a, b) = (ready(&first), ready(&second));
        assert!(
            a != b,
            "exactly one replica leads (first ready: {a}, second ready: {b})\nfirst:\n{}\nsecond:\n{}",
            first.log_text(),
            second.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The leader dies; the other, with the same pod name, takes the Lease under its own
    // identity and becomes ready.
    let (leader, follower) = if ready(&first) {
        (&mut first, &mut second)
    } else {
        (&mut second, &mut first)
    };
    leader.kill();
    let taken = cluster.wait_for("lease", ns, LEASE, WAIT, "taken over", |l| {
        l["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| h != holder)
    });
    let new_holder = taken["spec"]["holderIdentity"].as_str().unwrap();
    assert!(new_holder.starts_with("ocisource-0_"), "{new_holder}");
    let deadline = Instant::now() + WAIT;
    while !ready(follower) {
        assert!(
            Instant::now() < deadline,
            "the follower never became ready:\n{}",
            follower.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
