//! Date filters over the samples index (fabricated pages dated 2006–2025, Wikipedia revisions,
//! Common Crawl crawl dates), in every API's own spelling: each range returns only pages dated
//! in it (and some, where the range holds pages), relative ranges count back from the
//! collection's frozen clock (`/info`'s `as_of`), `after:` / `before:` work beside the other
//! operators, each API writes dates its own way, and bad dates are refused by name in each
//! API's error shape.

mod support;

use std::collections::HashMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use stillweb_corpus::date::{self, document_instant, parse_day};
use support::{call, samples_index, state};

/// Every fabricated page's date by URL (what the `/retrieve` results, which carry no dates, are
/// checked against).
fn fabricated_dates() -> HashMap<String, i64> {
    let data = stillweb_test_support::shared_data().expect("shared data");
    let text = std::fs::read_to_string(data.join("fabricated/documents.jsonl")).expect("read");
    text.lines()
        .map(|line| {
            let doc: Value = serde_json::from_str(line).expect("json");
            let url = doc["url"].as_str().expect("url").to_string();
            let date = document_instant(doc["date"].as_str().expect("date")).expect("dated");
            (url, date)
        })
        .collect()
}

/// Asserts that `dates` is not empty and that each lies in `[from, until)`.
fn all_within(what: &str, dates: &[Option<i64>], from: i64, until: i64) {
    assert!(!dates.is_empty(), "{what}: no results");
    for d in dates {
        let d = d.unwrap_or_else(|| panic!("{what}: an undated result"));
        assert!(
            (from..until).contains(&d),
            "{what}: {} is outside {} .. {}",
            date::rfc3339(d),
            date::rfc3339(from),
            date::rfc3339(until)
        );
    }
}

fn native_dates(body: &Value) -> Vec<Option<i64>> {
    body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| document_instant(r["date"].as_str().unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn every_dialects_date_filter_keeps_only_pages_dated_in_its_range() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let (_, info) = call(&s, "GET", "/info", None).await;
    let as_of = info["index"]["dates"]["as_of"].as_i64().expect("as_of");
    assert_eq!(
        info["index"]["as_of"].as_str(),
        Some(date::rfc3339(as_of).as_str())
    );
    assert_eq!(info["index"]["dates"]["newest"].as_i64(), Some(as_of));
    let dated = info["index"]["dates"]["dated"].as_u64().expect("dated");
    assert_eq!(
        dated + info["index"]["dates"]["undated"].as_u64().expect("undated"),
        info["index"]["documents"].as_u64().expect("documents")
    );
    let (y2020, y2022) = (
        parse_day("2020-01-01").expect("valid"),
        parse_day("2022-01-01").expect("valid"),
    );

    // Native: published_after (included) / published_before (excluded).
    let (status, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "labs program update", "k": 20,
                    "published_after": "2020-01-01", "published_before": "2022-01-01"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    all_within("native", &native_dates(&body), y2020, y2022);

    // after: / before: inside the query, beside site: and an exclusion.
    let (_, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "labs program after:2020 before:2022 site:techbrief.example -fellowship", "k": 20})),
    )
    .await;
    all_within("after:/before:", &native_dates(&body), y2020, y2022);
    for r in body["results"].as_array().expect("results") {
        assert!(
            r["url"]
                .as_str()
                .unwrap_or_default()
                .starts_with("https://techbrief.example/"),
            "{r}"
        );
    }

    // Serper: a custom range (both days included), a period back from the frozen clock, the
    // results by date, and Google's way of writing a date.
    let (status, body) = call(
        &s,
        "POST",
        "/serper/search",
        Some(json!({"q": "labs program update", "num": 20,
                    "tbs": "cdr:1,cd_min:1/1/2020,cd_max:12/31/2021,sbd:1"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["searchParameters"]["tbs"],
        "cdr:1,cd_min:1/1/2020,cd_max:12/31/2021,sbd:1"
    );
    let organic = body["organic"].as_array().expect("organic");
    let google = |t: i64| date::google_date(t, as_of);
    let shown: Vec<&str> = organic
        .iter()
        .map(|r| r["date"].as_str().expect("a dated result has a date"))
        .collect();
    // Each is "Mon D, YYYY" (none is within a week of the clock) and they come newest first.
    let read: Vec<i64> = shown
        .iter()
        .map(|d| {
            chrono::NaiveDate::parse_from_str(d, "%b %-d, %Y")
                .unwrap_or_else(|_| panic!("`{d}` is not Google's date"))
                .and_hms_opt(0, 0, 0)
                .expect("valid")
                .and_utc()
                .timestamp()
        })
        .collect();
    all_within(
        "serper cdr",
        &read.iter().copied().map(Some).collect::<Vec<_>>(),
        y2020,
        y2022,
    );
    assert!(read.windows(2).all(|w| w[0] >= w[1]), "sbd:1: {shown:?}");
    assert_eq!(shown[0], google(read[0]));
    let (_, body) = call(
        &s,
        "POST",
        "/serper/search",
        Some(json!({"q": "labs program update", "num": 20, "tbs": "qdr:y"})),
    )
    .await;
    let year_back = date::months_before(as_of, 12);
    let recent = body["organic"].as_array().expect("organic");
    assert!(!recent.is_empty(), "{body}");
    for r in recent {
        let shown = r["date"].as_str().expect("date");
        if shown.ends_with(" ago") {
            continue;
        }
        let t = chrono::NaiveDate::parse_from_str(shown, "%b %-d, %Y")
            .expect("Google's date")
            .and_hms_opt(0, 0, 0)
            .expect("valid")
            .and_utc()
            .timestamp();
        assert!((year_back - 86_400..=as_of).contains(&t), "qdr:y: {shown}");
    }

    // Tavily: start_date / end_date (both included), time_range, published_date an HTTP date.
    let (status, body) = call(
        &s,
        "POST",
        "/tavily/search",
        Some(json!({"query": "labs program update", "max_results": 20,
                    "start_date": "2020-01-01", "end_date": "2021-12-31"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let tavily: Vec<Option<i64>> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let d = r["published_date"].as_str().expect("published_date");
            chrono::DateTime::parse_from_rfc2822(d)
                .ok()
                .map(|t| t.timestamp())
        })
        .collect();
    all_within("tavily", &tavily, y2020, y2022);
    let (_, body) = call(
        &s,
        "POST",
        "/tavily/search",
        Some(json!({"query": "labs program update", "max_results": 20, "time_range": "year"})),
    )
    .await;
    let tavily: Vec<Option<i64>> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            chrono::DateTime::parse_from_rfc2822(r["published_date"].as_str().unwrap_or(""))
                .ok()
                .map(|t| t.timestamp())
        })
        .collect();
    all_within("tavily year", &tavily, year_back, as_of + 1);

    // Exa: ISO 8601 bounds, publishedDate ISO 8601 with milliseconds.
    let (status, body) = call(
        &s,
        "POST",
        "/exa/search",
        Some(json!({"query": "labs program update", "numResults": 20,
                    "startPublishedDate": "2020-01-01T00:00:00.000Z",
                    "endPublishedDate": "2021-12-31T23:59:59.999Z"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let exa: Vec<Option<i64>> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let d = r["publishedDate"].as_str().expect("publishedDate");
            assert!(d.ends_with(".000Z"), "{d}");
            document_instant(d)
        })
        .collect();
    all_within("exa", &exa, y2020, y2022);

    // Brave: freshness as a range (both days included), page_age and age.
    let (status, body) = call(
        &s,
        "GET",
        "/brave/res/v1/web/search?q=labs+program+update&freshness=2020-01-01to2021-12-31",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let brave: Vec<Option<i64>> = body["web"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let t = document_instant(r["page_age"].as_str().expect("page_age"));
            assert_eq!(
                r["age"].as_str(),
                t.map(|t| date::brave_age(t, as_of)).as_deref()
            );
            t
        })
        .collect();
    all_within("brave", &brave, y2020, y2022);

    // /retrieve: the batch's bounds and a question's own cutoff, which narrows them.
    let dates = fabricated_dates();
    let (status, body) = call(
        &s,
        "POST",
        "/retrieve",
        Some(json!({"queries": ["labs program update",
                                {"query": "labs program update", "published_before": "2021-01-01"}],
                    "topk": 10, "published_after": "2020-01-01", "published_before": "2022-01-01"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let of = |slot: &Value| -> Vec<Option<i64>> {
        slot.as_array()
            .expect("slot")
            .iter()
            .map(|d| dates.get(d["url"].as_str().unwrap_or_default()).copied())
            .collect()
    };
    all_within("retrieve batch", &of(&body["result"][0]), y2020, y2022);
    let y2021 = parse_day("2021-01-01").expect("valid");
    all_within("retrieve cutoff", &of(&body["result"][1]), y2020, y2021);

    // MCP web_search's own arguments.
    let (_, body) = call(
        &s,
        "POST",
        "/mcp",
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "web_search", "arguments": {
                        "query": "labs program update", "k": 10, "published_before": "2012-01-01"}}})),
    )
    .await;
    let mcp: Vec<Option<i64>> = body["result"]["structuredContent"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| document_instant(r["date"].as_str().unwrap_or_default()))
        .collect();
    all_within(
        "mcp",
        &mcp,
        i64::MIN,
        parse_day("2012-01-01").expect("valid"),
    );

    // A range that holds no page answers nothing; undated pages never match a bounded range.
    let (_, body) = call(
        &s,
        "POST",
        "/v1/search",
        Some(json!({"query": "labs program update", "published_after": "2099-01-01"})),
    )
    .await;
    assert_eq!(body["results"], json!([]), "{body}");
}

#[tokio::test]
async fn bad_dates_are_refused_by_name_in_each_apis_error_shape() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let native = |body: Value| async {
        let (status, e) = call(&s, "POST", "/v1/search", Some(body)).await;
        (
            status,
            e["error"]["message"].as_str().unwrap_or("").to_string(),
        )
    };
    for (body, says) in [
        (
            json!({"query": "q", "published_after": "yesterday"}),
            "`published_after`: `yesterday` is not an ISO 8601 date",
        ),
        (
            json!({"query": "q", "published_after": "2022-01-01", "published_before": "2021-01-01"}),
            "must be before `published_before`",
        ),
    ] {
        let (status, message) = native(body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(message.contains(says), "{message}");
    }
    for (q, says) in [
        ("tbs=qdr:x", "`tbs`: unknown `qdr:x`"),
        (
            "tbs=cdr:1,cd_min:13/1/2020",
            "cd_min: `13/1/2020` is not a date",
        ),
        (
            "tbs=cdr:1,cd_min:2/1/2021,cd_max:1/1/2021",
            "cd_min (2021-02-01) is after cd_max",
        ),
    ] {
        let (status, e) = call(&s, "GET", &format!("/serper/search?q=labs&{q}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{q}: {e}");
        assert_eq!(e["statusCode"], 400);
        assert!(e["message"].as_str().unwrap_or("").contains(says), "{e}");
    }
    for (body, says) in [
        (
            json!({"query": "labs", "time_range": "fortnight"}),
            "`time_range` must be one of day, week, month, year",
        ),
        (
            json!({"query": "labs", "start_date": "2021/01/01"}),
            "`start_date`: `2021/01/01` is not a date",
        ),
        (
            json!({"query": "labs", "start_date": "2022-01-01", "end_date": "2021-01-01"}),
            "`start_date` (2022-01-01) is after `end_date`",
        ),
    ] {
        let (status, e) = call(&s, "POST", "/tavily/search", Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
        assert!(
            e["detail"]["error"].as_str().unwrap_or("").contains(says),
            "{e}"
        );
    }
    for (body, says) in [
        (
            json!({"query": "labs", "startPublishedDate": "last year"}),
            "`startPublishedDate`",
        ),
        (
            json!({"query": "labs", "startPublishedDate": "2022-01-01", "endPublishedDate": "2021-01-01"}),
            "is after `endPublishedDate`",
        ),
    ] {
        let (status, e) = call(&s, "POST", "/exa/search", Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
        assert!(e["error"].as_str().unwrap_or("").contains(says), "{e}");
    }
    // Brave answers a parameter it cannot read with 422 VALIDATION, as its API does.
    let (status, e) = call(
        &s,
        "GET",
        "/brave/res/v1/web/search?q=labs&freshness=pq",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert_eq!(e["error"]["code"], "VALIDATION");
    assert!(
        e["error"]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("`freshness`: unknown `pq`"),
        "{e}"
    );
    // /retrieve: an unreadable bound of the batch refuses the call; one question's, its slot.
    let (status, e) = call(
        &s,
        "POST",
        "/retrieve",
        Some(json!({"queries": ["labs"], "published_before": "soon"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    let (status, body) = call(
        &s,
        "POST",
        "/retrieve",
        Some(json!({"queries": ["labs", {"query": "labs", "published_before": "soon"}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"][1], json!([]));
    assert!(
        body["errors"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("`published_before`"),
        "{body}"
    );
    assert!(!body["result"][0].as_array().expect("slot").is_empty());
}

/// An API key pinned to a date (`as_of` in the key file) sees the web as of that day in every
/// API: no page dated later is searched, whatever range the request asks for, and such a page
/// is refused to a visit as one never shown; another key sees everything.
#[tokio::test]
async fn a_key_pinned_to_a_date_never_sees_a_newer_page() {
    let Some(index) = samples_index() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.toml");
    std::fs::write(
        &keys,
        "[[key]]\nname = \"eval\"\nkey = \"eval-0123456789abcdef\"\nas_of = \"2015-06-30\"\n\n\
         [[key]]\nname = \"all\"\nkey = \"all-0123456789abcdef\"\n",
    )
    .expect("keys");
    let s = state(index, &["--api-keys", keys.to_str().expect("path")]);
    let pinned = [("authorization", "Bearer eval-0123456789abcdef")];
    let open = [("authorization", "Bearer all-0123456789abcdef")];
    let cutoff = parse_day("2015-07-01").expect("day");
    let query = json!({"query": "labs program update", "k": 20});
    let (_, body) =
        support::call_with(&s, "POST", "/v1/search", &pinned, Some(query.clone())).await;
    all_within("pinned", &native_dates(&body), i64::MIN, cutoff);
    let (_, body) = support::call_with(&s, "POST", "/v1/search", &open, Some(query)).await;
    assert!(
        native_dates(&body)
            .iter()
            .any(|d| d.is_some_and(|d| d >= cutoff)),
        "the other key sees newer pages: {body}"
    );
    // A range past the cutoff, asked for in Serper's and Tavily's spelling, finds nothing.
    let (_, body) = support::call_with(
        &s,
        "POST",
        "/serper/search",
        &[("x-api-key", "eval-0123456789abcdef")],
        Some(json!({"q": "labs program update", "tbs": "qdr:y"})),
    )
    .await;
    assert_eq!(body["organic"], json!([]), "{body}");
    let (_, body) = support::call_with(
        &s,
        "POST",
        "/tavily/search",
        &[],
        Some(
            json!({"query": "labs program update", "api_key": "eval-0123456789abcdef",
                    "max_results": 20, "start_date": "2010-01-01"}),
        ),
    )
    .await;
    let tavily: Vec<Option<i64>> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            chrono::DateTime::parse_from_rfc2822(r["published_date"].as_str().unwrap_or(""))
                .ok()
                .map(|t| t.timestamp())
        })
        .collect();
    all_within(
        "pinned tavily",
        &tavily,
        parse_day("2010-01-01").expect("day"),
        cutoff,
    );
    // Visits: a shown page reads; a newer one answers as a page never shown.
    let session = [
        ("authorization", "Bearer eval-0123456789abcdef"),
        ("x-session-id", "q-1"),
    ];
    let (_, body) = support::call_with(
        &s,
        "POST",
        "/v1/search",
        &session,
        Some(json!({"query": "labs program update", "k": 3})),
    )
    .await;
    let shown = body["results"][0]["url"].as_str().expect("url").to_string();
    let (status, _) = support::call_with(
        &s,
        "POST",
        "/v1/visit",
        &session,
        Some(json!({"url": shown})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let newer = fabricated_dates()
        .into_iter()
        .find(|(_, d)| *d >= cutoff)
        .expect("a newer page")
        .0;
    let (status, body) = support::call_with(
        &s,
        "POST",
        "/v1/visit",
        &session,
        Some(json!({"url": newer})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "url_not_seen");
}

/// `/retrieve`'s results (no dates on them) that are fabricated pages, by their dates: none may
/// be on or after `cutoff`, and there must be some.
fn retrieved_before(what: &str, body: &Value, cutoff: i64) {
    let dates = fabricated_dates();
    let known: Vec<i64> = body["result"]
        .as_array()
        .expect("result")
        .iter()
        .flat_map(|slot| slot.as_array().expect("slot").iter())
        .filter_map(|d| dates.get(d["url"].as_str().unwrap_or_default()).copied())
        .collect();
    assert!(!known.is_empty(), "{what}: no fabricated page: {body}");
    assert!(
        known.iter().all(|d| *d < cutoff),
        "{what}: a page dated on or after the cutoff: {body}"
    );
}

/// The batch endpoints run their queries on other tasks: a key's cutoff still holds there.
#[tokio::test]
async fn a_pinned_keys_batches_keep_to_its_date() {
    let Some(index) = samples_index() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.toml");
    std::fs::write(
        &keys,
        "[[key]]\nname = \"eval\"\nkey = \"eval-0123456789abcdef\"\nas_of = \"2015-06-30\"\n",
    )
    .expect("keys");
    let s = state(index, &["--api-keys", keys.to_str().expect("path")]);
    let pinned = [("authorization", "Bearer eval-0123456789abcdef")];
    let cutoff = parse_day("2015-07-01").expect("day");
    let (status, body) = support::call_with(
        &s,
        "POST",
        "/retrieve",
        &pinned,
        Some(json!({"queries": ["labs program update", "community garden expansion"], "topk": 20})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    retrieved_before("retrieve", &body, cutoff);
    let (status, body) = support::call_with(
        &s,
        "POST",
        "/v1/search/batch",
        &pinned,
        Some(json!({"queries": [{"query": "labs program update", "k": 20}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    all_within(
        "batch",
        &native_dates(&body["responses"][0]),
        i64::MIN,
        cutoff,
    );
}

/// A session pinned to a date (`PUT /v1/sessions/{id}`, as a harness does for a question asked
/// then) sees the web as of it from then on, in every API: its searches find nothing later, and
/// a later page it was shown before the pin reads as one never shown. The pin never moves.
#[tokio::test]
async fn a_session_pinned_to_a_date_never_sees_a_newer_page() {
    let Some(index) = samples_index() else { return };
    let s = state(index, &[]);
    let cutoff = parse_day("2015-07-01").expect("day");
    let query = json!({"query": "labs program update", "k": 20, "session": "q-7"});
    let (_, body) = call(&s, "POST", "/v1/search", Some(query.clone())).await;
    let shown: Vec<(String, Option<i64>)> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let date = document_instant(r["date"].as_str().unwrap_or_default());
            (r["url"].as_str().expect("url").to_string(), date)
        })
        .collect();
    let newer = shown
        .iter()
        .find(|(_, d)| d.is_some_and(|d| d >= cutoff))
        .expect("the unpinned session is shown a newer page")
        .0
        .clone();
    let older = shown
        .iter()
        .find(|(_, d)| d.is_some_and(|d| d < cutoff))
        .expect("and an older one")
        .0
        .clone();

    let pin = json!({"as_of": "2015-06-30"});
    let (status, body) = call(&s, "PUT", "/v1/sessions/q-7", Some(pin.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["sees_before"], "2015-07-01T00:00:00Z");
    // A retry is the same pin; another date is refused, naming the one it has.
    let (status, _) = call(&s, "PUT", "/v1/sessions/q-7", Some(pin)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(
        &s,
        "PUT",
        "/v1/sessions/q-7",
        Some(json!({"as_of": "2020-01-01"})),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("2015-06-30"), "{message}");
    for bad in [
        json!({"as_of": "June 2015"}),
        json!({}),
        json!({"as_of": 2015}),
    ] {
        let (status, body) = call(&s, "PUT", "/v1/sessions/q-8", Some(bad)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("as_of"),
            "{body}"
        );
    }

    let (_, body) = call(&s, "POST", "/v1/search", Some(query)).await;
    all_within("pinned session", &native_dates(&body), i64::MIN, cutoff);
    let (_, body) = call(
        &s,
        "POST",
        "/s/q-7/serper/search",
        Some(json!({"q": "labs program update", "tbs": "qdr:y"})),
    )
    .await;
    assert_eq!(body["organic"], json!([]), "{body}");
    let (status, body) = call(
        &s,
        "POST",
        "/s/q-7/retrieve",
        Some(json!({"queries": ["labs program update"], "topk": 20})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    retrieved_before("pinned retrieve", &body, cutoff);
    let (_, body) = call(
        &s,
        "POST",
        "/s/q-7/mcp",
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "web_search", "arguments": {"query": "labs program update", "k": 10}}})),
    )
    .await;
    let mcp: Vec<Option<i64>> = body["result"]["structuredContent"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| document_instant(r["date"].as_str().unwrap_or_default()))
        .collect();
    all_within("pinned mcp", &mcp, i64::MIN, cutoff);

    // Visits: the older page reads, the newer one (shown before the pin) does not, in any API.
    let visit = |url: &str| json!({"url": url, "session": "q-7"});
    let (status, _) = call(&s, "POST", "/v1/visit", Some(visit(&older))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(&s, "POST", "/v1/visit", Some(visit(&newer))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "url_not_seen");
    let (status, _) = call(
        &s,
        "POST",
        "/s/q-7/serper/scrape",
        Some(json!({"url": newer})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (_, transcript) = call(&s, "GET", "/v1/sessions/q-7", None).await;
    assert_eq!(transcript["as_of"], "2015-06-30", "{transcript}");
}
