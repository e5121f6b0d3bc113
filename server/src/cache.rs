//! A bounded least-recently-used map, for the result and query-embedding caches. Values are
//! cloned out (they are `Arc`s or small), so the lock is held only for the lookup.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Mutex;

#[derive(Debug)]
struct Inner<K, V> {
    map: HashMap<K, (V, u64)>,
    order: BTreeMap<u64, K>,
    tick: u64,
}

/// At most `capacity` entries; the least recently used goes first. Capacity 0 stores nothing.
#[derive(Debug)]
pub struct LruCache<K, V> {
    capacity: usize,
    inner: Mutex<Inner<K, V>>,
}

impl<K: Hash + Eq + Clone, V: Clone> LruCache<K, V> {
    pub fn new(capacity: usize) -> LruCache<K, V> {
        LruCache {
            capacity,
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                order: BTreeMap::new(),
                tick: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K, V>> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn get(&self, key: &K) -> Option<V> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let (value, old) = {
            let entry = inner.map.get_mut(key)?;
            let old = entry.1;
            entry.1 = tick;
            (entry.0.clone(), old)
        };
        inner.order.remove(&old);
        inner.order.insert(tick, key.clone());
        Some(value)
    }

    pub fn insert(&self, key: K, value: V) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((_, old)) = inner.map.insert(key.clone(), (value, tick)) {
            inner.order.remove(&old);
        }
        inner.order.insert(tick, key);
        while inner.map.len() > self.capacity {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            inner.map.remove(&oldest);
        }
    }

    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let c = LruCache::new(2);
        c.insert("a", 1);
        c.insert("b", 2);
        assert_eq!(c.get(&"a"), Some(1));
        c.insert("c", 3);
        assert_eq!(c.get(&"b"), None);
        assert_eq!((c.get(&"a"), c.get(&"c")), (Some(1), Some(3)));
        c.insert("a", 10);
        assert_eq!((c.len(), c.get(&"a")), (2, Some(10)));
        let off: LruCache<&str, i32> = LruCache::new(0);
        off.insert("x", 1);
        assert!(off.is_empty());
    }
}
