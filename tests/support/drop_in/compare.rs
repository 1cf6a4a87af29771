//! Comparing a failing object's status between Flux's source-controller and ocisource
//! (tests/cluster_drop_in_failures.rs, tests/cluster_drop_in_after.rs): the objects, the
//! view of their status that is compared, and a diff that shows where they part.

use serde_json::Value;

use super::{FLUX_OCI, SHARD, WAIT};
use crate::support::cluster::{condition, has_condition, Cluster};

/// A known, asserted difference between the two controllers' status for one case: the
/// FetchFailed, Ready (and Stalled) messages differ, Flux's having the shape asserted here; every
/// other field (types, statuses, reasons, observed generations, artifact) is still equal.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Exception {
    /// None: the statuses are equal.
    None,
    /// Flux quotes Masterminds/semver's parse error (`semver 'R' parse error: improper
    /// constraint: R`); ocisource's range parser words its own (`invalid spec.ref.semver
    /// 'R': …`). Which ranges Masterminds refuses, and how, is its grammar, not ours.
    SemverText,
}

impl Exception {
    /// True when Flux's message has the shape this exception names.
    pub fn flux_shape(self, text: &str) -> bool {
        match self {
            Self::None => true,
            Self::SemverText => {
                text.starts_with("failed to determine the artifact tag for 'oci://")
                    && text.contains("' parse error: improper constraint: ")
            }
        }
    }
}

/// Checks the named differences of `case` in both views and blanks them, so the rest can
/// be compared whole; returns what did not have the expected shape.
pub fn apply_exceptions(case: &Case, flux: &mut Value, ours: &mut Value) -> Vec<String> {
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
pub struct Case {
    pub name: &'static str,
    pub spec: String,
    pub exception: Exception,
}

/// The message of condition `type_` in a [`failure_view`].
pub fn message_of<'a>(view: &'a mut Value, type_: &str) -> Option<&'a mut Value> {
    view["conditions"]
        .as_array_mut()?
        .iter_mut()
        .find(|c| c["type"] == type_)
        .map(|c| &mut c["message"])
}

/// A Flux OCIRepository named `name` with `spec` and the sharding label `shard`
/// (`None`: no label, source-controller's).
pub fn object(ns: &str, name: &str, spec: &str, shard: Option<&str>) -> String {
    let labels = match shard {
        Some(s) => format!("{{{SHARD}: {s}}}"),
        None => "{team: a}".into(),
    };
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {labels}\nspec:\n{spec}"
    )
}

pub fn spec(url: &str, extra: &str) -> String {
    format!("  url: {url}\n  interval: 1m\n  insecure: true\n{extra}")
}

/// A dockerconfigjson Secret for `host` with `user:password`.
pub fn docker_secret(ns: &str, name: &str, host: &str, user: &str, password: &str) -> String {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let json = format!(r#"{{"auths":{{"{host}":{{"auth":"{auth}"}}}}}}"#);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {ns}\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{json}'\n"
    )
}

/// A loopback address on which nothing listens (bound, then closed).
pub fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}

/// The failure status compared: the sorted conditions (type, status, reason, message,
/// observedGeneration), `status.observedGeneration` and whether there is an artifact.
pub fn failure_view(o: &Value) -> Value {
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
pub fn diff(flux: &Value, ours: &Value) -> String {
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
pub fn failed(o: &Value) -> bool {
    has_condition(o, "Ready", "False")
        && condition(o, "Ready").is_some_and(|c| c["reason"] != "Progressing")
}

/// The failure views of `NAME-flux` and `NAME-ours` (NAME: the case's name), once both
/// failed, compared but for the case's exception: `None` when equal, else a diff.
pub fn compare(cluster: &Cluster, ns: &str, case: &Case) -> Option<String> {
    let get = |who: &str| {
        let name = format!("{}-{who}", case.name);
        let o = cluster.wait_for(FLUX_OCI, ns, &name, WAIT, "failed", failed);
        let text = failure_view(&o).to_string().replace(&name, case.name);
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let (mut flux, mut ours) = (get("flux"), get("ours"));
    let (flux_raw, ours_raw) = (flux.clone(), ours.clone());
    let wrong = apply_exceptions(case, &mut flux, &mut ours);
    (flux != ours || !wrong.is_empty()).then(|| {
        format!(
            "case {} ({:?}): {wrong:?}\n- source-controller, + ocisource\n{}",
            case.name,
            case.exception,
            diff(&flux_raw, &ours_raw)
        )
    })
}
