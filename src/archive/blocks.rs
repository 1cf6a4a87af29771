//! Gzip in blocks, deflated on several threads at once (pigz's scheme): the tar stream
//! arrives as chunks; each chunk is deflated (level 6, raw) by a worker with the last
//! 32 KiB of the chunk before it as the preset dictionary, so matches reach back across
//! the seam as they do in a one-thread stream, and ends on a sync flush (byte-aligned,
//! so blocks simply concatenate). One gzip member: a fixed header, the blocks in order,
//! an empty final block, and the CRC-32 (each worker's, combined) and length.
//!
//! The bytes depend only on the input and the chunk size, never on how many workers ran
//! or in which order they finished: the artifact's digest is the same on any machine.
//! A stream of one chunk (most configuration artifacts) is deflated on this thread, with
//! no worker started. Memory is bounded: at most [`IN_FLIGHT`] chunks are out at once,
//! each worker holds one deflate state while it works.
//! Our own code rather than a parallel-gzip crate: the one candidate (`gzp`) brings its
//! own thread pool and channel crates for what is ~150 lines over flate2's `Compress`
//! and `Crc`, which are already in the tree.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

use flate2::{Compress, Compression, Crc, FlushCompress};

/// Bytes of the previous chunk given to the next one's deflate as its dictionary (the
/// whole deflate window).
const DICTIONARY: usize = 32 << 10;
/// Chunks handed to workers and not yet written out.
pub(super) const IN_FLIGHT: usize = 4;
/// Most workers per stream. Each costs ~3 MiB while the stream lasts (its deflate
/// state, its output blocks, and the allocator's arena for its thread, measured with
/// the 126 MB artifact of bench scenario 1); two already make the tar side, not the
/// deflating, the slower half (scenario 1: 1.36 s with one, 0.97 s with two).
const MAX_WORKERS: usize = 2;

/// The gzip header: no name, no mtime, no extra flags, OS "unknown" (255).
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
/// A final, fixed-Huffman block holding only its end-of-block code.
const FINAL_EMPTY_BLOCK: [u8; 2] = [0x03, 0x00];

/// One chunk to deflate.
struct Job {
    dictionary: Option<Vec<u8>>,
    chunk: Vec<u8>,
    reply: SyncSender<io::Result<Done>>,
}

/// A deflated chunk: its bytes, its CRC-32, and the chunk's buffer for reuse.
struct Done {
    deflated: Vec<u8>,
    crc: Crc,
    chunk: Vec<u8>,
}

/// Deflates `chunk` (raw, sync-flushed) with `dictionary` preset. A fresh deflate state
/// per chunk: one reused after `Compress::reset` gave other bytes for the same input
/// (zlib-rs keeps some of the previous stream), so the output would depend on which
/// worker deflated what before. The state costs ~0.3 MiB to set up, against ~2 ms to
/// deflate a chunk.
fn deflate(dictionary: Option<&[u8]>, chunk: Vec<u8>, spare: Vec<u8>) -> io::Result<Done> {
    let z = &mut Compress::new(Compression::new(6), false);
    if let Some(d) = dictionary {
        z.set_dictionary(d).map_err(io::Error::other)?;
    }
    // Room for the worst case (stored blocks: 5 bytes per 16 KiB, plus the flush), so
    // one call does it all and the bytes never depend on the buffer's size.
    let mut deflated = spare;
    deflated.clear();
    deflated.reserve(chunk.len() + chunk.len() / 1024 + 1024);
    let start = z.total_in();
    loop {
        let consumed = usize::try_from(z.total_in() - start).unwrap_or(usize::MAX);
        if deflated.capacity() - deflated.len() < 1024 {
            deflated.reserve(deflated.capacity().max(64 << 10));
        }
        z.compress_vec(&chunk[consumed..], &mut deflated, FlushCompress::Sync)
            .map_err(io::Error::other)?;
        let consumed = usize::try_from(z.total_in() - start).unwrap_or(usize::MAX);
        // The flush is complete once all input is in and the output did not fill up.
        if consumed == chunk.len() && deflated.len() < deflated.capacity() {
            break;
        }
    }
    let mut crc = Crc::new();
    crc.update(&chunk);
    Ok(Done {
        deflated,
        crc,
        chunk,
    })
}

/// Writes a block stream: the header first, then blocks as they come, then the end.
struct Member<W> {
    out: W,
    crc: Crc,
}

impl<W: Write> Member<W> {
    fn start(mut out: W) -> io::Result<Self> {
        out.write_all(&HEADER)?;
        Ok(Self {
            out,
            crc: Crc::new(),
        })
    }

    fn block(&mut self, done: &Done) -> io::Result<()> {
        self.out.write_all(&done.deflated)?;
        self.crc.combine(&done.crc);
        Ok(())
    }

    fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&FINAL_EMPTY_BLOCK)?;
        self.out.write_all(&self.crc.sum().to_le_bytes())?;
        self.out.write_all(&self.crc.amount().to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Gzips the chunks of `chunks`, in order, into `out`; each chunk's buffer goes back
/// through `free` once written. Returns `out` after the gzip trailer.
pub(super) fn gzip<W: Write>(
    chunks: Receiver<Vec<u8>>,
    free: SyncSender<Vec<u8>>,
    out: W,
) -> io::Result<W> {
    let member = Member::start(out)?;
    let Ok(first) = chunks.recv() else {
        return member.finish();
    };
    let Ok(second) = chunks.recv() else {
        return in_order(member, std::iter::once(first), &free);
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, MAX_WORKERS);
    in_blocks(member, [first, second], chunks, free, workers)
}

/// The dictionary of each chunk: the last [`DICTIONARY`] bytes of the one before.
#[derive(Default)]
struct Seams {
    tail: Option<Vec<u8>>,
}

impl Seams {
    /// The dictionary of `chunk`, the next chunk of the stream.
    fn next(&mut self, chunk: &[u8]) -> Option<Vec<u8>> {
        let tail = chunk[chunk.len().saturating_sub(DICTIONARY)..].to_vec();
        self.tail.replace(tail)
    }
}

/// Output buffers written out, for the next deflate to fill again.
#[derive(Default)]
struct Spares(Mutex<Vec<Vec<u8>>>);

impl Spares {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .ok()
            .and_then(|mut s| s.pop())
            .unwrap_or_default()
    }

    fn give(&self, buffer: Vec<u8>) {
        if let Ok(mut s) = self.0.lock() {
            if s.len() < IN_FLIGHT {
                s.push(buffer);
            }
        }
    }
}

/// [`gzip`] of two or more chunks, on `workers` threads.
fn in_blocks<W: Write>(
    mut member: Member<W>,
    first: [Vec<u8>; 2],
    chunks: Receiver<Vec<u8>>,
    free: SyncSender<Vec<u8>>,
    workers: usize,
) -> io::Result<W> {
    let (jobs, queue) = sync_channel::<Job>(workers);
    let queue = Mutex::new(queue);
    let spares = Spares::default();
    std::thread::scope(|scope| {
        let mut started = 0;
        for i in 0..workers {
            let (queue, spares) = (&queue, &spares);
            let spawned = std::thread::Builder::new()
                .name(format!("ocisource-gzip-{i}"))
                .spawn_scoped(scope, move || work(queue, spares));
            // Out of threads (a pids limit): the workers that started do the work.
            match spawned {
                Ok(_) => started += 1,
                Err(_) => break,
            }
        }
        let all = first.into_iter().chain(chunks.iter());
        if started == 0 {
            return in_order(member, all, &free);
        }
        // `jobs` is dropped when this returns, early or not: the workers then end.
        let mut pending: VecDeque<Receiver<io::Result<Done>>> = VecDeque::new();
        let mut seams = Seams::default();
        for chunk in all {
            let (reply, answer) = sync_channel(1);
            jobs.send(Job {
                dictionary: seams.next(&chunk),
                chunk,
                reply,
            })
            .map_err(|_| io::Error::other("the gzip workers stopped"))?;
            pending.push_back(answer);
            // Write what is done, in order; wait when too many are out.
            while let Some(front) = pending.front() {
                let done = if pending.len() >= IN_FLIGHT {
                    front.recv().ok()
                } else {
                    match front.try_recv() {
                        Ok(d) => Some(d),
                        Err(std::sync::mpsc::TryRecvError::Empty) => break,
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => None,
                    }
                };
                pending.pop_front();
                written(&mut member, &free, &spares, done)?;
            }
        }
        for answer in pending {
            written(&mut member, &free, &spares, answer.recv().ok())?;
        }
        drop(jobs);
        member.finish()
    })
}

/// The chunks deflated on this thread, one after the other: a stream of one chunk, or
/// no worker thread could be started. The same bytes as [`in_blocks`].
fn in_order<W: Write>(
    mut member: Member<W>,
    chunks: impl Iterator<Item = Vec<u8>>,
    free: &SyncSender<Vec<u8>>,
) -> io::Result<W> {
    let mut seams = Seams::default();
    let spares = Spares::default();
    for chunk in chunks {
        let dictionary = seams.next(&chunk);
        let done = deflate(dictionary.as_deref(), chunk, spares.take());
        written(&mut member, free, &spares, Some(done))?;
    }
    member.finish()
}

/// Writes one deflated chunk (a worker's answer) and recycles its buffers.
fn written<W: Write>(
    member: &mut Member<W>,
    free: &SyncSender<Vec<u8>>,
    spares: &Spares,
    done: Option<io::Result<Done>>,
) -> io::Result<()> {
    let mut done = done.unwrap_or_else(|| Err(io::Error::other("a gzip worker stopped")))?;
    member.block(&done)?;
    done.chunk.clear();
    let _ = free.try_send(done.chunk);
    spares.give(done.deflated);
    Ok(())
}

/// A worker: deflates jobs until the queue closes.
fn work(queue: &Mutex<Receiver<Job>>, spares: &Spares) {
    loop {
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let done = deflate(job.dictionary.as_deref(), job.chunk, spares.take());
        let _ = job.reply.send(done);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Read;

    use super::*;

    /// Gzips `data` cut into chunks of `chunk` bytes.
    fn gzipped(data: &[u8], chunk: usize) -> Vec<u8> {
        let (tx, rx) = sync_channel(data.len() / chunk + 2);
        let (free, _recycled) = sync_channel(IN_FLIGHT + 1);
        for c in data.chunks(chunk) {
            tx.send(c.to_vec()).unwrap();
        }
        drop(tx);
        let mut out = Vec::new();
        gzip(rx, free, &mut out).unwrap();
        out
    }

    /// [`in_blocks`] of `data` (two chunks at least) on `workers` threads.
    fn on_workers(data: &[u8], chunk: usize, workers: usize) -> Vec<u8> {
        let mut parts = data.chunks(chunk).map(<[u8]>::to_vec);
        let first = [parts.next().unwrap(), parts.next().unwrap()];
        let (tx, rx) = sync_channel(data.len() / chunk + 2);
        for c in parts {
            tx.send(c).unwrap();
        }
        drop(tx);
        let (free, _recycled) = sync_channel(IN_FLIGHT + 1);
        let member = Member::start(Vec::new()).unwrap();
        in_blocks(member, first, rx, free, workers).unwrap()
    }

    fn sample(len: usize) -> Vec<u8> {
        // Compressible but not trivial: lines with a counter, repeated text far apart.
        let mut v = Vec::with_capacity(len);
        let mut i = 0u64;
        while v.len() < len {
            v.extend_from_slice(format!("key-{}: value {}\n", i % 977, i * 7919).as_bytes());
            i += 1;
        }
        v.truncate(len);
        v
    }

    #[test]
    fn any_gzip_reader_gets_the_bytes_back_and_the_checksums_hold() {
        for (len, chunk) in [(0, 1024), (10, 1024), (300_000, 65_536), (1 << 20, 100_000)] {
            let data = sample(len);
            let gz = gzipped(&data, chunk);
            let mut back = Vec::new();
            // GzDecoder checks the CRC-32 and length of the trailer.
            flate2::read::GzDecoder::new(&gz[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data, "len {len}, chunk {chunk}");
        }
    }

    #[test]
    fn the_bytes_do_not_depend_on_the_workers_and_the_seams_cost_little() {
        let data = sample(2 << 20);
        let a = gzipped(&data, 256 << 10);
        // 0: no worker thread could be started, the coordinator deflates alone.
        for workers in [0, 1, 2, 3, 4] {
            assert_eq!(
                on_workers(&data, 256 << 10, workers),
                a,
                "{workers} workers"
            );
        }
        let mut one = flate2::write::GzEncoder::new(Vec::new(), Compression::new(6));
        one.write_all(&data).unwrap();
        let one = one.finish().unwrap();
        // The preset dictionaries keep the ratio within 1% of a one-thread stream.
        assert!(
            a.len() * 100 <= one.len() * 101,
            "{} vs {}",
            a.len(),
            one.len()
        );
    }
}
