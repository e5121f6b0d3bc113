//! `POST /rerank`: this server's reranker as a service, in the shape text-embeddings-inference
//! (and vLLM's TEI-compatible route) use — `{"query", "texts"}` in, `[{"index", "score"}]` out,
//! best first — so that a GPU fleet of stillweb servers, or of those servers, can rerank for
//! others.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::ApiJson;
use crate::error::{ApiError, ErrorCode};
use crate::service::limits::check_kept;
use crate::state::AppState;

/// Longest text scored, in characters (chunks are at most 500; the model truncates tokens).
pub const MAX_TEXT_CHARS: usize = 16_384;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerankRequest {
    pub query: String,
    pub texts: Vec<String>,
    /// TEI's flag for logits instead of probabilities; only `false` is served.
    #[serde(default)]
    pub raw_scores: bool,
    /// Echo each text in its result.
    #[serde(default)]
    pub return_text: bool,
    /// TEI's truncation flags: the model always truncates a pair to its maximum length.
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    pub truncation_direction: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Ranked {
    pub index: usize,
    /// The reranker's relevance probability, in [0, 1].
    pub score: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

pub async fn rerank(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<RerankRequest>,
) -> Result<Json<Vec<Ranked>>, ApiError> {
    let Some(reranker) = state.corpus().reranker().cloned() else {
        return Err(ApiError::new(
            ErrorCode::RerankUnavailable,
            "this server has no reranker (start it with --reranker DIR)",
        ));
    };
    if request.raw_scores {
        return Err(ApiError::invalid(
            "`raw_scores: true` is not served: scores are the reranker's probabilities",
        ));
    }
    if request.query.trim().is_empty() {
        return Err(ApiError::invalid("`query` is empty"));
    }
    check_kept("`query`", &request.query, state.config.max_query_chars)?;
    let max = state.config.max_rerank_pool;
    if request.texts.is_empty() || request.texts.len() > max {
        return Err(ApiError::invalid(format!(
            "`texts` must hold 1 to {max} texts (--max-rerank-pool), got {}",
            request.texts.len()
        )));
    }
    for text in &request.texts {
        check_kept("each of `texts`", text, MAX_TEXT_CHARS)?;
    }
    let RerankRequest {
        query,
        texts,
        return_text,
        ..
    } = request;
    let echo = return_text.then(|| texts.clone());
    // Queued on the reranker's batcher with the pools of concurrent searches and requests.
    let scores = crate::service::models::reranked(&reranker, query, texts).await?;
    let mut ranked: Vec<Ranked> = scores
        .into_iter()
        .enumerate()
        .map(|(index, score)| Ranked {
            index,
            score,
            text: echo.as_ref().map(|t| t[index].clone()),
        })
        .collect();
    // Best first; ties in input order.
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    Ok(Json(ranked))
}
