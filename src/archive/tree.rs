//! The path tree behind the merge's bookkeeping: one node per path component, found from
//! its parent and name through one hash table, so walking a path costs its length once
//! (a map keyed by whole paths costs depth × length per entry: quadratic in deep trees).
//! Each component is stored once, however many paths share it.
//!
//! Memory is charged as nodes are added: a node's name plus [`Tree::NODE_COST`]. Past the
//! budget, adding fails with [`Full`] and the caller refuses the artifact; the tree never
//! grows past it. Names are hashed with std's `RandomState` (SipHash with a random key),
//! so names chosen to collide cannot degrade the table. No I/O.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::ops::ControlFlow;

use hashbrown::HashTable;

/// Index of a node; [`ROOT`] is the empty path.
pub(super) type Id = u32;

/// The root node.
pub(super) const ROOT: Id = 0;

const NONE: Id = Id::MAX;

struct Node<T> {
    name: Box<str>,
    parent: Id,
    first_child: Id,
    next_sibling: Id,
    value: T,
}

/// Adding a node would go over the memory budget.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Full;

/// A tree of path components carrying a `T` each.
pub(super) struct Tree<T> {
    nodes: Vec<Node<T>>,
    index: HashTable<Id>,
    hasher: RandomState,
    charged: u64,
    budget: u64,
}

impl<T: Default> Tree<T> {
    /// What a node costs besides its name bytes: the node itself, its slot in the table
    /// (with the table's spare room), and the allocator's overhead on the name.
    pub(super) const NODE_COST: u64 = std::mem::size_of::<Node<T>>() as u64 + 16 + 16;

    /// An empty tree that may hold `budget` bytes of nodes.
    pub(super) fn new(budget: u64) -> Self {
        let root = Node {
            name: Box::from(""),
            parent: NONE,
            first_child: NONE,
            next_sibling: NONE,
            value: T::default(),
        };
        Self {
            nodes: vec![root],
            index: HashTable::new(),
            hasher: RandomState::new(),
            charged: Self::NODE_COST,
            budget,
        }
    }

    fn node(&self, id: Id) -> &Node<T> {
        &self.nodes[id as usize]
    }

    /// The child `name` of `parent`, if present.
    pub(super) fn child(&self, parent: Id, name: &str) -> Option<Id> {
        let hash = self.hasher.hash_one((parent, name));
        let nodes = &self.nodes;
        self.index
            .find(hash, |&id| {
                let n = &nodes[id as usize];
                n.parent == parent && &*n.name == name
            })
            .copied()
    }

    /// The child `name` of `parent`, added when missing.
    pub(super) fn child_or_add(&mut self, parent: Id, name: &str) -> Result<Id, Full> {
        if let Some(id) = self.child(parent, name) {
            return Ok(id);
        }
        let cost = Self::NODE_COST + name.len() as u64;
        let id = Id::try_from(self.nodes.len()).map_err(|_| Full)?;
        if self.charged + cost > self.budget || id == NONE {
            return Err(Full);
        }
        self.charged += cost;
        let first = std::mem::replace(&mut self.nodes[parent as usize].first_child, id);
        self.nodes.push(Node {
            name: Box::from(name),
            parent,
            first_child: NONE,
            next_sibling: first,
            value: T::default(),
        });
        let hash = self.hasher.hash_one((parent, name));
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index.insert_unique(hash, id, |&i| {
            let n = &nodes[i as usize];
            hasher.hash_one((n.parent, &*n.name))
        });
        Ok(id)
    }

    /// The nodes along `path` (`a/b/c`: `a`, `a/b`, `a/b/c`) into `chain`, stopping at
    /// the first component not in the tree. The ids already in `chain` are taken to be
    /// those of `path`'s first components, and the walk resumes after them.
    pub(super) fn chain(&self, path: &str, chain: &mut Vec<Id>) {
        let mut at = chain.last().copied().unwrap_or(ROOT);
        for comp in path.split('/').skip(chain.len()) {
            match self.child(at, comp) {
                Some(id) => {
                    chain.push(id);
                    at = id;
                }
                None => return,
            }
        }
    }

    /// The node at `path` (`""` is the root), adding the missing components.
    pub(super) fn add_path(&mut self, path: &str) -> Result<Id, Full> {
        let mut at = ROOT;
        for comp in path.split('/').filter(|c| !c.is_empty()) {
            at = self.child_or_add(at, comp)?;
        }
        Ok(at)
    }

    /// The value of a node.
    pub(super) fn get(&self, id: Id) -> &T {
        &self.node(id).value
    }

    /// The value of a node, to change.
    pub(super) fn get_mut(&mut self, id: Id) -> &mut T {
        &mut self.nodes[id as usize].value
    }

    /// Bytes charged so far.
    #[cfg(test)]
    pub(super) fn charged(&self) -> u64 {
        self.charged
    }

    /// Walks the nodes strictly under `path` (`""`: the whole tree) depth first, parents
    /// before children: `f` gets each node's full path, its value and what `f` returned
    /// for its parent (`top` for the first level), and returns the value for the node's
    /// children, or breaks. Whether some call broke.
    pub(super) fn any_under<V: Copy>(
        &self,
        path: &str,
        top: V,
        mut f: impl FnMut(&str, &T, V) -> ControlFlow<(), V>,
    ) -> bool {
        let mut start = ROOT;
        if !path.is_empty() {
            let mut chain = Vec::new();
            self.chain(path, &mut chain);
            match chain.last() {
                Some(&id) if chain.len() == path.split('/').count() => start = id,
                _ => return false,
            }
        }
        // Depth-first, the path of the current node kept in one buffer.
        let mut buf = path.to_string();
        let mut stack: Vec<(Id, usize, V)> = vec![(self.node(start).first_child, buf.len(), top)];
        while let Some((id, len, above)) = stack.pop() {
            if id == NONE {
                continue;
            }
            let n = self.node(id);
            stack.push((n.next_sibling, len, above));
            buf.truncate(len);
            if !buf.is_empty() {
                buf.push('/');
            }
            buf.push_str(&n.name);
            match f(&buf, &n.value, above) {
                ControlFlow::Break(()) => return true,
                ControlFlow::Continue(v) => stack.push((n.first_child, buf.len(), v)),
            }
        }
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn components_are_shared_and_found_again() {
        let mut t: Tree<u8> = Tree::new(1 << 20);
        let c = t.add_path("a/b/c").unwrap();
        let d = t.add_path("a/b/d").unwrap();
        assert_ne!(c, d);
        assert_eq!(t.add_path("a/b/c").unwrap(), c);
        assert_eq!(t.nodes.len(), 5, "root, a, b, c, d");
        let mut chain = Vec::new();
        t.chain("a/b/x/y", &mut chain);
        assert_eq!(chain.len(), 2);
        t.chain("a/b/c", &mut chain);
        assert_eq!(chain.last(), Some(&c), "resumed after a/b");
    }

    #[test]
    fn any_under_sees_the_subtree_with_full_paths() {
        let mut t: Tree<u8> = Tree::new(1 << 20);
        for p in ["a/x", "a/y/z", "ab", "a0"] {
            t.add_path(p).unwrap();
        }
        let mut seen = Vec::new();
        t.any_under("a", "a", |p, _, parent: &str| {
            seen.push((p.to_string(), parent.to_string()));
            ControlFlow::Continue(if p == "a/y" { "a/y" } else { "?" })
        });
        seen.sort();
        let want = [("a/x", "a"), ("a/y", "a"), ("a/y/z", "a/y")];
        assert_eq!(seen, want.map(|(p, q)| (p.to_string(), q.to_string())));
        let mut all = 0;
        t.any_under("", (), |_, _, ()| {
            all += 1;
            ControlFlow::Continue(())
        });
        assert_eq!(all, 6);
        let stop = |_: &str, _: &u8, (): ()| ControlFlow::Break(());
        assert!(!t.any_under("missing", (), stop));
        assert!(t.any_under("a/y", (), |p, _, ()| if p == "a/y/z" {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }));
    }

    #[test]
    fn the_budget_is_never_exceeded() {
        let cost = Tree::<u8>::NODE_COST;
        let budget = cost * 4 + 10;
        let mut t: Tree<u8> = Tree::new(budget);
        t.add_path("aa/bb/cc").unwrap();
        assert_eq!(t.charged(), cost * 4 + 6);
        assert_eq!(t.add_path("aa/bb/dd"), Err(Full));
        assert_eq!(t.charged(), cost * 4 + 6, "a refused node is not charged");
        assert_eq!(
            t.child(t.child(ROOT, "aa").unwrap(), "bb").map(|_| ()),
            Some(())
        );
    }

    #[test]
    fn a_deep_path_costs_its_length_not_its_square() {
        // 30,000 components: a map of whole paths would hold 30,000 × 30,000 bytes.
        let deep = vec!["d"; 30_000].join("/");
        let mut t: Tree<u8> = Tree::new(8 << 20);
        t.add_path(&deep).unwrap();
        assert!(t.charged() <= 30_001 * (Tree::<u8>::NODE_COST + 1));
        let mut chain = Vec::new();
        t.chain(&deep, &mut chain);
        assert_eq!(chain.len(), 30_000);
    }
}
