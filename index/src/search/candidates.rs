//! Stage 1: candidate documents. BM25 over the page (title + body) and the dense document index
//! each select their best documents under the query's page filter; the result is plain data
//! (ordinals with raw scores), so candidates from several shards can be merged by score.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tantivy::collector::{Collector, SegmentCollector, TopDocs};
use tantivy::columnar::Column;
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader};

use super::PreparedQuery;
use super::filter::{bag_of_words, filtered};
use crate::query::ParsedQuery;
use crate::read::bm25_at::bm25_at;
use crate::{IndexError, SearchIndex};

/// A filtered search ranks the allowed pages exactly by their vectors when they have at most this
/// many chunks (fewer vectors read than the deeper graph search it replaces visits); past it, the
/// graph is searched further.
const EXACT_FILTERED_CHUNKS: u64 = 20_000;

/// What stage 1 found: each retriever's documents with their raw scores, best first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Candidates {
    /// The best documents by BM25 over title + body: `(ordinal, raw BM25)`.
    pub bm25: Vec<(u64, f32)>,
    /// The documents nearest the query vector: `(ordinal, cosine similarity)`.
    pub dense: Vec<(u64, f32)>,
    /// The raw BM25 of the dense candidates missing from `bm25` that match a query term, so
    /// that every candidate has its document score without another call.
    pub dense_bm25: Vec<(u64, f32)>,
    /// A required phrase occurred in no page and was searched as plain words.
    pub relaxed: bool,
    /// Time spent building the page filter (part of this stage's call).
    #[serde(skip)]
    pub filter_time: Duration,
}

impl Candidates {
    /// Every candidate's ordinal, ascending, once.
    pub fn ordinals(&self) -> Vec<u64> {
        let mut all: Vec<u64> = self.bm25.iter().chain(&self.dense).map(|c| c.0).collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Every candidate's raw document BM25 (those that match a query term).
    pub fn doc_bm25(&self) -> Vec<(u64, f32)> {
        self.bm25.iter().chain(&self.dense_bm25).copied().collect()
    }
}

impl SearchIndex {
    /// Stage 1: the `limit` best documents of each retriever the query uses, under its filter.
    pub fn candidates(
        &self,
        query: &PreparedQuery,
        limit: usize,
    ) -> Result<Candidates, IndexError> {
        let limit = limit.max(1);
        let searcher = self.doc_reader.searcher();
        let started = Instant::now();
        let (filter, relaxed) = self.page_filter(&query.parsed, &searcher)?;
        let mut found = Candidates {
            relaxed,
            filter_time: started.elapsed(),
            ..Candidates::default()
        };
        if query.is_lexical() {
            found.bm25 = self
                .top_bm25(&searcher, &query.terms, filter.as_deref(), limit)?
                .into_iter()
                .filter_map(|(score, address)| Some((self.ord_at(address)?, score)))
                .collect();
        }
        if let (Some(dense), Some(vector)) = (self.dense(), &query.vector) {
            found.dense = match &filter {
                None => dense.search_docs(vector, limit)?,
                Some(f) => {
                    // The pages the filter allows: when their chunks are few, rank them all
                    // exactly; otherwise look further in the graph so that enough of the
                    // nearest pages survive the filter.
                    let allowed = searcher.search(f.as_ref(), &SortedOrds)?;
                    let chunks: u64 = allowed
                        .iter()
                        .map(|&o| {
                            let range = self.chunk_range(o);
                            range.end - range.start
                        })
                        .sum();
                    if chunks <= EXACT_FILTERED_CHUNKS {
                        dense.rank_exactly(
                            vector,
                            allowed.into_iter().map(|o| (o, self.chunk_range(o))),
                            limit,
                        )?
                    } else {
                        let mut found = dense.search_docs(vector, limit * 4)?;
                        found.retain(|(o, _)| allowed.binary_search(o).is_ok());
                        found
                    }
                }
            };
            found.dense.truncate(limit);
            if query.is_lexical() {
                found.dense_bm25 = self.doc_bm25(&searcher, &query.terms, &found)?;
            }
        }
        Ok(found)
    }

    /// The raw BM25 of the dense candidates BM25 did not select itself.
    fn doc_bm25(
        &self,
        searcher: &tantivy::Searcher,
        terms: &[String],
        found: &Candidates,
    ) -> Result<Vec<(u64, f32)>, IndexError> {
        let lexical: HashSet<u64> = found.bm25.iter().map(|c| c.0).collect();
        let mut ords: Vec<u64> = found
            .dense
            .iter()
            .map(|c| c.0)
            .filter(|o| !lexical.contains(o))
            .collect();
        ords.sort_unstable();
        let (ords, addresses): (Vec<u64>, Vec<DocAddress>) = ords
            .into_iter()
            .filter_map(|o| Some((o, *self.doc_addresses.get(o as usize)?)))
            .unzip();
        let scores = bm25_at(
            searcher,
            self.doc_statistics(searcher),
            self.doc_fields.content,
            terms,
            &addresses,
        )?;
        Ok(ords
            .into_iter()
            .zip(scores)
            .filter_map(|(ord, score)| Some((ord, score?)))
            .collect())
    }

    /// Document-level BM25 alone (the lexical half of stage 1), under the query's operators: the
    /// top `k` documents' ids and scores. For setting beside other BM25 engines.
    pub fn bm25_documents(
        &self,
        query: &ParsedQuery,
        k: usize,
    ) -> Result<Vec<(String, f32)>, IndexError> {
        let terms = self.analyze(&query.text);
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let searcher = self.doc_reader.searcher();
        let (filter, _) = self.page_filter(query, &searcher)?;
        self.top_bm25(&searcher, &terms, filter.as_deref(), k)?
            .into_iter()
            .map(|(score, address)| Ok((self.doc_id_at(&searcher, address)?, score)))
            .collect()
    }

    /// The `limit` best pages by BM25 over title + body (the index's, or the corpus's
    /// statistics) among those `filter` allows, best first.
    fn top_bm25(
        &self,
        searcher: &tantivy::Searcher,
        terms: &[String],
        filter: Option<&dyn tantivy::query::Query>,
        limit: usize,
    ) -> Result<Vec<(f32, DocAddress)>, IndexError> {
        let scored = filtered(bag_of_words(self.doc_fields.content, terms), filter);
        Ok(searcher.search_with_statistics_provider(
            &scored,
            &TopDocs::with_limit(limit).order_by_score(),
            self.doc_statistics(searcher),
        )?)
    }
}

/// Collects the ordinals of the matching pages, sorted (no scoring).
struct SortedOrds;

impl Collector for SortedOrds {
    type Fruit = Vec<u64>;
    type Child = SortedOrdsSegment;

    fn for_segment(
        &self,
        _segment_ord: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<SortedOrdsSegment> {
        Ok(SortedOrdsSegment {
            ords: segment.fast_fields().u64("ord")?,
            found: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, fruits: Vec<Vec<u64>>) -> tantivy::Result<Vec<u64>> {
        let mut all: Vec<u64> = fruits.into_iter().flatten().collect();
        all.sort_unstable();
        Ok(all)
    }
}

struct SortedOrdsSegment {
    ords: Column<u64>,
    found: Vec<u64>,
}

impl SegmentCollector for SortedOrdsSegment {
    type Fruit = Vec<u64>;

    fn collect(&mut self, doc: DocId, _score: Score) {
        self.found.extend(self.ords.first(doc));
    }

    fn harvest(self) -> Vec<u64> {
        self.found
    }
}
