//! Dense and hybrid retrieval plumbing with a deterministic hashing embedder (fast, no model), and
//! HNSW recall against exact search. Quality with the real model is measured in the indexer's tests.

use std::path::Path;
use std::sync::Arc;

use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::chunk_vectors::Precision;
use stillweb_index::dense::DocVectors;
use stillweb_index::revector::Revector;
use stillweb_index::search::{Mode, SearchParams};
use stillweb_index::{BuildOptions, IndexError, Retriever, SearchIndex, build_index_with};
use stillweb_model_core::Embedder;
use stillweb_model_core::fake::HashingEmbedder;

mod support;

use support::{WORDS, write_corpus};

fn build(dir: &Path, documents: usize, doc_vectors: DocVectors) -> SearchIndex {
    build_with(
        dir,
        documents,
        doc_vectors,
        BuildOptions::default().chunk_precision,
    )
}

/// An index of `documents` generated pages with chunk vectors stored at `precision`.
fn build_with(
    dir: &Path,
    documents: usize,
    doc_vectors: DocVectors,
    precision: Precision,
) -> SearchIndex {
    let manifest = CorpusManifest::load(&write_corpus(dir, documents, |_| true)).expect("manifest");
    let out = dir.join(format!("index-{doc_vectors:?}-{precision}"));
    let options = BuildOptions {
        doc_vectors,
        chunk_precision: precision,
        ..BuildOptions::default()
    };
    build_at(&manifest, &out, &options);
    SearchIndex::open(&out).expect("open")
}

/// Builds `manifest` into `out` with the 64-dimension hashing embedder.
fn build_at(manifest: &CorpusManifest, out: &Path, options: &BuildOptions) {
    let mut embedder = HashingEmbedder::new(64);
    build_index_with(
        manifest,
        out,
        options,
        Some(&mut embedder as &mut dyn Embedder),
    )
    .expect("build");
}

/// A revector that changes only the document representation.
fn doc_vectors(doc_vectors: DocVectors, graph_threads: usize) -> Revector {
    Revector {
        doc_vectors: Some(doc_vectors),
        chunk_precision: None,
        graph_segment_nodes: None,
        graph_threads,
    }
}

#[test]
fn dense_manifest_and_modes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let retriever = Retriever::new(
        Arc::new(build(dir.path(), 300, DocVectors::BestChunk)),
        None,
        None,
    )
    .expect("retriever");
    let index = retriever.index();
    let dense = index.manifest().dense.as_ref().expect("dense manifest");
    assert_eq!(dense.model_id, "stillweb/hashing-test-embedder");
    assert_eq!(dense.dimension, 64);
    // The engine that computed the vectors is recorded; another one is named in a warning.
    assert_eq!(dense.engine.as_deref(), Some("hashing"));
    assert_eq!(dense.engine_mismatch("hashing"), None);
    let warning = dense.engine_mismatch("native-int8").expect("a warning");
    assert!(warning.contains("`hashing`") && warning.contains("--engine hashing"));
    assert_eq!(dense.chunk_vectors, index.manifest().chunks);

    let mut embedder = HashingEmbedder::new(64);
    let query = "glacier falcon quartz";
    let vector = embedder.embed_queries(&[query]).expect("embed").remove(0);
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let params = SearchParams {
            k: 10,
            weights: mode.weights(),
            ..SearchParams::default()
        };
        let hits = retriever
            .search_embedded(&stillweb_index::parse(query), Some(vector.clone()), &params)
            .expect("search")
            .hits;
        assert_eq!(hits.len(), 10, "{mode:?}");
        assert!(
            hits.windows(2).all(|w| w[0].score >= w[1].score),
            "{mode:?} sorted"
        );
        assert!(
            hits.iter()
                .all(|h| !h.snippet.is_empty() && h.snippet.chars().count() <= 500)
        );
        // Deterministic.
        assert_eq!(
            hits,
            retriever
                .search_embedded(&stillweb_index::parse(query), Some(vector.clone()), &params)
                .expect("again")
                .hits
        );
    }
    // Dense mode without a query vector has nothing to go on.
    let dense_only = SearchParams {
        weights: Mode::Dense.weights(),
        ..SearchParams::default()
    };
    assert!(
        retriever
            .search_embedded(&stillweb_index::parse(query), None, &dense_only)
            .expect("search")
            .hits
            .is_empty()
    );
    // Another model is refused.
    let err = index
        .check_embedder("other/model", 64, "hashing")
        .expect_err("mismatch");
    assert!(matches!(err, IndexError::ModelMismatch { .. }));
    assert!(err.to_string().contains("rebuild the index"));
}

/// HNSW over document vectors against exact search over the same vectors: recall@10 floor.
#[test]
fn hnsw_recall_against_exact_search() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = build(dir.path(), 3000, DocVectors::BestChunk);
    let dense = index.dense().expect("dense");
    assert_eq!(dense.graph_segments(), 1);
    assert_eq!(dense.manifest().graph_segment_nodes, None, "one graph");
    let recall = recall_at_10(&index);
    eprintln!("HNSW recall@10 vs exact: {recall:.3}");
    assert!(recall >= 0.95, "recall@10 {recall}");
}

/// A graph built in segments (each in memory only while it is built) is searched as one: every
/// segment is walked, the best kept, so it finds what exact search finds, for chunk nodes and for
/// document nodes alike, filtered or not.
#[test]
fn a_graph_built_in_segments_is_searched_as_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest =
        CorpusManifest::load(&write_corpus(dir.path(), 3000, |_| true)).expect("manifest");
    for doc_vectors in [DocVectors::BestChunk, DocVectors::Mean] {
        let out = dir.path().join(format!("segments-{doc_vectors:?}"));
        let options = BuildOptions {
            doc_vectors,
            graph_segment_nodes: 700,
            ..BuildOptions::default()
        };
        build_at(&manifest, &out, &options);
        let index = SearchIndex::open(&out).expect("open");
        let dense = index.dense().expect("dense");
        let nodes = match doc_vectors {
            DocVectors::BestChunk => index.manifest().chunks,
            _ => index.manifest().documents,
        };
        assert_eq!(
            dense.graph_segments() as u64,
            nodes.div_ceil(700),
            "{doc_vectors:?}: {nodes} nodes"
        );
        let recorded = index.manifest().dense.as_ref().expect("dense manifest");
        assert_eq!(recorded.graph_segment_nodes, Some(700));
        let recall = recall_at_10(&index);
        eprintln!(
            "{doc_vectors:?} in {} segments: recall@10 vs exact {recall:.3}",
            dense.graph_segments()
        );
        assert!(recall >= 0.95, "{doc_vectors:?}: recall@10 {recall}");

        // A filter spanning every segment still gets its nearest allowed documents.
        let query = HashingEmbedder::new(64)
            .embed_queries(&[WORDS[4]])
            .expect("embed")
            .remove(0);
        let allowed: Vec<u64> = (0..index.manifest().documents).step_by(5).collect();
        let found = dense
            .search_docs_among(&query, 10, &allowed)
            .expect("filtered");
        let all = allowed.iter().map(|&d| (d, index.chunk_range(d)));
        let exact = dense.rank_exactly(&query, all, 10).expect("exact");
        assert_eq!(found.len(), 10);
        assert!(found.iter().all(|(d, _)| d % 5 == 0), "{found:?}");
        let threshold = exact[9].1;
        let hits = found.iter().filter(|f| f.1 >= threshold - 1e-6).count();
        assert!(
            hits >= 9,
            "{doc_vectors:?}: {hits}/10 of exact, {found:?} vs {exact:?}"
        );

        // Revector re-splits the graph on request, and otherwise keeps the source's split.
        let resplit = |name: &str, change: Revector| {
            let to = dir.path().join(format!("{name}-{doc_vectors:?}"));
            stillweb_index::revector::revector(&out, &to, change, false).expect("revector");
            SearchIndex::open(&to).expect("open")
        };
        let whole = resplit(
            "whole",
            Revector {
                graph_segment_nodes: Some(nodes),
                ..Revector::default()
            },
        );
        assert_eq!(whole.dense().expect("dense").graph_segments(), 1);
        let recorded = whole.manifest().dense.as_ref().expect("dense manifest");
        assert_eq!(recorded.graph_segment_nodes, None);
        assert_eq!(recorded.doc_vectors, doc_vectors);
        assert!(recall_at_10(&whole) >= 0.95);
        let kept = resplit("kept", self::doc_vectors(doc_vectors, 0));
        let recorded = kept.manifest().dense.as_ref().expect("dense manifest");
        assert_eq!(recorded.graph_segment_nodes, Some(700));
    }
}

/// Recall@10 of 100 queries' dense document search against an exact scan (a document tied with
/// the tenth counts as found).
fn recall_at_10(index: &SearchIndex) -> f64 {
    let dense = index.dense().expect("dense");
    let mut embedder = HashingEmbedder::new(64);
    let mut found = 0usize;
    let queries = 100;
    for q in 0..queries {
        let text = format!(
            "{} {} {}",
            WORDS[q % 30],
            WORDS[(q * 7 + 3) % 30],
            WORDS[(q * 13 + 5) % 30]
        );
        let vector = embedder.embed_queries(&[&text]).expect("embed").remove(0);
        let approximate = dense.search_docs(&vector, 10).expect("ann");
        let all = (0..index.manifest().documents).map(|d| (d, index.chunk_range(d)));
        let exact = dense.rank_exactly(&vector, all, 10).expect("exact");
        let threshold = exact[9].1;
        found += approximate
            .iter()
            .filter(|(_, s)| *s >= threshold - 1e-6)
            .count();
    }
    found as f64 / (queries * 10) as f64
}

/// Re-deriving the document graph from stored chunk vectors gives the index a build with that
/// representation would have given, without embedding again.
#[test]
fn doc_vectors_can_be_changed_without_embedding_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Full-precision vectors, so that the graphs' vectors match exactly (from rounded ones, the
    // mean is that of the rounded vectors).
    let best = build_with(dir.path(), 200, DocVectors::BestChunk, Precision::F32);
    let direct = build_with(dir.path(), 200, DocVectors::Mean, Precision::F32);
    let out = dir.path().join("revectored");
    let manifest = stillweb_index::revector::revector(
        best.dir(),
        &out,
        doc_vectors(DocVectors::Mean, 0),
        false,
    )
    .expect("revector");
    assert_eq!(manifest.build_id, direct.manifest().build_id);
    assert_ne!(manifest.build_id, best.manifest().build_id);
    let revectored = Arc::new(SearchIndex::open(&out).expect("open"));
    assert_eq!(
        revectored.manifest().dense.as_ref().map(|d| d.doc_vectors),
        Some(DocVectors::Mean)
    );
    let mut embedder = HashingEmbedder::new(64);
    // Graphs are inserted from several threads, so two builds' graphs (and so the approximate
    // search's candidates) can differ; what must be identical is the representation: every
    // document scored exactly by its graph vector.
    let all_docs = |index: &SearchIndex| {
        (0..index.manifest().documents)
            .map(|d| (d, index.chunk_range(d)))
            .collect::<Vec<_>>()
    };
    for query in [
        "glacier falcon quartz",
        "sonnet fresco cathedral",
        "reactor turbine",
    ] {
        let vector = embedder.embed_queries(&[query]).expect("embed").remove(0);
        let exact = |index: &SearchIndex| {
            index
                .dense()
                .expect("dense")
                .rank_exactly(&vector, all_docs(index).into_iter(), 200)
                .expect("rank")
        };
        assert_eq!(exact(&revectored), exact(&direct), "{query}");
        // And a search over it still answers.
        let params = SearchParams {
            k: 10,
            weights: Mode::Dense.weights(),
            ..SearchParams::default()
        };
        let hits = Retriever::new(Arc::clone(&revectored), None, None)
            .expect("retriever")
            .search_embedded(&stillweb_index::parse(query), Some(vector.clone()), &params)
            .expect("search")
            .hits;
        assert_eq!(hits.len(), 10, "{query}");
    }
    // The output is refused if it exists; an index without vectors cannot be revectored.
    let err = stillweb_index::revector::revector(
        best.dir(),
        &out,
        doc_vectors(DocVectors::Lead, 0),
        false,
    )
    .expect_err("exists");
    assert!(matches!(err, IndexError::Exists { .. }));
    let lexical = dir.path().join("lexical");
    stillweb_index::build_index(
        &CorpusManifest::load(&dir.path().join("m.toml")).expect("manifest"),
        &lexical,
        &BuildOptions::default(),
    )
    .expect("build");
    let err = stillweb_index::revector::revector(
        &lexical,
        &dir.path().join("never"),
        doc_vectors(DocVectors::Mean, 0),
        false,
    )
    .expect_err("no vectors");
    assert!(err.to_string().contains("has no vectors"), "{err}");
    assert!(!dir.path().join("never").exists());
}

/// A damaged dense part (vectors cut short, graph missing) is refused when the index is opened,
/// naming the file, rather than served half-built.
/// One graph thread builds the same document graph byte for byte every time (research users
/// rebuilding a frozen corpus expect the same index), and the revectored copy does too.
#[test]
fn one_graph_thread_builds_identical_graphs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest =
        CorpusManifest::load(&write_corpus(dir.path(), 400, |_| true)).expect("manifest");
    let options = BuildOptions {
        graph_threads: 1,
        ..BuildOptions::default()
    };
    let graph = |name: &str| {
        let out = dir.path().join(name);
        build_at(&manifest, &out, &options);
        (
            out.clone(),
            std::fs::read(out.join("dense/graph.links")).expect("graph"),
        )
    };
    let (first_dir, first) = graph("first");
    let (_, second) = graph("second");
    assert!(!first.is_empty());
    assert!(
        first == second,
        "two one-thread builds gave different graphs"
    );

    let revectored = |name: &str| {
        let out = dir.path().join(name);
        stillweb_index::revector::revector(
            &first_dir,
            &out,
            doc_vectors(DocVectors::Mean, 1),
            false,
        )
        .expect("revector");
        std::fs::read(out.join("dense/graph.links")).expect("graph")
    };
    assert!(revectored("mean-1") == revectored("mean-2"));
}

/// Chunk vectors stored as f16 or i8 — by a build or by a revector of an f32 index, which give
/// the same index id — score within their rounding of f32 and rank nearly alike; the graph (built
/// from full precision either way) is kept; a precision cannot be raised again.
#[test]
fn chunk_vectors_can_be_stored_at_lower_precision() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = build_with(dir.path(), 200, DocVectors::BestChunk, Precision::F32);
    let manifest = CorpusManifest::load(&dir.path().join("m.toml")).expect("manifest");
    let direct_dir = dir.path().join("direct-i8");
    build_at(
        &manifest,
        &direct_dir,
        &BuildOptions {
            chunk_precision: Precision::I8,
            ..BuildOptions::default()
        },
    );
    let direct = SearchIndex::open(&direct_dir).expect("open");
    assert!(direct_dir.join("dense/chunks.i8").is_file());
    assert!(!direct_dir.join("dense/chunks.f32").exists());
    let lower = |precision: Precision| {
        let out = dir.path().join(format!("as-{precision}"));
        let change = Revector {
            chunk_precision: Some(precision),
            ..Revector::default()
        };
        let manifest =
            stillweb_index::revector::revector(full.dir(), &out, change, false).expect("revector");
        assert_eq!(
            manifest.dense.as_ref().map(|d| d.chunk_precision),
            Some(precision)
        );
        assert!(matches!(
            stillweb_index::checksums::verify(&out).expect("verify"),
            stillweb_index::checksums::Verified::All { .. }
        ));
        // Only the chunk vectors changed: the graph is the source's.
        assert_eq!(
            std::fs::read(out.join("dense/graph.links")).expect("graph"),
            std::fs::read(full.dir().join("dense/graph.links")).expect("graph")
        );
        SearchIndex::open(&out).expect("open")
    };
    let half = lower(Precision::F16);
    let i8 = lower(Precision::I8);
    assert_eq!(i8.manifest().build_id, direct.manifest().build_id);
    assert_ne!(half.manifest().build_id, full.manifest().build_id);
    assert_ne!(half.manifest().build_id, i8.manifest().build_id);
    let file_size = |index: &SearchIndex, name: &str| {
        std::fs::metadata(index.dir().join("dense").join(name))
            .expect("vectors")
            .len()
    };
    let rows = full.manifest().chunks;
    assert_eq!(file_size(&full, "chunks.f32"), rows * 64 * 4);
    assert_eq!(file_size(&half, "chunks.f16"), rows * 64 * 2);
    assert_eq!(file_size(&i8, "chunks.i8"), rows * (4 + 64));

    let mut embedder = HashingEmbedder::new(64);
    let vector = embedder
        .embed_queries(&["glacier falcon quartz"])
        .expect("embed")
        .remove(0);
    for (index, tolerance) in [(&half, 2e-3), (&i8, 2e-2), (&direct, 2e-2)] {
        let dense = index.dense().expect("dense");
        for chunk in 0..rows {
            let exact = full
                .dense()
                .expect("dense")
                .chunk_similarity(&vector, chunk);
            let rounded = dense.chunk_similarity(&vector, chunk);
            assert!(
                (exact - rounded).abs() <= tolerance,
                "chunk {chunk}: {exact} vs {rounded}"
            );
        }
    }
    let top = |index: &SearchIndex| -> Vec<u64> {
        let docs = (0..index.manifest().documents).map(|d| (d, index.chunk_range(d)));
        let ranked = index
            .dense()
            .expect("dense")
            .rank_exactly(&vector, docs, 10)
            .expect("rank");
        ranked.into_iter().map(|(d, _)| d).collect()
    };
    let reference = top(&full);
    for index in [&half, &i8] {
        let shared = top(index).iter().filter(|d| reference.contains(d)).count();
        assert!(shared >= 8, "{shared} of 10 shared");
    }

    // i8 cannot be made f16 again.
    let err = stillweb_index::revector::revector(
        i8.dir(),
        &dir.path().join("up"),
        Revector {
            chunk_precision: Some(Precision::F16),
            ..Revector::default()
        },
        false,
    )
    .expect_err("no way up");
    assert!(err.to_string().contains("--chunk-vectors f16"), "{err}");
    assert!(!dir.path().join("up").exists());

    // A damaged i8 file is named at open.
    let vectors = direct_dir.join("dense/chunks.i8");
    let bytes = std::fs::read(&vectors).expect("read");
    std::fs::write(&vectors, &bytes[..bytes.len() - 1]).expect("truncate");
    let err = SearchIndex::open(&direct_dir).expect_err("short vectors");
    assert!(err.to_string().contains("chunks.i8"), "{err}");
}

#[test]
fn damaged_vectors_or_graph_are_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index_dir = build(dir.path(), 40, DocVectors::BestChunk)
        .dir()
        .to_path_buf();
    let dense = index_dir.join("dense");
    let name = BuildOptions::default().chunk_precision.file_name();
    let vectors = dense.join(name);
    let full = std::fs::read(&vectors).expect("read vectors");
    std::fs::write(&vectors, &full[..full.len() - 4]).expect("truncate");
    let err = SearchIndex::open(&index_dir).expect_err("short vectors");
    let message = err.to_string();
    assert!(
        message.contains(name) && message.contains("rebuild"),
        "{message}"
    );

    std::fs::write(&vectors, &full).expect("restore");
    SearchIndex::open(&index_dir).expect("restored index opens");
    std::fs::remove_file(dense.join("graph.links")).expect("remove graph");
    let err = SearchIndex::open(&index_dir).expect_err("no graph");
    assert!(err.to_string().contains("graph.links"), "{err}");
}

/// A graph from another index is refused at open with what is wrong and what to do.
#[test]
fn a_foreign_graph_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = build(dir.path(), 40, DocVectors::BestChunk)
        .dir()
        .to_path_buf();
    let other_dir = dir.path().join("other");
    std::fs::create_dir_all(&other_dir).expect("mkdir");
    let other = build(&other_dir, 60, DocVectors::BestChunk)
        .dir()
        .to_path_buf();

    let graph = small.join("dense").join("graph.links");
    let own = std::fs::read(&graph).expect("read graph");
    std::fs::copy(other.join("dense").join("graph.links"), &graph).expect("swap graph");
    let err = SearchIndex::open(&small).expect_err("foreign graph");
    let message = err.to_string();
    assert!(
        message.contains("graph.links")
            && message.contains("nodes, expected")
            && message.contains("rebuild"),
        "{message}"
    );
    std::fs::write(&graph, own).expect("restore graph");
    SearchIndex::open(&small).expect("its own graph opens");
}

/// Each stage called alone, with the plain data between them, composes into exactly what the
/// retriever answers: the boundaries a coordinator will call across shards.
#[test]
fn each_stage_runs_alone_and_composes_into_the_search() {
    use stillweb_index::search::fetch::Pages;
    use stillweb_index::search::rank::rank;
    use stillweb_model_core::worker::EmbedWorker;

    let dir = tempfile::tempdir().expect("tempdir");
    let embedder =
        EmbedWorker::spawn(Box::new(HashingEmbedder::new(64)), "test-embed", 4).expect("spawn");
    let retriever = Retriever::new(
        Arc::new(build(dir.path(), 300, DocVectors::BestChunk)),
        Some(embedder),
        None,
    )
    .expect("retriever");
    let index = retriever.index();
    let params = SearchParams {
        k: 10,
        weights: Mode::Hybrid.weights(),
        ..SearchParams::default()
    };
    let text = "glacier falcon quartz";
    let parsed = stillweb_index::parse(text);

    // Embed: the retriever's vector is the model's.
    let vector = retriever.embed(text).expect("embed").expect("a vector");
    let direct = HashingEmbedder::new(64)
        .embed_queries(&[text])
        .expect("direct")
        .remove(0);
    assert_eq!(vector, direct);
    assert_eq!(retriever.embed("   ").expect("blank"), None);

    // Prepare: terms and vector, as plain data.
    let prepared = index.prepare(parsed.clone(), Some(vector), &params.weights);
    assert_eq!(prepared.terms, ["glacier", "falcon", "quartz"]);

    // Stage 1: each retriever's best documents, best first, with raw scores.
    let candidates = index.candidates(&prepared, 50).expect("candidates");
    assert_eq!(candidates.bm25.len(), 50);
    assert_eq!(candidates.dense.len(), 50);
    for list in [&candidates.bm25, &candidates.dense] {
        assert!(list.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
    }
    let bm25_alone = index.bm25_documents(&parsed, 10).expect("bm25");
    for ((ord, score), (id, expected)) in candidates.bm25.iter().zip(&bm25_alone) {
        assert_eq!((ord.to_string(), score), (id.clone(), expected));
    }
    let lexical: Vec<u64> = candidates.bm25.iter().map(|c| c.0).collect();
    assert!(
        candidates
            .dense_bm25
            .iter()
            .all(|(o, _)| !lexical.contains(o))
    );
    // The operators filter both retrievers' candidates (here an exclusion).
    let filtered = index.prepare(
        stillweb_index::parse("glacier quartz -falcon"),
        retriever.embed("glacier quartz").expect("embed"),
        &params.weights,
    );
    let kept = index
        .candidates(&filtered, 50)
        .expect("filtered candidates");
    assert!(!kept.bm25.is_empty() && !kept.dense.is_empty());
    let mut kept_pages = Pages::default();
    index
        .fetch(kept.ordinals(), [], &mut kept_pages)
        .expect("fetch");
    assert!(
        kept_pages
            .docs
            .values()
            .all(|d| !d.text.to_lowercase().contains("falcon")),
        "an excluded word's pages were candidates"
    );
    let json = serde_json::to_string(&candidates).expect("to json");
    let back: stillweb_index::search::Candidates = serde_json::from_str(&json).expect("from json");
    assert_eq!(back.bm25, candidates.bm25);

    // Stage 2: every chunk of the candidates, in chunk order, with both raw signals.
    let docs = candidates.ordinals();
    let chunks = index.chunk_scores(&prepared, &docs).expect("chunks");
    let expected: Vec<u64> = docs.iter().flat_map(|&d| index.chunk_range(d)).collect();
    assert_eq!(chunks.iter().map(|c| c.chunk).collect::<Vec<_>>(), expected);
    assert!(chunks.iter().all(|c| c.cosine.is_some()));
    assert!(chunks.iter().any(|c| c.bm25.is_some()));

    // Rank (pure) and fetch, composed by hand, equal the retriever's answer.
    let mut ranking = rank(
        &candidates.doc_bm25(),
        &chunks,
        params.weights,
        params.fusion,
    );
    ranking.ranked.truncate(params.k);
    let mut pages = Pages::default();
    index
        .fetch(
            ranking.ranked.iter().map(|r| r.doc),
            ranking.ranked.iter().filter_map(|r| r.chunk),
            &mut pages,
        )
        .expect("fetch");
    let by_hand = pages.hits(&ranking.ranked);
    assert_eq!(by_hand.len(), 10);
    let searched = SearchParams {
        candidates: 50,
        ..params
    };
    assert_eq!(
        retriever.search(&parsed, &searched).expect("search").hits,
        by_hand
    );
}

/// A format-4 index (usearch's own graph file, its copy of every vector beside the chunk
/// vectors) is refused at open with the way out, and `upgrade` turns it into this format: the
/// lexical part and the vectors linked, the same graph's links read out, the same answers.
#[test]
fn a_format_4_index_is_refused_at_open_and_upgrades_to_the_same_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let index = build(dir.path(), 120, DocVectors::BestChunk);
    let current = index.dir().to_path_buf();
    let dense = index.dense().expect("dense").manifest().clone();
    let mut embedder = HashingEmbedder::new(64);
    let queries: Vec<Vec<f32>> = (0..20)
        .map(|q| {
            let text = format!("{} {}", WORDS[q % 30], WORDS[(q * 7 + 3) % 30]);
            embedder.embed_queries(&[&text]).expect("embed").remove(0)
        })
        .collect();
    let answers = |index: &SearchIndex| -> Vec<Vec<u64>> {
        let dense = index.dense().expect("dense");
        queries
            .iter()
            .map(|q| {
                let found = dense.search_docs(q, 10).expect("search");
                found.into_iter().map(|(d, _)| d).collect()
            })
            .collect()
    };
    let expected = answers(&index);
    drop(index);

    // What a format-4 build left: usearch's graph over the chunk vectors, no links file.
    let old = dir.path().join("format-4");
    copy_dir(&current, &old);
    let graph = usearch::Index::new(
        &stillweb_index::dense::graph_options(dense.dimension, "i8").expect("options"),
    )
    .expect("graph");
    graph
        .reserve(dense.chunk_vectors as usize)
        .expect("reserve");
    let rows =
        std::fs::read(old.join("dense").join(dense.chunk_precision.file_name())).expect("rows");
    let width = dense.chunk_precision.row_width(dense.dimension);
    let mut row = vec![0f32; dense.dimension];
    for (key, bytes) in rows.chunks_exact(width).enumerate() {
        dense.chunk_precision.decode(bytes, &mut row);
        graph.add(key as u64, &row).expect("add");
    }
    graph
        .save(&old.join("dense/docs.usearch").to_string_lossy())
        .expect("save");
    std::fs::remove_file(old.join("dense/graph.links")).expect("remove links");
    let manifest = old.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let version = format!("\"format_version\": {}", stillweb_index::FORMAT_VERSION);
    assert!(text.contains(&version), "{text}");
    std::fs::write(&manifest, text.replace(&version, "\"format_version\": 4")).expect("write");

    let refused = SearchIndex::open(&old).expect_err("format 4");
    assert!(
        refused.to_string().contains("stillweb-indexer upgrade"),
        "{refused}"
    );
    let upgraded = dir.path().join("upgraded");
    let manifest = stillweb_index::revector::upgrade(&old, &upgraded, false).expect("upgrade");
    assert_eq!(manifest.format_version, stillweb_index::FORMAT_VERSION);
    assert!(!upgraded.join("dense/docs.usearch").exists());
    let upgraded_index = SearchIndex::open(&upgraded).expect("open upgraded");
    assert_eq!(answers(&upgraded_index), expected);

    let again = stillweb_index::revector::upgrade(&upgraded, &dir.path().join("twice"), false)
        .expect_err("already current");
    assert!(again.to_string().contains("needs no upgrade"), "{again}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
