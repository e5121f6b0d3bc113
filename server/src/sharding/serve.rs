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
        summed_counts(layers, &r.query)
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
                Some(summed_counts(layers, &r.query.parsed)?.plan(&r.query.parsed))
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
        per_layer(
            layers,
            &r.docs,
            |&d| d,
            |layer, docs| layer.chunk_scores(&r.query, docs),
        )
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
        per_layer(
            layers,
            &r.ranked,
            |h| h.doc,
            |layer, ranked| layer.hits(ranked),
        )
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
/// The filter counts of the shard's layers together.
fn summed_counts(
    layers: &[Arc<SearchIndex>],
    query: &stillweb_index::ParsedQuery,
) -> Result<FilterCounts, IndexError> {
    let counts = layers
        .iter()
        .map(|l| l.filter_counts(query))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(FilterCounts::sum(counts))
}

/// `run` on each layer with the items whose document (`doc`) it holds, the answers
/// concatenated in layer order; a single layer gets every item as it is.
fn per_layer<T: Copy, R>(
    layers: &[Arc<SearchIndex>],
    items: &[T],
    doc: impl Fn(&T) -> u64,
    run: impl Fn(&SearchIndex, &[T]) -> Result<Vec<R>, IndexError>,
) -> Result<Vec<R>, IndexError> {
    if let [layer] = layers {
        return run(layer, items);
    }
    let mut answers = Vec::new();
    for layer in layers {
        let held: Vec<T> = items
            .iter()
            .copied()
            .filter(|item| layer.holds_doc(doc(item)))
            .collect();
        answers.extend(run(layer, &held)?);
    }
    Ok(answers)
}

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
