//! The condition vocabulary of `domain::status`: the types ocisource owns, their status
//! values, the reasons the fold writes itself, and the pure `Condition`. Names only, no
//! rules; nothing here imports kube, k8s-openapi, tokio or axum.

use chrono::{DateTime, Utc};

/// Reasons this module writes itself; the full list is `api::conditions::reason`.
pub mod reason {
    /// The reconcile or step succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Work in progress.
    pub const PROGRESSING: &str = "Progressing";
    /// Failed, will be retried with backoff.
    pub const PROGRESSING_WITH_RETRY: &str = "ProgressingWithRetry";
    /// Upstream moved to a revision that is not stored yet.
    pub const NEW_REVISION: &str = "NewRevision";
    /// Event reason for a newly stored artifact digest.
    pub const NEW_ARTIFACT: &str = "NewArtifact";
    /// ExternalArtifact `Ready` reason when the source failed to fetch.
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// ExternalArtifact `Ready` reason when the source failed to store.
    pub const STORAGE_OPERATION_FAILED: &str = "StorageOperationFailed";
    /// ExternalArtifact `Ready` reason when verification failed.
    pub const VERIFICATION_FAILED: &str = "VerificationFailed";
}

/// The condition types ocisource owns, in the order they are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConditionType {
    /// Summary.
    Ready,
    /// In progress or retrying.
    Reconciling,
    /// Cannot progress until the spec changes.
    Stalled,
    /// Resolving or pulling failed (negative polarity: True means failed).
    FetchFailed,
    /// Storing failed (negative polarity).
    StorageOperationFailed,
    /// The stored artifact is behind upstream (negative polarity).
    ArtifactOutdated,
    /// An artifact is stored.
    ArtifactInStorage,
    /// Signature verification result.
    SourceVerified,
}

impl ConditionType {
    /// Every type, in the order they are written.
    pub const ALL: [ConditionType; 8] = [
        Self::Ready,
        Self::Reconciling,
        Self::Stalled,
        Self::FetchFailed,
        Self::StorageOperationFailed,
        Self::ArtifactOutdated,
        Self::ArtifactInStorage,
        Self::SourceVerified,
    ];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Reconciling => "Reconciling",
            Self::Stalled => "Stalled",
            Self::FetchFailed => "FetchFailed",
            Self::StorageOperationFailed => "StorageOperationFailed",
            Self::ArtifactOutdated => "ArtifactOutdated",
            Self::ArtifactInStorage => "ArtifactInStorage",
            Self::SourceVerified => "SourceVerified",
        }
    }

    /// Parses a wire name; `None` for types ocisource does not own.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::True, Self::False, Self::Unknown]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// One condition, as the domain sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Type.
    pub type_: ConditionType,
    /// Status.
    pub status: ConditionStatus,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// `metadata.generation` this condition was computed for.
    pub observed_generation: i64,
    /// When `status` last changed.
    pub last_transition_time: DateTime<Utc>,
}
