//! The search pipeline: one value that owns the index, the query embedder and the optional
//! reranker, and runs the stages in order. Every caller (the server, evaluation, benchmarks)
//! searches through it, so a query is embedded in one place and the stages cannot drift.

use std::sync::Arc;
use std::time::Instant;

use stillweb_model_core::worker::{EmbedWorker, RerankWorker};

use stillweb_model_core::ModelError;

use super::explain::explain;
use super::fetch::Pages;
use super::rank::{PoolEntry, Ranking, apply_rerank, rank, rerank_pool};
use super::{Candidates, ChunkScore, SearchParams, SearchResults, Weights, lap};
use crate::fusion::Fusion;
use crate::query::ParsedQuery;
use crate::{IndexError, SearchIndex};

/// An index with the models that search it.
#[derive(Debug, Clone)]
pub struct Retriever {
    index: Arc<SearchIndex>,
    embedder: Option<EmbedWorker>,
    reranker: Option<RerankWorker>,
}

impl Retriever {
    /// Refuses an embedder other than the one the index's vectors came from.
    pub fn new(
        index: Arc<SearchIndex>,
        embedder: Option<EmbedWorker>,
        reranker: Option<RerankWorker>,
    ) -> Result<Retriever, IndexError> {
        if let Some(e) = &embedder {
            index.check_embedder(e.model_id(), e.dimension(), e.engine())?;
        }
        Ok(Retriever {
            index,
            embedder,
            reranker,
        })
    }

    pub fn index(&self) -> &Arc<SearchIndex> {
        &self.index
    }

    /// The query embedder's model id, if the retriever has one.
    pub fn embedder_id(&self) -> Option<&str> {
        self.embedder.as_ref().map(EmbedWorker::model_id)
    }

    /// The query embedder, if the retriever has one.
    pub fn embedder(&self) -> Option<&EmbedWorker> {
        self.embedder.as_ref()
    }

    /// The reranker, if the retriever has one.
    pub fn reranker(&self) -> Option<&RerankWorker> {
        self.reranker.as_ref()
    }

    /// The reranker's model id, if the retriever has one.
    pub fn reranker_id(&self) -> Option<&str> {
        self.reranker.as_ref().map(|r| r.model_id())
    }

    /// The query's vector: `None` without an embedder or for blank text. The one place a
    /// query is embedded (one query per model call, so its vector never depends on others).
    pub fn embed(&self, text: &str) -> Result<Option<Vec<f32>>, IndexError> {
        match &self.embedder {
            Some(e) if self.embeds(text) => e
                .embed_query(text)
                .map(Some)
                .map_err(|e| IndexError::Model(e.to_string())),
            _ => Ok(None),
        }
    }

    /// Whether [`Retriever::embed`] gives `text` a vector: with an embedder, for text that is
    /// not blank (callers that cache vectors ask first).
    pub fn embeds(&self, text: &str) -> bool {
        self.embedder.is_some() && !text.trim().is_empty()
    }

    /// Embeds the query (when the parameters use vectors) and runs every stage.
    pub fn search(
        &self,
        query: &ParsedQuery,
        params: &SearchParams,
    ) -> Result<SearchResults, IndexError> {
        let started = Instant::now();
        let vector = if params.weights.dense_chunk > 0.0 {
            self.embed(&query.text)?
        } else {
            None
        };
        let embed = started.elapsed();
        let mut results = self.search_embedded(query, vector, params)?;
        results.timings.embed = embed;
        Ok(results)
    }

    /// Runs every stage with a query vector computed earlier (by [`Retriever::embed`], perhaps
    /// through a cache): parse → candidates → chunk scores → rank → rerank → fetch.
    pub fn search_embedded(
        &self,
        query: &ParsedQuery,
        vector: Option<Vec<f32>>,
        params: &SearchParams,
    ) -> Result<SearchResults, IndexError> {
        let mut staged = match self.stage(query, vector, params)? {
            Stage::Done(results) => return Ok(results),
            Stage::Rerank(staged) => staged,
        };
        let scores = match (self.reranker.as_ref(), staged.take_pool()) {
            (Some(reranker), Some((text, passages))) => {
                Some(reranker.rerank(&text, passages).map_err(rerank_error)?)
            }
            _ => None,
        };
        self.finish(staged, scores)
    }

    /// The stages up to reranking: either finished results (nothing to rerank, or nothing
    /// found), or a search waiting for its rerank pool's scores ([`Staged::take_pool`]), to be
    /// completed by [`Retriever::finish`]. Callers that await the reranker (the server) hold no
    /// thread while the pool waits for its batch.
    pub fn stage(
        &self,
        query: &ParsedQuery,
        vector: Option<Vec<f32>>,
        params: &SearchParams,
    ) -> Result<Stage, IndexError> {
        let mut results = SearchResults::default();
        let prepared = self.index.prepare(query.clone(), vector, &params.weights);
        if params.k == 0 || prepared.is_empty() {
            return Ok(Stage::Done(results));
        }
        let mut clock = Instant::now();
        let candidates = self.index.candidates(&prepared, params.candidates)?;
        results.relaxed = candidates.relaxed;
        results.timings.filter = candidates.filter_time;
        results.timings.candidates = lap(&mut clock).saturating_sub(candidates.filter_time);
        let docs = candidates.ordinals();
        if docs.is_empty() {
            return Ok(Stage::Done(results));
        }

        let chunks = self.index.chunk_scores(&prepared, &docs)?;
        let ranking = rank(
            &candidates.doc_bm25(),
            &chunks,
            params.weights,
            params.fusion,
        );
        results.timings.chunks = lap(&mut clock);
        let fused = params.explain.then(|| ranking.clone());

        let mut pages = Pages::default();
        let (mut pool, mut passages) = (Vec::new(), Vec::new());
        if self.reranker.is_some() && params.rerank_pool > 0 {
            let entries = rerank_pool(&ranking, params.rerank_pool);
            self.index.fetch(
                entries.iter().map(|e| e.doc),
                entries.iter().map(|e| e.chunk),
                &mut pages,
            )?;
            (pool, passages) = entries
                .into_iter()
                .filter_map(|e| Some((e, pages.passage(e.doc, e.chunk)?)))
                .unzip();
        }
        Ok(Stage::Rerank(Staged {
            results,
            candidates,
            chunks,
            ranking,
            fused,
            pages,
            pool,
            passages: (!passages.is_empty()).then(|| (query.text.clone(), passages)),
            clock,
            k: params.k,
            weights: params.weights,
            fusion: params.fusion,
        }))
    }

    /// Completes a staged search with its pool's rerank scores (`None`: not reranked).
    pub fn finish(
        &self,
        staged: Staged,
        scores: Option<Vec<f32>>,
    ) -> Result<SearchResults, IndexError> {
        let Staged {
            mut results,
            candidates,
            chunks,
            mut ranking,
            fused,
            mut pages,
            pool,
            mut clock,
            ..
        } = staged;
        let (pool_used, pool_scores) = match scores {
            Some(scores) if scores.len() == pool.len() => {
                ranking.ranked = apply_rerank(ranking.ranked, &pool, &scores);
                (pool, scores)
            }
            Some(scores) => {
                return Err(IndexError::Model(format!(
                    "{} rerank scores for a pool of {}",
                    scores.len(),
                    pool.len()
                )));
            }
            None => (Vec::new(), Vec::new()),
        };
        results.timings.rerank = lap(&mut clock);

        ranking.ranked.truncate(staged.k);
        if let Some(fused) = &fused {
            results.explained = Some(explain(
                &ranking.ranked,
                &candidates,
                &chunks,
                fused,
                (&pool_used, &pool_scores),
                staged.weights,
                staged.fusion,
            ));
        }
        self.index.fetch(
            ranking.ranked.iter().map(|r| r.doc),
            ranking.ranked.iter().filter_map(|r| r.chunk),
            &mut pages,
        )?;
        results.hits = pages.hits(&ranking.ranked);
        results.timings.fetch = lap(&mut clock);
        Ok(results)
    }
}

/// Where [`Retriever::stage`] stopped.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "made and moved once per search; boxing would only add an allocation"
)]
pub enum Stage {
    /// Nothing left to do.
    Done(SearchResults),
    /// Ranked, with (perhaps) a pool to rerank; finish with [`Retriever::finish`].
    Rerank(Staged),
}

/// A search ranked up to reranking.
#[derive(Debug)]
pub struct Staged {
    results: SearchResults,
    candidates: Candidates,
    chunks: Vec<ChunkScore>,
    ranking: Ranking,
    fused: Option<Ranking>,
    pages: Pages,
    pool: Vec<PoolEntry>,
    passages: Option<(String, Vec<String>)>,
    clock: Instant,
    k: usize,
    weights: Weights,
    fusion: Fusion,
}

impl Staged {
    /// The query text and the pool's passages to rerank, once (`None`: nothing to rerank).
    pub fn take_pool(&mut self) -> Option<(String, Vec<String>)> {
        self.passages.take()
    }
}

/// A reranker's failure as the search's error: a tier that did not answer is
/// [`IndexError::RerankUnavailable`] (the server's `rerank_unavailable`), anything else a model
/// error.
pub fn rerank_error(e: ModelError) -> IndexError {
    match e {
        ModelError::Unavailable(why) => IndexError::RerankUnavailable(why),
        e => IndexError::Model(e.to_string()),
    }
}
