//! Tavily: `POST /tavily/search` and `POST /tavily/extract`, as `tavily-python` calls them
//! (`TavilyClient(api_base_url="http://HOST/tavily")`; its `session_id=` becomes the
//! `X-Session-Id` header). Search maps `max_results`, `include_domains` and `exclude_domains`
//! onto stillweb's operators, and `time_range`, `days` (news), `start_date` / `end_date` onto
//! its date filter (`published_date` on results is an HTTP date); `include_raw_content` is refused per page for pages the session has
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
use stillweb_corpus::date::{self, DateFilter, DateRange, Past, parse_day};

use super::{clamp_count, new_request_id, with_domains};
use crate::error::{ApiError, ErrorCode};
use crate::routes::dialect::{ErrorDialect, native_status};
use crate::routes::{ApiJson, SessionSources};
use crate::service::search::date_field;
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
    /// `day`, `week`, `month`, `year` (or `d`, `w`, `m`, `y`): back from the collection's frozen
    /// clock.
    #[serde(default)]
    pub time_range: Option<String>,
    /// The past N days (Tavily reads it for `topic: news`; so does stillweb).
    #[serde(default)]
    pub days: Option<i64>,
    #[serde(default)]
    pub topic: Option<String>,
    /// `YYYY-MM-DD`, both days included.
    #[serde(default)]
    pub start_date: Option<String>,
    #[serde(default)]
    pub end_date: Option<String>,
    /// The API accepts many more options (depth, answers, images...): one frozen corpus
    /// ignores them.
    #[serde(flatten)]
    pub _other: serde_json::Map<String, Value>,
}

impl SearchRequest {
    /// The dates Tavily's `time_range`, `days` (news) and `start_date` / `end_date` keep, each
    /// refused by name when unreadable.
    fn dates(&self) -> Result<DateFilter, ApiError> {
        let mut filter = DateFilter::default();
        if let Some(range) = &self.time_range {
            filter.past = Some(match range.as_str() {
                "day" | "d" => Past::Days(1),
                "week" | "w" => Past::Weeks(1),
                "month" | "m" => Past::Months(1),
                "year" | "y" => Past::Years(1),
                other => {
                    return Err(ApiError::invalid(format!(
                        "`time_range` must be one of day, week, month, year (or d, w, m, y), got `{other}`"
                    )));
                }
            });
        }
        if let Some(days) = self.days
            && self.topic.as_deref() == Some("news")
        {
            let days = u32::try_from(days).ok().filter(|&d| d > 0).ok_or_else(|| {
                ApiError::invalid(format!(
                    "`days` must be a whole number of 1 or more, got {days}"
                ))
            })?;
            filter.past = Some(Past::Days(days));
        }
        let (start, end) = (
            date_field("start_date", self.start_date.as_deref(), parse_day)?,
            date_field("end_date", self.end_date.as_deref(), parse_day)?,
        );
        if let (Some(s), Some(e)) = (start, end)
            && s > e
        {
            return Err(ApiError::invalid(format!(
                "`start_date` ({}) is after `end_date` ({})",
                date::day(s),
                date::day(e)
            )));
        }
        filter.range = DateRange {
            from: start,
            until: end.map(|e| e + date::DAY),
        };
        Ok(filter)
    }
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
            dates: request.dates()?,
            ..Query::new(
                with_domains(
                    &request.query,
                    &request.include_domains,
                    &request.exclude_domains,
                ),
                Some(clamp_count(request.max_results, 5)),
            )
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
                    "published_date": date::document_instant(&h.date).map(date::http_date),
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
