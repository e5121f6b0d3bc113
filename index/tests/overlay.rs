//! An overlay built on an index holds only its own documents, under the ordinals after the
//! base's; served with the base, the two rank as one build of all the documents does. An
//! overlay is refused when it repeats a URL below it, over layers it was not built on, and with
//! another embedder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::overlay::open_layers;
use stillweb_index::search::Mode;
use stillweb_index::shard::shard_dir;
use stillweb_index::{
    BuildOptions, IndexError, Retriever, SearchIndex, SearchParams, build_index_with, build_shards,
    parse,
};
use stillweb_model_core::Embedder;
use stillweb_model_core::fake::HashingEmbedder;

mod support;

const DOCUMENTS: usize = 300;
const BASE: usize = 250;

/// Builds the documents of `0..DOCUMENTS` that `keep` selects at `dir/index` (as a set of
/// `shards` at `dir/set` when given), an overlay of `overlay_of` when it is not empty, embedding
/// with `dimension`-d hashing vectors.
fn build_parts(
    dir: &Path,
    keep: impl Fn(usize) -> bool,
    overlay_of: &[PathBuf],
    dimension: usize,
    shards: Option<u32>,
) -> Result<PathBuf, IndexError> {
    std::fs::create_dir_all(dir).expect("dir");
    let manifest = support::write_corpus(dir, DOCUMENTS, keep);
    let corpus = CorpusManifest::load(&manifest).expect("manifest");
    let options = BuildOptions {
        overlay_of: overlay_of.to_vec(),
        graph_threads: 1,
        ..BuildOptions::default()
    };
    let mut embedder = HashingEmbedder::new(dimension);
    let embedder = Some(&mut embedder as &mut dyn Embedder);
    match shards {
        None => {
            let out = dir.join("index");
            build_index_with(&corpus, &out, &options, embedder)?;
            Ok(out)
        }
        Some(count) => {
            let out = dir.join("set");
            build_shards(&corpus, &out, count, None, &options, embedder)?;
            Ok(out)
        }
    }
}

fn build(
    dir: &Path,
    keep: impl Fn(usize) -> bool,
    overlay_of: &[PathBuf],
    dimension: usize,
) -> Result<PathBuf, IndexError> {
    build_parts(dir, keep, overlay_of, dimension, None)
}

/// [`build_parts`] as a set of 3 shards.
fn build_set(dir: &Path, keep: impl Fn(usize) -> bool, overlay_of: &[PathBuf]) -> PathBuf {
    build_parts(dir, keep, overlay_of, 64, Some(3)).expect("set build")
}

fn urls(retriever: &Retriever, query: &str, mode: Mode) -> Vec<String> {
    let params = SearchParams {
        k: 10,
        weights: mode.weights(),
        ..SearchParams::default()
    };
    let vector = mode
        .uses_dense()
        .then(|| stillweb_model_core::embed_query(&mut HashingEmbedder::new(64), query))
        .transpose()
        .expect("embed");
    retriever
        .search_embedded(&parse(query), vector, &params)
        .expect("search")
        .hits
        .into_iter()
        .map(|h| format!("{} {}", h.ord, h.url))
        .collect()
}

#[test]
fn a_base_with_its_overlay_ranks_as_one_build_of_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = build(&dir.path().join("single"), |_| true, &[], 64).expect("single");
    let base = build(&dir.path().join("base"), |d| d < BASE, &[], 64).expect("base");
    let overlay = build(
        &dir.path().join("overlay"),
        |d| d >= BASE,
        std::slice::from_ref(&base),
        64,
    )
    .expect("overlay");

    let single = SearchIndex::open(&single).expect("open single");
    let layers = open_layers(&base, std::slice::from_ref(&overlay)).expect("layers");
    let (base_id, overlay_manifest) = (
        layers[0].manifest().build_id.clone(),
        layers[1].manifest().clone(),
    );
    assert_eq!(overlay_manifest.documents, (DOCUMENTS - BASE) as u64);
    let entry = overlay_manifest.overlay.as_ref().expect("an overlay");
    assert_eq!(entry.of, vec![base_id.clone()]);
    assert_eq!(entry.first_ordinal, BASE as u64);
    assert_ne!(overlay_manifest.build_id, base_id);
    // A page of the overlay is found there, under the single build's ordinal.
    let key = "https://synthetic.example/260";
    let page = layers[1].doc_by_url(key).expect("lookup").expect("held");
    assert_eq!(page, single.doc_by_url(key).expect("lookup").expect("held"));
    assert!(layers[0].doc_by_url(key).expect("lookup").is_none());

    let layered = Retriever::layered(layers.into_iter().map(Arc::new).collect(), None, None)
        .expect("retriever");
    let whole = Retriever::new(Arc::new(single), None, None).expect("retriever");
    let mut overlay_shown = 0;
    for query in [
        "glacier falcon quartz",
        "violin",
        "reactor turbine monsoon",
        "senate harbor",
        "doc",
    ] {
        // BM25 with the layers' summed statistics: the single build's list, ordinals included.
        let want = urls(&whole, query, Mode::Bm25);
        assert_eq!(urls(&layered, query, Mode::Bm25), want, "{query}");
        overlay_shown += want
            .iter()
            .filter(|u| u.split(' ').next().and_then(|o| o.parse::<usize>().ok()) >= Some(BASE))
            .count();
        // Hybrid: a graph per layer instead of one; on this small corpus both find the same.
        let (a, b) = (
            urls(&layered, query, Mode::Hybrid),
            urls(&whole, query, Mode::Hybrid),
        );
        let common = a.iter().filter(|u| b.contains(u)).count();
        assert!(common >= 9, "{query}: {a:?} vs {b:?}");
    }
    assert!(overlay_shown > 0, "the overlay's pages take part");
}

#[test]
fn an_overlay_is_refused_when_it_does_not_fit_what_is_below() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = build(&dir.path().join("base"), |d| d < BASE, &[], 64).expect("base");

    // URLs the base holds: refused, every one listed.
    let err = build(
        &dir.path().join("repeats"),
        |d| d >= BASE || d == 10 || d == 11,
        std::slice::from_ref(&base),
        64,
    )
    .expect_err("repeats refused");
    let message = err.to_string();
    assert!(matches!(err, IndexError::Overlay { .. }), "{message}");
    assert!(
        message.contains("2 of the new pages")
            && message.contains("https://synthetic.example/10")
            && message.contains("https://synthetic.example/11"),
        "{message}"
    );
    assert!(
        !dir.path().join("repeats/index").exists(),
        "nothing published"
    );

    // Another embedder than the base's.
    let err = build(
        &dir.path().join("other"),
        |d| d >= BASE,
        std::slice::from_ref(&base),
        32,
    )
    .expect_err("other model refused");
    assert!(err.to_string().contains("(64-d)"), "{err}");

    // Served over layers it was not built on, or with the overlay given as the base.
    let overlay = build(
        &dir.path().join("overlay"),
        |d| d >= BASE,
        std::slice::from_ref(&base),
        64,
    )
    .expect("overlay");
    let other_base = build(&dir.path().join("base2"), |d| d < 200, &[], 64).expect("base2");
    let err = open_layers(&other_base, std::slice::from_ref(&overlay)).expect_err("wrong base");
    assert!(err.to_string().contains("built as an overlay of"), "{err}");
    let err = open_layers(&overlay, &[]).expect_err("an overlay as base");
    assert!(err.to_string().contains("itself an overlay"), "{err}");
    let err = open_layers(&base, &[other_base]).expect_err("not an overlay");
    assert!(err.to_string().contains("not an overlay"), "{err}");
}

#[test]
fn a_shard_set_with_an_overlay_set_ranks_as_one_build_of_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let single = build(&dir.path().join("single"), |_| true, &[], 64).expect("single");
    let base = build_set(&dir.path().join("base"), |d| d < BASE, &[]);
    let overlay = build_set(
        &dir.path().join("overlay"),
        |d| d >= BASE,
        std::slice::from_ref(&base),
    );
    // Each shard server's layers: the base's shard I and the overlay's shard I.
    let mut parts = Vec::new();
    let mut held = 0;
    for i in 0..3 {
        let layers = open_layers(&shard_dir(&base, i), &[shard_dir(&overlay, i)]).expect("layers");
        let shard = layers[1].manifest().shard.clone().expect("a shard");
        assert_eq!(shard.corpus_documents, (DOCUMENTS - BASE) as u64);
        held += layers[1].manifest().documents;
        parts.extend(layers.into_iter().map(Arc::new));
    }
    assert_eq!(held, (DOCUMENTS - BASE) as u64);
    // A base shard with another shard's overlay is refused.
    let err = open_layers(&shard_dir(&base, 0), &[shard_dir(&overlay, 1)]).expect_err("mixed");
    assert!(err.to_string().contains("shard 1 of 3"), "{err}");

    let sharded = Retriever::layered(parts, None, None).expect("retriever");
    let whole = Retriever::new(
        Arc::new(SearchIndex::open(&single).expect("open")),
        None,
        None,
    )
    .expect("retriever");
    for query in ["glacier falcon quartz", "violin", "senate harbor", "doc"] {
        assert_eq!(
            urls(&sharded, query, Mode::Bm25),
            urls(&whole, query, Mode::Bm25),
            "{query}"
        );
    }
}
