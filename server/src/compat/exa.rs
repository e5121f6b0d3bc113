//! Exa: `POST /exa/search` and `POST /exa/contents`, as `exa-py` calls them
//! (`Exa(api_key, base_url="http://HOST/exa")`). Search maps `numResults`, `includeDomains` and
//! `excludeDomains` onto stillweb's operators and `startPublishedDate` / `endPublishedDate` (and
//! the crawl-date pair, over the same date) onto its date filter; asked for `contents.text`, a result carries its
//! best passage (the page's full text is what a visit gives). Contents visits each URL under the
//! session rules and reports each in `statuses` (`success`, or `error` with a tag and HTTP status)
//! — a refused URL is not a failed call. The session comes from the `X-Session-Id` header or a
//! `/s/{session}/exa` base URL. Errors are `{"requestId", "error", "tag"}`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use stillweb_corpus::date::{self, DateFilter, DateRange, as_of_cutoff, parse_instant};

use super::{clamp_count, new_request_id, with_domains};
use crate::error::{ApiError, ErrorCode};
use crate::routes::dialect::{ErrorDialect, native_status};
use crate::routes::{ApiJson, SessionSources};
use crate::service::search::date_field;
use crate::service::visit_many;
use crate::service::{Query, answer};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchRequest {
    pub query: String,
    #[serde(default)]
    pub num_results: Option<i64>,
    #[serde(default)]
    pub include_domains: Vec<String>,
    #[serde(default)]
    pub exclude_domains: Vec<String>,
    #[serde(default)]
    pub contents: Option<Value>,
    /// ISO 8601 bounds on the published date (a date alone: that whole day included).
    #[serde(default)]
    pub start_published_date: Option<String>,
    #[serde(default)]
    pub end_published_date: Option<String>,
    /// The crawl-date pair: a frozen corpus's pages were crawled when they were dated, so these
    /// bound the same date.
    #[serde(default)]
    pub start_crawl_date: Option<String>,
    #[serde(default)]
    pub end_crawl_date: Option<String>,
    #[serde(flatten)]
    pub _other: serde_json::Map<String, Value>,
}

impl SearchRequest {
    /// The dates the published-date and crawl-date bounds keep, each refused by name when
    /// unreadable or when its start is after its end.
    fn dates(&self) -> Result<DateFilter, ApiError> {
        let mut range = DateRange::default();
        for (start_name, start, end_name, end) in [
            (
                "startPublishedDate",
                &self.start_published_date,
                "endPublishedDate",
                &self.end_published_date,
            ),
            (
                "startCrawlDate",
                &self.start_crawl_date,
                "endCrawlDate",
                &self.end_crawl_date,
            ),
        ] {
            let from = date_field(start_name, start.as_deref(), parse_instant)?;
            // An end given as a day includes that day (an instant, itself).
            let until = date_field(end_name, end.as_deref(), as_of_cutoff)?;
            if let (Some(f), Some(u)) = (from, until)
                && f >= u
            {
                return Err(ApiError::invalid(format!(
                    "`{start_name}` ({}) is after `{end_name}` ({})",
                    start.as_deref().unwrap_or_default(),
                    end.as_deref().unwrap_or_default()
                )));
            }
            range = range.intersect(DateRange { from, until });
        }
        Ok(DateFilter { range, past: None })
    }
}

#[derive(Debug, Deserialize)]
pub struct ContentsRequest {
    #[serde(default)]
    pub urls: Vec<String>,
    #[serde(default)]
    pub ids: Vec<String>,
    #[serde(flatten)]
    pub _other: serde_json::Map<String, Value>,
}

/// A page's date as Exa writes `publishedDate` (ISO 8601 with milliseconds), null without one.
fn published_date(date: &str) -> Option<String> {
    date::document_instant(date).map(date::rfc3339_millis)
}

/// Whether the search asked for page text (`contents.text`, or the legacy top-level `text`).
fn wants_text(request: &SearchRequest) -> bool {
    let truthy = |v: Option<&Value>| v.is_some_and(|v| v.as_bool() != Some(false) && !v.is_null());
    truthy(request.contents.as_ref().and_then(|c| c.get("text")))
        || truthy(request._other.get("text"))
}

pub async fn search(
    State(state): State<AppState>,
    sources: SessionSources,
    request: Result<ApiJson<SearchRequest>, ApiError>,
) -> Response {
    let result = async {
        let ApiJson(request) = request?;
        let session = sources.resolve(None)?;
        let text = wants_text(&request);
        let query = Query {
            dates: request.dates()?,
            ..Query::new(
                with_domains(
                    &request.query,
                    &request.include_domains,
                    &request.exclude_domains,
                ),
                Some(clamp_count(request.num_results, 10)),
            )
        };
        let answer = answer(&state, session.as_ref(), query).await?;
        let results: Vec<Value> = answer
            .hits
            .into_iter()
            .map(|h| {
                let mut r = json!({
                    "id": h.url,
                    "url": h.url,
                    "title": h.title,
                    "score": h.score,
                    "publishedDate": published_date(&h.date),
                    "author": Value::Null,
                    "highlights": [h.snippet.clone()],
                });
                if text {
                    r["text"] = h.snippet.into();
                }
                r
            })
            .collect();
        Ok::<_, ApiError>(json!({
            "requestId": new_request_id(),
            "resolvedSearchType": "hybrid",
            "searchType": "hybrid",
            "results": results,
        }))
    }
    .await;
    result.map(Json).into_response()
}

pub async fn contents(
    State(state): State<AppState>,
    sources: SessionSources,
    request: Result<ApiJson<ContentsRequest>, ApiError>,
) -> Response {
    let result = async {
        let ApiJson(request) = request?;
        let session = sources.resolve(None)?;
        let urls: Vec<String> = request.urls.into_iter().chain(request.ids).collect();
        if urls.is_empty() || urls.len() > 100 {
            return Err(ApiError::invalid("`urls` must hold 1 to 100 URLs"));
        }
        let pages = visit_many(
            &state,
            session.as_ref(),
            &urls,
            "contents needs the session that searched (X-Session-Id or a /s/{session}/exa base URL)",
        )
        .await;
        let mut results = Vec::new();
        let mut statuses = Vec::new();
        for (url, page) in urls.into_iter().zip(pages) {
            match page {
                Ok(p) => {
                    statuses.push(json!({"id": url, "status": "success", "source": "cached"}));
                    results.push(json!({
                        "id": url,
                        "url": p.url,
                        "title": p.title,
                        "publishedDate": published_date(&p.date),
                        "author": Value::Null,
                        "text": p.text,
                    }));
                }
                Err(e) => {
                    let tag = crawl_tag(e.code);
                    statuses.push(json!({
                        "id": url,
                        "status": "error",
                        // exa-py reads the tag and status; raw callers get the reason too.
                        "error": {"tag": tag, "httpStatusCode": native_status(e.code).as_u16(), "message": e.message},
                    }));
                }
            }
        }
        Ok(json!({"requestId": new_request_id(), "results": results, "statuses": statuses}))
    }
    .await;
    result.map(Json).into_response()
}

/// Exa's error shape (`{"requestId", "error", "tag"}`), with 400 for bad requests.
#[derive(Debug, Clone, Copy)]
pub struct Errors;

impl ErrorDialect for Errors {
    fn status(&self, code: ErrorCode) -> StatusCode {
        match code {
            ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
            ErrorCode::SessionRequired
            | ErrorCode::UrlNotSeen
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

    fn body(&self, code: ErrorCode, _status: StatusCode, message: &str) -> Value {
        let tag = match code {
            ErrorCode::InvalidRequest => "INVALID_REQUEST_BODY",
            ErrorCode::Timeout | ErrorCode::BodyTimeout => "TIMEOUT",
            ErrorCode::RouteNotFound => "NOT_FOUND",
            ErrorCode::Unauthorized => "INVALID_API_KEY",
            ErrorCode::Forbidden => "ACCESS_DENIED",
            ErrorCode::RateLimited => "RATE_LIMIT_EXCEEDED",
            ErrorCode::SessionRequired
            | ErrorCode::UrlNotSeen
            | ErrorCode::UrlNotFound
            | ErrorCode::SessionNotFound
            | ErrorCode::CollectionNotFound
            | ErrorCode::MethodNotAllowed
            | ErrorCode::RerankUnavailable
            | ErrorCode::Overloaded
            | ErrorCode::PayloadTooLarge
            | ErrorCode::NotReady
            | ErrorCode::ShardUnavailable
            | ErrorCode::SessionStoreUnavailable
            | ErrorCode::ReloadRefused
            | ErrorCode::Internal => "INTERNAL_ERROR",
        };
        json!({"requestId": crate::ids::request_id(), "error": message, "tag": tag})
    }
}

/// The tag of one URL's failure in a `/contents` answer's `statuses`.
fn crawl_tag(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::UrlNotFound => "CRAWL_NOT_FOUND",
        ErrorCode::UrlNotSeen | ErrorCode::SessionRequired => "SOURCE_NOT_AVAILABLE",
        ErrorCode::InvalidRequest
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
        | ErrorCode::Internal => "CRAWL_UNKNOWN_ERROR",
    }
}
