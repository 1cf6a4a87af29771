//! Layer decoding: sniff the first bytes (gzip, zstd, or plain tar), decompress, and
//! count uncompressed bytes against the limit, remembering WHICH reader failed so that
//! errors can say "malformed gzip" or "registry stream failed" or "malformed tar".
//! Every decoder reads its input to the end (all gzip members, all zstd frames), so the
//! digest-checking stream under it always gets to check. Synchronous `std::io` only; no
//! tokio.

use std::cell::RefCell;
use std::io::{self, BufReader, Cursor, Read};
use std::rc::Rc;

use flate2::bufread::MultiGzDecoder;

use super::zstd::Frames;

/// Read buffer for compressed input.
const INPUT_BUFFER: usize = 256 * 1024;

/// The format of a layer, from its magic bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// `1f 8b`.
    Gzip,
    /// `28 b5 2f fd`.
    Zstd,
    /// Anything else is read as tar.
    Plain,
}

/// Picks the format from up to four leading bytes.
pub(super) fn sniff(head: &[u8]) -> Format {
    if head.starts_with(&[0x1f, 0x8b]) {
        Format::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Format::Zstd
    } else {
        Format::Plain
    }
}

/// The first error the raw (compressed) reader returned, kept for classification.
pub(super) type RawFailure = Rc<RefCell<Option<(io::ErrorKind, String)>>>;

/// Wraps the raw blob reader and records its first error.
struct Watched<R> {
    inner: R,
    failure: RawFailure,
}

impl<R: Read> Read for Watched<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            let mut f = self.failure.borrow_mut();
            if f.is_none() {
                *f = Some((e.kind(), e.to_string()));
            }
        })
    }
}

/// The decoded tar stream of one layer, with its byte budget.
pub(super) struct Decoded<'r> {
    inner: Box<dyn Read + 'r>,
    /// Uncompressed bytes read from this layer.
    pub(super) read: u64,
    budget: u64,
    /// Set when `read` went over the budget.
    pub(super) exceeded: bool,
    /// Set when the decoder (or the raw reader under it) returned an error.
    pub(super) inner_failed: bool,
    /// The raw reader's first error, if any.
    pub(super) raw_failure: RawFailure,
    /// The detected format.
    pub(super) format: Format,
}

impl Read for Decoded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self
            .inner
            .read(buf)
            .inspect_err(|_| self.inner_failed = true)?;
        self.read += n as u64;
        if self.read > self.budget {
            self.exceeded = true;
            return Err(io::Error::other("uncompressed size limit exceeded"));
        }
        Ok(n)
    }
}

/// Sniffs and opens a layer. `budget` is how many uncompressed bytes may still be read;
/// a zstd frame may ask for a window of at most `max_window` bytes. Errors here come from
/// the raw reader only.
pub(super) fn open<'r, R: Read + 'r>(
    reader: R,
    budget: u64,
    max_window: u64,
) -> io::Result<Decoded<'r>> {
    let failure: RawFailure = Rc::new(RefCell::new(None));
    let mut raw = Watched {
        inner: reader,
        failure: failure.clone(),
    };
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < head.len() {
        match raw.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let format = sniff(&head[..got]);
    let chained = Cursor::new(head).take(got as u64).chain(raw);
    let inner: Box<dyn Read + 'r> = match format {
        Format::Gzip => Box::new(MultiGzDecoder::new(BufReader::with_capacity(
            INPUT_BUFFER,
            chained,
        ))),
        Format::Zstd => Box::new(Frames::new(
            BufReader::with_capacity(INPUT_BUFFER, chained),
            max_window,
        )),
        Format::Plain => Box::new(chained),
    };
    Ok(Decoded {
        inner,
        read: 0,
        budget,
        exceeded: false,
        inner_failed: false,
        raw_failure: failure,
        format,
    })
}

/// Wraps an entry's data so that a short read (truncated layer) becomes an error instead
/// of a short copy, and so that a failure is known to come from the input side.
pub(super) struct Exact<R> {
    inner: R,
    left: u64,
    /// Set when reading the input failed or ended early.
    pub(super) failed: bool,
}

impl<R: Read> Exact<R> {
    /// Expects exactly `size` bytes from `inner`.
    pub(super) fn new(inner: R, size: u64) -> Self {
        Self {
            inner,
            left: size,
            failed: false,
        }
    }
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let max = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = match self.inner.read(&mut buf[..max]) {
            Ok(0) => {
                self.failed = true;
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "entry data ends early",
                ));
            }
            Ok(n) => n,
            Err(e) => {
                self.failed = true;
                return Err(e);
            }
        };
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_magic_bytes() {
        assert_eq!(sniff(&[0x1f, 0x8b, 8, 0]), Format::Gzip);
        assert_eq!(sniff(&[0x28, 0xb5, 0x2f, 0xfd]), Format::Zstd);
        assert_eq!(sniff(b"a.tx"), Format::Plain);
        assert_eq!(sniff(&[]), Format::Plain);
    }

    #[test]
    fn reads_back_the_sniffed_bytes_from_a_trickling_reader() {
        struct Trickle(Vec<u8>, usize);
        impl Read for Trickle {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.1 >= self.0.len() || buf.is_empty() {
                    return Ok(0);
                }
                buf[0] = self.0[self.1];
                self.1 += 1;
                Ok(1)
            }
        }
        let mut d = open(Trickle(b"hello world".to_vec(), 0), 100, 1 << 20).unwrap();
        let mut s = String::new();
        d.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello world");
        assert_eq!(d.read, 11);
        let mut small = open(&b"hello world"[..], 5, 1 << 20).unwrap();
        assert!(small.read_to_end(&mut Vec::new()).is_err());
        assert!(small.exceeded);
    }

    #[test]
    fn short_entry_data_is_an_error() {
        let mut e = Exact::new(&b"abc"[..], 5);
        assert!(e.read_to_end(&mut Vec::new()).is_err());
        assert!(e.failed);
    }
}
