//! Steps 2 and 3: fetch the manifest (an index resolves to the wanted platform), then
//! stream the selected layers into one stored file.
//!
//! Extraction downloads layers top first (the reverse of manifest order), so the first
//! version of a path the merger sees is the one that wins; each blob flows through the
//! archive bridge into the merger on a blocking thread, with its digest checked by the
//! registry stream. Nothing is written outside the artifact's temp file, which is renamed
//! into place only when every layer merged cleanly.

use std::sync::Arc;

use std::sync::Mutex;

use futures::StreamExt;

use crate::archive::bridge::{self, BridgeError, MergeTask};
use crate::archive::{MergeOptions, MergeOutcome};
use crate::domain::digest::Digest;
use crate::domain::ignore::IgnoreRules;
use crate::domain::layers::{LayerSelector, Selection};
use crate::domain::limits::Limits;
use crate::domain::manifest::{Descriptor, ImageManifest, Manifest, ManifestError, Platform};
use crate::domain::reference::RepositoryUrl;
use crate::ports::{ArtifactStore, BlobStream, Registry, RegistryError, StoredFile};

use super::PipelineError;

/// How many batches may wait between the download and the merging thread. The merge is
/// the slow side, so this queue is usually full: it is most of the pull's heap (with 16,
/// the 4-layer benchmark peaked at 31 MiB RSS; with 4, 22 MiB, at the same speed).
const MERGE_BRIDGE_CHUNKS: usize = bridge::DEFAULT_CAPACITY;
/// The same for `copy`, whose writer is the fast side: a deeper queue absorbs the page
/// cache's write stalls without holding the socket.
const COPY_BRIDGE_CHUNKS: usize = 16;

/// Fetches the manifest `digest` points at; an index resolves to `platform`'s manifest.
/// Returns the image manifest and the digest of that manifest.
pub async fn fetch_manifest(
    registry: &dyn Registry,
    url: &RepositoryUrl,
    digest: &Digest,
    platform: &Platform,
) -> Result<(ImageManifest, Digest), PipelineError> {
    let mut current = digest.clone();
    // An index may point at an image manifest; never follow more than one level.
    for _ in 0..2 {
        let fetched = registry
            .manifest(&current.to_string())
            .await
            .map_err(|source| PipelineError::FetchManifest {
                url: url.to_string(),
                digest: current.to_string(),
                source,
            })?;
        let bad = |source: ManifestError| PipelineError::Manifest {
            url: url.to_string(),
            digest: current.to_string(),
            source,
        };
        match Manifest::parse(&fetched.media_type, &fetched.body).map_err(bad)? {
            Manifest::Image(m) => return Ok((m, current)),
            Manifest::Index(index) => current = index.select(platform).map_err(bad)?.digest.clone(),
        }
    }
    Err(PipelineError::Manifest {
        url: url.to_string(),
        digest: current.to_string(),
        source: ManifestError::Parse("an index entry points at another index".into()),
    })
}

/// What to store and where.
pub struct StoreRequest<'a> {
    /// Repository, for messages.
    pub url: &'a RepositoryUrl,
    /// The manifest whose layers are stored.
    pub manifest: &'a ImageManifest,
    /// Its digest, for messages.
    pub manifest_digest: &'a Digest,
    /// Which layers, and extract or copy.
    pub selector: &'a LayerSelector,
    /// Exclusions: `spec.ignore` over Flux's defaults, compiled at the door.
    pub ignore: &'a IgnoreRules,
    /// Caps.
    pub limits: &'a Limits,
    /// The store.
    pub storage: &'a dyn ArtifactStore,
    /// Relative path of the artifact in the store.
    pub path: &'a str,
}

/// Streams the selected layers into the store at `req.path`.
pub async fn store_layers(
    registry: Arc<dyn Registry>,
    req: StoreRequest<'_>,
) -> Result<StoredFile, PipelineError> {
    let selection = req
        .selector
        .select(req.manifest)
        .map_err(|source| PipelineError::Layers {
            digest: req.manifest_digest.to_string(),
            source,
        })?;
    match selection {
        Selection::Copy(layer) => copy_layer(registry.as_ref(), &req, &layer).await,
        Selection::Extract(layers) => {
            let base = req.ignore;
            let mut rules = base.clone();
            // A `.sourceignore` met after the paths it excludes costs one more pass, with
            // every such file's rules known up front; a second request for it cannot happen.
            for _pass in 0..2 {
                match merge_pass(registry.as_ref(), &req, &layers, rules.clone()).await? {
                    PassOutcome::Stored(file) => return Ok(file),
                    PassOutcome::Again(sourceignore) => {
                        rules = base.clone();
                        for (dir, content) in &sourceignore {
                            rules.add_sourceignore(dir, content);
                        }
                    }
                }
            }
            Err(PipelineError::Worker(
                "the second merge pass asked for a third".into(),
            ))
        }
    }
}

enum PassOutcome {
    Stored(StoredFile),
    Again(Vec<(String, String)>),
}

async fn open_blob(
    registry: &dyn Registry,
    req: &StoreRequest<'_>,
    layer: &Descriptor,
) -> Result<BlobStream, PipelineError> {
    registry
        .blob(layer)
        .await
        .map_err(|source| PipelineError::Blob {
            url: req.url.to_string(),
            layer: layer.digest.to_string(),
            source,
        })
}

/// Wraps a blob stream so the first registry error it ends with is kept: the merge then
/// fails on a truncated layer, and the registry error is the one worth reporting.
fn watched(stream: BlobStream) -> (BlobStream, Arc<Mutex<Option<RegistryError>>>) {
    let slot = Arc::new(Mutex::new(None));
    let seen = slot.clone();
    let stream = stream
        .inspect(move |item| {
            if let (Err(e), Ok(mut s)) = (item, seen.lock()) {
                s.get_or_insert_with(|| RegistryError::new(e.kind, e.message.clone()));
            }
        })
        .boxed();
    (stream, slot)
}

fn taken(slot: &Mutex<Option<RegistryError>>) -> Option<RegistryError> {
    slot.lock().ok().and_then(|mut s| s.take())
}

async fn merge_pass(
    registry: &dyn Registry,
    req: &StoreRequest<'_>,
    layers: &[Descriptor],
    ignore: IgnoreRules,
) -> Result<PassOutcome, PipelineError> {
    let pending = req.storage.begin_write(req.path, None)?;
    let opts = MergeOptions {
        ignore,
        limits: req.limits.clone(),
    };
    let digest = req.manifest_digest.to_string();
    let task = MergeTask::spawn(pending, opts, MERGE_BRIDGE_CHUNKS);
    let mut registry_failure = None;
    for layer in layers.iter().rev() {
        let stream = match open_blob(registry, req, layer).await {
            Ok(s) => s,
            Err(e) => {
                registry_failure = Some(e);
                break;
            }
        };
        let (stream, slot) = watched(stream);
        let fed = task.feed(layer.clone(), stream).await;
        if let Some(source) = taken(&slot) {
            registry_failure = Some(PipelineError::Blob {
                url: req.url.to_string(),
                layer: layer.digest.to_string(),
                source,
            });
            break;
        }
        if fed.is_err() {
            break; // the merge stopped on an error; it is reported below
        }
    }
    let merged = task.finish().await;
    // A registry failure explains any archive error it caused (a cut-off stream).
    if let Some(e) = registry_failure {
        return Err(e);
    }
    let merged = merged.map_err(|e| match e {
        BridgeError::Merge(source) => PipelineError::from_archive(digest, source),
        BridgeError::Task(msg) => PipelineError::Worker(msg),
    });
    match merged? {
        MergeOutcome::Done { out, .. } => {
            let stored = tokio::task::spawn_blocking(move || out.commit())
                .await
                .map_err(|e| PipelineError::Worker(e.to_string()))??;
            Ok(PassOutcome::Stored(stored))
        }
        MergeOutcome::NeedsSecondPass { sourceignore } => Ok(PassOutcome::Again(sourceignore)),
    }
}

async fn copy_layer(
    registry: &dyn Registry,
    req: &StoreRequest<'_>,
    layer: &Descriptor,
) -> Result<StoredFile, PipelineError> {
    // The blob stream checks the layer digest; the copy is that blob byte for byte.
    let mut pending = req
        .storage
        .begin_write(req.path, Some(layer.digest.clone()))?;
    let stream = open_blob(registry, req, layer).await?;
    let (tx, mut rx) = bridge::channel(COPY_BRIDGE_CHUNKS);
    let worker = tokio::task::spawn_blocking(move || {
        // Large reads: the bridge hands over batches, `io::copy` would cut them to 8 KiB.
        let mut buf = vec![0u8; 256 << 10];
        loop {
            match std::io::Read::read(&mut rx, &mut buf) {
                Ok(0) => return Ok(pending),
                Ok(n) => std::io::Write::write_all(&mut pending, &buf[..n])?,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    });
    let (stream, slot) = watched(stream);
    let _ = tx.pump(stream).await;
    let failure = taken(&slot);
    let copied = worker
        .await
        .map_err(|e| PipelineError::Worker(e.to_string()))?;
    if let Some(source) = failure {
        return Err(PipelineError::Blob {
            url: req.url.to_string(),
            layer: layer.digest.to_string(),
            source,
        });
    }
    let pending = copied.map_err(PipelineError::from_write)?;
    let stored = tokio::task::spawn_blocking(move || pending.commit())
        .await
        .map_err(|e| PipelineError::Worker(e.to_string()))??;
    Ok(stored)
}
