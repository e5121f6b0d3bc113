//! An index holding part of a corpus scores BM25 exactly as the whole corpus's index does once
//! it is given the corpus's statistics (the basis of sharded serving), and differently without.

use std::collections::HashMap;
use std::path::Path;

use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::bm25_stats::Bm25Stats;
use stillweb_index::search::Mode;
use stillweb_index::search::fetch::Pages;
use stillweb_index::{BuildOptions, SearchIndex, build_index, parse};

mod support;

/// Builds an index of the documents `keep` selects (by number) from the shared synthetic corpus.
fn build(dir: &Path, name: &str, keep: impl Fn(usize) -> bool) -> SearchIndex {
    let part = dir.join(name);
    std::fs::create_dir_all(&part).expect("dir");
    let corpus = CorpusManifest::load(&support::write_corpus(&part, 400, keep)).expect("manifest");
    build_index(&corpus, &part.join("index"), &BuildOptions::default()).expect("build");
    SearchIndex::open(&part.join("index")).expect("open")
}

/// Each candidate document's id with its BM25 and its chunks' BM25, for `query` (BM25 only).
fn scores(index: &SearchIndex, query: &str) -> HashMap<String, (f32, Vec<Option<f32>>)> {
    let prepared = index.prepare(parse(query), None, &Mode::Bm25.weights());
    let candidates = index.candidates(&prepared, 1000).expect("candidates");
    let chunks = index
        .chunk_scores(&prepared, &candidates.ordinals())
        .expect("chunks");
    let mut pages = Pages::default();
    index
        .fetch(candidates.ordinals(), [], &mut pages)
        .expect("fetch");
    candidates
        .bm25
        .iter()
        .map(|&(ord, score)| {
            let chunk_scores = chunks
                .iter()
                .filter(|c| c.doc == ord)
                .map(|c| c.bm25)
                .collect();
            (pages.docs[&ord].doc_id.clone(), (score, chunk_scores))
        })
        .collect()
}

#[test]
fn a_part_scores_like_the_whole_with_the_whole_corpus_statistics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let whole = build(dir.path(), "whole", |_| true);
    let even = build(dir.path(), "even", |d| d % 2 == 0);
    let odd = build(dir.path(), "odd", |d| d % 2 == 1);

    let stats = Bm25Stats::of(&[&even, &odd]).expect("parts' stats");
    assert_eq!(stats, Bm25Stats::of(&[&whole]).expect("whole's stats"));
    assert_eq!(stats.docs.records, 400);

    let alone = scores(&even, "glacier falcon quartz");
    let even = even.with_bm25_stats(stats);
    for query in ["glacier falcon quartz", "violin", "reactor turbine monsoon"] {
        let part = scores(&even, query);
        let full = scores(&whole, query);
        assert!(!part.is_empty(), "{query}");
        for (id, (doc, chunks)) in &part {
            let (full_doc, full_chunks) = &full[id];
            // Both are summed in query order, so they are identical.
            assert_eq!(chunks, full_chunks, "{query}: document {id}'s chunks");
            assert_eq!(doc.to_bits(), full_doc.to_bits(), "{query}: document {id}");
        }
    }
    // Without the corpus's statistics the part scores differently: the test can fail.
    let with = scores(&even, "glacier falcon quartz");
    assert!(
        alone
            .iter()
            .any(|(id, (doc, _))| (doc - with[id].0).abs() > 1e-3)
    );
}
