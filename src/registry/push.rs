//! Uploads for `ocisource push` and signature attaching (not part of the `Registry`
//! port): blob existence (`HEAD`), monolithic blob uploads from memory or from a file
//! stream (`POST /blobs/uploads/` then `PUT <location>?digest=`), and manifest `PUT`
//! under a tag. Every request goes through `RegistryClient::send` with push scope, so an
//! upload `Location` on another origin gets no credentials; one from https to http is
//! refused.

use std::io::Read;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use tokio::io::AsyncReadExt;

use super::client::{Access, RegistryClient};
use super::failure::{err, unexpected};
use super::origin::check_target;
use crate::domain::digest::{Digest, Hasher};
use crate::domain::reference::valid_reference;
use crate::ports::{RegistryError, RegistryErrorKind};

fn io_err(what: &str, path: &Path, e: &std::io::Error) -> RegistryError {
    err(
        RegistryErrorKind::Config,
        format!("failed to {what} {}: {e}", path.display()),
    )
}

/// sha256 and size of a file, read in a blocking thread.
async fn file_digest(path: &Path) -> Result<(Digest, u64), RegistryError> {
    let p = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut f = std::fs::File::open(&p).map_err(|e| io_err("open", &p, &e))?;
        let mut h = Hasher::default();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = f.read(&mut buf).map_err(|e| io_err("read", &p, &e))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        let len = h.len();
        Ok((h.finish(), len))
    })
    .await
    .map_err(|e| {
        err(
            RegistryErrorKind::Config,
            format!("failed to hash {}: {e}", path.display()),
        )
    })?
}

/// Told how many bytes of a blob upload were read so far; an attempt that starts over
/// (a retry) counts from 0 again.
pub type UploadProgress = std::sync::Arc<dyn Fn(u64) + Send + Sync>;

/// A request body streaming `path` in 256 KiB chunks, telling `progress` how far it read.
fn file_body(
    path: PathBuf,
    progress: Option<UploadProgress>,
) -> Result<reqwest::Body, RegistryError> {
    let f = std::fs::File::open(&path).map_err(|e| io_err("open", &path, &e))?;
    let file = tokio::fs::File::from_std(f);
    let stream = futures::stream::unfold((file, 0u64), move |(mut file, pos)| {
        let progress = progress.clone();
        async move {
            let mut buf = vec![0u8; 256 * 1024];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    let pos = pos + n as u64;
                    if let Some(p) = &progress {
                        p(pos);
                    }
                    Some((Ok::<Bytes, std::io::Error>(Bytes::from(buf)), (file, pos)))
                }
                Err(e) => Some((Err(e), (file, pos))),
            }
        }
    });
    Ok(reqwest::Body::wrap_stream(stream))
}

impl RegistryClient {
    /// True when the repository already has the blob (`HEAD /blobs/<digest>`).
    pub async fn blob_exists(&self, digest: &Digest) -> Result<bool, RegistryError> {
        let url = self.url(&format!("blobs/{digest}"));
        let build = |c: &reqwest::Client| Ok(c.head(&url));
        match self
            .send("check blob", &url, Access::Push, true, &build)
            .await
        {
            Ok(resp) if resp.status().is_success() => Ok(true),
            Ok(resp) => Err(unexpected("check blob", &url, resp.status())),
            Err(e) if e.kind == RegistryErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Uploads `bytes` as one blob unless it exists; returns its digest.
    pub async fn push_blob(&self, bytes: Bytes) -> Result<Digest, RegistryError> {
        let digest = Digest::of(&bytes);
        if self.blob_exists(&digest).await? {
            return Ok(digest);
        }
        let len = bytes.len() as u64;
        let body = move || Ok(reqwest::Body::from(bytes.clone()));
        self.upload(&digest, len, &body).await?;
        Ok(digest)
    }

    /// Uploads the file at `path` as one blob, streaming it, unless it exists; returns
    /// its digest and size.
    pub async fn push_blob_file(&self, path: &Path) -> Result<(Digest, u64), RegistryError> {
        self.push_blob_file_observed(path, None).await
    }

    /// [`RegistryClient::push_blob_file`], telling `progress` the bytes sent as they are
    /// read (nothing when the registry has the blob already).
    pub async fn push_blob_file_observed(
        &self,
        path: &Path,
        progress: Option<UploadProgress>,
    ) -> Result<(Digest, u64), RegistryError> {
        let (digest, len) = file_digest(path).await?;
        if self.blob_exists(&digest).await? {
            return Ok((digest, len));
        }
        let p = path.to_path_buf();
        let body = move || file_body(p.clone(), progress.clone());
        self.upload(&digest, len, &body).await?;
        Ok((digest, len))
    }

    async fn upload(
        &self,
        digest: &Digest,
        len: u64,
        body: &(dyn Fn() -> Result<reqwest::Body, RegistryError> + Sync),
    ) -> Result<(), RegistryError> {
        let start = self.url("blobs/uploads/");
        let build = |c: &reqwest::Client| Ok(c.post(&start).header(CONTENT_LENGTH, 0));
        let resp = self
            .send("start blob upload", &start, Access::Push, true, &build)
            .await?;
        if resp.status() != 202 {
            return Err(unexpected("start blob upload", &start, resp.status()));
        }
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                err(
                    RegistryErrorKind::Protocol,
                    format!("failed to start blob upload {start}: no Location header"),
                )
            })?;
        let mut put = reqwest::Url::parse(&start)
            .and_then(|u| u.join(location))
            .map_err(|_| {
                err(
                    RegistryErrorKind::Protocol,
                    format!("failed to start blob upload {start}: invalid Location"),
                )
            })?;
        if let Some(refused) = reqwest::Url::parse(&self.url_as_spoken(&start))
            .ok()
            .and_then(|from| check_target(&from, &put).err())
        {
            return Err(err(
                RegistryErrorKind::Protocol,
                format!("failed to start blob upload {start}: refused its Location: {refused}"),
            ));
        }
        put.query_pairs_mut()
            .append_pair("digest", &digest.to_string());
        let put_s = put
            .as_str()
            .split('?')
            .next()
            .unwrap_or_default()
            .to_string();
        let build = |c: &reqwest::Client| {
            Ok(c.put(put.clone())
                .header(CONTENT_TYPE, "application/octet-stream")
                .header(CONTENT_LENGTH, len)
                .body(body()?))
        };
        let resp = self
            .send("upload blob", &put_s, Access::Push, false, &build)
            .await?;
        if resp.status() != 201 {
            return Err(unexpected("upload blob", &put_s, resp.status()));
        }
        Ok(())
    }

    /// `PUT` a manifest under `reference` (a tag, or its digest); returns its digest.
    pub async fn put_manifest(
        &self,
        reference: &str,
        media_type: &str,
        body: Bytes,
    ) -> Result<Digest, RegistryError> {
        if !valid_reference(reference) {
            return Err(err(
                RegistryErrorKind::Config,
                format!("invalid tag '{reference}'"),
            ));
        }
        let digest = Digest::of(&body);
        let url = self.url(&format!("manifests/{reference}"));
        let build = |c: &reqwest::Client| {
            Ok(c.put(&url)
                .header(CONTENT_TYPE, media_type)
                .body(body.clone()))
        };
        let resp = self
            .send("push manifest", &url, Access::Push, true, &build)
            .await?;
        if resp.status() != 201 {
            return Err(unexpected("push manifest", &url, resp.status()));
        }
        let told = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<Digest>().ok());
        if let Some(t) = told.filter(|t| *t != digest) {
            return Err(err(
                RegistryErrorKind::Integrity,
                format!(
                    "failed to push manifest {url}: the registry stored {t}, expected {digest}"
                ),
            ));
        }
        Ok(digest)
    }
}
