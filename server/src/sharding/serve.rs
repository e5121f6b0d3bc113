//! The shard side of the protocol: a server whose index is one shard of a set answers the
//! coordinator's stage calls ([`super::protocol`]) from its layers (the shard, and that shard of
//! each overlay set) on the search pool, merged as one shard would answer. These routes are
//! mounted only on shard servers; they skip the session rules (the coordinator applies them), so
//! a shard server belongs on the cluster's private network.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use stillweb_index::search::{Candidates, ChunkScore, FilterCounts};
use stillweb_index::{Hit, IndexError, SearchIndex, StoredDoc};

use super::protocol::{
    BUILD_HEADER, CANDIDATES, CHUNKS, CandidatesRequest, ChunksRequest, FILTER_COUNTS,
    FilterCountsRequest, HITS, HitsRequest, PAGE, PASSAGES, PageRequest, PassagesRequest,
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
    headers: HeaderMap,
    ApiJson(r): ApiJson<FilterCountsRequest>,
) -> Result<Json<FilterCounts>, ApiError> {
    on_layers(&state, &headers, move |layers| {
        let counts = layers
            .iter()
            .map(|l| l.filter_counts(&r.query))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FilterCounts::sum(counts))
    })
    .await
}

async fn candidates(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(r): ApiJson<CandidatesRequest>,
) -> Result<Json<Candidates>, ApiError> {
    on_layers(&state, &headers, move |layers| {
        // Without the coordinator's plan (a set of one shard), the shard's layers together are
        // the corpus: they plan on their summed counts.
        let plan = match r.plan {
            None if layers.len() > 1 && r.query.parsed.has_filters() => {
                let counts = layers
                    .iter()
                    .map(|l| l.filter_counts(&r.query.parsed))
                    .collect::<Result<Vec<_>, _>>()?;
                Some(FilterCounts::sum(counts).plan(&r.query.parsed))
            }
            plan => plan,
        };
        if let [layer] = layers {
            return layer.candidates_planned(&r.query, r.limit, plan);
        }
        let found = layers
            .iter()
            .map(|l| l.candidates_planned(&r.query, r.limit, plan))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Candidates::merge(found, r.limit.max(1)).0)
    })
    .await
}

async fn chunks(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(r): ApiJson<ChunksRequest>,
) -> Result<Json<Vec<ChunkScore>>, ApiError> {
    on_layers(&state, &headers, move |layers| {
        if let [layer] = layers {
            return layer.chunk_scores(&r.query, &r.docs);
        }
        let mut scores = Vec::new();
        for layer in layers {
            let docs: Vec<u64> = r
                .docs
                .iter()
                .copied()
                .filter(|&d| layer.holds_doc(d))
                .collect();
            scores.extend(layer.chunk_scores(&r.query, &docs)?);
        }
        Ok(scores)
    })
    .await
}

async fn passages(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(r): ApiJson<PassagesRequest>,
) -> Result<Json<Vec<Option<String>>>, ApiError> {
    on_layers(&state, &headers, move |layers| {
        if let [layer] = layers {
            return layer.passages(&r.chunks);
        }
        let mut passages = vec![None; r.chunks.len()];
        for layer in layers {
            let (at, held): (Vec<usize>, Vec<(u64, u64)>) = r
                .chunks
                .iter()
                .enumerate()
                .filter(|(_, c)| layer.holds_doc(c.0))
                .map(|(i, &c)| (i, c))
                .unzip();
            for (i, text) in at.into_iter().zip(layer.passages(&held)?) {
                passages[i] = text;
            }
        }
        Ok(passages)
    })
    .await
}

async fn hits(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(r): ApiJson<HitsRequest>,
) -> Result<Json<Vec<Hit>>, ApiError> {
    on_layers(&state, &headers, move |layers| {
        if let [layer] = layers {
            return layer.hits(&r.ranked);
        }
        let mut hits = Vec::new();
        for layer in layers {
            let held: Vec<_> = r
                .ranked
                .iter()
                .copied()
                .filter(|h| layer.holds_doc(h.doc))
                .collect();
            hits.extend(layer.hits(&held)?);
        }
        Ok(hits)
    })
    .await
}

async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(r): ApiJson<PageRequest>,
) -> Result<Json<Option<StoredDoc>>, ApiError> {
    on_layers(&state, &headers, move |layers| {
        for layer in layers {
            if let Some(doc) = layer.doc_by_url(&r.url_key)? {
                return Ok(Some(doc));
            }
        }
        Ok(None)
    })
    .await
}

/// Runs `work` on the layers of the build the call names (the one serving, or the one before
/// the last reload; any build without the header) on the search pool.
async fn on_layers<T: Send + 'static>(
    state: &AppState,
    headers: &HeaderMap,
    work: impl FnOnce(&[Arc<SearchIndex>]) -> Result<T, IndexError> + Send + 'static,
) -> Result<Json<T>, ApiError> {
    let corpus = match headers.get(BUILD_HEADER).and_then(|v| v.to_str().ok()) {
        None => state.corpus(),
        Some(build) => state.corpus_of(build).ok_or_else(|| {
            ApiError::invalid(format!(
                "this shard server serves build {}, not {build}: reload its coordinator once every shard serves the new build",
                state.build_id()
            ))
        })?,
    };
    let Some(layers) = corpus.shard_layers() else {
        return Err(ApiError::internal("this server serves no shard of its own"));
    };
    let value = state
        .pool
        .run(move || work(&layers).map_err(ApiError::from))
        .await?;
    Ok(Json(value))
}
