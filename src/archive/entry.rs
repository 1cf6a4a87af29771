//! One entry of a layer through the merge: its name checked ([`super::name`]), its type
//! allowed or refused, whiteouts remembered, its place decided ([`super::merge`]), and the
//! winner written with any missing parents. Also the `.sourceignore` handling that may
//! switch the merge to collect-only mode. Sync `std::io` only; no tokio.

use std::io::{self, Read, Write};
use std::ops::ControlFlow;

use super::compress::Sink;
use super::decode::Exact;
use super::error::{conflict, Step};
use super::merge::{Place, TooManyPaths};
use super::name::{clean_path, EntryPath, NameError};
use super::normalise::{ancestors, file_mode, kind_of, split, whiteout, Kind, Whiteout};
use super::tarstream::{RawEntry, TarStream};
use super::{ArchiveError, Merger};
use crate::domain::digest::Digest;
use crate::domain::ignore::{Scope, SOURCEIGNORE};

impl<W: Write + Send + 'static> Merger<W> {
    fn name_error(&self, digest: &Digest, raw: &[u8], e: NameError) -> ArchiveError {
        let layer = digest.clone();
        let path = EntryPath::new(raw);
        match e {
            NameError::Unsafe(reason) => ArchiveError::UnsafePath {
                layer,
                path,
                reason,
            },
            NameError::TooLong => ArchiveError::NameTooLong {
                layer,
                path,
                bytes: raw.len() as u64,
                limit: self.limits.max_name_bytes,
            },
            NameError::TooDeep => ArchiveError::PathTooDeep {
                layer,
                path,
                limit: self.limits.max_path_depth,
            },
        }
    }

    fn too_many_paths(&self, digest: &Digest, path: &str, _: TooManyPaths) -> Step {
        Step::Fail(ArchiveError::TooManyPaths {
            layer: digest.clone(),
            path: EntryPath::from(path),
            limit: self.limits.max_remembered_bytes,
        })
    }

    pub(super) fn entry<R: Read>(
        &mut self,
        digest: &Digest,
        raw: &RawEntry,
        tar: &mut TarStream<R>,
        last: &mut EntryPath,
    ) -> Result<(), Step> {
        let path = clean_path(&raw.name, &self.limits)
            .map_err(|e| self.name_error(digest, &raw.name, e))?;
        *last = EntryPath::from(path.as_str());
        self.read_entries += 1;
        if self.read_entries > self.limits.max_entries {
            return Err(ArchiveError::TooManyEntries {
                layer: digest.clone(),
                path: last.clone(),
                limit: self.limits.max_entries,
            }
            .into());
        }
        let kind = kind_of(raw.kind);
        match kind {
            Kind::Hardlink => {
                return Err(ArchiveError::Hardlink {
                    layer: digest.clone(),
                    path: last.clone(),
                }
                .into())
            }
            Kind::Special(kind) => {
                return Err(ArchiveError::SpecialFile {
                    layer: digest.clone(),
                    path: last.clone(),
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
            let remembered = match w {
                Whiteout::Hide(p) => self.state.hide(&p, self.layer),
                Whiteout::Opaque(d) => self.state.make_opaque(&d, self.layer),
                Whiteout::Meta => Ok(()),
            };
            remembered.map_err(|e| self.too_many_paths(digest, &path, e))?;
            self.stats.skipped += 1;
            return Ok(());
        }
        let (missing, mut above) = match self.state.place(self.layer, &path, kind) {
            Ok(Place::Win {
                missing,
                parent_ignored,
            }) => (missing, parent_ignored),
            Ok(Place::Skip) => {
                self.stats.skipped += 1;
                return Ok(());
            }
            Err(c) => return Err(conflict(digest, &path, c).into()),
        };
        let depth = ancestors(&path).count();
        let mut parents = Vec::with_capacity(missing);
        for dir in ancestors(&path).skip(depth - missing) {
            let ignored = self.verdict(dir, true, above);
            above = ignored;
            if !ignored {
                self.write(|s| s.dir(dir))
                    .map_err(|e| self.write_error(e))?;
                self.stats.dirs += 1;
            }
            parents.push(ignored);
        }
        let is_sourceignore = kind == Kind::File && split(&path).1 == SOURCEIGNORE;
        let ignored = if self.collect_only && is_sourceignore {
            // Recorded verdicts may be stale once a late .sourceignore changed the rules.
            self.rules.is_ignored(&path, false)
        } else {
            self.verdict(&path, kind == Kind::Dir, above)
        };
        let mode = file_mode(raw.mode);
        let size = raw.size;
        if ignored || kind == Kind::Symlink {
            self.stats.skipped += 1;
        } else if kind == Kind::Dir {
            self.write(|s| s.dir(&path))
                .map_err(|e| self.write_error(e))?;
            self.stats.dirs += 1;
        } else if is_sourceignore {
            let content = self.read_sourceignore(digest, &path, size, tar)?;
            self.sourceignore(digest, &path, &String::from_utf8_lossy(&content))?;
            self.write(|s| s.file(&path, mode, size, &content[..]))
                .map_err(|e| self.write_error(e))?;
            self.stats.files += 1;
        } else {
            let mut data = Exact::new(tar.data(), size);
            let written = self.write(|s| s.file(&path, mode, size, &mut data));
            if let Err(e) = written {
                return Err(if data.failed {
                    Step::Io(e)
                } else {
                    Step::Fail(self.write_error(e))
                });
            }
            self.stats.files += 1;
        }
        self.state
            .record(&path, kind, self.layer, ignored, &parents)
            .map_err(|e| self.too_many_paths(digest, &path, e))
    }

    /// Whether `path` is ignored, given its parent's verdict. In collect-only mode only
    /// `.sourceignore` files matter, and they get a full check: others are not judged.
    fn verdict(&self, path: &str, is_dir: bool, parent_ignored: bool) -> bool {
        !self.collect_only && self.rules.is_ignored_below(path, is_dir, parent_ignored)
    }

    /// Reads a `.sourceignore` within what is left of the artifact's allowance for them.
    fn read_sourceignore<R: Read>(
        &mut self,
        digest: &Digest,
        path: &str,
        size: u64,
        tar: &mut TarStream<R>,
    ) -> Result<Vec<u8>, Step> {
        let limit = self.limits.max_sourceignore_bytes;
        // Each file counts at least 64 bytes, which also caps how many there are.
        self.found_bytes = self.found_bytes.saturating_add(size.max(64));
        if self.found_bytes > limit {
            return Err(ArchiveError::SourceIgnoreTooLarge {
                layer: digest.clone(),
                path: EntryPath::from(path),
                limit,
            }
            .into());
        }
        let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        Exact::new(tar.data(), size)
            .read_to_end(&mut content)
            .map_err(Step::Io)?;
        Ok(content)
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
        let dir = match self.rules.add_sourceignore(dir, content) {
            Scope::Dir => dir,
            Scope::Tree => "",
        };
        if self.collect_only {
            return Ok(());
        }
        // Top down, each verdict from its parent's. Past the allowance of checked paths the
        // answer is "changed": a second pass, with every rule known, needs no checks.
        let rules = &self.rules;
        let allowance = self.limits.max_entries;
        let mut checked = self.checked;
        let top = !dir.is_empty() && rules.is_ignored(dir, true);
        let changed = self.state.any_under(dir, top, |p, rec, above| {
            checked += 1;
            let now = rules.is_ignored_below(p, rec.is_dir(), above);
            if checked > allowance || (rec.emittable() && now != rec.ignored) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(now)
            }
        });
        self.checked = checked;
        if changed {
            if self.second_pass {
                return Err(ArchiveError::SourceIgnoreUnstable {
                    layer: digest.clone(),
                    path: EntryPath::from(path),
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
}
