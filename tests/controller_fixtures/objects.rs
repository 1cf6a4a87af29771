//! Test objects: `repo(..)` and the `RepoExt` builders, and readers of what the mock
//! API server recorded (`only`, `condition`). No I/O.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use http::Method;
use serde_json::{json, Value};

use ocisource::api::ocirepository::{FINALIZER, RECONCILE_REQUESTED_AT};
use ocisource::api::{OciRepository, OciRepositoryStatus};

use super::{Call, NS, UID};

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

/// The last call of `method` to `path` (e.g. the final status patch after the statuses
/// shown while the reconcile ran).
pub fn last<'a>(calls: &'a [Call], method: Method, path: &str) -> &'a Call {
    calls
        .iter()
        .rev()
        .find(|c| c.method == method && c.path == path)
        .unwrap_or_else(|| panic!("no {method} {path} in {calls:#?}"))
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
