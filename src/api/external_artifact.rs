//! Flux's `ExternalArtifact` (`source.toolkit.fluxcd.io/v1`, RFC-0012) as a kube type,
//! matching Flux's CRD, so ocisource can publish what kustomize-controller and
//! helm-controller consume; plus the builders that derive one from an `OCIRepository`.
//! Flux's source-controller installs this CRD; ocisource never does. Wire types only: no
//! kube client.

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
        let namespace = source
            .metadata
            .namespace
            .clone()
            .ok_or(missing("namespace"))?;
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
            spec: ExternalArtifactSpec {
                source_ref: Some(source_ref),
            },
            status: None,
        })
    }
}

impl ExternalArtifactStatus {
    /// The status following `source`'s: its last stored artifact, `Ready` (True only when
    /// the source is Ready for its current generation, Unknown while a new generation or
    /// revision is under way, False with an RFC-0012 reason on failure) and
    /// `SourceVerified`, each condition carrying the ExternalArtifact's own `generation`.
    pub fn from_source(source: &OciRepository, generation: i64) -> Self {
        let Some(status) = &source.status else {
            return Self::default();
        };
        let pure = conditions::from_k8s(&status.conditions);
        let state = status::SourceState {
            conditions: &pure,
            generation: source.metadata.generation.unwrap_or(0),
            observed_generation: status.observed_generation,
        };
        Self {
            artifact: status.artifact.clone(),
            conditions: conditions::all_to_k8s(&status::external_artifact_conditions(
                state, generation,
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    const SOURCE: &str = r#"
apiVersion: ocisource.dev/v1beta1
kind: OCIRepository
metadata: {name: podinfo, namespace: apps, uid: 0b7f6c1e-1111-2222-3333-444455556666, generation: 4}
spec: {interval: 5m, url: "oci://ghcr.io/stefanprodan/manifests/podinfo"}
status:
  observedGeneration: 4
  url: http://ocisource.flux-system.svc/ocirepository/apps/podinfo/latest.tar.gz
  artifact:
    path: ocirepository/apps/podinfo/3b1c.tar.gz
    url: http://ocisource.flux-system.svc/ocirepository/apps/podinfo/3b1c.tar.gz
    revision: latest@sha256:3b1c
    digest: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    lastUpdateTime: "2026-07-02T10:00:00Z"
    size: 1234
    metadata: {org.opencontainers.image.revision: "main@sha1:abc"}
  conditions:
  - {type: Ready, status: "False", reason: ArchiveOperationFailed, message: "failed to write", observedGeneration: 4, lastTransitionTime: "2026-07-02T10:05:00Z"}
  - {type: StorageOperationFailed, status: "True", reason: ArchiveOperationFailed, message: "failed to write", observedGeneration: 4, lastTransitionTime: "2026-07-02T10:05:00Z"}
  - {type: ArtifactInStorage, status: "True", reason: Succeeded, message: "stored artifact for revision 'latest@sha256:3b1c'", observedGeneration: 4, lastTransitionTime: "2026-07-02T10:00:00Z"}
"#;

    fn source() -> OciRepository {
        serde_yaml::from_str(SOURCE).unwrap()
    }

    #[test]
    fn flux_shaped_status_round_trips() {
        let repo = source();
        let status = repo.status.as_ref().unwrap();
        assert_eq!(status.artifact.as_ref().unwrap().size, Some(1234));
        let again: OciRepository =
            serde_json::from_value(serde_json::to_value(&repo).unwrap()).unwrap();
        assert_eq!(again, repo);
    }

    #[test]
    fn for_source_names_the_source_and_is_owned_by_it() {
        let ea = ExternalArtifact::for_source(&source()).unwrap();
        assert_eq!(ea.metadata.name.as_deref(), Some("podinfo"));
        assert_eq!(ea.metadata.namespace.as_deref(), Some("apps"));
        let owner = &ea.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.api_version.as_str()),
            ("OCIRepository", "ocisource.dev/v1beta1")
        );
        assert_eq!(owner.uid, "0b7f6c1e-1111-2222-3333-444455556666");
        assert_eq!(owner.controller, Some(true));
        let source_ref = ea.spec.source_ref.unwrap();
        assert_eq!(
            (source_ref.kind.as_str(), source_ref.name.as_str()),
            ("OCIRepository", "podinfo")
        );
        let wire = serde_json::to_value(ExternalArtifact::for_source(&source()).unwrap()).unwrap();
        assert_eq!(wire["apiVersion"], "source.toolkit.fluxcd.io/v1");
        assert_eq!(wire["kind"], "ExternalArtifact");
        assert_eq!(
            wire["spec"]["sourceRef"]["apiVersion"],
            "ocisource.dev/v1beta1"
        );
    }

    #[test]
    fn for_source_refuses_an_object_without_uid() {
        let mut repo = source();
        repo.metadata.uid = None;
        assert_eq!(
            ExternalArtifact::for_source(&repo),
            Err(ExternalArtifactError::MissingMetadata { field: "uid" })
        );
    }

    #[test]
    fn status_mirrors_artifact_and_maps_ready_reason() {
        let status = ExternalArtifactStatus::from_source(&source(), 1);
        assert_eq!(status.artifact, source().status.unwrap().artifact);
        assert_eq!(status.conditions.len(), 1);
        let ready = &status.conditions[0];
        assert_eq!(ready.observed_generation, Some(1));
        assert_eq!(
            (ready.type_.as_str(), ready.status.as_str()),
            ("Ready", "False")
        );
        assert_eq!(ready.reason, "StorageOperationFailed");
        assert_eq!(ready.message, "failed to write");
    }

    #[test]
    fn schema_matches_flux_external_artifact_fields() {
        let crd = serde_json::to_value(ExternalArtifact::crd()).unwrap();
        assert_eq!(
            crd["metadata"]["name"],
            "externalartifacts.source.toolkit.fluxcd.io"
        );
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        let source_ref = &schema["spec"]["properties"]["sourceRef"];
        let keys: Vec<&str> = source_ref["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["apiVersion", "kind", "name", "namespace"]);
        assert_eq!(source_ref["required"], serde_json::json!(["kind", "name"]));
        let artifact = &schema["status"]["properties"]["artifact"];
        assert_eq!(
            artifact["required"],
            serde_json::json!(["digest", "lastUpdateTime", "path", "revision", "url"])
        );
    }
}
