//! `POST /v1/search/batch`: many queries in one request (RL workers send lists), answered in
//! order. Each entry succeeds or fails on its own. [`search_many`] is shared with the Search-R1
//! `/retrieve` endpoint: a bounded number of queries run at once on the search pool, results come
//! back in query order, and the session's transcript records them in query order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::search::{Answer, Query, SearchResponse, native_response, record, search_hits};
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
    let answers = search_many(&state, session.as_deref(), request.queries).await?;
    Ok(Json(BatchResponse {
        responses: answers
            .into_iter()
            .map(|a| match a {
                Ok(answer) => BatchEntry::Ok(native_response(&state, answer)),
                Err(e) => BatchEntry::Err(e.body()),
            })
            .collect(),
    }))
}

/// Runs `queries` with at most two per search thread in flight (so the pool stays busy while
/// results travel back, and a batch of thousands holds a bounded number of searches at once),
/// and returns each query's answer or error in query order. With a session, the answered
/// searches are recorded in query order. An internal failure (a panicked task) fails the whole
/// batch; a query's own error is its entry's.
pub async fn search_many(
    state: &AppState,
    session: Option<&str>,
    queries: Vec<Query>,
) -> Result<Vec<Result<Answer, ApiError>>, ApiError> {
    let queries: Arc<Vec<Query>> = Arc::new(queries);
    let next = Arc::new(AtomicUsize::new(0));
    let workers = (state.config.search_threads * 2).clamp(1, queries.len().max(1));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (state, queries, next) = (state.clone(), queries.clone(), next.clone());
        tasks.spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(query) = queries.get(i) else {
                    return done;
                };
                done.push((i, search_hits(&state, query.clone()).await));
            }
        });
    }
    let mut answers: Vec<Option<Result<Answer, ApiError>>> = Vec::new();
    answers.resize_with(queries.len(), || None);
    while let Some(joined) = tasks.join_next().await {
        for (i, answer) in joined.map_err(ApiError::internal)? {
            answers[i] = Some(answer);
        }
    }
    let answers: Vec<Result<Answer, ApiError>> = answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(ApiError::internal("a batch entry got no answer"))))
        .collect();
    if let Some(session) = session {
        for answer in answers.iter().flatten() {
            record(state, session, answer);
        }
    }
    Ok(answers)
}
