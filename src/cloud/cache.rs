//! An in-memory cache of short-lived tokens keyed by identity and scope, with Flux's
//! expiry rule (`fluxcd/pkg/cache`): a token is reused until 80% of its remaining
//! lifetime when it was fetched, and never longer than one hour. One fetch per key is in
//! flight at a time: callers that arrive meanwhile wait for it and share its result, so a
//! thousand objects reconciled at once on one registry make one token request. The clock
//! is injected so tests can move time. Nothing here is ever written out.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};

use super::Expiring;

/// The time source of cache expiry.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Longest reuse of one token (Flux's `TokenMaxDuration`).
const MAX_REUSE: TimeDelta = TimeDelta::hours(1);
/// Most keys kept; past this, idle entries are dropped.
const MAX_KEYS: usize = 1024;

struct Entry<V> {
    value: Expiring<V>,
    refresh_at: DateTime<Utc>,
}

type Slot<V> = Arc<tokio::sync::Mutex<Option<Entry<V>>>>;

/// Tokens of type `V` by key.
pub(crate) struct TokenCache<V> {
    clock: Arc<dyn Clock>,
    slots: Mutex<HashMap<String, Slot<V>>>,
}

impl<V: Clone> TokenCache<V> {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, key: &str) -> Slot<V> {
        let Ok(mut slots) = self.slots.lock() else {
            // A poisoned map only loses sharing, never correctness.
            return Arc::new(tokio::sync::Mutex::new(None));
        };
        if slots.len() >= MAX_KEYS && !slots.contains_key(key) {
            slots.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        slots.entry(key.to_string()).or_default().clone()
    }

    /// The clock's now.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The cached token for `key`, or the one `fetch` returns (cached when it has time
    /// left). A failed fetch is not cached.
    pub(crate) async fn get_or_fetch<F, Fut, E>(
        &self,
        key: &str,
        fetch: F,
    ) -> Result<Expiring<V>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Expiring<V>, E>>,
    {
        let slot = self.slot(key);
        let mut entry = slot.lock().await;
        if let Some(e) = entry.as_ref() {
            if self.clock.now() < e.refresh_at {
                return Ok(e.value.clone());
            }
        }
        let fresh = fetch().await?;
        let now = self.clock.now();
        let left = fresh.expires_at - now;
        *entry = (left > TimeDelta::zero()).then(|| Entry {
            value: fresh.clone(),
            // Bounded before scaling: far-future expiries must not overflow.
            refresh_at: now + (left.min(TimeDelta::days(1)) * 8 / 10).min(MAX_REUSE),
        });
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Fixed(Mutex<DateTime<Utc>>);

    impl Clock for Fixed {
        fn now(&self) -> DateTime<Utc> {
            *self.0.lock().unwrap()
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    async fn get(cache: &TokenCache<u32>, fetches: &AtomicUsize, expires_at: DateTime<Utc>) -> u32 {
        cache
            .get_or_fetch("k", || async {
                let n = fetches.fetch_add(1, Ordering::SeqCst) as u32 + 1;
                Ok::<_, ()>(Expiring {
                    value: n,
                    expires_at,
                })
            })
            .await
            .unwrap()
            .value
    }

    #[tokio::test]
    async fn reuses_until_eighty_percent_of_the_lifetime() {
        let clock = Arc::new(Fixed(Mutex::new(at("2025-01-01T00:00:00Z"))));
        let cache = TokenCache::new(clock.clone());
        let fetches = AtomicUsize::new(0);
        let expiry = at("2025-01-01T00:10:00Z");
        assert_eq!(get(&cache, &fetches, expiry).await, 1);
        *clock.0.lock().unwrap() = at("2025-01-01T00:07:59Z");
        assert_eq!(get(&cache, &fetches, expiry).await, 1, "still fresh");
        *clock.0.lock().unwrap() = at("2025-01-01T00:08:00Z");
        assert_eq!(get(&cache, &fetches, expiry).await, 2, "80% of 10 minutes");
    }

    #[tokio::test]
    async fn long_lived_tokens_are_reused_one_hour_at_most() {
        let clock = Arc::new(Fixed(Mutex::new(at("2025-01-01T00:00:00Z"))));
        let cache = TokenCache::new(clock.clone());
        let fetches = AtomicUsize::new(0);
        let expiry = at("2025-01-01T12:00:00Z");
        get(&cache, &fetches, expiry).await;
        *clock.0.lock().unwrap() = at("2025-01-01T00:59:59Z");
        assert_eq!(get(&cache, &fetches, expiry).await, 1);
        *clock.0.lock().unwrap() = at("2025-01-01T01:00:00Z");
        assert_eq!(get(&cache, &fetches, expiry).await, 2);
    }

    #[tokio::test]
    async fn expired_tokens_and_failures_are_not_kept() {
        let clock = Arc::new(Fixed(Mutex::new(at("2025-01-01T00:00:00Z"))));
        let cache = TokenCache::new(clock);
        let fetches = AtomicUsize::new(0);
        let past = at("2015-01-01T00:00:00Z");
        assert_eq!(get(&cache, &fetches, past).await, 1);
        assert_eq!(get(&cache, &fetches, past).await, 2);
        let failed = cache
            .get_or_fetch("k", || async { Err::<Expiring<u32>, _>("down") })
            .await;
        assert_eq!(failed.map(|e| e.value), Err("down"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_callers_share_one_fetch() {
        let clock = Arc::new(Fixed(Mutex::new(at("2025-01-01T00:00:00Z"))));
        let cache = Arc::new(TokenCache::new(clock));
        let fetches = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let (cache, fetches) = (cache.clone(), fetches.clone());
                tokio::spawn(async move {
                    cache
                        .get_or_fetch("k", || async {
                            fetches.fetch_add(1, Ordering::SeqCst);
                            tokio::task::yield_now().await;
                            Ok::<_, ()>(Expiring {
                                value: 7u32,
                                expires_at: at("2025-01-01T01:00:00Z"),
                            })
                        })
                        .await
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap().map(|e| e.value), Ok(7));
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }
}
