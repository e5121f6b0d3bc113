//! The search pipeline: one value that owns the index, the query embedder and the optional
//! reranker, and runs the stages in order. Every caller (the server, evaluation, benchmarks)
//! searches through it, so a query is embedded in one place and the stages cannot drift.

use std::sync::Arc;
use std::time::Instant;

use stillweb_model_core::worker::{EmbedWorker, RerankWorker};

use super::explain::explain;
use super::fetch::Pages;
use super::rank::{apply_rerank, rank, rerank_pool};
use super::{SearchParams, SearchResults, lap};
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
        let mut results = SearchResults::default();
        let prepared = self.index.prepare(query.clone(), vector, &params.weights);
        if params.k == 0 || prepared.is_empty() {
            return Ok(results);
        }
        let mut clock = Instant::now();
        let candidates = self.index.candidates(&prepared, params.candidates)?;
        results.relaxed = candidates.relaxed;
        results.timings.filter = candidates.filter_time;
        results.timings.candidates = lap(&mut clock).saturating_sub(candidates.filter_time);
        let docs = candidates.ordinals();
        if docs.is_empty() {
            return Ok(results);
        }

        let chunks = self.index.chunk_scores(&prepared, &docs)?;
        let mut ranking = rank(
            &candidates.doc_bm25(),
            &chunks,
            params.weights,
            params.fusion,
        );
        results.timings.chunks = lap(&mut clock);
        let fused = params.explain.then(|| ranking.clone());
        let (mut pool_used, mut pool_scores) = (Vec::new(), Vec::new());

        let mut pages = Pages::default();
        if let Some(reranker) = self.reranker.as_ref().filter(|_| params.rerank_pool > 0) {
            let pool = rerank_pool(&ranking, params.rerank_pool);
            self.index.fetch(
                pool.iter().map(|e| e.doc),
                pool.iter().map(|e| e.chunk),
                &mut pages,
            )?;
            let (pool, passages): (Vec<_>, Vec<String>) = pool
                .into_iter()
                .filter_map(|e| Some((e, pages.passage(e.doc, e.chunk)?)))
                .unzip();
            if !pool.is_empty() {
                let scores = reranker
                    .rerank(&query.text, passages)
                    .map_err(|e| match e {
                        stillweb_model_core::ModelError::Unavailable(why) => {
                            IndexError::RerankUnavailable(why)
                        }
                        e => IndexError::Model(e.to_string()),
                    })?;
                ranking.ranked = apply_rerank(ranking.ranked, &pool, &scores);
                (pool_used, pool_scores) = (pool, scores);
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
                (&pool_used, &pool_scores),
                params.weights,
                params.fusion,
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
