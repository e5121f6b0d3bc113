//! The request shapes that real callers send in normal operation — RL training loops on
//! `/retrieve`, Serper wrappers with query-string parameters, clients that parse their API's error
//! shape — and the hostile ones (slow bodies, huge strings, JSON-RPC floods, operator bombs),
//! replayed against the real router and the real binary over the samples index. Written from
//! the descriptions of those callers, not copied from any client.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use clap::Parser;
use serde_json::{Value, json};
use support::{agent, call, call_with, code, copy_dir, samples_index, send, spawn_server, state};

const ANARCHISM: &str = "https://en.wikipedia.org/wiki/Anarchism";

fn urls(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("list")
        .iter()
        .map(|d| d["url"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Distinct agent-like queries: pairs of words from the samples' vocabulary.
fn distinct_queries(n: usize) -> Vec<String> {
    let words = [
        "anarchism",
        "autism",
        "aristotle",
        "lincoln",
        "history",
        "philosophy",
        "war",
        "music",
        "language",
        "science",
        "emperor",
        "river",
        "church",
        "theory",
        "planet",
        "novel",
        "painter",
        "election",
        "treaty",
        "disease",
        "mathematics",
        "ocean",
        "festival",
        "bridge",
        "village",
        "computer",
        "island",
        "kingdom",
        "mountain",
        "revolution",
        "poet",
        "chemistry",
        "airport",
        "economy",
        "desert",
        "medicine",
        "empire",
        "railway",
        "parliament",
        "fabric",
        "telescope",
        "harbor",
        "genetics",
        "opera",
        "glacier",
        "currency",
        "volcano",
        "dynasty",
        "algebra",
        "football",
        "cathedral",
        "migration",
    ];
    let mut out = Vec::with_capacity(n);
    'outer: for a in words {
        for b in words {
            for c in ["", " origins", " facts"] {
                if out.len() == n {
                    break 'outer;
                }
                if a != b {
                    out.push(format!("{a} {b}{c}"));
                }
            }
        }
    }
    assert_eq!(out.len(), n, "not enough distinct queries");
    out
}

#[tokio::test]
async fn retrieve_answers_what_training_loops_send() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    for path in ["/retrieve", "/search-r1/retrieve", "/s/ep/retrieve"] {
        // A turn in which no rollout searched.
        let (status, body) = call(&s, "POST", path, Some(json!({"queries": []}))).await;
        assert_eq!(
            (status, body.clone()),
            (StatusCode::OK, json!({"result": []})),
            "{path}"
        );
    }
    // Empty and whitespace-only searches get an empty list in their slot; the rest are answered.
    let (status, body) = call(
        &s,
        "POST",
        "/retrieve",
        Some(json!({"queries": ["", "Anarchism", "   \n"], "topk": 2})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = body["result"].as_array().expect("result");
    assert_eq!(result.len(), 3);
    assert_eq!(result[0], json!([]));
    assert_eq!(urls(&result[1])[0], ANARCHISM);
    assert_eq!(result[2], json!([]));
    assert_eq!(
        body["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .map(|e| e["index"].as_u64().unwrap_or(99))
            .collect::<Vec<_>>(),
        [0, 2]
    );
    // Missing, null or non-positive `topk` means the default (3); above 20 it is 20.
    for topk in [json!(null), json!(0), json!(-4)] {
        let (_, body) = call(
            &s,
            "POST",
            "/retrieve",
            Some(json!({"queries": ["history of the Roman empire"], "topk": topk})),
        )
        .await;
        assert_eq!(urls(&body["result"][0]).len(), 3, "topk {topk}: {body}");
    }
    let (_, body) = call(
        &s,
        "POST",
        "/retrieve",
        Some(json!({"queries": ["history of the Roman empire"]})),
    )
    .await;
    assert_eq!(urls(&body["result"][0]).len(), 3);
    let (_, body) = call(
        &s,
        "POST",
        "/retrieve",
        Some(json!({"queries": ["history"], "topk": 500})),
    )
    .await;
    assert_eq!(urls(&body["result"][0]).len(), 20);
}

/// ASearcher's and RLinf's `/access` beside `/retrieve`: pages in URL order, `null` (with the
/// reason in `errors`) for a URL the session was not shown, one not in the corpus and one that
/// does not parse; every slot `null` without a session; malformed calls get FastAPI's shape.
#[tokio::test]
async fn access_returns_shown_pages_in_order_and_null_for_the_rest() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let (_, found) = call(
        &s,
        "POST",
        "/s/asearcher-1/retrieve",
        Some(json!({"queries": ["Anarchism"], "topk": 3})),
    )
    .await;
    let shown = urls(&found["result"][0]);
    assert_eq!(shown[0], ANARCHISM);
    let (_, other) = call(
        &s,
        "POST",
        "/retrieve",
        Some(json!({"queries": ["Aristotle"]})),
    )
    .await;
    let unseen = urls(&other["result"][0])
        .into_iter()
        .find(|u| !shown.contains(u))
        .expect("a page the session was not shown");
    let asked = json!({"urls": [
        shown[1], "https://example.org/nothing", unseen, "not a url", ANARCHISM
    ]});
    let (status, body) = call(&s, "POST", "/s/asearcher-1/access", Some(asked.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = body["result"].as_array().expect("result");
    assert_eq!(result.len(), 5);
    assert_eq!(result[0]["url"], shown[1].as_str());
    assert!(
        result[0]["contents"].as_str().unwrap_or_default().len() > 100,
        "{body}"
    );
    assert!(result[0]["title"].is_string());
    assert_eq!(result[4]["url"], ANARCHISM);
    assert_eq!(result[4]["title"], "Anarchism");
    for slot in [1, 2, 3] {
        assert!(result[slot].is_null(), "slot {slot}: {body}");
    }
    let codes: Vec<(u64, String)> = body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap_or(99),
                e["code"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            (1, "url_not_found".to_string()),
            (2, "url_not_seen".to_string()),
            (3, "invalid_request".to_string())
        ]
    );
    // Without a session nothing is handed out, and the reason says how to name one.
    let (status, body) = call(&s, "POST", "/access", Some(asked)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["result"]
            .as_array()
            .expect("result")
            .iter()
            .all(Value::is_null)
    );
    assert_eq!(body["errors"][0]["code"], "session_required", "{body}");
    assert!(
        body["errors"][0]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("/s/{session}/access"),
        "{body}"
    );
    // Malformed calls: FastAPI's `{"detail": ...}`, saying what is wrong.
    let too_many: Vec<String> = (0..101)
        .map(|i| format!("https://example.org/{i}"))
        .collect();
    for (request, says) in [
        (json!({}), "urls"),
        (json!({"urls": "https://example.org/"}), "urls"),
        (json!({"urls": too_many}), "the limit is 100"),
    ] {
        let (status, body) = call(&s, "POST", "/s/asearcher-1/access", Some(request)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{detail}");
    }
}

/// Serper's page scrape: the text (and markdown when asked) of a page the session was shown;
/// refused in Serper's error shape for a page it was not shown, without a session, and without
/// a `url`.
#[tokio::test]
async fn serper_scrape_reads_a_shown_page_in_serpers_shape() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let (_, found) = call(
        &s,
        "POST",
        "/s/scrape-1/serper/search",
        Some(json!({"q": "Anarchism", "num": 3})),
    )
    .await;
    let link = found["organic"][0]["link"]
        .as_str()
        .expect("link")
        .to_string();
    let (status, page) = call(
        &s,
        "POST",
        "/s/scrape-1/serper/scrape",
        Some(json!({"url": link, "includeMarkdown": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["url"], link.as_str());
    assert_eq!(page["metadata"]["title"], "Anarchism");
    let text = page["text"].as_str().expect("text");
    assert!(text.len() > 1000, "{page}");
    assert!(
        page["markdown"]
            .as_str()
            .expect("markdown")
            .starts_with("# Anarchism\n\n"),
        "{page}"
    );
    let (_, plain) = call(
        &s,
        "POST",
        "/s/scrape-1/serper/scrape",
        Some(json!({"url": link})),
    )
    .await;
    assert!(plain.get("markdown").is_none(), "{plain}");
    for (path, body, status, says) in [
        (
            "/s/scrape-2/serper/scrape",
            json!({"url": link}),
            StatusCode::FORBIDDEN,
            "not in any search result",
        ),
        (
            "/serper/scrape",
            json!({"url": link}),
            StatusCode::BAD_REQUEST,
            "/s/{session}/serper",
        ),
        (
            "/s/scrape-1/serper/scrape",
            json!({"includeMarkdown": true}),
            StatusCode::BAD_REQUEST,
            "`url` is required",
        ),
    ] {
        let (got, error) = call(&s, "POST", path, Some(body)).await;
        assert_eq!(got, status, "{path}: {error}");
        assert_eq!(error["statusCode"], status.as_u16(), "{error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{path}: {message}");
    }
}

/// Named collections through every shape: the path prefix `/c/{name}/` (with `/s/{session}/`
/// after it) and the native `"collection"` field choose one; an unknown name is a 404 in each
/// API's own error shape listing what is served; a wrong type or a conflict with the path is a
/// 400; `/serper/scholar` answers from the scholar collection, and without one says which
/// flags give one; the MCP server lists `scholar_search` only where there is one.
#[tokio::test]
async fn collections_are_chosen_by_path_or_field_and_unknown_ones_refused_in_each_shape() {
    let Some(index) = samples_index() else { return };
    let (web, scholar) = (
        format!("web={}", index.display()),
        format!("scholar={}", index.display()),
    );
    let config = stillweb_server::Args::parse_from([
        "stillweb-server",
        "--collection",
        &web,
        "--collection",
        &scholar,
    ])
    .validate()
    .expect("config");
    let s = stillweb_server::prepare(config).expect("state");
    let (status, found) = call(
        &s,
        "POST",
        "/c/scholar/s/c-1/serper/scholar",
        Some(json!({"q": "Anarchism", "num": 3})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["searchParameters"]["type"], "scholar");
    let first = &found["organic"][0];
    assert_eq!(first["link"], ANARCHISM, "{found}");
    assert_eq!(first["citedBy"], 0);
    // The year from the page's date, and the host where Scholar names the venue.
    assert_eq!(first["year"], 2016, "{first}");
    assert_eq!(
        first["publicationInfo"], "2016 - en.wikipedia.org",
        "{found}"
    );
    // Shown by the scholar collection: readable there, not from the default `web`.
    let (status, page) = call(
        &s,
        "POST",
        "/c/scholar/s/c-1/serper/scrape",
        Some(json!({"url": ANARCHISM})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let (status, refused) = call(
        &s,
        "POST",
        "/s/c-1/serper/scrape",
        Some(json!({"url": ANARCHISM})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    let (status, page) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": ANARCHISM, "session": "c-1", "collection": "scholar"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let (_, retrieved) = call(
        &s,
        "POST",
        "/c/scholar/retrieve",
        Some(json!({"queries": ["anarchism"], "topk": 2})),
    )
    .await;
    assert_eq!(
        retrieved["result"][0].as_array().map(Vec::len),
        Some(2),
        "{retrieved}"
    );

    for (path, body, status, says, field) in [
        (
            "/v1/search",
            json!({"query": "x", "collection": "nope"}),
            404,
            "no collection `nope` here; this server serves web, scholar",
            "error",
        ),
        (
            "/v1/search/batch",
            json!({"queries": [{"query": "x"}], "collection": 7}),
            422,
            "collection",
            "error",
        ),
        (
            "/c/web/v1/search",
            json!({"query": "x", "collection": "scholar"}),
            422,
            "conflicting collections",
            "error",
        ),
        (
            "/c/nope/v1/visit",
            json!({"url": ANARCHISM, "session": "c-1"}),
            404,
            "no collection `nope`",
            "error",
        ),
        (
            "/c/nope/serper/search",
            json!({"q": "x"}),
            404,
            "no collection `nope`",
            "message",
        ),
        (
            "/c/nope/s/c-1/retrieve",
            json!({"queries": ["x"]}),
            404,
            "no collection `nope`",
            "detail",
        ),
        (
            "/c/web/serper/scholar",
            json!({"q": "x"}),
            400,
            "conflicting collections",
            "message",
        ),
    ] {
        let (got, error) = call(&s, "POST", path, Some(body)).await;
        assert_eq!(got.as_u16(), status, "{path}: {error}");
        let message = match field {
            "error" => error["error"]["message"].as_str(),
            other => error[other].as_str(),
        };
        assert!(
            message.unwrap_or_default().contains(says),
            "{path}: {error}"
        );
    }
    let (status, tools) = call(
        &s,
        "POST",
        "/mcp",
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"scholar_search"), "{names:?}");

    // One corpus, no scholar collection: a 404 in Serper's shape that names the flags.
    let plain = state(index, &[]);
    let (status, error) = call(&plain, "POST", "/serper/scholar", Some(json!({"q": "x"}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    assert_eq!(error["statusCode"], 404);
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("--collection scholar=DIR") && message.contains("--scholar-collection"),
        "{message}"
    );
    let (_, tools) = call(
        &plain,
        "POST",
        "/mcp",
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
    )
    .await;
    assert_eq!(
        tools["result"]["tools"].as_array().map(Vec::len),
        Some(4),
        "{tools}"
    );
}

/// A GRPO step: 512 prompts x 5 rollouts in one call, answered in query order, identical to the
/// same queries sent one by one, and recorded in the session's transcript in query order.
#[tokio::test]
async fn retrieve_takes_a_whole_grpo_step_in_one_call() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &["--max-events-per-session", "5000"]);
    let queries = distinct_queries(2560);
    let body = json!({"queries": queries, "topk": 3, "return_scores": true});
    let (status, body) = call(&s, "POST", "/s/grpo/retrieve", Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let result = body["result"].as_array().expect("result");
    assert_eq!(result.len(), 2560);
    for i in [0, 1, 777, 2559] {
        let (_, single) = call(
            &s,
            "POST",
            "/retrieve",
            Some(json!({"queries": [queries[i]], "topk": 3, "return_scores": true})),
        )
        .await;
        assert_eq!(single["result"][0], result[i], "query {i}");
    }
    let (_, transcript) = call(&s, "GET", "/v1/sessions/grpo", None).await;
    let recorded: Vec<&str> = transcript["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["query"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        recorded,
        queries.iter().map(String::as_str).collect::<Vec<_>>()
    );

    // The limit is the documented --max-retrieve-batch, not the native batch's.
    let small = state(index, &["--max-retrieve-batch", "3"]);
    let (status, body) = call(
        &small,
        "POST",
        "/retrieve",
        Some(json!({"queries": ["a", "b", "c", "d"]})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["detail"]
            .as_str()
            .expect("detail")
            .contains("the limit is 3 (--max-retrieve-batch)"),
        "{body}"
    );
}

#[tokio::test]
async fn serper_parameters_from_the_query_string() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let raw = |method: &str, uri: &str, body: &str| {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::from(body.to_string()))
            .expect("request")
    };
    let json_of = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).expect("json");
    // POST with an empty body, everything in the query string.
    let (status, _, bytes) = send(
        &s,
        raw(
            "POST",
            "/serper/search?q=Anarchism&num=1&page=1&gl=us&hl=en&api_key=k",
            "",
        ),
    )
    .await;
    let body = json_of(&bytes);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["organic"][0]["link"], ANARCHISM);
    assert_eq!(body["organic"].as_array().expect("organic").len(), 1);
    // GET, as `requests.get(url, params=...)` sends it, under a session prefix.
    let (status, _, bytes) = send(
        &s,
        raw(
            "GET",
            "/s/serp/serper/search?q=Roman+empire+emperors&num=3&page=2&api_key=k",
            "",
        ),
    )
    .await;
    let body = json_of(&bytes);
    assert_eq!(status, StatusCode::OK, "{body}");
    let positions: Vec<u64> = body["organic"]
        .as_array()
        .expect("organic")
        .iter()
        .map(|o| o["position"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(positions, [4, 5, 6]);
    let (_, transcript) = call(&s, "GET", "/v1/sessions/serp", None).await;
    assert_eq!(transcript["events"][0]["query"], "Roman empire emperors");
    // A body field wins over the same parameter.
    let (_, _, bytes) = send(
        &s,
        raw(
            "POST",
            "/serper/search?q=zebra&num=2",
            r#"{"q": "Roman empire emperors"}"#,
        ),
    )
    .await;
    let body = json_of(&bytes);
    assert_eq!(body["searchParameters"]["q"], "Roman empire emperors");
    assert_eq!(body["organic"].as_array().expect("organic").len(), 2);
    // No `q` anywhere: Serper's error shape with the reason.
    let (status, _, bytes) = send(&s, raw("GET", "/serper/search?num=3", "")).await;
    let body = json_of(&bytes);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["statusCode"], 400);
    assert!(
        body["message"]
            .as_str()
            .expect("m")
            .contains("`q` is required")
    );
}

/// Every 404 and 405, from any mount, is JSON in the dialect of its route prefix, with the
/// stable code in `X-Stillweb-Error`.
#[tokio::test]
async fn unknown_paths_and_wrong_methods_answer_in_each_dialect() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    // (method, path, status, a JSON pointer that must hold a string)
    let cases = [
        ("GET", "/v1/search", 405, "/error/message"),
        ("GET", "/nowhere", 404, "/error/message"),
        ("PUT", "/s/ep/v1/visit", 405, "/error/message"),
        ("GET", "/retrieve", 405, "/detail"),
        ("GET", "/s/ep/search-r1/nowhere", 404, "/detail"),
        ("PUT", "/serper/search", 405, "/message"),
        ("POST", "/serper/images/nowhere", 404, "/message"),
        ("POST", "/brave/res/v1/web/search", 405, "/error/detail"),
        ("GET", "/brave/res/v1/news", 404, "/error/detail"),
        ("GET", "/tavily/search", 405, "/detail/error"),
        ("POST", "/s/ep/tavily/crawl", 404, "/detail/error"),
        ("GET", "/exa/contents", 405, "/error"),
        ("POST", "/exa/answer", 404, "/error"),
        ("POST", "/jina/https://a.example/", 405, "/message"),
        ("GET", "/mcp", 405, "/error/message"),
        ("PUT", "/s/ep/mcp", 405, "/error/message"),
    ];
    for (method, path, status, pointer) in cases {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .expect("request");
        let (got, headers, bytes) = send(&s, request).await;
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(got.as_u16(), status, "{method} {path}: {text}");
        let body: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("{method} {path}: not JSON: {text:?}"));
        assert!(
            body.pointer(pointer)
                .and_then(Value::as_str)
                .is_some_and(|m| !m.is_empty()),
            "{method} {path}: no message at {pointer}: {body}"
        );
        assert_eq!(
            headers["content-type"], "application/json",
            "{method} {path}"
        );
        let expected = if status == 404 {
            "route_not_found"
        } else {
            "method_not_allowed"
        };
        assert_eq!(headers["x-stillweb-error"], expected, "{method} {path}");
        if status == 405 {
            assert!(headers.contains_key("allow"), "{method} {path}: no Allow");
        }
    }
    // A Tavily extract refused for a page the session was not shown carries the reason where
    // the client surfaces it.
    let (status, body) = call_with(
        &s,
        "POST",
        "/tavily/extract",
        &[("x-session-id", "tav")],
        Some(json!({"urls": [ANARCHISM]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body["failed_results"][0]["error"]
            .as_str()
            .expect("error")
            .contains("was not in any search result"),
        "{body}"
    );
}

#[tokio::test]
async fn hostile_strings_and_floods_are_refused_before_anything_is_kept() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &["--max-body-bytes", "4194304"]);
    let (status, _) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "Anarchism", "session": "h"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // A visit with a huge URL is refused and leaves nothing in the transcript.
    let long_url = format!("https://a.example/{}", "x".repeat(1 << 20));
    let (status, body) = call(
        &s,
        "POST",
        "/v1/visit",
        Some(json!({"url": long_url, "session": "h"})),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request")
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("m")
            .contains("`url` is longer than 4096")
    );
    let (_, transcript) = call(&s, "GET", "/v1/sessions/h", None).await;
    assert_eq!(transcript["events"].as_array().expect("events").len(), 1);

    // Session ids from any source follow one rule.
    let long_id = "a".repeat(200_000);
    for (path, headers) in [
        // (A URI holds at most 64 KiB, so the path's id is shorter, but over the limit.)
        (format!("/s/{}/v1/search", &long_id[..1000]), vec![]),
        (
            "/v1/search".to_string(),
            vec![("x-session-id", long_id.as_str())],
        ),
        ("/s/%FF/v1/search".to_string(), vec![]),
    ] {
        let (status, body) = call_with(
            &s,
            "POST",
            &path,
            &headers,
            Some(json!({"query": "Anarchism"})),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}: {body}",
            &path[..20.min(path.len())]
        );
    }
    let mcp_call = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "visit_web", "arguments": {"url": ANARCHISM}}})
    };
    for bad in ["has space", "a/b", "<script>", &"m".repeat(200_000)] {
        let (status, body) = call_with(
            &s,
            "POST",
            "/mcp",
            &[("mcp-session-id", bad)],
            Some(mcp_call(1)),
        )
        .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{}",
            &bad[..bad.len().min(20)]
        );
        assert_eq!(body["error"]["code"], -32600, "{body}");
    }
    // `/s/A/mcp` with `Mcp-Session-Id: B` is a conflict, as in the native API.
    let (status, body) = call_with(
        &s,
        "POST",
        "/s/A/mcp",
        &[("mcp-session-id", "B")],
        Some(mcp_call(1)),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("m")
            .contains("conflicting sessions")
    );
    // A JSON-RPC array of a thousand page reads is refused whole; one within the cap is answered.
    let flood = Value::Array((0..1000).map(mcp_call).collect());
    let (status, body) =
        call_with(&s, "POST", "/mcp", &[("mcp-session-id", "h")], Some(flood)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("m")
            .contains("at most 64 messages")
    );
    let few = Value::Array((0..2).map(mcp_call).collect());
    let (status, body) = call_with(&s, "POST", "/mcp", &[("mcp-session-id", "h")], Some(few)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.as_array().expect("replies").len(), 2);

    // Operator bombs are refused by count; a query's filter time is reported.
    let bomb: String = (0..120).map(|i| format!("site:{i}.io ")).collect();
    let (status, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": format!("war {bomb}")})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("m")
            .contains("120 operators"),
        "{body}"
    );
    let request = Request::builder()
        .method("POST")
        .uri("/v1/search")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"query": "\"Roman empire\" site:wikipedia.org -war"}).to_string(),
        ))
        .expect("request");
    let (status, headers, _) = send(&s, request).await;
    assert_eq!(status, StatusCode::OK);
    let timing = headers["server-timing"].to_str().expect("timing");
    assert!(timing.starts_with("filter;dur="), "{timing}");
    // Rerank pools outside 0..=max are refused even without a reranker.
    for pool in [json!(-1), json!(1_000_000_000)] {
        let (status, body) = call(
            &s,
            "POST",
            "/v1/search",
            Some(json!({"query": "Anarchism", "rerank_pool": pool})),
        )
        .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request")
        );
    }
    // Ids handed out are not a clock plus a counter: 128 random bits.
    let (_, headers, _) = send(
        &s,
        Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
                    .to_string(),
            ))
            .expect("request"),
    )
    .await;
    let id = headers["mcp-session-id"].to_str().expect("id");
    assert_eq!(id.len(), "mcp-".len() + 32, "{id}");
}

/// Reads a process's resident set size in KiB from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Slow senders hold no in-flight slot and do not block other clients or shutdown; floods of
/// huge URLs and JSON-RPC arrays leave the server's memory where it was.
#[test]
fn slow_and_hostile_clients_do_not_lock_out_others_or_grow_memory() {
    let Some(index) = samples_index() else { return };
    let mut server = spawn_server(
        index,
        &[
            "--max-in-flight",
            "4",
            "--body-read-timeout-secs",
            "3",
            "--header-read-timeout-secs",
            "3",
            "--shutdown-drain-secs",
            "2",
            "--max-body-bytes",
            "2097152",
        ],
    );
    let pid = server.child.id();
    let base = server.url.clone();
    let address = base.trim_start_matches("http://").to_string();
    // Twenty connections send their headers and half a body, then stall.
    let stalled: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut c = TcpStream::connect(&address).expect("connect");
            c.write_all(
                b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\": \"Anar",
            )
            .expect("write");
            c
        })
        .collect();
    // A few more send nothing but part of their headers.
    let silent: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut c = TcpStream::connect(&address).expect("connect");
            c.write_all(b"POST /v1/search HTTP/1.1\r\nHost:")
                .expect("write");
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let agent = agent();
    for _ in 0..8 {
        let mut response = agent
            .post(&format!("{base}/v1/search"))
            .send_json(json!({"query": "Anarchism", "k": 1}))
            .expect("search");
        assert_eq!(response.status(), 200, "a slow client blocked a search");
        let body: Value = response.body_mut().read_json().expect("json");
        assert_eq!(body["results"][0]["url"], ANARCHISM);
    }
    // The stalled bodies are answered 408 once the body timeout passes, and closed.
    for mut c in stalled {
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("body_timeout"), "{answer}");
    }
    // The silent ones are closed by the header timeout.
    for mut c in silent {
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut rest = Vec::new();
        // End of stream or a reset both mean closed; only a read timeout means kept open.
        if let Err(e) = c.read_to_end(&mut rest) {
            assert!(
                !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "a connection that never sent its headers was kept open"
            );
        }
    }

    // Memory: a hundred visits with a 1 MB URL and a JSON-RPC array of a thousand reads.
    let before = rss_kib(pid);
    let long_url = format!("https://a.example/{}", "x".repeat(1 << 20));
    for _ in 0..100 {
        let response = agent
            .post(&format!("{base}/v1/visit"))
            .send_json(json!({"url": long_url, "session": "mem"}))
            .expect("visit");
        assert_eq!(response.status(), 422);
    }
    let flood = Value::Array(
        (0..1000)
            .map(|i| {
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                            "params": {"name": "visit_web", "arguments": {"url": ANARCHISM}}})
            })
            .collect(),
    );
    for _ in 0..5 {
        let response = agent
            .post(&format!("{base}/mcp"))
            .header("mcp-session-id", "mem")
            .send_json(&flood)
            .expect("mcp");
        assert_eq!(response.status(), 400);
    }
    let after = rss_kib(pid);
    // Each request's body (up to 2 MB) is transient; nothing of it is kept.
    assert!(
        after < before + 32 * 1024,
        "resident memory grew from {before} KiB to {after} KiB"
    );

    // Shutdown is not held up by a connection that stalls mid-body.
    let mut stuck = TcpStream::connect(&address).expect("connect");
    stuck
        .write_all(b"POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
        .expect("write");
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = server.child.wait().expect("wait");
    assert!(exit.success(), "{exit:?}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "shutdown took {:?}",
        started.elapsed()
    );
    drop(stuck);
}

/// SIGTERM waits for requests in flight, not for connections: idle keep-alive connections (as
/// HAProxy and coordinators hold), fresh ones and ones part-way through their headers are closed
/// at once, while a request whose handler started (here, one still sending its body) is answered
/// before the server exits. The drain deadline and the header and body timeouts are far longer
/// than the test waits, so a server that waited on connections fails it rather than racing it.
#[test]
fn sigterm_waits_for_requests_in_flight_and_closes_idle_connections() {
    let Some(index) = samples_index() else { return };
    let long = [
        "--shutdown-drain-secs",
        "300",
        "--header-read-timeout-secs",
        "300",
        "--body-read-timeout-secs",
        "300",
    ];
    let wait = Duration::from_secs(60);
    // How long the server took to exit after SIGTERM, if it did within `wait`.
    let stop = |server: &mut support::Server| -> Option<Duration> {
        let sent = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &server.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        while sent.elapsed() < wait {
            if let Some(exit) = server.child.try_wait().expect("wait") {
                assert!(exit.success(), "{exit:?}");
                return Some(sent.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    };
    let connections = |address: &str| -> Vec<TcpStream> {
        let mut open = Vec::new();
        for _ in 0..3 {
            // Keep-alive, idle after one answered request.
            let mut c = TcpStream::connect(address).expect("connect");
            c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .expect("write");
            let mut answer = [0u8; 12];
            c.read_exact(&mut answer).expect("answer");
            assert_eq!(&answer, b"HTTP/1.1 200");
            open.push(c);
        }
        // Connected, nothing sent.
        open.push(TcpStream::connect(address).expect("connect"));
        // Half a request's headers.
        let mut c = TcpStream::connect(address).expect("connect");
        c.write_all(b"POST /v1/search HTTP/1.1\r\nHost:")
            .expect("write");
        open.push(c);
        open
    };

    let mut server = spawn_server(index, &long);
    let address = server.url.trim_start_matches("http://").to_string();
    let idle = connections(&address);
    std::thread::sleep(Duration::from_millis(200));
    let took = stop(&mut server).expect("the server waited on connections with no request");
    eprintln!("exited {took:?} after SIGTERM with only idle connections");
    drop(idle);

    let mut server = spawn_server(index, &long);
    let address = server.url.trim_start_matches("http://").to_string();
    let idle = connections(&address);
    let body = json!({"query": "Anarchism", "k": 1}).to_string();
    let (head, tail) = body.split_at(10);
    let tail = tail.to_string();
    let mut in_flight = TcpStream::connect(&address).expect("connect");
    in_flight
        .write_all(
            format!(
                "POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{head}",
                body.len()
            )
            .as_bytes(),
        )
        .expect("write");
    std::thread::sleep(Duration::from_millis(200));
    let pid = server.child.id();
    let finish = std::thread::spawn(move || {
        // The rest of the body a second after the signal: the server must still be there.
        std::thread::sleep(Duration::from_secs(1));
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "the server exited with a request in flight"
        );
        in_flight
            .write_all(tail.as_bytes())
            .expect("write the rest");
        in_flight
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let mut answer = String::new();
        let _ = in_flight.read_to_string(&mut answer);
        answer
    });
    let took = stop(&mut server).expect("the server did not exit once its request was answered");
    let answer = finish.join().expect("the in-flight client");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(ANARCHISM), "{answer}");
    assert!(took >= Duration::from_secs(1), "exited after {took:?}");
    drop(idle);
}

/// A byte changed inside a term file (same size, so every structural check passes) is found
/// before the server reports ready: it refuses to start and names the file.
#[test]
fn a_same_size_corrupted_index_is_refused_at_start() {
    let Some(index) = samples_index() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("index");
    copy_dir(index, &copy);
    let term = std::fs::read_dir(copy.join("docs"))
        .expect("docs")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "term"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a term file");
    let mut bytes = std::fs::read(&term).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&term, &bytes).expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_stillweb-server"))
        .args([
            "--index",
            copy.to_str().expect("path"),
            "--listen",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let name = format!("docs/{}", term.file_name().expect("name").to_string_lossy());
    assert!(
        stderr.contains(&format!("{name} does not match its checksum"))
            && stderr.contains("rebuild it"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("listening"));
}
