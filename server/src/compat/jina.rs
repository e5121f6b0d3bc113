//! Jina Reader: `GET /jina/{url}` → the page as Jina's text format (`Title:`, `URL Source:`,
//! `Published Time:`, `Markdown Content:`), or as `{"code": 200, "status": 20000, "data": {...}}`
//! with `Accept: application/json`. It is a visit: the session (header `X-Session-Id` or a
//! `/s/{session}/jina/` base URL) must have been shown the URL. Errors are Jina's
//! `{"data": null, "code", "name", "status", "message", "readableMessage"}`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{ApiError, ErrorCode};
use crate::routes::SessionSources;
use crate::routes::dialect::ErrorDialect;
use crate::service::visit;
use crate::state::AppState;

pub async fn read(
    State(state): State<AppState>,
    sources: SessionSources,
    Path(params): Path<std::collections::HashMap<String, String>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let mut url = params.get("url").cloned().unwrap_or_default();
    if let Some(query) = uri.query() {
        url = format!("{url}?{query}");
    }
    let result = async {
        let session = sources.resolve(None)?.ok_or_else(|| {
            ApiError::new(
                ErrorCode::SessionRequired,
                "reading a page needs the session that was shown it (X-Session-Id header or a /s/{session}/jina/ base URL)",
            )
        })?;
        visit(&state, &session, &url).await
    }
    .await;
    let page = match result {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let json_wanted = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if json_wanted {
        let tokens = page.text.split_whitespace().count();
        return Json(json!({
            "code": 200,
            "status": 20000,
            "data": {
                "title": page.title,
                "description": "",
                "url": page.url,
                "content": page.text,
                "publishedTime": page.date,
                "usage": {"tokens": tokens},
            },
        }))
        .into_response();
    }
    let mut text = format!("Title: {}\n\nURL Source: {}\n\n", page.title, page.url);
    if !page.date.is_empty() {
        text.push_str(&format!("Published Time: {}\n\n", page.date));
    }
    text.push_str("Markdown Content:\n");
    text.push_str(&page.text);
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// Jina Reader's error shape, with Jina's error name for each of our codes.
#[derive(Debug, Clone, Copy)]
pub struct Errors;

impl ErrorDialect for Errors {
    fn body(&self, code: ErrorCode, status: StatusCode, message: &str) -> Value {
        let name = match code {
            ErrorCode::UrlNotSeen => "SecurityCompromiseError",
            ErrorCode::UrlNotFound | ErrorCode::RouteNotFound => "AssertionFailureError",
            ErrorCode::SessionRequired | ErrorCode::InvalidRequest => "ParamValidationError",
            ErrorCode::Unauthorized | ErrorCode::Forbidden => "AuthenticationRequiredError",
            ErrorCode::RateLimited => "RateLimitTriggeredError",
            ErrorCode::SessionNotFound
            | ErrorCode::CollectionNotFound
            | ErrorCode::MethodNotAllowed
            | ErrorCode::RerankUnavailable
            | ErrorCode::Overloaded
            | ErrorCode::PayloadTooLarge
            | ErrorCode::Timeout
            | ErrorCode::BodyTimeout
            | ErrorCode::NotReady
            | ErrorCode::ShardUnavailable
            | ErrorCode::SessionStoreUnavailable
            | ErrorCode::ReloadRefused
            | ErrorCode::Internal => "ServiceError",
        };
        json!({
            "data": null,
            "code": status.as_u16(),
            "name": name,
            "status": u32::from(status.as_u16()) * 100,
            "message": message,
            "readableMessage": format!("{name}: {message}"),
        })
    }
}
