//! `--events-addr` never holds up or fails a reconcile: `controller::reconcile_object`
//! against the mock API server and a REAL registry, with the notifier pointed at a
//! receiver that takes the request and does not answer until the test lets it, and at
//! a port where nothing listens. The reconcile returns (status written, Kubernetes Event
//! created) while the post is still unanswered, which is only possible when the post
//! does not run inside it; the post arrives in Flux's format all the same. The delivery
//! to Flux's real notification-controller is `tests/cluster_notifications.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod controller_fixtures;
mod support;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

use controller_fixtures::{condition, last, repo, repo_path, EventCall, Expect, Shown, UID};
use controller_fixtures::{Ea, Env, RepoExt};
use ocisource::controller::notify::{Delivery, Notifier};
use ocisource::controller::KubeContext;
use support::{tar_gz, RegistryOpts};

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// A generous bound on what must happen, so a hang fails instead of blocking the suite.
const WAIT: Duration = Duration::from_secs(120);

/// `env` with its controller context posting events to `address`.
fn notifying(env: &mut Env, address: &str, delivery: Delivery) {
    let notifier = Notifier::start_with(address.parse().unwrap(), "ocisource", delivery).unwrap();
    env.kctx = Arc::new(KubeContext {
        client: env.kctx.client.clone(),
        core: env.kctx.core.clone(),
        external_artifact: false,
        external_artifact_missing: AtomicBool::new(false),
        notifier: Some(Arc::new(notifier)),
        published: Default::default(),
    });
}

/// A receiver that reads one whole request, reports its body, and answers 202 only when
/// `answer` fires.
async fn held_receiver() -> (String, oneshot::Receiver<Value>, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    let (body_tx, body_rx) = oneshot::channel();
    let (answer_tx, answer_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let body = loop {
            let mut buf = [0u8; 4096];
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed before a whole request");
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).to_string();
            let Some((head, body)) = text.split_once("\r\n\r\n") else {
                continue;
            };
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().unwrap())
                })
                .expect("a Content-Length");
            if body.len() >= length {
                assert!(head.starts_with("POST / "), "{head}");
                break serde_json::from_str::<Value>(&body[..length]).unwrap();
            }
        };
        body_tx.send(body).unwrap();
        let _ = answer_rx.await;
        let _ = conn
            .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
            .await;
    });
    (address, body_rx, answer_tx)
}

fn ready(env_status: &Value) -> (&str, &str) {
    let c = condition(env_status, "Ready");
    (c["status"].as_str().unwrap(), c["reason"].as_str().unwrap())
}

#[tokio::test]
async fn reconcile_finishes_while_the_post_is_unanswered() {
    let mut env = Env::new(RegistryOpts::plain());
    let pushed = env
        .reg
        .push_artifact("team/app", "v1", &[(LAYER, tar_gz(&[("a", b"a")]))], &[])
        .await;
    let (address, body, answer) = held_receiver().await;
    // A post that waits an hour for its answer: a reconcile that waited for it would hang.
    let patient = Delivery {
        timeout: Duration::from_secs(3600),
        ..Delivery::default()
    };
    notifying(&mut env, &address, patient);
    let mut obj = repo("app", &env.url("team/app")).with_tag("v1");
    obj.metadata.resource_version = Some("4711".into());
    let expect = Expect::events(&[EventCall::Create])
        .showing(&[Shown::Status])
        .with_ea(Ea::Off);
    let (result, calls) = tokio::time::timeout(WAIT, env.reconcile_as(&obj, expect))
        .await
        .expect("the reconcile waited for the unanswered post");
    result.unwrap();
    let status = &last(&calls, http::Method::PATCH, &repo_path("app", "/status")).body["status"];
    assert_eq!(ready(status), ("True", "Succeeded"));

    // The reconcile is over and the receiver has not answered: now let the post through.
    let body = tokio::time::timeout(WAIT, body)
        .await
        .expect("the event was never posted")
        .unwrap();
    answer.send(()).unwrap();
    let revision = format!("v1@{}", pushed.manifest_digest);
    assert_eq!(body["reason"], "NewArtifact");
    assert_eq!(body["severity"], "info");
    assert_eq!(
        body["involvedObject"]["apiVersion"],
        "ocisource.dev/v1beta1"
    );
    assert_eq!(body["involvedObject"]["kind"], "OCIRepository");
    assert_eq!(body["involvedObject"]["uid"], UID);
    assert_eq!(body["involvedObject"]["name"], "app");
    assert_eq!(body["involvedObject"]["resourceVersion"], "4711");
    assert_eq!(
        body["metadata"]["ocisource.dev/revision"],
        revision.as_str()
    );
    assert_eq!(
        body["metadata"]["ocisource.dev/digest"],
        status["artifact"]["digest"]
    );
}

#[tokio::test]
async fn an_unreachable_events_address_does_not_fail_the_reconcile() {
    let mut env = Env::new(RegistryOpts::plain());
    env.reg
        .push_artifact("team/app", "v1", &[(LAYER, tar_gz(&[("a", b"a")]))], &[])
        .await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    notifying(
        &mut env,
        &format!("http://127.0.0.1:{port}/"),
        Delivery::default(),
    );
    let obj = repo("app", &env.url("team/app")).with_tag("v1");
    let expect = Expect::events(&[EventCall::Create])
        .showing(&[Shown::Status])
        .with_ea(Ea::Off);
    let (result, calls) = env.reconcile_as(&obj, expect).await;
    result.unwrap();
    let status = &last(&calls, http::Method::PATCH, &repo_path("app", "/status")).body["status"];
    assert_eq!(ready(status), ("True", "Succeeded"));
}
