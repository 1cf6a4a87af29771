//! The two kinds the controller reconciles over the same steps: ours
//! (`ocisource.dev/v1beta1` OCIRepository) and, in drop-in mode, Flux's own
//! (`source.toolkit.fluxcd.io/v1` OCIRepository). A [`SourceKind`] says what differs at
//! the Kubernetes edge: the finalizer, whether an ExternalArtifact is published, the
//! status keys the kind's schema has, and how the reconciler reads the object.

use std::fmt::Debug;
use std::sync::OnceLock;

use kube::core::NamespaceResourceScope;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::flux_ocirepository::FLUX_FINALIZER;
use crate::api::ocirepository::FINALIZER;
use crate::api::{Flavour, FluxOciRepository, OciRepository, OciRepositoryStatus};

/// A kind of source object the controller reconciles.
pub trait SourceKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The finalizer put on the kind's objects.
    const FINALIZER: &'static str;
    /// True when a Flux ExternalArtifact is published for each object
    /// (`--external-artifact`); Flux's kind is consumed directly, as
    /// `sourceRef.kind: OCIRepository`.
    const EXTERNAL_ARTIFACT: bool;
    /// The kind as logs and errors name it.
    const LABEL: &'static str;

    /// The object as the reconciler reads it, and whose defaults apply.
    fn view(&self) -> (OciRepository, Flavour);

    /// The status keys of the kind's schema (`status_patch` sends each of them, `null`
    /// when unset).
    fn status_keys() -> &'static [String];
}

/// The property names of our status schema.
fn our_status_keys() -> &'static Vec<String> {
    static KEYS: OnceLock<Vec<String>> = OnceLock::new();
    KEYS.get_or_init(|| {
        serde_json::to_value(schemars::schema_for!(OciRepositoryStatus))
            .ok()
            .and_then(|s| {
                s.get("properties")?
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
            })
            .unwrap_or_default()
    })
}

impl SourceKind for OciRepository {
    const FINALIZER: &'static str = FINALIZER;
    const EXTERNAL_ARTIFACT: bool = true;
    const LABEL: &'static str = "OCIRepository.ocisource.dev";

    fn view(&self) -> (OciRepository, Flavour) {
        (self.clone(), Flavour::Ocisource)
    }

    fn status_keys() -> &'static [String] {
        our_status_keys()
    }
}

impl SourceKind for FluxOciRepository {
    const FINALIZER: &'static str = FLUX_FINALIZER;
    const EXTERNAL_ARTIFACT: bool = false;
    const LABEL: &'static str = "OCIRepository.source.toolkit.fluxcd.io";

    fn view(&self) -> (OciRepository, Flavour) {
        FluxOciRepository::view(self)
    }

    /// Flux's status schema: ours without `observedPlatform`.
    fn status_keys() -> &'static [String] {
        static KEYS: OnceLock<Vec<String>> = OnceLock::new();
        KEYS.get_or_init(|| {
            our_status_keys()
                .iter()
                .filter(|k| k.as_str() != "observedPlatform")
                .cloned()
                .collect()
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fluxs_status_keys_are_its_schemas() {
        let flux: Vec<&str> = FluxOciRepository::status_keys()
            .iter()
            .map(String::as_str)
            .collect();
        for key in [
            "observedGeneration",
            "conditions",
            "url",
            "artifact",
            "observedIgnore",
            "observedLayerSelector",
            "lastHandledReconcileAt",
        ] {
            assert!(flux.contains(&key), "{key} missing from {flux:?}");
        }
        assert!(!flux.contains(&"observedPlatform"));
        assert!(OciRepository::status_keys().contains(&"observedPlatform".to_string()));
        // Every key is in Flux's own CRD (read from the reference copy when present).
        let crd = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/reference/flux/source.toolkit.fluxcd.io_ocirepositories.yaml");
        if let Ok(text) = std::fs::read_to_string(&crd) {
            for key in &flux {
                assert!(text.contains(&format!("{key}:")), "{key} not in Flux's CRD");
            }
        }
    }
}
