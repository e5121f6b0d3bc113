//! The Search-R1 retrieval server: `POST /retrieve {"queries": [...], "topk": 3,
//! "return_scores": true}` → `{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`
//! (without `return_scores`, each entry is the document itself). `published_after` /
//! `published_before` bound the dates of every query's pages, and a query may come as
//! `{"query", "published_after", "published_before"}` with its own (an evaluation's cutoff per
//! question); a query whose bounds are unreadable gets an empty slot and its reason in `errors`.
//! `contents` is the title in quotes on the first line, then the passage — the layout of
//! Search-R1's wiki corpus, which its agents split on the first newline. Errors are FastAPI's `{"detail": ...}`.
//!
//! Training loops call it once per step with every rollout's query and read `result` without
//! checking the status, so it answers what the reference server answers: an empty batch is
//! `{"result": []}`, an empty (or otherwise unanswerable) query gets an empty list in its slot
//! while the rest are answered (the reasons go in `errors`), and a missing or non-positive `topk`
//! means the default. Batches hold up to `--max-retrieve-batch` queries (a GRPO step's
//! 512 × 5 fits in one call).
//!
//! ASearcher and RLinf's WideSeek-R1 pair it with `POST /access {"urls": [...]}` →
//! `{"result": [{"url", "title", "contents"} | null, ...]}`, pages in URL order: a URL the
//! session was not shown, or that is not in the corpus, gets `null` in its slot and its reason in
//! `errors` (their clients send no session: name one in the base URL, `/s/{session}/access`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use stillweb_corpus::date::DateFilter;

use crate::error::{ApiError, ErrorCode};
use crate::routes::dialect::ErrorDialect;
use crate::routes::{ApiJson, SessionSources};
use crate::service::Query;
use crate::service::search::{MAX_K, published_range};
use crate::service::{answer_many, visit_many};
use crate::state::AppState;

/// Documents per query when `topk` is missing, null or not positive (the reference server's
/// `retrieval_topk`).
pub const DEFAULT_TOPK: i64 = 3;

#[derive(Debug, Deserialize)]
pub struct RetrieveRequest {
    pub queries: Vec<RetrieveQuery>,
    #[serde(default)]
    pub topk: Option<i64>,
    #[serde(default)]
    pub return_scores: bool,
    /// Date bounds for every query (`YYYY-MM-DD` or ISO 8601): only pages dated at or after
    /// `published_after` and before `published_before`.
    #[serde(default)]
    pub published_after: Option<String>,
    #[serde(default)]
    pub published_before: Option<String>,
}

/// A query as the reference server takes it (text), or with its own date bounds (an
/// evaluation's per-question cutoff), which narrow the batch's.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RetrieveQuery {
    Text(String),
    Dated {
        query: String,
        #[serde(default)]
        published_after: Option<String>,
        #[serde(default)]
        published_before: Option<String>,
    },
}

impl RetrieveRequest {
    /// The batch's own bounds, refused (the whole call) when unreadable.
    fn dates(&self) -> Result<DateFilter, ApiError> {
        Ok(DateFilter {
            range: published_range(
                self.published_after.as_deref(),
                self.published_before.as_deref(),
            )?,
            past: None,
        })
    }
}

pub async fn retrieve(
    State(state): State<AppState>,
    sources: SessionSources,
    request: Result<ApiJson<RetrieveRequest>, ApiError>,
) -> Response {
    run(&state, sources, request)
        .await
        .map(Json)
        .into_response()
}

async fn run(
    state: &AppState,
    sources: SessionSources,
    request: Result<ApiJson<RetrieveRequest>, ApiError>,
) -> Result<Value, ApiError> {
    let ApiJson(request) = request?;
    let session = sources.resolve(None)?;
    let max = state.config.max_retrieve_batch;
    if request.queries.len() > max {
        return Err(ApiError::invalid(format!(
            "`queries` holds {} queries; the limit is {max} (--max-retrieve-batch)",
            request.queries.len()
        )));
    }
    let k = match request.topk {
        Some(k) if k > 0 => k.min(MAX_K),
        _ => DEFAULT_TOPK,
    };
    let dates = request.dates()?;
    let queries: Vec<Query> = request
        .queries
        .into_iter()
        .map(|entry| match entry {
            RetrieveQuery::Text(text) => Query {
                dates,
                ..Query::new(text, Some(k))
            },
            RetrieveQuery::Dated {
                query,
                published_after,
                published_before,
            } => Query {
                dates,
                published_after,
                published_before,
                ..Query::new(query, Some(k))
            },
        })
        .collect();
    let answers = answer_many(state, session.as_ref(), queries).await?;
    let mut errors = Vec::new();
    let mut result = Vec::with_capacity(answers.len());
    for (i, answer) in answers.into_iter().enumerate() {
        match answer {
            Ok(answer) => result.push(Value::Array(
                answer
                    .hits
                    .into_iter()
                    .map(|h| {
                        let document = json!({
                            "id": h.doc_id,
                            "contents": format!("\"{}\"\n{}", h.title, h.snippet),
                            "url": h.url,
                        });
                        if request.return_scores {
                            json!({"document": document, "score": h.score})
                        } else {
                            document
                        }
                    })
                    .collect(),
            )),
            // A query the index cannot answer (empty, too long, too many operators) gets no
            // documents, as the reference server gives an empty query; the server's own
            // failures fail the call.
            Err(e) if e.code == ErrorCode::InvalidRequest => {
                errors.push(json!({"index": i, "detail": e.message}));
                result.push(Value::Array(Vec::new()));
            }
            Err(e) => return Err(ApiError::new(e.code, format!("query {i}: {}", e.message))),
        }
    }
    let mut body = json!({ "result": result });
    if !errors.is_empty() {
        body["errors"] = Value::Array(errors);
    }
    Ok(body)
}

/// Most URLs one `/access` call may hold: each is a visit recorded in the session's transcript,
/// and an agent's step reads a handful of pages.
pub const MAX_ACCESS_URLS: usize = 100;

#[derive(Debug, Deserialize)]
pub struct AccessRequest {
    pub urls: Vec<String>,
    #[serde(default)]
    pub session: Option<String>,
}

pub async fn access(
    State(state): State<AppState>,
    sources: SessionSources,
    request: Result<ApiJson<AccessRequest>, ApiError>,
) -> Response {
    run_access(&state, sources, request)
        .await
        .map(Json)
        .into_response()
}

async fn run_access(
    state: &AppState,
    sources: SessionSources,
    request: Result<ApiJson<AccessRequest>, ApiError>,
) -> Result<Value, ApiError> {
    let ApiJson(request) = request?;
    let session = sources.resolve(request.session.as_deref())?;
    if request.urls.len() > MAX_ACCESS_URLS {
        return Err(ApiError::invalid(format!(
            "`urls` holds {} URLs; the limit is {MAX_ACCESS_URLS} per call",
            request.urls.len()
        )));
    }
    let pages = visit_many(
        state,
        session.as_ref(),
        &request.urls,
        "pages are returned only to the session that was shown them: name it in the base URL (/s/{session}/access), the X-Session-Id header or `session`",
    )
    .await;
    let mut errors = Vec::new();
    let mut result = Vec::with_capacity(pages.len());
    for (i, (url, page)) in request.urls.iter().zip(pages).enumerate() {
        match page {
            Ok(page) => result.push(json!({
                "url": page.url,
                "title": page.title,
                "contents": page.text,
            })),
            // A page this session may not read (or that is not there) is a `null` slot, as the
            // reference server answers a failed fetch; the store's own failures fail the call.
            Err(e)
                if matches!(
                    e.code,
                    ErrorCode::InvalidRequest
                        | ErrorCode::UrlNotSeen
                        | ErrorCode::UrlNotFound
                        | ErrorCode::SessionRequired
                ) =>
            {
                errors.push(json!({"index": i, "url": url, "code": e.code, "detail": e.message}));
                result.push(Value::Null);
            }
            Err(e) => return Err(ApiError::new(e.code, format!("url {i}: {}", e.message))),
        }
    }
    let mut body = json!({ "result": result });
    if !errors.is_empty() {
        body["errors"] = Value::Array(errors);
    }
    Ok(body)
}

/// FastAPI's error shape, which Search-R1's server answers with: `{"detail": "..."}`.
#[derive(Debug, Clone, Copy)]
pub struct Errors;

impl ErrorDialect for Errors {
    fn body(&self, _code: ErrorCode, _status: StatusCode, message: &str) -> Value {
        json!({"detail": message})
    }
}
