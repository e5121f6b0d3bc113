//! Model calls awaited without holding a search thread: a query is left in the embedder's queue
//! for a drain on the search pool, a rerank pool is queued on the reranker's dynamic batcher, and
//! the request's task waits for the answer, so that requests arriving together share model runs
//! (a blocking call would hold one of the few search threads, capping what meets in a batch at
//! their number).

use std::sync::Arc;

use stillweb_index::search::pipeline;
use stillweb_models::ModelError;
use stillweb_models::worker::{EmbedWorker, RerankWorker};
use tokio::sync::oneshot;

use crate::corpus::Corpus;
use crate::error::{ApiError, ErrorCode};
use crate::pool::{SearchPool, Waiting};
use crate::state::AppState;

/// The query vector of `text` from an embedder that gathers queries: left in its queue and
/// awaited without holding a search thread, while a drain on the search pool embeds it with
/// whatever else waits there.
async fn gathered_vector(
    pool: &SearchPool,
    embedder: &EmbedWorker,
    text: &str,
) -> Result<Vec<f32>, ApiError> {
    let (tx, rx) = oneshot::channel();
    // Dropped with this future (the client went away, or a timeout fired): the query is then
    // dropped before it runs.
    let waiting = Waiting::new();
    let reply = Box::new(move |vector| {
        let _ = tx.send(vector);
    });
    // One drain per query, queued behind the searches' work already on the pool, where the
    // query's own embedding would have run; the first to run takes what waits by then.
    if embedder.leave_query(text.to_string(), Some(waiting.flag()), reply) {
        let embedder = embedder.clone();
        pool.spawn(move || embedder.drain_queries());
    }
    let vector = rx
        .await
        .map_err(|_| ApiError::internal("the query embedder stopped"))?
        .map_err(ApiError::internal)?;
    drop(waiting);
    Ok(vector)
}

/// `passages` scored against `query` by the reranker's batcher.
pub async fn reranked(
    reranker: &RerankWorker,
    query: String,
    passages: Vec<String>,
) -> Result<Vec<f32>, ApiError> {
    let (tx, rx) = oneshot::channel();
    let waiting = Waiting::new();
    reranker
        .submit(
            query,
            passages,
            Some(waiting.flag()),
            Box::new(move |scores| {
                let _ = tx.send(scores);
            }),
        )
        .map_err(|e| ApiError::new(ErrorCode::Overloaded, e.to_string()))?;
    let scores = rx
        .await
        .map_err(|_| ApiError::internal("the reranker stopped"))?;
    drop(waiting);
    scores.map_err(|e| match e {
        ModelError::Unavailable(why) => ApiError::rerank_unavailable(why),
        e => ApiError::internal(e),
    })
}

/// The server's models as the search pipeline calls them: the query vector from the embedding
/// cache, the gathered queries' drains or a search thread; the rerank scores from the reranker's
/// batcher.
#[derive(Debug)]
pub struct ServerModels<'a> {
    pub state: &'a AppState,
    /// The corpus (and so the models) of the search.
    pub corpus: &'a Corpus,
}

impl pipeline::Models for ServerModels<'_> {
    type Error = ApiError;

    fn embeds(&self) -> bool {
        self.corpus.embedder().is_some()
    }

    fn reranks(&self) -> bool {
        self.corpus.reranker().is_some()
    }

    async fn embed(&self, text: &str) -> Result<Vec<f32>, ApiError> {
        let state = self.state;
        let Some(embedder) = self.corpus.embedder() else {
            return Err(ApiError::internal("this server has no query embedder"));
        };
        if let Some(v) = state.embeddings.get(&text.to_string()) {
            state.metrics.cache("embeddings", true);
            return Ok(v.to_vec());
        }
        state.metrics.cache("embeddings", false);
        let vector = if embedder.gathers_queries() {
            gathered_vector(&state.pool, embedder, text).await?
        } else {
            let (worker, owned) = (embedder.clone(), text.to_string());
            state
                .pool
                .run(move || worker.embed_query(&owned).map_err(ApiError::internal))
                .await?
        };
        state
            .embeddings
            .insert(text.to_string(), Arc::new(vector.clone()));
        Ok(vector)
    }

    async fn rerank(&self, query: &str, passages: Vec<String>) -> Result<Vec<f32>, ApiError> {
        match self.corpus.reranker() {
            Some(reranker) => reranked(reranker, query.to_string(), passages).await,
            None => Err(ApiError::internal("this server has no reranker")),
        }
    }
}
