//! `POST /v1/search`: web_search.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use stillweb_corpus::url_norm::normalize_url;
use stillweb_index::{Hit, SearchParams};

use super::{ApiJson, check_session};
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// Most results one search may ask for.
pub const MAX_K: i64 = 20;
pub const DEFAULT_K: i64 = 10;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    pub query: String,
    #[serde(default)]
    pub k: Option<i64>,
    #[serde(default)]
    pub session: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SearchResult {
    pub rank: usize,
    pub title: String,
    pub url: String,
    pub date: String,
    pub snippet: String,
}

#[derive(Debug, Serialize)]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
    /// Build id of the index that answered.
    pub index: String,
}

pub async fn search(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    let session = check_session(request.session.as_deref())?.map(str::to_string);
    let query = request.query.trim().to_string();
    if query.is_empty() {
        return Err(ApiError::invalid("`query` is empty"));
    }
    let chars = query.chars().count();
    if chars > state.config.max_query_chars {
        return Err(ApiError::invalid(format!(
            "`query` has {chars} characters; the limit is {}",
            state.config.max_query_chars
        )));
    }
    let k = request.k.unwrap_or(DEFAULT_K);
    if !(1..=MAX_K).contains(&k) {
        return Err(ApiError::invalid(format!(
            "`k` must be between 1 and {MAX_K}, got {k}"
        )));
    }
    let params = SearchParams {
        k: usize::try_from(k).unwrap_or(1),
        ..state.config.search.clone()
    };
    let hits = run_search(&state, query, params).await?;
    if let Some(session) = &session {
        let keys = hits.iter().filter_map(|h| normalize_url(&h.url).ok());
        state
            .sessions
            .record(session, keys.collect::<Vec<_>>(), Instant::now());
    }
    Ok(Json(SearchResponse {
        results: hits
            .into_iter()
            .enumerate()
            .map(|(i, h)| SearchResult {
                rank: i + 1,
                title: h.title,
                url: h.url,
                date: h.date,
                snippet: h.snippet,
            })
            .collect(),
        index: state.build_id().to_string(),
    }))
}

/// Runs one search on the search pool, bounded by the request timeout.
pub async fn run_search(
    state: &AppState,
    query: String,
    params: SearchParams,
) -> Result<Vec<Hit>, ApiError> {
    let index = state.index.clone();
    let embedder = state.embedder.clone();
    let work = state.pool.run(move || {
        let vector = match &embedder {
            Some(e) => e
                .embed_queries(vec![query.clone()])
                .map_err(ApiError::internal)?
                .pop(),
            None => None,
        };
        index
            .search(&query, vector.as_deref(), &params)
            .map_err(ApiError::internal)
    });
    tokio::time::timeout(state.config.request_timeout, work)
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorCode::Timeout,
                format!(
                    "search took longer than {} s",
                    state.config.request_timeout.as_secs()
                ),
            )
        })?
}
