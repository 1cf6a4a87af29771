//! `ocisource push`: publish a directory, a file or standard input as an OCI artifact in
//! the format of `flux push artifact` (Flux's config and content media types,
//! `org.opencontainers.image.*` annotations), optionally signed with a cosign v2 key
//! signature, and print Flux's fields (`url`, `repository`, `tag`, `digest`).
//!
//! What `--path` takes and which files are left out is in `push_source.rs`. The tar
//! stream goes through the same merger as pulls (one layer), so a pushed artifact is
//! normalised exactly like a pulled one. The tar.gz is staged in a temp file for the upload.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;

use crate::archive::{MergeOptions, MergeOutcome, Merger};
use crate::cli::PushArgs;
use crate::domain::digest::{Digest, Hasher};
use crate::domain::error_chain::chain;
use crate::domain::ignore::IgnoreRules;
use crate::domain::limits::Limits;
use crate::domain::manifest::{Descriptor, ImageManifest, FLUX_CONFIG, FLUX_CONTENT, OCI_MANIFEST};
use crate::registry::push::UploadProgress;
use crate::registry::HttpConnector;

use super::progress::TransferProgress;
use super::push_source::{self, Source};
use super::{reference, registry_args, sign_cmd, AppError};

/// What `push` prints: the fields of `flux push artifact -o json`, so
/// `jq -r '.repository + "@" + .digest'` gives what `cosign sign` takes.
#[derive(Debug, Serialize)]
pub struct Pushed {
    /// `oci://host/repo@sha256:…`.
    pub url: String,
    /// `host/repo`.
    pub repository: String,
    /// The tag pushed.
    pub tag: String,
    /// Manifest digest.
    pub digest: String,
    /// Tag of the cosign signature, when signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A tar.gz of `source` without what `ignore` excludes, written to `out`; returns its
/// digest and size.
fn archive<W: Write + Send + 'static>(
    source: Source,
    ignore: IgnoreRules,
    out: W,
) -> Result<(W, Digest, u64), AppError> {
    struct Counting<W> {
        inner: W,
        hasher: Hasher,
    }
    impl<W: Write> Write for Counting<W> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = self.inner.write(buf)?;
            self.hasher.update(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.inner.flush()
        }
    }
    let (reader, writer) =
        std::io::pipe().map_err(|e| AppError::Failed(format!("failed to create a pipe: {e}")))?;
    let shown = match &source {
        Source::Dir(p) | Source::File { path: p, .. } => p.display().to_string(),
    };
    let walk_rules = ignore.clone();
    let walker = std::thread::spawn(move || -> std::io::Result<()> {
        let mut builder = tar::Builder::new(writer);
        builder.follow_symlinks(false);
        push_source::append(&mut builder, &source, &walk_rules)?;
        builder.finish()
    });
    let label = Descriptor {
        media_type: "application/vnd.oci.image.layer.v1.tar".into(),
        digest: Digest::of(shown.as_bytes()),
        size: 0,
        annotations: BTreeMap::new(),
        platform: None,
        artifact_type: None,
    };
    let opts = MergeOptions {
        ignore,
        limits: Limits::default(),
    };
    let mut merger = Merger::new(
        Counting {
            inner: out,
            hasher: Hasher::default(),
        },
        opts,
    );
    let merged = merger
        .add_layer(&label, reader)
        .and_then(|()| merger.finish());
    let walked = walker
        .join()
        .map_err(|_| AppError::Failed("the directory walker panicked".into()))?;
    walked.map_err(|e| AppError::Input(format!("failed to read --path '{shown}': {e}")))?;
    match merged.map_err(|e| {
        AppError::Input(format!("failed to archive --path '{shown}': {}", chain(&e)))
    })? {
        MergeOutcome::Done { out, .. } => {
            let size = out.hasher.len();
            Ok((out.inner, out.hasher.finish(), size))
        }
        MergeOutcome::NeedsSecondPass { .. } => Err(AppError::Failed(
            "a .sourceignore file excluded paths written before it; this cannot happen in a sorted walk".into(),
        )),
    }
}

fn descriptor(media_type: &str, digest: Digest, size: u64) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        digest,
        size,
        annotations: BTreeMap::new(),
        platform: None,
        artifact_type: None,
    }
}

/// Runs `push`.
pub async fn run(args: PushArgs) -> Result<(), AppError> {
    let (url, tag) = reference::for_push(&args.url)?;
    let ignore = push_source::rules(args.ignore_paths.as_deref())?;
    let prepared = push_source::prepare(&args.path, &ignore)?;
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "org.opencontainers.image.created".to_string(),
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    );
    if let Some(s) = &args.source {
        annotations.insert("org.opencontainers.image.source".into(), s.clone());
    }
    if let Some(r) = &args.revision {
        annotations.insert("org.opencontainers.image.revision".into(), r.clone());
    }
    for kv in &args.annotations {
        let (k, v) = kv.split_once('=').ok_or_else(|| {
            AppError::Input(format!("invalid --annotation '{kv}': expected KEY=VALUE"))
        })?;
        annotations.insert(k.to_string(), v.to_string());
    }
    let key = args
        .sign_key
        .as_deref()
        .map(|p| sign_cmd::read_key(p, "--sign-key"))
        .transpose()?;

    let staged = tempfile::NamedTempFile::new()
        .map_err(|e| AppError::Failed(format!("failed to create a temp file: {e}")))?;
    let staged_path: PathBuf = staged.path().to_path_buf();
    let file = staged
        .reopen()
        .map_err(|e| AppError::Failed(format!("failed to open the temp file: {e}")))?;
    let source = prepared.source.clone();
    let (_, layer_digest, layer_size) = tokio::task::spawn_blocking(move || {
        archive(source, ignore, std::io::BufWriter::new(file)).and_then(|(mut w, d, s)| {
            w.flush()
                .map_err(|e| AppError::Failed(format!("failed to write the temp file: {e}")))?;
            Ok(((), d, s))
        })
    })
    .await
    .map_err(|e| AppError::Failed(e.to_string()))??;

    let options = registry_args::options(&args.registry, &url.host)?;
    let client = HttpConnector::new()
        .client(&url.host, &url.repository, &options)
        .map_err(|e| AppError::Input(e.to_string()))?;
    let failed =
        |e: crate::ports::RegistryError| AppError::Failed(format!("failed to push to {url}: {e}"));
    let config = Bytes::from_static(b"{}");
    let config_digest = client.push_blob(config.clone()).await.map_err(failed)?;
    let progress = TransferProgress::stderr("push", args.quiet);
    let layer = Arc::new(progress.layer(&layer_digest, layer_size));
    let observer = layer.clone();
    let observe: UploadProgress = Arc::new(move |pos| observer.set(pos));
    let (pushed_digest, _) = client
        .push_blob_file_observed(&staged_path, Some(observe))
        .await
        .map_err(failed)?;
    match Arc::into_inner(layer) {
        Some(layer) if layer_size > 0 && !layer.moved() => layer.already_there(),
        _ => {}
    }
    if pushed_digest != layer_digest {
        return Err(AppError::Failed(format!("failed to push to {url}: uploaded layer digest {pushed_digest} differs from the archive's {layer_digest}")));
    }
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.into()),
        artifact_type: None,
        config: descriptor(FLUX_CONFIG, config_digest, config.len() as u64),
        layers: vec![descriptor(FLUX_CONTENT, layer_digest.clone(), layer_size)],
        subject: None,
        annotations,
    };
    let body = serde_json::to_vec(&manifest).map_err(|e| AppError::Failed(e.to_string()))?;
    let digest = client
        .put_manifest(&tag, OCI_MANIFEST, Bytes::from(body))
        .await
        .map_err(failed)?;

    let signature = match key {
        Some(key) => Some(sign_cmd::attach(&client, &url, &digest, &key).await?),
        None => None,
    };
    drop(prepared);
    let repository = format!("{}/{}", url.host, url.repository);
    super::print(
        &Pushed {
            url: format!("oci://{repository}@{digest}"),
            repository,
            tag,
            digest: digest.to_string(),
            signature,
        },
        args.output,
    )
}
