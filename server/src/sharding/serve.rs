//! The shard side of the protocol: a server whose index is one shard of a set answers the
//! coordinator's stage calls ([`super::protocol`]) from its index, on the search pool. These
//! routes are mounted only on shard servers; they skip the session rules (the coordinator
//! applies them), so a shard server belongs on the cluster's private network.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use stillweb_index::search::{Candidates, ChunkScore, FilterCounts};
use stillweb_index::{Hit, IndexError, SearchIndex, StoredDoc};

use super::protocol::{
    CANDIDATES, CHUNKS, CandidatesRequest, ChunksRequest, FILTER_COUNTS, FilterCountsRequest, HITS,
    HitsRequest, PAGE, PASSAGES, PageRequest, PassagesRequest,
};
use crate::error::ApiError;
use crate::routes::ApiJson;
use crate::state::AppState;

/// The shard protocol's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(FILTER_COUNTS, post(filter_counts))
        .route(CANDIDATES, post(candidates))
        .route(CHUNKS, post(chunks))
        .route(PASSAGES, post(passages))
        .route(HITS, post(hits))
        .route(PAGE, post(page))
}

async fn filter_counts(
    State(state): State<AppState>,
    ApiJson(r): ApiJson<FilterCountsRequest>,
) -> Result<Json<FilterCounts>, ApiError> {
    on_index(&state, move |index| index.filter_counts(&r.query)).await
}

async fn candidates(
    State(state): State<AppState>,
    ApiJson(r): ApiJson<CandidatesRequest>,
) -> Result<Json<Candidates>, ApiError> {
    on_index(&state, move |index| {
        index.candidates_planned(&r.query, r.limit, r.plan)
    })
    .await
}

async fn chunks(
    State(state): State<AppState>,
    ApiJson(r): ApiJson<ChunksRequest>,
) -> Result<Json<Vec<ChunkScore>>, ApiError> {
    on_index(&state, move |index| index.chunk_scores(&r.query, &r.docs)).await
}

async fn passages(
    State(state): State<AppState>,
    ApiJson(r): ApiJson<PassagesRequest>,
) -> Result<Json<Vec<Option<String>>>, ApiError> {
    on_index(&state, move |index| index.passages(&r.chunks)).await
}

async fn hits(
    State(state): State<AppState>,
    ApiJson(r): ApiJson<HitsRequest>,
) -> Result<Json<Vec<Hit>>, ApiError> {
    on_index(&state, move |index| index.hits(&r.ranked)).await
}

async fn page(
    State(state): State<AppState>,
    ApiJson(r): ApiJson<PageRequest>,
) -> Result<Json<Option<StoredDoc>>, ApiError> {
    on_index(&state, move |index| index.doc_by_url(&r.url_key)).await
}

/// Runs `work` on this server's index on the search pool.
async fn on_index<T: Send + 'static>(
    state: &AppState,
    work: impl FnOnce(&SearchIndex) -> Result<T, IndexError> + Send + 'static,
) -> Result<Json<T>, ApiError> {
    let corpus = state.corpus();
    let Some(index) = corpus.shard_index() else {
        return Err(ApiError::internal("this server serves no shard of its own"));
    };
    let index: Arc<SearchIndex> = Arc::clone(index);
    let value = state
        .pool
        .run(move || work(&index).map_err(ApiError::internal))
        .await?;
    Ok(Json(value))
}
