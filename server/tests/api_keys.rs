//! A real server started with `--api-keys`: every protected endpoint answers 401 in its dialect's
//! shape without a key, health checks stay open, sessions are apart per key (in memory and in a
//! real Redis), a key over its rate gets 429 with `Retry-After`, `/metrics` can have its own key,
//! and the real client libraries send their keys where the server looks for them.

mod support;

use std::path::PathBuf;
use std::process::Command;

use axum::http::StatusCode;
use serde_json::{Value, json};
use stillweb_server::ROUTES;
use stillweb_server::error::ErrorCode;
use stillweb_server::routes::dialect::Dialect;
use stillweb_server::routes::error_layer::errors;
use stillweb_test_support::Redis;
use support::{Server, agent, client_python, samples_index, spawn_server};

const KEY_A: &str = "key-a-0123456789abcdef";
const KEY_B: &str = "key-b-0123456789abcdef";
const KEY_SLOW: &str = "key-slow-0123456789abcdef";
const KEY_SCRAPE: &str = "key-scrape-0123456789abcdef";
const KEY_OPERATOR: &str = "key-operator-0123456789abcdef";
const ANARCHISM: &str = "https://en.wikipedia.org/wiki/Anarchism";

/// A key file with two client keys, a slow one and a metrics key; kept while the server runs.
fn key_file(with_scraper: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("keys.toml");
    let mut text = format!(
        "[[key]]\nname = \"team-a\"\nkey = \"{KEY_A}\"\n\n[[key]]\nname = \"team-b\"\nkey = \"{KEY_B}\"\n\n[[key]]\nname = \"slow\"\nkey = \"{KEY_SLOW}\"\nrate = 1\nburst = 2\n\n[[key]]\nname = \"ops\"\nkey = \"{KEY_OPERATOR}\"\nrole = \"operator\"\n"
    );
    if with_scraper {
        text.push_str(&format!(
            "\n[[key]]\nname = \"prometheus\"\nkey = \"{KEY_SCRAPE}\"\nrole = \"metrics\"\n"
        ));
    }
    std::fs::write(&path, text).expect("write keys");
    (dir, path)
}

fn keyed_server(
    index: &std::path::Path,
    with_scraper: bool,
    extra: &[&str],
) -> (Server, tempfile::TempDir) {
    let (dir, path) = key_file(with_scraper);
    let mut args = vec!["--api-keys", path.to_str().expect("path")];
    args.extend_from_slice(extra);
    (spawn_server(index, &args), dir)
}

/// A request with optional bearer key: status, headers, JSON body (null if none).
fn request(
    base: &str,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (u16, axum::http::HeaderMap, Value) {
    let url = format!("{base}{path}");
    let agent = agent();
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut response = match (method, body) {
        ("GET", _) => {
            let mut r = agent.get(&url);
            if let Some(a) = &auth {
                r = r.header("authorization", a);
            }
            r.call()
        }
        ("DELETE", _) => {
            let mut r = agent.delete(&url);
            if let Some(a) = &auth {
                r = r.header("authorization", a);
            }
            r.call()
        }
        (_, body) => {
            let mut r = agent.post(&url);
            if let Some(a) = &auth {
                r = r.header("authorization", a);
            }
            r.send_json(body.unwrap_or(json!({})))
        }
    }
    .expect("request");
    let status = response.status().as_u16();
    let mut headers = axum::http::HeaderMap::new();
    for (name, value) in response.headers() {
        if let (Ok(n), Ok(v)) = (
            axum::http::HeaderName::from_bytes(name.as_str().as_bytes()),
            axum::http::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.insert(n, v);
        }
    }
    let body = response.body_mut().read_json().unwrap_or(Value::Null);
    (status, headers, body)
}

/// The keys of a JSON object, nested one level (the shape of an error body, not its values).
fn shape(v: &Value) -> Vec<String> {
    let mut keys = Vec::new();
    if let Some(map) = v.as_object() {
        for (k, inner) in map {
            keys.push(k.clone());
            if let Some(inner) = inner.as_object() {
                keys.extend(inner.keys().map(|i| format!("{k}.{i}")));
            }
        }
    }
    keys.sort();
    keys
}

#[test]
fn every_protected_endpoint_wants_a_key_in_its_dialect() {
    let Some(index) = samples_index() else { return };
    let (server, _keys) = keyed_server(index, true, &[]);
    let base = &server.url;
    for (method, path) in ROUTES {
        let path = path
            .replace("{id}", "e1")
            .replace("{url}", "https://en.wikipedia.org/wiki/Anarchism");
        for path in [path.clone(), format!("/s/e1{path}")] {
            let (status, headers, body) = request(base, method, &path, None, None);
            // Probes and the console's files (which hold no data) need no key.
            if path.ends_with("/healthz") || path.ends_with("/readyz") || path.contains("/ui") {
                if !path.starts_with("/s/") {
                    assert_eq!(status, 200, "{method} {path} needs no key");
                }
                continue;
            }
            if path.starts_with("/s/")
                && ["/metrics", "/info", "/rerank", "/admin/reload"]
                    .iter()
                    .any(|p| path.ends_with(p))
            {
                continue; // not served under a session prefix
            }
            assert_eq!(status, 401, "{method} {path} without a key: {body}");
            assert_eq!(
                headers
                    .get("x-stillweb-error")
                    .and_then(|v| v.to_str().ok()),
                Some("unauthorized"),
                "{method} {path}"
            );
            assert!(headers.contains_key("www-authenticate"), "{method} {path}");
            let dialect = Dialect::of(&path);
            let expected =
                errors(dialect).body(ErrorCode::Unauthorized, StatusCode::UNAUTHORIZED, "message");
            assert_eq!(shape(&body), shape(&expected), "{method} {path}: {body}");
            // A key the server does not know is the same refusal.
            let (status, _, _) =
                request(base, method, &path, Some("an-unknown-key-0123456789"), None);
            assert_eq!(status, 401, "{method} {path} with an unknown key");
        }
    }
    let (status, _, info) = request(base, "GET", "/info", Some(KEY_A), None);
    assert_eq!(status, 200);
    assert_eq!(info["api_keys"], json!({"keys": 5}), "{info}");
    assert!(!info.to_string().contains(KEY_A), "/info shows no secret");
}

/// Key B never sees key A's `e1`: no visit of what only A's `e1` was shown, no transcript, no
/// delete; B's own `e1` is a session of its own. Through each session store.
fn sessions_stay_apart(base: &str) {
    let (status, _, found) = request(
        base,
        "POST",
        "/v1/search",
        Some(KEY_A),
        Some(json!({"query": "Anarchism", "session": "e1", "k": 3})),
    );
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["results"][0]["url"], ANARCHISM);
    let visit = json!({"url": ANARCHISM, "session": "e1"});
    let (status, _, body) = request(base, "POST", "/v1/visit", Some(KEY_B), Some(visit.clone()));
    assert_eq!(status, 403, "key B visits what only A's e1 saw: {body}");
    assert_eq!(body["error"]["code"], "url_not_seen");
    for (method, expect) in [("GET", 404), ("DELETE", 404)] {
        let (status, _, body) = request(base, method, "/v1/sessions/e1", Some(KEY_B), None);
        assert_eq!(status, expect, "{method} A's e1 with key B: {body}");
    }
    // B's own e1, shown other pages, still cannot visit A's.
    let (status, _, _) = request(
        base,
        "POST",
        "/s/e1/v1/search",
        Some(KEY_B),
        Some(json!({"query": "Roman empire emperors", "k": 3})),
    );
    assert_eq!(status, 200);
    let (status, _, _) = request(base, "POST", "/v1/visit", Some(KEY_B), Some(visit.clone()));
    assert_eq!(status, 403);
    let (_, _, b_transcript) = request(base, "GET", "/v1/sessions/e1", Some(KEY_B), None);
    assert_eq!(b_transcript["events"][0]["query"], "Roman empire emperors");
    // A's e1 is untouched: it visits, and its transcript is its own.
    let (status, _, page) = request(base, "POST", "/v1/visit", Some(KEY_A), Some(visit));
    assert_eq!(status, 200, "{page}");
    let (_, _, a_transcript) = request(base, "GET", "/v1/sessions/e1", Some(KEY_A), None);
    assert_eq!(a_transcript["session"], "e1");
    let events = a_transcript["events"].as_array().expect("events");
    assert_eq!(events.len(), 2, "{a_transcript}");
    assert_eq!(events[0]["query"], "Anarchism");
    assert_eq!(events[1]["outcome"], "ok");
    // B ending its e1 leaves A's.
    let (status, _, _) = request(base, "DELETE", "/v1/sessions/e1", Some(KEY_B), None);
    assert_eq!(status, 204);
    let (status, _, _) = request(base, "GET", "/v1/sessions/e1", Some(KEY_A), None);
    assert_eq!(status, 200);
}

#[test]
fn sessions_are_namespaced_by_key_in_memory() {
    let Some(index) = samples_index() else { return };
    let (server, _keys) = keyed_server(index, false, &[]);
    sessions_stay_apart(&server.url);
}

#[test]
fn sessions_are_namespaced_by_key_in_redis() {
    let Some(index) = samples_index() else { return };
    let Some(redis) = Redis::start() else { return };
    let (server, _keys) = keyed_server(index, false, &["--sessions", &redis.url()]);
    sessions_stay_apart(&server.url);
    // Each key's e1 under its own name (the key layout of session/redis.rs).
    let keys = Command::new("redis-cli")
        .args([
            "-p",
            &redis.port.to_string(),
            "--scan",
            "--pattern",
            "stillweb:*:meta",
        ])
        .output()
        .expect("redis-cli");
    let keys = String::from_utf8_lossy(&keys.stdout);
    assert!(keys.contains("stillweb:{team-a/e1}:meta"), "{keys}");
}

#[test]
fn a_key_over_its_rate_gets_429_with_retry_after() {
    let Some(index) = samples_index() else { return };
    let (server, _keys) = keyed_server(index, false, &[]);
    let statuses: Vec<(u16, axum::http::HeaderMap, Value)> = (0..4)
        .map(|_| request(&server.url, "GET", "/info", Some(KEY_SLOW), None))
        .collect();
    assert_eq!(statuses[0].0, 200);
    assert_eq!(statuses[1].0, 200);
    let (status, headers, body) = &statuses[2];
    assert_eq!(*status, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited");
    let wait: u64 = headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=2).contains(&wait), "Retry-After {wait}");
    // Other keys are not slowed by it.
    assert_eq!(
        request(&server.url, "GET", "/info", Some(KEY_A), None).0,
        200
    );
    std::thread::sleep(std::time::Duration::from_secs(wait));
    assert_eq!(
        request(&server.url, "GET", "/info", Some(KEY_SLOW), None).0,
        200
    );
}

#[test]
fn metrics_can_have_a_key_of_its_own() {
    let Some(index) = samples_index() else { return };
    let (server, _keys) = keyed_server(index, true, &[]);
    let base = &server.url;
    let (status, _, _) = request(
        base,
        "POST",
        "/v1/search",
        Some(KEY_A),
        Some(json!({"query": "Anarchism"})),
    );
    assert_eq!(status, 200);
    let (status, _, body) = request(base, "GET", "/metrics", Some(KEY_A), None);
    assert_eq!(status, 403, "a client key scrapes: {body}");
    assert_eq!(body["error"]["code"], "forbidden");
    let (status, _, body) = request(
        base,
        "POST",
        "/v1/search",
        Some(KEY_SCRAPE),
        Some(json!({"query": "x"})),
    );
    assert_eq!(status, 403, "the scraper's key searches: {body}");
    let mut response = agent()
        .get(format!("{base}/metrics"))
        .header("authorization", format!("Bearer {KEY_SCRAPE}"))
        .call()
        .expect("metrics");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.body_mut().read_to_string().expect("text");
    assert!(
        text.contains("stillweb_key_requests_total{key=\"team-a\"}"),
        "{text}"
    );
    assert!(
        text.contains("stillweb_rejected_requests_total{reason=\"forbidden\"} 2"),
        "{text}"
    );
}

#[test]
fn real_client_libraries_send_their_keys() {
    let Some(index) = samples_index() else { return };
    let Some(python) = client_python() else {
        return;
    };
    let (server, _keys) = keyed_server(index, false, &[]);
    support::client_checks_pass(
        &python,
        "keyed_clients.py",
        &[&server.url, KEY_A, KEY_B, KEY_SLOW],
    );
}

#[test]
fn a_bad_key_file_stops_the_server_with_what_to_fix() {
    let stderr = support::refused_at_start(
        "--api-keys",
        "keys.toml",
        "[[key]]\nname = \"a\"\nkey = \"short\"\n",
    );
    assert!(
        stderr.contains("keys.toml") && stderr.contains("openssl rand"),
        "{stderr}"
    );
}

/// An operator key lists every key's sessions (each with its key) and reads one with `?key=`;
/// a client key lists only its own and may not ask for another's.
#[test]
fn an_operator_key_sees_every_keys_sessions() {
    let Some(index) = samples_index() else { return };
    let (server, _keys) = keyed_server(index, false, &[]);
    let base = &server.url;
    for (key, session) in [(KEY_A, "a-1"), (KEY_B, "b-1")] {
        let body = json!({"query": "Anarchism", "session": session});
        assert_eq!(
            request(base, "POST", "/v1/search", Some(key), Some(body)).0,
            200
        );
    }
    let (status, _, mine) = request(base, "GET", "/v1/sessions", Some(KEY_A), None);
    assert_eq!(status, 200);
    assert_eq!(
        mine["sessions"],
        json!([{"session": "a-1", "last_used": mine["sessions"][0]["last_used"]}])
    );
    let (status, _, all) = request(base, "GET", "/v1/sessions", Some(KEY_OPERATOR), None);
    assert_eq!(status, 200);
    let listed: Vec<(String, String)> = all["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| {
            (
                s["key"].as_str().unwrap_or("").to_string(),
                s["session"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(listed.contains(&("team-a".into(), "a-1".into())), "{all}");
    assert!(listed.contains(&("team-b".into(), "b-1".into())), "{all}");
    let (status, _, transcript) = request(
        base,
        "GET",
        "/v1/sessions/b-1?key=team-b",
        Some(KEY_OPERATOR),
        None,
    );
    assert_eq!(status, 200, "{transcript}");
    assert_eq!(transcript["session"], "b-1");
    let (status, _, refused) = request(
        base,
        "GET",
        "/v1/sessions/b-1?key=team-b",
        Some(KEY_A),
        None,
    );
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "forbidden");
    // A `key` that cannot be a key's name is refused as such.
    let (status, _, bad) = request(
        base,
        "GET",
        "/v1/sessions/b-1?key=a%2Fb",
        Some(KEY_OPERATOR),
        None,
    );
    assert_eq!(status, 422, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("API key's name")),
        "{bad}"
    );
    // A client naming its own key is just reading its own session.
    let (status, _, _) = request(
        base,
        "GET",
        "/v1/sessions/a-1?key=team-a",
        Some(KEY_A),
        None,
    );
    assert_eq!(status, 200);
    // The operator also scrapes metrics.
    assert_eq!(
        request(base, "GET", "/metrics", Some(KEY_OPERATOR), None).0,
        200
    );
}
