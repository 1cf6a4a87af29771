//! Publishing the Flux `ExternalArtifact` (RFC-0012) for an OCIRepository: same name and
//! namespace, `spec.sourceRef` naming the source, a controller ownerReference (deletion
//! cascades), and its status following the source's: the last stored artifact, Ready
//! (Unknown while the source's new generation or revision is under way, False when it
//! failed) and SourceVerified, with the ExternalArtifact's own observedGeneration.
//! When the ExternalArtifact CRD is not installed this is said once (once again after it
//! was installed and removed), and the controller carries on serving `status.artifact`.
//! What was published is remembered per source object ([`Published`]): an unchanged
//! ExternalArtifact is not written again (two API requests per object and interval saved)
//! until [`REPUBLISH_AFTER`] has passed, which bounds how long an ExternalArtifact deleted
//! by hand stays missing.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams};
use kube::Api;

use crate::api::{ExternalArtifact, ExternalArtifactStatus, OciRepository};

use super::{first_missing_report, KubeContext, MANAGER};

/// An unchanged ExternalArtifact is written again after this long anyway.
pub const REPUBLISH_AFTER: Duration = Duration::from_secs(600);

/// What was last published for each source object (by uid): a hash of the
/// ExternalArtifact and its status, and when.
#[derive(Debug, Default)]
pub struct Published(Mutex<HashMap<String, (u64, Instant)>>);

impl Published {
    /// True when `hash` was published for `uid` less than [`REPUBLISH_AFTER`] ago.
    fn fresh(&self, uid: &str, hash: u64) -> bool {
        self.0.lock().is_ok_and(|m| {
            m.get(uid)
                .is_some_and(|(h, at)| *h == hash && at.elapsed() < REPUBLISH_AFTER)
        })
    }

    /// Forgets what was published for `uid` (the object is gone, or it must be written
    /// again at the next reconcile).
    pub fn forget(&self, uid: &str) {
        self.remember(uid, None);
    }

    fn remember(&self, uid: &str, hash: Option<u64>) {
        if let Ok(mut m) = self.0.lock() {
            match hash {
                Some(h) => m.insert(uid.to_string(), (h, Instant::now())),
                None => m.remove(uid),
            };
        }
    }
}

/// A hash of what [`publish`] would write for `source` (the object and its status).
fn fingerprint(ea: &ExternalArtifact, source: &OciRepository) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(ea).ok()?.hash(&mut h);
    serde_json::to_string(&ExternalArtifactStatus::from_source(source, 0))
        .ok()?
        .hash(&mut h);
    Some(h.finish())
}

/// Creates or updates the ExternalArtifact of `source` (whose status is the new one),
/// unless the same was published recently.
pub async fn publish(kctx: &KubeContext, source: &OciRepository) {
    let ea = match ExternalArtifact::for_source(source) {
        Ok(ea) => ea,
        Err(e) => {
            tracing::warn!(error = %e, "cannot publish ExternalArtifact");
            return;
        }
    };
    let (Some(ns), Some(name)) = (ea.metadata.namespace.clone(), ea.metadata.name.clone()) else {
        return;
    };
    let uid = source.metadata.uid.clone().unwrap_or_default();
    let hash = fingerprint(&ea, source);
    if hash.is_some_and(|h| kctx.published.fresh(&uid, h)) {
        return;
    }
    let api: Api<ExternalArtifact> = Api::namespaced(kctx.client.clone(), &ns);
    let applied = api
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&ea),
        )
        .await;
    let result = match applied {
        Ok(applied) => {
            let generation = applied.metadata.generation.unwrap_or_default();
            let status = serde_json::json!({
                "status": ExternalArtifactStatus::from_source(source, generation)
            });
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .map(|_| ())
        }
        Err(e) => Err(e),
    };
    kctx.published
        .remember(&uid, hash.filter(|_| result.is_ok()));
    match result {
        Ok(()) => kctx
            .external_artifact_missing
            .store(false, Ordering::Relaxed),
        // Server-side apply creates the object, so a 404 means the resource type is unknown.
        Err(kube::Error::Api(s)) if s.is_not_found() => {
            if first_missing_report(&kctx.external_artifact_missing) {
                tracing::warn!(
                    "the ExternalArtifact API (source.toolkit.fluxcd.io/v1) is not installed; \
                     artifacts are served and published in OCIRepository status only. Install \
                     Flux 2.7+ (its source-controller's CRDs), or pass --external-artifact=false"
                );
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "failed to publish ExternalArtifact")
        }
    }
}
