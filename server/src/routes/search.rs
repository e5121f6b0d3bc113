//! `POST /v1/search`: web_search.

use std::time::{Instant, SystemTime};

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use stillweb_corpus::url_norm::normalize_url;
use stillweb_index::{Hit, ParsedQuery, SearchParams, SearchResults, parse};
use stillweb_models::Reranker;

use super::{ApiJson, SessionSources};
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
    /// Rerank the chunk pool (default: whenever the server has a reranker).
    #[serde(default)]
    pub rerank: Option<bool>,
    /// Chunks to rerank (default: the server's --rerank-pool).
    #[serde(default)]
    pub rerank_pool: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct SearchResult {
    pub rank: usize,
    pub title: String,
    pub url: String,
    pub date: String,
    pub snippet: String,
    /// The ranking score: comparable within one response only.
    pub score: f32,
}

#[derive(Debug, Serialize)]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
    /// A quoted phrase occurred in no page, so it was searched as plain words.
    pub relaxed: bool,
    /// Whether a cross-encoder reordered the leading results.
    pub reranked: bool,
    /// Build id of the index that answered.
    pub index: String,
}

pub async fn search(
    State(state): State<AppState>,
    sources: SessionSources,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    let session = sources.resolve(request.session.as_deref())?;
    let query = Query {
        query: request.query,
        k: request.k,
        rerank: request.rerank,
        rerank_pool: request.rerank_pool,
    };
    answer(&state, session.as_deref(), query).await.map(Json)
}

/// One query's parameters, as a search or a batch entry gives them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    pub query: String,
    #[serde(default)]
    pub k: Option<i64>,
    #[serde(default)]
    pub rerank: Option<bool>,
    #[serde(default)]
    pub rerank_pool: Option<i64>,
}

/// Validates and runs one query and returns the native response.
pub async fn answer(
    state: &AppState,
    session: Option<&str>,
    request: Query,
) -> Result<SearchResponse, ApiError> {
    let answer = answer_hits(state, session, request).await?;
    Ok(SearchResponse {
        results: answer
            .hits
            .into_iter()
            .enumerate()
            .map(|(i, h)| SearchResult {
                rank: i + 1,
                title: h.title,
                url: h.url,
                date: h.date,
                snippet: h.snippet,
                score: h.score,
            })
            .collect(),
        relaxed: answer.relaxed,
        reranked: answer.reranked,
        index: state.build_id().to_string(),
    })
}

/// A search's ranked pages, before any API's response shape is applied.
#[derive(Debug, Clone)]
pub struct Answer {
    pub hits: Vec<Hit>,
    pub relaxed: bool,
    pub reranked: bool,
}

/// Validates and runs one query; with a session, records it and makes its results visitable.
/// Every search endpoint, native or compatible, goes through here.
pub async fn answer_hits(
    state: &AppState,
    session: Option<&str>,
    request: Query,
) -> Result<Answer, ApiError> {
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
        rerank_pool: rerank_pool(state, request.rerank, request.rerank_pool)?,
        ..state.config.search.clone()
    };
    let reranked = params.rerank_pool > 0;
    let SearchResults { hits, relaxed } = run_search(state, parse(&query), params).await?;
    if let Some(session) = session {
        let shown: Vec<(String, String)> = hits
            .iter()
            .filter_map(|h| normalize_url(&h.url).ok().map(|key| (h.url.clone(), key)))
            .collect();
        state
            .sessions
            .record_search(session, &query, &shown, Instant::now(), SystemTime::now());
    }
    Ok(Answer {
        hits,
        relaxed,
        reranked,
    })
}

/// The request's rerank pool: 0 when not reranking; an error when it asks for a reranker the
/// server does not have or for a pool outside 1..=--max-rerank-pool.
fn rerank_pool(
    state: &AppState,
    rerank: Option<bool>,
    pool: Option<i64>,
) -> Result<usize, ApiError> {
    let wanted = rerank.unwrap_or(state.reranker.is_some() && pool != Some(0));
    if !wanted {
        return Ok(0);
    }
    if state.reranker.is_none() {
        return Err(ApiError::new(
            ErrorCode::RerankUnavailable,
            "this server has no reranker (start it with --reranker DIR); omit `rerank` or send false",
        ));
    }
    let max = state.config.max_rerank_pool;
    match pool {
        None => Ok(state.config.search.rerank_pool),
        Some(n) if (1..=max as i64).contains(&n) => Ok(usize::try_from(n).unwrap_or(1)),
        Some(n) => Err(ApiError::invalid(format!(
            "`rerank_pool` must be between 1 and {max}, got {n}"
        ))),
    }
}

/// Runs one search on the search pool, bounded by the request timeout.
pub async fn run_search(
    state: &AppState,
    query: ParsedQuery,
    params: SearchParams,
) -> Result<SearchResults, ApiError> {
    let index = state.index.clone();
    let embedder = state.embedder.clone();
    let mut reranker = state.reranker.clone();
    let work = state.pool.run(move || {
        let vector = match &embedder {
            Some(e) if !query.text.trim().is_empty() => e
                .embed_queries(vec![query.text.clone()])
                .map_err(ApiError::internal)?
                .pop(),
            _ => None,
        };
        index
            .search(
                &query,
                vector.as_deref(),
                &params,
                reranker.as_mut().map(|r| r as &mut dyn Reranker),
            )
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
