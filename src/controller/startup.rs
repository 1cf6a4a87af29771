//! The start-up storage check (RFC-0012): temp files left by a killed writer are removed;
//! every artifact published in an OCIRepository status is checked against its digest; a
//! tampered one is deleted so the next reconcile rebuilds it (a missing one is rebuilt
//! the same way), and folders of objects that no longer exist are removed. Disk only
//! through the `ports::ArtifactStore` port, no Kubernetes I/O: the caller lists the objects.

use std::collections::BTreeSet;

use crate::api::OciRepository;
use crate::ports::store::{object_dir, OCI_KIND_DIR};
use crate::ports::{ArtifactStore, StoreError};

/// What the check did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct StartupReport {
    /// Artifacts whose bytes did not match their published digest, deleted for rebuild.
    pub tampered: Vec<String>,
    /// Published artifacts that were missing, to be rebuilt.
    pub missing: Vec<String>,
    /// Object folders with no object, removed.
    pub orphans: Vec<String>,
    /// Temp files no writer held (left by a crash), removed.
    pub stale_temps: Vec<String>,
}

/// Checks the store against `objects` (all OCIRepositories this controller manages).
pub fn check_storage(
    storage: &dyn ArtifactStore,
    objects: &[OciRepository],
) -> Result<StartupReport, StoreError> {
    let mut report = StartupReport {
        stale_temps: storage.remove_stale_temps()?,
        ..StartupReport::default()
    };
    let mut live = BTreeSet::new();
    for obj in objects {
        let ns = obj.metadata.namespace.clone().unwrap_or_default();
        let name = obj.metadata.name.clone().unwrap_or_default();
        if let Ok(dir) = object_dir(&ns, &name) {
            live.insert(dir);
        }
        let Some(artifact) = obj.status.as_ref().and_then(|s| s.artifact.as_ref()) else {
            continue;
        };
        let Ok(digest) = artifact.digest.parse() else {
            continue;
        };
        if !storage.exists(&artifact.path) {
            report.missing.push(artifact.path.clone());
        } else if !storage.verify(&artifact.path, &digest)? {
            storage.remove_object(&artifact.path)?;
            report.tampered.push(artifact.path.clone());
        }
    }
    let mut dirs = BTreeSet::new();
    for path in storage.list_artifacts()? {
        if let Some((dir, _)) = path.rsplit_once('/') {
            dirs.insert(dir.to_string());
        }
    }
    for dir in dirs {
        if dir.starts_with(OCI_KIND_DIR) && !live.contains(&dir) {
            storage.remove_dir(&dir)?;
            report.orphans.push(dir);
        }
    }
    Ok(report)
}
