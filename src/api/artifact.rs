//! Flux's `Artifact` (the `status.artifact` of sources and of `ExternalArtifact`): where
//! the stored tar.gz is, what revision it holds and its digest. Wire type only: no I/O,
//! no kube client.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The output of the last successful reconcile, in Flux's shape, so kustomize-controller
/// and helm-controller can fetch it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Path is the relative file path of the Artifact in the storage root:
    /// `ocirepository/<namespace>/<name>/<manifest digest hex>.tar.gz`.
    pub path: String,
    /// URL is the HTTP address of the Artifact as exposed by the controller managing the
    /// Source: `http://<advertised host>/<path>`.
    pub url: String,
    /// Revision is a human-readable identifier traceable in the origin source system:
    /// `<tag>@sha256:<hex>`, `<version>@sha256:<hex>` or `sha256:<hex>`.
    pub revision: String,
    /// Digest is the digest of the file in the form of '<algorithm>:<checksum>'.
    #[schemars(regex(pattern = r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$"))]
    pub digest: String,
    /// LastUpdateTime is the timestamp corresponding to the last update of the Artifact.
    #[schemars(schema_with = "super::conditions::time_schema")]
    pub last_update_time: Time,
    /// Size is the number of bytes in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// Metadata holds upstream information such as OCI annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

impl Artifact {
    /// True when `other` describes the same stored content (same revision and file digest);
    /// the update time and URL host may differ.
    pub fn has_same_content(&self, other: &Artifact) -> bool {
        self.revision == other.revision && self.digest == other.digest && self.path == other.path
    }
}
