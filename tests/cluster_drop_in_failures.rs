//! Drop-in mode's failure statuses on the REAL API server, with Flux's own
//! source-controller running beside ocisource (`hack/cluster.sh flux source-controller`
//! with `--watch-label-selector=!sharding.fluxcd.io/key`): the same failing Flux
//! OCIRepository is created twice, once labelled for ocisource and once for
//! source-controller, and the conditions each controller writes (type, status, reason,
//! message, observedGeneration), `status.observedGeneration` and the absence of an
//! artifact must be the same. Where equality cannot be had, the case names its exception
//! ([`Exception`]) and the test asserts exactly that difference.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::Value;
use support::cluster::{condition, has_condition, Env};
use support::drop_in::{
    configmap_yaml, drop_in_values, source_controller_runs, FLUX_LAYER, FLUX_OCI, SHARD, WAIT,
};
use support::tar_gz;

/// A known, asserted difference between the two controllers' status for one case: the
/// FetchFailed, Ready (and Stalled) messages differ, Flux's having the shape asserted here; every
/// other field (types, statuses, reasons, observed generations, artifact) is still equal.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Exception {
    /// None: the statuses are equal.
    None,
    /// Flux quotes Go's dial error for both the HTTPS try and the plain-HTTP fallback
    /// (`Get "https://…/v2/": dial tcp …: connect: connection refused; Get "http://…"`).
    DialText,
    /// Flux quotes Masterminds/semver's parse error (`semver 'R' parse error: improper
    /// constraint: R`); ocisource's range parser words its own (`invalid spec.ref.semver
    /// 'R': …`). Which ranges Masterminds refuses, and how, is its grammar, not ours.
    SemverText,
}

impl Exception {
    /// True when Flux's message has the shape this exception names.
    fn flux_shape(self, text: &str) -> bool {
        match self {
            Self::None => true,
            Self::DialText => {
                text.starts_with("failed to determine artifact digest: Get \"https://")
            }
            Self::SemverText => {
                text.starts_with("failed to determine the artifact tag for 'oci://")
                    && text.contains("' parse error: improper constraint: ")
            }
        }
    }
}

/// The message of condition `type_` in a [`failure_view`].
fn message_of<'a>(view: &'a mut Value, type_: &str) -> Option<&'a mut Value> {
    view["conditions"]
        .as_array_mut()?
        .iter_mut()
        .find(|c| c["type"] == type_)
        .map(|c| &mut c["message"])
}

/// Checks the named differences of `case` in both views and blanks them, so the rest can
/// be compared whole; returns what did not have the expected shape.
fn apply_exceptions(case: &Case, flux: &mut Value, ours: &mut Value) -> Vec<String> {
    let mut wrong = Vec::new();
    if case.exception != Exception::None {
        for type_ in ["FetchFailed", "Ready", "Stalled"] {
            let f = message_of(flux, type_).map(|m| m.clone());
            if type_ == "Stalled" && f.is_none() {
                continue;
            }
            let shaped = f
                .as_ref()
                .and_then(Value::as_str)
                .is_some_and(|t| case.exception.flux_shape(t));
            if !shaped {
                wrong.push(format!(
                    "{type_}: Flux's message {f:?} is not the excepted shape"
                ));
            }
            if let (Some(f), Some(o)) = (f, message_of(ours, type_)) {
                if *o == f {
                    wrong.push(format!("{type_}: now equal, remove the exception"));
                }
                *o = f;
            }
        }
    }
    wrong
}

/// One failing spec: the object's name stem, its `spec` (YAML, indented two spaces) and
/// the exception it is allowed.
struct Case {
    name: &'static str,
    spec: String,
    exception: Exception,
}

/// A Flux OCIRepository named `name` with `spec` and the sharding label `shard`
/// (`None`: no label, source-controller's).
fn object(ns: &str, name: &str, spec: &str, shard: Option<&str>) -> String {
    let labels = match shard {
        Some(s) => format!("{{{SHARD}: {s}}}"),
        None => "{team: a}".into(),
    };
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {labels}\nspec:\n{spec}"
    )
}

fn spec(url: &str, extra: &str) -> String {
    format!("  url: {url}\n  interval: 1m\n  insecure: true\n{extra}")
}

/// A dockerconfigjson Secret for `host` with `user:password`.
fn docker_secret(ns: &str, name: &str, host: &str, user: &str, password: &str) -> String {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let json = format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {ns}\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{json}'\n"
    )
}

/// A loopback address on which nothing listens (bound, then closed).
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}

/// The failure status compared: the sorted conditions (type, status, reason, message,
/// observedGeneration), `status.observedGeneration` and whether there is an artifact.
fn failure_view(o: &Value) -> Value {
    let mut c: Vec<Value> = o["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            serde_json::json!({
                "type": c["type"], "status": c["status"], "reason": c["reason"],
                "message": c["message"], "observedGeneration": c["observedGeneration"],
            })
        })
        .collect();
    c.sort_by_key(|c| c["type"].as_str().unwrap_or_default().to_string());
    serde_json::json!({
        "conditions": c,
        "observedGeneration": o["status"]["observedGeneration"],
        "artifact": o["status"].get("artifact").is_some(),
    })
}

/// A line-by-line diff of two pretty-printed values (`-` Flux, `+` ocisource).
fn diff(flux: &Value, ours: &Value) -> String {
    let (a, b) = (
        serde_json::to_string_pretty(flux).unwrap(),
        serde_json::to_string_pretty(ours).unwrap(),
    );
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    for i in 0..a.len().max(b.len()) {
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) if x == y => out.push_str(&format!("  {x}\n")),
            (x, y) => {
                if let Some(x) = x {
                    out.push_str(&format!("- {x}\n"));
                }
                if let Some(y) = y {
                    out.push_str(&format!("+ {y}\n"));
                }
            }
        }
    }
    out
}

/// Failed: Ready=False with a failure reason (not the in-progress state).
fn failed(o: &Value) -> bool {
    has_condition(o, "Ready", "False")
        && condition(o, "Ready").is_some_and(|c| c["reason"] != "Progressing")
}

/// Both controllers' failure status for every case.
#[tokio::test(flavor = "multi_thread")]
async fn failing_flux_objects_get_source_controllers_status() {
    let Some(s) = Env::start("dropfail", &drop_in_values()) else {
        return;
    };
    if !source_controller_runs(&s.cluster) {
        return;
    }
    let cluster = &s.cluster;
    let ns = &s.ns.name;
    let content = tar_gz(&[("cm.yaml", configmap_yaml("greeting", "v1").as_bytes())]);
    s.registry
        .push_artifact("app/config", "v1", &[(FLUX_LAYER, content)], &[])
        .await;
    let locked = support::TestRegistry::start(
        support::RegistryOpts::plain().with_basic_auth("alice", "right"),
    );
    s.cluster.apply(&docker_secret(
        ns,
        "wrong",
        &locked.host(),
        "alice",
        "wrong",
    ));
    let url = s.url("app/config");
    let cases = vec![
        Case {
            name: "missing-tag",
            spec: spec(&url, "  ref:\n    tag: nope\n"),
            exception: Exception::None,
        },
        Case {
            name: "missing-repo",
            spec: spec(&s.url("nothing/here"), "  ref:\n    tag: v1\n"),
            exception: Exception::None,
        },
        Case {
            name: "refused",
            spec: spec(
                &format!("oci://{}/app", closed_port()),
                "  ref:\n    tag: v1\n",
            ),
            exception: Exception::DialText,
        },
        Case {
            name: "semver-none",
            spec: spec(&url, "  ref:\n    semver: '>=9.0.0'\n"),
            exception: Exception::None,
        },
        Case {
            name: "semver-invalid",
            spec: spec(&url, "  ref:\n    semver: 'not-a-range'\n"),
            exception: Exception::SemverText,
        },
        Case {
            name: "missing-secret",
            spec: spec(
                &url,
                "  ref:\n    tag: v1\n  secretRef:\n    name: absent\n",
            ),
            exception: Exception::None,
        },
        Case {
            name: "wrong-credentials",
            spec: spec(
                &format!("oci://{}/app/config", locked.host()),
                "  ref:\n    tag: v1\n  secretRef:\n    name: wrong\n",
            ),
            exception: Exception::None,
        },
        Case {
            name: "tag-in-url",
            spec: spec(&format!("{url}:v1"), ""),
            exception: Exception::None,
        },
        Case {
            name: "no-repository",
            spec: spec("oci://", ""),
            exception: Exception::None,
        },
    ];
    for case in &cases {
        s.cluster.apply(&object(
            ns,
            &format!("{}-ours", case.name),
            &case.spec,
            Some("ocisource"),
        ));
        s.cluster.apply(&object(
            ns,
            &format!("{}-flux", case.name),
            &case.spec,
            None,
        ));
    }
    let mut mismatches = Vec::new();
    for case in &cases {
        let get = |who: &str| {
            let name = format!("{}-{who}", case.name);
            let o = cluster.wait_for(FLUX_OCI, ns, &name, WAIT, "failed", failed);
            let text = failure_view(&o).to_string().replace(&name, case.name);
            serde_json::from_str::<Value>(&text).unwrap()
        };
        let (mut flux, mut ours) = (get("flux"), get("ours"));
        let (flux_raw, ours_raw) = (flux.clone(), ours.clone());
        let wrong = apply_exceptions(case, &mut flux, &mut ours);
        if flux != ours || !wrong.is_empty() {
            mismatches.push(format!(
                "case {} ({:?}): {wrong:?}\n- source-controller, + ocisource\n{}",
                case.name,
                case.exception,
                diff(&flux_raw, &ours_raw)
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // The Kubernetes Events each controller recorded for its object: the same types and
    // reasons, and the same messages except where the case names its exception.
    let events: Value =
        serde_json::from_str(&cluster.kubectl_ok(&["get", "events", "-n", ns, "-o", "json"]))
            .unwrap();
    let of = |case: &Case, who: &str| -> std::collections::BTreeSet<String> {
        let name = format!("{}-{who}", case.name);
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["involvedObject"]["name"] == name.as_str())
            .map(|e| {
                let message = match case.exception {
                    Exception::None => e["message"]
                        .as_str()
                        .unwrap_or_default()
                        .replace(&name, case.name),
                    _ => String::from("(message excepted)"),
                };
                format!(
                    "{} {} {message}",
                    e["type"].as_str().unwrap_or_default(),
                    e["reason"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    let differing: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let (flux, ours) = (of(case, "flux"), of(case, "ours"));
            (flux.is_empty() || flux != ours).then(|| {
                format!(
                    "case {}: source-controller {flux:?}, ocisource {ours:?}",
                    case.name
                )
            })
        })
        .collect();
    assert!(differing.is_empty(), "{}", differing.join("\n"));
}
