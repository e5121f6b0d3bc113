//! The stillweb HTTP service: `web_search` (`POST /v1/search`) and `visit_web` (`POST /v1/visit`)
//! over a read-only index, with per-session seen-URL rules.
//!
//! [`app`] builds the router from an [`AppState`], so tests can drive the whole API in process;
//! [`run`] opens the index, warms it up, binds, and serves until SIGINT/SIGTERM.

mod cache;
pub mod compat;
pub mod config;
pub mod error;
pub mod metrics;
mod pool;
pub mod routes;
pub mod session;
pub mod state;

use std::time::Instant;

use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use stillweb_index::SearchIndex;
use stillweb_index::search::Mode;
use stillweb_models::worker::{EmbedWorker, RerankWorker};
use stillweb_models::{Embedder, Reranker, load_embedder, load_reranker};
use tower_http::trace::TraceLayer;
use tracing::info;

pub use config::{Args, Config};
pub use state::AppState;

/// Every (method, path) that [`app`] serves, as `openapi.yaml` writes it; the description must
/// list exactly these (a test checks both directions and that each is routed). `GET /mcp` is
/// routed too, to answer 405 (no event stream).
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/search"),
    ("POST", "/v1/visit"),
    ("GET", "/v1/sessions/{id}"),
    ("DELETE", "/v1/sessions/{id}"),
    ("POST", "/v1/search/batch"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("POST", "/retrieve"),
    ("POST", "/search-r1/retrieve"),
    ("POST", "/serper/search"),
    ("GET", "/brave/res/v1/web/search"),
    ("POST", "/tavily/search"),
    ("POST", "/tavily/extract"),
    ("POST", "/exa/search"),
    ("POST", "/exa/contents"),
    ("GET", "/jina/{url}"),
    ("POST", "/mcp"),
    ("DELETE", "/mcp"),
    ("GET", "/metrics"),
    ("GET", "/info"),
];

/// The router with every endpoint. The session-aware endpoints are served twice: as they are, and
/// under `/s/{session}/`, for clients that can only change a base URL.
pub fn app(state: AppState) -> Router {
    let api: Router<AppState> = Router::new()
        .route(ROUTES[0].1, post(routes::search::search))
        .route(ROUTES[1].1, post(routes::visit::visit))
        .route(
            ROUTES[2].1,
            get(routes::sessions::transcript).delete(routes::sessions::end),
        )
        .route(ROUTES[4].1, post(routes::batch::batch))
        .route(ROUTES[7].1, post(compat::search_r1::retrieve))
        .route(ROUTES[8].1, post(compat::search_r1::retrieve))
        .route(ROUTES[9].1, post(compat::serper::search))
        .route(ROUTES[10].1, get(compat::brave::search))
        .route(ROUTES[11].1, post(compat::tavily::search))
        .route(ROUTES[12].1, post(compat::tavily::extract))
        .route(ROUTES[13].1, post(compat::exa::search))
        .route(ROUTES[14].1, post(compat::exa::contents))
        // `/jina/{url}` in the API description; the URL may hold slashes, hence the wildcard.
        .route("/jina/{*url}", get(compat::jina::read))
        .route(
            ROUTES[16].1,
            post(compat::mcp::post)
                .get(compat::mcp::get)
                .delete(compat::mcp::delete),
        );
    Router::new()
        .merge(api.clone())
        .nest("/s/{session}", api)
        .route(ROUTES[5].1, get(routes::health::healthz))
        .route(ROUTES[6].1, get(routes::health::readyz))
        .route(ROUTES[18].1, get(routes::ops::metrics))
        .route(ROUTES[19].1, get(routes::ops::info))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            routes::ops::observe,
        ))
        .fallback(routes::fallback)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Opens the index (and, for dense or hybrid search, the query embedder it was built with, and the
/// reranker if one is configured) and builds the state; runs one query so the first request is not
/// slow.
pub fn prepare(mut config: Config) -> anyhow::Result<AppState> {
    let started = Instant::now();
    let index = SearchIndex::open(&config.index)?;
    let has_dense = index.manifest().dense.is_some();
    let mode = config
        .mode
        .unwrap_or(if has_dense { Mode::Hybrid } else { Mode::Bm25 });
    anyhow::ensure!(
        !mode.uses_dense() || has_dense,
        "--mode {mode:?} needs an index built with vectors; {} was built with --no-dense",
        config.index.display()
    );
    config.mode = Some(mode);
    config.search.weights = mode.weights();
    let provider = config.provider;
    let embedder = if mode.uses_dense() {
        // One session per search thread: a search thread blocks while its query is embedded, so
        // with a single session the other search threads (and cores) idled in line behind it
        // (measured: ~0.4 of 2 cores idle under load).
        let mut copies: Vec<Box<dyn stillweb_models::Embedder>> = Vec::new();
        for _ in 0..config.search_threads.max(1) {
            let model = load_embedder(
                &config.embedder,
                config.engine,
                provider,
                config.model_threads,
            )
            .with_context(|| {
                format!(
                    "loading the query embedder from {}",
                    config.embedder.display()
                )
            })?;
            index.check_embedder(model.model_id(), model.dimension())?;
            copies.push(model);
        }
        info!(model = copies[0].model_id(), %provider, sessions = copies.len(), "query embedder loaded");
        Some(EmbedWorker::spawn_copies(copies, "stillweb-embed", 1024)?)
    } else {
        None
    };
    let reranker = match &config.reranker {
        Some(dir) => {
            let model = load_reranker(dir, provider, config.model_threads)
                .with_context(|| format!("loading the reranker from {}", dir.display()))?;
            info!(model = model.model_id(), %provider, pool = config.search.rerank_pool, "reranker loaded");
            Some(RerankWorker::spawn(model, "stillweb-rerank", 1024)?)
        }
        None => None,
    };
    let manifest = index.manifest();
    info!(
        index = %config.index.display(),
        build_id = %manifest.build_id,
        corpus = %manifest.corpus_name,
        documents = manifest.documents,
        chunks = manifest.chunks,
        "index opened"
    );
    let warm_vector = match &embedder {
        Some(e) => e.embed_queries(vec!["warm up".into()])?.pop(),
        None => None,
    };
    let mut warm_reranker = reranker.clone();
    let warm = index
        .search(
            &stillweb_index::parse("warm up"),
            warm_vector.as_deref(),
            &config.search,
            warm_reranker.as_mut().map(|r| r as &mut dyn Reranker),
        )
        .context("warm-up query failed")?;
    info!(results = warm.hits.len(), mode = ?mode, elapsed_ms = started.elapsed().as_millis() as u64, "warmed up");
    let state = AppState::new(index, config, embedder, reranker)
        .context("cannot start the search thread pool")?;
    state.set_ready(true);
    Ok(state)
}

/// Serves until SIGINT or SIGTERM, then stops accepting, finishes in-flight requests, and exits.
pub async fn run(config: Config) -> anyhow::Result<()> {
    info!(config = ?config, "starting");
    let listen = config.listen;
    let state = tokio::task::spawn_blocking(move || prepare(config)).await??;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let local = listener.local_addr()?;
    info!(address = %local, "listening");
    // One line on stdout for scripts and tests that start the server on port 0.
    println!("stillweb-server listening on http://{local}");
    let drain_state = state.clone();
    axum::serve(listener, app(state))
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            drain_state.set_ready(false);
            info!("shutting down: finishing in-flight requests");
        })
        .await?;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
