//! `POST /v1/search`: web_search.

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use stillweb_index::search::explain::{ExplainContext, Explanation};

use super::{ApiJson, SessionSources};
use crate::error::ApiError;
use crate::service::search::Timing;
use crate::service::{self, Answer, Query};
use crate::state::AppState;

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
    /// Return the numbers behind each result's rank.
    #[serde(default)]
    pub explain: bool,
    /// `bm25`, `dense` or `hybrid` for this query (default: the server's `--mode`).
    #[serde(default)]
    pub mode: Option<String>,
    /// The collection to search (default: the path's `/c/{name}/`, else the first).
    #[serde(default)]
    pub collection: Option<String>,
    /// Only pages dated at or after this (`YYYY-MM-DD` or ISO 8601).
    #[serde(default)]
    pub published_after: Option<String>,
    /// Only pages dated before this.
    #[serde(default)]
    pub published_before: Option<String>,
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
    /// With `"explain": true`: how the score came about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<Explanation>,
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
    /// The collection searched (`default` for the one corpus of `--index`).
    pub collection: String,
    /// With `"explain": true`: the weights, the fusion and each signal's normalisation range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<ExplainContext>,
}

pub async fn search(
    State(state): State<AppState>,
    sources: SessionSources,
    ApiJson(request): ApiJson<SearchRequest>,
) -> Result<Response, ApiError> {
    let session = sources.resolve(request.session.as_deref())?;
    state.choose(request.collection.as_deref())?;
    let query = Query {
        query: request.query,
        k: request.k,
        rerank: request.rerank,
        rerank_pool: request.rerank_pool,
        explain: request.explain,
        mode: request.mode,
        published_after: request.published_after,
        published_before: request.published_before,
        dates: Default::default(),
    };
    let answer = service::answer(&state, session.as_ref(), query).await?;
    let timing = server_timing(&answer.timing);
    let mut response = Json(native_response(answer)).into_response();
    if let Ok(value) = HeaderValue::from_str(&timing) {
        response.headers_mut().insert("server-timing", value);
    }
    Ok(response)
}

/// The native response to one answered query.
pub fn native_response(answer: Answer) -> SearchResponse {
    let collection = answer.collection().to_string();
    let (context, mut explanations) = match answer.explained {
        Some(e) => (
            Some(e.context),
            e.results.into_iter().map(|x| (x.doc, x)).collect(),
        ),
        None => (None, HashMap::new()),
    };
    SearchResponse {
        collection,
        results: answer
            .hits
            .into_iter()
            .enumerate()
            .map(|(i, h)| SearchResult {
                rank: i + 1,
                explain: explanations.remove(&h.ord),
                title: h.title,
                url: h.url,
                date: h.date,
                snippet: h.snippet,
                score: h.score,
            })
            .collect(),
        relaxed: answer.relaxed,
        reranked: answer.reranked,
        index: answer.build_id,
        explain: context,
    }
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
