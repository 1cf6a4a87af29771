//! The controller's Kubernetes I/O through `controller::reconcile_object` with a mock API
//! server (tower-test) and a REAL registry, for what a real API server cannot be made to
//! do on demand or what needs every API call counted: the exact calls of an unchanged
//! digest (no blob fetched), a registry auth failure with the Secret read through the API,
//! a missing ExternalArtifact CRD, and null-filled status patches. First artifact, moved
//! tags, semver upgrades, requestedAt and leader election run on the real API server
//! (`tests/cluster_*.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod controller_fixtures;
mod support;

use http::Method;
use kube::runtime::controller::Action;
use serde_json::Value;

use controller_fixtures::{
    condition, docker_secret_data, ea_path, events_path, last, only, repo, repo_path, Call, Ea,
    Env, EventCall, Expect, RepoExt, Shown,
};
use support::{sha256, tar_gz, Pushed, RegistryOpts};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

async fn push(env: &Env, repo: &str, tag: &str, file: &str, content: &str) -> Pushed {
    env.reg
        .push_artifact(
            repo,
            tag,
            &[(LAYER, tar_gz(&[(file, content.as_bytes())]))],
            &[],
        )
        .await
}

/// A new object's reconcile: Reconciling is shown first, then the final status.
fn new_object(events: &[EventCall]) -> Expect {
    Expect::events(events).showing(&[Shown::Status])
}

fn status_patch<'a>(calls: &'a [Call], name: &str) -> &'a Call {
    last(calls, Method::PATCH, &repo_path(name, "/status"))
}

fn status_of<'a>(calls: &'a [Call], name: &str) -> &'a Value {
    &status_patch(calls, name).body["status"]
}

fn ready(status: &Value) -> (&str, &str) {
    let c = condition(status, "Ready");
    (c["status"].as_str().unwrap(), c["reason"].as_str().unwrap())
}

/// The bytes stored for `status.artifact` hash to its digest.
fn assert_stored(env: &Env, status: &Value) {
    let path = status["artifact"]["path"].as_str().unwrap();
    let bytes = std::fs::read(env.dir.path().join(path)).unwrap();
    assert_eq!(status["artifact"]["digest"], sha256(&bytes));
}

fn blob_gets(env: &Env, since: usize) -> Vec<String> {
    env.reg.request_log()[since..]
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/blobs/"))
        .map(|r| r.path.clone())
        .collect()
}

#[tokio::test]
async fn unchanged_digest_costs_one_manifest_head_and_no_write() {
    let mut env = Env::new(RegistryOpts::plain());
    push(&env, "team/app", "v1", "a.txt", "a").await;
    let obj = repo("app", &env.url("team/app")).with_tag("v1");
    let (first, calls) = env
        .reconcile_as(&obj, new_object(&[EventCall::Create]))
        .await;
    first.unwrap();
    let obj = obj.with_status_of(status_patch(&calls, "app"));
    let stored = status_of(&calls, "app").clone();

    assert_eq!(ready(&stored), ("True", "Succeeded"));

    let before = env.reg.request_log().len();
    // Nothing changed: no status patch, no event, no ExternalArtifact write (the mock
    // API server fails the test on any request it was not told to expect).
    let (second, calls) = env.reconcile_as(&obj, Expect::unchanged()).await;
    second.unwrap();
    assert!(calls.is_empty(), "{calls:#?}");

    let log = env.reg.request_log()[before..].to_vec();
    assert!(
        blob_gets(&env, before).is_empty(),
        "no blob may be fetched: {log:?}"
    );
    let manifests: Vec<_> = log
        .iter()
        .filter(|r| r.path.contains("/manifests/") && r.status != 401)
        .collect();
    assert_eq!(manifests.len(), 1, "{log:?}");
    assert_eq!(manifests[0].method, "HEAD", "{log:?}");
}

#[tokio::test]
async fn auth_failure_reports_authentication_failed_and_keeps_the_last_artifact() {
    let mut env = Env::new(RegistryOpts::plain().with_basic_auth("ci", "s3cret"));
    push(&env, "team/app", "v1", "a.txt", "a").await;
    let host = env.reg.host();
    let obj = repo("app", &env.url("team/app"))
        .with_tag("v1")
        .with_secret_ref("creds");
    let good = new_object(&[EventCall::Create])
        .with_secret("creds", docker_secret_data(&host, "ci", "s3cret"));
    let (_, calls) = env.reconcile_as(&obj, good).await;
    let stored = status_of(&calls, "app")["artifact"].clone();
    assert_eq!(ready(status_of(&calls, "app")), ("True", "Succeeded"));
    let obj = obj.with_status_of(status_patch(&calls, "app"));

    let bad = Expect::events(&[EventCall::Create])
        .with_secret("creds", docker_secret_data(&host, "ci", "wrong"));
    let (action, calls) = env.reconcile_as(&obj, bad).await;
    let action = action.unwrap();
    let first_retry = std::time::Duration::from_millis(750);
    assert_eq!(
        action,
        Action::requeue(first_retry),
        "an auth failure is retried after Flux's --min-retry-delay"
    );
    let status = status_of(&calls, "app");
    assert_eq!(ready(status), ("False", "AuthenticationFailed"));
    let fetch = condition(status, "FetchFailed");
    assert_eq!(fetch["status"], "True");
    assert_eq!(fetch["reason"], "AuthenticationFailed");
    assert!(
        !fetch["message"].as_str().unwrap().contains("wrong"),
        "no credential in messages: {fetch:#}"
    );
    assert_eq!(
        status["artifact"], stored,
        "the last artifact stays in status"
    );
    assert_stored(&env, status);
    let event = &only(&calls, Method::POST, &events_path()).body;
    assert_eq!(
        (event["type"].as_str(), event["reason"].as_str()),
        (Some("Warning"), Some("AuthenticationFailed"))
    );
    let ea_status = &only(&calls, Method::PATCH, &ea_path("app", "/status")).body["status"];
    assert_eq!(ea_status["artifact"], stored);
    assert_eq!(ready(ea_status), ("False", "FetchFailed"));
}

#[tokio::test]
async fn missing_external_artifact_crd_does_not_fail_the_reconcile() {
    let mut env = Env::new(RegistryOpts::plain());
    push(&env, "team/app", "v1", "a.txt", "a").await;
    let obj = repo("app", &env.url("team/app")).with_tag("v1");
    let expect = new_object(&[EventCall::Create]).with_ea(Ea::CrdMissing);
    let (action, calls) = env.reconcile_as(&obj, expect).await;
    assert_ne!(action.unwrap(), Action::await_change());
    assert_eq!(ready(status_of(&calls, "app")), ("True", "Succeeded"));
    assert!(!calls.iter().any(|c| c.path == ea_path("app", "/status")));
}

/// The log lines written while `fut` runs on this thread.
async fn logged<F: std::future::Future>(fut: F) -> (F::Output, String) {
    #[derive(Clone, Default)]
    struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let out = fut.await;
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    (out, text)
}

#[tokio::test]
async fn a_missing_external_artifact_crd_is_said_once_per_outage() {
    const SAID: &str = "ExternalArtifact API (source.toolkit.fluxcd.io/v1) is not installed";
    let mut env = Env::new(RegistryOpts::plain());
    push(&env, "team/app", "v1", "a.txt", "a").await;
    let obj = repo("app", &env.url("team/app")).with_tag("v1");
    let first = new_object(&[EventCall::Create]).with_ea(Ea::CrdMissing);
    let ((_, calls), log) = logged(env.reconcile_as(&obj, first)).await;
    assert_eq!(log.matches(SAID).count(), 1, "{log}");
    assert!(log.contains("Install Flux 2.7+"), "{log}");
    let obj = obj.with_status_of(status_patch(&calls, "app"));
    // The status is unchanged (no patch); a failed publication is tried again.
    let missing = || Expect::unchanged().with_ea(Ea::CrdMissing);
    let ((_, _), log) = logged(env.reconcile_as(&obj, missing())).await;
    assert_eq!(log.matches(SAID).count(), 0, "said again: {log}");

    // The CRD gets installed: publishing resumes; removed again, it is said again (once
    // the unchanged ExternalArtifact is due again, as after REPUBLISH_AFTER).
    let published = Expect::unchanged().with_ea(Ea::Published);
    let ((_, calls), _) = logged(env.reconcile_as(&obj, published)).await;
    assert!(calls.iter().any(|c| c.path == ea_path("app", "/status")));
    let ((_, calls), _) = logged(env.reconcile_as(&obj, Expect::unchanged())).await;
    assert!(calls.is_empty(), "published once: {calls:#?}");
    env.kctx
        .published
        .forget(obj.metadata.uid.as_deref().unwrap_or_default());
    let ((_, _), log) = logged(env.reconcile_as(&obj, missing())).await;
    assert_eq!(log.matches(SAID).count(), 1, "{log}");
}

#[tokio::test]
async fn removing_spec_ignore_clears_observed_ignore_so_the_next_reconcile_is_a_no_op() {
    let mut env = Env::new(RegistryOpts::plain());
    push(&env, "team/app", "v1", "a.txt", "a").await;
    let obj = repo("app", &env.url("team/app"))
        .with_tag("v1")
        .with_ignore(Some("*.md"));
    let (_, calls) = env
        .reconcile_as(&obj, new_object(&[EventCall::Create]))
        .await;
    let obj = obj.with_status_of(status_patch(&calls, "app"));
    assert_eq!(
        obj.status.as_ref().unwrap().observed_ignore.as_deref(),
        Some("*.md")
    );

    // The user removes spec.ignore: the artifact is re-packaged (same content, no event);
    // meanwhile the stored artifact reads outdated and the ExternalArtifact not Ready.
    let obj = obj.with_ignore(None);
    let outdated = Expect::events(&[]).showing(&[Shown::StatusAndEa]);
    let (_, calls) = env.reconcile_as(&obj, outdated).await;
    let shown = &calls[0].body["status"];
    assert_eq!(
        condition(shown, "ArtifactOutdated")["reason"],
        "NewRevision"
    );
    assert_eq!(ready(shown), ("Unknown", "Progressing"));
    let ea_shown = &calls[2].body["status"];
    assert_eq!(ready(ea_shown), ("Unknown", "Progressing"));
    assert_eq!(condition(ea_shown, "Ready")["observedGeneration"], 1);
    let obj = obj.with_status_of(status_patch(&calls, "app"));
    assert_eq!(
        obj.status.as_ref().unwrap().observed_ignore,
        None,
        "the status patch must delete observedIgnore: {:#}",
        status_patch(&calls, "app").body
    );

    // From now on an unchanged digest costs no blob download (and no write).
    assert_eq!(
        ready(&serde_json::to_value(&obj.status).unwrap()),
        ("True", "Succeeded")
    );
    let before = env.reg.request_log().len();
    let (_, calls) = env.reconcile_as(&obj, Expect::unchanged()).await;
    assert!(calls.is_empty(), "{calls:#?}");
    assert!(
        blob_gets(&env, before).is_empty(),
        "{:?}",
        env.reg.request_log()
    );
}
