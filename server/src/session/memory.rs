//! Sessions in this process's memory: the default for a single server.
//!
//! Bounded three ways: an idle TTL, a maximum number of sessions (the least recently used is
//! evicted), and a maximum number of URLs per session (the oldest are forgotten first). Time is
//! passed in, so tests can drive expiry without sleeping.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use super::{Event, Pin, SessionLimits, Transcript, rfc3339};

#[derive(Debug)]
struct Session {
    seen: HashSet<String>,
    order: VecDeque<String>,
    last_used: Instant,
    /// Position in the LRU order.
    tick: u64,
    started: SystemTime,
    events: VecDeque<Event>,
    dropped_events: u64,
    pin: Option<Pin>,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<String, Session>,
    /// (tick, id), oldest first.
    lru: BTreeSet<(u64, String)>,
    next_tick: u64,
}

/// In-memory session store, safe to share between request handlers.
#[derive(Debug)]
pub struct MemorySessions {
    limits: SessionLimits,
    inner: Mutex<Inner>,
}

impl MemorySessions {
    pub fn new(limits: SessionLimits) -> MemorySessions {
        MemorySessions {
            limits,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps inconsistent in a way that matters
        // more than refusing every request afterwards would.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remembers that `session` was shown `urls` (normalised keys).
    pub fn record(&self, session: &str, urls: impl IntoIterator<Item = String>, now: Instant) {
        let mut inner = self.lock();
        self.open(&mut inner, session, now);
        let max_urls = self.limits.max_urls_per_session.max(1);
        if let Some(s) = inner.sessions.get_mut(session) {
            for url in urls {
                if s.seen.insert(url.clone()) {
                    s.order.push_back(url);
                    if s.order.len() > max_urls
                        && let Some(old) = s.order.pop_front()
                    {
                        s.seen.remove(&old);
                    }
                }
            }
        }
    }

    /// Records a search (`event`) in `session`'s transcript and makes its results visitable by
    /// their `keys`.
    pub fn record_search(&self, session: &str, event: Event, keys: &[&str], now: Instant) {
        self.record(session, keys.iter().map(|key| key.to_string()), now);
        self.log(session, event);
    }

    /// Records a visit attempt (`event`) in the transcript of `session`, if the session exists
    /// (a use of it, as every call on a session is).
    pub fn record_visit(&self, session: &str, event: Event, now: Instant) {
        touch(&mut self.lock(), session, now);
        self.log(session, event);
    }

    fn log(&self, session: &str, event: Event) {
        let max = self.limits.max_events_per_session.max(1);
        let mut inner = self.lock();
        if let Some(s) = inner.sessions.get_mut(session) {
            s.events.push_back(event);
            while s.events.len() > max {
                s.events.pop_front();
                s.dropped_events += 1;
            }
        }
    }

    /// The session's transcript, if it is alive. Reading it counts as activity.
    pub fn transcript(&self, session: &str, now: Instant) -> Option<Transcript> {
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        touch(&mut inner, session, now);
        inner.sessions.get(session).map(|s| Transcript {
            session: session.to_string(),
            started: rfc3339(s.started),
            events: s.events.iter().cloned().collect(),
            dropped_events: s.dropped_events,
            as_of: s.pin.as_ref().map(|p| p.as_of.clone()),
        })
    }

    /// Pins `session` (created if new) to `pin`, unless it has a pin already; the pin it has
    /// after the call.
    pub fn pin(&self, session: &str, pin: Pin, now: Instant) -> Pin {
        let mut inner = self.lock();
        self.open(&mut inner, session, now);
        match inner.sessions.get_mut(session) {
            Some(s) => s.pin.get_or_insert(pin).clone(),
            None => pin,
        }
    }

    /// The pin of `session`, if it is alive and pinned.
    pub fn pin_of(&self, session: &str, now: Instant) -> Option<Pin> {
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        inner.sessions.get(session).and_then(|s| s.pin.clone())
    }

    /// Ends `session`: forgets what it saw and its transcript. False if it did not exist.
    pub fn end(&self, session: &str, now: Instant) -> bool {
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        match inner.sessions.remove(session) {
            Some(s) => {
                inner.lru.remove(&(s.tick, session.to_string()));
                true
            }
            None => false,
        }
    }

    /// Creates `session` if needed (evicting the least recently used at capacity) and touches it.
    fn open(&self, inner: &mut Inner, session: &str, now: Instant) {
        self.expire(inner, now);
        if !inner.sessions.contains_key(session) {
            while inner.sessions.len() >= self.limits.max_sessions.max(1) {
                let Some((_, oldest)) = inner.lru.pop_first() else {
                    break;
                };
                inner.sessions.remove(&oldest);
            }
            inner.sessions.insert(
                session.to_string(),
                Session {
                    seen: HashSet::new(),
                    order: VecDeque::new(),
                    last_used: now,
                    tick: 0,
                    started: SystemTime::now(),
                    events: VecDeque::new(),
                    dropped_events: 0,
                    pin: None,
                },
            );
        }
        touch(inner, session, now);
    }

    /// Whether `session` has been shown `url` (a normalised key). Counts as activity.
    pub fn has_seen(&self, session: &str, url: &str, now: Instant) -> bool {
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        if !inner.sessions.contains_key(session) {
            return false;
        }
        touch(&mut inner, session, now);
        inner
            .sessions
            .get(session)
            .is_some_and(|s| s.seen.contains(url))
    }

    /// The most recently used sessions alive at `now` whose member starts with `prefix`
    /// (`NAMESPACE/`), newest first, at most `limit`, with when each was last used.
    pub fn recent(&self, prefix: &str, limit: usize, now: Instant) -> Vec<(String, SystemTime)> {
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        let wall = SystemTime::now();
        inner
            .lru
            .iter()
            .rev()
            .filter(|(_, member)| member.starts_with(prefix))
            .take(limit)
            .filter_map(|(_, member)| {
                let idle = now.saturating_duration_since(inner.sessions.get(member)?.last_used);
                Some((member.clone(), wall - idle))
            })
            .collect()
    }

    /// Sessions alive at `now`.
    pub fn active(&self, now: Instant) -> usize {
        let mut inner = self.lock();
        self.expire(&mut inner, now);
        inner.sessions.len()
    }

    fn expire(&self, inner: &mut Inner, now: Instant) {
        while let Some((_, id)) = inner.lru.first().cloned() {
            let expired = inner
                .sessions
                .get(&id)
                .is_none_or(|s| now.saturating_duration_since(s.last_used) >= self.limits.idle_ttl);
            if !expired {
                break;
            }
            inner.lru.pop_first();
            inner.sessions.remove(&id);
        }
    }
}

/// Marks `session` as used at `now`, moving it to the young end of the LRU order.
fn touch(inner: &mut Inner, session: &str, now: Instant) {
    inner.next_tick += 1;
    let tick = inner.next_tick;
    if let Some(s) = inner.sessions.get_mut(session) {
        let old = (s.tick, session.to_string());
        s.tick = tick;
        s.last_used = now;
        inner.lru.remove(&old);
        inner.lru.insert((tick, session.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn store(ttl: u64, max_sessions: usize, max_urls: usize) -> MemorySessions {
        MemorySessions::new(SessionLimits {
            idle_ttl: Duration::from_secs(ttl),
            max_sessions,
            max_urls_per_session: max_urls,
            max_events_per_session: 3,
        })
    }

    #[test]
    fn transcripts_record_searches_and_visits_in_order_and_end() {
        let s = store(60, 10, 10);
        let t = Instant::now();
        let at = rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_460_800_123));
        let search = Event::Search {
            at: at.clone(),
            collection: None,
            query: "first query".into(),
            urls: vec!["https://a.org/X".into()],
        };
        let visit = |url: &str, outcome: &str| Event::Visit {
            at: at.clone(),
            collection: None,
            url: url.into(),
            outcome: outcome.into(),
        };
        s.record_search("e", search.clone(), &["https://a.org/X"], t);
        s.record_visit("e", visit("https://a.org/X", "ok"), t);
        s.record_visit("nobody", visit("https://a.org/X", "url_not_seen"), t);
        let transcript = s.transcript("e", t).expect("alive");
        assert_eq!(transcript.events.len(), 2);
        assert_eq!(transcript.events[0], search);
        assert_eq!(at, "2025-11-30T00:00:00.123Z");
        assert!(
            s.transcript("nobody", t).is_none(),
            "visits do not create sessions"
        );
        // Bounded: the oldest entries go first, and are counted.
        for i in 0..3 {
            s.record_visit("e", visit(&format!("u{i}"), "ok"), t);
        }
        let transcript = s.transcript("e", t).expect("alive");
        assert_eq!(transcript.events.len(), 3);
        assert_eq!(transcript.dropped_events, 2);
        assert!(s.end("e", t));
        assert!(!s.end("e", t));
        assert!(s.transcript("e", t).is_none());
        assert!(!s.has_seen("e", "https://a.org/X", t));
    }

    #[test]
    fn sessions_are_isolated() {
        let s = store(60, 10, 10);
        let t = Instant::now();
        s.record("a", ["u1".to_string()], t);
        assert!(s.has_seen("a", "u1", t));
        assert!(!s.has_seen("b", "u1", t));
        assert!(!s.has_seen("a", "u2", t));
    }

    #[test]
    fn idle_sessions_expire_and_use_keeps_them_alive() {
        let s = store(10, 10, 10);
        let t = Instant::now();
        s.record("a", ["u".to_string()], t);
        assert!(s.has_seen("a", "u", t + Duration::from_secs(9)));
        assert!(s.has_seen("a", "u", t + Duration::from_secs(18)));
        assert!(!s.has_seen("a", "u", t + Duration::from_secs(28)));
        assert_eq!(s.active(t + Duration::from_secs(28)), 0);
    }

    #[test]
    fn least_recently_used_session_is_evicted_at_capacity() {
        let s = store(60, 2, 10);
        let t = Instant::now();
        s.record("a", ["u".to_string()], t);
        s.record("b", ["u".to_string()], t);
        assert!(s.has_seen("a", "u", t)); // a is now younger than b
        s.record("c", ["u".to_string()], t);
        assert!(s.has_seen("a", "u", t));
        assert!(!s.has_seen("b", "u", t));
        assert!(s.has_seen("c", "u", t));
    }

    #[test]
    fn oldest_urls_are_forgotten_past_the_per_session_limit() {
        let s = store(60, 2, 2);
        let t = Instant::now();
        s.record("a", ["u1", "u2", "u3"].map(String::from), t);
        assert!(!s.has_seen("a", "u1", t));
        assert!(s.has_seen("a", "u2", t) && s.has_seen("a", "u3", t));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Record(u8, u8),
        Check(u8, u8),
        Wait(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..5, 0u8..6).prop_map(|(s, u)| Op::Record(s, u)),
            (0u8..5, 0u8..6).prop_map(|(s, u)| Op::Check(s, u)),
            (0u64..8).prop_map(Op::Wait),
        ]
    }

    proptest! {
        /// Against a model map with no capacity limits (limits set high), only the TTL applies.
        #[test]
        fn matches_a_model_map_under_ttl(ops in proptest::collection::vec(op(), 0..60)) {
            let s = store(10, 1000, 1000);
            let start = Instant::now();
            let mut now = 0u64;
            let mut model: HashMap<u8, (u64, HashSet<u8>)> = HashMap::new();
            for op in ops {
                let at = start + Duration::from_secs(now);
                model.retain(|_, (last, _)| now - *last < 10);
                match op {
                    Op::Record(id, url) => {
                        s.record(&id.to_string(), [url.to_string()], at);
                        let entry = model.entry(id).or_insert((now, HashSet::new()));
                        entry.0 = now;
                        entry.1.insert(url);
                    }
                    Op::Check(id, url) => {
                        let expected = model.get(&id).is_some_and(|(_, urls)| urls.contains(&url));
                        prop_assert_eq!(s.has_seen(&id.to_string(), &url.to_string(), at), expected);
                        if let Some(entry) = model.get_mut(&id) {
                            entry.0 = now;
                        }
                    }
                    Op::Wait(secs) => now += secs,
                }
                prop_assert_eq!(s.active(start + Duration::from_secs(now)), {
                    model.retain(|_, (last, _)| now - *last < 10);
                    model.len()
                });
            }
        }
    }
}
