//! Stage 1: candidate documents. BM25 over the page (title + body) and the dense document index
//! each select their best documents under the query's page filter; the result is plain data
//! (ordinals with raw scores), so candidates from several shards can be merged by score.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tantivy::collector::{Collector, SegmentCollector, TopDocs};
use tantivy::columnar::Column;
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader};

use super::PreparedQuery;
use super::filter::{FilterPlan, bag_of_words, filtered, ranks_exactly};
use crate::query::ParsedQuery;
use crate::read::bm25_at::bm25_at;
use crate::{IndexError, SearchIndex};

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

    /// The stage-1 answers of a corpus's parts merged as one index holding all their documents
    /// would have answered: each retriever's best `limit` over all parts (score, then ordinal),
    /// the document BM25 of the dense candidates that BM25 did not select, and the part (its
    /// position in `parts`) that owns each candidate.
    pub fn merge(parts: Vec<Candidates>, limit: usize) -> (Candidates, HashMap<u64, usize>) {
        let mut owners = HashMap::new();
        let mut merged = Candidates::default();
        let mut bm25_of: HashMap<u64, f32> = HashMap::new();
        let (mut bm25, mut dense) = (Vec::new(), Vec::new());
        for (part, found) in parts.into_iter().enumerate() {
            merged.relaxed |= found.relaxed;
            merged.filter_time = merged.filter_time.max(found.filter_time);
            for &(doc, score) in found.bm25.iter().chain(&found.dense_bm25) {
                bm25_of.insert(doc, score);
            }
            for &(doc, _) in found.bm25.iter().chain(&found.dense) {
                owners.insert(doc, part);
            }
            bm25.extend(found.bm25);
            dense.extend(found.dense);
        }
        for list in [&mut bm25, &mut dense] {
            list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            list.truncate(limit);
        }
        let lexical: HashSet<u64> = bm25.iter().map(|c| c.0).collect();
        let mut dense_bm25: Vec<(u64, f32)> = dense
            .iter()
            .filter(|c| !lexical.contains(&c.0))
            .filter_map(|c| Some((c.0, *bm25_of.get(&c.0)?)))
            .collect();
        dense_bm25.sort_by_key(|c| c.0);
        merged.bm25 = bm25;
        merged.dense = dense;
        merged.dense_bm25 = dense_bm25;
        let nearest: HashSet<u64> = merged.dense.iter().map(|c| c.0).collect();
        owners.retain(|doc, _| lexical.contains(doc) || nearest.contains(doc));
        (merged, owners)
    }
}

impl SearchIndex {
    /// Stage 1: the `limit` best documents of each retriever the query uses, under its filter,
    /// by their ordinals in the whole corpus.
    pub fn candidates(
        &self,
        query: &PreparedQuery,
        limit: usize,
    ) -> Result<Candidates, IndexError> {
        self.candidates_planned(query, limit, None)
    }

    /// [`SearchIndex::candidates`] with the decisions about the query's filter made by `plan`
    /// (on the whole corpus's [`FilterCounts`](super::filter::FilterCounts), for a shard), or
    /// on this index's counts when `None`.
    pub fn candidates_planned(
        &self,
        query: &PreparedQuery,
        limit: usize,
        plan: Option<FilterPlan>,
    ) -> Result<Candidates, IndexError> {
        let limit = limit.max(1);
        let searcher = self.doc_reader.searcher();
        let started = Instant::now();
        let (filter, relaxed) = self.page_filter(&query.parsed, &searcher, plan)?;
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
                    // exactly; otherwise search the graph with the filter as its predicate.
                    let allowed = self.allowed(&searcher, f.as_ref())?;
                    let exact = match plan {
                        Some(plan) => plan.exact,
                        None => ranks_exactly(self.chunks_of(&allowed), self.manifest().chunks),
                    };
                    if exact {
                        dense.rank_exactly(
                            vector,
                            allowed.into_iter().map(|o| (o, self.chunk_range(o))),
                            limit,
                        )?
                    } else {
                        dense.search_docs_among(vector, limit, &allowed)?
                    }
                }
            };
            found.dense.truncate(limit);
            if query.is_lexical() {
                found.dense_bm25 = self.doc_bm25(&searcher, &query.terms, &found)?;
            }
        }
        // Handed out as the corpus's ordinals (a shard's differ from its own).
        for list in [&mut found.bm25, &mut found.dense, &mut found.dense_bm25] {
            for (ord, _) in list.iter_mut() {
                *ord = self.global_ords.global(*ord);
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
        let (filter, _) = self.page_filter(query, &searcher, None)?;
        self.top_bm25(&searcher, &terms, filter.as_deref(), k)?
            .into_iter()
            .map(|(score, address)| Ok((self.doc_id_at(&searcher, address)?, score)))
            .collect()
    }

    /// The `limit` best pages by BM25 over title + body (the index's, or the corpus's
    /// statistics) among those `filter` allows, best first, ties by ordinal.
    ///
    /// Block-max WAND selects them, a few more than asked so that ties at the cut are settled
    /// by ordinal rather than by where the pages sit in the index; their scores are then summed
    /// again in query order ([`bm25_at`]), because WAND's summation order follows the index's own
    /// postings. Both make a shard's scores and order bit for bit the single index's.
    fn top_bm25(
        &self,
        searcher: &tantivy::Searcher,
        terms: &[String],
        filter: Option<&dyn tantivy::query::Query>,
        limit: usize,
    ) -> Result<Vec<(f32, DocAddress)>, IndexError> {
        let scored = filtered(bag_of_words(self.doc_fields.content, terms), filter);
        let statistics = self.doc_statistics(searcher);
        let found: Vec<DocAddress> = searcher
            .search_with_statistics_provider(
                &scored,
                &TopDocs::with_limit(limit + TIES_AT_THE_CUT).order_by_score(),
                statistics,
            )?
            .into_iter()
            .map(|(_, address)| address)
            .collect();
        let scores = bm25_at(searcher, statistics, self.doc_fields.content, terms, &found)?;
        let mut ranked: Vec<(f32, u64, DocAddress)> = found
            .into_iter()
            .zip(scores)
            .filter_map(|(address, score)| Some((score?, self.ord_at(address)?, address)))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranked.truncate(limit);
        Ok(ranked.into_iter().map(|(s, _, a)| (s, a)).collect())
    }
}

/// Pages stage 1's BM25 selects past its limit, so that pages tied at the cut are kept by
/// ordinal (as across shards), not by their place in the index.
const TIES_AT_THE_CUT: usize = 8;

/// Collects the ordinals of the matching pages, sorted (no scoring).
pub(crate) struct SortedOrds;

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

pub(crate) struct SortedOrdsSegment {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_candidates_keep_each_retrievers_global_best_and_their_owners() {
        let a = Candidates {
            bm25: vec![(4, 9.0), (0, 5.0)],
            dense: vec![(7, 0.9), (4, 0.5)],
            dense_bm25: vec![(7, 1.0)],
            ..Candidates::default()
        };
        let b = Candidates {
            bm25: vec![(3, 9.0), (5, 6.0)],
            dense: vec![(5, 0.8), (8, 0.7)],
            dense_bm25: vec![],
            relaxed: true,
            ..Candidates::default()
        };
        let (merged, owners) = Candidates::merge(vec![a, b], 3);
        // Ties by ordinal.
        assert_eq!(merged.bm25, vec![(3, 9.0), (4, 9.0), (5, 6.0)]);
        assert_eq!(merged.dense, vec![(7, 0.9), (5, 0.8), (8, 0.7)]);
        // 7's BM25 came with part a's dense candidates; 8 matches no term; 5 is in bm25.
        assert_eq!(merged.dense_bm25, vec![(7, 1.0)]);
        assert!(merged.relaxed);
        assert_eq!(owners[&4], 0);
        assert_eq!(owners[&8], 1);
        assert!(!owners.contains_key(&0), "0 fell out of the global best");
        assert_eq!(merged.ordinals(), vec![3, 4, 5, 7, 8]);
    }
}
