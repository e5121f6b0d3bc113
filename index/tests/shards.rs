//! A corpus built as a set of shards holds exactly the single build's documents, under the
//! single build's ordinals, and its shards' stage 1 and stage 2, merged, score as the single
//! index does. A shard is served only once its set is finalized, and a set refuses a shard of
//! another build.

use std::collections::HashMap;
use std::path::Path;

use stillweb_corpus::manifest::CorpusManifest;
use stillweb_corpus::url_norm::normalize_url;
use stillweb_index::search::Mode;
use stillweb_index::search::fetch::Pages;
use stillweb_index::shard::{finalize, shard_dir, shard_of};
use stillweb_index::{
    BuildOptions, IndexError, SearchIndex, build_index_with, build_shards, parse,
};
use stillweb_model_core::Embedder;
use stillweb_model_core::fake::HashingEmbedder;

mod support;

/// The synthetic corpus plus, at its end, pages reusing earlier URLs (first wins).
fn corpus(dir: &Path) -> CorpusManifest {
    let manifest = support::write_corpus(dir, 300, |_| true);
    let mut docs = std::fs::read_to_string(dir.join("docs.jsonl")).expect("docs");
    for d in [3, 77, 150] {
        let late = serde_json::json!({"id": format!("late-{d}"), "url": format!("https://synthetic.example/{d}"),
                                      "title": "A late duplicate", "text": "The glacier falcon."});
        docs.push_str(&format!("{late}\n"));
    }
    std::fs::write(dir.join("docs.jsonl"), docs).expect("write");
    CorpusManifest::load(&manifest).expect("manifest")
}

fn embedder() -> HashingEmbedder {
    HashingEmbedder::new(64)
}

/// `lists` merged best first (ties by ordinal), the first `limit`.
fn merge(lists: Vec<Vec<(u64, f32)>>, limit: usize) -> Vec<(u64, f32)> {
    let mut all: Vec<(u64, f32)> = lists.into_iter().flatten().collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(limit);
    all
}

#[test]
fn shards_hold_the_single_builds_documents_and_score_like_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = corpus(dir.path());
    let single_dir = dir.path().join("single");
    build_index_with(
        &corpus,
        &single_dir,
        &BuildOptions::default(),
        Some(&mut embedder() as &mut dyn Embedder),
    )
    .expect("single build");
    let set = dir.path().join("set");
    build_shards(
        &corpus,
        &set,
        3,
        None,
        &BuildOptions::default(),
        Some(&mut embedder() as &mut dyn Embedder),
    )
    .expect("sharded build");
    let single = SearchIndex::open(&single_dir).expect("open single");
    let shards: Vec<SearchIndex> = (0..3)
        .map(|i| SearchIndex::open(&shard_dir(&set, i)).expect("open shard"))
        .collect();

    // The same documents, each in the shard its URL hashes to, under the single build's
    // ordinal; duplicates kept first-wins.
    assert_eq!(single.manifest().documents, 300);
    let build_id = &shards[0].manifest().build_id;
    let mut total = 0;
    for (i, shard) in shards.iter().enumerate() {
        let m = shard.manifest();
        assert_eq!(&m.build_id, build_id, "one build id for the set");
        let s = m.shard.as_ref().expect("a shard");
        assert_eq!((s.index, s.count, s.corpus_documents), (i as u32, 3, 300));
        assert_eq!(s.corpus_chunks, Some(single.manifest().chunks));
        total += m.documents;
        assert!(m.documents > 50, "shard {i} holds {}", m.documents);
    }
    assert_eq!(total, 300);
    assert_ne!(build_id, &single.manifest().build_id);
    for d in 0..300 {
        let key = normalize_url(&format!("https://synthetic.example/{d}")).expect("url");
        let owner = shard_of(&key, 3) as usize;
        let want = single.doc_by_url(&key).expect("lookup").expect("in single");
        let got = shards[owner]
            .doc_by_url(&key)
            .expect("lookup")
            .expect("in its shard");
        assert_eq!(got, want, "document {d}");
        for (i, other) in shards.iter().enumerate() {
            if i != owner {
                assert!(other.doc_by_url(&key).expect("lookup").is_none());
            }
        }
    }

    // Stage 1's BM25 merged over the shards is the single index's bit for bit (the dense side
    // searches a graph per shard, approximately), and stage 2 is bit for bit.
    for query in [
        "glacier falcon quartz",
        "violin",
        "reactor turbine monsoon",
        "senate",
    ] {
        for mode in [Mode::Bm25, Mode::Hybrid] {
            let vector = mode
                .uses_dense()
                .then(|| stillweb_model_core::embed_query(&mut embedder(), query).expect("embed"));
            let weights = mode.weights();
            let whole = single.prepare(parse(query), vector.clone(), &weights);
            let want = single.candidates(&whole, 20).expect("candidates");
            let parts: Vec<_> = shards
                .iter()
                .map(|s| {
                    let q = s.prepare(parse(query), vector.clone(), &weights);
                    s.candidates(&q, 20).expect("shard candidates")
                })
                .collect();
            let bm25 = merge(parts.iter().map(|c| c.bm25.clone()).collect(), 20);
            assert_eq!(bm25, want.bm25, "{query} {mode:?}: BM25 candidates");
            // HNSW is approximate per shard; the nearest documents' scores must mostly agree
            // (scores, not ordinals: int8 dot products tie often, and which of a tie's
            // documents a graph returns at the cut is arbitrary).
            let dense = merge(parts.iter().map(|c| c.dense.clone()).collect(), 20);
            let mut unmatched: Vec<f32> = want.dense.iter().map(|w| w.1).collect();
            let agree = dense
                .iter()
                .filter(|(_, score)| {
                    let at = unmatched.iter().position(|s| s == score);
                    at.map(|i| unmatched.swap_remove(i)).is_some()
                })
                .count();
            assert!(
                agree * 10 >= want.dense.len() * 9,
                "{query}: {agree} of the shards' {} dense scores are the single index's:\n{dense:?}\n{:?}",
                dense.len(),
                want.dense
            );

            let docs = want.ordinals();
            let mut want_chunks = single.chunk_scores(&whole, &docs).expect("chunks");
            let mut got_chunks: Vec<_> = shards
                .iter()
                .flat_map(|s| {
                    let q = s.prepare(parse(query), vector.clone(), &weights);
                    s.chunk_scores(&q, &docs).expect("shard chunks")
                })
                .collect();
            // Chunk ids are each index's own; compare by document and position.
            let keyed = |chunks: &mut Vec<stillweb_index::search::ChunkScore>| {
                chunks.sort_by_key(|c| (c.doc, c.chunk));
                let mut at: HashMap<u64, usize> = HashMap::new();
                chunks
                    .iter()
                    .map(|c| {
                        let n = at.entry(c.doc).or_default();
                        *n += 1;
                        (
                            c.doc,
                            *n,
                            c.bm25.map(f32::to_bits),
                            c.cosine.map(f32::to_bits),
                        )
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                keyed(&mut got_chunks),
                keyed(&mut want_chunks),
                "{query} {mode:?}"
            );

            // Pages come back under the corpus's ordinals.
            let mut pages = Pages::default();
            for s in &shards {
                s.fetch(docs.iter().copied(), [], &mut pages)
                    .expect("fetch");
            }
            let mut want_pages = Pages::default();
            single
                .fetch(docs.iter().copied(), [], &mut want_pages)
                .expect("fetch");
            assert_eq!(pages.docs, want_pages.docs);
        }
    }
}

#[test]
fn a_set_is_served_only_finalized_and_only_with_its_own_shards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = corpus(dir.path());
    let set = dir.path().join("set");
    let options = BuildOptions::default();
    for i in [0, 1] {
        build_shards(&corpus, &set, 2, Some(i), &options, None).expect("one shard");
    }
    // Built as separate jobs: not served until finalized.
    let err = SearchIndex::open(&shard_dir(&set, 0)).expect_err("unfinalized");
    assert!(
        err.to_string().contains("stillweb-indexer finalize"),
        "{err}"
    );
    // A shard of another build (another chunk size) is refused, naming both ids.
    let other = dir.path().join("other");
    let mut small_chunks = BuildOptions::default();
    small_chunks.chunker.max_chars = 200;
    build_shards(&corpus, &other, 2, Some(1), &small_chunks, None).expect("other shard");
    let mixed = dir.path().join("mixed");
    std::fs::create_dir_all(&mixed).expect("dir");
    std::fs::rename(shard_dir(&set, 0), shard_dir(&mixed, 0)).expect("move");
    std::fs::rename(shard_dir(&other, 1), shard_dir(&mixed, 1)).expect("move");
    let err = finalize(&mixed).expect_err("mixed set");
    let id = |d: &Path| {
        stillweb_index::IndexManifest::read(d)
            .expect("manifest")
            .build_id
    };
    let (a, b) = (id(&shard_dir(&mixed, 0)), id(&shard_dir(&mixed, 1)));
    assert_ne!(a, b);
    assert!(matches!(err, IndexError::Shards { .. }), "{err}");
    assert!(
        err.to_string().contains(&a) && err.to_string().contains(&b),
        "{err}"
    );
    // A missing shard is named too.
    std::fs::remove_dir_all(shard_dir(&mixed, 1)).expect("remove");
    let err = finalize(&mixed).expect_err("incomplete set");
    assert!(err.to_string().contains("holds [0]"), "{err}");
    // The real pair finalizes and opens.
    std::fs::rename(shard_dir(&mixed, 0), shard_dir(&set, 0)).expect("move back");
    let report = finalize(&set).expect("finalize");
    assert_eq!((report.shards, report.documents), (2, 300));
    for i in 0..2 {
        SearchIndex::open(&shard_dir(&set, i)).expect("finalized shard opens");
        let verified = stillweb_index::checksums::verify(&shard_dir(&set, i)).expect("checksums");
        assert!(matches!(
            verified,
            stillweb_index::checksums::Verified::All { .. }
        ));
    }
}

#[test]
fn filter_decisions_are_made_on_the_whole_corpus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = corpus(dir.path());
    let single_dir = dir.path().join("single");
    build_index_with(&corpus, &single_dir, &BuildOptions::default(), None).expect("single");
    let set = dir.path().join("set");
    build_shards(&corpus, &set, 3, None, &BuildOptions::default(), None).expect("shards");
    let single = SearchIndex::open(&single_dir).expect("open");
    let shards: Vec<SearchIndex> = (0..3)
        .map(|i| SearchIndex::open(&shard_dir(&set, i)).expect("open shard"))
        .collect();
    // A phrase only document 17 has (its title): two shards have no page with it.
    let query = parse("\"Doc 17\" glacier");
    let weights = Mode::Bm25.weights();
    let want = single
        .candidates(&single.prepare(query.clone(), None, &weights), 20)
        .expect("single");
    assert!(!want.relaxed);
    assert_eq!(want.bm25.len(), 1, "{want:?}");

    let counts: Vec<_> = shards
        .iter()
        .map(|s| s.filter_counts(&query).expect("counts"))
        .collect();
    assert_eq!(counts.iter().filter(|c| c.pages == 0).count(), 2);
    let plan = stillweb_index::search::FilterCounts::sum(counts).plan(&query);
    assert!(!plan.relaxed && plan.exact, "{plan:?}");
    let merged = |plan| {
        let parts: Vec<_> = shards
            .iter()
            .map(|s| {
                s.candidates_planned(&s.prepare(query.clone(), None, &weights), 20, plan)
                    .expect("shard")
            })
            .collect();
        (
            merge(parts.iter().map(|c| c.bm25.clone()).collect(), 20),
            parts.iter().any(|c| c.relaxed),
        )
    };
    assert_eq!(merged(Some(plan)), (want.bm25.clone(), false));
    // Decided by each shard alone, the shards without the phrase relax it and answer pages
    // the single index would not.
    let (alone, relaxed) = merged(None);
    assert!(relaxed && alone.len() > 1, "{alone:?}");
}

/// The hashing embedder, counting the texts it is asked to embed.
struct Counting {
    inner: HashingEmbedder,
    texts: usize,
}

impl Embedder for Counting {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn engine(&self) -> &str {
        self.inner.engine()
    }
    fn embed_queries(
        &mut self,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, stillweb_model_core::ModelError> {
        self.inner.embed_queries(texts)
    }
    fn embed_documents(
        &mut self,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, stillweb_model_core::ModelError> {
        self.texts += texts.len();
        self.inner.embed_documents(texts)
    }
}

/// Every file of `dir`'s dense part, by name.
fn dense_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join("dense"))
        .expect("dense dir")
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path.file_name().expect("name").to_string_lossy().into();
            (name, std::fs::read(&path).expect("read"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_set_cut_with_reused_vectors_is_the_set_that_embedded_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = corpus(dir.path());
    // One thread inserts the graph, so that two builds of it are byte-identical.
    let options = BuildOptions {
        graph_threads: 1,
        ..BuildOptions::default()
    };
    let full = dir.path().join("single-f32");
    let f32_options = BuildOptions {
        chunk_precision: stillweb_index::chunk_vectors::Precision::F32,
        ..options.clone()
    };
    build_index_with(&corpus, &full, &f32_options, Some(&mut embedder())).expect("single");

    let embedded = dir.path().join("embedded");
    build_shards(&corpus, &embedded, 3, None, &options, Some(&mut embedder())).expect("shards");
    let reused = dir.path().join("reused");
    let mut counting = Counting {
        inner: embedder(),
        texts: 0,
    };
    let reuse = BuildOptions {
        reuse_vectors: Some(full.clone()),
        ..options.clone()
    };
    build_shards(&corpus, &reused, 3, None, &reuse, Some(&mut counting)).expect("reused shards");
    // The late duplicates are dropped; every kept page (title "Doc N") is in the single build.
    assert_eq!(counting.texts, 0, "nothing is embedded again");
    for i in 0..3 {
        let (a, b) = (shard_dir(&embedded, i), shard_dir(&reused, i));
        let id = |d: &Path| stillweb_index::IndexManifest::read(d).expect("manifest");
        assert_eq!(id(&a).build_id, id(&b).build_id, "shard {i}'s build id");
        assert_eq!(id(&a).dense, id(&b).dense, "shard {i}'s dense manifest");
        assert!(
            dense_files(&a) == dense_files(&b),
            "shard {i}'s vectors and graph"
        );
    }

    // A page whose text changed is embedded again; the others still come from the build.
    let docs = std::fs::read_to_string(dir.path().join("docs.jsonl")).expect("docs");
    let changed: String = docs
        .lines()
        .map(|l| {
            let mut doc: serde_json::Value = serde_json::from_str(l).expect("doc");
            if doc["id"] == "5" {
                doc["text"] = "An entirely new text. It has two sentences.".into();
            }
            format!("{doc}\n")
        })
        .collect();
    std::fs::write(dir.path().join("docs.jsonl"), changed).expect("write");
    let mut counting = Counting {
        inner: embedder(),
        texts: 0,
    };
    let out = dir.path().join("changed");
    build_index_with(&corpus, &out, &reuse, Some(&mut counting)).expect("changed build");
    assert_eq!(counting.texts, 1, "only the changed page's one chunk");
    let index = SearchIndex::open(&out).expect("open");
    let key = normalize_url("https://synthetic.example/5").expect("url");
    assert!(
        index
            .doc_by_url(&key)
            .expect("lookup")
            .expect("doc")
            .text
            .starts_with("An entirely")
    );

    // Vectors that are not what this build would compute are refused, saying why.
    let refused = |from: &Path, embedder: &mut dyn Embedder, needle: &str| {
        let options = BuildOptions {
            reuse_vectors: Some(from.to_path_buf()),
            ..BuildOptions::default()
        };
        let err = build_index_with(
            &corpus,
            &dir.path().join("refused"),
            &options,
            Some(embedder),
        )
        .expect_err("refused");
        assert!(matches!(err, IndexError::Reuse { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    };
    refused(
        &shard_dir(&embedded, 0),
        &mut embedder(),
        "--chunk-vectors f32",
    );
    refused(&full, &mut HashingEmbedder::new(32), "32-d");
    let lexical = dir.path().join("lexical");
    build_index_with(&corpus, &lexical, &BuildOptions::default(), None).expect("bm25 only");
    refused(&lexical, &mut embedder(), "no vectors");
}
