//! Kubernetes wire types: the `OCIRepository` CRD (`ocisource.dev/v1beta1`), Flux's
//! own `OCIRepository` (drop-in mode), Flux's `Artifact` and `ExternalArtifact`, condition and reason names, spec validation, and the
//! RBAC rule list. Serialisation and schema only: nothing here talks to the API server,
//! and nothing here imports the reconciler, adapters, tokio or axum.

pub mod artifact;
pub mod conditions;
pub mod external_artifact;
pub mod flux_ocirepository;
pub mod ocirepository;
pub mod rbac;
pub mod validate;

pub use artifact::Artifact;
pub use external_artifact::{ExternalArtifact, ExternalArtifactSpec, ExternalArtifactStatus};
pub use flux_ocirepository::{Flavour, FluxOciRepository};
pub use ocirepository::{OciRepository, OciRepositorySpec, OciRepositoryStatus};

use kube::CustomResourceExt;

/// The `OCIRepository` CustomResourceDefinition as YAML (what `ocisource crd` prints and
/// `crds/ocirepositories.ocisource.dev.yaml` holds). The output is stable: same types,
/// same bytes.
pub fn crds_yaml() -> String {
    match serde_yaml::to_string(&OciRepository::crd()) {
        Ok(yaml) => format!("---\n{yaml}"),
        // Serialising a CRD value to YAML cannot fail; say so loudly if it ever does.
        Err(e) => format!("# failed to render the OCIRepository CRD: {e}\n"),
    }
}
