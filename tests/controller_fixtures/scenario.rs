//! The scenarios the mock API server plays: for each, the requests expected in order
//! (method, path, query, fixed body) and how each is answered. No registry, no storage.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use http::Method;
use serde_json::{json, Value};

use ocisource::api::ocirepository::FINALIZER;
use ocisource::api::OciRepository;

use super::{ea_path, events_path, repo_path, status_error, Reply, NS};

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

/// A status shown while the reconcile runs, before the final status patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// An in-progress status merge patch (new object or generation, new revision).
    Status,
    /// An in-progress status patch, then the ExternalArtifact (apply and status) because
    /// its Ready changes.
    StatusAndEa,
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
    /// In-progress statuses, in order, before anything else.
    pub shown: Vec<Shown>,
    /// A Secret read first (after the status shown at the start): its name and `data`
    /// (values base64), answered 200.
    pub secret: Option<(String, Value)>,
    /// Events after the status patch, in order.
    pub events: Vec<EventCall>,
    /// The ExternalArtifact requests.
    pub external_artifact: Ea,
    /// The final status merge patch (absent when the reconcile changed nothing).
    pub status_patch: bool,
}

impl Expect {
    /// Status patch, `events`, ExternalArtifact published.
    pub fn events(events: &[EventCall]) -> Self {
        Self {
            shown: Vec::new(),
            secret: None,
            events: events.to_vec(),
            external_artifact: Ea::Published,
            status_patch: true,
        }
    }
    /// A reconcile that changed nothing: no status patch, no event, and no
    /// ExternalArtifact request (the same one was published by this controller).
    pub fn unchanged() -> Self {
        Self {
            status_patch: false,
            external_artifact: Ea::Off,
            ..Self::events(&[])
        }
    }
    /// Expects these in-progress statuses first.
    pub fn showing(mut self, shown: &[Shown]) -> Self {
        self.shown = shown.to_vec();
        self
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
    /// An object without finalizer: a status patch showing Reconciling, then ONE JSON
    /// patch adding the finalizer, nothing else.
    AddFinalizer(OciRepository),
    /// A deleting object: ONE JSON patch removing the finalizer (index 0).
    RemoveFinalizer(OciRepository),
    /// No request at all (suspended).
    NoRequests,
    /// ONE status merge patch of the object and nothing else (a suspended object
    /// recording a requested reconcile).
    StatusOnly(OciRepository),
    /// A full reconcile of the object.
    Reconcile(OciRepository, Expect),
    /// Lease `name` does not exist: GET 404, then POST create answered 201.
    LeaseCreated(String),
    /// Lease `name` does not exist, but another replica creates it first: POST gets 409.
    LeaseCreateConflict(String),
    /// Lease `name` exists as `lease`; `put` is the answer to the replace (`None`: the
    /// code under test must not write).
    LeaseExists {
        /// Lease name.
        name: String,
        /// The Lease the GET returns.
        lease: Value,
        /// Status code of the PUT reply, if a PUT is expected.
        put: Option<u16>,
    },
}

pub(crate) struct Step {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: &'static [(&'static str, &'static str)],
    pub(crate) body: Option<Value>,
    pub(crate) reply: Reply,
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
    pub(crate) fn steps(self) -> Vec<Step> {
        match self {
            Scenario::NoRequests => Vec::new(),
            Scenario::StatusOnly(obj) => {
                let name = obj.metadata.name.clone().unwrap();
                let mut current = object_json(&obj);
                vec![step(
                    Method::PATCH,
                    repo_path(&name, "/status"),
                    Box::new(move |b| {
                        json_patch::merge(&mut current, b);
                        (200, current)
                    }),
                )]
            }
            Scenario::AddFinalizer(obj) => {
                let name = obj.metadata.name.clone().unwrap();
                let reply = object_json(&obj);
                let mut steps = shown_steps(&obj, &name, Shown::Status);
                steps.push(Step {
                    body: Some(json!([
                        {"op": "test", "path": "/metadata/finalizers", "value": null},
                        {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
                    ])),
                    ..step(
                        Method::PATCH,
                        repo_path(&name, ""),
                        Box::new(move |_| (200, reply)),
                    )
                });
                steps
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
            Scenario::LeaseExists { name, lease, put } => existing_lease_steps(&name, lease, put),
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

fn existing_lease_steps(name: &str, lease: Value, put: Option<u16>) -> Vec<Step> {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{name}");
    let mut steps = vec![step(
        Method::GET,
        path.clone(),
        Box::new(move |_| (200, lease.clone())),
    )];
    if let Some(code) = put {
        steps.push(step(
            Method::PUT,
            path,
            Box::new(move |b| match code {
                200 => (200, b.clone()),
                code => (code, status_error(code, "Conflict")),
            }),
        ));
    }
    steps
}

fn reconcile_steps(obj: &OciRepository, expect: Expect) -> Vec<Step> {
    let name = obj.metadata.name.clone().unwrap();
    let mut steps = Vec::new();
    let mut shown = expect.shown.into_iter();
    // A new object or generation is shown at the start, before any Secret is read.
    let first = shown.next();
    if let Some(s) = first {
        steps.extend(shown_steps(obj, &name, s));
    }
    if let Some((secret, data)) = expect.secret {
        let reply = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                           "metadata": {"name": secret, "namespace": NS}, "data": data});
        steps.push(step(
            Method::GET,
            format!("/api/v1/namespaces/{NS}/secrets/{secret}"),
            Box::new(move |_| (200, reply)),
        ));
    }
    for s in shown {
        steps.extend(shown_steps(obj, &name, s));
    }
    let mut current = object_json(obj);
    if expect.status_patch {
        steps.push(step(
            Method::PATCH,
            repo_path(&name, "/status"),
            Box::new(move |b| {
                json_patch::merge(&mut current, b);
                (200, current)
            }),
        ));
    }
    for ev in expect.events {
        steps.push(match ev {
            EventCall::Create => step(Method::POST, events_path(), echo()),
        });
    }
    match expect.external_artifact {
        Ea::Off => {}
        Ea::CrdMissing => steps.push(Step {
            query: APPLY_QUERY,
            ..step(
                Method::PATCH,
                ea_path(&name, ""),
                Box::new(|_| (404, status_error(404, "NotFound"))),
            )
        }),
        Ea::Published => steps.extend(ea_steps(&name)),
    }
    steps
}

const APPLY_QUERY: &[(&str, &str)] = &[("fieldManager", "ocisource"), ("force", "true")];

/// Server-side apply of the ExternalArtifact, then its status patch.
fn ea_steps(name: &str) -> Vec<Step> {
    let ea = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
                    "metadata": {"name": name, "namespace": NS, "generation": 1}, "spec": {}});
    let applied = ea.clone();
    vec![
        Step {
            query: APPLY_QUERY,
            ..step(
                Method::PATCH,
                ea_path(name, ""),
                Box::new(move |_| (200, applied.clone())),
            )
        },
        step(
            Method::PATCH,
            ea_path(name, "/status"),
            Box::new(move |b| {
                let mut ea = ea.clone();
                ea["status"] = b["status"].clone();
                (200, ea)
            }),
        ),
    ]
}

/// One in-progress status patch, and the ExternalArtifact when it changes too.
fn shown_steps(obj: &OciRepository, name: &str, shown: Shown) -> Vec<Step> {
    let object = object_json(obj);
    let mut steps = vec![step(
        Method::PATCH,
        repo_path(name, "/status"),
        Box::new(move |b| {
            let mut object = object.clone();
            json_patch::merge(&mut object, b);
            (200, object)
        }),
    )];
    if shown == Shown::StatusAndEa {
        steps.extend(ea_steps(name));
    }
    steps
}
