//! Operations: `GET /metrics` (Prometheus), `GET /info` (what is being served), and the
//! middleware every API route runs through: request ids, the concurrency limit, request metrics.

use std::time::Instant;

use axum::Json;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::OwnedSemaphorePermit;

use crate::access::{Caller, Guard, Refusal};
use crate::error::{ApiError, ErrorCode};
use crate::metrics::Scrape;
use crate::routes::dialect::Dialect;
use crate::sharding::protocol::BUILD_HEADER;
use crate::state::AppState;

pub const REQUEST_ID: &str = "x-request-id";

/// Routes that must answer even when the server is saturated.
const UNLIMITED: [&str; 4] = ["/healthz", "/readyz", "/metrics", "/info"];

/// Gives every response, routed or not (a 404 too), an `X-Request-Id`: the caller's, if it sent
/// a sane one, else a new one. The outermost layer of the router.
pub async fn request_id(request: Request, next: Next) -> Response {
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
            HeaderValue::from_str(&crate::ids::request_id())
                .unwrap_or(HeaderValue::from_static("-"))
        });
    let mut response = next.run(request).await;
    response.headers_mut().insert(REQUEST_ID, id);
    response
}

/// Reads the request body (bounded in size and time) before the request takes one of the
/// `--max-in-flight` slots (so slow senders hold none), turns requests away with 429 and
/// `Retry-After` when every slot is taken, bounds the whole request by `--request-timeout-secs`
/// (a batch's searches share it), and records the request in the metrics under its route
/// pattern.
pub async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let method = request.method().to_string();
    let response = match admit(&state, &route, request).await {
        Ok((request, _slot)) => {
            // The whole request runs on the builds serving as it starts, and names the one of
            // the collection it searched.
            let caller = request
                .extensions()
                .get::<Caller>()
                .cloned()
                .unwrap_or_else(Caller::open);
            match state.request(path_collection(request.uri().path()), &caller) {
                Ok(taken) => {
                    let run = crate::state::on_corpora(taken, next.run(request));
                    match tokio::time::timeout(state.config.request_timeout, run).await {
                        Ok((mut response, corpus)) => {
                            if let Ok(build) = HeaderValue::from_str(corpus.build_id()) {
                                response.headers_mut().insert(BUILD_HEADER, build);
                            }
                            response
                        }
                        Err(_) => {
                            state.metrics.rejection("timeout");
                            ApiError::new(
                                ErrorCode::Timeout,
                                format!(
                                    "the request took longer than {} s (--request-timeout-secs; a batch's searches share it)",
                                    state.config.request_timeout.as_secs()
                                ),
                            )
                            .into_response()
                        }
                    }
                }
                Err(unknown) => unknown.into_response(),
            }
        }
        Err(refusal) => refusal,
    };
    state.metrics.request(
        &route,
        &method,
        response.status().as_u16(),
        started.elapsed(),
    );
    if let Some(error) = response.extensions().get::<ApiError>() {
        state.metrics.error(error.code.as_str());
    }
    response
}

/// The collection a `/c/{name}/...` path names.
fn path_collection(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/c/")?;
    Some(rest.split_once('/').map_or(rest, |(name, _)| name))
}

/// The request with its body read, and the in-flight slot it holds until the caller drops it
/// (none for the routes that must answer when saturated); or the refusal.
async fn admit(
    state: &AppState,
    route: &str,
    request: Request,
) -> Result<(Request, Option<OwnedSemaphorePermit>), Response> {
    let (parts, body) = request.into_parts();
    let limit = state.config.body_limit(route);
    let too_large = || {
        state.metrics.rejection("payload_too_large");
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than this endpoint's limit of {limit} bytes"),
        )
        .into_response()
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let read = http_body_util::BodyExt::collect(http_body_util::Limited::new(body, limit));
    let bytes = match tokio::time::timeout(state.config.body_read_timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Ok(Err(e)) => {
            return Err(
                ApiError::invalid(format!("the request body could not be read: {e}"))
                    .into_response(),
            );
        }
        Err(_) => {
            state.metrics.rejection("body_timeout");
            let mut refusal = ApiError::new(
                ErrorCode::BodyTimeout,
                format!(
                    "the request body did not arrive within {} s (--body-read-timeout-secs)",
                    state.config.body_read_timeout.as_secs()
                ),
            )
            .into_response();
            refusal
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return Err(refusal);
        }
    };
    let caller = match &state.config.api_keys {
        None => Caller::open(),
        Some(keys) => {
            let guard = Guard::of(route);
            match keys.authorize(
                guard,
                Dialect::of(parts.uri.path()),
                &parts.headers,
                parts.uri.query(),
                &bytes,
                Instant::now(),
            ) {
                Ok(caller) => {
                    if guard != Guard::Open {
                        state.metrics.key_request(&caller.namespace);
                    }
                    caller
                }
                Err(refusal) => return Err(refused(state, refusal)),
            }
        }
    };
    let mut parts = parts;
    parts.extensions.insert(caller);
    let request = Request::from_parts(parts, Body::from(bytes));
    if UNLIMITED.contains(&route) {
        return Ok((request, None));
    }
    match state.in_flight.clone().try_acquire_owned() {
        Ok(permit) => Ok((request, Some(permit))),
        Err(_) => {
            state.metrics.rejection("overloaded");
            let mut refusal = ApiError::new(
                ErrorCode::Overloaded,
                format!(
                    "the server is serving its limit of {} requests; retry in a second",
                    state.config.max_in_flight
                ),
            )
            .into_response();
            refusal
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            Err(refusal)
        }
    }
}

/// A request refused by its API key: 401 with `WWW-Authenticate`, 403, or 429 with
/// `Retry-After` (whole seconds, at least 1).
fn refused(state: &AppState, refusal: Refusal) -> Response {
    state.metrics.rejection(refusal.error.code.as_str());
    let unauthorized = refusal.error.code == ErrorCode::Unauthorized;
    let mut response = refusal.error.into_response();
    let headers = response.headers_mut();
    if let Some(wait) = refusal.retry_after {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if unauthorized {
        headers.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"stillweb\""),
        );
    }
    response
}

pub async fn metrics(State(state): State<AppState>) -> Response {
    let corpora = state.corpora();
    let default = &corpora[0];
    let mut batchers = Vec::new();
    if let Some(reranker) = default.reranker() {
        batchers.push(("reranker", reranker.batch_stats()));
    }
    if let Some(stats) = default.embedder().and_then(|e| e.batch_stats()) {
        batchers.push(("query_embedder", stats));
    }
    let scrape = Scrape {
        active_sessions: state.sessions.active().await.ok(),
        builds: corpora
            .iter()
            .map(|c| (c.collection(), c.build_id()))
            .collect(),
        replicas: corpora
            .iter()
            .flat_map(|c| {
                c.shards().flat_map(move |set| {
                    set.replicas
                        .iter()
                        .map(move |r| (c.collection(), set.shard, r.url.as_str(), r.is_healthy()))
                })
            })
            .collect(),
        batchers,
    };
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(&scrape),
    )
        .into_response()
}

pub async fn info(State(state): State<AppState>) -> Json<Value> {
    let corpus = state.corpus();
    let about = &corpus.info;
    let mut index = json!({
        "build_id": about.build_id,
        "corpus": about.corpus_name,
        "documents": about.documents,
        "chunks": about.chunks,
        "created_unix": about.created_unix,
        "format_version": about.format_version,
        "dense": about.dense,
        "swaps": state.metrics.swaps(),
        // Instants as seconds since the epoch (what a coordinator reads), and the clock as a
        // date-time people read.
        "dates": about.dates,
        "as_of": about.dates.as_of.map(stillweb_corpus::date::rfc3339),
    });
    let shards: Vec<Value> = corpus
        .shards()
        .map(|s| {
            json!({
                "shard": s.shard,
                "replicas": s.replicas.iter().map(|r| json!({
                    "url": r.url,
                    "healthy": r.is_healthy(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    if !about.overlays.is_empty() {
        index["overlays"] = json!(about.overlays);
    }
    if shards.is_empty() {
        index["shard"] = json!(about.shard);
    } else {
        index["shards"] = json!(shards);
    }
    let config = &state.config;
    let collections: Vec<Value> = state
        .corpora()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "name": c.collection(),
                "default": i == 0,
                "build_id": c.build_id(),
                "corpus": c.info.corpus_name,
                "documents": c.info.documents,
                "chunks": c.info.chunks,
                "dense": c.info.dense.is_some(),
                "mode": c.mode,
                "overlays": c.info.overlays.len(),
                "shards": c.shards().count(),
            })
        })
        .collect();
    let scholar = collections
        .iter()
        .any(|c| c["name"] == config.scholar_collection.as_str())
        .then_some(config.scholar_collection.as_str());
    Json(json!({
        "service": "stillweb",
        "version": env!("CARGO_PKG_VERSION"),
        "index": index,
        "collections": collections,
        "scholar_collection": scholar,
        "preset": config.preset.map(|p| json!({"name": p.name(), "purpose": p.purpose()})),
        "models": {
            "embedder": state.corpus().embedder_id(),
            "reranker": state.corpus().reranker_id(),
            "reranker_urls": config.reranker_urls,
            "execution_provider": config.provider.to_string(),
        },
        "search": {
            "mode": corpus.mode,
            "candidates": config.search.candidates,
            "weights": corpus.mode.weights(),
            "rerank_pool": config.search.rerank_pool,
            "rerank_weight": config.search.rerank_weight,
            "max_rerank_pool": config.max_rerank_pool,
        },
        "limits": {
            "max_k": config.max_k,
            "max_batch": config.max_batch,
            "max_retrieve_batch": config.max_retrieve_batch,
            "max_retrieve_body_bytes": config.max_retrieve_body_bytes,
            "header_read_timeout_secs": config.header_read_timeout.as_secs(),
            "body_read_timeout_secs": config.body_read_timeout.as_secs(),
            "max_query_chars": config.max_query_chars,
            "max_body_bytes": config.max_body_bytes,
            "max_in_flight": config.max_in_flight,
            "request_timeout_secs": config.request_timeout.as_secs(),
        },
        "sessions": state.sessions.describe(),
        "api_keys": state.config.api_keys.as_ref().map(|keys| json!({"keys": keys.len()})),
        "gold": state.config.gold.as_ref().map(|gold| json!({"items": gold.len()})),
        "caches": {
            "results": {"capacity": config.result_cache_entries, "entries": state.results.len()},
            "embeddings": {"capacity": config.embedding_cache_entries, "entries": state.embeddings.len()},
        },
    }))
}

/// `POST /admin/reload`: re-opens the index and overlay paths the server was started with and
/// swaps the new build in ([`crate::reload`]); an operator key when the server takes keys. The
/// reload runs as its own task, so a client that gives up does not stop it half-way.
pub async fn reload(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
) -> Result<Json<crate::reload::Reloaded>, ApiError> {
    if state.config.api_keys.is_some() && !caller.operator {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "only an operator key may reload the index",
        ));
    }
    let task = tokio::spawn(async move { crate::reload::reload(&state).await });
    Ok(Json(task.await.map_err(ApiError::internal)??))
}
