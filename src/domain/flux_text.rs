//! Texts Flux's source-controller writes where ocisource's own kind words things its own
//! way: the reference as go-containerregistry prints it, and the `Reconciling` message a
//! retried failure leaves (written by the status fold). Used for Flux's kind only (drop-in
//! mode), and checked against source-controller itself by tests/cluster_drop_in_failures.rs
//! and tests/cluster_drop_in_after.rs.

use super::reference::RepositoryUrl;

/// The reference as Flux names it (go-containerregistry's `name.Tag`/`name.Digest`):
/// `host/repo:tag` when `revision` is `tag@digest`, `host/repo@sha256:…` for a digest.
pub fn reference(url: &RepositoryUrl, revision: &str) -> String {
    let repo = format!("{}/{}", url.host, url.repository);
    match revision.split_once('@') {
        Some((tag, _)) => format!("{repo}:{tag}"),
        None => format!("{repo}@{revision}"),
    }
}

/// Where a retried failure happened, as far as Flux's progress message cares.
#[derive(Clone, Debug)]
pub struct Retried<'a> {
    /// The object's `status.observedGeneration` before this reconcile.
    pub observed_generation: Option<i64>,
    /// Its `metadata.generation`.
    pub generation: i64,
    /// The revision of the stored artifact, if there is one.
    pub stored_revision: Option<&'a str>,
    /// The upstream revision, when it was resolved before the failure, and the reference
    /// it was resolved from.
    pub resolved: Option<(&'a str, String)>,
}

/// Flux's `Reconciling` message after a failure it retries: the last progress message
/// its steps set before the failing one. Its reconcile starts with `reconciliation in
/// progress`, says `processing object: new generation A -> B` for a new generation,
/// `building artifact` when no artifact is stored, and `building artifact: new revision
/// 'REV' for 'REF'` once it resolved a revision the stored artifact does not have.
pub fn reconciling_message(r: Retried<'_>) -> String {
    if let Some((revision, reference)) = &r.resolved {
        if r.stored_revision != Some(*revision) {
            return format!("building artifact: new revision '{revision}' for '{reference}'");
        }
    }
    if r.stored_revision.is_none() {
        return "building artifact".into();
    }
    if r.observed_generation != Some(r.generation) {
        return format!(
            "processing object: new generation {} -> {}",
            r.observed_generation.unwrap_or(0),
            r.generation
        );
    }
    "reconciliation in progress".into()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reference_names_the_tag_or_the_digest() {
        let url = RepositoryUrl::parse("oci://r.io:5000/team/app").unwrap();
        assert_eq!(reference(&url, "v1@sha256:ab"), "r.io:5000/team/app:v1");
        assert_eq!(reference(&url, "sha256:ab"), "r.io:5000/team/app@sha256:ab");
    }

    fn retried(
        observed: Option<i64>,
        stored: Option<&'static str>,
        resolved: Option<&'static str>,
    ) -> String {
        reconciling_message(Retried {
            observed_generation: observed,
            generation: 2,
            stored_revision: stored,
            resolved: resolved.map(|r| (r, format!("r.io/app:{}", r.split('@').next().unwrap()))),
        })
    }

    #[test]
    fn the_last_progress_message_before_the_failing_step_is_kept() {
        // A new revision resolved before the failure (e.g. a signature that does not
        // verify), with or without a stored artifact.
        let new_revision = "building artifact: new revision 'v2@sha256:b' for 'r.io/app:v2'";
        assert_eq!(retried(Some(1), None, Some("v2@sha256:b")), new_revision);
        assert_eq!(
            retried(Some(2), Some("v1@sha256:a"), Some("v2@sha256:b")),
            new_revision
        );
        // Nothing stored: the storage step's message.
        assert_eq!(retried(Some(1), None, None), "building artifact");
        // Stored, failed before resolving (or resolved the stored revision).
        assert_eq!(
            retried(Some(1), Some("v1@sha256:a"), None),
            "processing object: new generation 1 -> 2"
        );
        assert_eq!(
            retried(None, Some("v1@sha256:a"), Some("v1@sha256:a")),
            "processing object: new generation 0 -> 2"
        );
        assert_eq!(
            retried(Some(2), Some("v1@sha256:a"), None),
            "reconciliation in progress"
        );
    }
}
