//! Two-stage hybrid retrieval, as explicit stages over plain data.
//!
//! [`pipeline::search`] runs one search over the parts of a corpus (one index, the shards of a
//! set, a base and its overlays); [`Retriever`] runs it in place over one index. Every stage is a
//! function a test (and a shard server) can call alone, and the data between stages is document
//! ordinals, chunk ids and raw scores, never tantivy handles:
//!
//! 1. **parse** ([`crate::query::parse`]) and [`PreparedQuery::new`]: the query's operators,
//!    analysed terms and (embedded once, where the pipeline decides) vector;
//! 2. **candidates** ([`candidates`]): BM25 over `content` (title + body) and the dense document
//!    index each select `candidates` documents, under the operators' page filter, with their raw
//!    scores ([`Candidates`]), merged over the parts ([`Candidates::merge`]);
//! 3. **chunk scores** ([`chunks`]): every chunk of the candidates, its raw BM25 (title + chunk
//!    text) and exact cosine with the query ([`ChunkScore`]);
//! 4. **rank** ([`rank`], pure): each signal min-max normalised over the pool, weighted; each
//!    document takes its best chunk (MaxP), fused with its own BM25 score;
//! 5. **rerank** (optional): a cross-encoder scores the best chunks of the leading documents
//!    (the pool); those documents are reordered by their best reranked chunk (MaxP again);
//! 6. **fetch** ([`fetch`]): titles, URLs, dates and the best chunk as snippet for the top `k`,
//!    each page read once even when the rerank step read it first.
//!
//! Ties are broken by document ordinal and chunk id, so the same index, query and parameters
//! always give the same list.

pub mod candidates;
pub mod chunks;
pub mod explain;
pub mod fetch;
pub mod filter;
pub mod pipeline;
pub mod preset;
pub mod rank;
mod retriever;

use serde::{Deserialize, Serialize};

use crate::SearchIndex;
use crate::fusion::Fusion;
use crate::query::ParsedQuery;

pub use candidates::Candidates;
pub use chunks::ChunkScore;
pub use filter::{FilterCounts, FilterPlan};
pub use preset::Preset;
pub use rank::{Ranked, Ranking};
pub use retriever::{Retriever, rerank_error};

/// The time since `clock`, which restarts: one stage's time in a pipeline's timings.
pub fn lap(clock: &mut std::time::Instant) -> std::time::Duration {
    let now = std::time::Instant::now();
    let elapsed = now - *clock;
    *clock = now;
    elapsed
}

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
    /// `benchmarks/HISTORY.md`.
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
            // date, a name) decisive. Measured on SciFact and the fabricated items:
            // benchmarks/HISTORY.md.
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

    /// The mode a server or an evaluation runs over an index with (`has_dense`) or without
    /// vectors: `requested`, else hybrid when it has them and BM25 when not. Refuses a mode
    /// that needs vectors the index lacks, saying so.
    pub fn resolve(requested: Option<Mode>, has_dense: bool) -> Result<Mode, String> {
        let mode = requested.unwrap_or(if has_dense { Mode::Hybrid } else { Mode::Bm25 });
        if mode.uses_dense() && !has_dense {
            return Err(format!(
                "--mode {} needs an index built with vectors; this one was built with --no-dense",
                mode.name()
            ));
        }
        Ok(mode)
    }

    /// The mode's name, as `--mode` and requests spell it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Bm25 => "bm25",
            Mode::Dense => "dense",
            Mode::Hybrid => "hybrid",
            Mode::Rerank => "rerank",
        }
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
    /// The reranker's share of a reranked document's score (1: its order alone; below 1,
    /// interpolated with the fused score; [`rank::apply_rerank`]).
    #[serde(default = "full_weight")]
    pub rerank_weight: f32,
    /// Explain each result's rank ([`explain::Explained`] in the results).
    #[serde(default)]
    pub explain: bool,
}

fn full_weight() -> f32 {
    1.0
}

/// A rerank pool takes at most this many chunks from one document, so that it covers many
/// documents: MaxP only needs each document's best chunk, and the hybrid order already says which
/// chunks are likely to be it.
pub const CHUNKS_PER_DOCUMENT: usize = 2;

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams {
            k: 10,
            candidates: 100,
            fusion: Fusion::Weighted,
            weights: Mode::Bm25.weights(),
            rerank_pool: 0,
            rerank_weight: 1.0,
            explain: false,
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
    /// With `SearchParams::explain`: the numbers behind each hit's rank, in hit order.
    #[serde(skip)]
    pub explained: Option<explain::Explained>,
}

/// Time spent in each stage of one search.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimings {
    /// Embedding the query (zero when its vector was given or not needed).
    pub embed: std::time::Duration,
    /// Building the query operators' page filter (`site:`, phrases, exclusions), including the
    /// count that decides whether required phrases must be relaxed.
    pub filter: std::time::Duration,
    /// Stage 1: candidate documents (BM25, dense, the filter applied).
    pub candidates: std::time::Duration,
    /// Stage 2: scoring the candidates' chunks, then normalisation, MaxP and fusion.
    pub chunks: std::time::Duration,
    /// The reranker over the chunk pool (with reading the pool's passages).
    pub rerank: std::time::Duration,
    /// Fetching stored titles, URLs and snippets.
    pub fetch: std::time::Duration,
}

/// One result: a page, scored by its best chunk, with that chunk as snippet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub ord: u64,
    pub doc_id: String,
    pub title: String,
    pub url: String,
    pub date: String,
    pub snippet: String,
    pub score: f32,
}

/// A query as stages 1 and 2 take it: plain data a coordinator can hand to a shard.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PreparedQuery {
    /// The operators (the page filter) and the scoring text.
    pub parsed: ParsedQuery,
    /// The analysed terms of `parsed.text`; empty when the lexical signals are off.
    pub terms: Vec<String>,
    /// The query's unit vector; `None` when the dense signal is off.
    pub vector: Option<Vec<f32>>,
}

impl PreparedQuery {
    /// Whether BM25 takes part.
    pub fn is_lexical(&self) -> bool {
        !self.terms.is_empty()
    }

    /// Whether no retriever has anything to search with.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty() && self.vector.is_none()
    }
}

impl PreparedQuery {
    /// The query as the stages take it under `weights`: terms only when a BM25 signal counts,
    /// the vector only when the index has vectors (`dense`) and the dense signal counts.
    pub fn new(
        parsed: ParsedQuery,
        vector: Option<Vec<f32>>,
        weights: &Weights,
        dense: bool,
    ) -> PreparedQuery {
        let lexical = weights.bm25_doc > 0.0 || weights.bm25_chunk > 0.0;
        let terms = if lexical {
            crate::analyzer::terms(&mut crate::analyzer::english(), &parsed.text)
        } else {
            Vec::new()
        };
        let vector = vector.filter(|_| dense && weights.dense_chunk > 0.0);
        PreparedQuery {
            parsed,
            terms,
            vector,
        }
    }
}

impl SearchIndex {
    /// [`PreparedQuery::new`] for this index.
    pub fn prepare(
        &self,
        parsed: ParsedQuery,
        vector: Option<Vec<f32>>,
        weights: &Weights,
    ) -> PreparedQuery {
        PreparedQuery::new(parsed, vector, weights, self.dense().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::Mode;

    #[test]
    fn the_mode_follows_the_index_unless_asked_and_needs_vectors_it_uses() {
        assert_eq!(Mode::resolve(None, true), Ok(Mode::Hybrid));
        assert_eq!(Mode::resolve(None, false), Ok(Mode::Bm25));
        assert_eq!(Mode::resolve(Some(Mode::Bm25), true), Ok(Mode::Bm25));
        let refused = Mode::resolve(Some(Mode::Dense), false).expect_err("no vectors");
        assert!(refused.starts_with("--mode dense needs"), "{refused}");
        for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid, Mode::Rerank] {
            assert_eq!(mode.name().parse::<Mode>(), Ok(mode));
        }
    }
}
