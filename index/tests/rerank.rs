//! The rerank step's contract, with a scripted reranker (no model): which chunks form the pool,
//! how MaxP reorders documents, what happens to documents past the pool. The real rerankers run on
//! fixtures in the models and server tests.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::search::{CHUNKS_PER_DOCUMENT, Mode, SearchParams};
use stillweb_index::{BuildOptions, Hit, Retriever, SearchIndex, build_index};
use stillweb_model_core::worker::RerankWorker;
use stillweb_model_core::{ModelError, Reranker};

/// Scores a passage by how often it says "zebra"; remembers every passage it was shown.
#[derive(Default, Clone)]
struct Scripted {
    seen: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    fn seen(&self) -> Vec<String> {
        self.seen.lock().expect("lock").clone()
    }

    /// A retriever over `index` with this reranker on a worker thread.
    fn over(&self, index: &Arc<SearchIndex>) -> Retriever {
        let worker = RerankWorker::spawn(Box::new(self.clone()), "scripted", 4).expect("spawn");
        Retriever::new(Arc::clone(index), None, Some(worker)).expect("retriever")
    }
}

impl Reranker for Scripted {
    fn model_id(&self) -> &str {
        "scripted"
    }

    fn score(&mut self, _query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        self.seen
            .lock()
            .expect("lock")
            .extend(passages.iter().map(|p| p.to_string()));
        Ok(passages
            .iter()
            .map(|p| p.matches("zebra").count() as f32 / 10.0)
            .collect())
    }
}

/// Eight documents of four one-sentence chunks each; every sentence mentions apples. Document
/// `d` repeats "apple" more the lower `d` is, so BM25 orders them 0, 1, 2, ...; one chunk of
/// document 3 (also apple-rich, so it is among that document's best) mentions zebras.
fn index(dir: &Path) -> Arc<SearchIndex> {
    let filler = "The orchard keeps its records in a ledger that nobody has opened for many years, and the \
                  ledger itself is bound in cracked leather with brass corners and a faded ribbon";
    let mut lines = String::new();
    for d in 0..8 {
        let chunks: Vec<String> = (0..4)
            .map(|c| {
                let apples = if c == 0 {
                    "apple ".repeat(8 - d)
                } else {
                    "apple ".into()
                };
                let zebra = if d == 3 && c == 0 { " zebra zebra" } else { "" };
                format!("Chunk {c} of document {d} says {apples}{zebra}. {filler}.")
            })
            .collect();
        lines.push_str(
            &json!({"id": format!("d{d}"), "url": format!("https://example.org/{d}"),
                    "title": format!("Document {d}"), "text": chunks.join(" ")})
            .to_string(),
        );
        lines.push('\n');
    }
    std::fs::write(dir.join("docs.jsonl"), lines).expect("write");
    std::fs::write(
        dir.join("m.toml"),
        "name = \"r\"\n[[source]]\nformat = \"jsonl\"\npath = \"docs.jsonl\"\n",
    )
    .expect("write");
    let corpus = CorpusManifest::load(&dir.join("m.toml")).expect("manifest");
    build_index(&corpus, &dir.join("index"), &BuildOptions::default()).expect("build");
    Arc::new(SearchIndex::open(&dir.join("index")).expect("open"))
}

fn urls(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.url.as_str()).collect()
}

#[test]
fn the_pool_is_reordered_by_its_best_chunk_and_the_rest_keep_their_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = index(dir.path());
    let params = SearchParams {
        k: 8,
        weights: Mode::Bm25.weights(),
        ..SearchParams::default()
    };
    let plain = Retriever::new(Arc::clone(&index), None, None)
        .expect("retriever")
        .search(&stillweb_index::parse("apple"), &params)
        .expect("plain")
        .hits;
    assert_eq!(
        urls(&plain)[..4],
        [
            "https://example.org/0",
            "https://example.org/1",
            "https://example.org/2",
            "https://example.org/3"
        ]
    );

    // A pool of 8 chunks covers the first 4 documents, two chunks each.
    let reranker = Scripted::default();
    let reranked = reranker
        .over(&index)
        .search(
            &stillweb_index::parse("apple"),
            &SearchParams {
                rerank_pool: 8,
                ..params.clone()
            },
        )
        .expect("reranked")
        .hits;
    let seen = reranker.seen();
    assert_eq!(seen.len(), 8);
    for d in 0..4 {
        let from_doc = seen
            .iter()
            .filter(|p| p.starts_with(&format!("Document {d}\n")))
            .count();
        assert_eq!(from_doc, CHUNKS_PER_DOCUMENT, "document {d}");
    }
    // Document 3 wins on its zebra chunk, which becomes its snippet; the other pooled documents
    // tie at 0 and keep their order; the documents past the pool follow unchanged, with score 0.
    assert_eq!(
        urls(&reranked),
        [&urls(&plain)[3..4], &urls(&plain)[..3], &urls(&plain)[4..]].concat()
    );
    assert!((reranked[0].score - 0.2).abs() < 1e-6);
    assert!(
        reranked[0].snippet.contains("zebra"),
        "{}",
        reranked[0].snippet
    );
    assert!(reranked[4..].iter().all(|h| h.score == 0.0));

    // A pool of 0 means no reranking: the reranker is not called.
    let unused = Scripted::default();
    let same = unused
        .over(&index)
        .search(&stillweb_index::parse("apple"), &params)
        .expect("no pool")
        .hits;
    assert!(unused.seen().is_empty());
    assert_eq!(urls(&same), urls(&plain));
}

#[test]
fn a_small_pool_reaches_only_the_leading_documents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = index(dir.path());
    let params = SearchParams {
        k: 8,
        weights: Mode::Bm25.weights(),
        rerank_pool: 3,
        ..SearchParams::default()
    };
    let reranker = Scripted::default();
    let hits = reranker
        .over(&index)
        .search(&stillweb_index::parse("apple"), &params)
        .expect("search")
        .hits;
    // Three chunks: two from document 0, one from document 1; document 3's zebra is never seen.
    let seen = reranker.seen();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|p| !p.contains("zebra")));
    assert_eq!(hits[0].url, "https://example.org/0");
}
