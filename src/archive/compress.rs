//! The output side of the merge: a tar writer whose bytes go, in large chunks through a
//! bounded channel, to a compressor thread that gzips them (level 6, in blocks deflated
//! by worker threads: `blocks.rs`) into the caller's writer. Several cores work at once:
//! one parses and normalises, the others deflate. Chunk buffers are recycled, so memory
//! stays at a few MiB whatever the artifact size.
//! Synchronous `std` threads only; no tokio.

use std::io::{self, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use tar::EntryType;

use super::error::ArchiveError;
use super::normalise::{header, DIR_MODE};

/// Size of one chunk handed to the compressor. Each chunk is one deflate block run
/// (`blocks.rs`), so the artifact's bytes, and digest, depend on it: changing it changes
/// every artifact built afterwards.
const CHUNK: usize = 256 << 10;
/// Chunks in flight from the tar writer to the compressor (which keeps its own,
/// `blocks::IN_FLIGHT`, while the workers deflate them).
const IN_FLIGHT: usize = 2;

/// Collects tar bytes into chunks and sends them to the compressor thread.
struct ChunkWriter {
    buf: Vec<u8>,
    tx: SyncSender<Vec<u8>>,
    free: Receiver<Vec<u8>>,
}

impl ChunkWriter {
    fn ship(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let next = self
            .free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
        let full = std::mem::replace(&mut self.buf, next);
        self.tx
            .send(full)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the compressor stopped"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = CHUNK - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= CHUNK {
            self.ship()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The running tar → gzip pipeline writing into `W`.
///
/// Dropped without [`Sink::finish`] (a failed merge), it stops the compressor and waits for
/// it, so the output writer (the artifact's temp file) is dropped, and so deleted, before
/// the merge returns: a process exiting right after a failure leaves nothing behind.
pub(super) struct Sink<W> {
    tar: Option<tar::Builder<ChunkWriter>>,
    thread: Option<JoinHandle<io::Result<W>>>,
}

impl<W> Drop for Sink<W> {
    fn drop(&mut self) {
        // Closing the tar writer closes the channel; then the compressor can end.
        drop(self.tar.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn gone() -> io::Error {
    io::Error::other("the archive writer was already finished")
}

impl<W: Write + Send + 'static> Sink<W> {
    /// Starts the compressor thread.
    pub(super) fn start(out: W) -> Result<Self, ArchiveError> {
        let (tx, rx) = sync_channel::<Vec<u8>>(IN_FLIGHT);
        let (free_tx, free) = sync_channel::<Vec<u8>>(IN_FLIGHT + 1);
        let thread = std::thread::Builder::new()
            .name("ocisource-gzip".into())
            .spawn(move || super::blocks::gzip(rx, free_tx, out))
            .map_err(|source| ArchiveError::Write { source })?;
        let writer = ChunkWriter {
            buf: Vec::with_capacity(CHUNK),
            tx,
            free,
        };
        Ok(Self {
            tar: Some(tar::Builder::new(writer)),
            thread: Some(thread),
        })
    }

    /// Appends a normalised directory entry.
    pub(super) fn dir(&mut self, path: &str) -> io::Result<()> {
        let mut h = header(EntryType::Directory, DIR_MODE, 0);
        self.tar
            .as_mut()
            .ok_or_else(gone)?
            .append_data(&mut h, path, io::empty())
    }

    /// Appends a normalised regular file whose `size` bytes come from `data`.
    pub(super) fn file(
        &mut self,
        path: &str,
        mode: u32,
        size: u64,
        data: impl Read,
    ) -> io::Result<()> {
        let mut h = header(EntryType::Regular, mode, size);
        self.tar
            .as_mut()
            .ok_or_else(gone)?
            .append_data(&mut h, path, data)
    }

    /// Writes the tar trailer, flushes the last chunk, waits for the compressor and
    /// returns the writer.
    pub(super) fn finish(mut self) -> Result<W, ArchiveError> {
        let (Some(tar), Some(thread)) = (self.tar.take(), self.thread.take()) else {
            return Err(ArchiveError::Write { source: gone() });
        };
        let sent = tar.into_inner().and_then(|mut w| w.ship());
        // Dropping the writer (and its sender) ends the compressor loop.
        let joined = thread
            .join()
            .map_err(|_| ArchiveError::CompressorPanicked)?;
        match (sent, joined) {
            (_, Err(source)) | (Err(source), _) => Err(ArchiveError::Write { source }),
            (Ok(()), Ok(out)) => Ok(out),
        }
    }

    /// Stops the pipeline after a failure and returns the most telling error: the
    /// compressor's own error when it failed first, else `err`.
    pub(super) fn abandon(mut self, err: io::Error) -> ArchiveError {
        drop(self.tar.take());
        let Some(thread) = self.thread.take() else {
            return ArchiveError::Write { source: err };
        };
        match thread.join() {
            Err(_) => ArchiveError::CompressorPanicked,
            Ok(Err(source)) => ArchiveError::Write { source },
            Ok(Ok(_)) => ArchiveError::Write { source: err },
        }
    }
}
