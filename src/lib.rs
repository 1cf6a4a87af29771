//! ocisource: a GitOps source controller that turns OCI artifacts into one normalised,
//! Flux-compatible tar.gz and publishes it as an `OCIRepository` status and a Flux
//! `ExternalArtifact`.
//!
//! The module tree follows `STYLE.md`: `domain` holds pure rules (no I/O crates),
//! `ports` the traits the pipeline and reconciler need, the adapters (`registry`,
//! `verify`, `storage`, `server`) implement them, and `app` is the only place that names
//! concrete adapters.

pub mod domain;
pub mod ports;
pub mod registry;
