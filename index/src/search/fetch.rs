//! The last stage: the stored pages and chunk texts behind a ranking, read once per search (the
//! rerank step's passages and the results' snippets share one [`Pages`]).

use std::collections::HashMap;

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
        // A chunk's text is a slice of its page's body: the page is read (once) if the caller
        // did not ask for it.
        for id in chunks {
            if pages.chunks.contains_key(&id) {
                continue;
            }
            let Some((local, span)) = self.chunk_span(id) else {
                continue;
            };
            let ord = self.global_ords.global(local);
            let doc = match pages.docs.entry(ord) {
                std::collections::hash_map::Entry::Occupied(page) => page.into_mut(),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    let Some(&address) = self.doc_addresses.get(local as usize) else {
                        continue;
                    };
                    slot.insert(self.stored_doc(&doc_searcher, address)?)
                }
            };
            if let Some(text) = doc.text.get(span) {
                pages.chunks.insert(id, text.to_string());
            }
        }
        Ok(())
    }
}

impl SearchIndex {
    /// The results for `ranked` (documents of this index, in order), as [`Pages::hits`] makes
    /// them: what a shard returns for the documents it owns.
    pub fn hits(&self, ranked: &[Ranked]) -> Result<Vec<Hit>, IndexError> {
        self.hits_into(ranked, &mut Pages::default())
    }

    /// [`SearchIndex::hits`], reading only what `pages` lacks (and keeping it there).
    pub fn hits_into(&self, ranked: &[Ranked], pages: &mut Pages) -> Result<Vec<Hit>, IndexError> {
        self.fetch(
            ranked.iter().map(|r| r.doc),
            ranked.iter().filter_map(|r| r.chunk),
            pages,
        )?;
        Ok(pages.hits(ranked))
    }

    /// The reranker's passage for each `(document, chunk)` ([`passage`]); `None` for one this
    /// index does not hold.
    pub fn passages(&self, chunks: &[(u64, u64)]) -> Result<Vec<Option<String>>, IndexError> {
        self.passages_into(chunks, &mut Pages::default())
    }

    /// [`SearchIndex::passages`], reading only what `pages` lacks (and keeping it there).
    pub fn passages_into(
        &self,
        chunks: &[(u64, u64)],
        pages: &mut Pages,
    ) -> Result<Vec<Option<String>>, IndexError> {
        self.fetch(
            chunks.iter().map(|c| c.0),
            chunks.iter().map(|c| c.1),
            pages,
        )?;
        Ok(chunks.iter().map(|&(d, c)| pages.passage(d, c)).collect())
    }
}

impl Pages {
    /// The reranker's passage for chunk `chunk` of document `doc`, if both were fetched.
    pub fn passage(&self, doc: u64, chunk: u64) -> Option<String> {
        Some(passage(
            &self.docs.get(&doc)?.title,
            self.chunks.get(&chunk)?,
        ))
    }
}

/// What the reranker reads of a chunk: its page's title, then its text (as it was indexed).
pub fn passage(title: &str, text: &str) -> String {
    format!("{title}\n{text}")
}

/// A chunk-free fallback snippet: the first 500 characters.
fn lead(text: &str) -> String {
    text.chars().take(500).collect()
}
