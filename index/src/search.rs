//! Two-stage retrieval.
//!
//! 1. **Documents**: BM25 over `content` (title + body) selects `candidates` documents.
//! 2. **Chunks**: BM25 over the chunks of those candidates (each chunk indexed with its document's
//!    title); each document keeps its best chunk (MaxP). The document's final score fuses its
//!    best-chunk score with its document score; the top `k` are returned with the best chunk as
//!    snippet.
//!
//! Ties are broken by document ordinal, so the same index, query and parameters always give the
//! same list.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tantivy::collector::{Collector, SegmentCollector, TopDocs};
use tantivy::columnar::Column;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery, TermSetQuery};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader, TantivyDocument, Term};

use crate::fusion::{Fusion, Signal, fuse, sorted};
use crate::{IndexError, SearchIndex};

/// Parameters of one search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchParams {
    /// Results to return.
    pub k: usize,
    /// Documents stage 1 hands to stage 2.
    pub candidates: usize,
    /// How stage 2 combines its signals.
    pub fusion: Fusion,
    /// Weight of the best chunk's BM25 score (MaxP).
    pub chunk_weight: f32,
    /// Weight of the whole document's BM25 score.
    pub doc_weight: f32,
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            k: 10,
            candidates: 100,
            fusion: Fusion::Weighted,
            chunk_weight: 1.0,
            doc_weight: 1.0,
        }
    }
}

/// One result: a page, scored by its best chunk, with that chunk as snippet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub ord: u64,
    pub doc_id: String,
    pub title: String,
    pub url: String,
    pub date: String,
    pub snippet: String,
    pub score: f32,
}

impl SearchIndex {
    /// Runs both stages for `query`.
    pub fn search(&self, query: &str, params: &SearchParams) -> Result<Vec<Hit>, IndexError> {
        let terms = self.analyze(query);
        if terms.is_empty() || params.k == 0 {
            return Ok(Vec::new());
        }
        // Stage 1: candidate documents.
        let doc_searcher = self.doc_reader.searcher();
        let doc_query = bag_of_words(self.doc_fields.content, &terms);
        let top = doc_searcher.search(
            &doc_query,
            &TopDocs::with_limit(params.candidates.max(1)).order_by_score(),
        )?;
        let mut candidates: Vec<(u64, f32, DocAddress)> = Vec::with_capacity(top.len());
        for (score, address) in top {
            let column = ord_column(doc_searcher.segment_reader(address.segment_ord), "ord")?;
            if let Some(ord) = column.first(address.doc_id) {
                candidates.push((ord, score, address));
            }
        }
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let address_of: HashMap<u64, DocAddress> = candidates.iter().map(|c| (c.0, c.2)).collect();
        let doc_scores: Vec<(u64, f32)> = candidates.iter().map(|c| (c.0, c.1)).collect();

        // Stage 2: best chunk per candidate.
        let chunk_searcher = self.chunk_reader.searcher();
        let restrict = TermSetQuery::new(
            candidates
                .iter()
                .map(|c| Term::from_field_u64(self.chunk_fields.doc_ord, c.0)),
        );
        let chunk_query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(bag_of_words(self.chunk_fields.context, &terms)) as Box<dyn Query>,
            ),
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(restrict), 0.0)),
            ),
        ]);
        let best = chunk_searcher.search(&chunk_query, &BestChunkPerDoc)?;
        let chunk_scores: Vec<(u64, f32)> = best
            .iter()
            .map(|(ord, (score, _))| (*ord, *score))
            .collect();

        let fused = fuse(
            params.fusion,
            &[
                Signal {
                    weight: params.chunk_weight,
                    scores: &chunk_scores,
                },
                Signal {
                    weight: params.doc_weight,
                    scores: &doc_scores,
                },
            ],
        );
        let mut hits = Vec::with_capacity(params.k.min(fused.len()));
        for (ord, score) in fused.into_iter().take(params.k) {
            let Some(&address) = address_of.get(&ord) else {
                continue;
            };
            let doc = self.stored_doc(&doc_searcher, address)?;
            let snippet = match best.get(&ord) {
                Some((_, chunk_address)) => {
                    let chunk: TantivyDocument = chunk_searcher.doc(*chunk_address)?;
                    chunk
                        .get_first(self.chunk_fields.text)
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string()
                }
                None => lead(&doc.text),
            };
            hits.push(Hit {
                ord,
                doc_id: doc.doc_id,
                title: doc.title,
                url: doc.url,
                date: doc.date,
                snippet,
                score,
            });
        }
        Ok(hits)
    }

    /// Stage-1 scores only (document BM25), for evaluation and debugging.
    pub fn search_documents(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<(u64, f32)>, IndexError> {
        let terms = self.analyze(query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let searcher = self.doc_reader.searcher();
        let top = searcher.search(
            &bag_of_words(self.doc_fields.content, &terms),
            &TopDocs::with_limit(limit.max(1)).order_by_score(),
        )?;
        let mut out = Vec::with_capacity(top.len());
        for (score, address) in top {
            if let Some(ord) = ord_column(searcher.segment_reader(address.segment_ord), "ord")?
                .first(address.doc_id)
            {
                out.push((ord, score));
            }
        }
        Ok(sorted(out))
    }
}

/// A chunk-free fallback snippet: the first 500 characters.
fn lead(text: &str) -> String {
    text.chars().take(500).collect()
}

/// BM25 over `field`: a disjunction of the query's terms (repeated terms count again, as in
/// Lucene's bag of words).
fn bag_of_words(field: Field, terms: &[String]) -> BooleanQuery {
    BooleanQuery::new(
        terms
            .iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(field, t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect(),
    )
}

fn ord_column(segment: &SegmentReader, name: &str) -> Result<Column<u64>, IndexError> {
    Ok(segment.fast_fields().u64(name)?)
}

/// Collects, for each document ordinal, its best-scoring chunk (MaxP). Ties go to the chunk with
/// the smaller address, so the choice is deterministic.
struct BestChunkPerDoc;

type BestChunks = HashMap<u64, (Score, DocAddress)>;

fn keep_better(best: &mut BestChunks, ord: u64, candidate: (Score, DocAddress)) {
    best.entry(ord)
        .and_modify(|current| {
            let better =
                candidate.0 > current.0 || (candidate.0 == current.0 && candidate.1 < current.1);
            if better {
                *current = candidate;
            }
        })
        .or_insert(candidate);
}

impl Collector for BestChunkPerDoc {
    type Fruit = BestChunks;
    type Child = BestChunkSegment;

    fn for_segment(
        &self,
        segment_ord: SegmentOrdinal,
        segment: &SegmentReader,
    ) -> tantivy::Result<BestChunkSegment> {
        Ok(BestChunkSegment {
            segment_ord,
            doc_ords: segment.fast_fields().u64("doc_ord")?,
            best: HashMap::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<BestChunks>) -> tantivy::Result<BestChunks> {
        let mut merged = BestChunks::new();
        for fruit in fruits {
            for (ord, candidate) in fruit {
                keep_better(&mut merged, ord, candidate);
            }
        }
        Ok(merged)
    }
}

struct BestChunkSegment {
    segment_ord: SegmentOrdinal,
    doc_ords: Column<u64>,
    best: BestChunks,
}

impl SegmentCollector for BestChunkSegment {
    type Fruit = BestChunks;

    fn collect(&mut self, doc: DocId, score: Score) {
        if let Some(ord) = self.doc_ords.first(doc) {
            keep_better(
                &mut self.best,
                ord,
                (score, DocAddress::new(self.segment_ord, doc)),
            );
        }
    }

    fn harvest(self) -> BestChunks {
        self.best
    }
}
