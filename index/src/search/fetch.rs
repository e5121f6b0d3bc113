//! The last stage: the stored pages and chunk texts behind a ranking, read once per search (the
//! rerank step's passages and the results' snippets share one [`Pages`]).

use std::collections::HashMap;

use tantivy::TantivyDocument;
use tantivy::schema::Value;

use super::{Hit, Ranked};
use crate::read::StoredDoc;
use crate::{IndexError, SearchIndex};

/// Pages and chunk texts read so far in one search, by ordinal and chunk id.
#[derive(Debug, Clone, Default)]
pub struct Pages {
    pub docs: HashMap<u64, StoredDoc>,
    pub chunks: HashMap<u64, String>,
}

impl Pages {
    /// The results for `ranked` (in order), each with its best chunk as snippet, or the page's
    /// opening when it has none; documents that were not fetched are left out.
    pub fn hits(&self, ranked: &[Ranked]) -> Vec<Hit> {
        ranked
            .iter()
            .filter_map(|r| {
                let doc = self.docs.get(&r.doc)?;
                let snippet = match r.chunk.and_then(|c| self.chunks.get(&c)) {
                    Some(text) => text.clone(),
                    None => lead(&doc.text),
                };
                Some(Hit {
                    ord: r.doc,
                    doc_id: doc.doc_id.clone(),
                    title: doc.title.clone(),
                    url: doc.url.clone(),
                    date: doc.date.clone(),
                    snippet,
                    score: r.score,
                })
            })
            .collect()
    }
}

impl SearchIndex {
    /// Reads into `pages` the documents `docs` (corpus ordinals) and the chunk texts `chunks`
    /// (this index's ids) it does not hold yet. Documents of other shards and ids past the
    /// index's end are skipped.
    pub fn fetch(
        &self,
        docs: impl IntoIterator<Item = u64>,
        chunks: impl IntoIterator<Item = u64>,
        pages: &mut Pages,
    ) -> Result<(), IndexError> {
        let doc_searcher = self.doc_reader.searcher();
        for ord in docs {
            if pages.docs.contains_key(&ord) {
                continue;
            }
            let local = self.global_ords.local(ord);
            if let Some(&address) = local.and_then(|l| self.doc_addresses.get(l as usize)) {
                pages
                    .docs
                    .insert(ord, self.stored_doc(&doc_searcher, address)?);
            }
        }
        let chunk_searcher = self.chunk_reader.searcher();
        for id in chunks {
            if pages.chunks.contains_key(&id) {
                continue;
            }
            let Some(&address) = self.chunk_addresses.get(id as usize) else {
                continue;
            };
            let chunk: TantivyDocument = chunk_searcher.doc(address)?;
            if let Some(text) = chunk
                .get_first(self.chunk_fields.text)
                .and_then(|v| v.as_str())
            {
                pages.chunks.insert(id, text.to_string());
            }
        }
        Ok(())
    }
}

/// A chunk-free fallback snippet: the first 500 characters.
fn lead(text: &str) -> String {
    text.chars().take(500).collect()
}
