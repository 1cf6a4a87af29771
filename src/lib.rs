//! ocisource: a GitOps source controller that turns OCI artifacts into one normalised,
//! Flux-compatible tar.gz and publishes it as an `OCIRepository` status and a Flux
//! `ExternalArtifact`.
//!
//! The module tree: `domain` holds pure rules (no I/O crates); `ports`
//! the traits the pipeline and reconciler need; the adapters (`registry`, `verify`,
//! `cloud`, `storage`, `server`, `archive`) implement or serve them; `pipeline` is the artifact
//! pipeline shared by the CLI and the reconciler; `reconcile` decides, `controller` does
//! the Kubernetes I/O, `oneshot` runs the same steps from files; `app` is the only place
//! that names concrete adapters.

pub mod api;
pub mod app;
pub mod archive;
pub mod cli;
pub mod cloud;
pub mod controller;
pub mod domain;
pub mod oneshot;
pub mod pipeline;
pub mod ports;
pub mod reconcile;
pub mod registry;
pub mod server;
pub mod storage;
pub mod verify;

/// Entry points for the `cargo fuzz` targets in `hack/fuzz/` to parsers that the public
/// API does not reach on their own; built only with the `fuzzing` feature (off by default).
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    pub use crate::verify::cosign_v2::check_payload_digest;

    /// The tag-or-digest check the registry adapter applies to a manifest reference.
    pub fn valid_reference(reference: &str) -> bool {
        crate::domain::reference::valid_reference(reference)
    }

    pub use crate::server::artifact_reply;
}
