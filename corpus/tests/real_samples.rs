//! Reads the real samples in `../shared/data` (skipped with a message where that folder is absent).

use std::path::PathBuf;

use stillweb_corpus::SourceFormat;
use stillweb_corpus::ingest::{self, Item, SourceContext};

use stillweb_test_support::shared_data;

struct Counts {
    docs: Vec<stillweb_corpus::Document>,
    skipped: usize,
    bad: usize,
}

fn read(path: PathBuf, format: SourceFormat) -> Counts {
    let context = SourceContext {
        name: "test".into(),
        default_date: "1970-01-01".into(),
    };
    let mut counts = Counts {
        docs: Vec::new(),
        skipped: 0,
        bad: 0,
    };
    for item in ingest::open(&path, format, &context).expect("open") {
        match item {
            Item::Document(d) => counts.docs.push(d),
            Item::Skipped(_) => counts.skipped += 1,
            Item::Bad(b) => {
                eprintln!("bad record {b:?}");
                counts.bad += 1;
            }
        }
    }
    counts
}

#[test]
fn wikipedia_samples_yield_articles_with_clean_text() {
    let Some(data) = shared_data() else { return };
    let main = read(
        data.join("enwiki/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"),
        SourceFormat::WikipediaXml,
    );
    assert_eq!((main.docs.len(), main.skipped, main.bad), (106, 100, 0));
    let multistream = read(
        data.join("enwiki/enwiki-2016-sample-pages-articles-multistream.xml.bz2"),
        SourceFormat::WikipediaXml,
    );
    assert_eq!(
        multistream.docs, main.docs,
        "multistream decodes to the same pages"
    );
    let tables = read(
        data.join("enwiki/enwiki-table-markup.xml.bz2"),
        SourceFormat::WikipediaXml,
    );
    assert_eq!(tables.docs.len(), 5);
    let old_schema = read(
        data.join("enwiki/wikipedia2vec_enwiki-pages-articles-sample.xml.bz2"),
        SourceFormat::WikipediaXml,
    );
    assert_eq!(old_schema.docs.len(), 2);

    let anarchism = main
        .docs
        .iter()
        .find(|d| d.title == "Anarchism")
        .expect("Anarchism");
    assert_eq!(anarchism.url, "https://en.wikipedia.org/wiki/Anarchism");
    assert!(
        anarchism.text.len() > 20_000,
        "full article, got {} bytes",
        anarchism.text.len()
    );
    for doc in main.docs.iter().chain(&tables.docs).chain(&old_schema.docs) {
        for markup in ["{{", "}}", "[[", "]]", "<ref", "{|", "|}", "&nbsp;", "'''"] {
            assert!(
                !doc.text.contains(markup),
                "{} contains {markup:?}",
                doc.title
            );
        }
        assert!(
            !doc.date.is_empty(),
            "{} has a revision timestamp",
            doc.title
        );
    }
}

#[test]
fn commoncrawl_parquet_rows_get_titles() {
    let Some(data) = shared_data() else { return };
    let dolma = read(
        data.join("commoncrawl/cc-main-2019-30_dolma_en.parquet"),
        SourceFormat::FinewebParquet,
    );
    let ccnet = read(
        data.join("commoncrawl/ccnet_head_en_2020.parquet"),
        SourceFormat::FinewebParquet,
    );
    assert_eq!(dolma.docs.len() + dolma.bad, 274);
    assert_eq!(ccnet.docs.len() + ccnet.bad, 20);
    for doc in dolma.docs.iter().chain(&ccnet.docs) {
        assert!(
            !doc.title.trim().is_empty() && doc.title.chars().count() <= 200,
            "{doc:?}"
        );
        assert!(doc.url.starts_with("http"));
    }
}

#[test]
fn fabricated_and_beir_jsonl() {
    let Some(data) = shared_data() else { return };
    let fabricated = read(data.join("fabricated/documents.jsonl"), SourceFormat::Jsonl);
    assert_eq!((fabricated.docs.len(), fabricated.bad), (2250, 0));
    let scifact = read(data.join("beir/scifact/corpus.jsonl"), SourceFormat::Beir);
    assert_eq!(scifact.docs.len() + scifact.bad, 5183);
    assert!(scifact.docs.iter().any(|d| d.id == "4983"));
}
