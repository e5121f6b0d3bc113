//! The Search-R1 retrieval server: `POST /retrieve {"queries": [...], "topk": 3,
//! "return_scores": true}` → `{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}`
//! (without `return_scores`, each entry is the document itself). `contents` is the title in
//! quotes on the first line, then the passage — the layout of Search-R1's wiki corpus, which its
//! agents split on the first newline. Errors are FastAPI's `{"detail": ...}`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::clamp_count;
use crate::routes::search::{Query, answer_hits};
use crate::routes::{ApiJson, SessionSources};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct RetrieveRequest {
    pub queries: Vec<String>,
    #[serde(default)]
    pub topk: Option<i64>,
    #[serde(default)]
    pub return_scores: bool,
}

fn detail(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"detail": message.into()}))).into_response()
}

pub async fn retrieve(
    State(state): State<AppState>,
    sources: SessionSources,
    request: Result<ApiJson<RetrieveRequest>, crate::error::ApiError>,
) -> Response {
    let ApiJson(request) = match request {
        Ok(r) => r,
        Err(e) => return detail(e.code.status(), e.message),
    };
    let session = match sources.resolve(None) {
        Ok(s) => s,
        Err(e) => return detail(e.code.status(), e.message),
    };
    if request.queries.is_empty() || request.queries.len() > state.config.max_batch {
        return detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "`queries` must hold 1 to {} queries",
                state.config.max_batch
            ),
        );
    }
    let k = clamp_count(request.topk, 3);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, text) in request.queries.into_iter().enumerate() {
        let state = state.clone();
        let session = session.clone();
        let query = Query {
            query: text,
            k: Some(k),
            rerank: None,
            rerank_pool: None,
        };
        tasks.spawn(async move { (i, answer_hits(&state, session.as_deref(), query).await) });
    }
    let mut result: Vec<Value> = vec![Value::Null; tasks.len()];
    while let Some(joined) = tasks.join_next().await {
        let Ok((i, answer)) = joined else {
            return detail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "a query failed; see the server log",
            );
        };
        let answer = match answer {
            Ok(a) => a,
            Err(e) => return detail(e.code.status(), format!("query {i}: {}", e.message)),
        };
        result[i] = answer
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
            .collect();
    }
    Json(json!({ "result": result })).into_response()
}
