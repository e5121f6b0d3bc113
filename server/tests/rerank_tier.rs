//! A rerank tier on loopback: two real stillweb servers with the Qwen3 fixture reranker answer
//! `POST /rerank`, and a third server reranks through them with `--reranker-url`: the same
//! results as reranking in process, no failed search when one tier server is killed under load,
//! and `rerank_unavailable` once both are gone.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{post, qwen3_fixture, samples_index, spawn_server};

const QUERIES: [&str; 4] = [
    "Anarchism",
    "history of the Roman empire and its emperors",
    "Drekev Labs fellowship",
    "freight emissions prize",
];

fn ranked(body: &Value) -> Vec<(String, String)> {
    body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| (r["url"].to_string(), r["score"].to_string()))
        .collect()
}

#[test]
fn a_server_reranks_through_a_tier_and_survives_losing_half_of_it() {
    let Some(index) = samples_index() else { return };
    let Some(fixture) = qwen3_fixture() else {
        return;
    };
    let fixture = fixture.to_str().expect("path");
    let tier_flags = ["--reranker", fixture, "--rerank-pool", "8"];
    let mut tier_a = Some(spawn_server(index, &tier_flags));
    let tier_b = spawn_server(index, &tier_flags);
    let urls = format!("{},{}", tier_a.as_ref().expect("a").url, tier_b.url);
    let front = spawn_server(
        index,
        &[
            "--reranker-url",
            &urls,
            "--rerank-pool",
            "8",
            "--reranker-timeout-ms",
            "5000",
        ],
    );
    let (_, info) = support::get(&front.url, "/info");
    let (_, tier_info) = support::get(&tier_b.url, "/info");
    assert_eq!(
        info["models"]["reranker"], tier_info["models"]["reranker"],
        "{info}"
    );

    // The same ranking as reranking in process (a tier server's own search).
    for query in QUERIES {
        let body = json!({"query": query, "k": 10});
        let (status, through_tier) = post(&front.url, "/v1/search", body.clone());
        let (_, in_process) = post(&tier_b.url, "/v1/search", body);
        assert_eq!(status, 200, "{through_tier}");
        assert_eq!(through_tier["reranked"], true);
        assert_eq!(ranked(&through_tier), ranked(&in_process), "{query}");
    }

    // Under load from 4 clients, tier server A is killed: no search fails.
    let front_url = front.url.clone();
    let load = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(6);
        let clients: Vec<_> = (0..4)
            .map(|c| {
                let url = front_url.clone();
                std::thread::spawn(move || {
                    let (mut ok, mut failed) = (0, Vec::new());
                    let mut i = c;
                    while std::time::Instant::now() < deadline {
                        // Different queries, so the result cache does not answer.
                        let query = format!("{} {i}", QUERIES[i % QUERIES.len()]);
                        let (status, body) = post(&url, "/v1/search", json!({"query": query}));
                        if status == 200 && body["reranked"] == true {
                            ok += 1;
                        } else {
                            failed.push(format!("{status} {body}"));
                        }
                        i += 4;
                    }
                    (ok, failed)
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().expect("client")).fold(
            (0, Vec::new()),
            |(ok, mut failed), (o, f)| {
                failed.extend(f);
                (ok + o, failed)
            },
        )
    });
    std::thread::sleep(Duration::from_secs(2));
    drop(tier_a.take()); // SIGKILL
    let (ok, failed) = load.join().expect("load");
    eprintln!("{ok} reranked searches, {} failed", failed.len());
    assert!(failed.is_empty(), "{failed:?}");
    assert!(ok >= 8, "{ok} searches");

    // With the whole tier gone: rerank_unavailable, and unreranked searches still answer.
    drop(tier_b);
    let (status, body) = post(&front.url, "/v1/search", json!({"query": "Anarchism 2"}));
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "rerank_unavailable");
    let (status, body) = post(
        &front.url,
        "/v1/search",
        json!({"query": "Anarchism 3", "rerank": false}),
    );
    assert_eq!(status, 200, "{body}");
}
