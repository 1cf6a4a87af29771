//! Mock Kubernetes API server for the controller tests, in the style of controller-rs
//! `src/fixtures.rs`: a [`Scenario`] lists the API requests one call of the controller
//! must make, in order; the verifier answers them, asserting method, path, query and
//! (where it is fixed) body, waits at most 1 s for each, and fails on any request beyond
//! the scenario. Also: object builders (`repo(..).with_tag(..)`) and [`Env`], the
//! controller context wired to a REAL registry (`support`), a temp store, the cosign
//! verifier and `KubeSecrets` (Secret reads go through the mock too). Lives beside the
//! integration tests because the registry harness does; it imports no test file.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::Body;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::Client;
use serde_json::{json, Value};

use ocisource::api::ocirepository::{FINALIZER, RECONCILE_REQUESTED_AT};
use ocisource::api::{OciRepository, OciRepositoryStatus};
use ocisource::controller::secrets::KubeSecrets;
use ocisource::controller::{self, ControllerError, KubeContext};
use ocisource::reconcile::{Context, Settings};
use ocisource::registry::HttpConnector;
use ocisource::server::Metrics;
use ocisource::storage::Storage;
use ocisource::verify::CosignVerifier;

use crate::support::{RegistryOpts, TestRegistry};

/// Namespace of every test object.
pub const NS: &str = "team";
/// uid of every test object (the ExternalArtifact's ownerReference must carry it).
pub const UID: &str = "6f1c2a9e-0000-4000-8000-0000000000aa";
/// Advertised storage address written into artifact URLs.
pub const ADV_ADDR: &str = "ocisource.test:9090";
/// How long the mock waits for each expected request.
const STEP_TIMEOUT: Duration = Duration::from_secs(1);

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Reply = Box<dyn FnOnce(&Value) -> (u16, Value) + Send>;

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

/// How the ExternalArtifact API answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ea {
    /// Publishing is off: no ExternalArtifact request at all.
    Off,
    /// Server-side apply then a status patch, both accepted.
    Published,
    /// The CRD is not installed: the apply gets 404, nothing follows.
    CrdMissing,
}

/// How an event is written. Only `Create` (POST) is expected: the controller never
/// patches an earlier event into a series, whose note would be stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventCall {
    /// A new Event object: POST.
    Create,
}

/// What one reconcile (`Finalizer::Apply`) is expected to ask of the API.
#[derive(Clone, Debug)]
pub struct Expect {
    /// A Secret read first: its name and `data` (values base64), answered 200.
    pub secret: Option<(String, Value)>,
    /// Events after the status patch, in order.
    pub events: Vec<EventCall>,
    /// The ExternalArtifact requests.
    pub external_artifact: Ea,
}

impl Expect {
    /// Status patch, `events`, ExternalArtifact published.
    pub fn events(events: &[EventCall]) -> Self {
        Self {
            secret: None,
            events: events.to_vec(),
            external_artifact: Ea::Published,
        }
    }
    /// Adds a Secret read.
    pub fn with_secret(mut self, name: &str, data: Value) -> Self {
        self.secret = Some((name.into(), data));
        self
    }
    /// Sets the ExternalArtifact behaviour.
    pub fn with_ea(mut self, ea: Ea) -> Self {
        self.external_artifact = ea;
        self
    }
}

/// The API conversations the tests drive.
pub enum Scenario {
    /// An object without finalizer: ONE JSON patch adding it, nothing else.
    AddFinalizer(OciRepository),
    /// A deleting object: ONE JSON patch removing the finalizer (index 0).
    RemoveFinalizer(OciRepository),
    /// No request at all (suspended).
    NoRequests,
    /// A full reconcile of the object.
    Reconcile(OciRepository, Expect),
    /// Lease `name` does not exist: GET 404, then POST create answered 201.
    LeaseCreated(String),
    /// Lease `name` does not exist, but another replica creates it first: POST gets 409.
    LeaseCreateConflict(String),
}

struct Step {
    method: Method,
    path: String,
    query: &'static [(&'static str, &'static str)],
    body: Option<Value>,
    reply: Reply,
}

fn step(method: Method, path: String, reply: Reply) -> Step {
    Step {
        method,
        path,
        query: &[],
        body: None,
        reply,
    }
}

fn echo() -> Reply {
    Box::new(|b| (200, b.clone()))
}

fn object_json(obj: &OciRepository) -> Value {
    serde_json::to_value(obj).unwrap()
}

impl Scenario {
    fn steps(self) -> Vec<Step> {
        match self {
            Scenario::NoRequests => Vec::new(),
            Scenario::AddFinalizer(obj) => {
                let name = obj.metadata.name.clone().unwrap();
                let reply = object_json(&obj);
                vec![Step {
                    body: Some(json!([
                        {"op": "test", "path": "/metadata/finalizers", "value": null},
                        {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
                    ])),
                    ..step(
                        Method::PATCH,
                        repo_path(&name, ""),
                        Box::new(move |_| (200, reply)),
                    )
                }]
            }
            Scenario::RemoveFinalizer(obj) => {
                let name = obj.metadata.name.clone().unwrap();
                let reply = object_json(&obj);
                vec![Step {
                    body: Some(json!([
                        {"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
                        {"op": "remove", "path": "/metadata/finalizers/0"},
                    ])),
                    ..step(
                        Method::PATCH,
                        repo_path(&name, ""),
                        Box::new(move |_| (200, reply)),
                    )
                }]
            }
            Scenario::Reconcile(obj, expect) => reconcile_steps(&obj, expect),
            Scenario::LeaseCreated(name) => lease_steps(&name, 201),
            Scenario::LeaseCreateConflict(name) => lease_steps(&name, 409),
        }
    }
}

fn lease_steps(name: &str, create_code: u16) -> Vec<Step> {
    let base = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases");
    vec![
        step(
            Method::GET,
            format!("{base}/{name}"),
            Box::new(|_| (404, status_error(404, "NotFound"))),
        ),
        step(
            Method::POST,
            base,
            Box::new(move |b| match create_code {
                201 => (201, b.clone()),
                code => (code, status_error(code, "AlreadyExists")),
            }),
        ),
    ]
}

fn reconcile_steps(obj: &OciRepository, expect: Expect) -> Vec<Step> {
    let name = obj.metadata.name.clone().unwrap();
    let mut steps = Vec::new();
    if let Some((secret, data)) = expect.secret {
        let reply = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                           "metadata": {"name": secret, "namespace": NS}, "data": data});
        steps.push(step(
            Method::GET,
            format!("/api/v1/namespaces/{NS}/secrets/{secret}"),
            Box::new(move |_| (200, reply)),
        ));
    }
    let mut current = object_json(obj);
    steps.push(step(
        Method::PATCH,
        repo_path(&name, "/status"),
        Box::new(move |b| {
            merge_patch(&mut current, b);
            (200, current)
        }),
    ));
    for ev in expect.events {
        steps.push(match ev {
            EventCall::Create => step(Method::POST, events_path(), echo()),
        });
    }
    let apply_query: &[(&str, &str)] = &[("fieldManager", "ocisource"), ("force", "true")];
    match expect.external_artifact {
        Ea::Off => {}
        Ea::CrdMissing => steps.push(Step {
            query: apply_query,
            ..step(
                Method::PATCH,
                ea_path(&name, ""),
                Box::new(|_| (404, status_error(404, "NotFound"))),
            )
        }),
        Ea::Published => {
            steps.push(Step {
                query: apply_query,
                ..step(Method::PATCH, ea_path(&name, ""), echo())
            });
            let ea = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
                            "metadata": {"name": name, "namespace": NS}, "spec": {}});
            steps.push(step(
                Method::PATCH,
                ea_path(&name, "/status"),
                Box::new(move |b| {
                    let mut ea = ea;
                    ea["status"] = b["status"].clone();
                    (200, ea)
                }),
            ));
        }
    }
    steps
}

/// JSON merge patch (RFC 7386), as the API server applies `Patch::Merge`: objects merge
/// key by key, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().unwrap();
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
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

/// A test OCIRepository in [`NS`] with uid, generation 1, the finalizer, `insecure`,
/// interval 5m and no ref.
pub fn repo(name: &str, url: &str) -> OciRepository {
    serde_json::from_value(json!({
        "apiVersion": "ocisource.dev/v1beta1", "kind": "OCIRepository",
        "metadata": {"name": name, "namespace": NS, "uid": UID, "generation": 1,
                     "finalizers": [FINALIZER]},
        "spec": {"url": url, "interval": "5m", "insecure": true},
    }))
    .unwrap()
}

/// Builders over [`repo`].
pub trait RepoExt: Sized {
    /// `spec.ref.tag`.
    fn with_tag(self, tag: &str) -> Self;
    /// `spec.ref.semver`.
    fn with_semver(self, range: &str) -> Self;
    /// `spec.secretRef`.
    fn with_secret_ref(self, name: &str) -> Self;
    /// No finalizer.
    fn without_finalizer(self) -> Self;
    /// `spec.suspend: true`.
    fn suspended(self) -> Self;
    /// `metadata.deletionTimestamp` set.
    fn deleting(self) -> Self;
    /// The `reconcile.fluxcd.io/requestedAt` annotation.
    fn requested_at(self, value: &str) -> Self;
    /// The status as the API server holds it after a status patch (merge-patch applied).
    fn with_status_of(self, status_patch: &Call) -> Self;
    /// `spec.ignore`.
    fn with_ignore(self, ignore: Option<&str>) -> Self;
}

impl RepoExt for OciRepository {
    fn with_tag(mut self, tag: &str) -> Self {
        self.spec.reference.get_or_insert_with(Default::default).tag = Some(tag.into());
        self
    }
    fn with_semver(mut self, range: &str) -> Self {
        self.spec
            .reference
            .get_or_insert_with(Default::default)
            .semver = Some(range.into());
        self
    }
    fn with_secret_ref(mut self, name: &str) -> Self {
        self.spec.secret_ref =
            Some(ocisource::api::ocirepository::LocalObjectReference { name: name.into() });
        self
    }
    fn without_finalizer(mut self) -> Self {
        self.metadata.finalizers = None;
        self
    }
    fn suspended(mut self) -> Self {
        self.spec.suspend = true;
        self
    }
    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp =
            Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
        self
    }
    fn requested_at(mut self, value: &str) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(RECONCILE_REQUESTED_AT.into(), value.into());
        self
    }
    fn with_ignore(mut self, ignore: Option<&str>) -> Self {
        self.spec.ignore = ignore.map(Into::into);
        self
    }
    fn with_status_of(mut self, status_patch: &Call) -> Self {
        let status: OciRepositoryStatus =
            serde_json::from_value(status_patch.reply["status"].clone()).unwrap();
        self.status = Some(status);
        self
    }
}

/// The one call to `path` with `method` (panics when there is not exactly one).
pub fn only<'a>(calls: &'a [Call], method: Method, path: &str) -> &'a Call {
    let found: Vec<&Call> = calls
        .iter()
        .filter(|c| c.method == method && c.path == path)
        .collect();
    assert_eq!(found.len(), 1, "{method} {path} in {calls:#?}");
    found[0]
}

/// The condition `type_` in a status JSON.
pub fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status:#}"))
}

/// A dockerconfigjson Secret `data` for `host` (values base64 as the API returns them).
pub fn docker_secret_data(host: &str, user: &str, password: &str) -> Value {
    use base64::Engine as _;
    let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
    let config = json!({"auths": {host: {"auth": b64(format!("{user}:{password}").as_bytes())}}});
    json!({".dockerconfigjson": b64(config.to_string().as_bytes())})
}

/// A real registry, a temp store and the controller context wired to a mock API server.
pub struct Env {
    /// The registry.
    pub reg: TestRegistry,
    /// Storage root (kept alive for the test).
    pub dir: tempfile::TempDir,
    /// The controller context (one Recorder, as in the controller).
    pub kctx: Arc<KubeContext>,
    /// The mock API server.
    pub api: ApiServerVerifier,
}

/// What `reconcile_object` returns.
pub type ReconcileResult = Result<Action, kube::runtime::finalizer::Error<ControllerError>>;

impl Env {
    /// Starts a registry with `opts`; ExternalArtifact publishing on.
    pub fn new(opts: RegistryOpts) -> Self {
        let reg = TestRegistry::start(opts);
        let dir = tempfile::tempdir().unwrap();
        let (client, api) = mock_client();
        let core = Arc::new(Context::new(
            Arc::new(HttpConnector::new()),
            Arc::new(CosignVerifier::new().unwrap()),
            Arc::new(KubeSecrets::new(client.clone())),
            Storage::new(dir.path()),
            Settings {
                advertised_addr: ADV_ADDR.into(),
                ..Settings::default()
            },
            Arc::new(Metrics::new()),
        ));
        let reporter = Reporter {
            controller: controller::MANAGER.into(),
            instance: Some("test".into()),
        };
        let kctx = Arc::new(KubeContext {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            core,
            external_artifact: true,
            external_artifact_missing: AtomicBool::new(false),
        });
        Self {
            reg,
            dir,
            kctx,
            api,
        }
    }

    /// `oci://<registry>/<repo>`.
    pub fn url(&self, repo: &str) -> String {
        format!("oci://{}/{repo}", self.reg.host())
    }

    /// The store.
    pub fn storage(&self) -> &Storage {
        &self.kctx.core.storage
    }

    /// `controller::reconcile_object(obj)` against `scenario`.
    pub async fn reconcile(
        &mut self,
        obj: &OciRepository,
        scenario: Scenario,
    ) -> (ReconcileResult, Vec<Call>) {
        let fut = controller::reconcile_object(Arc::new(obj.clone()), self.kctx.clone());
        self.api.run(scenario, fut).await
    }
}
