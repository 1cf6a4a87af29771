//! Who holds the connection slots of one listener: each open connection's peer address and
//! whether it is idle (waiting for a request, nothing in flight) or busy, so that the accept
//! loop (`listen.rs`) can refuse a peer past its share and, when every slot is held, shed
//! the connection that has been idle longest, as nginx closes its reusable keep-alive
//! connections when it runs out of connections. A connection in the middle of a request
//! or response is never shed.
//!
//! The per-request cost is one atomic store when a connection starts waiting and one atomic
//! swap when its request arrives (no lock, no syscall); the lock is taken once when a
//! connection opens, once when it closes, and by the accept loop when it must shed, which
//! scans the open connections (at most the cap) only then. No HTTP here.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;

use futures::task::AtomicWaker;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// State of a connection in the middle of a request or response (or one that never says).
const BUSY: u64 = u64::MAX;
/// State of a connection the accept loop has told to close.
const SHED: u64 = u64::MAX - 1;

/// The open connections of one listener.
pub(super) struct Slots {
    /// What every state below `SHED` counts milliseconds from.
    epoch: Instant,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    connections: HashMap<u64, Arc<Entry>>,
    per_peer: HashMap<IpAddr, usize>,
}

/// One connection as the accept loop sees it.
struct Entry {
    /// `BUSY`, `SHED`, or the millisecond (since `Slots::epoch`) it became idle.
    state: AtomicU64,
    /// Wakes the connection when it is shed (lock-free, unlike `tokio::sync::Notify`).
    shed: AtomicWaker,
}

/// A connection's hold on its slot: frees the slot and its peer's count when dropped.
pub(super) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    peer: IpAddr,
    entry: Arc<Entry>,
    _permit: OwnedSemaphorePermit,
}

impl Slots {
    pub(super) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            open: Mutex::new(Open::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Open connections of `peer`.
    pub(super) fn held_by(&self, peer: IpAddr) -> usize {
        self.lock().per_peer.get(&peer).copied().unwrap_or(0)
    }

    /// Records a new connection of `peer`, busy until it says it is idle.
    pub(super) fn hold(self: &Arc<Self>, peer: IpAddr, permit: OwnedSemaphorePermit) -> Slot {
        let entry = Arc::new(Entry {
            state: AtomicU64::new(BUSY),
            shed: AtomicWaker::new(),
        });
        let mut open = self.lock();
        let id = open.next_id;
        open.next_id += 1;
        open.connections.insert(id, entry.clone());
        *open.per_peer.entry(peer).or_insert(0) += 1;
        Slot {
            slots: self.clone(),
            id,
            peer,
            entry,
            _permit: permit,
        }
    }

    /// Tells the connection idle longest to close; false when every connection is busy.
    pub(super) fn shed_oldest_idle(&self) -> bool {
        let open = self.lock();
        loop {
            let oldest = open
                .connections
                .values()
                .map(|e| (e.state.load(Ordering::Acquire), e))
                .filter(|(since, _)| *since < SHED)
                .min_by_key(|(since, _)| *since);
            let Some((since, entry)) = oldest else {
                return false;
            };
            // Lost only to the connection's own request arriving: look again.
            if entry
                .state
                .compare_exchange(since, SHED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                entry.shed.wake();
                return true;
            }
        }
    }
}

impl Slot {
    /// Marks the connection idle as of `now`: it may be shed until [`Slot::busy`].
    pub(super) fn idle(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.slots.epoch).as_millis();
        let ms = u64::try_from(ms).unwrap_or(SHED - 1).min(SHED - 1);
        self.entry.state.store(ms, Ordering::Release);
    }

    /// Marks the connection busy; false if it was shed first (it must close then).
    pub(super) fn busy(&self) -> bool {
        self.entry.state.swap(BUSY, Ordering::AcqRel) != SHED
    }

    /// Completes once the connection has been shed.
    pub(super) async fn shed(&self) {
        let shed = || self.entry.state.load(Ordering::Acquire) == SHED;
        std::future::poll_fn(|cx| {
            if shed() {
                return Poll::Ready(());
            }
            self.entry.shed.register(cx.waker());
            // Shed between the first look and the registration: its wake found no waker.
            if shed() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        open.connections.remove(&self.id);
        if let Some(n) = open.per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.per_peer.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::sync::Semaphore;

    fn permit(s: &Arc<Semaphore>) -> OwnedSemaphorePermit {
        s.clone().try_acquire_owned().unwrap()
    }

    #[tokio::test]
    async fn the_oldest_idle_connection_is_shed_and_a_busy_one_never() {
        let slots = Arc::new(Slots::new());
        let sem = Arc::new(Semaphore::new(8));
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        let (busy, newer, older) = (
            slots.hold(peer, permit(&sem)),
            slots.hold(peer, permit(&sem)),
            slots.hold(peer, permit(&sem)),
        );
        let now = Instant::now();
        newer.idle(now + Duration::from_secs(2));
        older.idle(now + Duration::from_secs(1));
        assert_eq!(slots.held_by(peer), 3);

        assert!(slots.shed_oldest_idle());
        tokio::time::timeout(Duration::from_secs(1), older.shed())
            .await
            .unwrap();
        assert!(!older.busy(), "a shed connection must close");
        assert!(newer.busy());
        // Both left are busy now: nothing to shed.
        assert!(!slots.shed_oldest_idle());
        drop((busy, older));
        assert_eq!(slots.held_by(peer), 1);
        assert_eq!(sem.available_permits(), 7);
    }
}
