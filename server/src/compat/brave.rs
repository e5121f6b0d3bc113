//! Brave Search web results: `GET /brave/res/v1/web/search?q=&count=&offset=` →
//! `{"type": "search", "query": {...}, "web": {"type": "search", "results": [...]}}`, each result
//! with `title`, `url`, `description`, `page_age`, `age`, `meta_url`. `offset` counts pages of
//! `count` results, as in Brave's API, within the 20 results stillweb ranks. Errors are Brave's
//! `{"type": "ErrorResponse", "error": {"status", "code", "detail"}}`.

use axum::Json;
use axum::extract::{Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ErrorCode};
use crate::routes::SessionSources;
use crate::routes::dialect::ErrorDialect;
use crate::service::search::MAX_K;
use crate::service::{Query, answer};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct BraveParams {
    pub q: Option<String>,
    #[serde(default)]
    pub count: Option<i64>,
    #[serde(default)]
    pub offset: Option<i64>,
}

/// `2024-05-01` → `May 1, 2024`, the human form Brave's `age` uses.
fn human_date(date: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let mut parts = date.get(..10).unwrap_or(date).split('-');
    match (
        parts.next().and_then(|y| y.parse::<u32>().ok()),
        parts.next().and_then(|m| m.parse::<usize>().ok()),
        parts.next().and_then(|d| d.parse::<u32>().ok()),
    ) {
        (Some(y), Some(m @ 1..=12), Some(d)) => format!("{} {d}, {y}", MONTHS[m - 1]),
        _ => date.to_string(),
    }
}

pub async fn search(
    State(state): State<AppState>,
    sources: SessionSources,
    params: Result<UrlQuery<BraveParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    run(&state, sources, params).await.into_response()
}

async fn run(
    state: &AppState,
    sources: SessionSources,
    params: Result<UrlQuery<BraveParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let UrlQuery(params) = params.map_err(|e| ApiError::invalid(e.body_text()))?;
    let session = sources.resolve(None)?;
    let Some(q) = params.q.filter(|q| !q.trim().is_empty()) else {
        return Err(ApiError::invalid("the `q` parameter is required"));
    };
    let count = params.count.unwrap_or(20).clamp(1, 20);
    let offset = params.offset.unwrap_or(0).clamp(0, 9);
    let start = offset * count;
    let hits = if start >= MAX_K {
        Vec::new()
    } else {
        let query = Query {
            query: q.clone(),
            k: Some((start + count).min(MAX_K)),
            rerank: None,
            rerank_pool: None,
            explain: false,
            mode: None,
        };
        answer(state, session.as_ref(), query).await?.hits
    };
    let more = hits.len() as i64 >= start + count && start + count < MAX_K;
    let results: Vec<_> = hits
        .into_iter()
        .skip(usize::try_from(start).unwrap_or(usize::MAX))
        .map(|h| {
            let parsed = url::Url::parse(&h.url).ok();
            let scheme = parsed.as_ref().map_or("https", |u| u.scheme()).to_string();
            let host = parsed
                .as_ref()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_default();
            let path = parsed
                .as_ref()
                .map_or(String::new(), |u| u.path().to_string());
            json!({
                "type": "search_result",
                "title": h.title,
                "url": h.url,
                "description": h.snippet,
                "page_age": h.date,
                "age": human_date(&h.date),
                "language": "en",
                "family_friendly": true,
                "is_source_local": false,
                "is_source_both": false,
                "profile": {"name": host, "url": format!("{scheme}://{host}"), "long_name": host},
                "meta_url": {"scheme": scheme, "netloc": host, "hostname": host, "path": path},
            })
        })
        .collect();
    Ok(Json(json!({
        "type": "search",
        "query": {"original": q, "more_results_available": more},
        "web": {"type": "search", "results": results, "family_friendly": true},
    }))
    .into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_read_like_brave_ages() {
        assert_eq!(super::human_date("2024-05-01"), "May 1, 2024");
        assert_eq!(
            super::human_date("2026-11-30T10:00:00Z"),
            "November 30, 2026"
        );
        assert_eq!(super::human_date("unknown"), "unknown");
    }
}

/// Brave's `ErrorResponse`, with Brave's error code for each of ours.
#[derive(Debug, Clone, Copy)]
pub struct Errors;

impl ErrorDialect for Errors {
    fn body(&self, code: ErrorCode, status: StatusCode, message: &str) -> Value {
        let brave_code = match code {
            ErrorCode::InvalidRequest => "VALIDATION",
            ErrorCode::Timeout | ErrorCode::BodyTimeout => "TIMEOUT",
            ErrorCode::Overloaded | ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::Unauthorized => "SUBSCRIPTION_TOKEN_INVALID",
            ErrorCode::RouteNotFound => "RESOURCE_NOT_FOUND",
            ErrorCode::SessionRequired
            | ErrorCode::UrlNotSeen
            | ErrorCode::UrlNotFound
            | ErrorCode::SessionNotFound
            | ErrorCode::CollectionNotFound
            | ErrorCode::MethodNotAllowed
            | ErrorCode::RerankUnavailable
            | ErrorCode::PayloadTooLarge
            | ErrorCode::NotReady
            | ErrorCode::ShardUnavailable
            | ErrorCode::SessionStoreUnavailable
            | ErrorCode::Forbidden
            | ErrorCode::ReloadRefused
            | ErrorCode::Internal => "GENERIC",
        };
        json!({
            "type": "ErrorResponse",
            "error": {
                "id": crate::ids::request_id(),
                "status": status.as_u16(),
                "code": brave_code,
                "detail": message,
                "meta": {"component": "stillweb"},
            },
        })
    }
}
