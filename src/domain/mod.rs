//! Pure rules of ocisource: references, cloud registry hosts, digests, manifests, tag and layer choice,
//! ignore rules, limits, Kubernetes names, durations, verification policy, condition
//! summary, requeue policy, messages made fit to show.
//! Nothing here performs I/O, and nothing here may import kube, tokio, reqwest, axum or
//! sigstore crates, nor another project module (`hack/layers.py --check` enforces it).

pub mod cloud_hosts;
pub mod desired;
pub mod digest;
pub mod docker_config;
pub mod duration;
pub mod error_chain;
pub mod fifo;
pub mod flux_text;
pub mod ignore;
pub mod label_selector;
pub mod layers;
pub mod limits;
pub mod manifest;
pub mod names;
pub mod reference;
pub mod requeue;
pub mod secret;
pub mod semver_masterminds;
pub mod semver_range;
pub mod status;
pub mod text;
pub mod verification;
