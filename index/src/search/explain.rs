//! Why each result ranked where it did: the numbers behind its place, recomputed from the same
//! raw scores the ranking used (one index, or the shards' gathered scores), with the ranges each
//! signal was normalised over, so that a client can recompose every score itself.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::rank::{PoolEntry, Ranked, Ranking, min_max, normalized};
use super::{Candidates, ChunkScore, Weights};
use crate::fusion::Fusion;

/// How one search's scores combine: the weights, the fusion method, and the `[lo, hi]` range
/// of each signal over the search's pool (min-max normalisation maps it to `[0, 1]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExplainContext {
    pub fusion: Fusion,
    pub weights: Weights,
    /// Over every scored chunk of every candidate.
    pub chunk_bm25_range: Option<[f32; 2]>,
    pub chunk_cosine_range: Option<[f32; 2]>,
    /// Over every candidate's best chunk score.
    pub chunk_score_range: Option<[f32; 2]>,
    /// Over every candidate's page BM25.
    pub doc_bm25_range: Option<[f32; 2]>,
    /// Whether a cross-encoder reordered the results (then `score` is the reranker's).
    pub reranked: bool,
}

/// The numbers behind one result's rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The document (corpus ordinal).
    #[serde(skip)]
    pub doc: u64,
    /// Its place (1-based) in the BM25 candidate list and in the dense one, if it was there.
    pub bm25_rank: Option<usize>,
    pub dense_rank: Option<usize>,
    /// The page's BM25 (title and body), raw and normalised over the candidates.
    pub doc_bm25: Option<f32>,
    pub doc_bm25_normalized: f32,
    /// Its best chunk (MaxP; the one fusion used): BM25 and cosine similarity, raw and
    /// normalised over the pool's chunks.
    pub chunk_bm25: Option<f32>,
    pub chunk_bm25_normalized: f32,
    pub chunk_cosine: Option<f32>,
    pub chunk_cosine_normalized: f32,
    /// `bm25_chunk × chunk_bm25_normalized + dense_chunk × chunk_cosine_normalized`.
    pub chunk_score: f32,
    pub chunk_score_normalized: f32,
    /// With weighted fusion, `chunk_score_normalized + bm25_doc × doc_bm25_normalized`.
    pub fused_score: f32,
    /// Its place (1-based) in the fused order, before any reranking.
    pub fused_rank: usize,
    /// The reranker's score of its best pool chunk, when it was in the rerank pool.
    pub rerank_score: Option<f32>,
}

/// A search's explanations: the context and one per result, in result order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explained {
    pub context: ExplainContext,
    pub results: Vec<Explanation>,
}

/// Explains `results` (the final order: after reranking and truncation) from what ranked them:
/// the stage-1 `candidates`, the stage-2 `chunks`, the fused `ranking` (before reranking) and
/// the rerank pool with its scores (empty when not reranked).
pub fn explain(
    results: &[Ranked],
    candidates: &Candidates,
    chunks: &[ChunkScore],
    fused: &Ranking,
    rerank: (&[PoolEntry], &[f32]),
    weights: Weights,
    fusion: Fusion,
) -> Explained {
    let bm25_range = min_max(chunks.iter().filter_map(|c| c.bm25));
    let cosine_range = min_max(chunks.iter().filter_map(|c| c.cosine));
    let by_chunk: HashMap<(u64, u64), &ChunkScore> =
        chunks.iter().map(|c| ((c.doc, c.chunk), c)).collect();
    let best: BTreeMap<u64, (f32, u64)> = fused
        .chunks
        .iter()
        .filter_map(|(&doc, c)| c.first().map(|&best| (doc, best)))
        .collect();
    let score_range = min_max(best.values().map(|b| b.0));
    let doc_bm25 = candidates.doc_bm25();
    let doc_range = min_max(doc_bm25.iter().map(|d| d.1));
    let doc_bm25: HashMap<u64, f32> = doc_bm25.into_iter().collect();
    let place = |list: &[(u64, f32)]| -> HashMap<u64, usize> {
        list.iter().enumerate().map(|(i, c)| (c.0, i + 1)).collect()
    };
    let (bm25_place, dense_place) = (place(&candidates.bm25), place(&candidates.dense));
    let fused_place: HashMap<u64, (usize, f32)> = fused
        .ranked
        .iter()
        .enumerate()
        .map(|(i, r)| (r.doc, (i + 1, r.score)))
        .collect();
    let mut rerank_score: HashMap<u64, f32> = HashMap::new();
    for (entry, &score) in rerank.0.iter().zip(rerank.1) {
        let slot = rerank_score.entry(entry.doc).or_insert(f32::NEG_INFINITY);
        *slot = slot.max(score);
    }
    let range = |(lo, hi): (f32, f32)| (lo <= hi).then_some([lo, hi]);
    let explanations = results
        .iter()
        .map(|r| {
            // A candidate without a scored chunk takes 0 from the chunk signal, as in fusion.
            let best_chunk = best.get(&r.doc).copied();
            let (chunk_score, chunk) = best_chunk.unwrap_or((0.0, u64::MAX));
            let scored = by_chunk.get(&(r.doc, chunk));
            let chunk_bm25 = scored.and_then(|c| c.bm25);
            let chunk_cosine = scored.and_then(|c| c.cosine);
            let doc = doc_bm25.get(&r.doc).copied();
            let (fused_rank, fused_score) = fused_place.get(&r.doc).copied().unwrap_or((0, 0.0));
            Explanation {
                doc: r.doc,
                bm25_rank: bm25_place.get(&r.doc).copied(),
                dense_rank: dense_place.get(&r.doc).copied(),
                doc_bm25: doc,
                doc_bm25_normalized: normalized(doc, doc_range),
                chunk_bm25,
                chunk_bm25_normalized: normalized(chunk_bm25, bm25_range),
                chunk_cosine,
                chunk_cosine_normalized: normalized(chunk_cosine, cosine_range),
                chunk_score,
                chunk_score_normalized: normalized(best_chunk.map(|b| b.0), score_range),
                fused_score,
                fused_rank,
                rerank_score: rerank_score.get(&r.doc).copied(),
            }
        })
        .collect();
    Explained {
        context: ExplainContext {
            fusion,
            weights,
            chunk_bm25_range: range(bm25_range),
            chunk_cosine_range: range(cosine_range),
            chunk_score_range: range(score_range),
            doc_bm25_range: range(doc_range),
            reranked: !rerank.0.is_empty(),
        },
        results: explanations,
    }
}
