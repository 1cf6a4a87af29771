//! Comparing a failing object's status between Flux's source-controller and ocisource
//! (tests/cluster_drop_in_failures.rs, tests/cluster_drop_in_after.rs): the objects, the
//! view of their status that is compared, and a diff that shows where they part.

use serde_json::Value;

use super::{FLUX_OCI, SHARD, WAIT};
use crate::support::cluster::{condition, has_condition, Cluster};

/// One failing spec: the object's name stem and its `spec` (YAML, indented two spaces).
pub struct Case {
    pub name: &'static str,
    pub spec: String,
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
/// failed: `None` when they are equal, messages included, else a diff.
pub fn compare(cluster: &Cluster, ns: &str, case: &Case) -> Option<String> {
    let get = |who: &str| {
        let name = format!("{}-{who}", case.name);
        let o = cluster.wait_for(FLUX_OCI, ns, &name, WAIT, "failed", failed);
        let text = failure_view(&o).to_string().replace(&name, case.name);
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let (flux, ours) = (get("flux"), get("ours"));
    (flux != ours).then(|| {
        format!(
            "case {}:\n- source-controller, + ocisource\n{}",
            case.name,
            diff(&flux, &ours)
        )
    })
}
