//! `spec.layerSelector`: which layers of a manifest make the artifact.
//!
//! Without a selector every tar layer is merged, bottom to top. With a `mediaType`, every
//! layer of that type is merged (Flux takes only the first: ours is a superset that
//! agrees with Flux whenever one layer matches). `operation: copy` stores the first
//! matching layer byte for byte, as Flux does. With `first_only` (Flux's own
//! OCIRepository kind in drop-in mode) the selection is exactly Flux's: the first layer
//! of `mediaType`, or without one the first layer of the manifest whatever its type.
//! When nothing matches, the error names a few of the media types present (escaped:
//! they are the registry's text) and counts the rest.

use super::manifest::{Descriptor, ImageManifest};
use super::text::{bounded, printable};

/// What to do with the selected layers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LayerOperation {
    /// Merge the tar layers into one normalised tar.gz.
    #[default]
    Extract,
    /// Store the first matching layer unchanged.
    Copy,
}

/// `spec.layerSelector`, validated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LayerSelector {
    /// Only layers of this media type; `None` means every tar layer.
    pub media_type: Option<String>,
    /// Extract or copy.
    pub operation: LayerOperation,
    /// Flux's selection: only the first matching layer (the first layer at all when
    /// `media_type` is unset), for extract as for copy.
    pub first_only: bool,
}

/// The layers to fetch and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Merge these layers, given bottom first (manifest order).
    Extract(Vec<Descriptor>),
    /// Store this one layer as is.
    Copy(Descriptor),
}

impl Selection {
    /// The layers the artifact is made of, bottom first.
    pub fn layers(&self) -> &[Descriptor] {
        match self {
            Self::Extract(layers) => layers,
            Self::Copy(layer) => std::slice::from_ref(layer),
        }
    }
}

/// No layer fits the selector.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LayerError {
    /// Nothing matched.
    #[error("no layer {wanted} in the manifest; layers present: {present}")]
    NoMatch {
        /// What was looked for, e.g. "of media type 'x'".
        wanted: String,
        /// The media types present.
        present: String,
    },
}

/// True for media types that carry a tar stream (plain, gzip or zstd).
pub fn is_tar_layer(media_type: &str) -> bool {
    let base = media_type.split(';').next().unwrap_or_default();
    base.contains(".tar") || base.ends_with("tar") || base.contains("tar+") || base.contains("tar.")
}

/// How many distinct media types a no-match message names; the rest are counted.
pub const NAMED_MEDIA_TYPES: usize = 5;

/// Longest media type a no-match message shows, in bytes (the OCI spec's limit is 255
/// characters; a registry's manifest may hold anything).
const SHOWN_MEDIA_TYPE_MAX: usize = 256;

/// The media types of `layers` for a no-match message, escaped: the first
/// [`NAMED_MEDIA_TYPES`] distinct ones in manifest order, then how many other types and
/// how many layers there are, so the message stays short whatever the manifest holds
/// (12,000 layers once made a 1.9 MB message, which the API server refused).
fn present(layers: &[Descriptor]) -> String {
    let mut named: Vec<&str> = Vec::with_capacity(NAMED_MEDIA_TYPES);
    let mut others = std::collections::HashSet::new();
    for media_type in layers.iter().map(|l| l.media_type.as_str()) {
        if named.len() < NAMED_MEDIA_TYPES && !named.contains(&media_type) {
            named.push(media_type);
        } else if !named.contains(&media_type) {
            others.insert(media_type);
        }
    }
    if named.is_empty() {
        return "none".into();
    }
    let mut text = named
        .iter()
        .map(|m| bounded(m, SHOWN_MEDIA_TYPE_MAX))
        .collect::<Vec<_>>()
        .join(", ");
    if !others.is_empty() {
        text.push_str(&format!(" and {} more media types", others.len()));
    }
    if layers.len() > named.len() {
        text.push_str(&format!(" ({} layers)", layers.len()));
    }
    text
}

impl LayerSelector {
    /// Picks the layers of `manifest` this selector asks for.
    pub fn select(&self, manifest: &ImageManifest) -> Result<Selection, LayerError> {
        let matching: Vec<&Descriptor> = manifest
            .layers
            .iter()
            .filter(|l| match &self.media_type {
                Some(mt) => &l.media_type == mt,
                None => {
                    self.first_only
                        || self.operation == LayerOperation::Copy
                        || is_tar_layer(&l.media_type)
                }
            })
            .take(if self.first_only { 1 } else { usize::MAX })
            .collect();
        let no_match = || LayerError::NoMatch {
            wanted: match (&self.media_type, self.operation) {
                (Some(mt), _) => format!("of media type '{}'", printable(mt)),
                (None, _) if self.first_only => "at all".into(),
                (None, LayerOperation::Copy) => "at all".into(),
                (None, LayerOperation::Extract) => "with a tar media type".into(),
            },
            present: present(&manifest.layers),
        };
        match self.operation {
            LayerOperation::Copy => matching
                .first()
                .map(|l| Selection::Copy((*l).clone()))
                .ok_or_else(no_match),
            LayerOperation::Extract if matching.is_empty() => Err(no_match()),
            LayerOperation::Extract => {
                Ok(Selection::Extract(matching.into_iter().cloned().collect()))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::digest::Digest;
    use crate::domain::manifest::{FLUX_CONFIG, FLUX_CONTENT};
    use rstest::rstest;
    use std::collections::BTreeMap;

    fn desc(mt: &str, n: u8) -> Descriptor {
        Descriptor {
            media_type: mt.into(),
            digest: Digest::of(&[n]),
            size: 1,
            annotations: BTreeMap::new(),
            platform: None,
            artifact_type: None,
        }
    }

    fn manifest(layers: Vec<Descriptor>) -> ImageManifest {
        ImageManifest {
            schema_version: 2,
            media_type: None,
            artifact_type: None,
            config: desc(FLUX_CONFIG, 0),
            layers,
            subject: None,
            annotations: BTreeMap::new(),
        }
    }

    const HELM: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
    const OCI_GZ: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

    #[test]
    fn no_selector_takes_every_tar_layer_in_order() {
        let m = manifest(vec![
            desc(OCI_GZ, 1),
            desc("text/plain", 2),
            desc(FLUX_CONTENT, 3),
            desc("application/vnd.oci.image.layer.v1.tar", 4),
        ]);
        let Selection::Extract(got) = LayerSelector::default().select(&m).unwrap() else {
            unreachable!()
        };
        assert_eq!(
            got.iter().map(|d| d.digest.clone()).collect::<Vec<_>>(),
            vec![Digest::of(&[1]), Digest::of(&[3]), Digest::of(&[4])]
        );
    }

    #[test]
    fn media_type_selects_every_matching_layer_flux_superset() {
        let m = manifest(vec![desc(HELM, 1), desc(OCI_GZ, 2), desc(HELM, 3)]);
        let sel = LayerSelector {
            media_type: Some(HELM.into()),
            operation: LayerOperation::Extract,
            first_only: false,
        };
        assert_eq!(
            sel.select(&m).unwrap(),
            Selection::Extract(vec![desc(HELM, 1), desc(HELM, 3)])
        );
    }

    #[test]
    fn copy_takes_the_first_match() {
        let m = manifest(vec![desc(OCI_GZ, 1), desc(HELM, 2), desc(HELM, 3)]);
        let sel = LayerSelector {
            media_type: Some(HELM.into()),
            operation: LayerOperation::Copy,
            first_only: false,
        };
        assert_eq!(sel.select(&m).unwrap(), Selection::Copy(desc(HELM, 2)));
        let any = LayerSelector {
            media_type: None,
            operation: LayerOperation::Copy,
            first_only: false,
        };
        assert_eq!(any.select(&m).unwrap(), Selection::Copy(desc(OCI_GZ, 1)));
    }

    #[test]
    fn first_only_is_fluxs_selection() {
        let m = manifest(vec![
            desc("text/plain", 1),
            desc(HELM, 2),
            desc(OCI_GZ, 3),
            desc(HELM, 4),
        ]);
        let flux = LayerSelector {
            first_only: true,
            ..LayerSelector::default()
        };
        // No media type: the manifest's first layer, whatever its type (Flux's layers[0]).
        assert_eq!(
            flux.select(&m).unwrap(),
            Selection::Extract(vec![desc("text/plain", 1)])
        );
        let helm = LayerSelector {
            media_type: Some(HELM.into()),
            ..flux.clone()
        };
        assert_eq!(
            helm.select(&m).unwrap(),
            Selection::Extract(vec![desc(HELM, 2)])
        );
        let none = manifest(vec![]);
        assert_eq!(
            flux.select(&none).unwrap_err().to_string(),
            "no layer at all in the manifest; layers present: none"
        );
    }

    #[test]
    fn no_match_lists_what_is_there() {
        let m = manifest(vec![desc("text/plain", 1)]);
        let err = LayerSelector::default().select(&m).unwrap_err().to_string();
        assert_eq!(
            err,
            "no layer with a tar media type in the manifest; layers present: text/plain"
        );
        let sel = LayerSelector {
            media_type: Some(HELM.into()),
            operation: LayerOperation::Extract,
            first_only: false,
        };
        assert!(sel.select(&m).unwrap_err().to_string().contains(HELM));
    }

    fn layers(types: &[&str]) -> Vec<Descriptor> {
        types.iter().map(|t| desc(t, 1)).collect()
    }

    #[rstest]
    #[case::none(&[], "none")]
    #[case::one(&["text/plain"], "text/plain")]
    #[case::repeats_named_once(&["a/1", "a/2", "a/1"], "a/1, a/2 (3 layers)")]
    #[case::five_named(&["a/1", "a/2", "a/3", "a/4", "a/5"], "a/1, a/2, a/3, a/4, a/5")]
    #[case::the_rest_counted(
        &["a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/1", "a/7", "a/6"],
        "a/1, a/2, a/3, a/4, a/5 and 2 more media types (9 layers)"
    )]
    #[case::escaped(&["text/plain\u{1b}[2J\n"], "text/plain\\x1b[2J\\n")]
    fn present_names_a_few_media_types_and_counts_the_rest(
        #[case] types: &[&str],
        #[case] want: &str,
    ) {
        assert_eq!(present(&layers(types)), want);
    }

    #[test]
    fn a_manifest_of_12000_unselected_layers_gives_a_short_message() {
        let types: Vec<String> = (0..12_000)
            .map(|i| format!("application/vnd.example.layer.{i}+json"))
            .collect();
        let mut m = manifest(types.iter().map(|t| desc(t, 1)).collect());
        m.layers[3].media_type = "x".repeat(100_000);
        let err = LayerSelector::default().select(&m).unwrap_err().to_string();
        assert!(err.len() < 2048, "{} bytes: {err}", err.len());
        assert!(
            err.starts_with(
                "no layer with a tar media type in the manifest; layers present: \
             application/vnd.example.layer.0+json, application/vnd.example.layer.1+json, \
             application/vnd.example.layer.2+json, xxx"
            ),
            "{err}"
        );
        assert!(
            err.ends_with(
                " more bytes), application/vnd.example.layer.4+json and 11995 more media types \
                 (12000 layers)"
            ),
            "{err}"
        );
    }
}
