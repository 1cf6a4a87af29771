//! The artifact pipeline shared by `ocisource pull` and the reconciler: resolve a ref to a
//! digest, fetch the manifest (choosing a platform from an index), select layers, and
//! stream them into one stored tar.gz (or copy one layer byte for byte).
//!
//! It talks to the registry only through [`crate::ports::Registry`] and to disk only
//! through the [`crate::ports::ArtifactStore`] port. No Kubernetes types here.

mod error;
mod fetch;
mod resolve;

pub use error::{PipelineError, PipelineErrorKind};
pub use fetch::{fetch_manifest, store_layers, StoreRequest};
pub use resolve::{resolve, PinnedRef};
