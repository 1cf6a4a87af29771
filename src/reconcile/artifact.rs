//! The artifact step, on a [`Verified`] source: fetch the manifest, stream the selected
//! layers into the store (or link the file another object built from the same manifest
//! the same way, `shared.rs`), describe the result as Flux's `Artifact` ([`Stored`]), and
//! garbage-collect older artifacts.
//! The stored file is renamed into place only when complete; on any failure the last
//! good artifact stays where it was.

use std::time::SystemTime;

use chrono::{DateTime, Utc};

use crate::api::conditions::to_time;
use crate::api::flux_ocirepository::OPTIONS_METADATA_KEY;
use crate::api::{Artifact, Flavour, OciRepositorySpec, OciRepositoryStatus};
use crate::domain::desired::Desired;
use crate::domain::layers::Selection;
use crate::domain::manifest::{Descriptor, Platform};
use crate::domain::status::{Origin, Verification};
use crate::pipeline::{self, StoreRequest};
use crate::ports::registry::Registry;
use crate::ports::store::{
    in_kind_dir, object_dir_in, StoredFile, FLUX_OCI_KIND_DIR, OCI_KIND_DIR,
};

use super::context::Context;
use super::error::ReconcileError;
use super::shared::{Built, Recipe};
use super::source::{Resolved, Verified};

/// The store folder of the object's kind: Flux's kind has its own, so that objects of
/// the two kinds with one name never share (or garbage-collect) each other's artifacts.
pub fn kind_dir(flavour: &Flavour) -> &'static str {
    match flavour {
        Flavour::Ocisource => OCI_KIND_DIR,
        Flavour::Flux(_) => FLUX_OCI_KIND_DIR,
    }
}

/// True when the stored artifact was built with the settings that are not in the status
/// schema of the kind: `observedPlatform` for ours, the opt-in note in the artifact's
/// metadata for Flux's.
fn same_extras(
    spec: &OciRepositorySpec,
    previous: &OciRepositoryStatus,
    flavour: &Flavour,
) -> bool {
    match flavour {
        Flavour::Ocisource => previous.observed_platform == spec.platform,
        Flavour::Flux(_) => {
            let recorded = previous
                .artifact
                .as_ref()
                .and_then(|a| a.metadata.as_ref())
                .and_then(|m| m.get(OPTIONS_METADATA_KEY));
            recorded == flavour.options_note().as_ref()
        }
    }
}

/// Whether the stored artifact can be kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Currency {
    /// No artifact, or one of another revision or other settings: build and announce it.
    Outdated,
    /// The same revision and settings, but not in this store (taken over from Flux's
    /// source-controller, or lost from disk): rebuild quietly, nothing new upstream.
    Elsewhere,
    /// Keep it.
    Current,
}

/// True when the stored artifact (if any) was built with the settings `spec` asks for
/// now, as the status records them (`observedIgnore`, `observedLayerSelector`, and the
/// kind's extras): read once, at the door.
pub fn same_settings(
    spec: &OciRepositorySpec,
    previous: &OciRepositoryStatus,
    flavour: &Flavour,
) -> bool {
    previous.observed_ignore == spec.ignore
        && previous.observed_layer_selector == spec.layer_selector
        && same_extras(spec, previous, flavour)
}

/// Whether the stored artifact reflects this revision and the same settings
/// ([`same_settings`]), and is in this store (an object taken over from Flux's
/// source-controller names an artifact in that controller's store, which ocisource
/// rebuilds in its own).
pub fn currency(
    previous: &OciRepositoryStatus,
    source: &Resolved,
    same_settings: bool,
    ctx: &Context,
    flavour: &Flavour,
) -> Currency {
    let Some(artifact) = &previous.artifact else {
        return Currency::Outdated;
    };
    if artifact.revision != source.target.revision || !same_settings {
        Currency::Outdated
    } else if in_kind_dir(kind_dir(flavour), &artifact.path) && ctx.storage.exists(&artifact.path) {
        Currency::Current
    } else {
        Currency::Elsewhere
    }
}

/// The artifact's download URL on the advertised address: `http://<host>/<path>`.
fn url_of(path: &str, ctx: &Context) -> String {
    format!("http://{}/{path}", ctx.settings.advertised_addr)
}

/// The stored artifact with its URL on the current advertised address (Flux refreshes
/// the host on every reconcile, so a changed `--storage-adv-addr` reaches consumers).
pub fn with_current_host(artifact: &Artifact, ctx: &Context) -> Artifact {
    Artifact {
        url: url_of(&artifact.path, ctx),
        ..artifact.clone()
    }
}

/// `status.url` as Flux sets it: the object's `latest.tar.gz` link to its current
/// artifact. Best effort, as in Flux: when the link cannot be made, `None` (the previous
/// `status.url` stays) and a warning.
pub fn latest_url(artifact: &Artifact, ctx: &Context) -> Option<String> {
    match ctx.storage.link_latest(&artifact.path) {
        Ok(link) => Some(url_of(&link, ctx)),
        Err(e) => {
            tracing::warn!(artifact = %artifact.path, error = %crate::domain::error_chain::chain(&e), "failed to update the latest.tar.gz link of status.url");
            None
        }
    }
}

/// The origin annotations Flux names in its events (`org.opencontainers.image.source`
/// and `.revision`), when the artifact's metadata has both.
pub fn origin(artifact: &Artifact) -> Option<Origin> {
    let metadata = artifact.metadata.as_ref()?;
    let get = |key: &str| metadata.get(key).filter(|v| !v.is_empty()).cloned();
    Some(Origin {
        source: get("org.opencontainers.image.source")?,
        revision: get("org.opencontainers.image.revision")?,
    })
}

/// The artifact step's result.
#[derive(Debug)]
pub struct Stored {
    /// The artifact now served (new, or the current one kept).
    pub artifact: Artifact,
    /// The verification outcome it was accepted under.
    pub verification: Verification,
    /// True when a new artifact was stored (not just confirmed unchanged).
    pub pulled: bool,
}

/// The artifact another object built with `recipe`, linked at `path` (`shared.rs`) once
/// this object's own session proves it may pull `layers` (`Registry::prove_pull`: one
/// request per layer, made only when there is something to link, none when both sessions
/// are anonymous); `None` when there is none, it is this very path, the proof fails, or
/// the link failed (the entry goes).
async fn link_shared(
    recipe: &Recipe,
    path: &str,
    layers: &[Descriptor],
    registry: &dyn Registry,
    ctx: &Context,
) -> Option<Built> {
    let built = ctx.shared.get(recipe).filter(|b| b.path != path)?;
    if !registry.prove_pull(layers, built.anonymous).await {
        tracing::debug!(
            artifact = path,
            "this object's session did not prove it may pull the layers; building them"
        );
        return None;
    }
    let storage = ctx.storage.clone();
    let from = StoredFile {
        path: built.path.clone(),
        digest: built.digest.clone(),
        size: built.size,
    };
    let to = path.to_string();
    let linked = tokio::task::spawn_blocking(move || storage.link_artifact(&from, &to)).await;
    match linked {
        Ok(Ok(())) => {
            ctx.shared.stored_at(path);
            tracing::debug!(artifact = path, from = %built.path, "artifact shared with an object that built it");
            Some(Built {
                path: path.to_string(),
                ..built
            })
        }
        Ok(Err(e)) => {
            tracing::debug!(artifact = path, from = %built.path, error = %crate::domain::error_chain::chain(&e), "shared artifact not linked; building it");
            ctx.shared.forget(recipe);
            None
        }
        Err(_) => None,
    }
}

/// Pulls and stores a new artifact of the verified source, as `desired` asks, or links
/// the one another object built from the same manifest and recipe (`shared.rs`).
pub async fn store(
    desired: &Desired,
    flavour: &Flavour,
    (namespace, name): (&str, &str),
    verified: &Verified,
    ctx: &Context,
    now: DateTime<Utc>,
) -> Result<Artifact, ReconcileError> {
    let source = &verified.source;
    let platform = match &desired.platform {
        Some(p) => p.clone(),
        None => Platform::parse(&ctx.settings.default_platform)
            .map_err(|e| crate::api::validate::InvalidSpec::platform(e.to_string()))?,
    };
    let (manifest, manifest_digest) = pipeline::fetch_manifest(
        source.registry.as_ref(),
        &source.url,
        &source.target.digest,
        &platform,
    )
    .await?;
    let dir = object_dir_in(kind_dir(flavour), namespace, name)?;
    let path = format!("{dir}/{}.tar.gz", source.target.digest.hex());
    let selector = &desired.layers;
    let recipe = Recipe::new(&source.url, &manifest_digest, selector, &desired.ignore);
    let selection = selector.select(&manifest).ok();
    let layers = selection.as_ref().map_or(&[][..], Selection::layers);
    let linked = link_shared(&recipe, &path, layers, source.registry.as_ref(), ctx).await;
    let stored = match linked {
        Some(built) => built,
        None => {
            let stored = pipeline::store_layers(
                source.registry.clone(),
                StoreRequest {
                    url: &source.url,
                    manifest: &manifest,
                    manifest_digest: &manifest_digest,
                    selector,
                    ignore: &desired.ignore,
                    limits: &ctx.settings.limits,
                    storage: ctx.storage.as_ref(),
                    path: &path,
                },
            )
            .await?;
            // Bytes pulled from the registry: the selected layers (copy fetches only the first match).
            ctx.metrics
                .add_bytes_pulled(layers.iter().map(|l| l.size).sum());
            let built = Built {
                path: stored.path,
                digest: stored.digest,
                size: stored.size,
                anonymous: source.registry.anonymous(),
            };
            ctx.shared.put(recipe, built.clone());
            built
        }
    };
    if let Err(e) = ctx.storage.garbage_collect(
        &dir,
        &stored.path,
        ctx.settings.retention_records,
        ctx.settings.retention_ttl,
        SystemTime::now(),
    ) {
        tracing::warn!(error = %e, "artifact garbage collection failed");
    }
    let mut metadata = manifest.annotations.clone();
    if let Some(note) = flavour.options_note() {
        metadata.insert(OPTIONS_METADATA_KEY.to_string(), note);
    }
    Ok(Artifact {
        url: url_of(&stored.path, ctx),
        path: stored.path,
        revision: source.target.revision.clone(),
        digest: stored.digest.to_string(),
        last_update_time: to_time(now),
        size: i64::try_from(stored.size).ok(),
        metadata: (!metadata.is_empty()).then_some(metadata),
    })
}
