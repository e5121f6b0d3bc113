//! Tavily: `POST /tavily/search` and `POST /tavily/extract`, as `tavily-python` calls them
//! (`TavilyClient(api_base_url="http://HOST/tavily")`; its `session_id=` becomes the
//! `X-Session-Id` header). Search maps `max_results`, `include_domains` and `exclude_domains`
//! onto stillweb's operators; `include_raw_content` is refused per page for pages the session has
//! not been shown (`raw_content: null`), since full text is what a visit gives. Extract visits each
//! URL under the session rules: refused URLs go to `failed_results`, the call itself succeeds.
//! Errors are Tavily's `{"detail": {"error": ...}}`.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{clamp_count, new_request_id, with_domains};
use crate::error::{ApiError, ErrorCode};
use crate::routes::dialect::{ErrorDialect, native_status};
use crate::routes::{ApiJson, SessionSources};
use crate::service::visit_many;
use crate::service::{Query, answer};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct SearchRequest {
    pub query: String,
    #[serde(default)]
    pub max_results: Option<i64>,
    #[serde(default)]
    pub include_domains: Vec<String>,
    #[serde(default)]
    pub exclude_domains: Vec<String>,
    /// The API accepts many more options (depth, topic, time range...): one frozen corpus
    /// ignores them.
    #[serde(flatten)]
    pub _other: serde_json::Map<String, Value>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Urls {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
pub struct ExtractRequest {
    pub urls: Urls,
    #[serde(flatten)]
    pub _other: serde_json::Map<String, Value>,
}

pub async fn search(
    State(state): State<AppState>,
    sources: SessionSources,
    request: Result<ApiJson<SearchRequest>, ApiError>,
) -> Response {
    let started = Instant::now();
    let result = async {
        let ApiJson(request) = request?;
        let session = sources.resolve(None)?;
        let query = Query {
            query: with_domains(
                &request.query,
                &request.include_domains,
                &request.exclude_domains,
            ),
            k: Some(clamp_count(request.max_results, 5)),
            rerank: None,
            rerank_pool: None,
            explain: false,
            mode: None,
        };
        let answer = answer(&state, session.as_ref(), query).await?;
        let results: Vec<Value> = answer
            .hits
            .into_iter()
            .map(|h| {
                json!({
                    "url": h.url,
                    "title": h.title,
                    "content": h.snippet,
                    "score": h.score,
                    "raw_content": Value::Null,
                    "published_date": h.date,
                })
            })
            .collect();
        Ok::<_, ApiError>(json!({
            "query": request.query,
            "follow_up_questions": Value::Null,
            "answer": Value::Null,
            "images": [],
            "results": results,
            "response_time": started.elapsed().as_secs_f64(),
            "request_id": new_request_id(),
        }))
    }
    .await;
    result.map(Json).into_response()
}

pub async fn extract(
    State(state): State<AppState>,
    sources: SessionSources,
    request: Result<ApiJson<ExtractRequest>, ApiError>,
) -> Response {
    let started = Instant::now();
    let result = async {
        let ApiJson(request) = request?;
        let session = sources.resolve(None)?;
        let urls = match request.urls {
            Urls::One(u) => vec![u],
            Urls::Many(us) => us,
        };
        if urls.is_empty() || urls.len() > 20 {
            return Err(ApiError::invalid("`urls` must hold 1 to 20 URLs"));
        }
        let pages = visit_many(
            &state,
            session.as_ref(),
            &urls,
            "extract needs the session that searched (session_id / X-Session-Id)",
        )
        .await;
        let mut results = Vec::new();
        let mut failed = Vec::new();
        for (url, page) in urls.into_iter().zip(pages) {
            match page {
                Ok(p) => results.push(json!({
                    "url": url,
                    "title": p.title,
                    "raw_content": p.text,
                    "images": [],
                })),
                Err(e) => failed.push(json!({"url": url, "error": e.message})),
            }
        }
        Ok(json!({
            "results": results,
            "failed_results": failed,
            "response_time": started.elapsed().as_secs_f64(),
            "request_id": new_request_id(),
        }))
    }
    .await;
    result.map(Json).into_response()
}

/// Tavily's error shape (`{"detail": {"error": "..."}}`), with 400 for bad requests (its client
/// maps that to its own exception type).
#[derive(Debug, Clone, Copy)]
pub struct Errors;

impl ErrorDialect for Errors {
    fn status(&self, code: ErrorCode) -> StatusCode {
        match code {
            ErrorCode::InvalidRequest | ErrorCode::SessionRequired => StatusCode::BAD_REQUEST,
            ErrorCode::UrlNotSeen
            | ErrorCode::UrlNotFound
            | ErrorCode::SessionNotFound
            | ErrorCode::CollectionNotFound
            | ErrorCode::RouteNotFound
            | ErrorCode::MethodNotAllowed
            | ErrorCode::RerankUnavailable
            | ErrorCode::Overloaded
            | ErrorCode::PayloadTooLarge
            | ErrorCode::Timeout
            | ErrorCode::BodyTimeout
            | ErrorCode::NotReady
            | ErrorCode::ShardUnavailable
            | ErrorCode::SessionStoreUnavailable
            | ErrorCode::Unauthorized
            | ErrorCode::Forbidden
            | ErrorCode::RateLimited
            | ErrorCode::ReloadRefused
            | ErrorCode::Internal => native_status(code),
        }
    }

    fn body(&self, _code: ErrorCode, _status: StatusCode, message: &str) -> Value {
        json!({"detail": {"error": message}})
    }
}
