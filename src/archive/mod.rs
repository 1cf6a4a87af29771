//! Streaming merge of the selected tar layers of an OCI artifact into ONE normalised
//! tar.gz, in one pass: no temp directory, no blob in memory, flat memory.
//!
//! Layers are fed TOP first (the reverse of manifest order), so the first version of a
//! path is the winner: it is written at once and lower versions are skipped. OCI
//! whiteouts (`.wh.<name>`, `.wh..wh..opq`) hide lower content and are never written.
//! A path that appears twice within ONE layer is refused ([`ArchiveError::Duplicate`]):
//! a streaming top-down merge cannot know that a later, winning copy is coming. The
//! output follows Flux's normalisation (see `normalise`) and is deterministic.
//!
//! Ignore rules: see [`crate::domain::ignore`]. A `.sourceignore` that arrives after
//! entries it would change were written switches the merger to collect-only mode, and
//! [`Merger::finish`] returns [`MergeOutcome::NeedsSecondPass`]; the caller reruns with
//! the returned files preloaded via [`IgnoreRules::add_sourceignore`]. A second pass that
//! would need a third fails with [`ArchiveError::SourceIgnoreUnstable`].
//!
//! Hostile layers meet caps before memory: names (PATH_MAX) and path depth (`name`),
//! GNU long-name and PAX records refused from their headers (`tarstream`), the merge's
//! bookkeeping in a budgeted tree of components (`merge`, `tree`), zstd windows and
//! checksums (`zstd`), total uncompressed bytes and entries (`decode`, here). Every error
//! names the layer digest and the entry, escaped ([`EntryPath`]).
//!
//! Sync `std::io` only; the async bridge lives in [`bridge`], the only module here that
//! may import tokio.

mod blocks;
pub mod bridge;
mod compress;
mod decode;
mod entry;
mod error;
mod merge;
mod name;
mod normalise;
mod tarstream;
#[cfg(test)]
mod test_layers;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_names;
mod tree;
mod zstd;

use std::io::{self, Read, Write};

use crate::domain::digest::Digest;
use crate::domain::ignore::IgnoreRules;
use crate::domain::limits::Limits;
pub use crate::domain::limits::MAX_SOURCEIGNORE_BYTES;
use crate::domain::manifest::Descriptor;

use compress::Sink;
use decode::Decoded;
pub use error::ArchiveError;
use error::{input_error, Step};
use merge::State;
pub use name::EntryPath;
use tarstream::{TarError, TarStream, Why};

/// What a merge applies besides the layers.
#[derive(Clone, Debug, Default)]
pub struct MergeOptions {
    /// Exclusions: defaults or `spec.ignore`, plus any preloaded `.sourceignore`.
    pub ignore: IgnoreRules,
    /// Caps on entries and uncompressed bytes.
    pub limits: Limits,
}

/// Counters of a finished merge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Entries written (files and directories).
    pub entries: u64,
    /// Regular files written.
    pub files: u64,
    /// Directories written, explicit or synthesised.
    pub dirs: u64,
    /// Uncompressed tar bytes read from all layers.
    pub uncompressed_bytes: u64,
    /// Entries read but not written: hidden, shadowed, ignored, symlinks, whiteouts.
    pub skipped: u64,
}

/// How a merge ended.
#[derive(Debug)]
pub enum MergeOutcome<W> {
    /// The archive is complete in `out`.
    Done {
        /// The writer, with the whole tar.gz written and flushed by the encoder.
        out: W,
        /// Counters.
        stats: MergeStats,
    },
    /// A `.sourceignore` came after entries it changes: discard the output and merge
    /// again with these `(directory, content)` pairs added to `MergeOptions::ignore`.
    NeedsSecondPass {
        /// Every `.sourceignore` of the final tree.
        sourceignore: Vec<(String, String)>,
    },
}

/// The streaming merger. Feed layers top first with [`Merger::add_layer`], then call
/// [`Merger::finish`].
pub struct Merger<W: Write + Send + 'static> {
    out: Option<W>,
    sink: Option<Sink<W>>,
    rules: IgnoreRules,
    limits: Limits,
    state: State,
    layer: u32,
    read_entries: u64,
    read_bytes: u64,
    stats: MergeStats,
    second_pass: bool,
    collect_only: bool,
    found: Vec<(String, String)>,
    /// `.sourceignore` bytes read so far (each file counts at least 64).
    found_bytes: u64,
    /// Paths visited by `.sourceignore` change checks so far.
    checked: u64,
}

impl<W: Write + Send + 'static> Merger<W> {
    /// A merger writing the tar.gz into `out`. Preloaded `.sourceignore` rules in
    /// `opts.ignore` mark this as a second pass.
    pub fn new(out: W, opts: MergeOptions) -> Self {
        Self {
            out: Some(out),
            sink: None,
            second_pass: opts.ignore.sourceignore_count() > 0,
            rules: opts.ignore,
            state: State::new(opts.limits.max_remembered_bytes),
            limits: opts.limits,
            layer: 0,
            read_entries: 0,
            read_bytes: 0,
            stats: MergeStats::default(),
            collect_only: false,
            found: Vec::new(),
            found_bytes: 0,
            checked: 0,
        }
    }

    /// Merges one layer (gzip, zstd or plain tar, sniffed). Layers are given from the
    /// TOP layer (last in the manifest) down to the bottom one. The reader is read to its
    /// end, so a digest-checking stream gets to check. After an error the merger is in an
    /// undefined state: drop it and delete the output.
    pub fn add_layer(&mut self, layer: &Descriptor, reader: impl Read) -> Result<(), ArchiveError> {
        let digest = &layer.digest;
        if self.sink.is_none() {
            if let Some(out) = self.out.take() {
                self.sink = Some(Sink::start(out)?);
            }
        }
        let budget = self
            .limits
            .max_uncompressed_bytes
            .saturating_sub(self.read_bytes);
        let max_window = self.limits.max_zstd_window_bytes;
        let mut decoded =
            decode::open(reader, budget, max_window).map_err(|source| ArchiveError::Read {
                layer: digest.clone(),
                source,
            })?;
        let mut last = EntryPath::default();
        let result = self
            .entries(digest, &mut decoded, &mut last)
            .and_then(|()| {
                // Read to the end: trailing gzip members, and the digest check of the stream.
                io::copy(&mut decoded, &mut io::sink())
                    .map(drop)
                    .map_err(Step::Io)
            });
        let limit = self.limits.max_uncompressed_bytes;
        let result = result.map_err(|step| match step {
            Step::Fail(e) => e,
            Step::Io(e) => input_error(digest, &decoded, limit, &last, e),
        });
        self.read_bytes += decoded.read;
        self.stats.uncompressed_bytes = self.read_bytes;
        self.layer += 1;
        result
    }

    fn entries(
        &mut self,
        digest: &Digest,
        decoded: &mut Decoded<'_>,
        last: &mut EntryPath,
    ) -> Result<(), Step> {
        let mut tar = TarStream::new(&mut *decoded, &self.limits);
        loop {
            let raw = match tar.next_entry() {
                Ok(Some(raw)) => raw,
                Ok(None) => return Ok(()),
                Err(TarError::Io(e)) => return Err(Step::Io(e)),
                Err(TarError::Refused(path, why)) => {
                    return Err(self.refused(digest, path, why).into())
                }
            };
            self.entry(digest, &raw, &mut tar, last)?;
        }
    }

    fn refused(&self, digest: &Digest, path: EntryPath, why: Why) -> ArchiveError {
        let layer = digest.clone();
        match why {
            Why::NameTooLong { bytes } => ArchiveError::NameTooLong {
                layer,
                path,
                bytes,
                limit: self.limits.max_name_bytes,
            },
            Why::PaxTooLarge { bytes } => ArchiveError::PaxTooLarge {
                layer,
                path,
                bytes,
                limit: self.limits.max_pax_bytes,
            },
            Why::Sparse => ArchiveError::SpecialFile {
                layer,
                path,
                kind: "PAX sparse file",
            },
        }
    }

    /// Ends the merge: writes the tar trailer and finishes the gzip stream, or reports
    /// that a second pass is needed.
    pub fn finish(mut self) -> Result<MergeOutcome<W>, ArchiveError> {
        if self.collect_only {
            if let Some(sink) = self.sink.take() {
                drop(sink.abandon(io::Error::other("second pass needed")));
            }
            return Ok(MergeOutcome::NeedsSecondPass {
                sourceignore: std::mem::take(&mut self.found),
            });
        }
        let sink = match (self.sink.take(), self.out.take()) {
            (Some(sink), _) => sink,
            (None, Some(out)) => Sink::start(out)?,
            (None, None) => {
                return Err(ArchiveError::Write {
                    source: io::Error::other("the merged archive was already abandoned"),
                })
            }
        };
        let out = sink.finish()?;
        Ok(MergeOutcome::Done {
            out,
            stats: self.stats,
        })
    }
}
