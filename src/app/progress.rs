//! A progress line on stderr for long transfers, shown only when stderr is a terminal:
//! a [`Registry`] decorator counts blob bytes as they stream, a task prints the count.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;

use crate::domain::digest::Digest;
use crate::domain::manifest::Descriptor;
use crate::ports::{BlobStream, FetchedManifest, Registry, RegistryError};

/// Counts the blob bytes that flow through it.
pub struct Counting {
    inner: Arc<dyn Registry>,
    bytes: Arc<AtomicU64>,
}

#[async_trait]
impl Registry for Counting {
    async fn manifest_digest(&self, reference: &str) -> Result<Digest, RegistryError> {
        self.inner.manifest_digest(reference).await
    }
    async fn manifest(&self, reference: &str) -> Result<FetchedManifest, RegistryError> {
        self.inner.manifest(reference).await
    }
    async fn tags(&self) -> Result<Vec<String>, RegistryError> {
        self.inner.tags().await
    }
    async fn blob(&self, descriptor: &Descriptor) -> Result<BlobStream, RegistryError> {
        let bytes = self.bytes.clone();
        let stream = self.inner.blob(descriptor).await?;
        Ok(stream
            .inspect(move |item| {
                if let Ok(chunk) = item {
                    bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
            })
            .boxed())
    }
    async fn blob_bytes(&self, descriptor: &Descriptor, max: u64) -> Result<Bytes, RegistryError> {
        self.inner.blob_bytes(descriptor, max).await
    }
}

/// Stops the progress line when dropped.
pub struct Progress {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            eprint!("\r\x1b[2K");
        }
    }
}

/// Wraps `registry` and, when stderr is a terminal, prints `pulled N MiB of T MiB` while
/// blobs stream. Returns the registry to use and a guard that clears the line.
pub fn wrap(registry: Arc<dyn Registry>, total: u64) -> (Arc<dyn Registry>, Progress) {
    if !std::io::stderr().is_terminal() {
        return (registry, Progress { task: None });
    }
    let bytes = Arc::new(AtomicU64::new(0));
    let counted: Arc<dyn Registry> = Arc::new(Counting {
        inner: registry,
        bytes: bytes.clone(),
    });
    let task = tokio::spawn(async move {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let n = bytes.load(Ordering::Relaxed);
            eprint!("\r\x1b[2Kpulled {:.1} MiB of {:.1} MiB", mib(n), mib(total));
            let _ = std::io::stderr().flush();
        }
    });
    (counted, Progress { task: Some(task) })
}
