//! The server in hybrid mode with the real MiniLM query embedder, and its refusal of an index
//! built with a different model.

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use clap::Parser;
use serde_json::{Value, json};
use stillweb_models::fake::HashingEmbedder;
use stillweb_models::{Embedder, ExecutionProvider, load_embedder};
use stillweb_server::{Args, app, prepare};
use tower::ServiceExt;

mod support;

fn embedder_dir() -> Option<PathBuf> {
    let dir = stillweb_models::config::default_embedder_dir();
    stillweb_test_support::fetched(&dir.join("model.toml"), "models/fetch").then_some(dir)
}

const DOCS: &[(&str, &str)] = &[
    (
        "Volcano",
        "A volcano is a rupture in the crust of a planet through which lava, ash and gases escape.",
    ),
    (
        "Violin",
        "The violin is a wooden string instrument played with a bow.",
    ),
    (
        "Photosynthesis",
        "Photosynthesis is the process by which plants turn light, water and carbon dioxide into sugar.",
    ),
    (
        "Glacier",
        "A glacier is a persistent body of dense ice that moves slowly under its own weight.",
    ),
    (
        "Stock market",
        "A stock market is where shares of publicly held companies are bought and sold.",
    ),
];

fn build(dir: &Path, embedder: &mut dyn Embedder) -> PathBuf {
    let lines: String = DOCS
        .iter()
        .map(|(title, text)| {
            json!({"id": title, "url": format!("https://kb.example/{}", title.replace(' ', "_")), "title": title, "text": text}).to_string() + "\n"
        })
        .collect();
    std::fs::write(dir.join("docs.jsonl"), lines).expect("write");
    std::fs::write(
        dir.join("m.toml"),
        "name = \"kb\"\n[[source]]\nformat = \"jsonl\"\npath = \"docs.jsonl\"\n",
    )
    .expect("write");
    let corpus =
        stillweb_corpus::manifest::CorpusManifest::load(&dir.join("m.toml")).expect("manifest");
    let out = dir.join("index");
    stillweb_index::build_index_with(
        &corpus,
        &out,
        &stillweb_index::BuildOptions::default(),
        Some(embedder),
    )
    .expect("build");
    out
}

#[tokio::test]
async fn hybrid_search_finds_a_paraphrase_without_shared_words() {
    let Some(model_dir) = embedder_dir() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = load_embedder(&model_dir, None, ExecutionProvider::Cpu, 2).expect("model");
    let index = build(dir.path(), &mut model);
    let state = prepare(
        Args::parse_from(["s", "--index", index.to_str().expect("path")])
            .validate()
            .expect("config"),
    )
    .expect("state");
    assert!(
        state.corpus().embedder_id().is_some(),
        "hybrid mode loads the query embedder"
    );
    // No word of this query occurs in the corpus: only the dense signal can answer it.
    let request = Request::builder()
        .method("POST")
        .uri("/v1/search")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"query": "frozen river of compacted snow", "k": 2}).to_string(),
        ))
        .expect("request");
    let response = app(state.clone()).oneshot(request).await.expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = serde_json::from_slice(
        &axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body"),
    )
    .expect("json");
    assert_eq!(body["results"][0]["title"], "Glacier", "{body}");

    // Explained, every signal (the cosine too) recomposes the hybrid scores and order.
    for query in [
        "frozen river of compacted snow",
        "wooden instrument with strings",
    ] {
        let (status, explained) = support::call(
            &state,
            "POST",
            "/v1/search",
            Some(json!({"query": query, "k": 5, "explain": true})),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        support::assert_explained(&explained);
        assert!(
            explained["results"][0]["explain"]["chunk_cosine"].is_number(),
            "{explained}"
        );
        assert!(explained["explain"]["weights"]["dense_chunk"].as_f64() > Some(0.0));
    }
}

#[test]
fn an_index_built_with_another_model_is_refused() {
    let Some(_) = embedder_dir() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let index = build(dir.path(), &mut HashingEmbedder::new(384));
    let err = prepare(
        Args::parse_from(["s", "--index", index.to_str().expect("path")])
            .validate()
            .expect("config"),
    )
    .expect_err("mismatch");
    let message = format!("{err:#}");
    assert!(
        message.contains("stillweb/hashing-test-embedder") && message.contains("rebuild the index"),
        "{message}"
    );
    // BM25 mode does not need the model.
    let bm25 = prepare(
        Args::parse_from([
            "s",
            "--index",
            index.to_str().expect("path"),
            "--mode",
            "bm25",
        ])
        .validate()
        .expect("config"),
    );
    assert!(bm25.is_ok());
}
