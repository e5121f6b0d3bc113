//! The API over a real index built from the shared samples: in process through `app()` for error
//! bodies and session rules, and as the real binary on a loopback port for the end-to-end flow.

mod support;

use std::process::Command;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use stillweb_server::{AppState, app};
use support::{agent, call, call_with, code, qwen3_fixture, samples_index, spawn_server, state};
use tower::ServiceExt;

#[tokio::test]
async fn search_then_visit_within_a_session() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let (status, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "Anarchism", "session": "ep-1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let results = body["results"].as_array().expect("results");
    assert_eq!(results[0]["url"], "https://en.wikipedia.org/wiki/Anarchism");
    assert_eq!(results[0]["rank"], 1);
    assert!(!results[0]["snippet"].as_str().expect("snippet").is_empty());
    assert!(
        results[0]["snippet"]
            .as_str()
            .expect("snippet")
            .chars()
            .count()
            <= 500
    );
    assert_eq!(body["index"], s.build_id());

    // Same session, URL spelled differently: allowed, full clean text.
    let (status, page) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": "http://EN.wikipedia.org/wiki/Anarchism/#History", "session": "ep-1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let text = page["text"].as_str().expect("text");
    assert!(text.len() > 20_000);
    for markup in ["{{", "[[", "<ref", "{|"] {
        assert!(!text.contains(markup), "visit text contains {markup}");
    }
    assert_eq!(page["title"], "Anarchism");

    // Another session never saw it.
    let (status, body) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": "https://en.wikipedia.org/wiki/Anarchism", "session": "ep-2"})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::FORBIDDEN, "url_not_seen")
    );

    // Not in the corpus at all.
    let (status, body) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": "https://example.org/nothing", "session": "ep-1"})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "url_not_found")
    );

    // No session.
    let (status, body) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": "https://en.wikipedia.org/wiki/Anarchism"})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "session_required")
    );
}

#[tokio::test]
async fn invalid_requests_get_specific_errors() {
    let Some(index) = samples_index() else { return };
    let s = state(
        index,
        &["--max-query-chars", "50", "--max-body-bytes", "2048"],
    );
    let cases = [
        (
            json!({"query": "x", "k": 0}),
            "`k` must be between 1 and 20, got 0",
        ),
        (
            json!({"query": "x", "k": 25}),
            "`k` must be between 1 and 20, got 25",
        ),
        (json!({"query": "   "}), "`query` is empty"),
        (
            json!({"query": "y".repeat(51)}),
            "longer than 50 characters",
        ),
        (
            json!({"query": "x", "session": "bad id"}),
            "`session` must be",
        ),
        (
            json!({"query": "x", "extra": true}),
            "unknown field `extra`",
        ),
        (json!({"k": 3}), "missing field `query`"),
    ];
    for (body, expected) in cases {
        let (status, response) = call(&s, "POST", "/v1/search", Some(body.clone())).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(code(&response), "invalid_request");
        let message = response["error"]["message"].as_str().expect("message");
        assert!(message.contains(expected), "{body}: {message}");
    }
    let (status, response) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "z".repeat(4000)})),
    )
    .await;
    assert_eq!(
        (status, code(&response)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    let (status, response) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": "not a url", "session": "a"})),
    )
    .await;
    assert_eq!(
        (status, code(&response)),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request")
    );
    let (status, response) = call(&s, "GET", "/v2/nothing", None).await;
    assert_eq!(
        (status, code(&response)),
        (StatusCode::NOT_FOUND, "route_not_found")
    );
}

#[tokio::test]
async fn identical_searches_are_byte_identical() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let query = json!({"query": "history of the Roman empire and its emperors", "k": 20});
    let (_, first) = call(&s, "POST", "/v1/search", Some(query.clone())).await;
    assert!(first["results"].as_array().expect("results").len() > 5);
    for _ in 0..3 {
        let (_, again) = call(&s, "POST", "/v1/search", Some(query.clone())).await;
        assert_eq!(again.to_string(), first.to_string());
    }
}

#[test]
fn real_server_on_loopback_serves_and_shuts_down_gracefully() {
    let Some(index) = samples_index() else { return };
    let mut server = spawn_server(index, &[]);
    let base = server.url.clone();
    let agent = agent();
    let mut ready = agent.get(&format!("{base}/readyz")).call().expect("readyz");
    assert_eq!(ready.status(), 200);
    assert!(ready.body_mut().read_json::<Value>().expect("json")["index"].is_string());

    let mut found = agent
        .post(&format!("{base}/v1/search"))
        .send_json(json!({"query": "Anarchism", "k": 5, "session": "loop"}))
        .expect("search");
    assert_eq!(found.status(), 200);
    let body: Value = found.body_mut().read_json().expect("json");
    assert_eq!(
        body["results"][0]["url"],
        "https://en.wikipedia.org/wiki/Anarchism"
    );

    let mut visit = agent
        .post(&format!("{base}/v1/visit"))
        .send_json(json!({"url": "https://en.wikipedia.org/wiki/Anarchism", "session": "loop"}))
        .expect("visit");
    assert_eq!(visit.status(), 200);
    assert!(
        visit.body_mut().read_json::<Value>().expect("json")["text"]
            .as_str()
            .expect("text")
            .len()
            > 20_000
    );

    let mut refused = agent
        .post(&format!("{base}/v1/visit"))
        .send_json(json!({"url": "https://en.wikipedia.org/wiki/Anarchism", "session": "other"}))
        .expect("visit");
    assert_eq!(refused.status(), 403);
    assert_eq!(
        refused.body_mut().read_json::<Value>().expect("json")["error"]["code"],
        "url_not_seen"
    );

    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = server.child.wait().expect("wait");
    assert!(exit.success(), "server exited with {exit}");
}

#[test]
fn server_refuses_a_missing_index_with_a_clear_message() {
    let output = Command::new(env!("CARGO_BIN_EXE_stillweb-server"))
        .args([
            "--index",
            "/nonexistent/stillweb-index",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "error")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no index at /nonexistent/stillweb-index")
            && stderr.contains("stillweb-indexer build"),
        "{stderr}"
    );
}

#[tokio::test]
async fn reranking_without_a_reranker_is_refused() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let (status, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "Anarchism"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["reranked"], false);
    let (status, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "Anarchism", "rerank": true})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "rerank_unavailable")
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("--reranker")
    );
}

/// The Qwen3-Reranker path end to end in the real binary, on the random-weight fixture: the
/// prompt, tokenizer, padding and read-out run for real; the order it produces means nothing.
#[test]
fn real_server_reranks_with_the_qwen3_fixture() {
    let Some(index) = samples_index() else { return };
    let Some(fixture) = qwen3_fixture() else {
        return;
    };
    let mut server = spawn_server(
        index,
        &[
            "--reranker",
            fixture.to_str().expect("path"),
            "--rerank-pool",
            "12",
        ],
    );
    let base = server.url.clone();
    let agent = agent();
    let search = |body: Value| -> (u16, Value) {
        let mut response = agent
            .post(&format!("{base}/v1/search"))
            .send_json(body)
            .expect("search");
        (
            response.status().as_u16(),
            response.body_mut().read_json().expect("json"),
        )
    };
    let urls = |body: &Value| -> Vec<String> {
        body["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["url"].as_str().expect("url").to_string())
            .collect()
    };
    let query = "anarchist political philosophy and its history";
    let (status, reranked) = search(json!({"query": query, "k": 20}));
    assert_eq!(status, 200, "{reranked}");
    assert_eq!(reranked["reranked"], true);
    let (_, plain) = search(json!({"query": query, "k": 20, "rerank": false}));
    assert_eq!(plain["reranked"], false);
    // Reranking permutes the pooled pages (12 chunks, at most 2 a page: 6 to 12 pages) and leaves
    // the rest.
    let (mut a, mut b) = (urls(&reranked), urls(&plain));
    assert_eq!(a.len(), 20);
    assert_eq!(&a[12..], &b[12..], "pages past the pool keep their order");
    a.sort();
    b.sort();
    assert_eq!(a, b, "reranking reorders, it does not add or drop pages");
    // Deterministic, and the pool size is a per-request choice within the server's limit.
    let (_, again) = search(json!({"query": query, "k": 20}));
    assert_eq!(again.to_string(), reranked.to_string());
    let (status, small) = search(json!({"query": query, "k": 5, "rerank_pool": 2}));
    assert_eq!((status, small["reranked"].as_bool()), (200, Some(true)));
    let (status, refused) = search(json!({"query": query, "rerank_pool": 101}));
    assert_eq!(status, 422);
    assert!(
        refused["error"]["message"]
            .as_str()
            .expect("message")
            .contains("`rerank_pool` must be between 0 (no reranking) and 100")
    );

    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert!(server.child.wait().expect("wait").success());
}

#[test]
fn server_refuses_a_reranker_that_is_not_one() {
    let Some(index) = samples_index() else { return };
    let embedder = stillweb_models::config::default_embedder_dir();
    if !support::fetched(&embedder.join("model.toml"), "models/fetch") {
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_stillweb-server"))
        .args([
            "--index",
            index.to_str().expect("path"),
            "--listen",
            "127.0.0.1:0",
            "--reranker",
            embedder.to_str().expect("path"),
        ])
        .env("RUST_LOG", "error")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("loading the reranker from")
            && stderr.contains("expected cross-encoder or qwen3-reranker"),
        "{stderr}"
    );
}

/// Result URLs of a search, recorded for `session` so that the test can visit them.
async fn result_urls(s: &AppState, query: &str, session: &str) -> (Vec<String>, Value) {
    let (status, body) = call(
        s,
        "POST",
        "/v1/search",
        Some(json!({"query": query, "k": 10, "session": session})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    let urls = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["url"].as_str().expect("url").to_string())
        .collect();
    (urls, body)
}

async fn page_text(s: &AppState, url: &str, session: &str) -> String {
    let (status, page) = call(
        s,
        "POST",
        "/v1/visit",
        Some(json!({"url": url, "session": session})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{url}");
    format!(
        "{}\n{}",
        page["title"].as_str().unwrap_or_default(),
        page["text"].as_str().unwrap_or_default()
    )
    .to_lowercase()
}

/// Web operators on the samples index (the fabricated pages are near-duplicates that differ in
/// one fact, which makes phrases and exclusions observable).
#[tokio::test]
async fn web_query_operators() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let gold = "https://techbrief.example/2022/news-drekev-labs-program-update-0";

    // "Biakol fellowship" occurs in exactly one page: it is the only result.
    let (urls, body) = result_urls(&s, r#""Biakol fellowship" apprentices training"#, "q1").await;
    assert_eq!(urls, [gold], "{body}");
    assert_eq!(body["relaxed"], false);

    // A phrase no page contains is relaxed to words, and the response says so.
    let (urls, body) = result_urls(&s, r#""Drekev Labs founded the Zzyzx fellowship""#, "q2").await;
    assert_eq!(body["relaxed"], true);
    assert!(!urls.is_empty());

    // OR between phrases: pages with either; five pages say "Maban fellowship".
    let (urls, _) = result_urls(&s, r#""Biakol fellowship" OR "Maban fellowship""#, "q3").await;
    assert_eq!(urls.len(), 6, "{urls:?}");
    for url in &urls {
        let text = page_text(&s, url, "q3").await;
        assert!(
            text.contains("biakol fellowship") || text.contains("maban fellowship"),
            "{url}"
        );
    }

    // -term drops every page that mentions it.
    let (urls, _) = result_urls(&s, "Drekev Labs fellowship -Brno", "q4").await;
    assert!(!urls.is_empty());
    for url in &urls {
        assert!(!page_text(&s, url, "q4").await.contains("brno"), "{url}");
    }
    assert!(page_text(&s, &urls[0], "q4").await.contains("drekev"));

    // site: matches the host and its subdomains; -site: excludes them.
    let (urls, _) = result_urls(&s, "Drekev Labs site:techbrief.example", "q5").await;
    assert!(!urls.is_empty());
    assert!(
        urls.iter()
            .all(|u| u.starts_with("https://techbrief.example/")),
        "{urls:?}"
    );
    let (urls, _) = result_urls(&s, "anarchism site:wikipedia.org", "q6").await;
    assert!(!urls.is_empty());
    assert!(
        urls.iter()
            .all(|u| u.starts_with("https://en.wikipedia.org/")),
        "{urls:?}"
    );
    let (urls, _) = result_urls(&s, "anarchism -site:wikipedia.org", "q7").await;
    assert!(
        urls.iter().all(|u| !u.contains("wikipedia.org")),
        "{urls:?}"
    );

    // Operators only, no words: nothing to rank.
    let (urls, _) = result_urls(&s, "site:wikipedia.org", "q8").await;
    assert!(urls.is_empty());
}

/// The session may come as a body field, a header or a path prefix, on every endpoint; the
/// transcript records what happened, and ending the session forgets it.
#[tokio::test]
async fn sessions_by_body_header_or_path_with_transcripts() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let anarchism = "https://en.wikipedia.org/wiki/Anarchism";
    let header = [("x-session-id", "by-header")];

    // Header.
    let (status, body) = call_with(
        &s,
        "POST",
        "/v1/search",
        &header,
        Some(json!({"query": "Anarchism", "k": 3})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["results"][0]["url"], anarchism);
    let (status, _) = call_with(
        &s,
        "POST",
        "/v1/visit",
        &header,
        Some(json!({"url": anarchism})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // The same session by body field sees the same URLs.
    let (status, _) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": anarchism, "session": "by-header"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // Path prefix: the base URL is /s/by-path.
    let (status, _) = call(
        &s,
        "POST",
        "/s/by-path/v1/search",
        Some(json!({"query": "Anarchism", "k": 3})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        &s,
        "POST",
        "/s/by-path/v1/visit",
        Some(json!({"url": anarchism})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(
        &s,
        "POST",
        "/s/other/v1/visit",
        Some(json!({"url": anarchism})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::FORBIDDEN, "url_not_seen")
    );

    // Two different sessions in one request.
    let (status, body) = call_with(
        &s,
        "POST",
        "/s/by-path/v1/visit",
        &header,
        Some(json!({"url": anarchism})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("conflicting sessions")
    );

    // Transcript: the search with its URLs, then each visit with its outcome.
    let (status, transcript) = call(&s, "GET", "/v1/sessions/by-path", None).await;
    assert_eq!(status, StatusCode::OK, "{transcript}");
    let events = transcript["events"].as_array().expect("events");
    assert_eq!(events.len(), 2, "{transcript}");
    assert_eq!(events[0]["type"], "search");
    assert_eq!(events[0]["query"], "Anarchism");
    assert_eq!(events[0]["urls"][0], anarchism);
    assert_eq!(
        (events[1]["type"].as_str(), events[1]["outcome"].as_str()),
        (Some("visit"), Some("ok"))
    );
    assert!(events[0]["at"].as_str().expect("at").ends_with('Z'));
    let (_, same) = call(&s, "GET", "/s/x/v1/sessions/by-path", None).await;
    assert_eq!(same["events"], transcript["events"]);

    // Ending the session forgets it.
    let (status, _) = call(&s, "DELETE", "/v1/sessions/by-path", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = call(&s, "GET", "/v1/sessions/by-path", None).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "session_not_found")
    );
    let (status, body) = call(
        &s,
        "POST",
        "/s/by-path/v1/visit",
        Some(json!({"url": anarchism})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::FORBIDDEN, "url_not_seen")
    );
    let (status, _) = call(&s, "DELETE", "/v1/sessions/by-path", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = call(&s, "GET", "/v1/sessions/bad%20id", None).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request")
    );
}

#[tokio::test]
async fn batch_answers_each_query_in_order() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &["--max-batch", "4"]);
    let (status, body) = call(
        &s,
        "POST",
        "/v1/search/batch",
        Some(json!({"session": "batch", "queries": [
            {"query": "Anarchism", "k": 2},
            {"query": "x", "k": 99},
            {"query": "\"Biakol fellowship\""}
        ]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let responses = body["responses"].as_array().expect("responses");
    assert_eq!(responses.len(), 3);
    assert_eq!(
        responses[0]["results"][0]["url"],
        "https://en.wikipedia.org/wiki/Anarchism"
    );
    assert_eq!(responses[0]["results"].as_array().expect("r").len(), 2);
    assert_eq!(code(&responses[1]), "invalid_request");
    assert_eq!(
        responses[2]["results"][0]["url"],
        "https://techbrief.example/2022/news-drekev-labs-program-update-0"
    );
    // Identical to the single searches, and the session saw every result.
    let (_, single) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "Anarchism", "k": 2})),
    )
    .await;
    assert_eq!(single, responses[0]);
    let (status, _) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": "https://techbrief.example/2022/news-drekev-labs-program-update-0", "session": "batch"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, transcript) = call(&s, "GET", "/v1/sessions/batch", None).await;
    assert_eq!(
        transcript["events"].as_array().expect("events").len(),
        3,
        "{transcript}"
    );

    let too_many = json!({"queries": vec![json!({"query": "a"}); 5]});
    let (status, body) = call(&s, "POST", "/v1/search/batch", Some(too_many)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("m")
            .contains("1 to 4 queries")
    );
}

#[tokio::test]
async fn metrics_info_request_ids_timing_and_caches() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let search = |id: Option<&'static str>| {
        let mut request = Request::builder()
            .method("POST")
            .uri("/v1/search")
            .header("content-type", "application/json");
        if let Some(id) = id {
            request = request.header("x-request-id", id);
        }
        request
            .body(Body::from(
                json!({"query": "Roman emperors", "k": 5}).to_string(),
            ))
            .expect("request")
    };
    let first = app(s.clone())
        .oneshot(search(Some("req-42")))
        .await
        .expect("response");
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["x-request-id"], "req-42");
    let timing = first.headers()["server-timing"]
        .to_str()
        .expect("timing")
        .to_string();
    for stage in [
        "embed;dur=",
        "candidates;dur=",
        "chunks;dur=",
        "rerank;dur=",
        "fetch;dur=",
        "total;dur=",
    ] {
        assert!(timing.contains(stage), "{timing}");
    }
    let first_body = axum::body::to_bytes(first.into_body(), 1 << 20)
        .await
        .expect("body");
    // The repeat comes from the result cache, byte-identical, and says so.
    let again = app(s.clone())
        .oneshot(search(None))
        .await
        .expect("response");
    assert!(!again.headers()["x-request-id"].is_empty());
    // An unrouted path gets one too, in its dialect's error shape.
    let (status, headers, _) = support::send(
        &s,
        Request::builder()
            .uri("/nope")
            .header("x-request-id", "req-404")
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(headers["x-request-id"], "req-404");
    assert!(
        again.headers()["server-timing"]
            .to_str()
            .expect("t")
            .contains("cache;desc=\"hit\"")
    );
    let again_body = axum::body::to_bytes(again.into_body(), 1 << 20)
        .await
        .expect("body");
    assert_eq!(first_body, again_body);

    let response = app(s.clone())
        .oneshot(
            Request::builder()
                .uri("/metrics")
                .body(Body::empty())
                .expect("r"),
        )
        .await
        .expect("metrics");
    assert_eq!(response.status(), StatusCode::OK);
    let text = String::from_utf8(
        axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body")
            .to_vec(),
    )
    .expect("utf8");
    for line in [
        "stillweb_http_requests_total{method=\"POST\",route=\"/v1/search\",status=\"200\"} 2",
        "stillweb_search_stage_seconds_count{stage=\"candidates\"} 1",
        "stillweb_search_stage_seconds_count{stage=\"chunks\"} 1",
        "stillweb_cache_lookups_total{cache=\"results\",result=\"hit\"} 1",
        "stillweb_cache_lookups_total{cache=\"results\",result=\"miss\"} 1",
        "stillweb_active_sessions 0",
    ] {
        assert!(text.contains(line), "missing `{line}` in\n{text}");
    }

    let (status, info) = call(&s, "GET", "/info", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(info["index"]["build_id"], s.build_id());
    assert!(info["index"]["documents"].as_u64().expect("documents") > 2000);
    assert_eq!(info["models"]["execution_provider"], "cpu");
    assert_eq!(info["models"]["reranker"], Value::Null);
    assert_eq!(info["limits"]["max_k"], 20);
}

/// More concurrent requests than --max-in-flight: the excess gets 429 with Retry-After at once
/// (no timeouts, no crash), and the server answers normally afterwards.
#[test]
fn overload_is_refused_with_429_and_the_server_recovers() {
    let Some(index) = samples_index() else { return };
    let Some(fixture) = qwen3_fixture() else {
        return;
    };
    // A slow search: the reranker over a 100-chunk pool, one at a time.
    let _server = spawn_server(
        index,
        &[
            "--reranker",
            fixture.to_str().expect("path"),
            "--rerank-pool",
            "100",
            "--max-in-flight",
            "2",
            "--result-cache-entries",
            "0",
        ],
    );
    let base = _server.url.clone();
    let statuses: Vec<(u16, Option<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..24)
            .map(|i| {
                let base = base.clone();
                scope.spawn(move || {
                    let agent = agent();
                    let response = agent
                        .post(&format!("{base}/v1/search"))
                        .send_json(
                            json!({"query": format!("history of the Roman empire {i}"), "k": 20}),
                        )
                        .expect("request");
                    (
                        response.status().as_u16(),
                        response
                            .headers()
                            .get("retry-after")
                            .map(|v| v.to_str().unwrap_or_default().to_string()),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("join"))
            .collect()
    });
    let refused = statuses.iter().filter(|(s, _)| *s == 429).count();
    let served = statuses.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(refused + served, statuses.len(), "{statuses:?}");
    assert!(refused > 0 && served > 0, "{statuses:?}");
    assert!(
        statuses
            .iter()
            .filter(|(s, _)| *s == 429)
            .all(|(_, retry)| retry.as_deref() == Some("1"))
    );
    let agent = agent();
    let mut after = agent
        .post(&format!("{base}/v1/search"))
        .send_json(json!({"query": "Anarchism", "k": 3, "rerank": false}))
        .expect("after");
    assert_eq!(after.status(), 200);
    assert_eq!(
        after.body_mut().read_json::<Value>().expect("json")["results"][0]["url"],
        "https://en.wikipedia.org/wiki/Anarchism"
    );
    let metrics = support::metrics_text(&base);
    assert!(
        metrics.contains(&format!(
            "stillweb_rejected_requests_total{{reason=\"overloaded\"}} {refused}"
        )),
        "{metrics}"
    );
}

/// `"explain": true` returns the numbers behind each rank, and they recompose the scores and the
/// order; without it the same results come back with no explanation.
#[tokio::test]
async fn explained_scores_recompose_into_the_ranking() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    for query in [
        "Anarchism",
        "history of the Roman empire and its emperors",
        "Drekev Labs fellowship site:techbrief.example",
    ] {
        let (status, explained) = call(
            &s,
            "POST",
            "/v1/search",
            Some(json!({"query": query, "explain": true})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{explained}");
        support::assert_explained(&explained);
        let (_, plain) = call(&s, "POST", "/v1/search", Some(json!({"query": query}))).await;
        assert!(plain.get("explain").is_none(), "{plain}");
        let strip = |body: &Value| -> Vec<Value> {
            body["results"]
                .as_array()
                .expect("results")
                .iter()
                .map(|r| json!([r["url"], r["score"], r["snippet"]]))
                .collect()
        };
        assert_eq!(strip(&explained), strip(&plain), "{query}");
    }
}

/// With a reranker, each explained result's score is its reranker score.
#[tokio::test]
async fn explained_reranked_scores_are_the_rerankers() {
    let Some(index) = samples_index() else { return };
    let Some(fixture) = qwen3_fixture() else {
        return;
    };
    let s = state(
        index,
        &[
            "--reranker",
            fixture.to_str().expect("path"),
            "--rerank-pool",
            "8",
        ],
    );
    let (status, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "Anarchism", "explain": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["explain"]["reranked"], true);
    assert!(
        body["results"][0]["explain"]["rerank_score"].is_number(),
        "{body}"
    );
    support::assert_explained(&body);
}

/// `POST /rerank` in text-embeddings-inference's shape: every text once, best first, with the
/// scores the reranker gives the same pairs when called directly; refused without a reranker.
#[tokio::test]
async fn rerank_answers_in_the_tei_shape_with_the_models_scores() {
    let Some(index) = samples_index() else { return };
    let Some(fixture) = qwen3_fixture() else {
        return;
    };
    let s = state(index, &["--reranker", fixture.to_str().expect("path")]);
    let texts = [
        "Anarchism is a political philosophy.",
        "The violin is a string instrument.",
        "Anarchists oppose the state.",
        "A glacier is a body of ice.",
    ];
    let (status, body) = call(
        &s,
        "POST",
        "/rerank",
        Some(json!({"query": "what is anarchism", "texts": texts, "return_text": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ranked = body.as_array().expect("array");
    assert_eq!(ranked.len(), texts.len());
    let mut model =
        stillweb_models::load_reranker(&fixture, None, stillweb_models::ExecutionProvider::Cpu, 1)
            .expect("fixture");
    let direct = model.score("what is anarchism", &texts).expect("score");
    let mut seen = vec![false; texts.len()];
    let mut previous = f64::INFINITY;
    for r in ranked {
        let i = usize::try_from(r["index"].as_u64().expect("index")).expect("index");
        assert!(!seen[i], "index {i} twice: {body}");
        seen[i] = true;
        let score = r["score"].as_f64().expect("score");
        assert!(score <= previous, "not best first: {body}");
        previous = score;
        assert!(
            (score - f64::from(direct[i])).abs() < 1e-6,
            "{score} vs {}",
            direct[i]
        );
        assert_eq!(r["text"], texts[i]);
    }
    let (status, body) = call(
        &s,
        "POST",
        "/rerank",
        Some(json!({"query": "q", "texts": vec!["t"; 101]})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request")
    );
    for (request, says) in [
        (
            json!({"query": "q", "texts": ["t"], "raw_scores": true}),
            "raw_scores",
        ),
        (json!({"query": "  ", "texts": ["t"]}), "`query` is empty"),
        (
            json!({"query": "q", "texts": []}),
            "`texts` must hold 1 to 100",
        ),
    ] {
        let (status, body) = call(&s, "POST", "/rerank", Some(request)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(says), "{message}");
    }
    let plain = state(index, &[]);
    let (status, body) = call(
        &plain,
        "POST",
        "/rerank",
        Some(json!({"query": "q", "texts": ["t"]})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "rerank_unavailable")
    );
}

/// A query's own `mode` is one the server can run, or a refusal that says why.
#[tokio::test]
async fn a_query_mode_the_server_cannot_run_is_refused_with_why() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let (status, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "Anarchism", "mode": "bm25"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for (mode, says) in [
        ("semantic", "unknown mode"),
        ("dense", "needs vectors"),
        ("hybrid", "needs vectors"),
        ("rerank", "\"rerank\": true"),
    ] {
        let (status, body) = call(
            &s,
            "POST",
            "/v1/search",
            Some(json!({"query": "Anarchism", "mode": mode})),
        )
        .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
            "{mode}"
        );
        let message = body["error"]["message"].as_str().expect("message");
        assert!(
            message.contains("`mode`") && message.contains(says),
            "{mode}: {message}"
        );
    }
}
