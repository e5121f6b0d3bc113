//! `POST /v1/search/batch`: many queries in one request (RL workers send lists), answered in
//! order. Each entry succeeds or fails on its own; the queries run concurrently on the search
//! pool.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::search::{Query, SearchResponse, answer};
use super::{ApiJson, SessionSources};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    pub queries: Vec<Query>,
    #[serde(default)]
    pub session: Option<String>,
}

/// One entry of a batch response: the search response, or the error that query got.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum BatchEntry {
    Ok(SearchResponse),
    Err(ErrorBody),
}

#[derive(Debug, Serialize)]
pub struct BatchResponse {
    pub responses: Vec<BatchEntry>,
}

pub async fn batch(
    State(state): State<AppState>,
    sources: SessionSources,
    ApiJson(request): ApiJson<BatchRequest>,
) -> Result<Json<BatchResponse>, ApiError> {
    let session = sources.resolve(request.session.as_deref())?;
    let max = state.config.max_batch;
    if request.queries.is_empty() || request.queries.len() > max {
        return Err(ApiError::invalid(format!(
            "`queries` must hold 1 to {max} queries, got {}",
            request.queries.len()
        )));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (i, query) in request.queries.into_iter().enumerate() {
        let state = state.clone();
        let session = session.clone();
        tasks.spawn(async move { (i, answer(&state, session.as_deref(), query).await) });
    }
    let mut entries: Vec<Option<BatchEntry>> = Vec::new();
    entries.resize_with(tasks.len(), || None);
    while let Some(joined) = tasks.join_next().await {
        let (i, result) = joined.map_err(ApiError::internal)?;
        entries[i] = Some(match result {
            Ok(response) => BatchEntry::Ok(response),
            Err(e) => BatchEntry::Err(e.body()),
        });
    }
    Ok(Json(BatchResponse {
        responses: entries.into_iter().flatten().collect(),
    }))
}
