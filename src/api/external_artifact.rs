//! Flux's `ExternalArtifact` (`source.toolkit.fluxcd.io/v1`, RFC-0012) as a kube type,
//! matching Flux's CRD, so ocisource can publish what kustomize-controller and
//! helm-controller consume; plus the builders that derive one from an `OCIRepository`.
//! ocisource does not install this CRD by default. Wire types only: no kube client.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::{CustomResource, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::artifact::Artifact;
use super::conditions;
use super::ocirepository::OciRepository;
use crate::domain::status;

/// ExternalArtifactSpec defines the desired state of ExternalArtifact.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "ExternalArtifact",
    plural = "externalartifacts",
    namespaced,
    status = "ExternalArtifactStatus",
    shortname = "ea",
    doc = "ExternalArtifact is the Schema for the external artifacts API",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ExternalArtifactSpec {
    /// SourceRef points to the Kubernetes custom resource for which the artifact is
    /// generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<NamespacedObjectKindReference>,
}

/// NamespacedObjectKindReference contains enough information to locate the typed
/// referenced Kubernetes resource object in any namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedObjectKindReference {
    /// API version of the referent, if not specified the Kubernetes preferred version
    /// will be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: String,
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent, when not specified it acts as LocalObjectReference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// ExternalArtifactStatus defines the observed state of ExternalArtifact.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalArtifactStatus {
    /// Artifact represents the output of an ExternalArtifact reconciliation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// Conditions holds the conditions for the ExternalArtifact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// Why an ExternalArtifact could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExternalArtifactError {
    /// The source object lacks metadata needed for the name or the ownerReference (it was
    /// not read from the API server).
    #[error("failed to build ExternalArtifact: the OCIRepository has no metadata.{field}")]
    MissingMetadata {
        /// `name`, `namespace` or `uid`.
        field: &'static str,
    },
}

impl ExternalArtifact {
    /// The ExternalArtifact for `source`: same name and namespace, `spec.sourceRef` naming
    /// it, and a controller ownerReference so deletion cascades. Status is not set.
    pub fn for_source(source: &OciRepository) -> Result<Self, ExternalArtifactError> {
        let missing = |field| ExternalArtifactError::MissingMetadata { field };
        let name = source.metadata.name.clone().ok_or(missing("name"))?;
        let namespace = source.metadata.namespace.clone().ok_or(missing("namespace"))?;
        let owner = source.controller_owner_ref(&()).ok_or(missing("uid"))?;
        if owner.uid.is_empty() {
            return Err(missing("uid"));
        }
        let source_ref = NamespacedObjectKindReference {
            api_version: Some(OciRepository::api_version(&()).into_owned()),
            kind: OciRepository::kind(&()).into_owned(),
            name: name.clone(),
            namespace: Some(namespace.clone()),
        };
        Ok(ExternalArtifact {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            spec: ExternalArtifactSpec { source_ref: Some(source_ref) },
            status: None,
        })
    }
}

impl ExternalArtifactStatus {
    /// The status mirroring `source`'s: its artifact, `Ready` with RFC-0012 reasons, and
    /// `SourceVerified`.
    pub fn from_source(source: &OciRepository) -> Self {
        let Some(status) = &source.status else {
            return Self::default();
        };
        let pure = conditions::from_k8s(&status.conditions);
        Self {
            artifact: status.artifact.clone(),
            conditions: conditions::all_to_k8s(&status::external_artifact_conditions(&pure)),
        }
    }
}
