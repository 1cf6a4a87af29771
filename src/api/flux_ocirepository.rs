//! Flux's own `OCIRepository` kind (`source.toolkit.fluxcd.io/v1`), which ocisource
//! reconciles in drop-in mode (`--flux-drop-in-selector`): the objects Flux's
//! source-controller leaves alone through sharding are ours, with no change to their spec
//! or to any Kustomization or HelmRelease that reads them.
//!
//! The spec is Flux's, field for field (ours is a superset: `platform` is not in Flux's
//! schema, so the API server never stores it here). The reconciler sees such an object
//! through [`FluxOciRepository::view`] as an ocisource object plus a [`Flavour`] that
//! restores Flux's defaults (the FIRST matching layer, Flux's store folder, no
//! `observedPlatform`). What ocisource does beyond Flux is opt-in per object through
//! annotations under our own domain:
//! - `ocisource.dev/layers: all` merges every selected layer in order (later layers
//!   override earlier ones) instead of taking the first; `first` is Flux's default;
//! - `ocisource.dev/platform: os/arch[/variant]` picks that manifest from an image index
//!   (Flux, like ocisource by default, takes `linux/amd64`).
//!
//! The opt-ins in effect are recorded in `status.artifact.metadata` under
//! `ocisource.dev/options` (absent when none is set), so that changing them rebuilds the
//! artifact as a changed `layerSelector` does. Wire types only: no kube client, no I/O.

use kube::CustomResource;
use serde::{Deserialize, Serialize};

use super::ocirepository::{OciRepository, OciRepositorySpec, OciRepositoryStatus};
use crate::domain::manifest::Platform;

/// Annotation: `all` merges every selected layer; `first` (default) is Flux's selection.
pub const LAYERS_ANNOTATION: &str = "ocisource.dev/layers";
/// Annotation: the platform picked from an image index.
pub const PLATFORM_ANNOTATION: &str = "ocisource.dev/platform";
/// Key of `status.artifact.metadata` that records the opt-ins the artifact was built with.
pub const OPTIONS_METADATA_KEY: &str = "ocisource.dev/options";
/// The finalizer Flux's source-controller puts on its objects; ocisource uses the same on
/// Flux's kind, so an object moves between the two controllers with no finalizer left over.
pub const FLUX_FINALIZER: &str = "finalizers.fluxcd.io";

/// Flux's OCIRepository spec: our spec's fields, which are Flux's (see the module comment).
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "OCIRepository",
    root = "FluxOciRepository",
    plural = "ocirepositories",
    namespaced,
    status = "OciRepositoryStatus",
    schema = "disabled",
    derive = "PartialEq"
)]
pub struct FluxOciRepositorySpec {
    /// The fields, as Flux names them.
    #[serde(flatten)]
    pub spec: OciRepositorySpec,
}

/// How the reconciler reads an object: whose defaults apply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Flavour {
    /// `ocisource.dev`: every selected layer merged, `spec.platform`.
    #[default]
    Ocisource,
    /// Flux's kind: Flux's defaults, plus the opt-ins of its annotations.
    Flux(FluxOptions),
}

/// The ocisource extras a Flux object asks for through annotations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FluxOptions {
    /// `ocisource.dev/layers: all`.
    pub merge_layers: bool,
    /// `ocisource.dev/platform`.
    pub platform: Option<String>,
    /// An annotation whose value is not understood: (annotation, message).
    pub invalid: Option<(&'static str, String)>,
}

impl Flavour {
    /// The API group of the kind this flavour reconciles.
    pub fn api_group(&self) -> &'static str {
        match self {
            Self::Ocisource => "ocisource.dev",
            Self::Flux(_) => "source.toolkit.fluxcd.io",
        }
    }

    /// True when only the first matching layer is taken (Flux's selection).
    pub fn first_layer_only(&self) -> bool {
        matches!(self, Self::Flux(o) if !o.merge_layers)
    }

    /// The opt-ins in effect, as recorded under [`OPTIONS_METADATA_KEY`]; `None` for our
    /// kind and for a Flux object without any.
    pub fn options_note(&self) -> Option<String> {
        let Self::Flux(o) = self else { return None };
        let mut parts = Vec::new();
        if o.merge_layers {
            parts.push("layers=all".to_string());
        }
        if let Some(p) = &o.platform {
            parts.push(format!("platform={p}"));
        }
        (!parts.is_empty()).then(|| parts.join(","))
    }
}

impl FluxOptions {
    /// Reads the opt-in annotations of a Flux object.
    pub fn from_annotations(annotations: &std::collections::BTreeMap<String, String>) -> Self {
        let mut options = Self::default();
        match annotations.get(LAYERS_ANNOTATION).map(|v| v.trim()) {
            None | Some("first") => {}
            Some("all") => options.merge_layers = true,
            Some(other) => {
                options.invalid = Some((
                    "metadata.annotations[ocisource.dev/layers]",
                    format!(
                        "'{other}' is not a layer choice: use 'all' (merge every selected \
                         layer) or 'first' (Flux's default), or remove the annotation"
                    ),
                ))
            }
        }
        if let Some(p) = annotations.get(PLATFORM_ANNOTATION).map(|v| v.trim()) {
            match Platform::parse(p) {
                Ok(_) => options.platform = Some(p.to_string()),
                Err(e) => {
                    options.invalid = Some((
                        "metadata.annotations[ocisource.dev/platform]",
                        format!("{e}; expected os/arch[/variant], e.g. linux/arm64"),
                    ))
                }
            }
        }
        options
    }
}

impl FluxOciRepository {
    /// The object as the reconciler reads it: an ocisource object with Flux's spec (and
    /// `spec.platform` from the platform annotation), and the flavour that keeps Flux's
    /// defaults.
    pub fn view(&self) -> (OciRepository, Flavour) {
        let options = FluxOptions::from_annotations(
            self.metadata
                .annotations
                .as_ref()
                .unwrap_or(&Default::default()),
        );
        let mut spec = self.spec.spec.clone();
        spec.platform = options.platform.clone();
        let obj = OciRepository {
            metadata: self.metadata.clone(),
            spec,
            status: self.status.clone(),
        };
        (obj, Flavour::Flux(options))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn flux(annotations: &str) -> FluxOciRepository {
        serde_yaml::from_str(&format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\n\
             metadata: {{name: app, namespace: ns, annotations: {annotations}}}\n\
             spec: {{interval: 5m, url: 'oci://r.io/app', ref: {{tag: v1}}, \
             layerSelector: {{mediaType: 'application/x', operation: copy}}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_flux_object_reads_as_ours_with_fluxs_defaults() {
        let (obj, flavour) = flux("{}").view();
        assert_eq!(obj.spec.url, "oci://r.io/app");
        assert_eq!(obj.spec.reference.unwrap().tag.as_deref(), Some("v1"));
        assert_eq!(obj.spec.timeout, "60s");
        assert_eq!(obj.spec.platform, None);
        assert!(flavour.first_layer_only() && matches!(flavour, Flavour::Flux(_)));
        assert_eq!(flavour.options_note(), None);
        assert!(matches!(
            flavour,
            Flavour::Flux(FluxOptions { invalid: None, .. })
        ));
        assert!(!Flavour::Ocisource.first_layer_only());
    }

    #[test]
    fn annotations_opt_in_to_the_extras() {
        let (obj, flavour) =
            flux("{ocisource.dev/layers: all, ocisource.dev/platform: linux/arm64}").view();
        assert_eq!(obj.spec.platform.as_deref(), Some("linux/arm64"));
        assert!(!flavour.first_layer_only());
        assert_eq!(
            flavour.options_note().as_deref(),
            Some("layers=all,platform=linux/arm64")
        );
    }

    #[test]
    fn a_bad_annotation_names_itself() {
        let invalid = |flavour: Flavour| match flavour {
            Flavour::Flux(FluxOptions {
                invalid: Some((annotation, message)),
                ..
            }) => format!("{annotation}: {message}"),
            other => panic!("no invalid annotation in {other:?}"),
        };
        let (_, flavour) = flux("{ocisource.dev/layers: every}").view();
        let err = invalid(flavour);
        assert!(
            err.starts_with("metadata.annotations[ocisource.dev/layers]: 'every' is not"),
            "{err}"
        );
        let (_, flavour) = flux("{ocisource.dev/platform: 'linux'}").view();
        let err = invalid(flavour);
        assert!(
            err.starts_with("metadata.annotations[ocisource.dev/platform]:"),
            "{err}"
        );
    }

    #[test]
    fn the_wire_form_is_fluxs() {
        let obj = flux("{}");
        let wire = serde_json::to_value(&obj).unwrap();
        assert_eq!(wire["apiVersion"], "source.toolkit.fluxcd.io/v1");
        assert_eq!(wire["spec"]["layerSelector"]["operation"], "copy");
        assert!(wire["spec"].get("platform").is_none());
    }
}
