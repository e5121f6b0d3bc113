//! Sessions in Redis, shared by every server of a cluster: an episode may search on one server and
//! visit on another, and sessions outlive a server's restart (and Redis's, with its append-only
//! file on).
//!
//! Key layout (`P` is `--sessions-prefix`, `stillweb` by default; `{…}` is a Redis Cluster hash
//! tag, so a session's keys live in one slot and each operation is one atomic Lua script):
//!
//! ```text
//! P:{NAMESPACE/ID}:meta    hash: started (RFC 3339), seq (URLs ever added), dropped (events),
//!                          as_of and sees_before (a pinned session's cutoff, as given and in
//!                          seconds since the epoch)
//! P:{NAMESPACE/ID}:seen    sorted set: each shown URL's normalised key, scored by its seq
//! P:{NAMESPACE/ID}:events  list: the transcript, one JSON event per entry, oldest first
//! P:active                 sorted set: NAMESPACE/ID scored by last use (Unix µs)
//! ```
//!
//! The same bounds as in memory: every key of a session expires after the idle TTL, refreshed on
//! each use; the oldest URLs and events are dropped past their limits; past --max-sessions the
//! least recently used sessions are deleted (the `active` set counts them). A session exists
//! while its `meta` key does. NAMESPACE is the API key's name, `-` without keys; the calls here
//! take `NAMESPACE/ID` whole (see [`super::SessionId::member`]).
//!
//! Every call has a deadline (`--sessions-timeout-ms`): when Redis cannot answer, the request
//! fails closed with `Unavailable` instead of waiting on reconnects. The connection manager
//! reconnects by itself once Redis is back.

use std::time::{Duration, SystemTime};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Event, Pin, SessionLimits, Transcript, Unavailable, rfc3339};

/// Adds a search: creates the session if new (returns 1 then), adds the URLs not yet seen,
/// forgets the oldest past the limit, appends the event, refreshes every key's TTL.
/// KEYS: meta, seen, events. ARGV: ttl ms, max urls, max events, started, event, url…
const RECORD_SEARCH: &str = r"
local created = redis.call('HSETNX', KEYS[1], 'started', ARGV[4])
for i = 6, #ARGV do
  if not redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZADD', KEYS[2], redis.call('HINCRBY', KEYS[1], 'seq', 1), ARGV[i])
  end
end
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[2])
if over > 0 then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1) end
local extra = redis.call('RPUSH', KEYS[3], ARGV[5]) - tonumber(ARGV[3])
if extra > 0 then
  redis.call('LTRIM', KEYS[3], extra, -1)
  redis.call('HINCRBY', KEYS[1], 'dropped', extra)
end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
return created
";

/// Appends a visit to an existing session (returns 0 when there is none).
/// KEYS: meta, seen, events. ARGV: ttl ms, max events, event.
const RECORD_VISIT: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local extra = redis.call('RPUSH', KEYS[3], ARGV[3]) - tonumber(ARGV[2])
if extra > 0 then
  redis.call('LTRIM', KEYS[3], extra, -1)
  redis.call('HINCRBY', KEYS[1], 'dropped', extra)
end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
return 1
";

/// Whether the session exists and has seen a URL: 1 seen, 0 not, -1 no session.
/// KEYS: meta, seen, events. ARGV: ttl ms, url.
const HAS_SEEN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 1 end
return 0
";

/// Pins a session (creating it if new) unless it has a pin: {created, as_of, sees_before}, the
/// pin it has after the call.
/// KEYS: meta, seen, events. ARGV: ttl ms, started, as_of, sees_before.
const PIN: &str = r"
local created = redis.call('HSETNX', KEYS[1], 'started', ARGV[2])
if redis.call('HSETNX', KEYS[1], 'sees_before', ARGV[4]) == 1 then
  redis.call('HSET', KEYS[1], 'as_of', ARGV[3])
end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
return {created, redis.call('HGET', KEYS[1], 'as_of'), redis.call('HGET', KEYS[1], 'sees_before')}
";

/// The transcript: {started, dropped, as_of ('' unpinned), events…}, or nil without a session.
/// KEYS: meta, seen, events. ARGV: ttl ms.
const TRANSCRIPT: &str = r"
local started = redis.call('HGET', KEYS[1], 'started')
if not started then return nil end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
local out = {started, redis.call('HGET', KEYS[1], 'dropped') or '0', redis.call('HGET', KEYS[1], 'as_of') or ''}
for _, e in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do out[#out + 1] = e end
return out
";

/// Sessions kept in Redis.
pub struct RedisSessions {
    client: redis::Client,
    /// Made on first use, inside the runtime that serves requests (it spawns a task there).
    connection: tokio::sync::OnceCell<ConnectionManager>,
    /// The URL without its password, for messages and `/info`.
    display: String,
    prefix: String,
    limits: SessionLimits,
    timeout: Duration,
}

impl std::fmt::Debug for RedisSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSessions")
            .field("url", &self.display)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl RedisSessions {
    /// A store at `url` (`redis://HOST:PORT/DB`). Connects lazily: a server starts while Redis is
    /// down and serves once it is up; until then session calls fail with [`Unavailable`].
    pub fn connect(
        url: &str,
        prefix: &str,
        limits: SessionLimits,
        timeout: Duration,
    ) -> Result<RedisSessions, String> {
        let client = redis::Client::open(url)
            .map_err(|e| format!("--sessions `{}`: {e}", hide_password(url)))?;
        Ok(RedisSessions {
            client,
            connection: tokio::sync::OnceCell::new(),
            display: hide_password(url),
            prefix: prefix.to_string(),
            limits,
            timeout,
        })
    }

    pub fn display_url(&self) -> &str {
        &self.display
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    /// The keys of the session that is `member` (`NAMESPACE/ID`) of the active set: meta, seen,
    /// events.
    fn keys(&self, member: &str) -> [String; 3] {
        let tag = format!("{}:{{{member}}}", self.prefix);
        [
            format!("{tag}:meta"),
            format!("{tag}:seen"),
            format!("{tag}:events"),
        ]
    }

    fn active_key(&self) -> String {
        format!("{}:active", self.prefix)
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.limits.idle_ttl.as_millis()).unwrap_or(u64::MAX)
    }

    fn ttl_us(&self) -> u64 {
        u64::try_from(self.limits.idle_ttl.as_micros()).unwrap_or(u64::MAX)
    }

    fn unavailable(&self, reason: impl std::fmt::Display) -> Unavailable {
        Unavailable {
            store: self.display.clone(),
            reason: reason.to_string(),
        }
    }

    async fn connection(&self) -> Result<ConnectionManager, Unavailable> {
        self.connection
            .get_or_try_init(|| async {
                // Reconnect quickly and briefly: every call has its own deadline, and the next
                // call after a failed reconnect starts another.
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.timeout))
                    .set_response_timeout(Some(self.timeout))
                    .set_number_of_retries(2)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_millis(250));
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            })
            .await
            .cloned()
            .map_err(|e| self.unavailable(e))
    }

    /// Runs `pipe` within the deadline; its replies as `T`. A connection found dropped (Redis
    /// restarted since the last call) is retried once on the manager's new connection, so a
    /// restart costs no request.
    async fn run<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, Unavailable> {
        let attempts = async {
            let mut connection = self.connection().await?;
            match pipe.query_async(&mut connection).await {
                Err(e) if e.is_connection_dropped() => pipe
                    .query_async(&mut connection)
                    .await
                    .map_err(|e| self.unavailable(e)),
                other => other.map_err(|e| self.unavailable(e)),
            }
        };
        tokio::time::timeout(self.timeout, attempts)
            .await
            .unwrap_or_else(|_| {
                Err(self.unavailable(format!("no answer within {} ms", self.timeout.as_millis())))
            })
    }

    /// Takes a session the store no longer has out of the active set (a lookup marked it used).
    async fn forget_active(&self, session: &str) -> Result<(), Unavailable> {
        let mut pipe = redis::pipe();
        pipe.cmd("ZREM")
            .arg(self.active_key())
            .arg(session)
            .ignore();
        self.run::<()>(&pipe).await
    }

    /// A pipeline that runs `script` on `session`'s keys with `args`, then marks the session
    /// used in the active set: a search (`creates`) adds it there; the rest update it only if
    /// present, so that asking about a session that does not exist does not count one.
    fn script(&self, script: &str, session: &str, args: &[&str], creates: bool) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(script)
            .arg(3)
            .arg(&self.keys(session)[..]);
        for a in args {
            pipe.arg(*a);
        }
        pipe.cmd("ZADD").arg(self.active_key());
        if !creates {
            pipe.arg("XX");
        }
        pipe.arg(now_us()).arg(session).ignore();
        pipe
    }

    pub async fn record_search(
        &self,
        session: &str,
        event: Event,
        keys: &[&str],
        at: SystemTime,
    ) -> Result<(), Unavailable> {
        let (ttl, max_urls, max_events, started, event) = (
            self.ttl_ms().to_string(),
            self.limits.max_urls_per_session.max(1).to_string(),
            self.limits.max_events_per_session.max(1).to_string(),
            rfc3339(at),
            serde_json::to_string(&event).map_err(|e| self.unavailable(e))?,
        );
        let mut args = vec![
            ttl.as_str(),
            max_urls.as_str(),
            max_events.as_str(),
            started.as_str(),
            event.as_str(),
        ];
        args.extend_from_slice(keys);
        let (created,): (i64,) = self
            .run(&self.script(RECORD_SEARCH, session, &args, true))
            .await?;
        if created == 1 {
            self.bound_sessions().await?;
        }
        Ok(())
    }

    /// Forgets expired sessions in the active set and deletes the least recently used past
    /// --max-sessions.
    async fn bound_sessions(&self) -> Result<(), Unavailable> {
        let active = self.active_key();
        let mut pipe = redis::pipe();
        pipe.cmd("ZREMRANGEBYSCORE")
            .arg(&active)
            .arg("-inf")
            .arg(now_us().saturating_sub(self.ttl_us()))
            .ignore()
            .cmd("ZCARD")
            .arg(&active);
        let (count,): (usize,) = self.run(&pipe).await?;
        let over = count.saturating_sub(self.limits.max_sessions.max(1));
        if over == 0 {
            return Ok(());
        }
        let mut pop = redis::pipe();
        pop.cmd("ZPOPMIN").arg(&active).arg(over);
        let (evicted,): (Vec<(String, f64)>,) = self.run(&pop).await?;
        let mut delete = redis::pipe();
        for (member, _) in evicted {
            delete.cmd("DEL").arg(&self.keys(&member)[..]).ignore();
        }
        self.run::<()>(&delete).await
    }

    pub async fn record_visit(&self, session: &str, event: Event) -> Result<(), Unavailable> {
        let event = serde_json::to_string(&event).map_err(|e| self.unavailable(e))?;
        let (ttl, max_events) = (
            self.ttl_ms().to_string(),
            self.limits.max_events_per_session.max(1).to_string(),
        );
        let pipe = self.script(RECORD_VISIT, session, &[&ttl, &max_events, &event], false);
        let (exists,): (i64,) = self.run(&pipe).await?;
        if exists == 0 {
            self.forget_active(session).await?;
        }
        Ok(())
    }

    pub async fn has_seen(&self, session: &str, url: &str) -> Result<bool, Unavailable> {
        let ttl = self.ttl_ms().to_string();
        let (seen,): (i64,) = self
            .run(&self.script(HAS_SEEN, session, &[&ttl, url], false))
            .await?;
        if seen == -1 {
            self.forget_active(session).await?;
        }
        Ok(seen == 1)
    }

    pub async fn transcript(&self, session: &str) -> Result<Option<Transcript>, Unavailable> {
        let ttl = self.ttl_ms().to_string();
        let (reply,): (Option<Vec<String>>,) = self
            .run(&self.script(TRANSCRIPT, session, &[&ttl], false))
            .await?;
        let Some(mut parts) = reply else {
            self.forget_active(session).await?;
            return Ok(None);
        };
        if parts.len() < 3 {
            return Err(self.unavailable("a malformed transcript reply"));
        }
        let events = parts.split_off(3);
        let events = events
            .iter()
            .map(|e| serde_json::from_str::<Event>(e))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.unavailable(format!("a stored event does not parse: {e}")))?;
        Ok(Some(Transcript {
            session: session.to_string(),
            started: parts[0].clone(),
            events,
            dropped_events: parts[1].parse().unwrap_or(0),
            as_of: Some(parts[2].clone()).filter(|a| !a.is_empty()),
        }))
    }

    pub async fn pin(&self, session: &str, pin: Pin) -> Result<Pin, Unavailable> {
        let (ttl, started, before) = (
            self.ttl_ms().to_string(),
            rfc3339(SystemTime::now()),
            pin.sees_before.to_string(),
        );
        let args = [ttl.as_str(), started.as_str(), pin.as_of.as_str(), &before];
        let ((created, as_of, sees_before),): ((i64, String, String),) =
            self.run(&self.script(PIN, session, &args, true)).await?;
        if created == 1 {
            self.bound_sessions().await?;
        }
        self.stored_pin(Some(as_of), Some(sees_before))
            .map(|stored| stored.unwrap_or(pin))
    }

    pub async fn pin_of(&self, session: &str) -> Result<Option<Pin>, Unavailable> {
        let [meta, ..] = self.keys(session);
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET").arg(meta).arg("as_of").arg("sees_before");
        let ((as_of, sees_before),): ((Option<String>, Option<String>),) = self.run(&pipe).await?;
        self.stored_pin(as_of, sees_before)
    }

    /// A pin as the meta hash holds it (both fields, or neither).
    fn stored_pin(
        &self,
        as_of: Option<String>,
        sees_before: Option<String>,
    ) -> Result<Option<Pin>, Unavailable> {
        match (as_of, sees_before) {
            (Some(as_of), Some(before)) => match before.parse() {
                Ok(sees_before) => Ok(Some(Pin { as_of, sees_before })),
                Err(_) => Err(self.unavailable(format!("a stored pin does not parse: {before}"))),
            },
            _ => Ok(None),
        }
    }

    pub async fn end(&self, session: &str) -> Result<bool, Unavailable> {
        let mut pipe = redis::pipe();
        pipe.cmd("DEL")
            .arg(&self.keys(session)[..])
            .cmd("ZREM")
            .arg(self.active_key())
            .arg(session);
        // DEL counts the keys it removed; `meta` is one of them whenever the session existed.
        let (deleted, _removed): (usize, usize) = self.run(&pipe).await?;
        Ok(deleted > 0)
    }

    /// The most recently used live sessions whose member starts with `prefix` (`NAMESPACE/`),
    /// newest first, at most `limit`, with when each was last used. Reads at most the 10,000
    /// most recent of all namespaces.
    pub async fn recent(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, SystemTime)>, Unavailable> {
        let mut pipe = redis::pipe();
        pipe.cmd("ZREVRANGEBYSCORE")
            .arg(self.active_key())
            .arg("+inf")
            .arg(now_us().saturating_sub(self.ttl_us()))
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(10_000);
        let (members,): (Vec<(String, f64)>,) = self.run(&pipe).await?;
        Ok(members
            .into_iter()
            .filter(|(member, _)| member.starts_with(prefix))
            .take(limit)
            .map(|(member, us)| {
                let at = SystemTime::UNIX_EPOCH + Duration::from_micros(us.max(0.0) as u64);
                (member, at)
            })
            .collect())
    }

    pub async fn active(&self) -> Result<usize, Unavailable> {
        let mut pipe = redis::pipe();
        pipe.cmd("ZCOUNT")
            .arg(self.active_key())
            .arg(now_us().saturating_sub(self.ttl_us()))
            .arg("+inf");
        let (count,): (usize,) = self.run(&pipe).await?;
        Ok(count)
    }
}

/// Microseconds since the epoch: the active set's scores, fine enough that sessions used one
/// after another are ordered (a float holds them exactly until the year 2255).
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `url` with any password replaced by `***`.
fn hide_password(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            hide_password("redis://:secret@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            hide_password("redis://127.0.0.1:6379/2"),
            "redis://127.0.0.1:6379/2"
        );
    }
}
