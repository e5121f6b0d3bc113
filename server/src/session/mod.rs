//! Sessions: what each agent episode has been shown, so that visits can be limited to it, and
//! its transcript. Kept in this process ([`memory`], the default) or in Redis ([`redis`], shared
//! by every server of a cluster, surviving restarts); both behind [`Sessions`], with the same
//! bounds and the same answers. Sessions never share state; with API keys each key's sessions
//! are apart from every other key's ([`SessionId`]).

pub mod memory;
pub mod redis;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::access::Caller;
use crate::error::{ApiError, ErrorCode};
pub use memory::MemorySessions;
pub use redis::RedisSessions;

/// The session store could not be reached or answered in time. Requests that need it fail
/// closed (`503 session_store_unavailable`): a search whose shown URLs cannot be recorded must
/// not answer, or a later visit would be wrongly refused.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the session store at {store} is unavailable ({reason}); retry once it is back")]
pub struct Unavailable {
    pub store: String,
    pub reason: String,
}

impl From<Unavailable> for ApiError {
    fn from(e: Unavailable) -> ApiError {
        tracing::warn!(error = %e, "session store unavailable");
        ApiError::new(ErrorCode::SessionStoreUnavailable, e.to_string())
    }
}

/// A session as the stores know it: the id a client chose, in the namespace of the API key it
/// came with ([`crate::access::OPEN_NAMESPACE`] without keys), so that the same id under two
/// keys is two sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionId {
    namespace: Arc<str>,
    id: String,
}

impl SessionId {
    /// `id` (already validated by [`valid_session_id`]) in `caller`'s namespace.
    pub fn new(caller: &Caller, id: impl Into<String>) -> SessionId {
        SessionId {
            namespace: caller.namespace.clone(),
            id: id.into(),
        }
    }

    /// The id as the client named it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `NAMESPACE/ID`: what the stores key a session by. Neither part may hold a `/`, so two
    /// different sessions never share one.
    pub fn member(&self) -> String {
        format!("{}/{}", self.namespace, self.id)
    }
}

impl std::fmt::Display for SessionId {
    /// The id alone: messages speak of the session the client named.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id)
    }
}

/// A live session, as `GET /v1/sessions` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub namespace: String,
    pub session: String,
    pub last_used: String,
}

/// Where sessions live.
#[derive(Debug)]
pub enum Sessions {
    Memory(MemorySessions),
    Redis(RedisSessions),
}

impl Sessions {
    /// Records a search of `collection` (`None`: the unnamed one) in `session`'s transcript
    /// and makes its results visitable: `urls` are (as shown, key it is visited by) pairs in
    /// rank order.
    pub async fn record_search(
        &self,
        session: &SessionId,
        collection: Option<&str>,
        query: &str,
        urls: &[(String, String)],
    ) -> Result<(), Unavailable> {
        let (at, session) = (SystemTime::now(), session.member());
        let event = Event::Search {
            at: rfc3339(at),
            collection: collection.map(str::to_string),
            query: query.to_string(),
            urls: urls.iter().map(|(shown, _)| shown.clone()).collect(),
        };
        let keys: Vec<&str> = urls.iter().map(|(_, key)| key.as_str()).collect();
        match self {
            Sessions::Memory(m) => {
                m.record_search(&session, event, &keys, Instant::now());
                Ok(())
            }
            Sessions::Redis(r) => r.record_search(&session, event, &keys, at).await,
        }
    }

    /// Records a visit attempt in `collection` (`outcome`: `ok` or the error code) in the
    /// transcript of `session`, if the session exists.
    pub async fn record_visit(
        &self,
        session: &SessionId,
        collection: Option<&str>,
        url: &str,
        outcome: &str,
    ) -> Result<(), Unavailable> {
        let (at, session) = (SystemTime::now(), session.member());
        let event = Event::Visit {
            at: rfc3339(at),
            collection: collection.map(str::to_string),
            url: url.to_string(),
            outcome: outcome.to_string(),
        };
        match self {
            Sessions::Memory(m) => {
                m.record_visit(&session, event, Instant::now());
                Ok(())
            }
            Sessions::Redis(r) => r.record_visit(&session, event).await,
        }
    }

    /// Whether `session` has been shown `url` (a normalised key). Counts as activity.
    pub async fn has_seen(&self, session: &SessionId, url: &str) -> Result<bool, Unavailable> {
        let session = session.member();
        match self {
            Sessions::Memory(m) => Ok(m.has_seen(&session, url, Instant::now())),
            Sessions::Redis(r) => r.has_seen(&session, url).await,
        }
    }

    /// Pins `session` (starting it if new) to `pin`: nothing dated at or after its
    /// `sees_before` is searched or visited in it from then on. A pin never moves: the answer
    /// is the pin the session has, `pin` itself or one set before.
    pub async fn pin(&self, session: &SessionId, pin: Pin) -> Result<Pin, Unavailable> {
        let session = session.member();
        match self {
            Sessions::Memory(m) => Ok(m.pin(&session, pin, Instant::now())),
            Sessions::Redis(r) => r.pin(&session, pin).await,
        }
    }

    /// The pin of `session`, if it is alive and pinned.
    pub async fn pin_of(&self, session: &SessionId) -> Result<Option<Pin>, Unavailable> {
        let session = session.member();
        match self {
            Sessions::Memory(m) => Ok(m.pin_of(&session, Instant::now())),
            Sessions::Redis(r) => r.pin_of(&session).await,
        }
    }

    /// The session's transcript, if it is alive. Reading it counts as activity.
    pub async fn transcript(&self, session: &SessionId) -> Result<Option<Transcript>, Unavailable> {
        let member = session.member();
        let transcript = match self {
            Sessions::Memory(m) => m.transcript(&member, Instant::now()),
            Sessions::Redis(r) => r.transcript(&member).await?,
        };
        // The stores know sessions by their namespaced member; the caller knows its id.
        Ok(transcript.map(|t| Transcript {
            session: session.id().to_string(),
            ..t
        }))
    }

    /// Ends `session`: forgets what it saw and its transcript. False if it did not exist.
    pub async fn end(&self, session: &SessionId) -> Result<bool, Unavailable> {
        let session = session.member();
        match self {
            Sessions::Memory(m) => Ok(m.end(&session, Instant::now())),
            Sessions::Redis(r) => r.end(&session).await,
        }
    }

    /// The most recently used live sessions of `namespace` (of every namespace: `None`),
    /// newest first, at most `limit`: each one's namespace, id and when it was last used
    /// (RFC 3339).
    pub async fn recent(
        &self,
        namespace: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Listed>, Unavailable> {
        let prefix = namespace.map(|n| format!("{n}/")).unwrap_or_default();
        let found = match self {
            Sessions::Memory(m) => m.recent(&prefix, limit, Instant::now()),
            Sessions::Redis(r) => r.recent(&prefix, limit).await?,
        };
        Ok(found
            .into_iter()
            .filter_map(|(member, at)| {
                let (namespace, id) = member.split_once('/')?;
                Some(Listed {
                    namespace: namespace.to_string(),
                    session: id.to_string(),
                    last_used: rfc3339(at),
                })
            })
            .collect())
    }

    /// Sessions alive now.
    pub async fn active(&self) -> Result<usize, Unavailable> {
        match self {
            Sessions::Memory(m) => Ok(m.active(Instant::now())),
            Sessions::Redis(r) => r.active().await,
        }
    }

    /// What `/info` says about the store.
    pub fn describe(&self) -> serde_json::Value {
        match self {
            Sessions::Memory(m) => serde_json::json!({"store": "memory", "limits": m.limits()}),
            Sessions::Redis(r) => serde_json::json!({
                "store": "redis",
                "url": r.display_url(),
                "prefix": r.prefix(),
                "limits": r.limits(),
            }),
        }
    }
}

/// Limits of the session store.
#[derive(Debug, Clone, Serialize)]
pub struct SessionLimits {
    #[serde(rename = "idle_ttl_secs", serialize_with = "as_secs")]
    pub idle_ttl: Duration,
    pub max_sessions: usize,
    pub max_urls_per_session: usize,
    /// Transcript entries kept per session; the oldest are dropped (and counted) beyond it.
    pub max_events_per_session: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            idle_ttl: Duration::from_secs(3600),
            max_sessions: 100_000,
            max_urls_per_session: 10_000,
            max_events_per_session: 1_000,
        }
    }
}

/// One entry of a session's transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A search and the URLs it showed, in rank order.
    Search {
        at: String,
        /// The collection searched (absent for the one corpus of `--index`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        collection: Option<String>,
        query: String,
        urls: Vec<String>,
    },
    /// A visit and how it ended: `ok` or the error code.
    Visit {
        at: String,
        /// The collection visited (absent for the one corpus of `--index`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        collection: Option<String>,
        url: String,
        outcome: String,
    },
}

/// A session's as-of cutoff: "the web as of `as_of`" (as the client wrote it), so that pages
/// dated at or after `sees_before` (seconds since the epoch) never reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub as_of: String,
    pub sees_before: i64,
}

/// What `GET /v1/sessions/{id}` returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transcript {
    pub session: String,
    pub started: String,
    pub events: Vec<Event>,
    /// Events dropped from the front because the transcript reached its limit.
    pub dropped_events: u64,
    /// The session's as-of cutoff, when it is pinned to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

/// `t` as an RFC 3339 UTC timestamp with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Longest accepted session id.
pub const MAX_SESSION_ID_LEN: usize = 128;

/// Whether `id` is an acceptable session id: 1–128 characters of `[A-Za-z0-9._:-]`.
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SESSION_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_civil_dates() {
        let at = |secs: u64| rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_796_044_721), "2026-11-30T13:18:41.000Z");
    }

    #[test]
    fn session_ids_are_validated() {
        assert!(valid_session_id("episode-42_a:b.c"));
        for bad in ["", "has space", "slash/", "ünï", &"x".repeat(129)] {
            assert!(!valid_session_id(bad), "{bad}");
        }
    }
}
