//! A chunk's text (the snippet, the reranker's passage) is read as a slice of its page's stored
//! body: it is exactly what the chunker cut, for every chunk of every page.

use stillweb_corpus::chunk::chunk_text;
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::search::fetch::Pages;
use stillweb_index::{BuildOptions, SearchIndex, build_index};

mod support;

#[test]
fn chunk_texts_are_the_chunkers_slices_of_the_stored_body() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = support::write_corpus(dir.path(), 120, |_| true);
    let corpus = CorpusManifest::load(&manifest).expect("manifest");
    let out = dir.path().join("index");
    // Short chunks, so that pages have several.
    let mut options = BuildOptions::default();
    options.chunker.max_chars = 120;
    build_index(&corpus, &out, &options).expect("build");
    let index = SearchIndex::open(&out).expect("open");
    // Chunks asked for without their pages: the pages are read for them.
    let mut pages = Pages::default();
    let all: Vec<u64> = (0..index.manifest().chunks).collect();
    index
        .fetch([], all.iter().copied(), &mut pages)
        .expect("fetch");
    assert_eq!(pages.chunks.len(), all.len());
    let mut checked = 0;
    for ord in 0..index.manifest().documents {
        let doc = &pages.docs[&ord];
        let want: Vec<&str> = chunk_text(&doc.text, &options.chunker)
            .iter()
            .map(|c| c.slice(&doc.text))
            .collect();
        let got: Vec<&str> = index
            .chunk_range(ord)
            .map(|id| pages.chunks[&id].as_str())
            .collect();
        assert_eq!(got, want, "document {ord}");
        checked += got.len();
    }
    assert!(checked > 240, "{checked}");
}
