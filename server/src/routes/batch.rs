//! `POST /v1/search/batch`: many queries in one request (RL workers send lists), answered in
//! order. Each entry succeeds or fails on its own ([`crate::service::answer_many`], which the
//! Search-R1 `/retrieve` endpoint shares).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::search::{SearchResponse, native_response};
use super::{ApiJson, SessionSources};
use crate::error::{ApiError, ErrorBody};
use crate::service::{self, Query};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    pub queries: Vec<Query>,
    #[serde(default)]
    pub session: Option<String>,
    /// The collection every query searches (default: the path's `/c/{name}/`, else the first).
    #[serde(default)]
    pub collection: Option<String>,
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
    state.choose(request.collection.as_deref())?;
    let max = state.config.max_batch;
    if request.queries.is_empty() || request.queries.len() > max {
        return Err(ApiError::invalid(format!(
            "`queries` must hold 1 to {max} queries, got {}",
            request.queries.len()
        )));
    }
    let answers = service::answer_many(&state, session.as_ref(), request.queries).await?;
    Ok(Json(BatchResponse {
        responses: answers
            .into_iter()
            .map(|a| match a {
                Ok(answer) => BatchEntry::Ok(native_response(answer)),
                Err(e) => BatchEntry::Err(e.body()),
            })
            .collect(),
    }))
}
