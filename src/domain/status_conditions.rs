//! The condition vocabulary of `domain::status`: the types ocisource owns, their status
//! values, every reason, and the pure `Condition`. Names only, no
//! rules; nothing here imports kube, k8s-openapi, tokio or axum.

use chrono::{DateTime, Utc};

/// Every condition and event reason ocisource writes, spelled as Flux spells them; event
/// reasons equal condition reasons. The one list: `api::conditions::reason` is this module.
pub mod reason {
    /// The reconcile or step succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Work in progress.
    pub const PROGRESSING: &str = "Progressing";
    /// Failed, will be retried with backoff.
    pub const PROGRESSING_WITH_RETRY: &str = "ProgressingWithRetry";
    /// Upstream moved to a revision that is not stored yet (`ArtifactOutdated`).
    pub const NEW_REVISION: &str = "NewRevision";
    /// Event reason for a newly stored artifact digest.
    pub const NEW_ARTIFACT: &str = "NewArtifact";
    /// `spec.url` is not a valid `oci://` repository URL (stalls).
    pub const URL_INVALID: &str = "URLInvalid";
    /// A spec field other than the URL is invalid (stalls).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// `spec.provider` or `spec.verify.provider` names a provider ocisource does not
    /// support yet.
    pub const PROVIDER_NOT_SUPPORTED: &str = "ProviderNotSupported";
    /// Registry login refused, or the credentials Secret is missing or malformed.
    pub const AUTHENTICATION_FAILED: &str = "AuthenticationFailed";
    /// Resolving the reference or pulling the artifact failed.
    pub const OCI_ARTIFACT_PULL_FAILED: &str = "OCIArtifactPullFailed";
    /// Selecting, extracting or copying layers failed.
    pub const OCI_ARTIFACT_LAYER_OPERATION_FAILED: &str = "OCIArtifactLayerOperationFailed";
    /// Reading a referenced Secret or ServiceAccount failed.
    pub const READ_OPERATION_FAILED: &str = "ReadOperationFailed";
    /// Signature verification failed (`SourceVerified` False).
    pub const VERIFICATION_ERROR: &str = "VerificationError";
    /// Patching the object (its status) failed.
    pub const PATCH_OPERATION_FAILED: &str = "PatchOperationFailed";
    /// ExternalArtifact `Ready` reason when the source failed to fetch.
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// Writing the artifact failed; also the ExternalArtifact `Ready` reason then.
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
