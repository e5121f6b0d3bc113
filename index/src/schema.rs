//! Field layout of the two tantivy indexes.

use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

use crate::analyzer::ANALYZER;

/// Analysed text, not stored, with term frequencies and, when `positions` (phrase filters run
/// over the docs index only), positions.
fn analyzed(positions: bool) -> TextOptions {
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(ANALYZER)
        .set_index_option(if positions {
            IndexRecordOption::WithFreqsAndPositions
        } else {
            IndexRecordOption::WithFreqs
        });
    TextOptions::default().set_indexing_options(indexing)
}

/// One tantivy document per page.
#[derive(Debug, Clone, Copy)]
pub struct DocFields {
    /// Position of the document in the build (manifest order); the id the chunks refer to.
    pub ord: Field,
    /// Source-scoped id (BEIR `_id`, Wikipedia page id, ...). A fast field too, so that a hit's
    /// id is read without decompressing its stored page (indexes built before still read it there).
    pub doc_id: Field,
    /// Normalised URL: the lookup key for visits.
    pub url_key: Field,
    /// Host of the normalised URL, for host restrictions.
    pub host: Field,
    /// URL as shown to agents.
    pub url: Field,
    pub title: Field,
    /// The date as the source gave it, shown as is.
    pub date: Field,
    /// The date read as an instant (seconds since the Unix epoch, UTC; see
    /// `stillweb_corpus::date`), for date filters: absent on an undated page, which no bounded
    /// range matches.
    pub published: Field,
    /// Full text, stored for visits.
    pub body: Field,
    /// Title and body, analysed: what document-level BM25 scores.
    pub content: Field,
    /// Number of chunks; a document's chunks have consecutive chunk ids, in document order.
    pub chunk_count: Field,
}

impl DocFields {
    pub fn schema() -> (Schema, DocFields) {
        let mut b = Schema::builder();
        let fields = DocFields {
            ord: b.add_u64_field("ord", INDEXED | FAST | STORED),
            doc_id: b.add_text_field("doc_id", STRING | STORED | FAST),
            url_key: b.add_text_field("url_key", STRING),
            host: b.add_text_field("host", STRING),
            url: b.add_text_field("url", STORED),
            title: b.add_text_field("title", STORED),
            date: b.add_text_field("date", STORED),
            published: b.add_i64_field("published", FAST),
            body: b.add_text_field("body", STORED),
            content: b.add_text_field("content", analyzed(true)),
            chunk_count: b.add_u64_field("chunk_count", FAST | STORED),
        };
        (b.build(), fields)
    }

    pub fn from_schema(schema: &Schema) -> tantivy::Result<DocFields> {
        Ok(DocFields {
            ord: schema.get_field("ord")?,
            doc_id: schema.get_field("doc_id")?,
            url_key: schema.get_field("url_key")?,
            host: schema.get_field("host")?,
            url: schema.get_field("url")?,
            title: schema.get_field("title")?,
            date: schema.get_field("date")?,
            published: schema.get_field("published")?,
            body: schema.get_field("body")?,
            content: schema.get_field("content")?,
            chunk_count: schema.get_field("chunk_count")?,
        })
    }
}

/// One tantivy document per chunk. Nothing is stored: a chunk's text is the slice `start..end`
/// of its page's stored body (storing it again doubled the stored text), and the chunk BM25
/// needs term frequencies, not positions.
#[derive(Debug, Clone, Copy)]
pub struct ChunkFields {
    /// Global chunk id: the chunk's row in the dense vector store.
    pub chunk_id: Field,
    /// `ord` of the chunk's document.
    pub doc_ord: Field,
    /// Byte offsets of the chunk in the document body.
    pub start: Field,
    pub end: Field,
    /// Document title and chunk text, analysed: a chunk read without its title loses context.
    pub context: Field,
}

impl ChunkFields {
    pub fn schema() -> (Schema, ChunkFields) {
        let mut b = Schema::builder();
        let fields = ChunkFields {
            chunk_id: b.add_u64_field("chunk_id", INDEXED | FAST),
            doc_ord: b.add_u64_field("doc_ord", INDEXED | FAST),
            start: b.add_u64_field("start", FAST),
            end: b.add_u64_field("end", FAST),
            context: b.add_text_field("context", analyzed(false)),
        };
        (b.build(), fields)
    }

    pub fn from_schema(schema: &Schema) -> tantivy::Result<ChunkFields> {
        Ok(ChunkFields {
            chunk_id: schema.get_field("chunk_id")?,
            doc_ord: schema.get_field("doc_ord")?,
            start: schema.get_field("start")?,
            end: schema.get_field("end")?,
            context: schema.get_field("context")?,
        })
    }
}
