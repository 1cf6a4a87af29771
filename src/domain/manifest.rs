//! OCI and Docker manifest wire types, media types, and the choice of a platform from an
//! image index. Parsing only: fetching and digest checks live in the registry adapter.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::digest::Digest;

/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker v2 schema 2 manifest.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list.
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Every manifest type ocisource asks for, for the `Accept` header.
pub const ACCEPTED_MANIFESTS: [&str; 4] = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

/// Config media type of `flux push artifact`.
pub const FLUX_CONFIG: &str = "application/vnd.cncf.flux.config.v1+json";
/// Layer media type of `flux push artifact`.
pub const FLUX_CONTENT: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
/// The empty OCI config.
pub const OCI_EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";

/// A content descriptor: what a manifest says about a blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the blob.
    pub media_type: String,
    /// Digest of the blob.
    pub digest: Digest,
    /// Size of the blob in bytes.
    pub size: u64,
    /// Annotations on the descriptor.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Platform, on index entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Artifact type, on referrers index entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
}

/// An image manifest (OCI or Docker v2: the same fields).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Always 2.
    pub schema_version: u32,
    /// Media type, when the manifest states it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Artifact type (OCI 1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// Config blob.
    pub config: Descriptor,
    /// Layers, bottom first.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    /// Subject (OCI 1.1 referrers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    /// Manifest annotations: copied into `status.artifact.metadata`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An image index or Docker manifest list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageIndex {
    /// Always 2.
    pub schema_version: u32,
    /// Media type, when the index states it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Entries.
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A platform as written in an index (`os`, `architecture`, optional `variant`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// Operating system, e.g. `linux`.
    pub os: String,
    /// CPU architecture, e.g. `amd64`.
    pub architecture: String,
    /// Variant, e.g. `v8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl Platform {
    /// Parses `os/arch[/variant]`.
    pub fn parse(s: &str) -> Result<Self, ManifestError> {
        let parts: Vec<&str> = s.split('/').collect();
        match parts.as_slice() {
            [os, arch] if !os.is_empty() && !arch.is_empty() => Ok(Self {
                os: (*os).into(),
                architecture: (*arch).into(),
                variant: None,
            }),
            [os, arch, v] if !os.is_empty() && !arch.is_empty() && !v.is_empty() => Ok(Self {
                os: (*os).into(),
                architecture: (*arch).into(),
                variant: Some((*v).into()),
            }),
            _ => Err(ManifestError::Platform(s.to_string())),
        }
    }

    fn matches(&self, wanted: &Platform) -> bool {
        self.os == wanted.os
            && self.architecture == wanted.architecture
            && (wanted.variant.is_none() || self.variant == wanted.variant)
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// A manifest as fetched: either an image manifest or an index.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Manifest {
    /// An image manifest.
    Image(ImageManifest),
    /// An index; a platform must be chosen.
    Index(ImageIndex),
}

/// Why a manifest cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ManifestError {
    /// Unknown media type.
    #[error("unsupported manifest media type '{0}': expected an OCI or Docker v2 image manifest or index")]
    MediaType(String),
    /// Body is not valid JSON of the expected shape.
    #[error("failed to parse manifest: {0}")]
    Parse(String),
    /// No entry for the wanted platform.
    #[error("no manifest for platform {wanted} in the image index; platforms present: {present}")]
    NoPlatform {
        /// The platform asked for.
        wanted: String,
        /// The platforms the index has, comma-separated.
        present: String,
    },
    /// A malformed `--platform` or `spec.platform`.
    #[error("invalid platform '{0}': expected os/arch or os/arch/variant, e.g. linux/amd64")]
    Platform(String),
}

impl Manifest {
    /// Parses a manifest body, using the `Content-Type` the registry sent and the
    /// `mediaType` field inside the body.
    pub fn parse(content_type: &str, body: &[u8]) -> Result<Self, ManifestError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Probe {
            media_type: Option<String>,
            manifests: Option<serde_json::Value>,
        }
        let probe: Probe =
            serde_json::from_slice(body).map_err(|e| ManifestError::Parse(e.to_string()))?;
        let ct = content_type.split(';').next().unwrap_or_default().trim();
        let media = probe
            .media_type
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or(ct);
        let parse_err = |e: serde_json::Error| ManifestError::Parse(e.to_string());
        match media {
            OCI_MANIFEST | DOCKER_MANIFEST => Ok(Self::Image(
                serde_json::from_slice(body).map_err(parse_err)?,
            )),
            OCI_INDEX | DOCKER_LIST => Ok(Self::Index(
                serde_json::from_slice(body).map_err(parse_err)?,
            )),
            // Some registries answer with a generic type; the body's shape decides.
            "" | "application/json" | "application/octet-stream" if probe.manifests.is_some() => {
                Ok(Self::Index(
                    serde_json::from_slice(body).map_err(parse_err)?,
                ))
            }
            "" | "application/json" | "application/octet-stream" => Ok(Self::Image(
                serde_json::from_slice(body).map_err(parse_err)?,
            )),
            other => Err(ManifestError::MediaType(other.to_string())),
        }
    }
}

impl ImageIndex {
    /// The entry for `wanted`, or an error listing the platforms present.
    pub fn select(&self, wanted: &Platform) -> Result<&Descriptor, ManifestError> {
        self.manifests
            .iter()
            .find(|d| d.platform.as_ref().is_some_and(|p| p.matches(wanted)))
            .ok_or_else(|| ManifestError::NoPlatform {
                wanted: wanted.to_string(),
                present: {
                    let all: Vec<String> = self
                        .manifests
                        .iter()
                        .filter_map(|d| d.platform.as_ref().map(ToString::to_string))
                        .collect();
                    if all.is_empty() {
                        "none".into()
                    } else {
                        all.join(", ")
                    }
                },
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(platforms: &[&str]) -> ImageIndex {
        ImageIndex {
            schema_version: 2,
            media_type: Some(OCI_INDEX.into()),
            manifests: platforms
                .iter()
                .map(|p| Descriptor {
                    media_type: OCI_MANIFEST.into(),
                    digest: Digest::of(p.as_bytes()),
                    size: 1,
                    annotations: BTreeMap::new(),
                    platform: Some(Platform::parse(p).unwrap()),
                    artifact_type: None,
                })
                .collect(),
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn index_selects_the_wanted_platform() {
        let idx = index(&["linux/arm64/v8", "linux/amd64"]);
        let got = idx
            .select(&Platform::parse("linux/amd64").unwrap())
            .unwrap();
        assert_eq!(got.digest, Digest::of(b"linux/amd64"));
        let arm = idx
            .select(&Platform::parse("linux/arm64").unwrap())
            .unwrap();
        assert_eq!(arm.digest, Digest::of(b"linux/arm64/v8"));
    }

    #[test]
    fn missing_platform_lists_those_present() {
        let err = index(&["linux/arm64", "windows/amd64"])
            .select(&Platform::parse("linux/s390x").unwrap())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no manifest for platform linux/s390x in the image index; platforms present: linux/arm64, windows/amd64"
        );
    }

    #[test]
    fn parses_by_body_media_type_then_content_type() {
        let d = Digest::of(b"x");
        let body = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"{FLUX_CONFIG}","digest":"{d}","size":1}},"layers":[]}}"#
        );
        assert!(matches!(
            Manifest::parse(OCI_MANIFEST, body.as_bytes()),
            Ok(Manifest::Image(_))
        ));
        assert!(matches!(
            Manifest::parse("application/vnd.example+json", body.as_bytes()),
            Err(ManifestError::MediaType(_))
        ));
        assert!(Platform::parse("linux").is_err());
    }
}
