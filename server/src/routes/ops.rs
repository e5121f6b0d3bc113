//! Operations: `GET /metrics` (Prometheus), `GET /info` (what is being served), and the
//! middleware every API route runs through: request ids, the concurrency limit, request metrics.

use std::time::Instant;

use axum::Json;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

pub const REQUEST_ID: &str = "x-request-id";

/// Routes that must answer even when the server is saturated.
const UNLIMITED: [&str; 4] = ["/healthz", "/readyz", "/metrics", "/info"];

/// Gives every response an `X-Request-Id` (the caller's, if it sent a sane one), turns requests
/// away with 429 and `Retry-After` when `--max-in-flight` are being served, and records the
/// request in the metrics under its route pattern.
pub async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let method = request.method().to_string();
    let id = request
        .headers()
        .get(REQUEST_ID)
        .filter(|v| {
            v.len() <= 128
                && v.as_bytes()
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b))
        })
        .cloned()
        .unwrap_or_else(|| {
            HeaderValue::from_str(&crate::compat::new_request_id())
                .unwrap_or(HeaderValue::from_static("-"))
        });
    let permit = if UNLIMITED.contains(&route.as_str()) {
        None
    } else {
        match state.in_flight.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => {
                state.metrics.rejection("overloaded");
                let mut response = ApiError::new(
                    ErrorCode::Overloaded,
                    format!(
                        "the server is serving its limit of {} requests; retry in a second",
                        state.config.max_in_flight
                    ),
                )
                .into_response();
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response.headers_mut().insert(REQUEST_ID, id);
                state
                    .metrics
                    .request(&route, &method, 429, started.elapsed());
                return response;
            }
        }
    };
    let mut response = next.run(request).await;
    drop(permit);
    let status = response.status().as_u16();
    if status == 413 {
        state.metrics.rejection("payload_too_large");
    }
    response.headers_mut().insert(REQUEST_ID, id);
    state
        .metrics
        .request(&route, &method, status, started.elapsed());
    response
}

pub async fn metrics(State(state): State<AppState>) -> Response {
    let text = state.metrics.render(state.sessions.active(Instant::now()));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

pub async fn info(State(state): State<AppState>) -> Json<Value> {
    let manifest = state.index.manifest();
    let config = &state.config;
    Json(json!({
        "service": "stillweb",
        "version": env!("CARGO_PKG_VERSION"),
        "index": {
            "build_id": manifest.build_id,
            "corpus": manifest.corpus_name,
            "documents": manifest.documents,
            "chunks": manifest.chunks,
            "created_unix": manifest.created_unix,
            "format_version": manifest.format_version,
            "dense": manifest.dense,
        },
        "models": {
            "embedder": state.embedder.as_ref().map(|e| e.model_id().to_string()),
            "reranker": state.reranker.as_ref().map(|r| stillweb_models::Reranker::model_id(r).to_string()),
            "execution_provider": config.provider.to_string(),
        },
        "search": {
            "mode": config.mode,
            "candidates": config.search.candidates,
            "weights": config.search.weights,
            "rerank_pool": config.search.rerank_pool,
            "max_rerank_pool": config.max_rerank_pool,
        },
        "limits": {
            "max_k": crate::routes::search::MAX_K,
            "max_batch": config.max_batch,
            "max_query_chars": config.max_query_chars,
            "max_body_bytes": config.max_body_bytes,
            "max_in_flight": config.max_in_flight,
            "request_timeout_secs": config.request_timeout.as_secs(),
        },
        "caches": {
            "results": {"capacity": config.result_cache_entries, "entries": state.results.len()},
            "embeddings": {"capacity": config.embedding_cache_entries, "entries": state.embeddings.len()},
        },
    }))
}
