//! `ocisource pull`: resolve, verify (when asked), stream every selected layer into one
//! tar.gz at `--output-file` (a file, or `-`: see `pull_target`), print what was pulled.
//! The printed fields name the two digests apart: `manifestDigest` (the OCI manifest,
//! what cosign signs) and `archiveDigest` (the tar.gz written, Flux's
//! `status.artifact.digest`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::cli::{LayerOperationArg, PullArgs};
use crate::domain::error_chain::chain;
use crate::domain::ignore::IgnoreRules;
use crate::domain::layers::{LayerOperation, LayerSelector};
use crate::domain::limits::Limits;
use crate::domain::manifest::Platform;
use crate::pipeline::{self, StoreRequest};
use crate::ports::{Registry, RegistryConnector};
use crate::registry::HttpConnector;
use crate::storage::Storage;

use super::progress::{Counting, TransferProgress};
use super::pull_target::Target;
use super::{reference, registry_args, verify_cmd, AppError};

/// What `pull` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PulledArtifact {
    /// `oci://host/repo`.
    pub url: String,
    /// `host/repo`, as `push` prints it (`.repository + "@" + .manifestDigest`).
    pub repository: String,
    /// The tag the artifact was found under (tag and semver refs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// `<tag>@sha256:…` or the digest, as Flux reports the revision.
    pub revision: String,
    /// Digest of the image manifest used (after platform choice): what cosign signs.
    pub manifest_digest: String,
    /// The tar.gz written (the directory it was unpacked into, with `--extract`).
    pub archive_path: String,
    /// sha256 of the tar.gz written (Flux's `status.artifact.digest`).
    pub archive_digest: String,
    /// Bytes written.
    pub archive_size: u64,
    /// Layers merged (or 1 for copy).
    pub layers: usize,
    /// The manifest's annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// How the signature was verified, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<String>,
}

fn input(e: impl std::fmt::Display) -> AppError {
    AppError::Input(e.to_string())
}

/// Runs `pull`.
pub async fn run(args: PullArgs) -> Result<(), AppError> {
    let (url, reference) = reference::for_pull(
        &args.url,
        args.tag.as_deref(),
        args.semver.as_deref(),
        args.semver_filter.as_deref(),
        args.digest.as_deref(),
    )?;
    let reference = reference.with_layer_media_type(args.layer_media_type.as_deref());
    reference::check(&reference)?;
    let ignore = match &args.ignore {
        Some(text) => reference::ignore_rules("--ignore", text)?,
        None => IgnoreRules::flux_default(),
    };
    let platform = Platform::parse(&args.platform).map_err(input)?;
    let selector = LayerSelector {
        media_type: args.layer_media_type.clone(),
        operation: match args.layer_operation {
            LayerOperationArg::Extract => LayerOperation::Extract,
            LayerOperationArg::Copy => LayerOperation::Copy,
        },
        first_only: false,
    };
    let policy = verify_cmd::policy(&args.verify)?;
    let target = Target::of(args.output_file.as_deref(), args.extract.as_deref())?;
    let options = registry_args::options(&args.registry, &url.host)?;
    let registry: Arc<dyn Registry> = HttpConnector::new()
        .connect(&url.host, &url.repository, &options)
        .map_err(input)?;

    let failed = |e: &(dyn std::error::Error + 'static)| AppError::Failed(chain(e));
    let resolved = pipeline::resolve(registry.as_ref(), &url, &reference)
        .await
        .map_err(|e| failed(&e))?;
    let verified = match &policy {
        Some(p) => {
            let v = verify_cmd::verify(registry.as_ref(), &url, &resolved.digest, p).await?;
            Some(verify_cmd::describe(&url, &resolved.digest, &v))
        }
        None => None,
    };
    let (manifest, manifest_digest) =
        pipeline::fetch_manifest(registry.as_ref(), &url, &resolved.digest, &platform)
            .await
            .map_err(|e| failed(&e))?;
    let layers = match selector.select(&manifest) {
        Ok(crate::domain::layers::Selection::Extract(l)) => l.len(),
        _ => 1,
    };
    let progress = Arc::new(TransferProgress::stderr("pull", args.quiet));
    let counted = Counting::wrap(registry.clone(), progress.clone());
    let storage = Storage::new(target.dir().to_path_buf()).without_fsync();
    let stored = pipeline::store_layers(
        counted,
        StoreRequest {
            url: &url,
            manifest: &manifest,
            manifest_digest: &manifest_digest,
            selector: &selector,
            ignore: &ignore,
            limits: &Limits {
                max_uncompressed_bytes: args.max_uncompressed_bytes,
                max_entries: args.max_entries,
                ..Limits::default()
            },
            storage: &storage,
            path: target.file(),
        },
    )
    .await
    .map_err(|e| failed(&e))?;
    drop(progress);
    if target.deliver()? {
        return Ok(());
    }
    super::print(
        &PulledArtifact {
            url: url.to_string(),
            repository: format!("{}/{}", url.host, url.repository),
            tag: resolved.tag,
            revision: resolved.revision,
            manifest_digest: manifest_digest.to_string(),
            archive_path: (args.extract.as_ref().or(args.output_file.as_ref()))
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            archive_digest: stored.digest.to_string(),
            archive_size: stored.size,
            layers,
            metadata: manifest.annotations,
            verified,
        },
        args.output,
    )
}
