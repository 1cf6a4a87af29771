//! Pure rules of ocisource: references, digests, manifests, tag and layer choice,
//! ignore rules, limits. Nothing here performs I/O, and nothing here may import kube,
//! tokio, reqwest, axum or sigstore crates (`hack/check-domain.sh` enforces it).

pub mod digest;
pub mod ignore;
pub mod limits;
pub mod manifest;
pub mod secret;
