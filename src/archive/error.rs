//! The one error type of the archive module. Every variant about layer content names the
//! layer digest and, when there is one, the entry path, and says what the publisher of
//! the artifact should do. Also the internal classification of reader failures into
//! these variants. Imports nothing from tokio or any network crate.

use std::io;

use super::decode::{Decoded, Format};
use super::merge::Conflict;
use super::name::EntryPath;
use crate::domain::digest::Digest;

/// A failed layer merge. On any error the caller deletes the temporary output.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The layer bytes could not be read (registry stream failed, digest mismatch).
    #[error("failed to read layer {layer}")]
    Read {
        /// Layer digest.
        layer: Digest,
        /// What the reader said.
        #[source]
        source: std::io::Error,
    },
    /// The layer starts like gzip but does not decompress.
    #[error("failed to decompress layer {layer}: malformed gzip data ({cause}): push a valid tar+gzip layer")]
    MalformedGzip {
        /// Layer digest.
        layer: Digest,
        /// What the decoder said.
        cause: std::io::Error,
    },
    /// The layer starts like zstd but does not decompress, or a frame fails its checksum.
    #[error("failed to decompress layer {layer}: malformed zstd data ({cause}): push a valid tar+zstd layer")]
    MalformedZstd {
        /// Layer digest.
        layer: Digest,
        /// What the decoder said.
        cause: std::io::Error,
    },
    /// The (decompressed) layer is not a valid tar archive.
    #[error("failed to read layer {layer} as a tar archive after entry '{after}': {cause}: push a valid tar layer")]
    MalformedTar {
        /// Layer digest.
        layer: Digest,
        /// Last entry read successfully (empty at the start).
        after: EntryPath,
        /// What the tar reader said.
        cause: std::io::Error,
    },
    /// A name over the name cap (GNU long name, PAX `path` or `linkpath`), refused before
    /// it is read into memory.
    #[error("failed to unpack entry '{path}' of layer {layer}: its name or link target is {bytes} bytes long, over the {limit}-byte limit (PATH_MAX): rebuild the artifact with shorter paths")]
    NameTooLong {
        /// Layer digest.
        layer: Digest,
        /// The entry (its first bytes when the name itself is too long).
        path: EntryPath,
        /// Length of the name or link target.
        bytes: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A path with more components than the depth cap.
    #[error("failed to unpack entry '{path}' of layer {layer}: the path has more than {limit} components: rebuild the artifact with a shallower tree")]
    PathTooDeep {
        /// Layer digest.
        layer: Digest,
        /// Entry path.
        path: EntryPath,
        /// Most components allowed.
        limit: usize,
    },
    /// A PAX extended header over its cap, refused before it is read into memory.
    #[error("failed to unpack entry '{path}' of layer {layer}: its PAX extended header is {bytes} bytes, over the {limit}-byte limit: rebuild the artifact without oversized PAX records")]
    PaxTooLarge {
        /// Layer digest.
        layer: Digest,
        /// The entry, as far as the header shows it.
        path: EntryPath,
        /// Size of the PAX header.
        bytes: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The merge's bookkeeping (paths that won, whiteouts) would outgrow its budget.
    #[error("failed to unpack entry '{path}' of layer {layer}: remembering the layers' paths would take more than {limit} bytes: shrink the artifact (fewer or shorter paths)")]
    TooManyPaths {
        /// Layer digest.
        layer: Digest,
        /// The entry that did not fit.
        path: EntryPath,
        /// The budget in bytes.
        limit: u64,
    },
    /// A name refused by the rules of `name`: absolute, `..`, not UTF-8, NUL, control
    /// characters, `\`, `x../y`.
    #[error("failed to unpack entry '{path}' of layer {layer}: {reason}: rebuild the artifact with plain relative names")]
    UnsafePath {
        /// Layer digest.
        layer: Digest,
        /// Entry path as found.
        path: EntryPath,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The entry would be written through a symlink that the layers put there.
    #[error("failed to unpack entry '{path}' of layer {layer}: its path goes through the symlink '{link}' set by a lower or earlier entry: rebuild the artifact without entries under symlinks")]
    ThroughSymlink {
        /// Layer digest of the entry.
        layer: Digest,
        /// The entry path.
        path: EntryPath,
        /// The symlink on its way.
        link: EntryPath,
    },
    /// A lower-layer symlink where higher layers put entries under a directory of that
    /// name, with no real directory replacing the symlink in between.
    #[error("failed to unpack symlink '{path}' of layer {layer}: higher layers put entries under '{path}/', which a runtime would write through this symlink: rebuild the artifact without the symlink or with a real directory above it")]
    SymlinkUnderEntries {
        /// Layer digest of the symlink.
        layer: Digest,
        /// The symlink path.
        path: EntryPath,
    },
    /// A hardlink entry.
    #[error("failed to unpack entry '{path}' of layer {layer}: hardlinks are not supported: rebuild the artifact with regular files")]
    Hardlink {
        /// Layer digest.
        layer: Digest,
        /// Entry path.
        path: EntryPath,
    },
    /// A character or block device, a fifo, or another type that has no place in sources.
    #[error("failed to unpack entry '{path}' of layer {layer}: {kind} entries are not allowed: rebuild the artifact with regular files and directories only")]
    SpecialFile {
        /// Layer digest.
        layer: Digest,
        /// Entry path.
        path: EntryPath,
        /// The entry type, in words.
        kind: &'static str,
    },
    /// The same path twice in one layer (the merge is streaming and top-down).
    #[error("failed to unpack entry '{path}' of layer {layer}: the path appears more than once in the layer: rebuild the layer with each path once")]
    Duplicate {
        /// Layer digest.
        layer: Digest,
        /// Entry path.
        path: EntryPath,
    },
    /// An entry under a path that the same layer made a regular file.
    #[error("failed to unpack entry '{path}' of layer {layer}: its parent '{parent}' is a file in the same layer: rebuild the layer")]
    UnderFile {
        /// Layer digest.
        layer: Digest,
        /// Entry path.
        path: EntryPath,
        /// The file on its way.
        parent: EntryPath,
    },
    /// Total uncompressed tar bytes over the limit (decompression bomb).
    #[error("failed to unpack layer {layer}: the layers hold more than {limit} uncompressed bytes: raise the uncompressed-size limit or shrink the artifact")]
    TooLarge {
        /// Layer digest.
        layer: Digest,
        /// The limit in bytes.
        limit: u64,
    },
    /// Total tar entries over the limit.
    #[error("failed to unpack entry '{path}' of layer {layer}: the layers hold more than {limit} entries: raise the entry limit or shrink the artifact")]
    TooManyEntries {
        /// Layer digest.
        layer: Digest,
        /// First entry over the limit.
        path: EntryPath,
        /// The limit.
        limit: u64,
    },
    /// `.sourceignore` files over their cap, together (`limits.max_sourceignore_bytes`).
    #[error("failed to read '{path}' of layer {layer}: the artifact's .sourceignore files hold more than {limit} bytes together (each counts at least 64): use fewer, shorter ones")]
    SourceIgnoreTooLarge {
        /// Layer digest.
        layer: Digest,
        /// Entry path.
        path: EntryPath,
        /// The limit in bytes.
        limit: u64,
    },
    /// A second pass, run with every `.sourceignore` preloaded, still found one that
    /// changes entries already written; a third pass would not converge.
    #[error("failed to apply '{path}' of layer {layer}: it changes entries written before it even with every .sourceignore preloaded: put .sourceignore files in the top layer")]
    SourceIgnoreUnstable {
        /// Layer digest.
        layer: Digest,
        /// Entry path.
        path: EntryPath,
    },
    /// Writing or compressing the output failed.
    #[error("failed to write the merged archive: {source}")]
    Write {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The compressor thread panicked.
    #[error("failed to write the merged archive: the compressor thread panicked")]
    CompressorPanicked,
}

impl ArchiveError {
    /// Whether the failure is on the output side (disk, compressor), not in the layers.
    pub fn is_output_failure(&self) -> bool {
        matches!(self, Self::Write { .. } | Self::CompressorPanicked)
    }

    /// Whether reading the layer bytes failed (the registry stream, not their content).
    pub fn is_input_failure(&self) -> bool {
        matches!(self, Self::Read { .. })
    }
}

/// How reading an entry failed: a final error, or an I/O error to classify once the
/// tar reader has let go of the decoder.
pub(super) enum Step {
    Fail(ArchiveError),
    Io(io::Error),
}

impl From<ArchiveError> for Step {
    fn from(e: ArchiveError) -> Self {
        Self::Fail(e)
    }
}

pub(super) fn conflict(digest: &Digest, path: &str, c: Conflict) -> ArchiveError {
    let layer = digest.clone();
    let path = EntryPath::from(path);
    match c {
        Conflict::Duplicate => ArchiveError::Duplicate { layer, path },
        Conflict::UnderFile(parent) => ArchiveError::UnderFile {
            layer,
            path,
            parent: EntryPath::from(parent.as_str()),
        },
        Conflict::ThroughSymlink(link) => ArchiveError::ThroughSymlink {
            layer,
            path,
            link: EntryPath::from(link.as_str()),
        },
        Conflict::SymlinkUnderEntries => ArchiveError::SymlinkUnderEntries { layer, path },
    }
}

/// Classifies an I/O error met while reading a layer.
pub(super) fn input_error(
    layer: &Digest,
    decoded: &Decoded<'_>,
    limit: u64,
    last: &EntryPath,
    e: io::Error,
) -> ArchiveError {
    let layer = layer.clone();
    if decoded.exceeded {
        return ArchiveError::TooLarge { layer, limit };
    }
    if let Some((kind, msg)) = decoded.raw_failure.borrow().as_ref() {
        return ArchiveError::Read {
            layer,
            source: io::Error::new(*kind, msg.clone()),
        };
    }
    match (decoded.inner_failed, decoded.format) {
        (true, Format::Gzip) => ArchiveError::MalformedGzip { layer, cause: e },
        (true, Format::Zstd) => ArchiveError::MalformedZstd { layer, cause: e },
        _ => ArchiveError::MalformedTar {
            layer,
            after: last.clone(),
            cause: e,
        },
    }
}
