//! Exa: `POST /exa/search` and `POST /exa/contents`, as `exa-py` calls them
//! (`Exa(api_key, base_url="http://HOST/exa")`). Search maps `numResults`, `includeDomains` and
//! `excludeDomains` onto stillweb's operators; asked for `contents.text`, a result carries its
//! best passage (the page's full text is what a visit gives). Contents visits each URL under the
//! session rules and reports each in `statuses` (`success`, or `error` with a tag and HTTP status)
//! — a refused URL is not a failed call. The session comes from the `X-Session-Id` header or a
//! `/s/{session}/exa` base URL. Errors are `{"requestId", "error", "tag"}`.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{clamp_count, new_request_id, with_domains};
use crate::error::{ApiError, ErrorCode};
use crate::routes::search::{Query, answer_hits};
use crate::routes::visit::visit_recorded;
use crate::routes::{ApiJson, SessionSources};
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
    #[serde(flatten)]
    pub _other: serde_json::Map<String, Value>,
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
            query: with_domains(
                &request.query,
                &request.include_domains,
                &request.exclude_domains,
            ),
            k: Some(clamp_count(request.num_results, 10)),
            rerank: None,
            rerank_pool: None,
        };
        let answer = answer_hits(&state, session.as_deref(), query).await?;
        let results: Vec<Value> = answer
            .hits
            .into_iter()
            .map(|h| {
                let mut r = json!({
                    "id": h.url,
                    "url": h.url,
                    "title": h.title,
                    "score": h.score,
                    "publishedDate": h.date,
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
    match result {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
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
        let mut results = Vec::new();
        let mut statuses = Vec::new();
        for url in urls {
            let page = match &session {
                Some(s) => visit_recorded(&state, s, &url).await,
                None => Err(ApiError::new(
                    ErrorCode::SessionRequired,
                    "contents needs the session that searched (X-Session-Id or a /s/{session}/exa base URL)",
                )),
            };
            match page {
                Ok(p) => {
                    statuses.push(json!({"id": url, "status": "success", "source": "cached"}));
                    results.push(json!({
                        "id": url,
                        "url": p.url,
                        "title": p.title,
                        "publishedDate": p.date,
                        "author": Value::Null,
                        "text": p.text,
                    }));
                }
                Err(e) => {
                    let tag = match e.code {
                        ErrorCode::UrlNotFound => "CRAWL_NOT_FOUND",
                        ErrorCode::UrlNotSeen | ErrorCode::SessionRequired => "SOURCE_NOT_AVAILABLE",
                        _ => "CRAWL_UNKNOWN_ERROR",
                    };
                    statuses.push(json!({
                        "id": url,
                        "status": "error",
                        // exa-py reads the tag and status; raw callers get the reason too.
                        "error": {"tag": tag, "httpStatusCode": e.code.status().as_u16(), "message": e.message},
                    }));
                }
            }
        }
        Ok(json!({"requestId": new_request_id(), "results": results, "statuses": statuses}))
    }
    .await;
    match result {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}
