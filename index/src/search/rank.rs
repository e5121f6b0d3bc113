//! Normalisation, fusion, MaxP and the rerank step's bookkeeping: pure functions of the raw
//! scores stages 1 and 2 return, so the same ranking comes out wherever those scores were
//! computed (one index, or many shards whose raw scores were gathered).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{CHUNKS_PER_DOCUMENT, ChunkScore, Weights};
use crate::fusion::{Fusion, Signal, fuse};

/// A document in ranked order, with the chunk that represents it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    pub doc: u64,
    pub score: f32,
    /// Its best chunk (the snippet); `None` for a document with no scored chunk.
    pub chunk: Option<u64>,
}

/// Documents in fused order and each one's chunks, best first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ranking {
    pub ranked: Vec<Ranked>,
    /// Each document's chunks as `(weighted chunk score, chunk id)`, best first (ties by id).
    pub chunks: BTreeMap<u64, Vec<(f32, u64)>>,
}

/// Ranks the candidates: each chunk signal min-max normalised over the whole pool and weighted;
/// each document's best chunk (MaxP) fused by `fusion` with the document's own BM25
/// (`doc_bm25`, raw, weighted by `weights.bm25_doc`).
pub fn rank(
    doc_bm25: &[(u64, f32)],
    chunks: &[ChunkScore],
    weights: Weights,
    fusion: Fusion,
) -> Ranking {
    let bm25_range = min_max(chunks.iter().filter_map(|c| c.bm25));
    let cosine_range = min_max(chunks.iter().filter_map(|c| c.cosine));
    let mut by_doc: BTreeMap<u64, Vec<(f32, u64)>> = BTreeMap::new();
    for c in chunks {
        let score = weights.bm25_chunk * normalized(c.bm25, bm25_range)
            + weights.dense_chunk * normalized(c.cosine, cosine_range);
        by_doc.entry(c.doc).or_default().push((score, c.chunk));
    }
    for scored in by_doc.values_mut() {
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    }
    let best_chunk: Vec<(u64, f32)> = by_doc.iter().map(|(&d, c)| (d, c[0].0)).collect();
    let fused = fuse(
        fusion,
        &[
            Signal {
                weight: 1.0,
                scores: &best_chunk,
            },
            Signal {
                weight: weights.bm25_doc,
                scores: doc_bm25,
            },
        ],
    );
    let ranked = fused
        .into_iter()
        .map(|(doc, score)| Ranked {
            doc,
            score,
            chunk: by_doc.get(&doc).map(|c| c[0].1),
        })
        .collect();
    Ranking {
        ranked,
        chunks: by_doc,
    }
}

/// One chunk the reranker scores: its document's position in the fused order, and its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolEntry {
    pub rank: usize,
    pub doc: u64,
    pub chunk: u64,
}

/// The rerank pool: the first `size` chunks taken, document by document in fused order, from
/// each document's best [`CHUNKS_PER_DOCUMENT`].
pub fn rerank_pool(ranking: &Ranking, size: usize) -> Vec<PoolEntry> {
    let mut pool = Vec::new();
    for (rank, r) in ranking.ranked.iter().enumerate() {
        let Some(chunks) = ranking.chunks.get(&r.doc) else {
            continue;
        };
        for &(_, chunk) in chunks.iter().take(CHUNKS_PER_DOCUMENT) {
            if pool.len() >= size {
                return pool;
            }
            pool.push(PoolEntry {
                rank,
                doc: r.doc,
                chunk,
            });
        }
    }
    pool
}

/// Reorders `ranked` by the reranker's `scores` of `pool` (one each): reranked documents first,
/// by their best chunk's score (MaxP; ties keep the fused order), with that chunk as snippet;
/// the rest follow in fused order with score 0. An empty pool changes nothing.
///
/// `weight` is the reranker's share of a reranked document's score: 1 orders them by the
/// reranker alone; below 1 its score is interpolated with the document's fused score, each
/// min-max normalised over the reranked documents (`weight · rerank + (1 − weight) · fused`),
/// which keeps what the retrievers knew where the reranker is unsure or out of its domain.
/// The reranker's probability is normalised as its logit: probabilities crowd at 0 and 1,
/// where a confident cross-encoder puts most passages, and would leave the order there to the
/// fused score alone.
pub fn apply_rerank(
    ranked: Vec<Ranked>,
    pool: &[PoolEntry],
    scores: &[f32],
    weight: f32,
) -> Vec<Ranked> {
    if pool.is_empty() {
        return ranked;
    }
    let mut best: BTreeMap<usize, (f32, u64)> = BTreeMap::new();
    for (entry, &score) in pool.iter().zip(scores) {
        let slot = best
            .entry(entry.rank)
            .or_insert((f32::NEG_INFINITY, entry.chunk));
        if score > slot.0 {
            *slot = (score, entry.chunk);
        }
    }
    let fused = normalizer(
        best.keys()
            .filter_map(|&rank| Some(ranked.get(rank)?.score)),
    );
    let reranked = normalizer(best.values().map(|&(score, _)| logit(score)));
    let mut reranked: Vec<(usize, Ranked)> = best
        .iter()
        .filter_map(|(&rank, &(score, chunk))| {
            let r = ranked.get(rank)?;
            let score = match weight >= 1.0 {
                true => score,
                false => weight * reranked(logit(score)) + (1.0 - weight) * fused(r.score),
            };
            Some((
                rank,
                Ranked {
                    doc: r.doc,
                    score,
                    chunk: Some(chunk),
                },
            ))
        })
        .collect();
    reranked.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(&b.0)));
    let rest = ranked
        .iter()
        .enumerate()
        .filter(|(rank, _)| !best.contains_key(rank))
        .map(|(_, r)| Ranked { score: 0.0, ..*r });
    reranked.into_iter().map(|(_, r)| r).chain(rest).collect()
}

/// `p`'s log-odds (a sigmoid's input), finite for every probability a model can return.
fn logit(p: f32) -> f32 {
    let p = f64::from(p).clamp(1e-12, 1.0 - 1e-12);
    (p / (1.0 - p)).ln() as f32
}

/// [`normalized`] over the range of `values`.
fn normalizer(values: impl Iterator<Item = f32>) -> impl Fn(f32) -> f32 {
    let range = min_max(values);
    move |v| normalized(Some(v), range)
}

pub(crate) fn min_max(values: impl Iterator<Item = f32>) -> (f32, f32) {
    values
        .filter(|v| v.is_finite())
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        })
}

/// A signal scaled to [0, 1] over the pool; a chunk without the signal gets 0.
pub(crate) fn normalized(value: Option<f32>, (lo, hi): (f32, f32)) -> f32 {
    match value {
        Some(v) if v.is_finite() && hi > lo => (v - lo) / (hi - lo),
        Some(v) if v.is_finite() => 1.0,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::Mode;

    fn chunk(doc: u64, chunk: u64, bm25: Option<f32>, cosine: Option<f32>) -> ChunkScore {
        ChunkScore {
            doc,
            chunk,
            bm25,
            cosine,
        }
    }

    #[test]
    fn each_document_is_ranked_by_its_best_chunk_fused_with_its_own_bm25() {
        // Document 1's best chunk (11) beats document 2's; document 2 has the better BM25.
        let chunks = [
            chunk(1, 10, Some(1.0), Some(0.1)),
            chunk(1, 11, Some(3.0), Some(0.9)),
            chunk(2, 20, Some(2.0), Some(0.5)),
        ];
        let ranking = rank(
            &[(1, 5.0), (2, 6.0)],
            &chunks,
            Mode::Hybrid.weights(),
            Fusion::Weighted,
        );
        // Chunk 11: 1·1 + 2.5·1 = 3.5 → 1.0 normalised; chunk 20: 0.5 + 2.5·0.5 = 1.75 → 0.0.
        // Document BM25 normalised: 1 → 0, 2 → 1. Fused: 1 → 1.0, 2 → 1.0; the tie goes to 1.
        assert_eq!(
            ranking.ranked,
            [
                Ranked {
                    doc: 1,
                    score: 1.0,
                    chunk: Some(11)
                },
                Ranked {
                    doc: 2,
                    score: 1.0,
                    chunk: Some(20)
                }
            ]
        );
        assert_eq!(ranking.chunks[&1], [(3.5, 11), (0.0, 10)]);
    }

    #[test]
    fn a_document_without_scored_chunks_ranks_by_its_bm25_alone() {
        let ranking = rank(&[(7, 2.0)], &[], Mode::Bm25.weights(), Fusion::Weighted);
        assert_eq!(ranking.ranked.len(), 1);
        assert_eq!(ranking.ranked[0].chunk, None);
    }

    #[test]
    fn ranking_depends_only_on_the_scores_not_their_order() {
        let chunks = [
            chunk(3, 30, Some(0.5), Some(0.2)),
            chunk(1, 10, None, Some(0.8)),
            chunk(2, 20, Some(1.5), None),
        ];
        let mut reversed = chunks;
        reversed.reverse();
        let weights = Mode::Hybrid.weights();
        let docs = [(3, 1.0), (2, 4.0)];
        let docs_reversed = [(2, 4.0), (3, 1.0)];
        assert_eq!(
            rank(&docs, &chunks, weights, Fusion::Weighted),
            rank(&docs_reversed, &reversed, weights, Fusion::Weighted)
        );
    }

    #[test]
    fn the_pool_takes_at_most_two_chunks_a_document_in_fused_order() {
        let chunks: Vec<ChunkScore> = (0..3)
            .flat_map(|d| (0..3).map(move |c| chunk(d, d * 10 + c, Some(c as f32), None)))
            .collect();
        let ranking = rank(&[], &chunks, Mode::Bm25.weights(), Fusion::Weighted);
        let pool = rerank_pool(&ranking, 5);
        assert_eq!(pool.len(), 5);
        assert_eq!(
            pool.iter().map(|e| e.rank).collect::<Vec<_>>(),
            [0, 0, 1, 1, 2]
        );
        assert!(rerank_pool(&ranking, 0).is_empty());
    }

    #[test]
    fn reranked_documents_lead_by_their_best_chunk_and_the_rest_keep_their_order() {
        let ranked: Vec<Ranked> = (0..4)
            .map(|d| Ranked {
                doc: d,
                score: 1.0 - d as f32 / 10.0,
                chunk: Some(d * 10),
            })
            .collect();
        let pool = [
            PoolEntry {
                rank: 0,
                doc: 0,
                chunk: 0,
            },
            PoolEntry {
                rank: 1,
                doc: 1,
                chunk: 10,
            },
            PoolEntry {
                rank: 1,
                doc: 1,
                chunk: 11,
            },
        ];
        let out = apply_rerank(ranked.clone(), &pool, &[0.2, 0.1, 0.7], 1.0);
        assert_eq!(
            out.iter().map(|r| (r.doc, r.chunk)).collect::<Vec<_>>(),
            [(1, Some(11)), (0, Some(0)), (2, Some(20)), (3, Some(30))]
        );
        assert_eq!(out[0].score, 0.7);
        assert_eq!(out[2].score, 0.0);
        assert_eq!(apply_rerank(ranked.clone(), &[], &[], 1.0), ranked);
        // Interpolated, each normalised over the two reranked documents: document 0 (fused 1.0
        // -> 1, reranked 0.2 -> 0) against document 1 (fused 0.9 -> 0, reranked 0.7 -> 1):
        // 0.7 and 0.3 at weight 0.3, 0.3 and 0.7 at weight 0.7.
        let order = |weight| {
            let out = apply_rerank(ranked.clone(), &pool, &[0.2, 0.1, 0.7], weight);
            let scores: Vec<f32> = out.iter().take(2).map(|r| r.score).collect();
            (out.iter().map(|r| r.doc).collect::<Vec<_>>(), scores)
        };
        let (docs, scores) = order(0.3);
        assert_eq!(docs, [0, 1, 2, 3]);
        assert!((scores[0] - 0.7).abs() < 1e-6 && (scores[1] - 0.3).abs() < 1e-6);
        assert_eq!(order(0.7).0, [1, 0, 2, 3]);
        // At weight 0 the fused order stands, snippets still the reranker's best chunks.
        let out = apply_rerank(ranked.clone(), &pool, &[0.2, 0.1, 0.7], 0.0);
        assert_eq!(
            out.iter().map(|r| (r.doc, r.chunk)).collect::<Vec<_>>(),
            [(0, Some(0)), (1, Some(11)), (2, Some(20)), (3, Some(30))]
        );
    }
}
