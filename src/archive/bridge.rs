//! The ONE place where async and sync I/O meet: a bounded channel whose async side takes
//! blob chunks from a tokio task and whose sync side is a `std::io::Read` for
//! [`super::Merger::add_layer`] running in `spawn_blocking`; plus [`MergeTask`], the
//! merge on its blocking thread fed layer by layer, which the pipeline and the tests both
//! drive. Only this module of `archive` may import tokio.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use tokio::sync::mpsc;

use super::{ArchiveError, MergeOptions, MergeOutcome, Merger};
use crate::domain::manifest::Descriptor;
use crate::ports::BlobStream;

/// Batches buffered between the network task and the merging thread (each up to about
/// 2 × [`BATCH`] of heap).
pub const DEFAULT_CAPACITY: usize = 4;

/// Bytes gathered before a chunk is handed to the reading thread.
pub const BATCH: usize = 128 << 10;

/// The async side: send chunks, then [`BlobSender::finish`].
pub struct BlobSender {
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
    complete: Arc<AtomicBool>,
}

/// The sync side: reads the chunks in order. The end of the channel is EOF only when the
/// sender called [`BlobSender::finish`]; otherwise it is an `UnexpectedEof` error, so a
/// dropped download can never pass for a complete layer. Read it from a blocking thread
/// (`spawn_blocking`), never from async code: `blocking_recv` panics inside a runtime.
pub struct BlobReader {
    rx: mpsc::Receiver<Result<Bytes, io::Error>>,
    current: Bytes,
    complete: Arc<AtomicBool>,
}

/// The receiving side went away (the merge stopped, usually with an error).
#[derive(Debug, thiserror::Error)]
#[error("failed to hand blob bytes to the merge: the merge stopped reading")]
pub struct ReaderGone;

/// A bounded channel of `capacity` chunks.
pub fn channel(capacity: usize) -> (BlobSender, BlobReader) {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let complete = Arc::new(AtomicBool::new(false));
    (
        BlobSender {
            tx,
            complete: complete.clone(),
        },
        BlobReader {
            rx,
            current: Bytes::new(),
            complete,
        },
    )
}

impl BlobSender {
    /// Sends one chunk, or an error the reader will return.
    pub async fn send(&self, item: Result<Bytes, io::Error>) -> Result<(), ReaderGone> {
        self.tx.send(item).await.map_err(|_| ReaderGone)
    }

    /// Marks the blob complete; the reader sees EOF after the last chunk.
    pub fn finish(self) {
        self.complete.store(true, Ordering::Release);
    }

    /// Forwards a whole [`BlobStream`], turning registry errors into I/O errors for the
    /// reader, and marks the blob complete when the stream ended cleanly.
    ///
    /// Network reads arrive in small pieces (often 16 KiB); they are gathered into
    /// [`BATCH`]-sized chunks first, so the reading thread wakes once per batch rather than
    /// once per piece. The bytes in flight stay bounded: capacity × batch.
    pub async fn pump(self, mut stream: BlobStream) -> Result<(), ReaderGone> {
        let mut batch = BytesMut::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(chunk) if batch.is_empty() && chunk.len() >= BATCH => {
                    self.send(Ok(chunk)).await?
                }
                Ok(chunk) => {
                    batch.extend_from_slice(&chunk);
                    if batch.len() >= BATCH {
                        self.send(Ok(batch.split().freeze())).await?;
                    }
                }
                Err(e) => {
                    // What arrived before the error is still delivered, then the error.
                    if !batch.is_empty() {
                        self.send(Ok(batch.split().freeze())).await?;
                    }
                    return self.send(Err(io::Error::other(e))).await;
                }
            }
        }
        if !batch.is_empty() {
            self.send(Ok(batch.freeze())).await?;
        }
        self.finish();
        Ok(())
    }
}

impl Read for BlobReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(e)) => return Err(e),
                None if self.complete.load(Ordering::Acquire) => return Ok(0),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the blob download stopped before its end",
                    ))
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

/// A failed [`MergeTask`].
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The merge itself failed.
    #[error(transparent)]
    Merge(#[from] ArchiveError),
    /// The blocking merge task panicked or was cancelled.
    #[error("failed to run the layer merge task: {0}")]
    Task(String),
}

/// A [`Merger`] running on a blocking thread, fed layers top first with
/// [`MergeTask::feed`]; [`MergeTask::finish`] returns its outcome.
pub struct MergeTask<W> {
    layers: mpsc::Sender<(Descriptor, BlobReader)>,
    task: tokio::task::JoinHandle<Result<MergeOutcome<W>, ArchiveError>>,
    capacity: usize,
}

impl<W: io::Write + Send + 'static> MergeTask<W> {
    /// Starts a merge into `out`. Each layer crosses over in a channel of `capacity`
    /// batches (see [`DEFAULT_CAPACITY`]).
    pub fn spawn(out: W, opts: MergeOptions, capacity: usize) -> Self {
        let (layers, mut rx) = mpsc::channel::<(Descriptor, BlobReader)>(1);
        let task = tokio::task::spawn_blocking(move || {
            let mut merger = Merger::new(out, opts);
            while let Some((layer, reader)) = rx.blocking_recv() {
                merger.add_layer(&layer, reader)?;
            }
            merger.finish()
        });
        Self {
            layers,
            task,
            capacity,
        }
    }

    /// Merges the next layer (top first), pumping `stream` into it. [`ReaderGone`] means
    /// the merge stopped; [`MergeTask::finish`] says why.
    pub async fn feed(&self, layer: Descriptor, stream: BlobStream) -> Result<(), ReaderGone> {
        let (tx, rx) = channel(self.capacity);
        self.layers
            .send((layer, rx))
            .await
            .map_err(|_| ReaderGone)?;
        tx.pump(stream).await
    }

    /// Ends the input and waits for the merge.
    pub async fn finish(self) -> Result<MergeOutcome<W>, BridgeError> {
        drop(self.layers);
        Ok(self
            .task
            .await
            .map_err(|e| BridgeError::Task(e.to_string()))??)
    }
}
