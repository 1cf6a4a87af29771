//! The start-up storage check (RFC-0012): temp files left by a killed writer are removed;
//! every artifact published in an OCIRepository status is checked against its digest; a
//! tampered one is deleted so the next reconcile rebuilds it (a missing one is rebuilt
//! the same way), and folders of objects that no longer exist are removed, for each kind
//! the controller reconciles (Flux's kind only in drop-in mode: with the mode off, its
//! folders are left alone). Disk only through the `ports::ArtifactStore` port, no
//! Kubernetes I/O: the caller lists the objects.

use std::collections::BTreeSet;

use crate::api::{FluxOciRepository, OciRepository};
use crate::ports::store::{in_kind_dir, object_dir_in, FLUX_OCI_KIND_DIR, OCI_KIND_DIR};
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
    check_storage_kinds(storage, objects, None)
}

/// [`check_storage`] for both kinds: `flux` is `Some` (the Flux objects selected) in
/// drop-in mode, `None` when the mode is off.
pub fn check_storage_kinds(
    storage: &dyn ArtifactStore,
    objects: &[OciRepository],
    flux: Option<&[FluxOciRepository]>,
) -> Result<StartupReport, StoreError> {
    let mut report = StartupReport {
        stale_temps: storage.remove_stale_temps()?,
        ..StartupReport::default()
    };
    // (kind folder, metadata, status) of every object, both kinds.
    let ours = objects
        .iter()
        .map(|o| (OCI_KIND_DIR, &o.metadata, o.status.as_ref()));
    let theirs = flux
        .unwrap_or_default()
        .iter()
        .map(|o| (FLUX_OCI_KIND_DIR, &o.metadata, o.status.as_ref()));
    let mut live = BTreeSet::new();
    for (kind, meta, status) in ours.chain(theirs) {
        let ns = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        if let Ok(dir) = object_dir_in(kind, &ns, &name) {
            live.insert(dir);
        }
        // An artifact in another store (Flux's, before the object moved here) is not ours.
        let Some(artifact) = status
            .and_then(|s| s.artifact.as_ref())
            .filter(|a| in_kind_dir(kind, &a.path))
        else {
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
    let mut kinds = vec![OCI_KIND_DIR];
    if flux.is_some() {
        kinds.push(FLUX_OCI_KIND_DIR);
    }
    for dir in dirs {
        let managed = kinds.iter().any(|k| in_kind_dir(k, &dir));
        if managed && !live.contains(&dir) {
            storage.remove_dir(&dir)?;
            report.orphans.push(dir);
        }
    }
    Ok(report)
}
