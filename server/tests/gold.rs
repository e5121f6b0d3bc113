//! `--gold` over the samples index with the fabricated items' labels: transcripts say at which
//! search step each question's gold page first surfaced (or "never") and whether it was read,
//! labelled URLs are marked, the Prometheus counters count sessions, and the labels change no
//! search or visit response by a byte.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use support::{call, samples_index, send, shared_data, state};

fn items() -> Option<(std::path::PathBuf, Vec<Value>)> {
    let path = shared_data()?.join("fabricated/items.jsonl");
    let items = std::fs::read_to_string(&path)
        .expect("items")
        .lines()
        .map(|l| serde_json::from_str(l).expect("item"))
        .collect();
    Some((path, items))
}

async fn raw(s: &stillweb_server::AppState, path: &str, body: Value) -> (StatusCode, Vec<u8>) {
    let request = Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("request");
    let (status, _, bytes) = send(s, request).await;
    (status, bytes.to_vec())
}

#[tokio::test]
async fn transcripts_say_when_the_gold_page_surfaced_and_labels_change_no_response() {
    let Some(index) = samples_index() else { return };
    let Some((path, items)) = items() else { return };
    let labelled = state(index, &["--gold", path.to_str().expect("path")]);
    let plain = state(index, &[]);

    // An item whose question brings up its gold page, and the rank it comes at.
    let mut found = None;
    for item in items.iter().take(40) {
        let question = item["question"].as_str().expect("question");
        let (_, body) = call(
            &plain,
            "POST",
            "/v1/search",
            Some(json!({"query": question})),
        )
        .await;
        let urls: Vec<&str> = body["results"]
            .as_array()
            .expect("results")
            .iter()
            .filter_map(|r| r["url"].as_str())
            .collect();
        if let Some(rank) = urls.iter().position(|u| *u == item["gold_url"]) {
            found = Some((item.clone(), rank + 1));
            break;
        }
    }
    let (item, rank) = found.expect("some item's question finds its gold page");
    let question = item["question"].as_str().expect("question");
    let gold_url = item["gold_url"].as_str().expect("gold");

    // Episode 1: an unrelated search, then the question (gold at step 2), then a read of it.
    // Episode 2: only a search that excludes the gold page's site: "never".
    let gold_host = url::Url::parse(gold_url)
        .expect("url")
        .host_str()
        .expect("host")
        .to_string();
    let episodes = [
        (
            "e1",
            vec![
                "history of the Roman empire".to_string(),
                question.to_string(),
            ],
        ),
        ("e2", vec![format!("{question} -site:{gold_host}")]),
    ];
    for (session, queries) in &episodes {
        for query in queries {
            let body = json!({"query": query, "session": session});
            let with = raw(&labelled, "/v1/search", body.clone()).await;
            let without = raw(&plain, "/v1/search", body).await;
            assert_eq!(with.0, StatusCode::OK);
            assert_eq!(with, without, "labels changed a search response: {query}");
        }
    }
    let visit = json!({"url": gold_url, "session": "e1"});
    let with = raw(&labelled, "/v1/visit", visit.clone()).await;
    let without = raw(&plain, "/v1/visit", visit).await;
    assert_eq!(with.0, StatusCode::OK);
    assert_eq!(with, without, "labels changed a visit response");

    let (status, e1) = call(&labelled, "GET", "/v1/sessions/e1", None).await;
    assert_eq!(status, StatusCode::OK);
    let summary = e1["labels"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|s| s["item"] == item["id"])
        .unwrap_or_else(|| panic!("no summary for {}: {e1}", item["id"]))
        .clone();
    assert_eq!(summary["gold_shown_at_step"], 2, "{summary}");
    assert_eq!(summary["gold_rank"], rank, "{summary}");
    assert_eq!(summary["gold_visited"], true, "{summary}");
    assert_eq!(e1["labels"]["urls"][gold_url][0]["role"], "gold", "{e1}");

    let (_, e2) = call(&labelled, "GET", "/v1/sessions/e2", None).await;
    let summary = e2["labels"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|s| s["item"] == item["id"])
        .unwrap_or_else(|| panic!("the question's item is summarised: {e2}"))
        .clone();
    assert_eq!(summary["gold_shown_at_step"], "never", "{summary}");
    assert_eq!(summary["gold_visited"], false);

    // Without labels, the transcript has none.
    let (_, unlabelled) = call(&plain, "GET", "/v1/sessions/e1", None).await;
    assert!(unlabelled.get("labels").is_none(), "{unlabelled}");

    // The counters: the sessions shown some item's gold page (their labels say which), and the
    // one that read it.
    let surfaced = [&e1, &e2]
        .iter()
        .filter(|t| {
            t["labels"]["urls"].as_object().is_some_and(|urls| {
                urls.values()
                    .filter_map(Value::as_array)
                    .flatten()
                    .any(|l| l["role"] == "gold")
            })
        })
        .count();
    assert!(surfaced >= 1);
    let request = Request::builder()
        .uri("/metrics")
        .body(Body::empty())
        .expect("request");
    let (_, _, metrics) = send(&labelled, request).await;
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains(&format!(
            "stillweb_gold_sessions_total{{event=\"surfaced\"}} {surfaced}"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("stillweb_gold_sessions_total{event=\"visited\"} 1"),
        "{metrics}"
    );
    let (_, info) = call(&labelled, "GET", "/info", None).await;
    assert_eq!(info["gold"]["items"], items.len());
}

#[test]
fn a_bad_labels_file_stops_the_server_with_the_line() {
    let stderr = support::refused_at_start("--gold", "items.jsonl", "{\"id\": \"q1\"}\n");
    assert!(
        stderr.contains("items.jsonl") && stderr.contains("line 1"),
        "{stderr}"
    );
}
