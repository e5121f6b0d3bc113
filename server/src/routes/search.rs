//! `POST /v1/search`: web_search.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use stillweb_corpus::url_norm::normalize_url;
use stillweb_index::search::StageTimings;
use stillweb_index::{Hit, ParsedQuery, SearchParams, SearchResults, parse};

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
) -> Result<Response, ApiError> {
    let session = sources.resolve(request.session.as_deref())?;
    let query = Query {
        query: request.query,
        k: request.k,
        rerank: request.rerank,
        rerank_pool: request.rerank_pool,
    };
    let answer = answer_hits(&state, session.as_deref(), query).await?;
    let timing = server_timing(&answer.timing);
    let mut response = Json(native_response(&state, answer)).into_response();
    if let Ok(value) = HeaderValue::from_str(&timing) {
        response.headers_mut().insert("server-timing", value);
    }
    Ok(response)
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

/// The native response to one answered query.
pub fn native_response(state: &AppState, answer: Answer) -> SearchResponse {
    SearchResponse {
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
    }
}

/// A search's ranked pages, before any API's response shape is applied.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The query as searched (trimmed), as the session's transcript records it.
    pub query: String,
    pub hits: Vec<Hit>,
    pub relaxed: bool,
    pub reranked: bool,
    /// Where the time went (the native endpoint sends it as `Server-Timing`).
    pub timing: Timing,
}

/// Most operators (phrases, `site:`, `-term`, each `OR` alternative) one query may hold: each is
/// a filter clause over the whole index, so a query of hundreds would cost seconds.
pub const MAX_QUERY_OPERATORS: usize = 32;

/// Validates and runs one query; with a session, records it and makes its results visitable.
/// Every single-search endpoint, native or compatible, goes through here (batches go through
/// [`search_hits`] and [`record`], to record in query order).
pub async fn answer_hits(
    state: &AppState,
    session: Option<&str>,
    request: Query,
) -> Result<Answer, ApiError> {
    let answer = search_hits(state, request).await?;
    if let Some(session) = session {
        record(state, session, &answer);
    }
    Ok(answer)
}

/// Validates and runs one query without recording it anywhere.
pub async fn search_hits(state: &AppState, request: Query) -> Result<Answer, ApiError> {
    let query = request.query.trim().to_string();
    if query.is_empty() {
        return Err(ApiError::invalid("`query` is empty"));
    }
    super::check_kept("`query`", &query, state.config.max_query_chars)?;
    let k = request.k.unwrap_or(DEFAULT_K);
    if !(1..=MAX_K).contains(&k) {
        return Err(ApiError::invalid(format!(
            "`k` must be between 1 and {MAX_K}, got {k}"
        )));
    }
    let parsed = parse(&query);
    let operators = parsed.operator_count();
    if operators > MAX_QUERY_OPERATORS {
        return Err(ApiError::invalid(format!(
            "`query` has {operators} operators (phrases, site:, -term); the limit is {MAX_QUERY_OPERATORS}"
        )));
    }
    let params = SearchParams {
        k: usize::try_from(k).unwrap_or(1),
        rerank_pool: rerank_pool(state, request.rerank, request.rerank_pool)?,
        ..state.config.search.clone()
    };
    let reranked = params.rerank_pool > 0;
    let started = Instant::now();
    let timed = run_search(state, parsed, params).await?;
    let timing = Timing {
        stages: timed.results.timings,
        cached: timed.cached,
        total: started.elapsed(),
    };
    let SearchResults { hits, relaxed, .. } = timed.results;
    Ok(Answer {
        query,
        hits,
        relaxed,
        reranked,
        timing,
    })
}

/// Writes `answer` to `session`'s transcript and makes its results visitable there.
pub fn record(state: &AppState, session: &str, answer: &Answer) {
    let shown: Vec<(String, String)> = answer
        .hits
        .iter()
        .filter_map(|h| normalize_url(&h.url).ok().map(|key| (h.url.clone(), key)))
        .collect();
    state.sessions.record_search(
        session,
        &answer.query,
        &shown,
        Instant::now(),
        SystemTime::now(),
    );
}

/// The request's rerank pool: 0 when not reranking; an error for a pool outside
/// 0..=--max-rerank-pool (whether or not the server has a reranker), or when the request asks
/// for a reranker the server does not have.
fn rerank_pool(
    state: &AppState,
    rerank: Option<bool>,
    pool: Option<i64>,
) -> Result<usize, ApiError> {
    let max = state.config.max_rerank_pool;
    if let Some(n) = pool
        && !(0..=max as i64).contains(&n)
    {
        return Err(ApiError::invalid(format!(
            "`rerank_pool` must be between 0 (no reranking) and {max}, got {n}"
        )));
    }
    let has_reranker = state.retriever.reranker_id().is_some();
    let wanted = rerank.unwrap_or(has_reranker && pool != Some(0));
    if !wanted {
        return Ok(0);
    }
    if !has_reranker {
        return Err(ApiError::new(
            ErrorCode::RerankUnavailable,
            "this server has no reranker (start it with --reranker DIR); omit `rerank` or send false",
        ));
    }
    match pool {
        None => Ok(state.config.search.rerank_pool),
        Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(1)),
        Some(n) => Err(ApiError::invalid(format!(
            "`rerank_pool` must be between 1 and {max} when `rerank` is true, got {n}"
        ))),
    }
}

/// A search's results with where the time went.
#[derive(Debug, Clone)]
pub struct Timed {
    pub results: SearchResults,
    /// Served from the result cache.
    pub cached: bool,
}

/// Runs one search on the search pool, through the retriever. Identical searches on the
/// same index are answered from the bounded result cache; query vectors come from the bounded
/// embedding cache when the same text was embedded before.
pub async fn run_search(
    state: &AppState,
    query: ParsedQuery,
    params: SearchParams,
) -> Result<Timed, ApiError> {
    let key = format!("{}\u{1}{params:?}\u{1}{query:?}", state.build_id());
    if let Some(results) = state.results.get(&key) {
        state.metrics.cache("results", true);
        return Ok(Timed {
            results: SearchResults {
                timings: StageTimings::default(),
                ..(*results).clone()
            },
            cached: true,
        });
    }
    state.metrics.cache("results", false);
    let retriever = Arc::clone(&state.retriever);
    let embeddings = state.embeddings.clone();
    let metrics = state.metrics.clone();
    let work = state.pool.run(move || {
        let started = Instant::now();
        let embedded = retriever.embedder_id().is_some() && !query.text.trim().is_empty();
        let vector = match embedded.then(|| embeddings.get(&query.text)) {
            None => None,
            Some(Some(v)) => {
                metrics.cache("embeddings", true);
                Some(v.to_vec())
            }
            Some(None) => {
                metrics.cache("embeddings", false);
                let v = retriever.embed(&query.text).map_err(ApiError::internal)?;
                if let Some(v) = &v {
                    embeddings.insert(query.text.clone(), Arc::new(v.clone()));
                }
                v
            }
        };
        let embed = started.elapsed();
        let mut results = retriever
            .search_embedded(&query, vector, &params)
            .map_err(ApiError::internal)?;
        results.timings.embed = embed;
        Ok::<_, ApiError>(Timed {
            results,
            cached: false,
        })
    });
    // Bounded by the request's time limit (the `observe` middleware), not per search.
    let timed = work.await?;
    let t = timed.results.timings;
    for (stage, elapsed) in [
        ("filter", t.filter),
        ("embed", t.embed),
        ("candidates", t.candidates),
        ("chunks", t.chunks),
        ("rerank", t.rerank),
        ("fetch", t.fetch),
    ] {
        state.metrics.stage(stage, elapsed);
    }
    state.results.insert(key, Arc::new(timed.results.clone()));
    Ok(timed)
}

/// One search's time by stage, as the caller saw it.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub stages: StageTimings,
    pub cached: bool,
    pub total: Duration,
}

/// `Server-Timing` for one search: each stage in milliseconds, and whether the cache answered.
pub fn server_timing(timing: &Timing) -> String {
    let t = timing.stages;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut header = format!(
        "filter;dur={:.2}, embed;dur={:.2}, candidates;dur={:.2}, chunks;dur={:.2}, rerank;dur={:.2}, fetch;dur={:.2}, total;dur={:.2}",
        ms(t.filter),
        ms(t.embed),
        ms(t.candidates),
        ms(t.chunks),
        ms(t.rerank),
        ms(t.fetch),
        ms(timing.total)
    );
    if timing.cached {
        header.push_str(", cache;desc=\"hit\"");
    }
    header
}
