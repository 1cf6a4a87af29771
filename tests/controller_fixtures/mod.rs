//! Mock Kubernetes API server for the controller tests, in the style of controller-rs
//! `src/fixtures.rs`: a [`Scenario`] lists the API requests one call of the controller
//! must make, in order; the verifier answers them, asserting method, path, query and
//! (where it is fixed) body, waits at most 1 s for each, and fails on any request beyond
//! the scenario. Also: object builders (`repo(..).with_tag(..)`) and [`Env`], the
//! controller context wired to a REAL registry (`support`), a temp store, the cosign
//! verifier and `KubeSecrets` (Secret reads go through the mock too). Lives beside the
//! integration tests because the registry harness does; it imports no test file.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod env;
mod objects;
mod scenario;

use std::future::Future;
use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::Body;
use kube::Client;
use serde_json::{json, Value};

pub use env::{Env, ReconcileResult};
pub use objects::{condition, docker_secret_data, last, only, repo, RepoExt};
use scenario::Step;
pub use scenario::{Ea, EventCall, Expect, Scenario, Shown};

/// Namespace of every test object.
pub const NS: &str = "team";
/// uid of every test object (the ExternalArtifact's ownerReference must carry it).
pub const UID: &str = "6f1c2a9e-0000-4000-8000-0000000000aa";
/// Advertised storage address written into artifact URLs.
pub const ADV_ADDR: &str = "ocisource.test:9090";
/// How long the mock waits for each expected request.
const STEP_TIMEOUT: Duration = Duration::from_secs(1);

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
pub(crate) type Reply = Box<dyn FnOnce(&Value) -> (u16, Value) + Send>;

/// One request as the mock API server received it.
#[derive(Clone, Debug)]
pub struct Call {
    /// HTTP method.
    pub method: Method,
    /// Path without query.
    pub path: String,
    /// Raw query string ("" when none).
    pub query: String,
    /// JSON body (`Null` when empty).
    pub body: Value,
    /// What the mock answered (for a status patch: the object after the merge patch).
    pub reply: Value,
}

/// The (group, resource[/subresource], verb) a request needs, from its method and path:
/// `/api/v1/namespaces/N/R[/name[/sub]]` or `/apis/G/V/namespaces/N/R[/name[/sub]]`.
pub fn required_grant(method: &Method, path: &str, query: &str) -> (String, String, String) {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _v, rest @ ..] => (String::new(), rest.to_vec()),
        ["apis", g, _v, rest @ ..] => ((*g).to_string(), rest.to_vec()),
        _ => panic!("not a Kubernetes API path: {path}"),
    };
    let rest = match rest.as_slice() {
        ["namespaces", _ns, r @ ..] => r.to_vec(),
        r => r.to_vec(),
    };
    let (resource, named) = match rest.as_slice() {
        [r] => ((*r).to_string(), false),
        [r, _name] => ((*r).to_string(), true),
        [r, _name, sub] => (format!("{r}/{sub}"), true),
        other => panic!("unexpected API path shape {other:?} in {path}"),
    };
    let verb = match (method.as_str(), named) {
        ("GET", true) => "get",
        ("GET", false) if query.contains("watch=true") => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PATCH", _) => "patch",
        ("PUT", _) => "update",
        ("DELETE", _) => "delete",
        (m, _) => panic!("unexpected method {m} on {path}"),
    };
    (group, resource, verb.to_string())
}

/// Fails the test when the controller calls an API its Role (`api::rbac::RULES`, which the
/// chart grants exactly) does not grant.
fn assert_granted(call: &Call) {
    let (group, resource, verb) = required_grant(&call.method, &call.path, &call.query);
    let granted = ocisource::api::rbac::RULES.iter().any(|r| {
        r.group == group
            && r.resources.contains(&resource.as_str())
            && r.verbs.contains(&verb.as_str())
    });
    assert!(
        granted,
        "the controller called {} {} needing '{verb}' on '{resource}' in group '{group}', which api::rbac::RULES (and so the chart's Role) does not grant",
        call.method, call.path
    );
}

/// The path of an OCIRepository (`sub` = "" or "/status").
pub fn repo_path(name: &str, sub: &str) -> String {
    format!("/apis/ocisource.dev/v1beta1/namespaces/{NS}/ocirepositories/{name}{sub}")
}

/// The path of an ExternalArtifact (`sub` = "" or "/status").
pub fn ea_path(name: &str, sub: &str) -> String {
    format!("/apis/source.toolkit.fluxcd.io/v1/namespaces/{NS}/externalartifacts/{name}{sub}")
}

/// The events collection of the test namespace.
pub fn events_path() -> String {
    format!("/apis/events.k8s.io/v1/namespaces/{NS}/events")
}

/// A `meta/v1` Status error body.
pub fn status_error(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("mock: {reason}"), "reason": reason, "code": code})
}

fn query_pairs(query: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    v.sort();
    v
}

async fn serve(
    mut handle: Handle,
    steps: Vec<Step>,
    done: tokio::sync::oneshot::Receiver<()>,
) -> (Handle, Vec<Call>) {
    let mut calls = Vec::new();
    for (i, s) in steps.into_iter().enumerate() {
        let what = format!("request #{i} ({} {})", s.method, s.path);
        let (request, send) = tokio::time::timeout(STEP_TIMEOUT, handle.next_request())
            .await
            .unwrap_or_else(|_| {
                panic!("missing {what}: not made within 1 s; made so far: {calls:#?}")
            })
            .unwrap_or_else(|| panic!("the client was dropped before {what}"));
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let query = request.uri().query().unwrap_or_default().to_string();
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        let mut call = Call {
            method,
            path,
            query,
            body,
            reply: Value::Null,
        };
        assert_granted(&call);
        assert_eq!(call.method, s.method, "{what}: got {call:#?}");
        assert_eq!(call.path, s.path, "{what}: got {call:#?}");
        let want: Vec<(String, String)> = s
            .query
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        assert_eq!(query_pairs(&call.query), want, "{what}: query of {call:#?}");
        if let Some(b) = &s.body {
            assert_eq!(&call.body, b, "{what}: body");
        }
        let (code, reply) = (s.reply)(&call.body);
        call.reply = reply.clone();
        send.send_response(
            Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap(),
        );
        calls.push(call);
    }
    // Every expected request was made: anything more before the caller finishes is a bug.
    tokio::select! {
        extra = handle.next_request() => {
            if let Some((request, _)) = extra {
                panic!("unexpected request {} {} after {calls:#?}", request.method(), request.uri());
            }
        }
        _ = done => {}
    }
    (handle, calls)
}

/// The test side of the mock API server.
pub struct ApiServerVerifier {
    handle: Option<Handle>,
}

/// A kube `Client` whose every request is answered by the returned verifier.
pub fn mock_client() -> (Client, ApiServerVerifier) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (
        Client::new(service, NS),
        ApiServerVerifier {
            handle: Some(handle),
        },
    )
}

impl ApiServerVerifier {
    /// Runs `fut` (the code under test) while answering `scenario`; returns its output and
    /// the requests made. Panics on a missing, wrong or extra request.
    pub async fn run<F: Future>(&mut self, scenario: Scenario, fut: F) -> (F::Output, Vec<Call>) {
        let handle = self.handle.take().expect("verifier busy");
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let verifier = tokio::spawn(serve(handle, scenario.steps(), done_rx));
        let out = fut.await;
        let _ = done_tx.send(());
        let (handle, calls) = match verifier.await {
            Ok(r) => r,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        };
        self.handle = Some(handle);
        (out, calls)
    }
}
