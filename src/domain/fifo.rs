//! A map bounded by a byte budget, the oldest entries dropped first: the shape of the
//! process-wide memos (manifests kept by digest in `registry::memo`, artifacts shared
//! between objects in `reconcile::shared`). Each entry is charged a cost its owner
//! computes (its bytes, roughly); an entry dearer than [`Fifo::max_entry`] is not kept.
//! Our own small map rather than an LRU crate: first-in-first-out over a few thousand
//! small entries needs no more, and no such crate is in the tree.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// The bounded map. Not synchronised: owners wrap it in their own lock.
#[derive(Debug)]
pub struct Fifo<K, V> {
    entries: HashMap<K, (V, usize)>,
    order: VecDeque<K>,
    cost: usize,
    budget: usize,
    max_entry: usize,
}

impl<K: Eq + Hash + Clone, V> Fifo<K, V> {
    /// An empty map holding up to `budget` in all, entries of up to `max_entry` each.
    pub fn new(budget: usize, max_entry: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            cost: 0,
            budget,
            max_entry: max_entry.min(budget),
        }
    }

    /// The largest cost of one entry kept.
    pub fn max_entry(&self) -> usize {
        self.max_entry
    }

    /// The value under `key`, when kept.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(v, _)| v)
    }

    /// Keeps `value` under `key` at `cost`, replacing what the key held, the oldest
    /// entries dropped until it fits; nothing is kept when `cost` is over the entry cap.
    pub fn put(&mut self, key: K, value: V, cost: usize) {
        if cost > self.max_entry {
            return;
        }
        self.remove(&key);
        while self.cost + cost > self.budget {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, c)) = self.entries.remove(&oldest) {
                self.cost -= c;
            }
        }
        self.cost += cost;
        self.order.push_back(key.clone());
        self.entries.insert(key, (value, cost));
    }

    /// Every entry kept, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, (v, _))| (k, v))
    }

    /// Forgets `key` (its place in the order goes with it).
    pub fn remove(&mut self, key: &K) {
        if let Some((_, c)) = self.entries.remove(key) {
            self.cost -= c;
            self.order.retain(|k| k != key);
        }
    }

    /// The summed cost of the entries kept.
    pub fn cost(&self) -> usize {
        self.cost
    }

    /// How many entries are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_go_first_and_the_budget_holds() {
        let mut f = Fifo::new(10, 4);
        for i in 0..5u8 {
            f.put(i, i, 3);
            assert!(f.cost() <= 10);
        }
        assert_eq!((f.len(), f.cost()), (3, 9));
        assert!(f.get(&0).is_none() && f.get(&1).is_none());
        assert_eq!(f.get(&4), Some(&4));
    }

    #[test]
    fn an_entry_over_the_cap_is_not_kept_and_a_replaced_key_is_charged_once() {
        let mut f = Fifo::new(10, 4);
        f.put("big", 1, 5);
        assert!(f.is_empty());
        f.put("a", 1, 2);
        f.put("a", 2, 4);
        assert_eq!((f.len(), f.cost(), f.get(&"a")), (1, 4, Some(&2)));
        f.remove(&"a");
        assert_eq!((f.len(), f.cost()), (0, 0));
        // Removal also took the key out of the order: a new entry is not evicted by it.
        f.put("b", 3, 4);
        f.put("c", 4, 4);
        assert_eq!(f.len(), 2);
    }
}
