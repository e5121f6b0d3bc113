//! Brave Search web results: `GET /brave/res/v1/web/search?q=&count=&offset=` →
//! `{"type": "search", "query": {...}, "web": {"type": "search", "results": [...]}}`, each result
//! with `title`, `url`, `description`, `page_age`, `age`, `meta_url`. `offset` counts pages of
//! `count` results, as in Brave's API, within the 20 results stillweb ranks; `freshness` (`pd`,
//! `pw`, `pm`, `py`, `YYYY-MM-DDtoYYYY-MM-DD`) filters by date. Errors are Brave's
//! `{"type": "ErrorResponse", "error": {"status", "code", "detail"}}`.

use axum::Json;
use axum::extract::{Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use stillweb_corpus::date::{self, DateFilter, DateRange, Past, parse_day};

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
    #[serde(default)]
    pub freshness: Option<String>,
}

/// Brave's `freshness`: `pd`, `pw`, `pm`, `py` (the past day, week, 31 days, year, back from the
/// collection's frozen clock) or `YYYY-MM-DDtoYYYY-MM-DD` (both days included).
fn freshness(value: &str) -> Result<DateFilter, ApiError> {
    let past = match value {
        "pd" => Some(Past::Days(1)),
        "pw" => Some(Past::Weeks(1)),
        "pm" => Some(Past::Days(31)),
        "py" => Some(Past::Years(1)),
        _ => None,
    };
    if past.is_some() {
        return Ok(DateFilter {
            past,
            ..DateFilter::default()
        });
    }
    let refuse = |why: String| ApiError::invalid(format!("`freshness`: {why}"));
    let Some((start, end)) = value.split_once("to") else {
        return Err(refuse(format!(
            "unknown `{value}`; use pd, pw, pm, py or YYYY-MM-DDtoYYYY-MM-DD"
        )));
    };
    let (start, end) = (
        parse_day(start).map_err(&refuse)?,
        parse_day(end).map_err(&refuse)?,
    );
    if start > end {
        return Err(refuse(format!(
            "{} is after {}",
            date::day(start),
            date::day(end)
        )));
    }
    Ok(DateFilter {
        range: DateRange::between(start, end + date::DAY),
        past: None,
    })
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
    let dates = params
        .freshness
        .as_deref()
        .map(freshness)
        .transpose()?
        .unwrap_or_default();
    let count = params.count.unwrap_or(20).clamp(1, 20);
    let offset = params.offset.unwrap_or(0).clamp(0, 9);
    let start = offset * count;
    let (hits, as_of) = if start >= MAX_K {
        (Vec::new(), None)
    } else {
        let query = Query {
            dates,
            ..Query::new(q.clone(), Some((start + count).min(MAX_K)))
        };
        let answer = answer(state, session.as_ref(), query).await?;
        (answer.hits, answer.as_of)
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
            let published = date::document_instant(&h.date);
            let mut result = json!({
                "type": "search_result",
                "title": h.title,
                "url": h.url,
                "description": h.snippet,
                "language": "en",
                "family_friendly": true,
                "is_source_local": false,
                "is_source_both": false,
                "profile": {"name": host, "url": format!("{scheme}://{host}"), "long_name": host},
                "meta_url": {"scheme": scheme, "netloc": host, "hostname": host, "path": path},
            });
            // Brave leaves both out for a page it has no date for.
            if let Some(t) = published {
                result["page_age"] = date::local_iso(t).into();
                result["age"] = date::brave_age(t, as_of.unwrap_or(t)).into();
            }
            result
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
    use super::*;

    #[test]
    fn freshness_reads_braves_periods_and_ranges_and_refuses_the_rest() {
        let day = |d: &str| parse_day(d).expect("day");
        assert_eq!(freshness("pw").expect("valid").past, Some(Past::Weeks(1)));
        assert_eq!(freshness("pm").expect("valid").past, Some(Past::Days(31)));
        assert_eq!(
            freshness("2022-01-01to2022-12-31").expect("valid").range,
            DateRange::between(day("2022-01-01"), day("2023-01-01"))
        );
        for (bad, says) in [
            ("px", "unknown `px`"),
            ("2022-01-01to2022-13-01", "`2022-13-01` is not a date"),
            ("2023-01-01to2022-01-01", "2023-01-01 is after 2022-01-01"),
        ] {
            let e = freshness(bad).expect_err(bad);
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
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
