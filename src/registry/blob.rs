//! Blob downloads: a streaming `GET` (redirects followed) whose digest and size are
//! checked as bytes flow, resumed with `Range: bytes=N-` (or restarted, skipping N bytes,
//! when the registry answers 200) when the connection is cut or errors mid-body, with a
//! bounded number of resumes. The final chunk is withheld and replaced by an `Integrity`
//! error when the digest does not match. No auth logic here (see `client.rs`).

use std::pin::Pin;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use reqwest::header::{CONTENT_RANGE, RANGE};

use super::client::{Access, RegistryClient};
use super::failure::Cause;
use super::failure::{err, unexpected};
use crate::domain::digest::{Digest, Hasher};
use crate::domain::error_chain::chain;
use crate::domain::manifest::Descriptor;
use crate::ports::{BlobStream, RegistryError, RegistryErrorKind};

/// Most resumes of one download without any byte received in between.
const MAX_STALLED_RESUMES: u32 = 4;
/// Most resumes of one download in total.
const MAX_RESUMES: u32 = 32;

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

struct Download {
    client: RegistryClient,
    url: String,
    expected: Digest,
    size: u64,
    body: Option<Body>,
    hasher: Hasher,
    /// Bytes to drop from the current body (a 200 answer to a resume).
    skip: u64,
    resumes: u32,
    stalled: u32,
    last_error: String,
    /// What the last cut-short body ended in.
    last_kind: RegistryErrorKind,
    done: bool,
}

impl Download {
    fn received(&self) -> u64 {
        self.hasher.len()
    }

    fn integrity(&self, detail: String) -> RegistryError {
        err(
            RegistryErrorKind::Integrity,
            format!("failed to download blob {}: {detail}", self.url),
        )
    }

    /// Opens the body at the current offset.
    async fn open(&mut self) -> Result<(), RegistryError> {
        let offset = self.received();
        if self.resumes > 0 || offset > 0 {
            if self.stalled >= MAX_STALLED_RESUMES || self.resumes >= MAX_RESUMES {
                return Err(err(
                    self.last_kind,
                    format!(
                        "failed to download blob {}: cut short after {offset} of {} bytes and {} resume(s): {}",
                        self.url, self.size, self.resumes, self.last_error
                    ),
                ));
            }
            self.resumes += 1;
            self.stalled += 1;
            tokio::time::sleep(self.client.settings.retry.backoff(self.stalled)).await;
            tracing::debug!(url = %self.url, offset, "resuming blob download");
        }
        let url = self.url.clone();
        let range = (offset > 0).then(|| format!("bytes={offset}-"));
        let build = |c: &reqwest::Client| {
            let rb = c.get(&url);
            Ok(match &range {
                Some(r) => rb.header(RANGE, r),
                None => rb,
            })
        };
        let resp = self
            .client
            .send("download blob", &url, Access::Pull, false, &build)
            .await?;
        let status = resp.status().as_u16();
        let remaining = match status {
            200 => {
                self.skip = offset;
                self.size
            }
            206 if offset > 0 => {
                let start = resp
                    .headers()
                    .get(CONTENT_RANGE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("bytes "))
                    .and_then(|v| v.split('-').next())
                    .and_then(|v| v.parse::<u64>().ok());
                if start != Some(offset) {
                    return Err(err(
                        RegistryErrorKind::Protocol,
                        format!("failed to download blob {url}: asked for bytes from {offset}, got Content-Range {start:?}"),
                    ));
                }
                self.skip = 0;
                self.size - offset
            }
            _ => return Err(unexpected("download blob", &url, resp.status())),
        };
        if let Some(len) = resp.content_length().filter(|l| *l != remaining) {
            return Err(self.integrity(format!(
                "the registry sends {len} bytes from offset {}, the descriptor says the blob has {} bytes",
                if status == 200 { 0 } else { offset },
                self.size
            )));
        }
        self.body = Some(Box::pin(resp.bytes_stream()));
        Ok(())
    }

    /// The next verified chunk; `None` at the end.
    async fn next_chunk(&mut self) -> Option<Result<Bytes, RegistryError>> {
        if self.done {
            return None;
        }
        loop {
            let Some(body) = self.body.as_mut() else {
                if let Err(e) = self.open().await {
                    self.done = true;
                    return Some(Err(e));
                }
                continue;
            };
            match body.next().await {
                Some(Ok(mut chunk)) => {
                    if self.skip > 0 {
                        let n = self.skip.min(chunk.len() as u64);
                        chunk = chunk.slice(n as usize..);
                        self.skip -= n;
                    }
                    if chunk.is_empty() {
                        continue;
                    }
                    self.stalled = 0;
                    if self.received() + chunk.len() as u64 > self.size {
                        self.done = true;
                        return Some(Err(self.integrity(format!(
                            "more bytes than the descriptor size {}",
                            self.size
                        ))));
                    }
                    self.hasher.update(&chunk);
                    if self.received() == self.size {
                        return Some(self.finish().map(|()| chunk));
                    }
                    return Some(Ok(chunk));
                }
                Some(Err(e)) => {
                    self.last_kind = Cause::of(&e).kind();
                    self.last_error = chain(&e);
                    self.body = None;
                }
                None if self.received() < self.size => {
                    self.last_kind = RegistryErrorKind::Connect;
                    self.last_error = "the connection closed early".into();
                    self.body = None;
                }
                None => return self.finish().err().map(Err),
            }
        }
    }

    fn finish(&mut self) -> Result<(), RegistryError> {
        self.done = true;
        self.body = None;
        let got = self.hasher.clone().finish();
        if got != self.expected {
            return Err(self.integrity(format!(
                "content has digest {got}, expected {}",
                self.expected
            )));
        }
        Ok(())
    }
}

impl RegistryClient {
    /// A digest-checked, resuming stream of the blob `descriptor` names.
    pub(crate) async fn blob_stream(
        &self,
        descriptor: &Descriptor,
    ) -> Result<BlobStream, RegistryError> {
        let url = self.url(&format!("blobs/{}", descriptor.digest));
        let mut dl = Download {
            client: self.clone(),
            url,
            expected: descriptor.digest.clone(),
            size: descriptor.size,
            body: None,
            hasher: Hasher::default(),
            skip: 0,
            resumes: 0,
            stalled: 0,
            last_error: String::new(),
            last_kind: RegistryErrorKind::Connect,
            done: false,
        };
        dl.open().await?;
        let stream = futures::stream::unfold(dl, |mut dl| async move {
            let item = dl.next_chunk().await?;
            Some((item, dl))
        });
        Ok(Box::pin(stream))
    }

    /// Whether this session may read the blob `descriptor` names, at the cost of one byte:
    /// a `GET` of `Range: bytes=0-0`, answered 206 (or 200 by a registry that ignores
    /// ranges: the body is dropped unread, and its connection with it).
    pub(crate) async fn blob_readable(&self, descriptor: &Descriptor) -> Result<(), RegistryError> {
        let url = self.url(&format!("blobs/{}", descriptor.digest));
        let build = |c: &reqwest::Client| Ok(c.get(&url).header(RANGE, "bytes=0-0"));
        let resp = self
            .send("check access to blob", &url, Access::Pull, true, &build)
            .await?;
        match resp.status().as_u16() {
            200 | 206 => Ok(()),
            _ => Err(unexpected("check access to blob", &url, resp.status())),
        }
    }

    /// The whole blob in memory, refusing descriptors larger than `max`.
    pub(crate) async fn blob_whole(
        &self,
        descriptor: &Descriptor,
        max: u64,
    ) -> Result<Bytes, RegistryError> {
        if descriptor.size > max {
            return Err(err(
                RegistryErrorKind::Integrity,
                format!(
                    "failed to read blob {}: {} bytes exceed the limit of {max}",
                    descriptor.digest, descriptor.size
                ),
            ));
        }
        let mut stream = self.blob_stream(descriptor).await?;
        let mut buf = BytesMut::with_capacity(usize::try_from(descriptor.size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            buf.extend_from_slice(&chunk?);
        }
        Ok(buf.freeze())
    }
}
