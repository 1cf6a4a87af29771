//! Unit tests of `cli.rs`, kept beside it so that file reads as the code alone.

use super::*;

fn controller(args: &[&str]) -> ControllerArgs {
    let cli = Cli::try_parse_from([&["ocisource", "controller"], args].concat()).unwrap();
    match cli.command {
        Command::Controller(a) => a,
        other => panic!("parsed as {other:?}"),
    }
}

#[test]
fn boolean_controller_flags_take_go_forms() {
    let a = controller(&[
        "--leader-elect",
        "--watch-all-namespaces=false",
        "--external-artifact=false",
    ]);
    assert!(a.leader_elect && !a.watch_all_namespaces && !a.external_artifact);
    let b = controller(&[
        "--leader-elect=false",
        "--no-cross-namespace-refs=true",
        "--artifact-retention-ttl=90s",
    ]);
    assert!(!b.leader_elect && b.no_cross_namespace_refs && b.external_artifact);
    assert_eq!(b.artifact_retention_ttl, std::time::Duration::from_secs(90));
    assert!(
        Cli::try_parse_from(["ocisource", "controller", "--artifact-retention-ttl=soon"]).is_err()
    );
}

#[test]
fn events_addr_is_an_http_url_and_off_by_default() {
    assert_eq!(controller(&[]).events_addr, None);
    let on = controller(&[
        "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
    ]);
    assert_eq!(
        on.events_addr.unwrap().as_str(),
        "http://notification-controller.flux-system.svc.cluster.local./"
    );
    for bad in ["notification-controller:9090", "ftp://x/"] {
        assert!(
            Cli::try_parse_from(["ocisource", "controller", "--events-addr", bad]).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn feature_gates_take_flux_forms_and_default_off() {
    assert!(!controller(&[]).feature_gates.object_level_workload_identity);
    let on = controller(&["--feature-gates=ObjectLevelWorkloadIdentity=true"]);
    assert!(on.feature_gates.object_level_workload_identity);
    let off = controller(&["--feature-gates", "ObjectLevelWorkloadIdentity=false"]);
    assert!(!off.feature_gates.object_level_workload_identity);
    let flux = controller(&["--feature-gates=CacheSecretsAndConfigMaps=true"]);
    assert_eq!(
        flux.feature_gates.inert,
        vec![(CACHE_SECRETS_AND_CONFIG_MAPS, true)]
    );
    for (bad, needle) in [
        ("ObjectLevelWorkloadIdentity=yes", "not true or false"),
        ("ObjectLevelWorkloadIdentity", "Name=true|false"),
        (
            "OptimizedGitClones=true",
            "unknown feature gate 'OptimizedGitClones'",
        ),
    ] {
        let e = Cli::try_parse_from(["ocisource", "controller", "--feature-gates", bad])
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}

#[test]
fn pull_takes_output_file_or_extract_and_extract_merges() {
    let pull = |extra: &[&str]| {
        Cli::try_parse_from([&["ocisource", "pull", "oci://r.example/app:v1"], extra].concat())
    };
    assert!(pull(&["--output-file", "-"]).is_ok());
    assert!(pull(&["--extract", "dir"]).is_ok());
    for bad in [
        &[][..],
        &["--extract", "dir", "--output-file", "a.tar.gz"],
        &["--extract", "dir", "--layer-operation", "copy"],
    ] {
        assert!(pull(bad).is_err(), "{bad:?}");
    }
}
