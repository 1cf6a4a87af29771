//! Showing work under way before a reconcile ends, as Flux patches its status at the
//! start of a reconcile and again once a new revision is found: the reconciler decides
//! what to show (`domain::status::{starting, building}`), and the caller's [`Progress`]
//! writes it (the controller patches the status and the ExternalArtifact; the one-shot
//! command shows nothing). No Kubernetes I/O here.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::api::conditions::all_to_k8s;
use crate::api::OciRepositoryStatus;
use crate::domain::reference::RepositoryUrl;
use crate::domain::status::{self, Condition};

/// Where the in-progress status goes.
#[async_trait]
pub trait Progress: Send + Sync {
    /// Shows `status` (the status before the reconcile, with in-progress conditions).
    /// Failing to show it does not stop the reconcile: the final status follows.
    async fn show(&self, status: &OciRepositoryStatus);
}

/// Shows nothing (the one-shot `ocisource reconcile -f`, whose output is the final status).
pub struct Silent;

#[async_trait]
impl Progress for Silent {
    async fn show(&self, _status: &OciRepositoryStatus) {}
}

/// The conditions shown so far in one reconcile, and the way to show more.
pub(crate) struct Announcer<'a> {
    progress: &'a dyn Progress,
    previous: &'a OciRepositoryStatus,
    before: &'a [Condition],
    generation: i64,
    now: DateTime<Utc>,
    /// What the object shows now (the previous conditions until something is shown).
    pub shown: Vec<Condition>,
}

impl<'a> Announcer<'a> {
    /// Starts the reconcile: shows Reconciling/Ready Unknown for a new object or
    /// generation, or Reconciling for a requested reconcile.
    pub(crate) async fn start(
        progress: &'a dyn Progress,
        previous: &'a OciRepositoryStatus,
        before: &'a [Condition],
        generation: i64,
        requested: bool,
        now: DateTime<Utc>,
    ) -> Announcer<'a> {
        let mut a = Announcer {
            progress,
            previous,
            before,
            generation,
            now,
            shown: before.to_vec(),
        };
        if let Some(c) = status::starting(
            before,
            previous.observed_generation,
            generation,
            requested,
            now,
        ) {
            a.show(c).await;
        }
        a
    }

    /// The upstream `revision` of `url` differs from the stored artifact (or the settings
    /// changed its content): shows ArtifactOutdated when an artifact is stored.
    pub(crate) async fn building(&mut self, url: &RepositoryUrl, revision: &str) {
        if let Some(c) = status::building(
            self.before,
            &self.shown,
            self.previous.artifact.is_some(),
            revision,
            &crate::domain::flux_text::reference(url, revision),
            self.generation,
            self.now,
        ) {
            self.show(c).await;
        }
    }

    async fn show(&mut self, conditions: Vec<Condition>) {
        if conditions == self.shown {
            return;
        }
        let status = OciRepositoryStatus {
            conditions: all_to_k8s(&conditions),
            ..self.previous.clone()
        };
        self.progress.show(&status).await;
        self.shown = conditions;
    }
}
