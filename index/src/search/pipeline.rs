//! The one search sequence, over the parts of a corpus.
//!
//! A corpus is a list of [`Part`]s, each holding some of its documents under the corpus's
//! ordinals and BM25 statistics: one index directory, one shard of a set (through its replicas),
//! or a base index and its overlays. [`search`] runs every search of every caller — the server
//! over local indexes or remote shards, evaluation and benchmarks through
//! [`Retriever`](super::Retriever) — as the same steps:
//!
//! 1. embed the query once, when the mode uses vectors and the corpus has them (decided here);
//! 2. with operators and more than one part, count the filter over every part, so that the
//!    decisions a filter takes (relax a phrase, rank the allowed pages exactly) are the corpus's;
//! 3. stage-1 candidates from every part, merged into the corpus's ([`Candidates::merge`]);
//! 4. stage-2 chunk scores from the parts that own the candidates;
//! 5. the pure [`rank`]; the rerank pool's passages from their parts, scored by the reranker;
//! 6. `explain`, and the results fetched from their parts.
//!
//! Parts answer with plain data, so one index answers exactly as any split of it does; a local
//! part keeps the pages it read for the rerank passages and reuses them for the results.

use std::collections::HashMap;
use std::future::Future;
use std::time::Instant;

use futures_util::future::try_join_all;

use super::explain::explain;
use super::fetch::Pages;
use super::rank::{Ranked, apply_rerank, rank, rerank_pool};
use super::{
    Candidates, ChunkScore, FilterCounts, FilterPlan, Hit, PreparedQuery, SearchParams,
    SearchResults, lap,
};
use crate::IndexError;
use crate::query::ParsedQuery;

/// Some of a corpus's documents, answering the stage calls of [`search`] in the corpus's
/// ordinals. Chunk ids are the part's own; a `(document, chunk)` pair goes to the part that owns
/// the document.
pub trait Part: Sync {
    type Error: From<IndexError> + Send;

    /// The part's counts of the query's operators.
    fn filter_counts(
        &self,
        query: &ParsedQuery,
    ) -> impl Future<Output = Result<FilterCounts, Self::Error>> + Send;

    /// Stage 1: the part's best `limit` documents of each retriever; with `plan`, the filter's
    /// decisions made on the corpus's counts (without, on the part's own).
    fn candidates(
        &self,
        query: &PreparedQuery,
        limit: usize,
        plan: Option<FilterPlan>,
    ) -> impl Future<Output = Result<Candidates, Self::Error>> + Send;

    /// Stage 2: the raw scores of every chunk of `docs` (the part's, ascending).
    fn chunk_scores(
        &self,
        query: &PreparedQuery,
        docs: Vec<u64>,
    ) -> impl Future<Output = Result<Vec<ChunkScore>, Self::Error>> + Send;

    /// The reranker's passage of each `(document, chunk)` (`None` for one the part lacks). A
    /// part that reads pages itself keeps them in `pages` for [`Part::hits`].
    fn passages(
        &self,
        chunks: Vec<(u64, u64)>,
        pages: &mut Pages,
    ) -> impl Future<Output = Result<Vec<Option<String>>, Self::Error>> + Send;

    /// The results for `ranked` (the part's documents, in order).
    fn hits(
        &self,
        ranked: Vec<Ranked>,
        pages: &mut Pages,
    ) -> impl Future<Output = Result<Vec<Hit>, Self::Error>> + Send;
}

/// The models a search calls, wherever they run (a thread here, a batcher, a GPU tier).
pub trait Models: Sync {
    type Error;

    /// Whether there is a query embedder.
    fn embeds(&self) -> bool;

    /// Whether there is a reranker.
    fn reranks(&self) -> bool;

    /// The query's unit vector.
    fn embed(&self, text: &str) -> impl Future<Output = Result<Vec<f32>, Self::Error>> + Send;

    /// A relevance score for each of `passages` against `query`, in order.
    fn rerank(
        &self,
        query: &str,
        passages: Vec<String>,
    ) -> impl Future<Output = Result<Vec<f32>, Self::Error>> + Send;
}

/// Runs one search over the corpus made of `parts` (`dense`: it holds vectors; every part, or
/// none, does) with `models`.
pub async fn search<P, M>(
    parts: &[P],
    dense: bool,
    models: &M,
    query: &ParsedQuery,
    params: &SearchParams,
) -> Result<SearchResults, P::Error>
where
    P: Part,
    M: Models<Error = P::Error>,
{
    let mut results = SearchResults::default();
    if params.k == 0 || parts.is_empty() {
        return Ok(results);
    }
    let mut clock = Instant::now();
    let embeds = dense
        && params.weights.dense_chunk > 0.0
        && models.embeds()
        && !query.text.trim().is_empty();
    let vector = match embeds {
        true => Some(models.embed(&query.text).await?),
        false => None,
    };
    results.timings.embed = lap(&mut clock);
    let prepared = PreparedQuery::new(query.clone(), vector, &params.weights, dense);
    if prepared.is_empty() {
        return Ok(results);
    }

    // One part's counts are the corpus's: it plans on its own.
    let plan = if parts.len() > 1 && query.has_filters() {
        let counts = try_join_all(parts.iter().map(|p| p.filter_counts(query))).await?;
        Some(FilterCounts::sum(counts).plan(query))
    } else {
        None
    };
    let counting = lap(&mut clock);
    let found = try_join_all(
        parts
            .iter()
            .map(|p| p.candidates(&prepared, params.candidates, plan)),
    )
    .await?;
    let (candidates, owners) = Candidates::merge(found, params.candidates.max(1));
    results.relaxed = candidates.relaxed;
    results.timings.filter = counting + candidates.filter_time;
    results.timings.candidates = lap(&mut clock).saturating_sub(candidates.filter_time);
    let docs = candidates.ordinals();
    if docs.is_empty() {
        return Ok(results);
    }

    let by_part = split(docs, |&d| d, &owners, parts.len());
    let chunks = try_join_all(parts.iter().zip(by_part).map(|(part, docs)| async {
        match docs.is_empty() {
            true => Ok(Vec::new()),
            false => part.chunk_scores(&prepared, docs).await,
        }
    }))
    .await?;
    let chunks: Vec<ChunkScore> = chunks.into_iter().flatten().collect();
    let mut ranking = rank(
        &candidates.doc_bm25(),
        &chunks,
        params.weights,
        params.fusion,
    );
    results.timings.chunks = lap(&mut clock);
    let fused = params.explain.then(|| ranking.clone());

    let mut pages: Vec<Pages> = parts.iter().map(|_| Pages::default()).collect();
    let (mut pool, mut pool_scores) = (Vec::new(), Vec::new());
    if models.reranks() && params.rerank_pool > 0 {
        let entries = rerank_pool(&ranking, params.rerank_pool);
        let asked = split(
            entries.iter().map(|e| (e.doc, e.chunk)).collect(),
            |c| c.0,
            &owners,
            parts.len(),
        );
        let texts = try_join_all(parts.iter().zip(&mut pages).zip(asked.clone()).map(
            |((part, pages), chunks)| async move {
                match chunks.is_empty() {
                    true => Ok(Vec::new()),
                    false => part.passages(chunks, pages).await,
                }
            },
        ))
        .await?;
        let mut passage: HashMap<(u64, u64), String> = asked
            .into_iter()
            .flatten()
            .zip(texts.into_iter().flatten())
            .filter_map(|(key, text)| Some((key, text?)))
            .collect();
        let (entries, passages): (Vec<_>, Vec<String>) = entries
            .into_iter()
            .filter_map(|e| Some((e, passage.remove(&(e.doc, e.chunk))?)))
            .unzip();
        if !entries.is_empty() {
            let scores = models.rerank(&query.text, passages).await?;
            if scores.len() != entries.len() {
                return Err(IndexError::Model(format!(
                    "{} rerank scores for a pool of {}",
                    scores.len(),
                    entries.len()
                ))
                .into());
            }
            ranking.ranked = apply_rerank(ranking.ranked, &entries, &scores, params.rerank_weight);
            (pool, pool_scores) = (entries, scores);
        }
    }
    results.timings.rerank = lap(&mut clock);

    ranking.ranked.truncate(params.k);
    if let Some(fused) = &fused {
        results.explained = Some(explain(
            &ranking.ranked,
            &candidates,
            &chunks,
            fused,
            (&pool, &pool_scores),
            params.weights,
            params.fusion,
        ));
    }
    let ranked = split(ranking.ranked.clone(), |r| r.doc, &owners, parts.len());
    let hits = try_join_all(parts.iter().zip(&mut pages).zip(ranked).map(
        |((part, pages), ranked)| async move {
            match ranked.is_empty() {
                true => Ok(Vec::new()),
                false => part.hits(ranked, pages).await,
            }
        },
    ))
    .await?;
    let mut by_doc: HashMap<u64, Hit> = hits.into_iter().flatten().map(|h| (h.ord, h)).collect();
    results.hits = ranking
        .ranked
        .iter()
        .filter_map(|r| by_doc.remove(&r.doc))
        .collect();
    results.timings.fetch = lap(&mut clock);
    Ok(results)
}

/// `items` split by the part that owns each one's document (`doc`), in order; items of a
/// document no part owns are dropped.
fn split<T>(
    items: Vec<T>,
    doc: impl Fn(&T) -> u64,
    owners: &HashMap<u64, usize>,
    parts: usize,
) -> Vec<Vec<T>> {
    let mut split: Vec<Vec<T>> = (0..parts).map(|_| Vec::new()).collect();
    for item in items {
        if let Some(&part) = owners.get(&doc(&item)) {
            split[part].push(item);
        }
    }
    split
}
