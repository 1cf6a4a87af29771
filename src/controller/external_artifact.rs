//! Publishing the Flux `ExternalArtifact` (RFC-0012) for an OCIRepository: same name and
//! namespace, `spec.sourceRef` naming the source, a controller ownerReference (deletion
//! cascades), and its status following the source's: the last stored artifact, Ready
//! (Unknown while the source's new generation or revision is under way, False when it
//! failed) and SourceVerified, with the ExternalArtifact's own observedGeneration.
//! When the ExternalArtifact CRD is not installed this is said once (once again after it
//! was installed and removed), and the controller carries on serving `status.artifact`.

use std::sync::atomic::Ordering;

use kube::api::{Patch, PatchParams};
use kube::Api;

use crate::api::{ExternalArtifact, ExternalArtifactStatus, OciRepository};

use super::{first_missing_report, KubeContext, MANAGER};

/// Creates or updates the ExternalArtifact of `source` (whose status is the new one).
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
            tracing::warn!(object = %format!("{ns}/{name}"), error = %e, "failed to publish ExternalArtifact")
        }
    }
}
