//! `ocisource push`: publish a directory as an OCI artifact in the format of
//! `flux push artifact` (Flux's config and content media types, `org.opencontainers.image.*`
//! annotations), optionally signed with a cosign v2 key signature.
//!
//! The directory is walked in sorted order into a tar stream that goes through the same
//! merger as pulls (one layer), so a pushed artifact is normalised exactly like a pulled
//! one and `.sourceignore` files are honoured. The tar.gz is staged in a temp file for
//! the upload.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::Serialize;

use crate::archive::{MergeOptions, MergeOutcome, Merger};
use crate::cli::PushArgs;
use crate::domain::digest::{Digest, Hasher};
use crate::domain::ignore::IgnoreRules;
use crate::domain::limits::Limits;
use crate::domain::manifest::{Descriptor, ImageManifest, FLUX_CONFIG, FLUX_CONTENT, OCI_MANIFEST};
use crate::domain::reference::{parse_image_ref, RefSpec};
use crate::reconcile::error::chain;
use crate::registry::HttpConnector;
use crate::verify::sign::{self, SigningKey};

use super::{registry_args, AppError};

/// What `push` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pushed {
    /// `oci://host/repo:tag`.
    pub url: String,
    /// Manifest digest.
    pub digest: String,
    /// `<tag>@<digest>`, as ocisource and Flux will report it.
    pub revision: String,
    /// The layer's digest and size.
    pub layer: String,
    /// Tag of the cosign signature, when signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A tar.gz of `dir`, written to `out`; returns its digest and size.
fn archive_dir<W: Write + Send + 'static>(
    dir: &Path,
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
    let root = dir.to_path_buf();
    let walker = std::thread::spawn(move || -> std::io::Result<()> {
        let mut builder = tar::Builder::new(writer);
        builder.follow_symlinks(false);
        append_sorted(&mut builder, &root, Path::new(""))?;
        builder.finish()
    });
    let label = Descriptor {
        media_type: "application/vnd.oci.image.layer.v1.tar".into(),
        digest: Digest::of(dir.display().to_string().as_bytes()),
        size: 0,
        annotations: BTreeMap::new(),
        platform: None,
        artifact_type: None,
    };
    let opts = MergeOptions {
        ignore: IgnoreRules::none(),
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
    walked
        .map_err(|e| AppError::Input(format!("failed to read --path '{}': {e}", dir.display())))?;
    match merged.map_err(|e| AppError::Input(format!("failed to archive --path '{}': {}", dir.display(), chain(&e))))? {
        MergeOutcome::Done { out, .. } => {
            let size = out.hasher.len();
            Ok((out.inner, out.hasher.finish(), size))
        }
        MergeOutcome::NeedsSecondPass { .. } => Err(AppError::Failed(
            "a .sourceignore file excluded paths written before it; this cannot happen in a sorted walk".into(),
        )),
    }
}

fn append_sorted<W: Write>(
    builder: &mut tar::Builder<W>,
    root: &Path,
    rel: &Path,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    // .sourceignore first in each directory, so its rules are known before its siblings.
    entries.sort_by_key(|e| e.file_name() != ".sourceignore");
    for entry in entries {
        let name = rel.join(entry.file_name());
        let kind = entry.file_type()?;
        builder.append_path_with_name(entry.path(), &name)?;
        if kind.is_dir() {
            append_sorted(builder, root, &name)?;
        }
    }
    Ok(())
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
    let (url, reference) =
        parse_image_ref(&args.url).map_err(|e| AppError::Input(e.to_string()))?;
    let tag = match reference {
        RefSpec::Tag(t)
            if args
                .url
                .rsplit('/')
                .next()
                .is_some_and(|last| last.contains(':')) =>
        {
            t
        }
        _ => {
            return Err(AppError::Input(format!(
                "invalid destination '{}': expected oci://host/repo:tag",
                args.url
            )))
        }
    };
    if !args.path.is_dir() {
        return Err(AppError::Input(format!(
            "invalid --path '{}': not a directory",
            args.path.display()
        )));
    }
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
        .map(|p| -> Result<SigningKey, AppError> {
            let pem = std::fs::read(p).map_err(|e| {
                AppError::Input(format!("failed to read --sign-key '{}': {e}", p.display()))
            })?;
            SigningKey::from_pem(&pem)
                .map_err(|e| AppError::Input(format!("invalid --sign-key '{}': {e}", p.display())))
        })
        .transpose()?;

    let staged = tempfile::NamedTempFile::new()
        .map_err(|e| AppError::Failed(format!("failed to create a temp file: {e}")))?;
    let staged_path: PathBuf = staged.path().to_path_buf();
    let dir = args.path.clone();
    let file = staged
        .reopen()
        .map_err(|e| AppError::Failed(format!("failed to open the temp file: {e}")))?;
    let (_, layer_digest, layer_size) = tokio::task::spawn_blocking(move || {
        archive_dir(&dir, std::io::BufWriter::new(file)).and_then(|(mut w, d, s)| {
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
    let (pushed_digest, _) = client.push_blob_file(&staged_path).await.map_err(failed)?;
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
        Some(key) => {
            let reference = format!("{}/{}", url.host, url.repository);
            let sig = sign::sign(&key, &reference, &digest)
                .map_err(|e| AppError::Failed(format!("failed to sign {digest}: {e}")))?;
            client
                .push_blob(Bytes::from(sig.payload.clone()))
                .await
                .map_err(failed)?;
            client
                .push_blob(Bytes::from(sig.config.clone()))
                .await
                .map_err(failed)?;
            client
                .put_manifest(&sig.tag, OCI_MANIFEST, Bytes::from(sig.manifest.clone()))
                .await
                .map_err(failed)?;
            Some(sig.tag)
        }
        None => None,
    };
    super::print(
        &Pushed {
            url: format!("{url}:{tag}"),
            revision: format!("{tag}@{digest}"),
            digest: digest.to_string(),
            layer: format!("{layer_digest} ({layer_size} bytes)"),
            signature,
        },
        args.output,
    )
}
