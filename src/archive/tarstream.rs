//! The tar header stream of one layer, read with every extension record bounded BEFORE
//! it is read: GNU long names (`L`) and long link names (`K`) over the name cap, and PAX
//! extended headers (`x`) over the PAX cap, are refused from their header alone.
//!
//! Why not `tar::Archive`: it reads GNU long-name and PAX records whole into a `Vec`
//! (`EntryFields::read_all`) with no limit in its API, so a 256 MiB name costs 256 MiB
//! before the caller sees the entry; bounding the reader under it would have to mirror its
//! header parsing anyway. Its PAX parser also splits records at newlines, which values may
//! legally hold. So the stream of 512-byte headers is walked here, and the `tar` crate
//! still does the field parsing (`Header`: checksum, octal and base-256 numbers, ustar
//! prefix). Semantics follow the `tar` crate and Go's `archive/tar`: a GNU long name wins
//! over a PAX `path`, which wins over the header name; a PAX `size` overrides the header's
//! size; a zero block ends the archive. PAX sparse files (`GNU.sparse.*`) are refused, not
//! stored as their raw encoding. Synchronous `std::io` only.

use std::io::{self, Read};

use tar::{EntryType, Header};

use super::name::{EntryPath, SHOWN_BYTES};
use crate::domain::limits::Limits;

/// Size of a tar block.
const BLOCK: u64 = 512;

/// One entry, with the extension records before it applied.
pub(super) struct RawEntry {
    /// The name: GNU long name, else PAX `path`, else the header's (ustar prefix joined).
    pub(super) name: Vec<u8>,
    /// Its type.
    pub(super) kind: EntryType,
    /// Mode bits from the header (0644 when unreadable).
    pub(super) mode: u32,
    /// Data bytes, PAX `size` applied.
    pub(super) size: u64,
}

/// Why a record is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Why {
    /// A GNU long name or link name, or a PAX `linkpath`, over the name cap.
    NameTooLong {
        /// Its size in bytes.
        bytes: u64,
    },
    /// A PAX extended header over the PAX cap.
    PaxTooLarge {
        /// Its size in bytes.
        bytes: u64,
    },
    /// A PAX sparse file (`GNU.sparse.*` records).
    Sparse,
}

/// How reading the stream stopped.
pub(super) enum TarError {
    /// Reading failed or the bytes are not a tar archive; the caller classifies it.
    Io(io::Error),
    /// A record refused outright, with the entry it belongs to.
    Refused(EntryPath, Why),
}

impl From<io::Error> for TarError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

fn malformed(msg: &str) -> TarError {
    TarError::Io(io::Error::new(io::ErrorKind::InvalidData, msg.to_string()))
}

/// The records of a PAX extended header that matter here.
#[derive(Default)]
struct Pax {
    path: Option<Vec<u8>>,
    size: Option<u64>,
    linkpath_bytes: u64,
    sparse: bool,
    sparse_name: Option<Vec<u8>>,
}

/// Walks the headers of a tar stream; entry data is read with [`TarStream::data`].
pub(super) struct TarStream<R> {
    inner: R,
    left: u64,
    pad: u64,
    max_name: u64,
    max_pax: u64,
}

impl<R: Read> TarStream<R> {
    /// Reads `inner` as tar, with the name and PAX caps of `limits`.
    pub(super) fn new(inner: R, limits: &Limits) -> Self {
        Self {
            inner,
            left: 0,
            pad: 0,
            max_name: limits.max_name_bytes,
            max_pax: limits.max_pax_bytes,
        }
    }

    /// The data of the entry last returned (what is left of it).
    pub(super) fn data(&mut self) -> Data<'_, R> {
        Data { stream: self }
    }

    /// The next entry, `None` at the end of the archive. Skips what is left of the data
    /// of the previous one.
    pub(super) fn next_entry(&mut self) -> Result<Option<RawEntry>, TarError> {
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<u64> = None;
        let mut pax: Option<Pax> = None;
        loop {
            self.skip_rest()?;
            let Some(header) = self.header()? else {
                if long_name.is_some() || long_link.is_some() || pax.is_some() {
                    return Err(malformed(
                        "extension records at the end of the archive describe no entry",
                    ));
                }
                return Ok(None);
            };
            let kind = header.entry_type();
            let extension = kind.is_gnu_longname()
                || kind.is_gnu_longlink()
                || kind.is_pax_local_extensions()
                || kind.is_pax_global_extensions();
            let size = match pax.as_ref().and_then(|p| p.size) {
                Some(size) if !extension => size,
                _ => header.entry_size()?,
            };
            self.left = size;
            self.pad = (BLOCK - size % BLOCK) % BLOCK;
            if kind.is_gnu_longname() {
                if long_name.is_some() {
                    return Err(malformed("two long-name records for one entry"));
                }
                long_name = Some(self.long_name(size)?);
            } else if kind.is_gnu_longlink() {
                if long_link.is_some() {
                    return Err(malformed("two long-link records for one entry"));
                }
                long_link = Some(size);
            } else if kind.is_pax_local_extensions() {
                if pax.is_some() {
                    return Err(malformed("two PAX headers for one entry"));
                }
                pax = Some(self.pax(size, &header)?);
            } else {
                let pax = pax.unwrap_or_default();
                let name = match (long_name, pax.path) {
                    (Some(name), _) | (None, Some(name)) => name,
                    (None, None) => header.path_bytes().into_owned(),
                };
                // A long-link record holds the name and a terminating NUL.
                let too_long = match long_link {
                    Some(n) if n > self.max_name + 1 => Some(n),
                    _ => Some(pax.linkpath_bytes).filter(|n| *n > self.max_name),
                };
                if let Some(bytes) = too_long {
                    return Err(TarError::Refused(
                        EntryPath::new(&name),
                        Why::NameTooLong { bytes },
                    ));
                }
                if pax.sparse {
                    let shown = pax.sparse_name.unwrap_or(name);
                    return Err(TarError::Refused(EntryPath::new(&shown), Why::Sparse));
                }
                return Ok(Some(RawEntry {
                    name,
                    kind,
                    mode: header.mode().unwrap_or(0o644),
                    size,
                }));
            }
        }
    }

    /// Reads one header block; `None` at EOF or at a zero block (end of archive).
    fn header(&mut self) -> Result<Option<Header>, TarError> {
        let mut header = Header::new_old();
        let block = header.as_mut_bytes();
        let mut got = 0;
        while got < block.len() {
            match self.inner.read(&mut block[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(malformed("the archive ends inside a header")),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        if block.iter().all(|b| *b == 0) {
            return Ok(None);
        }
        let sum: u32 = block[..148]
            .iter()
            .chain(&block[156..])
            .map(|b| u32::from(*b))
            .sum::<u32>()
            + 8 * 32;
        if header.cksum()? != sum {
            return Err(malformed("archive header checksum mismatch"));
        }
        Ok(Some(header))
    }

    /// Skips the unread data of the current entry and its padding.
    fn skip_rest(&mut self) -> Result<(), TarError> {
        let want = self.left + self.pad;
        let skipped = io::copy(&mut (&mut self.inner).take(want), &mut io::sink())?;
        self.left = 0;
        self.pad = 0;
        if skipped < want {
            return Err(malformed("the archive ends inside an entry"));
        }
        Ok(())
    }

    /// Reads at most `max` bytes of the current record into memory.
    fn read_record(&mut self, max: u64) -> Result<Vec<u8>, TarError> {
        let mut buf = Vec::with_capacity(usize::try_from(max).unwrap_or(0));
        let want = max.min(self.left);
        self.data().take(want).read_to_end(&mut buf)?;
        if (buf.len() as u64) < want {
            return Err(malformed("the archive ends inside an extension record"));
        }
        Ok(buf)
    }

    /// A GNU long name of `size` bytes: refused from its header when over the cap.
    fn long_name(&mut self, size: u64) -> Result<Vec<u8>, TarError> {
        // The record holds the name and a terminating NUL.
        if size > self.max_name + 1 {
            let head = self.read_record(SHOWN_BYTES as u64)?;
            let shown = EntryPath::cut(&head, usize::try_from(size).unwrap_or(usize::MAX));
            return Err(TarError::Refused(shown, Why::NameTooLong { bytes: size }));
        }
        let mut name = self.read_record(size)?;
        while name.last() == Some(&0) {
            name.pop();
        }
        Ok(name)
    }

    /// A PAX extended header of `size` bytes: refused from its header when over the cap.
    fn pax(&mut self, size: u64, header: &Header) -> Result<Pax, TarError> {
        if size > self.max_pax {
            let head = self.read_record(BLOCK)?;
            let shown = match first_record(&head) {
                Some((b"path", value, len)) => EntryPath::cut(value, len),
                _ => EntryPath::new(&header.path_bytes()),
            };
            return Err(TarError::Refused(shown, Why::PaxTooLarge { bytes: size }));
        }
        let data = self.read_record(size)?;
        let mut pax = Pax::default();
        let mut rest = data.as_slice();
        while !rest.is_empty() {
            let (key, value, tail) =
                record(rest).ok_or_else(|| malformed("malformed PAX record"))?;
            rest = tail;
            match key {
                b"path" => pax.path = Some(value.to_vec()),
                b"linkpath" => pax.linkpath_bytes = value.len() as u64,
                b"size" => {
                    let size = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                    pax.size = Some(size.ok_or_else(|| malformed("malformed PAX size record"))?);
                }
                b"GNU.sparse.name" => {
                    pax.sparse = true;
                    pax.sparse_name = Some(value.to_vec());
                }
                k if k.starts_with(b"GNU.sparse.") => pax.sparse = true,
                _ => {}
            }
        }
        Ok(pax)
    }
}

/// One PAX record `"<len> <key>=<value>\n"` at the start of `data`: key, value, the rest.
fn record(data: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let space = data.iter().take(20).position(|b| *b == b' ')?;
    let len: usize = std::str::from_utf8(&data[..space]).ok()?.parse().ok()?;
    if len <= space + 1 || len > data.len() || data[len - 1] != b'\n' {
        return None;
    }
    let body = &data[space + 1..len - 1];
    let eq = body.iter().position(|b| *b == b'=')?;
    Some((&body[..eq], &body[eq + 1..], &data[len..]))
}

/// The key of the first record in the first bytes of an oversized PAX header, the part of
/// its value that was read, and the value's full length.
fn first_record(head: &[u8]) -> Option<(&[u8], &[u8], usize)> {
    let space = head.iter().take(20).position(|b| *b == b' ')?;
    let len: usize = std::str::from_utf8(&head[..space]).ok()?.parse().ok()?;
    let body = &head[space + 1..];
    let eq = body.iter().position(|b| *b == b'=')?;
    let value = &body[eq + 1..];
    let full = len.checked_sub(space + eq + 3)?;
    Some((&body[..eq], &value[..value.len().min(full)], full))
}

/// The data of the current entry; ends (short reads become EOF) at its size.
pub(super) struct Data<'a, R> {
    stream: &'a mut TarStream<R>,
}

impl<R: Read> Read for Data<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let s = &mut *self.stream;
        if s.left == 0 {
            return Ok(0);
        }
        let max = buf.len().min(usize::try_from(s.left).unwrap_or(usize::MAX));
        let n = s.inner.read(&mut buf[..max])?;
        s.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn pax_records_are_split_by_length_not_by_newline() {
        let data = b"18 path=a\nb/c.txt\n11 size=42\n";
        let (k, v, rest) = record(data).unwrap();
        assert_eq!((k, v), (&b"path"[..], &b"a\nb/c.txt"[..]));
        let (k, v, rest) = record(rest).unwrap();
        assert_eq!((k, v, rest), (&b"size"[..], &b"42"[..], &b""[..]));
        assert!(record(b"99 path=short\n").is_none());
        assert!(record(b"x path=a\n").is_none());
        assert!(record(b"9 pathab\n").is_none());
    }

    #[test]
    fn the_first_record_of_an_oversized_header_names_the_entry() {
        let head = b"268435466 path=deep/dir/name";
        let (k, v, full) = first_record(head).unwrap();
        assert_eq!(
            (k, v, full),
            (&b"path"[..], &b"deep/dir/name"[..], 268_435_466 - 16)
        );
    }
}
