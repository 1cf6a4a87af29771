//! `ocisource controller --feature-gates` on the real binary, as a Flux source-controller
//! Deployment's arguments reach it: every gate Flux's source-controller knows starts the
//! controller (here it stops later, at the Kubernetes client, as there is no cluster), and
//! the gates without effect are named once in the start-up log with the reason; a gate
//! Flux does not know is a usage error naming it and the known ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;

use cli_common::{command, run, Out};

fn controller(gates: &str) -> Out {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("store");
    let mut cmd = command(&[
        "controller",
        "--storage-path",
        storage.to_str().unwrap(),
        "--storage-addr=127.0.0.1:0",
        "--metrics-addr=127.0.0.1:0",
        "--health-addr=127.0.0.1:0",
        &format!("--feature-gates={gates}"),
    ]);
    cmd.env("KUBECONFIG", dir.path().join("no-kubeconfig"))
        .env("HOME", dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST");
    run(cmd, None)
}

#[test]
fn flux_gates_start_the_controller_and_inert_ones_are_logged_once() {
    let out = controller("CacheSecretsAndConfigMaps=true,ObjectLevelWorkloadIdentity=true");
    assert!(
        out.stderr
            .contains("failed to configure the Kubernetes client")
            && !out.stderr.contains("--feature-gates"),
        "the gates are accepted; the run stops at the missing cluster: {}",
        out.stderr
    );
    let logged: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("no effect in ocisource"))
        .collect();
    assert_eq!(logged.len(), 1, "{}", out.stderr);
    assert!(
        logged[0].contains("WARN")
            && logged[0].contains("CacheSecretsAndConfigMaps=true")
            && logged[0].contains("keeps no cache")
            && !logged[0].contains("ObjectLevelWorkloadIdentity"),
        "{}",
        logged[0]
    );
    let acting = controller("ObjectLevelWorkloadIdentity=true");
    assert!(
        !acting.stderr.contains("no effect in ocisource"),
        "{}",
        acting.stderr
    );
}

#[test]
fn a_gate_flux_does_not_know_or_a_malformed_value_is_a_usage_error() {
    let unknown = controller("OptimizedGitClones=true");
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(
        unknown
            .stderr
            .contains("unknown feature gate 'OptimizedGitClones'")
            && unknown
                .stderr
                .contains("CacheSecretsAndConfigMaps, ObjectLevelWorkloadIdentity"),
        "{}",
        unknown.stderr
    );
    let malformed = controller("CacheSecretsAndConfigMaps=yes");
    assert_eq!(malformed.code, 2, "{}", malformed.stderr);
    assert!(
        malformed
            .stderr
            .contains("'yes' for CacheSecretsAndConfigMaps is not true or false"),
        "{}",
        malformed.stderr
    );
}
