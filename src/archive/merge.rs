//! The bookkeeping of the top-down merge: which paths already have their winning
//! version, which are hidden by whiteouts of higher layers, which are shadowed by a
//! higher non-directory, and which symlinks would make an entry escape. Layers arrive
//! top first, so the first version of a path seen is the one that survives.
//!
//! Memory is one [`Mark`] per path component of the winners and the whiteouts, in a
//! [`Tree`] that shares components and stops at the `limits.max_remembered_bytes`
//! budget ([`TooManyPaths`]). Walking an entry's path costs its length once, however
//! deep. No I/O here, and no tokio.

use std::ops::ControlFlow;

use super::normalise::{ancestors, Kind};
use super::tree::{Full, Id, Tree, ROOT};

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
    /// It wins; its `missing` deepest ancestors have no record yet and are to be
    /// synthesised first, shallowest first.
    Win {
        /// How many ancestors have no record yet.
        missing: usize,
        /// Whether the deepest recorded ancestor was ignored (`false` for the root).
        parent_ignored: bool,
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

/// What the merge remembers about one path component.
#[derive(Default)]
pub(super) struct Mark {
    /// The winner at this path, once there is one.
    rec: Option<Rec>,
    /// Layer of the highest `.wh.<name>` hiding this path in the layers below it.
    hidden_from: Option<u32>,
    /// Layer of the highest `.wh..wh..opq` hiding this directory's lower content.
    opaque_from: Option<u32>,
}

/// The remembered paths outgrew the memory budget.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct TooManyPaths;

impl From<Full> for TooManyPaths {
    fn from(_: Full) -> Self {
        Self
    }
}

/// Merge state across layers.
pub(super) struct State {
    tree: Tree<Mark>,
    /// The path last placed, and the nodes along it (a prefix of them when it is not
    /// all in the tree). Entries of a directory come together in a tar: the next path
    /// reuses the nodes of the components it shares with this one.
    prev: String,
    chain: Vec<Id>,
}

/// How many leading components `a` and `b` share.
fn shared_components(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let slashes = a[..n].iter().filter(|c| **c == b'/').count();
    let ends = |s: &[u8]| s.get(n).is_none_or(|c| *c == b'/');
    if n > 0 && ends(a) && ends(b) {
        slashes + 1
    } else {
        slashes
    }
}

impl State {
    /// An empty state that may remember `budget` bytes.
    pub(super) fn new(budget: u64) -> Self {
        Self {
            tree: Tree::new(budget),
            prev: String::new(),
            chain: Vec::new(),
        }
    }

    /// Records a `.wh.<name>` of layer `layer`: it hides `path` from the next layer on.
    pub(super) fn hide(&mut self, path: &str, layer: u32) -> Result<(), TooManyPaths> {
        let id = self.tree.add_path(path)?;
        self.tree.get_mut(id).hidden_from.get_or_insert(layer);
        Ok(())
    }

    /// Records an opaque marker of layer `layer` for directory `dir` (`""`: the root).
    pub(super) fn make_opaque(&mut self, dir: &str, layer: u32) -> Result<(), TooManyPaths> {
        let id = self.tree.add_path(dir)?;
        self.tree.get_mut(id).opaque_from.get_or_insert(layer);
        Ok(())
    }

    /// Points `chain` at the nodes along `path`, reusing those shared with the last path.
    fn walk(&mut self, path: &str) {
        let shared = shared_components(&self.prev, path);
        self.chain.truncate(shared);
        self.tree.chain(path, &mut self.chain);
        self.prev.clear();
        self.prev.push_str(path);
    }

    /// Whether a whiteout of a higher layer hides the path whose `chain` was just taken
    /// and which has `depth` components.
    fn is_hidden(&self, layer: u32, depth: usize) -> bool {
        let above = |from: Option<u32>| from.is_some_and(|l| l < layer);
        if above(self.tree.get(ROOT).opaque_from) {
            return true;
        }
        self.chain.iter().enumerate().any(|(i, &id)| {
            let m = self.tree.get(id);
            above(m.hidden_from) || (i + 1 < depth && above(m.opaque_from))
        })
    }

    /// Decides the fate of an entry of `kind` at `path` (cleaned, not empty) in layer
    /// `layer`.
    pub(super) fn place(&mut self, layer: u32, path: &str, kind: Kind) -> Result<Place, Conflict> {
        self.walk(path);
        let depth = path.split('/').count();
        if self.is_hidden(layer, depth) {
            return Ok(Place::Skip);
        }
        // Recorded paths have recorded parents: the ancestors with a record come first.
        let mut known = 0;
        let mut parent_ignored = false;
        for (a, &id) in ancestors(path).zip(&self.chain) {
            let Some(rec) = self.tree.get(id).rec else {
                break;
            };
            parent_ignored = rec.ignored;
            match rec.node {
                Node::File if rec.layer == layer => return Err(Conflict::UnderFile(a.into())),
                Node::Symlink if rec.layer == layer => {
                    return Err(Conflict::ThroughSymlink(a.into()))
                }
                // A higher layer put a non-directory here: everything below is gone.
                Node::File | Node::Symlink => return Ok(Place::Skip),
                Node::Dir { .. } => known += 1,
            }
        }
        let own = match self.chain.get(depth - 1) {
            Some(&id) => self.tree.get_mut(id).rec.as_mut(),
            None => None,
        };
        let place = match own {
            None => Place::Win {
                missing: depth - 1 - known,
                parent_ignored,
            },
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
        for &id in &self.chain[..known] {
            if let Some(Rec {
                node: Node::Dir { child_low, .. },
                ..
            }) = self.tree.get_mut(id).rec.as_mut()
            {
                *child_low = Some(child_low.map_or(layer, |c| c.max(layer)));
            }
        }
        Ok(place)
    }

    /// Records the winner at `path` after [`State::place`] said `Win { missing }`, and its
    /// `missing` synthesised parents, whose ignore verdicts are `parents` (shallowest
    /// first).
    pub(super) fn record(
        &mut self,
        path: &str,
        kind: Kind,
        layer: u32,
        ignored: bool,
        parents: &[bool],
    ) -> Result<(), TooManyPaths> {
        if self.prev != path {
            self.walk(path);
        }
        let mut at = self.chain.last().copied().unwrap_or(ROOT);
        for comp in path.split('/').skip(self.chain.len()) {
            at = self.tree.child_or_add(at, comp)?;
            self.chain.push(at);
        }
        let mut parents = parents.iter();
        let last = self.chain.len() - 1;
        for (i, &id) in self.chain.iter().enumerate() {
            let mark = self.tree.get_mut(id);
            if i == last {
                let node = match kind {
                    Kind::Dir => Node::Dir {
                        explicit_low: Some(layer),
                        child_low: None,
                    },
                    Kind::Symlink => Node::Symlink,
                    _ => Node::File,
                };
                mark.rec = Some(Rec {
                    node,
                    layer,
                    ignored,
                });
            } else if mark.rec.is_none() {
                let node = Node::Dir {
                    explicit_low: None,
                    child_low: Some(layer),
                };
                let ignored = parents.next().copied().unwrap_or(false);
                mark.rec = Some(Rec {
                    node,
                    layer,
                    ignored,
                });
            }
        }
        Ok(())
    }

    /// Walks the winners under `dir` (`""` = all) top down: `f` gets each path, its
    /// record and the value `f` returned for its parent (`top` for `dir`'s children), and
    /// returns the value for the children or breaks. Whether some call broke.
    pub(super) fn any_under<V: Copy>(
        &self,
        dir: &str,
        top: V,
        mut f: impl FnMut(&str, &Rec, V) -> ControlFlow<(), V>,
    ) -> bool {
        self.tree
            .any_under(dir, top, |p, mark, above| match &mark.rec {
                Some(rec) => f(p, rec, above),
                // Nothing recorded here (a whiteout): nothing recorded below either.
                None => ControlFlow::Continue(above),
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "merge_tests.rs"]
mod tests;
