//! Sessions in a real `redis-server` on loopback: the Redis store answers exactly as the in-memory
//! one under the same operations and bounds; two server processes sharing it serve one episode
//! (search on one, visit on the other, the same transcript from both); sessions survive a Redis
//! restart (append-only file); with Redis down, searches and visits fail closed with
//! `503 session_store_unavailable` within the store's deadline, and work again once it is back.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stillweb_server::access::Caller;
use stillweb_server::session::{
    MemorySessions, Pin, RedisSessions, SessionId, SessionLimits, Sessions,
};
use stillweb_test_support::Redis;
use support::{get, post, samples_index, spawn_server};

fn limits(ttl: Duration, max_sessions: usize) -> SessionLimits {
    SessionLimits {
        idle_ttl: ttl,
        max_sessions,
        max_urls_per_session: 3,
        max_events_per_session: 4,
    }
}

/// `id` in the namespace of a server without API keys.
fn id(id: &str) -> SessionId {
    SessionId::new(&Caller::open(), id)
}

fn shown(urls: &[&str]) -> Vec<(String, String)> {
    urls.iter()
        .map(|u| (format!("https://{u}/"), format!("https://{u}/")))
        .collect()
}

/// The same operations on both stores give the same answers: transcripts (events in order, the
/// oldest dropped and counted past the limit), visit rules, the per-session URL bound, session
/// isolation, ending, and the session-count bound (least recently used evicted).
#[tokio::test]
async fn redis_store_answers_as_the_memory_store() {
    let Some(redis) = Redis::start() else { return };
    let limits = limits(Duration::from_secs(60), 3);
    let memory = Sessions::Memory(MemorySessions::new(limits.clone()));
    let shared = Sessions::Redis(
        RedisSessions::connect(&redis.url(), "parity", limits, Duration::from_millis(500))
            .expect("connect"),
    );
    for store in [&memory, &shared] {
        store
            .record_search(&id("a"), None, "first", &shown(&["u1", "u2"]))
            .await
            .expect("search");
        store
            .record_search(&id("a"), None, "second", &shown(&["u2", "u3", "u4"]))
            .await
            .expect("search");
        store
            .record_visit(&id("a"), None, "https://u4/", "ok")
            .await
            .expect("visit");
        store
            .record_visit(&id("nobody"), None, "https://u4/", "url_not_seen")
            .await
            .expect("visit");
        store
            .record_visit(&id("a"), None, "https://u9/", "url_not_seen")
            .await
            .expect("visit");
        store
            .record_search(&id("b"), None, "other", &shown(&["u9"]))
            .await
            .expect("search");
    }
    for store in [&memory, &shared] {
        // Three URLs per session: u1 was the first one in and is forgotten.
        for (url, seen) in [("u1", false), ("u2", true), ("u3", true), ("u4", true)] {
            assert_eq!(
                store
                    .has_seen(&id("a"), &format!("https://{url}/"))
                    .await
                    .expect("seen"),
                seen,
                "{url}"
            );
        }
        assert!(!store.has_seen(&id("a"), "https://u9/").await.expect("seen"));
        assert!(store.has_seen(&id("b"), "https://u9/").await.expect("seen"));
        assert!(
            !store
                .has_seen(&id("nobody"), "https://u4/")
                .await
                .expect("seen")
        );
        assert!(
            store
                .transcript(&id("nobody"))
                .await
                .expect("read")
                .is_none()
        );
    }
    let strip_times = |t: stillweb_server::session::Transcript| {
        let mut value = serde_json::to_value(t).expect("json");
        value["started"] = Value::Null;
        for event in value["events"].as_array_mut().expect("events") {
            event["at"] = Value::Null;
        }
        value
    };
    let from_memory = strip_times(memory.transcript(&id("a")).await.expect("read").expect("a"));
    let from_redis = strip_times(shared.transcript(&id("a")).await.expect("read").expect("a"));
    assert_eq!(from_redis, from_memory);
    assert_eq!(from_redis["dropped_events"], 0);
    for store in [&memory, &shared] {
        store
            .record_visit(&id("a"), None, "https://u2/", "ok")
            .await
            .expect("visit");
    }
    let from_redis = strip_times(shared.transcript(&id("a")).await.expect("read").expect("a"));
    assert_eq!(
        from_redis,
        strip_times(memory.transcript(&id("a")).await.expect("read").expect("a"))
    );
    assert_eq!(from_redis["dropped_events"], 1, "{from_redis}");
    assert_eq!(from_redis["events"][0]["query"], "second");

    // At most 3 sessions: a fourth and fifth evict the least recently used (b, then a... unless
    // a was used since).
    for store in [&memory, &shared] {
        assert_eq!(store.active().await.expect("active"), 2);
        store
            .record_search(&id("c"), None, "q", &shown(&["c"]))
            .await
            .expect("search");
        assert!(store.has_seen(&id("a"), "https://u2/").await.expect("seen"));
        store
            .record_search(&id("d"), None, "q", &shown(&["d"]))
            .await
            .expect("search");
        assert_eq!(store.active().await.expect("active"), 3);
        assert!(
            store.transcript(&id("b")).await.expect("read").is_none(),
            "b evicted"
        );
        assert!(store.has_seen(&id("a"), "https://u2/").await.expect("seen"));
        assert!(store.end(&id("a")).await.expect("end"));
        assert!(!store.end(&id("a")).await.expect("end"));
        assert!(!store.has_seen(&id("a"), "https://u2/").await.expect("seen"));
        assert_eq!(store.active().await.expect("active"), 2);
    }
}

/// A pin starts a session, never moves, shows in the transcript, survives searches, and ends
/// with its session: the same in both stores.
#[tokio::test]
async fn pins_are_kept_alike_in_both_stores() {
    let Some(redis) = Redis::start() else { return };
    let limits = limits(Duration::from_secs(60), 10);
    let memory = Sessions::Memory(MemorySessions::new(limits.clone()));
    let shared = Sessions::Redis(
        RedisSessions::connect(&redis.url(), "pins", limits, Duration::from_millis(500))
            .expect("connect"),
    );
    let pin = |as_of: &str, sees_before: i64| Pin {
        as_of: as_of.into(),
        sees_before,
    };
    for store in [&memory, &shared] {
        assert_eq!(store.pin_of(&id("p")).await.expect("read"), None);
        let held = store
            .pin(&id("p"), pin("2015-06-30", 100))
            .await
            .expect("pin");
        assert_eq!(held, pin("2015-06-30", 100));
        let held = store
            .pin(&id("p"), pin("2020-01-01", 200))
            .await
            .expect("pin");
        assert_eq!(held, pin("2015-06-30", 100), "a pin never moves");
        store
            .record_search(&id("p"), None, "q", &shown(&["u1"]))
            .await
            .expect("search");
        assert_eq!(
            store.pin_of(&id("p")).await.expect("read"),
            Some(pin("2015-06-30", 100))
        );
        let transcript = store
            .transcript(&id("p"))
            .await
            .expect("read")
            .expect("alive");
        assert_eq!(transcript.as_of.as_deref(), Some("2015-06-30"));
        assert_eq!(transcript.events.len(), 1);
        // An unpinned session's transcript has none.
        store
            .record_search(&id("u"), None, "q", &shown(&["u1"]))
            .await
            .expect("search");
        let transcript = store
            .transcript(&id("u"))
            .await
            .expect("read")
            .expect("alive");
        assert_eq!(transcript.as_of, None);
        assert!(store.end(&id("p")).await.expect("end"));
        assert_eq!(store.pin_of(&id("p")).await.expect("read"), None);
    }
}

/// Idle sessions expire after the TTL in Redis too, and use keeps them alive.
#[tokio::test]
async fn redis_sessions_expire_when_idle() {
    let Some(redis) = Redis::start() else { return };
    let store = Sessions::Redis(
        RedisSessions::connect(
            &redis.url(),
            "ttl",
            limits(Duration::from_millis(600), 10),
            Duration::from_millis(500),
        )
        .expect("connect"),
    );
    store
        .record_search(&id("e"), None, "q", &shown(&["u"]))
        .await
        .expect("search");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(store.has_seen(&id("e"), "https://u/").await.expect("seen"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        store.has_seen(&id("e"), "https://u/").await.expect("seen"),
        "use refreshed it"
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(!store.has_seen(&id("e"), "https://u/").await.expect("seen"));
    assert!(store.transcript(&id("e")).await.expect("read").is_none());
    assert_eq!(store.active().await.expect("active"), 0);
}

/// Two server processes on one Redis serve one episode; sessions survive Redis's restart; with
/// Redis down, requests that need a session fail closed, quickly, and recover by themselves.
#[test]
fn two_servers_share_sessions_through_redis() {
    let Some(index) = samples_index() else { return };
    let Some(mut redis) = Redis::start() else {
        return;
    };
    let url = redis.url();
    let flags = ["--sessions", url.as_str(), "--sessions-timeout-ms", "500"];
    let one = spawn_server(index, &flags);
    let two = spawn_server(index, &flags);

    let search = json!({"query": "Anarchism", "k": 3, "session": "episode-1"});
    let (status, found) = post(&one.url, "/v1/search", search.clone());
    assert_eq!(status, 200, "{found}");
    let page_url = found["results"][0]["url"]
        .as_str()
        .expect("url")
        .to_string();
    let visit = json!({"url": page_url, "session": "episode-1"});
    let (status, page) = post(&two.url, "/v1/visit", visit.clone());
    assert_eq!(
        status, 200,
        "the other server lets the episode visit: {page}"
    );
    // Another episode was never shown it, on either server.
    let (status, refused) = post(
        &two.url,
        "/v1/visit",
        json!({"url": page_url, "session": "episode-2"}),
    );
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (403, Some("url_not_seen"))
    );
    let (_, from_one) = get(&one.url, "/v1/sessions/episode-1");
    let (_, from_two) = get(&two.url, "/v1/sessions/episode-1");
    assert_eq!(from_one, from_two);
    assert_eq!(from_one["events"].as_array().map(Vec::len), Some(2));

    // A restarted Redis reloads its append-only file: the episode still unlocks its URL.
    redis.restart();
    let (status, again) = post(&one.url, "/v1/visit", visit.clone());
    assert_eq!(status, 200, "after the restart: {again}");

    // Redis down: fail closed within the deadline, on search and visit alike; a search without
    // a session needs no store and still answers.
    redis.stop();
    for (path, body) in [("/v1/search", &search), ("/v1/visit", &visit)] {
        let started = Instant::now();
        let (status, body) = post(&two.url, path, body.clone());
        let took = started.elapsed();
        assert_eq!(status, 503, "{path}: {body}");
        assert_eq!(body["error"]["code"], "session_store_unavailable", "{body}");
        eprintln!("{path} with Redis down answered 503 in {took:?}");
        assert!(took < Duration::from_secs(1), "{path} took {took:?}");
    }
    let (status, _) = post(&two.url, "/v1/search", json!({"query": "Anarchism"}));
    assert_eq!(status, 200);
    let (status, body) = get(&two.url, "/v1/sessions/episode-1");
    assert_eq!(status, 503, "{body}");
    // Ending an MCP session says so in JSON-RPC, with the stable code in its header.
    let mut ended = support::agent()
        .delete(format!("{}/mcp", two.url))
        .header("Mcp-Session-Id", "episode-1")
        .call()
        .expect("request");
    assert_eq!(ended.status().as_u16(), 503);
    assert_eq!(
        ended
            .headers()
            .get("x-stillweb-error")
            .and_then(|v| v.to_str().ok()),
        Some("session_store_unavailable")
    );
    let body: Value = ended.body_mut().read_json().expect("json-rpc error");
    assert_eq!(body["error"]["code"], -32603, "{body}");

    // Back: both servers reconnect by themselves.
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = post(&two.url, "/v1/visit", visit.clone());
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery after Redis came back: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _) = post(&one.url, "/v1/search", search);
    assert_eq!(status, 200);
}
