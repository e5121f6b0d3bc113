//! Two-stage hybrid retrieval.
//!
//! 1. **Documents.** BM25 over `content` (title + body) and, when the index has vectors and a query
//!    vector is given, the dense document index each select `candidates` documents; stage 2 gets
//!    their union.
//! 2. **Chunks.** Every chunk of the candidates is scored by BM25 (title + chunk text) and by exact
//!    cosine with the query vector. Each signal is min-max normalised over the pool and the chunk's
//!    score is their weighted sum. A document takes its best chunk (MaxP), fused with its own BM25
//!    score.
//! 3. **Reranking** (optional): a cross-encoder scores the best chunks of the leading documents
//!    (the pool); those documents are reordered by their best reranked chunk (MaxP again).
//!
//! The top `k` are returned with their best chunk as snippet.
//!
//! Ties are broken by document ordinal and chunk id, so the same index, query and parameters
//! always give the same list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tantivy::collector::{Collector, Count, SegmentCollector, TopDocs};
use tantivy::columnar::Column;
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, Occur, PhraseQuery, Query, RegexQuery, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader, TantivyDocument, Term};

use stillweb_models::Reranker;

use crate::bm25_at::bm25_at;
use crate::fusion::{Fusion, Signal, fuse};
use crate::query::{Constraint, ParsedQuery};
use crate::reader::StoredDoc;
use crate::{IndexError, SearchIndex};

/// Weights of the ranking signals (each min-max normalised before weighting).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    /// The whole document's BM25 score.
    pub bm25_doc: f32,
    /// A chunk's BM25 score (title + chunk text).
    pub bm25_chunk: f32,
    /// A chunk's cosine similarity with the query.
    pub dense_chunk: f32,
}

/// Which retrievers take part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Bm25,
    Dense,
    Hybrid,
    /// Hybrid retrieval, then the cross-encoder over the chunk pool.
    Rerank,
}

impl Mode {
    /// The default weights of each mode; hybrid's were chosen by the measurements in
    /// `BENCHMARKS.md`.
    pub fn weights(self) -> Weights {
        match self {
            Mode::Bm25 => Weights {
                bm25_doc: 1.0,
                bm25_chunk: 1.0,
                dense_chunk: 0.0,
            },
            Mode::Dense => Weights {
                bm25_doc: 0.0,
                bm25_chunk: 0.0,
                dense_chunk: 1.0,
            },
            // At the chunk level the cosine counts 2.5 times the BM25 score; the document's own BM25
            // score then weighs as much as its best chunk, which keeps exact-match constraints (a
            // date, a name) decisive. Measured on SciFact and the fabricated items: BENCHMARKS.md.
            Mode::Hybrid | Mode::Rerank => Weights {
                bm25_doc: 1.0,
                bm25_chunk: 1.0,
                dense_chunk: 2.5,
            },
        }
    }
}

impl Mode {
    /// Whether the mode needs query vectors.
    pub fn uses_dense(self) -> bool {
        self != Mode::Bm25
    }
}

/// Chunks reranked per query unless configured otherwise: on two CPU cores a MiniLM-size
/// cross-encoder scores ~25–50 pairs/s, so even 30 costs about a second (SPEC.md); on a GPU,
/// Qwen3-Reranker-0.6B takes 100 comfortably.
pub const DEFAULT_RERANK_POOL: usize = 30;

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bm25" => Ok(Mode::Bm25),
            "dense" => Ok(Mode::Dense),
            "hybrid" => Ok(Mode::Hybrid),
            "rerank" => Ok(Mode::Rerank),
            other => Err(format!(
                "unknown mode `{other}` (bm25, dense, hybrid, rerank)"
            )),
        }
    }
}

/// Parameters of one search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchParams {
    /// Results to return.
    pub k: usize,
    /// Documents each stage-1 retriever hands to stage 2.
    pub candidates: usize,
    /// How a document's best-chunk score and its document score are combined.
    pub fusion: Fusion,
    pub weights: Weights,
    /// Chunks the reranker scores (0: no reranking). They are the best chunks of the documents
    /// in their fused order, at most [`CHUNKS_PER_DOCUMENT`] from each.
    #[serde(default)]
    pub rerank_pool: usize,
}

/// A rerank pool takes at most this many chunks from one document, so that it covers many
/// documents: MaxP only needs each document's best chunk, and the hybrid order already says which
/// chunks are likely to be it.
pub const CHUNKS_PER_DOCUMENT: usize = 2;

/// A filtered search ranks the allowed pages exactly by their vectors when they have at most this
/// many chunks (fewer vectors read than the deeper graph search it replaces visits); past it, the
/// graph is searched further.
const EXACT_FILTERED_CHUNKS: u64 = 20_000;

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            k: 10,
            candidates: 100,
            fusion: Fusion::Weighted,
            weights: Mode::Bm25.weights(),
            rerank_pool: 0,
        }
    }
}

/// What a search returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SearchResults {
    pub hits: Vec<Hit>,
    /// A required phrase occurred in no page and was treated as plain words.
    pub relaxed: bool,
    /// Where the time went, for timing headers and metrics.
    #[serde(skip)]
    pub timings: StageTimings,
}

/// Time spent in each stage of one search.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimings {
    /// Building the query operators' page filter (`site:`, phrases, exclusions), including the
    /// count that decides whether required phrases must be relaxed.
    pub filter: std::time::Duration,
    /// Stage 1: candidate documents (BM25, dense, the filter applied).
    pub candidates: std::time::Duration,
    /// Stage 2: scoring the candidates' chunks, MaxP and fusion.
    pub chunks: std::time::Duration,
    /// The reranker over the chunk pool.
    pub rerank: std::time::Duration,
    /// Fetching stored titles, URLs and snippets.
    pub fetch: std::time::Duration,
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

/// A document in ranked order, with the chunk that represents it.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    doc: u64,
    score: f32,
    chunk: Option<u64>,
}

/// A chunk in the stage-2 pool.
#[derive(Debug, Clone, Copy)]
struct PoolChunk {
    doc: u64,
    bm25: Option<f32>,
    dense: Option<f32>,
}

impl SearchIndex {
    /// Runs both stages for `query`; `query_vector` (the embedded query) enables the dense signals,
    /// and `reranker` (with `params.rerank_pool > 0`) reorders the best chunks before MaxP.
    ///
    /// `query` carries the operators (see [`crate::query`]); its `text` is what `query_vector`
    /// must embed. When a required phrase occurs in no page, the phrase is dropped to plain words
    /// and the results say `relaxed`.
    pub fn search(
        &self,
        query: &ParsedQuery,
        query_vector: Option<&[f32]>,
        params: &SearchParams,
        reranker: Option<&mut (dyn Reranker + '_)>,
    ) -> Result<SearchResults, IndexError> {
        let w = params.weights;
        let terms = self.analyze(&query.text);
        let lexical = !terms.is_empty() && (w.bm25_doc > 0.0 || w.bm25_chunk > 0.0);
        let dense_index = self.dense().filter(|_| w.dense_chunk > 0.0);
        let query_vector = query_vector.filter(|_| dense_index.is_some());
        let mut results = SearchResults::default();
        if params.k == 0 || (!lexical && query_vector.is_none()) {
            return Ok(results);
        }
        let limit = params.candidates.max(1);
        let doc_searcher = self.doc_reader.searcher();
        let mut clock = std::time::Instant::now();
        let (filter, relaxed) = self.page_filter(query, &doc_searcher)?;
        results.relaxed = relaxed;
        results.timings.filter = lap(&mut clock);

        // Stage 1.
        let mut doc_bm25: BTreeMap<u64, f32> = BTreeMap::new();
        if lexical {
            let scored = bag_of_words(self.doc_fields.content, &terms);
            let top = doc_searcher.search(
                &match &filter {
                    Some(f) => filtered(scored, f.box_clone()),
                    None => scored,
                },
                &TopDocs::with_limit(limit).order_by_score(),
            )?;
            for (score, address) in top {
                if let Some(ord) = self.ord_at(address) {
                    doc_bm25.insert(ord, score);
                }
            }
        }
        let mut candidates: Vec<u64> = doc_bm25.keys().copied().collect();
        if let (Some(dense), Some(q)) = (dense_index, query_vector) {
            let found = match &filter {
                None => dense.search_docs(q, limit)?,
                Some(f) => {
                    // The pages the filter allows: when their chunks are few, rank them all
                    // exactly; otherwise look further in the graph so that enough of the
                    // nearest pages survive the filter.
                    let allowed = doc_searcher.search(f.as_ref(), &SortedOrds)?;
                    let chunks: u64 = allowed
                        .iter()
                        .map(|&o| {
                            let range = self.chunk_range(o);
                            range.end - range.start
                        })
                        .sum();
                    if chunks <= EXACT_FILTERED_CHUNKS {
                        dense.rank_exactly(
                            q,
                            allowed.into_iter().map(|o| (o, self.chunk_range(o))),
                            limit,
                        )?
                    } else {
                        let mut found = dense.search_docs(q, limit * 4)?;
                        found.retain(|(o, _)| allowed.binary_search(o).is_ok());
                        found
                    }
                }
            };
            for (ord, _) in found.into_iter().take(limit) {
                if !doc_bm25.contains_key(&ord) {
                    candidates.push(ord);
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        if candidates.is_empty() {
            return Ok(results);
        }
        // Candidates found only by the dense retriever still get their BM25 document score.
        if lexical && candidates.len() > doc_bm25.len() {
            let (ords, addresses): (Vec<u64>, Vec<DocAddress>) = candidates
                .iter()
                .filter(|o| !doc_bm25.contains_key(o))
                .filter_map(|&o| Some((o, *self.doc_addresses.get(o as usize)?)))
                .unzip();
            let scores = bm25_at(&doc_searcher, self.doc_fields.content, &terms, &addresses)?;
            for (ord, score) in ords.into_iter().zip(scores) {
                if let Some(score) = score {
                    doc_bm25.insert(ord, score);
                }
            }
        }

        results.timings.candidates = lap(&mut clock);
        // Stage 2: the chunk pool, every chunk of the candidates in chunk-id order (candidates
        // are sorted and a document's chunks have consecutive ids).
        let chunk_searcher = self.chunk_reader.searcher();
        let (chunks, addresses): (Vec<(u64, u64)>, Vec<DocAddress>) = candidates
            .iter()
            .flat_map(|&doc| self.chunk_range(doc).map(move |chunk| (doc, chunk)))
            .filter_map(|(doc, chunk)| {
                Some(((doc, chunk), *self.chunk_addresses.get(chunk as usize)?))
            })
            .unzip();
        let bm25 = if lexical {
            bm25_at(
                &chunk_searcher,
                self.chunk_fields.context,
                &terms,
                &addresses,
            )?
        } else {
            vec![None; chunks.len()]
        };
        let pool: Vec<(u64, PoolChunk)> = chunks
            .into_iter()
            .zip(bm25)
            .filter_map(|((doc, chunk_id), bm25)| {
                let dense = match (dense_index, query_vector) {
                    (Some(dense), Some(q)) => Some(dense.chunk_similarity(q, chunk_id)),
                    _ => None,
                };
                (bm25.is_some() || dense.is_some())
                    .then_some((chunk_id, PoolChunk { doc, bm25, dense }))
            })
            .collect();

        // Chunk scores: normalised signals, weighted; each document's chunks best first.
        let bm25_range = min_max(pool.iter().filter_map(|(_, c)| c.bm25));
        let dense_range = min_max(pool.iter().filter_map(|(_, c)| c.dense));
        let mut by_doc: BTreeMap<u64, Vec<(f32, u64)>> = BTreeMap::new();
        for &(chunk_id, c) in &pool {
            let score = w.bm25_chunk * normalized(c.bm25, bm25_range)
                + w.dense_chunk * normalized(c.dense, dense_range);
            by_doc.entry(c.doc).or_default().push((score, chunk_id));
        }
        for chunks in by_doc.values_mut() {
            chunks.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        }
        // MaxP, fused with the document's own BM25 score.
        let chunk_signal: Vec<(u64, f32)> = by_doc.iter().map(|(&d, c)| (d, c[0].0)).collect();
        let doc_signal: Vec<(u64, f32)> = doc_bm25.iter().map(|(&d, &s)| (d, s)).collect();
        let fused = fuse(
            params.fusion,
            &[
                Signal {
                    weight: 1.0,
                    scores: &chunk_signal,
                },
                Signal {
                    weight: w.bm25_doc,
                    scores: &doc_signal,
                },
            ],
        );
        let mut ranked: Vec<Ranked> = fused
            .into_iter()
            .map(|(doc, score)| Ranked {
                doc,
                score,
                chunk: by_doc.get(&doc).map(|c| c[0].1),
            })
            .collect();

        let context = Context {
            doc_searcher: &doc_searcher,
            chunk_searcher: &chunk_searcher,
        };
        results.timings.chunks = lap(&mut clock);
        if let Some(reranker) = reranker.filter(|_| params.rerank_pool > 0) {
            ranked = self.rerank(
                &context,
                &query.text,
                ranked,
                &by_doc,
                params.rerank_pool,
                reranker,
            )?;
        }

        results.timings.rerank = lap(&mut clock);
        let mut hits = Vec::with_capacity(params.k.min(ranked.len()));
        for r in ranked.into_iter().take(params.k) {
            let Some(doc) = self.doc_at(&context, r.doc)? else {
                continue;
            };
            let snippet = match r.chunk {
                Some(chunk_id) => self.chunk_text(&context, chunk_id)?,
                None => None,
            };
            hits.push(Hit {
                ord: r.doc,
                doc_id: doc.doc_id,
                title: doc.title,
                url: doc.url,
                date: doc.date,
                snippet: snippet.unwrap_or_else(|| lead(&doc.text)),
                score: r.score,
            });
        }
        results.hits = hits;
        results.timings.fetch = lap(&mut clock);
        Ok(results)
    }

    /// The filter the query's operators ask for (`None` without operators), and whether required
    /// phrases had to be relaxed because no page contains them.
    fn page_filter(
        &self,
        query: &ParsedQuery,
        searcher: &tantivy::Searcher,
    ) -> Result<(Option<Box<dyn Query>>, bool), IndexError> {
        if !query.has_filters() {
            return Ok((None, false));
        }
        let filter = self.filter_query(query)?;
        if query.requires_phrases() && searcher.search(&*filter, &Count)? == 0 {
            let relaxed = query.relaxed();
            if !relaxed.has_filters() {
                return Ok((None, true));
            }
            return Ok((Some(self.filter_query(&relaxed)?), true));
        }
        Ok((Some(filter), false))
    }

    /// Required groups as `Must` (alternatives as `Should`), exclusions as `MustNot`.
    fn filter_query(&self, query: &ParsedQuery) -> Result<Box<dyn Query>, IndexError> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for group in &query.required {
            let mut alternatives = Vec::new();
            for constraint in group {
                if let Some(q) = self.constraint_query(constraint)? {
                    alternatives.push((Occur::Should, q));
                }
            }
            match alternatives.len() {
                0 => {}
                1 => clauses.push((Occur::Must, alternatives.remove(0).1)),
                _ => clauses.push((Occur::Must, Box::new(BooleanQuery::new(alternatives)))),
            }
        }
        if clauses.is_empty() {
            clauses.push((Occur::Must, Box::new(AllQuery)));
        }
        for constraint in &query.excluded {
            if let Some(q) = self.constraint_query(constraint)? {
                clauses.push((Occur::MustNot, q));
            }
        }
        for word in &query.excluded_words {
            for term in self.analyze(word) {
                clauses.push((
                    Occur::MustNot,
                    Box::new(TermQuery::new(
                        Term::from_field_text(self.doc_fields.content, &term),
                        IndexRecordOption::Basic,
                    )),
                ));
            }
        }
        Ok(Box::new(BooleanQuery::new(clauses)))
    }

    /// A phrase over the page's title and body (stop words may sit in the gaps), or a host
    /// suffix match. `None` for a phrase of stop words only, which constrains nothing.
    fn constraint_query(
        &self,
        constraint: &Constraint,
    ) -> Result<Option<Box<dyn Query>>, IndexError> {
        Ok(match constraint {
            Constraint::Phrase(text) => {
                let terms = crate::analyzer::terms_with_positions(&mut self.analyzer.clone(), text);
                let first = terms.first().map_or(0, |(p, _)| *p);
                let terms: Vec<(usize, Term)> = terms
                    .into_iter()
                    .map(|(p, t)| {
                        (
                            p - first,
                            Term::from_field_text(self.doc_fields.content, &t),
                        )
                    })
                    .collect();
                match terms.len() {
                    0 => None,
                    1 => Some(Box::new(TermQuery::new(
                        terms[0].1.clone(),
                        IndexRecordOption::Basic,
                    ))),
                    _ => Some(Box::new(PhraseQuery::new_with_offset(terms))),
                }
            }
            Constraint::Site(host) => {
                let pattern = format!("(.*\\.)?{}", host.replace('.', "\\.").replace('-', "\\-"));
                Some(Box::new(RegexQuery::from_pattern(
                    &pattern,
                    self.doc_fields.host,
                )?))
            }
        })
    }

    /// Scores the pool with the reranker: the first `pool_size` chunks taken, document by
    /// document in `ranked` order, from each document's best [`CHUNKS_PER_DOCUMENT`]. Reranked
    /// documents come first, by their best chunk's score (MaxP; ties keep the fused order), with
    /// that chunk as snippet; the rest follow in fused order with score 0.
    fn rerank(
        &self,
        context: &Context<'_>,
        query: &str,
        ranked: Vec<Ranked>,
        by_doc: &BTreeMap<u64, Vec<(f32, u64)>>,
        pool_size: usize,
        reranker: &mut dyn Reranker,
    ) -> Result<Vec<Ranked>, IndexError> {
        let mut picked: Vec<(usize, u64)> = Vec::new();
        let mut passages: Vec<String> = Vec::new();
        for (rank, r) in ranked.iter().enumerate() {
            if picked.len() >= pool_size {
                break;
            }
            let Some(chunks) = by_doc.get(&r.doc) else {
                continue;
            };
            let Some(doc) = self.doc_at(context, r.doc)? else {
                continue;
            };
            for &(_, chunk_id) in chunks.iter().take(CHUNKS_PER_DOCUMENT) {
                if picked.len() >= pool_size {
                    break;
                }
                if let Some(text) = self.chunk_text(context, chunk_id)? {
                    passages.push(format!("{}\n{text}", doc.title));
                    picked.push((rank, chunk_id));
                }
            }
        }
        if picked.is_empty() {
            return Ok(ranked);
        }
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        let scores = reranker
            .score(query, &refs)
            .map_err(|e| IndexError::Model(e.to_string()))?;
        let mut best: BTreeMap<usize, (f32, u64)> = BTreeMap::new();
        for (&(rank, chunk_id), &score) in picked.iter().zip(&scores) {
            let entry = best.entry(rank).or_insert((f32::NEG_INFINITY, chunk_id));
            if score > entry.0 {
                *entry = (score, chunk_id);
            }
        }
        let mut reranked: Vec<(usize, Ranked)> = best
            .iter()
            .map(|(&rank, &(score, chunk_id))| {
                (
                    rank,
                    Ranked {
                        doc: ranked[rank].doc,
                        score,
                        chunk: Some(chunk_id),
                    },
                )
            })
            .collect();
        reranked.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(&b.0)));
        let rest = ranked
            .iter()
            .enumerate()
            .filter(|(rank, _)| !best.contains_key(rank))
            .map(|(_, r)| Ranked { score: 0.0, ..*r });
        Ok(reranked.into_iter().map(|(_, r)| r).chain(rest).collect())
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
        let scored = bag_of_words(self.doc_fields.content, &terms);
        let query = match &filter {
            Some(f) => filtered(scored, f.box_clone()),
            None => scored,
        };
        let top = searcher.search(&query, &TopDocs::with_limit(k).order_by_score())?;
        top.into_iter()
            .map(|(score, address)| Ok((self.doc_id_at(&searcher, address)?, score)))
            .collect()
    }

    /// A document's stored fields by ordinal.
    fn doc_at(&self, context: &Context<'_>, ord: u64) -> Result<Option<StoredDoc>, IndexError> {
        match self.doc_addresses.get(ord as usize) {
            Some(&address) => Ok(Some(self.stored_doc(context.doc_searcher, address)?)),
            None => Ok(None),
        }
    }

    /// A chunk's stored text by id.
    fn chunk_text(
        &self,
        context: &Context<'_>,
        chunk_id: u64,
    ) -> Result<Option<String>, IndexError> {
        let Some(&address) = self.chunk_addresses.get(chunk_id as usize) else {
            return Ok(None);
        };
        let chunk: TantivyDocument = context.chunk_searcher.doc(address)?;
        Ok(chunk
            .get_first(self.chunk_fields.text)
            .and_then(|v| v.as_str())
            .map(str::to_string))
    }
}

/// The searchers the later steps of one search read from (one snapshot of each index).
struct Context<'a> {
    doc_searcher: &'a tantivy::Searcher,
    chunk_searcher: &'a tantivy::Searcher,
}

/// The time since `clock`, which restarts.
fn lap(clock: &mut std::time::Instant) -> std::time::Duration {
    let now = std::time::Instant::now();
    let elapsed = now - *clock;
    *clock = now;
    elapsed
}

fn min_max(values: impl Iterator<Item = f32>) -> (f32, f32) {
    values
        .filter(|v| v.is_finite())
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        })
}

/// A signal scaled to [0, 1] over the pool; a chunk without the signal gets 0.
fn normalized(value: Option<f32>, (lo, hi): (f32, f32)) -> f32 {
    match value {
        Some(v) if v.is_finite() && hi > lo => (v - lo) / (hi - lo),
        Some(v) if v.is_finite() => 1.0,
        _ => 0.0,
    }
}

/// A chunk-free fallback snippet: the first 500 characters.
fn lead(text: &str) -> String {
    text.chars().take(500).collect()
}

/// BM25 over `field`: a disjunction of the query's terms (repeated terms count again, as in
/// Lucene's bag of words).
pub(crate) fn bag_of_words(field: Field, terms: &[String]) -> BooleanQuery {
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

/// `scored`, keeping only the pages that pass `filter` (which adds nothing to the score).
fn filtered(scored: BooleanQuery, filter: Box<dyn Query>) -> BooleanQuery {
    BooleanQuery::new(vec![
        (Occur::Must, Box::new(scored) as Box<dyn Query>),
        (Occur::Must, Box::new(ConstScoreQuery::new(filter, 0.0))),
    ])
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
