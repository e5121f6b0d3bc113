//! Serper (Google results as JSON): `POST /serper/search {"q", "num", "page"}` →
//! `{"searchParameters": {...}, "organic": [{"title", "link", "snippet", "date", "position"}]}`.
//! Pages are `num` results each, within the 20 results stillweb ranks. Errors are
//! `{"message", "statusCode"}`, as Serper sends them.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::error::ApiError;
use crate::routes::search::{MAX_K, Query, answer_hits};
use crate::routes::{ApiJson, SessionSources};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct SerperRequest {
    pub q: String,
    #[serde(default)]
    pub num: Option<i64>,
    #[serde(default)]
    pub page: Option<i64>,
    /// Country, language, location, type...: accepted and ignored (one frozen corpus).
    #[serde(flatten)]
    pub _other: serde_json::Map<String, serde_json::Value>,
}

fn error(e: ApiError) -> Response {
    let status = e.code.status();
    (
        status,
        Json(json!({"message": e.message, "statusCode": status.as_u16()})),
    )
        .into_response()
}

pub async fn search(
    State(state): State<AppState>,
    sources: SessionSources,
    request: Result<ApiJson<SerperRequest>, ApiError>,
) -> Response {
    match run(&state, sources, request).await {
        Ok(r) => r,
        Err(e) => error(e),
    }
}

async fn run(
    state: &AppState,
    sources: SessionSources,
    request: Result<ApiJson<SerperRequest>, ApiError>,
) -> Result<Response, ApiError> {
    let ApiJson(request) = request?;
    let session = sources.resolve(None)?;
    let num = request.num.unwrap_or(10).clamp(1, 100);
    let page = request.page.unwrap_or(1).max(1);
    let start = (page - 1).saturating_mul(num);
    let k = start.saturating_add(num).min(MAX_K);
    let hits = if start >= MAX_K {
        Vec::new()
    } else {
        let query = Query {
            query: request.q.clone(),
            k: Some(k),
            rerank: None,
            rerank_pool: None,
        };
        answer_hits(state, session.as_deref(), query).await?.hits
    };
    let organic: Vec<_> = hits
        .into_iter()
        .enumerate()
        .skip(usize::try_from(start).unwrap_or(usize::MAX))
        .map(|(i, h)| {
            let mut item = json!({
                "title": h.title,
                "link": h.url,
                "snippet": h.snippet,
                "position": i + 1,
            });
            if !h.date.is_empty() {
                item["date"] = h.date.into();
            }
            item
        })
        .collect();
    Ok(Json(json!({
        "searchParameters": {
            "q": request.q,
            "type": "search",
            "num": num,
            "page": page,
            "engine": "stillweb",
        },
        "organic": organic,
        "credits": 1,
    }))
    .into_response())
}
