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
//! Sync `std::io` only; the async bridge lives in [`bridge`], the only module here that
//! may import tokio.

pub mod bridge;
mod compress;
mod decode;
mod error;
mod merge;
mod normalise;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hostile;

use std::io::{self, Read, Write};

use crate::domain::digest::Digest;
use crate::domain::ignore::{IgnoreRules, Scope, SOURCEIGNORE};
use crate::domain::limits::Limits;
use crate::domain::manifest::Descriptor;

use compress::Sink;
use decode::{Decoded, Exact};
pub use error::ArchiveError;
use error::{conflict, input_error, Step};
use merge::{Place, State};
use normalise::{clean_path, file_mode, kind_of, split, whiteout, Kind, Whiteout};

/// Largest `.sourceignore` read into memory.
pub const MAX_SOURCEIGNORE_BYTES: u64 = 1 << 20;

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
            limits: opts.limits,
            state: State::default(),
            layer: 0,
            read_entries: 0,
            read_bytes: 0,
            stats: MergeStats::default(),
            collect_only: false,
            found: Vec::new(),
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
        let mut decoded = decode::open(reader, budget).map_err(|source| ArchiveError::Read {
            layer: digest.clone(),
            source,
        })?;
        let mut last = String::new();
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
        self.state.end_layer();
        self.layer += 1;
        result
    }

    fn entries(
        &mut self,
        digest: &Digest,
        decoded: &mut Decoded<'_>,
        last: &mut String,
    ) -> Result<(), Step> {
        let mut archive = tar::Archive::new(&mut *decoded);
        for entry in archive.entries().map_err(Step::Io)? {
            let mut entry = entry.map_err(Step::Io)?;
            self.entry(digest, &mut entry, last)?;
        }
        Ok(())
    }

    fn entry<R: Read>(
        &mut self,
        digest: &Digest,
        entry: &mut tar::Entry<'_, R>,
        last: &mut String,
    ) -> Result<(), Step> {
        let raw = entry.path_bytes();
        let path = clean_path(&raw).map_err(|reason| ArchiveError::UnsafePath {
            layer: digest.clone(),
            path: String::from_utf8_lossy(&raw).into_owned(),
            reason,
        })?;
        last.clone_from(&path);
        self.read_entries += 1;
        if self.read_entries > self.limits.max_entries {
            return Err(ArchiveError::TooManyEntries {
                layer: digest.clone(),
                path,
                limit: self.limits.max_entries,
            }
            .into());
        }
        let header = entry.header();
        let kind = kind_of(header.entry_type());
        let mode = header.mode().unwrap_or(0o644);
        match kind {
            Kind::Hardlink => {
                return Err(ArchiveError::Hardlink {
                    layer: digest.clone(),
                    path,
                }
                .into())
            }
            Kind::Special(kind) => {
                return Err(ArchiveError::SpecialFile {
                    layer: digest.clone(),
                    path,
                    kind,
                }
                .into())
            }
            Kind::Meta => return Ok(()),
            Kind::File | Kind::Dir | Kind::Symlink => {}
        }
        if path.is_empty() {
            return Ok(());
        }
        if let Some(w) = whiteout(&path) {
            match w {
                Whiteout::Hide(p) => self.state.hide(p),
                Whiteout::Opaque(d) => self.state.make_opaque(d),
                Whiteout::Meta => {}
            }
            self.stats.skipped += 1;
            return Ok(());
        }
        let missing = match self.state.place(self.layer, &path, kind) {
            Ok(Place::Win { missing }) => missing,
            Ok(Place::Skip) => {
                self.stats.skipped += 1;
                return Ok(());
            }
            Err(c) => return Err(conflict(digest, path, c).into()),
        };
        for dir in missing {
            let ignored = self.rules.is_ignored(&dir, true);
            if !ignored {
                self.write(|s| s.dir(&dir))
                    .map_err(|e| self.write_error(e))?;
                self.stats.dirs += 1;
            }
            self.state.record_parent(dir, self.layer, ignored);
        }
        let ignored = self.rules.is_ignored(&path, kind == Kind::Dir);
        if ignored || kind == Kind::Symlink {
            self.stats.skipped += 1;
        } else if kind == Kind::Dir {
            self.write(|s| s.dir(&path))
                .map_err(|e| self.write_error(e))?;
            self.stats.dirs += 1;
        } else if split(&path).1 == SOURCEIGNORE {
            let size = entry.size();
            if size > MAX_SOURCEIGNORE_BYTES {
                let limit = MAX_SOURCEIGNORE_BYTES;
                return Err(ArchiveError::SourceIgnoreTooLarge {
                    layer: digest.clone(),
                    path,
                    limit,
                }
                .into());
            }
            let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            Exact::new(&mut *entry, size)
                .read_to_end(&mut content)
                .map_err(Step::Io)?;
            self.sourceignore(digest, &path, &String::from_utf8_lossy(&content))?;
            self.write(|s| s.file(&path, file_mode(mode), size, &content[..]))
                .map_err(|e| self.write_error(e))?;
            self.stats.files += 1;
        } else {
            let size = entry.size();
            let mut data = Exact::new(&mut *entry, size);
            let written = self.write(|s| s.file(&path, file_mode(mode), size, &mut data));
            if let Err(e) = written {
                return Err(if data.failed {
                    Step::Io(e)
                } else {
                    Step::Fail(self.write_error(e))
                });
            }
            self.stats.files += 1;
        }
        self.state.record(path, kind, self.layer, ignored);
        Ok(())
    }

    /// Loads a winning `.sourceignore` and checks whether it changes entries already
    /// decided; if so, switches to collect-only mode.
    fn sourceignore(
        &mut self,
        digest: &Digest,
        path: &str,
        content: &str,
    ) -> Result<(), ArchiveError> {
        let dir = split(path).0;
        self.found.push((dir.to_string(), content.to_string()));
        if self.rules.has_sourceignore(dir, content) {
            return Ok(());
        }
        // The first pattern of the list ends Flux's defaults for the whole tree.
        let scope = match self.rules.add_sourceignore(dir, content) {
            Scope::Dir => dir,
            Scope::Tree => "",
        };
        if self.collect_only {
            return Ok(());
        }
        let rules = &self.rules;
        let changed = self
            .state
            .under(scope)
            .any(|(p, rec)| rec.emittable() && rules.is_ignored(p, rec.is_dir()) != rec.ignored);
        if changed {
            if self.second_pass {
                return Err(ArchiveError::SourceIgnoreUnstable {
                    layer: digest.clone(),
                    path: path.to_string(),
                });
            }
            self.collect_only = true;
        }
        Ok(())
    }

    /// Runs `f` on the sink unless the merger only collects `.sourceignore` files.
    fn write(&mut self, f: impl FnOnce(&mut Sink<W>) -> io::Result<()>) -> io::Result<()> {
        if self.collect_only {
            return Ok(());
        }
        match self.sink.as_mut() {
            Some(sink) => {
                self.stats.entries += 1;
                f(sink)
            }
            None => Err(io::Error::other("the merged archive was already abandoned")),
        }
    }

    fn write_error(&mut self, e: io::Error) -> ArchiveError {
        match self.sink.take() {
            Some(sink) => sink.abandon(e),
            None => ArchiveError::Write { source: e },
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
