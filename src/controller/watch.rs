//! Watching: one kube-runtime controller per kind (ours always, Flux's in drop-in mode),
//! each over a watch filtered to the changes that deserve a reconcile, both stopped by
//! the same signal (SIGTERM or a lost Lease).

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, ResourceExt};

use crate::api::{FluxOciRepository, OciRepository};

use super::{error_policy, reconcile_object, KubeContext, SourceKind};

/// Which objects to watch.
#[derive(Clone, Debug, Default)]
pub struct WatchScope {
    /// `None` watches every namespace; else only this one.
    pub namespace: Option<String>,
    /// Label selector (sharding), e.g. `sharding.fluxcd.io/key=shard1`.
    pub label_selector: Option<String>,
    /// Drop-in mode: also reconcile Flux's own OCIRepository objects matching this label
    /// selector (`--flux-drop-in-selector`), e.g. `sharding.fluxcd.io/key=ocisource`.
    pub flux_selector: Option<String>,
    /// Objects reconciled at once.
    pub concurrency: u16,
}

/// Runs the controller until `stop` completes (SIGTERM, or a lost leader Lease): work in
/// flight finishes, no new reconcile starts. Our kind always; Flux's kind too in drop-in
/// mode, each with its own watch and `concurrency` workers.
pub async fn run<F>(kctx: Arc<KubeContext>, scope: WatchScope, stop: F)
where
    F: std::future::Future<Output = ()> + Send + Sync + 'static,
{
    let stop = stop.shared();
    let ours = run_kind::<OciRepository, _>(
        kctx.clone(),
        &scope,
        scope.label_selector.as_deref(),
        stop.clone(),
    );
    match scope.flux_selector.as_deref() {
        Some(selector) => {
            let flux = run_kind::<FluxOciRepository, _>(kctx, &scope, Some(selector), stop);
            futures::join!(ours, flux);
        }
        None => ours.await,
    }
}

/// What makes a watch event worth a reconcile, as Flux's `GenerationChangedPredicate` or
/// `ReconcileRequestedPredicate`: a new generation, a new `requestedAt`, deletion, a
/// finalizer change (the finalizer round-trip), or a changed drop-in opt-in annotation.
/// A status-only change, such as the controller's own status write, is not: without this
/// every reconcile caused another (a HEAD to the registry and status and ExternalArtifact
/// writes) for nothing. A new object, or one that starts matching the label selector
/// (moved from Flux's source-controller), has no hash yet and always passes.
pub fn change_of_interest<K: SourceKind>(obj: &K) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let meta = obj.meta();
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
    let mut h = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut h);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_microsecond())
        .hash(&mut h);
    meta.finalizers.hash(&mut h);
    for key in [
        crate::api::ocirepository::RECONCILE_REQUESTED_AT,
        crate::api::flux_ocirepository::LAYERS_ANNOTATION,
        crate::api::flux_ocirepository::PLATFORM_ANNOTATION,
    ] {
        annotation(key).hash(&mut h);
    }
    Some(h.finish())
}

/// What the reconciler never reads is dropped before the object is cached: the managed
/// fields (often larger than the spec) and `kubectl apply`'s copy of the last applied
/// object. At 10,000 objects the cache is most of the controller's memory.
fn slim<K: SourceKind>(obj: &mut K) {
    obj.managed_fields_mut().clear();
    obj.annotations_mut()
        .remove("kubectl.kubernetes.io/last-applied-configuration");
}

/// Runs kube-runtime's controller over the objects of kind `K` that `labels` selects.
async fn run_kind<K, F>(kctx: Arc<KubeContext>, scope: &WatchScope, labels: Option<&str>, stop: F)
where
    K: SourceKind,
    F: std::future::Future<Output = ()> + Send + Sync + 'static,
{
    let api: Api<K> = match &scope.namespace {
        Some(ns) => Api::namespaced(kctx.client.clone(), ns),
        None => Api::all(kctx.client.clone()),
    };
    let mut wc = watcher::Config::default();
    if let Some(sel) = labels {
        wc = wc.labels(sel);
    }
    tracing::info!(kind = K::LABEL, selector = labels.unwrap_or(""), "watching");
    let (reader, writer) = reflector::store();
    let trigger = watcher(api, wc)
        .default_backoff()
        .modify(slim::<K>)
        .reflect(writer)
        .touched_objects()
        .predicate_filter(change_of_interest::<K>, Default::default());
    Controller::for_stream(trigger, reader)
        .with_config(ControllerConfig::default().concurrency(scope.concurrency))
        .graceful_shutdown_on(stop)
        .run(reconcile_object::<K>, error_policy::<K>, kctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(kind = K::LABEL, error = %e, "controller event");
            }
        })
        .await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::api::OciRepository;

    #[test]
    fn the_cached_copy_drops_managed_fields_and_the_last_applied_copy_only() {
        let mut obj: OciRepository = serde_json::from_value(serde_json::json!({
            "apiVersion": "ocisource.dev/v1beta1",
            "kind": "OCIRepository",
            "metadata": {
                "name": "app",
                "namespace": "ns",
                "finalizers": ["x"],
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{}}",
                    "reconcile.fluxcd.io/requestedAt": "now"
                },
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
            },
            "spec": {"url": "oci://r.example/app", "interval": "5m", "ref": {"tag": "v1"}}
        }))
        .unwrap();
        slim(&mut obj);
        assert!(obj.managed_fields().is_empty());
        let kept: Vec<_> = obj.annotations().keys().cloned().collect();
        assert_eq!(kept, ["reconcile.fluxcd.io/requestedAt"]);
        assert_eq!(obj.finalizers(), ["x"]);
        assert_eq!(obj.spec.url, "oci://r.example/app");
    }
}
