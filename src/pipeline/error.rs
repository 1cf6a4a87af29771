//! Pipeline errors: which step failed, on what, and what kind of failure it is, so the
//! reconciler can pick the condition reason and whether to retry.

use crate::archive::ArchiveError;
use crate::domain::layers::LayerError;
use crate::domain::manifest::ManifestError;
use crate::domain::reference::RefError;
use crate::ports::StoreError;
use crate::ports::{RegistryError, RegistryErrorKind};

/// A failed pipeline step.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// Resolving the ref (HEAD, tag listing) failed.
    #[error("failed to resolve '{reference}' in {url}")]
    Resolve {
        /// Repository URL.
        url: String,
        /// The tag, digest or range.
        reference: String,
        /// Cause.
        #[source]
        source: RegistryError,
    },
    /// Listing the tags for a semver ref failed (Flux: `ReadOperationFailed`).
    #[error("failed to determine the artifact tag for '{url}': failed to list tags")]
    ListTags {
        /// Repository URL.
        url: String,
        /// Cause.
        #[source]
        source: RegistryError,
    },
    /// The semver range or filter does not compile (found after listing the tags, as in
    /// Flux: retried, not stalled).
    #[error("failed to determine the artifact tag for '{url}'")]
    Semver {
        /// Repository URL.
        url: String,
        /// What is wrong with the range or filter.
        #[source]
        source: RefError,
    },
    /// No tag satisfies the semver range (Flux: `ReadOperationFailed`).
    #[error("failed to determine the artifact tag for '{url}': no tag matches semver range '{range}'{filter} ({tags} tags listed)")]
    NoMatchingTag {
        /// Repository URL.
        url: String,
        /// The range.
        range: String,
        /// ` with filter '<re>'`, or empty.
        filter: String,
        /// How many tags the repository has.
        tags: usize,
    },
    /// Fetching the manifest failed.
    #[error("failed to fetch manifest {digest} from {url}")]
    FetchManifest {
        /// Repository URL.
        url: String,
        /// Manifest digest.
        digest: String,
        /// Cause.
        #[source]
        source: RegistryError,
    },
    /// The manifest cannot be used.
    #[error("failed to use manifest {digest} from {url}")]
    Manifest {
        /// Repository URL.
        url: String,
        /// Manifest digest.
        digest: String,
        /// Cause.
        #[source]
        source: ManifestError,
    },
    /// The layer selector picked nothing.
    #[error("failed to select layers of manifest {digest}")]
    Layers {
        /// Manifest digest.
        digest: String,
        /// Cause.
        #[source]
        source: LayerError,
    },
    /// Downloading a layer failed.
    #[error("failed to pull layer {layer} from {url}")]
    Blob {
        /// Repository URL.
        url: String,
        /// Layer digest.
        layer: String,
        /// Cause.
        #[source]
        source: RegistryError,
    },
    /// A layer could not be merged (hostile or malformed content).
    #[error("failed to unpack layers of manifest {digest}")]
    Archive {
        /// Manifest digest.
        digest: String,
        /// Cause.
        #[source]
        source: ArchiveError,
    },
    /// Writing the artifact failed.
    #[error("failed to store artifact")]
    Storage(#[from] StoreError),
    /// A worker thread failed unexpectedly.
    #[error("failed to run the unpacking worker: {0}")]
    Worker(String),
}

/// What kind of failure, for condition reasons and retry decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipelineErrorKind {
    /// Credentials were refused.
    Authentication,
    /// The registry could not be reached or answered wrongly; retrying may help.
    Pull,
    /// The artifact's content or selection is unusable: a new artifact is needed.
    LayerOperation,
    /// Local disk failed.
    Storage,
    /// The ref could not be read into a tag (Flux's `ReadOperationFailed`); retried.
    Read,
}

impl PipelineError {
    /// A failed merge of the layers of manifest `digest`; when it failed writing to the
    /// store (a full disk), the storage failure behind it, with its path.
    pub fn from_archive(digest: String, source: ArchiveError) -> Self {
        match source {
            ArchiveError::Write { source } => match StoreError::recover(source) {
                Ok(storage) => Self::Storage(storage),
                Err(source) => Self::Archive {
                    digest,
                    source: ArchiveError::Write { source },
                },
            },
            source => Self::Archive { digest, source },
        }
    }

    /// A failed copy into the store: the storage failure it carries, else a worker failure.
    pub fn from_write(e: std::io::Error) -> Self {
        match StoreError::recover(e) {
            Ok(storage) => Self::Storage(storage),
            Err(e) => Self::Worker(e.to_string()),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> PipelineErrorKind {
        let from_registry = |e: &RegistryError| match e.kind {
            RegistryErrorKind::Unauthorized => PipelineErrorKind::Authentication,
            _ => PipelineErrorKind::Pull,
        };
        match self {
            Self::Resolve { source, .. } | Self::FetchManifest { source, .. } => {
                from_registry(source)
            }
            Self::Blob { source, .. } => from_registry(source),
            Self::ListTags { .. } | Self::NoMatchingTag { .. } | Self::Semver { .. } => {
                PipelineErrorKind::Read
            }
            Self::Archive { source, .. } if source.is_output_failure() => {
                PipelineErrorKind::Storage
            }
            Self::Archive { source, .. } if source.is_input_failure() => PipelineErrorKind::Pull,
            Self::Manifest { .. } | Self::Layers { .. } | Self::Archive { .. } => {
                PipelineErrorKind::LayerOperation
            }
            Self::Storage(_) | Self::Worker(_) => PipelineErrorKind::Storage,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::archive::EntryPath;
    use crate::domain::digest::Digest;

    fn kind_of(source: ArchiveError) -> PipelineErrorKind {
        PipelineError::Archive {
            digest: "sha256:m".into(),
            source,
        }
        .kind()
    }

    #[test]
    fn archive_failures_map_to_the_side_that_failed() {
        let layer = Digest::of(b"layer");
        let hostile = ArchiveError::NameTooLong {
            layer: layer.clone(),
            path: EntryPath::from("a"),
            bytes: 1 << 28,
            limit: 4096,
        };
        assert_eq!(kind_of(hostile), PipelineErrorKind::LayerOperation);
        let disk = ArchiveError::Write {
            source: std::io::Error::other("no space left on device"),
        };
        assert_eq!(kind_of(disk), PipelineErrorKind::Storage);
        let stream = ArchiveError::Read {
            layer,
            source: std::io::Error::other("connection reset"),
        };
        assert_eq!(kind_of(stream), PipelineErrorKind::Pull);
    }
}
