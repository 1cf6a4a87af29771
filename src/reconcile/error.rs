//! Reconcile errors: each knows the condition it is reported under (the failed step), its
//! reason, and what happens next (stall until the spec changes, or retry with backoff),
//! as Flux's `internal/error` does. Messages join the source chain with ": ".

use std::time::Duration;

use crate::api::conditions::reason;
use crate::api::validate::InvalidSpec;
use crate::api::Flavour;
use crate::domain::desired::Desired;
use crate::domain::flux_text;
use crate::domain::reference::RefError;
use crate::domain::semver_masterminds::constraint_error;
use crate::domain::status::{Disposition, Event, EventType, FailedStep, Failure};
use crate::domain::verification::PolicyError;
use crate::pipeline::{PipelineError, PipelineErrorKind};
use crate::ports::{
    CloudLoginError, RegistryError, SecretsError, StoreError, VerifyFailure, VerifyFailureKind,
};

/// A failed reconcile of one OCIRepository.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The spec is invalid; nothing helps until it changes.
    #[error(transparent)]
    InvalidSpec(#[from] InvalidSpec),
    /// A referenced Secret or ServiceAccount could not be read.
    #[error("failed to read {field}")]
    Secret {
        /// The spec field naming it, e.g. `spec.secretRef`.
        field: &'static str,
        /// Cause.
        #[source]
        source: SecretsError,
    },
    /// A referenced Secret's content is unusable.
    #[error("invalid {field} '{secret}': {problem}")]
    SecretContent {
        /// The spec field naming it.
        field: &'static str,
        /// Secret name.
        secret: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// The cloud identity could not log in to the registry (`spec.provider`).
    #[error(transparent)]
    CloudLogin(#[from] CloudLoginError),
    /// The registry client could not be built (bad CA, bad proxy URL).
    #[error("failed to configure the registry client")]
    Client(#[source] RegistryError),
    /// Resolving, fetching or storing failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// `spec.verify` is unusable.
    #[error("invalid spec.verify")]
    VerifyPolicy(#[source] PolicyError),
    /// Signature verification failed.
    #[error(transparent)]
    Verify(#[from] VerifyFailure),
    /// The reconcile took longer than `spec.timeout`.
    #[error("failed to reconcile within spec.timeout ({0:?}); the last artifact stays served")]
    Timeout(Duration),
    /// The artifact store failed.
    #[error(transparent)]
    Storage(#[from] StoreError),
}

/// The one error-chain formatter (`domain::error_chain::chain`), kept under this path for
/// the controller's call sites.
pub use crate::domain::error_chain::chain;

impl ReconcileError {
    fn classify(&self) -> (FailedStep, &'static str, Disposition) {
        use Disposition::{Retry, Stalled};
        use FailedStep::{Fetch, Storage, Verify};
        match self {
            Self::InvalidSpec(e) => (Fetch, e.reason(), Stalled),
            Self::Secret { .. }
            | Self::SecretContent { .. }
            | Self::CloudLogin(_)
            | Self::Client(_) => (Fetch, reason::AUTHENTICATION_FAILED, Retry),
            Self::Pipeline(e) => match e.kind() {
                PipelineErrorKind::Authentication => (Fetch, reason::AUTHENTICATION_FAILED, Retry),
                PipelineErrorKind::Pull => (Fetch, reason::OCI_ARTIFACT_PULL_FAILED, Retry),
                PipelineErrorKind::LayerOperation => {
                    (Fetch, reason::OCI_ARTIFACT_LAYER_OPERATION_FAILED, Retry)
                }
                PipelineErrorKind::Storage => (Storage, reason::STORAGE_OPERATION_FAILED, Retry),
                PipelineErrorKind::Read => (Fetch, reason::READ_OPERATION_FAILED, Retry),
            },
            Self::VerifyPolicy(_) => (Verify, reason::VERIFICATION_ERROR, Stalled),
            Self::Verify(e) if e.kind() == VerifyFailureKind::Spec => {
                (Verify, reason::VERIFICATION_ERROR, Stalled)
            }
            Self::Verify(_) => (Verify, reason::VERIFICATION_ERROR, Retry),
            Self::Timeout(_) => (Fetch, reason::OCI_ARTIFACT_PULL_FAILED, Retry),
            Self::Storage(_) => (Storage, reason::STORAGE_OPERATION_FAILED, Retry),
        }
    }

    /// The condition reason this error is reported with.
    pub fn reason(&self) -> &'static str {
        self.classify().1
    }

    /// Stalled (wait for a spec change) or retry.
    pub fn disposition(&self) -> Disposition {
        self.classify().2
    }

    /// Flux's source-controller's message for this error, where ocisource words it
    /// differently and Flux's text is known (tests/cluster_drop_in_failures.rs compares
    /// the two controllers); `None` where [`chain`] is already Flux's text or Flux's
    /// comes from go-containerregistry (see docs/differences-from-flux.md, drop-in
    /// failure statuses). `reference` is the resolved reference as Flux prints it
    /// (`host/repo:tag`), `keys` says whether `spec.verify` names public keys.
    pub fn flux_message(&self, url: &str, reference: Option<&str>, keys: bool) -> Option<String> {
        match self {
            Self::InvalidSpec(e) if e.reason() == reason::URL_INVALID => flux_url_problem(url)
                .map(|problem| format!("URL validation failed for '{url}': {problem}")),
            // go-containerregistry's words: its GET fallback's error, or its ping's dial errors.
            Self::Pipeline(PipelineError::Resolve { source, .. }) => source
                .registry_text
                .as_ref()
                .map(|text| format!("failed to determine artifact digest: {text}")),
            // Masterminds/semver's refusal, where it would refuse the range too.
            Self::Pipeline(PipelineError::Semver {
                url,
                source: RefError::Semver { range, .. },
            }) => constraint_error(range).map(|e| {
                format!("failed to determine the artifact tag for '{url}': semver '{range}' parse error: {e}")
            }),
            Self::Pipeline(PipelineError::NoMatchingTag { url, range, .. }) => Some(format!(
                "failed to determine the artifact tag for '{url}': no match found for semver: {range}"
            )),
            // With public keys, source-controller tries each and drops its error: whatever
            // failed (no signature, a bad one, the registry), it reports no match.
            Self::Verify(e) if keys && e.kind() != VerifyFailureKind::Spec => {
                reference.map(|r| {
                    format!(
                        "failed to verify the signature using provider 'cosign': no matching signatures were found for '{r}'"
                    )
                })
            }
            Self::Secret {
                field: "spec.secretRef",
                source: SecretsError::NotFound { namespace, name },
            } => Some(format!(
                "failed to get credential: failed to get secret '{namespace}/{name}': secrets \"{name}\" not found"
            )),
            _ => None,
        }
    }

    /// The Trace event source-controller records before this failure, where it records
    /// one: `auth secret 'NAME' not found` when `spec.secretRef` names a missing Secret.
    pub fn trace_event(&self) -> Option<Event> {
        match self {
            Self::Secret {
                field: "spec.secretRef",
                source: SecretsError::NotFound { name, .. },
            } => Some(Event {
                type_: EventType::Trace,
                reason: reason::AUTHENTICATION_FAILED.into(),
                message: format!("auth secret '{name}' not found"),
                artifact: None,
            }),
            _ => None,
        }
    }

    /// The failure (of the object with `spec.url` `url`, and `desired`, its spec as the
    /// door checked it when it was valid) as the status fold wants it, worded for
    /// `flavour`: Flux's own kind carries Flux's message where [`Self::flux_message`]
    /// knows it. The URL is the one the door parsed, never parsed again.
    pub fn failure_as(
        &self,
        flavour: &Flavour,
        url: &str,
        new_revision: Option<String>,
        desired: Option<&Desired>,
    ) -> Failure {
        let reference = new_revision
            .as_deref()
            .zip(desired)
            .map(|(r, d)| flux_text::reference(&d.url, r));
        let mut failure = self.failure(new_revision);
        if let Flavour::Flux(_) = flavour {
            let keys = desired
                .and_then(|d| d.verify.as_ref())
                .is_some_and(|v| v.secret.is_some());
            if let Some(message) = self.flux_message(url, reference.as_deref(), keys) {
                failure.message = message;
            }
            // A registry's 401/403 is a pull failure to Flux (AuthenticationFailed is
            // for credentials it could not build); the retry decision is unchanged.
            if let Self::Pipeline(e) = self {
                if e.kind() == PipelineErrorKind::Authentication {
                    failure.reason = reason::OCI_ARTIFACT_PULL_FAILED.to_string();
                }
            }
        }
        failure
    }

    /// The failure as the status fold wants it.
    pub fn failure(&self, new_revision: Option<String>) -> Failure {
        let (step, reason, disposition) = self.classify();
        Failure {
            step,
            reason: reason.to_string(),
            message: chain(self),
            disposition,
            new_revision,
            verification: None,
        }
    }
}

/// What Flux's `parseRepository` (go-containerregistry's `name.NewRepository`) says of
/// `url`, for the problems whose text is known here; `None` for the others.
fn flux_url_problem(url: &str) -> Option<String> {
    const REPOSITORY_CHARS: &str = "abcdefghijklmnopqrstuvwxyz0123456789_-./";
    let Some(name) = url.strip_prefix("oci://") else {
        return Some("URL must be in format 'oci://<domain>/<org>/<repo>'".into());
    };
    if name.is_empty() {
        return Some("a repository name must be specified".into());
    }
    let repository = match name.split_once('/') {
        Some((host, path)) if host == "localhost" || host.contains(['.', ':']) => path,
        _ => name,
    };
    if !(1..=255).contains(&repository.chars().count()) {
        return Some(format!(
            "repository must be between 1 and 255 characters in length: {repository}"
        ));
    }
    if repository.chars().any(|c| !REPOSITORY_CHARS.contains(c)) {
        return Some(format!(
            "repository can only contain the characters `{REPOSITORY_CHARS}`: {repository}"
        ));
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::api::flux_ocirepository::FluxOptions;
    use crate::ports::RegistryErrorKind;

    fn flux() -> Flavour {
        Flavour::Flux(FluxOptions::default())
    }

    #[test]
    fn a_missing_pull_secret_is_traced_as_source_controller_traces_it() {
        let missing = |field| ReconcileError::Secret {
            field,
            source: SecretsError::NotFound {
                namespace: "ns".into(),
                name: "absent".into(),
            },
        };
        let trace = missing("spec.secretRef").trace_event().unwrap();
        assert_eq!(
            (trace.type_, trace.reason.as_str(), trace.message.as_str()),
            (
                EventType::Trace,
                "AuthenticationFailed",
                "auth secret 'absent' not found"
            )
        );
        assert!(missing("spec.verify.secretRef").trace_event().is_none());
    }

    #[test]
    fn the_flux_flavour_words_known_failures_as_source_controller_does() {
        let no_match = ReconcileError::Pipeline(PipelineError::NoMatchingTag {
            url: "oci://r/app".into(),
            range: ">=9.0.0".into(),
            filter: String::new(),
            tags: 1,
        });
        assert_eq!(
            no_match.failure_as(&flux(), "oci://r/app", None, None).message,
            "failed to determine the artifact tag for 'oci://r/app': no match found for semver: >=9.0.0"
        );
        assert!(no_match
            .failure_as(&Flavour::Ocisource, "oci://r/app", None, None)
            .message
            .contains("no tag matches semver range '>=9.0.0' (1 tags listed)"));
        let secret = ReconcileError::Secret {
            field: "spec.secretRef",
            source: SecretsError::NotFound {
                namespace: "ns".into(),
                name: "absent".into(),
            },
        };
        assert_eq!(
            secret.failure_as(&flux(), "oci://r/app", None, None).message,
            "failed to get credential: failed to get secret 'ns/absent': secrets \"absent\" not found"
        );
        assert_eq!(
            secret
                .failure_as(&Flavour::Ocisource, "oci://r/app", None, None)
                .message,
            "failed to read spec.secretRef: secret 'ns/absent' not found"
        );
    }

    #[test]
    fn the_flux_flavour_quotes_go_containerregistrys_url_problems() {
        let message = |url: &str| {
            ReconcileError::InvalidSpec(InvalidSpec::url("bad"))
                .failure_as(&flux(), url, None, None)
                .message
        };
        assert_eq!(
            message("oci://"),
            "URL validation failed for 'oci://': a repository name must be specified"
        );
        assert_eq!(
            message("oci://r.io/app:v1"),
            "URL validation failed for 'oci://r.io/app:v1': repository can only contain the characters `abcdefghijklmnopqrstuvwxyz0123456789_-./`: app:v1"
        );
        assert_eq!(
            message("oci://r.io/"),
            "URL validation failed for 'oci://r.io/': repository must be between 1 and 255 characters in length: "
        );
        // Unknown problems keep ocisource's text.
        assert_eq!(message("oci://r.io/app"), "spec.url: bad");
    }

    #[test]
    fn a_registry_refusal_is_a_pull_failure_to_flux_only() {
        let refused = ReconcileError::Pipeline(PipelineError::Resolve {
            url: "oci://r/app".into(),
            reference: "v1".into(),
            source: RegistryError::new(RegistryErrorKind::Unauthorized, "401"),
        });
        assert_eq!(
            refused
                .failure_as(&flux(), "oci://r/app", None, None)
                .reason,
            "OCIArtifactPullFailed"
        );
        assert_eq!(
            refused
                .failure_as(&Flavour::Ocisource, "oci://r/app", None, None)
                .reason,
            "AuthenticationFailed"
        );
        assert_eq!(refused.disposition(), Disposition::Retry);
    }
}
