//! A BEIR collection in which half the records have a title and no text (as classic collections
//! such as CACM do) builds, and its title-only records are searchable and fetchable like any page.

use std::sync::Arc;
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_corpus::url_norm::normalize_url;

use stillweb_index::search::{Mode, SearchParams};
use stillweb_index::{BuildOptions, Retriever, SearchIndex, build_index};

#[test]
fn title_only_beir_records_are_indexed_searchable_and_fetchable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records = [
        r#"{"_id": "1", "title": "Preliminary Report on Algebraic Compilers", "text": ""}"#,
        r#"{"_id": "2", "title": "Extraction of Roots by Repeated Subtractions", "text": "A method for digital computers is given. It needs no division."}"#,
        r#"{"_id": "3", "title": "Techniques Department on Matrix Program Schemes", "text": ""}"#,
        r#"{"_id": "4", "title": "Glossary of Computer Engineering Terms", "text": "Terms are listed with definitions. The glossary is short."}"#,
        r#"{"_id": "5", "title": "", "text": ""}"#,
    ];
    std::fs::write(dir.path().join("corpus.jsonl"), records.join("\n")).expect("write");
    std::fs::write(
        dir.path().join("m.toml"),
        "name = \"cacm-like\"\n[[source]]\nformat = \"beir\"\npath = \"corpus.jsonl\"\n",
    )
    .expect("write");
    let corpus = CorpusManifest::load(&dir.path().join("m.toml")).expect("manifest");
    // One bad record in five (the empty one) is allowed explicitly; the title-only ones are not bad.
    let options = BuildOptions {
        max_bad_fraction: 0.2,
        ..BuildOptions::default()
    };
    let report = build_index(&corpus, &dir.path().join("index"), &options).expect("build");
    assert_eq!(report.manifest.documents, 4);
    assert_eq!(report.manifest.bad_records, 1);

    let retriever = Retriever::new(
        Arc::new(SearchIndex::open(&dir.path().join("index")).expect("open")),
        None,
        None,
    )
    .expect("retriever");
    let index = retriever.index();
    let params = SearchParams {
        k: 3,
        weights: Mode::Bm25.weights(),
        ..SearchParams::default()
    };
    for (query, id) in [
        ("algebraic compilers", "1"),
        ("matrix program schemes", "3"),
    ] {
        let hits = retriever
            .search(&stillweb_index::parse(query), &params)
            .expect("search")
            .hits;
        assert_eq!(hits.first().map(|h| h.doc_id.as_str()), Some(id), "{query}");
        assert!(hits[0].score > 0.0, "ranked by its title chunk: {hits:?}");
        let key = normalize_url(&hits[0].url).expect("url");
        let page = index.doc_by_url(&key).expect("fetch").expect("stored");
        assert!(page.text.is_empty() && !page.title.is_empty());
    }
}
