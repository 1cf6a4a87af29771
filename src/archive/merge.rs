//! The bookkeeping of the top-down merge: which paths already have their winning
//! version, which are hidden by whiteouts of higher layers, which are shadowed by a
//! higher non-directory, and which symlinks would make an entry escape. Layers arrive
//! top first, so the first version of a path seen is the one that survives.
//!
//! Memory is one record per winning path (bounded by `limits.max_entries`) plus one
//! string per whiteout. No I/O here, and no tokio.

use std::collections::{BTreeMap, HashSet};

use super::normalise::{ancestors, Kind};

/// What a winning path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Node {
    /// A regular file.
    File,
    /// A symlink: not emitted, but it shadows lower content.
    Symlink,
    /// A directory, explicit or synthesised as a parent.
    Dir {
        /// Lowest layer (highest index) holding an explicit entry for this directory.
        explicit_low: Option<u32>,
        /// Lowest layer (highest index) holding an entry under this directory.
        child_low: Option<u32>,
    },
}

/// The record of a winning path.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rec {
    /// What it is.
    pub(super) node: Node,
    /// Layer index (0 = top) that won.
    pub(super) layer: u32,
    /// Whether the ignore rules excluded it when it was recorded.
    pub(super) ignored: bool,
}

impl Rec {
    /// Whether the entry is (or would be) written to the output.
    pub(super) fn emittable(&self) -> bool {
        !matches!(self.node, Node::Symlink)
    }

    /// Whether it is a directory.
    pub(super) fn is_dir(&self) -> bool {
        matches!(self.node, Node::Dir { .. })
    }
}

/// What to do with an entry.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// Not in the final tree (hidden, shadowed, or a version already won).
    Skip,
    /// It wins; `missing` lists the ancestors to synthesise first, shallowest first.
    Win {
        /// Ancestors without a record yet.
        missing: Vec<String>,
    },
}

/// Why an entry is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Conflict {
    /// The same path twice in one layer.
    Duplicate,
    /// A parent is a regular file of the same layer.
    UnderFile(String),
    /// The path goes through this symlink.
    ThroughSymlink(String),
    /// This lower-layer symlink sits where higher layers unpacked entries under a
    /// directory of the same name: a runtime would write them through it.
    SymlinkUnderEntries,
}

/// Merge state across layers.
#[derive(Default)]
pub(super) struct State {
    seen: BTreeMap<String, Rec>,
    hidden: HashSet<String>,
    opaque: HashSet<String>,
    pending_hidden: Vec<String>,
    pending_opaque: Vec<String>,
}

impl State {
    /// Records a `.wh.<name>` of the current layer; it applies from the next layer on.
    pub(super) fn hide(&mut self, path: String) {
        self.pending_hidden.push(path);
    }

    /// Records an opaque marker of the current layer for directory `dir`.
    pub(super) fn make_opaque(&mut self, dir: String) {
        self.pending_opaque.push(dir);
    }

    /// Ends a layer: its whiteouts now apply to the layers below.
    pub(super) fn end_layer(&mut self) {
        self.hidden.extend(self.pending_hidden.drain(..));
        self.opaque.extend(self.pending_opaque.drain(..));
    }

    fn is_hidden(&self, path: &str) -> bool {
        if self.opaque.contains("") || self.hidden.contains(path) {
            return true;
        }
        ancestors(path).any(|a| self.hidden.contains(a) || self.opaque.contains(a))
    }

    /// Decides the fate of an entry of `kind` at `path` in layer `layer`.
    pub(super) fn place(&mut self, layer: u32, path: &str, kind: Kind) -> Result<Place, Conflict> {
        if self.is_hidden(path) {
            return Ok(Place::Skip);
        }
        let mut missing = Vec::new();
        for a in ancestors(path) {
            match self.seen.get(a) {
                Some(rec) => match rec.node {
                    Node::File if rec.layer == layer => return Err(Conflict::UnderFile(a.into())),
                    Node::Symlink if rec.layer == layer => {
                        return Err(Conflict::ThroughSymlink(a.into()))
                    }
                    // A higher layer put a non-directory here: everything below is gone.
                    Node::File | Node::Symlink => return Ok(Place::Skip),
                    Node::Dir { .. } => {}
                },
                None => missing.push(a.to_string()),
            }
        }
        let place = match self.seen.get_mut(path) {
            None => Place::Win { missing },
            Some(rec) => {
                let same_layer = rec.layer == layer;
                match (&mut rec.node, kind) {
                    (Node::Dir { explicit_low, .. }, Kind::Dir) => {
                        *explicit_low = Some(explicit_low.map_or(layer, |m| m.max(layer)));
                    }
                    _ if same_layer => return Err(Conflict::Duplicate),
                    (
                        Node::Dir {
                            explicit_low,
                            child_low: Some(child),
                        },
                        Kind::Symlink,
                    ) if explicit_low.is_none_or(|m| m < *child) => {
                        // Entries of higher layers were unpacked under this path with no
                        // real directory replacing the symlink in between.
                        return Err(Conflict::SymlinkUnderEntries);
                    }
                    _ => {}
                }
                Place::Skip
            }
        };
        for a in ancestors(path) {
            if let Some(Rec {
                node: Node::Dir { child_low, .. },
                ..
            }) = self.seen.get_mut(a)
            {
                *child_low = Some(child_low.map_or(layer, |c| c.max(layer)));
            }
        }
        Ok(place)
    }

    /// Records the winner at `path` (after [`State::place`] said `Win`, for the path and
    /// each missing ancestor).
    pub(super) fn record(&mut self, path: String, kind: Kind, layer: u32, ignored: bool) {
        let node = match kind {
            Kind::Dir => Node::Dir {
                explicit_low: Some(layer),
                child_low: None,
            },
            Kind::Symlink => Node::Symlink,
            _ => Node::File,
        };
        self.insert(path, node, layer, ignored);
    }

    /// Records a synthesised parent directory with a child in `layer`.
    pub(super) fn record_parent(&mut self, path: String, layer: u32, ignored: bool) {
        let node = Node::Dir {
            explicit_low: None,
            child_low: Some(layer),
        };
        self.insert(path, node, layer, ignored);
    }

    fn insert(&mut self, path: String, node: Node, layer: u32, ignored: bool) {
        let rec = Rec {
            node,
            layer,
            ignored,
        };
        self.seen.insert(path, rec);
    }

    /// Every winning path under `dir` (`""` = all), with its record.
    pub(super) fn under<'a>(
        &'a self,
        dir: &'a str,
    ) -> Box<dyn Iterator<Item = (&'a String, &'a Rec)> + 'a> {
        if dir.is_empty() {
            return Box::new(self.seen.iter());
        }
        let start = format!("{dir}/");
        let end = format!("{dir}0"); // '0' follows '/' in ASCII
        Box::new(self.seen.range(start..end))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn win(state: &mut State, layer: u32, path: &str, kind: Kind) -> Result<Place, Conflict> {
        let place = state.place(layer, path, kind)?;
        if let Place::Win { missing } = &place {
            for m in missing {
                state.record_parent(m.clone(), layer, false);
            }
            state.record(path.into(), kind, layer, false);
        }
        Ok(place)
    }

    #[test]
    fn first_version_wins_and_parents_are_missing_once() {
        let mut s = State::default();
        assert_eq!(
            win(&mut s, 0, "a/b/c", Kind::File),
            Ok(Place::Win {
                missing: vec!["a".into(), "a/b".into()]
            })
        );
        assert_eq!(
            win(&mut s, 0, "a/b/d", Kind::File),
            Ok(Place::Win { missing: vec![] })
        );
        assert_eq!(win(&mut s, 1, "a/b/c", Kind::File), Ok(Place::Skip));
        assert_eq!(
            win(&mut s, 0, "a/b/c", Kind::File),
            Err(Conflict::Duplicate)
        );
        assert_eq!(
            win(&mut s, 0, "a/b", Kind::Dir),
            Ok(Place::Skip),
            "explicit dir after its child"
        );
    }

    #[test]
    fn whiteouts_apply_to_lower_layers_only() {
        let mut s = State::default();
        s.hide("x".into());
        s.make_opaque("d".into());
        assert!(matches!(
            win(&mut s, 0, "x/keep", Kind::File),
            Ok(Place::Win { .. })
        ));
        s.end_layer();
        assert_eq!(win(&mut s, 1, "x/other", Kind::File), Ok(Place::Skip));
        assert_eq!(win(&mut s, 1, "d/f", Kind::File), Ok(Place::Skip));
        assert!(
            matches!(win(&mut s, 1, "d", Kind::Dir), Ok(Place::Win { .. })),
            "opaque keeps the dir"
        );
    }

    #[test]
    fn higher_file_shadows_lower_subtree() {
        let mut s = State::default();
        win(&mut s, 0, "etc", Kind::File).unwrap();
        assert_eq!(win(&mut s, 1, "etc/passwd", Kind::File), Ok(Place::Skip));
        win(&mut s, 0, "ln", Kind::Symlink).unwrap();
        assert_eq!(win(&mut s, 1, "ln/x", Kind::File), Ok(Place::Skip));
        assert_eq!(
            win(&mut s, 0, "ln/y", Kind::File),
            Err(Conflict::ThroughSymlink("ln".into()))
        );
        assert_eq!(
            win(&mut s, 0, "etc/y", Kind::File),
            Err(Conflict::UnderFile("etc".into()))
        );
    }

    #[test]
    fn lower_symlink_under_higher_entries_is_refused_unless_a_real_dir_replaced_it() {
        let mut s = State::default();
        win(&mut s, 0, "a/x", Kind::File).unwrap();
        assert_eq!(
            win(&mut s, 1, "a", Kind::Symlink),
            Err(Conflict::SymlinkUnderEntries)
        );
        let mut s = State::default();
        win(&mut s, 0, "a/x", Kind::File).unwrap();
        win(&mut s, 1, "a", Kind::Dir).unwrap();
        assert_eq!(win(&mut s, 2, "a", Kind::Symlink), Ok(Place::Skip));
        let mut s = State::default();
        win(&mut s, 0, "a", Kind::Dir).unwrap();
        win(&mut s, 1, "a/x", Kind::File).unwrap();
        assert_eq!(
            win(&mut s, 2, "a", Kind::Symlink),
            Err(Conflict::SymlinkUnderEntries)
        );
    }

    #[test]
    fn under_lists_a_subtree_only() {
        let mut s = State::default();
        for p in ["a/x", "a/y/z", "ab", "a0"] {
            win(&mut s, 0, p, Kind::File).unwrap();
        }
        let got: Vec<&String> = s.under("a").map(|(p, _)| p).collect();
        assert_eq!(got, vec!["a/x", "a/y", "a/y/z"]);
        assert_eq!(s.under("").count(), 6);
    }
}
