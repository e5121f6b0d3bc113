//! The stillweb HTTP service: `web_search` (`POST /v1/search`) and `visit_web` (`POST /v1/visit`)
//! over a read-only index, with per-session seen-URL rules.
//!
//! [`app`] builds the router from an [`AppState`], so tests can drive the whole API in process;
//! [`run`] opens the index, warms it up, binds, and serves until SIGINT/SIGTERM.

pub mod access;
mod cache;
pub mod compat;
pub mod config;
pub mod corpus;
pub mod error;
pub mod gold;
pub mod ids;
mod listen;
pub mod metrics;
mod pool;
pub mod reload;
pub mod rerank_tier;
pub mod routes;
pub mod service;
pub mod session;
pub mod sharding;
pub mod state;
pub mod ui;

use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use std::sync::Arc;
use stillweb_index::checksums::Verified;
use stillweb_index::search::Mode;
use stillweb_index::{Retriever, SearchIndex};
use stillweb_models::worker::{EmbedWorker, RerankWorker};
use stillweb_models::{load_embedder, load_reranker};
use tower_http::trace::TraceLayer;
use tracing::{info, warn};

pub use config::{Args, Config, Source};
pub use listen::{serve, serve_in_background};
pub use state::AppState;

use corpus::{Corpus, CorpusInfo, Part, SearchSetup};
use sharding::replicas::ReplicaSet;

/// Every (method, path) that [`app`] serves, as `openapi.yaml` writes it; the description must
/// list exactly these (a test checks both directions and that each is routed). `GET /mcp` is
/// routed too, to answer 405 (no event stream).
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/search"),
    ("POST", "/v1/visit"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/{id}"),
    ("PUT", "/v1/sessions/{id}"),
    ("DELETE", "/v1/sessions/{id}"),
    ("POST", "/v1/search/batch"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("POST", "/retrieve"),
    ("POST", "/access"),
    ("POST", "/search-r1/retrieve"),
    ("POST", "/serper/search"),
    ("GET", "/serper/search"),
    ("POST", "/serper/scholar"),
    ("GET", "/serper/scholar"),
    ("POST", "/serper/scrape"),
    ("GET", "/brave/res/v1/web/search"),
    ("POST", "/tavily/search"),
    ("POST", "/tavily/extract"),
    ("POST", "/exa/search"),
    ("POST", "/exa/contents"),
    ("GET", "/jina/{url}"),
    ("POST", "/mcp"),
    ("DELETE", "/mcp"),
    ("POST", "/rerank"),
    ("GET", "/metrics"),
    ("GET", "/info"),
    ("POST", "/admin/reload"),
    ("GET", "/ui"),
    ("GET", "/ui/"),
    ("GET", "/ui/app.js"),
    ("GET", "/ui/app.css"),
    ("GET", "/ui/favicon.svg"),
];

/// The router with every endpoint. For clients that can only change a base URL, the
/// session-aware endpoints are also served under `/s/{session}/`, `/c/{collection}/` and
/// `/c/{collection}/s/{session}/`.
pub fn app(state: AppState) -> Router {
    let api: Router<AppState> = Router::new()
        .route("/v1/search", post(routes::search::search))
        .route("/v1/visit", post(routes::visit::visit))
        .route("/v1/sessions", get(routes::sessions::list))
        .route(
            "/v1/sessions/{id}",
            get(routes::sessions::transcript)
                .put(routes::sessions::pin)
                .delete(routes::sessions::end),
        )
        .route("/v1/search/batch", post(routes::batch::batch))
        .route("/retrieve", post(compat::search_r1::retrieve))
        .route("/access", post(compat::search_r1::access))
        .route("/search-r1/retrieve", post(compat::search_r1::retrieve))
        .route(
            "/serper/search",
            post(compat::serper::search).get(compat::serper::search),
        )
        .route(
            "/serper/scholar",
            post(compat::serper::scholar).get(compat::serper::scholar),
        )
        .route("/serper/scrape", post(compat::serper::scrape))
        .route("/brave/res/v1/web/search", get(compat::brave::search))
        .route("/tavily/search", post(compat::tavily::search))
        .route("/tavily/extract", post(compat::tavily::extract))
        .route("/exa/search", post(compat::exa::search))
        .route("/exa/contents", post(compat::exa::contents))
        // `/jina/{url}` in the API description; the URL may hold slashes, hence the wildcard.
        .route("/jina/{*url}", get(compat::jina::read))
        .route(
            "/mcp",
            post(compat::mcp::post)
                .get(compat::mcp::get)
                .delete(compat::mcp::delete),
        );
    // A shard server also answers its coordinator's stage calls.
    let shard_api = if state.corpus().shard_layers().is_some() {
        sharding::serve::routes()
    } else {
        Router::new()
    };
    // Served as they are, under `/s/{session}/`, and both again under `/c/{collection}/`.
    let in_sessions = Router::new().merge(api.clone()).nest("/s/{session}", api);
    Router::new()
        .merge(in_sessions.clone())
        .nest("/c/{collection}", in_sessions)
        .merge(shard_api)
        .merge(ui::routes())
        .route("/healthz", get(routes::health::healthz))
        .route("/readyz", get(routes::health::readyz))
        .route("/rerank", post(routes::rerank::rerank))
        .route("/metrics", get(routes::ops::metrics))
        .route("/info", get(routes::ops::info))
        .route("/admin/reload", post(routes::ops::reload))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            routes::ops::observe,
        ))
        .fallback(routes::fallback)
        // `observe` reads every body within its route's limit; the extractors need not recount.
        .layer(DefaultBodyLimit::disable())
        .layer(TraceLayer::new_for_http())
        .layer(middleware::from_fn(routes::error_layer::in_dialect))
        .layer(middleware::from_fn(routes::ops::request_id))
        .with_state(state)
}

/// Opens what the server serves (each collection: an index with its overlays, or a shard set)
/// with the models its searches need, and builds the state; ready once each ran a first search.
/// Collections share one loaded copy of each model.
pub fn prepare(config: Config) -> anyhow::Result<AppState> {
    // What each collection is (a shard set's as its shards report it), to choose its mode
    // before any model is loaded.
    let mut found: Vec<(Mode, Option<CorpusInfo>)> = Vec::new();
    for collection in &config.collections {
        let (has_dense, set) = match &collection.source {
            Source::Index { dir, .. } => {
                let manifest = stillweb_index::IndexManifest::read(dir)
                    .with_context(|| collection_context(collection))?;
                (manifest.dense.is_some(), None)
            }
            Source::Shards {
                shards,
                startup_wait,
                ..
            } => {
                let set = sharding::coordinator::discover(shards, *startup_wait)
                    .with_context(|| collection_context(collection))?;
                (set.dense.is_some(), Some(set))
            }
        };
        let mode = Mode::resolve(config.mode, has_dense)
            .map_err(|e| anyhow::anyhow!("{}: {e}", collection_context(collection)))?;
        found.push((mode, set));
    }
    let embedder = if found.iter().any(|(mode, _)| mode.uses_dense()) {
        load_query_embedder(&config)?
    } else {
        None
    };
    if let Some(e) = embedder
        .as_ref()
        .filter(|_| found.iter().any(|(_, set)| set.is_some()))
    {
        // The first query embedding is slow (allocations, caches): not on a client's time. (A
        // local corpus's warm-up search embeds; a shard set's collection has none.)
        e.embed_query("warm up")
            .map_err(|e| anyhow::anyhow!("warm-up embedding failed: {e}"))?;
    }
    let reranker = load_reranker_worker(&config)?;
    let mut corpora = Vec::new();
    for (collection, (mode, set)) in config.collections.iter().zip(found) {
        let setup = SearchSetup {
            collection: collection.name.as_deref().map(Arc::from),
            mode,
            embedder: embedder.clone().filter(|_| mode.uses_dense()),
            reranker: reranker.clone(),
        };
        let corpus = match &collection.source {
            Source::Index { dir, overlays } => open_local_corpus(&config, dir, overlays, setup)
                .with_context(|| collection_context(collection))?,
            Source::Shards {
                shards,
                call_timeout,
                ..
            } => {
                let set = set.context("a shard set was not discovered")?;
                let replicas: Vec<ReplicaSet> = shards
                    .iter()
                    .enumerate()
                    .map(|(i, urls)| ReplicaSet::new(i, urls, *call_timeout))
                    .collect();
                sharding::replicas::watch(replicas.clone(), Duration::from_millis(500))
                    .context("cannot start the shard health checks")?;
                info!(collection = ?collection.name, shards = shards.len(), mode = ?mode, "coordinating");
                let parts = replicas.into_iter().map(Part::Remote).collect();
                Corpus::new(parts, set, setup)?
            }
        };
        corpora.push(corpus);
    }
    let state = AppState::new(corpora, config)?;
    state.set_ready(true);
    Ok(state)
}

/// The corpus of the index at `dir` (a symlink is resolved now) and its overlays, searched with
/// the given models: every file checked against its checksums, the layers checked to belong
/// together and to fit the models (and the mode), and one search run so that the first request
/// is not slow. What a start and a reload both do.
pub(crate) fn open_local_corpus(
    config: &Config,
    dir: &std::path::Path,
    overlays: &[std::path::PathBuf],
    setup: SearchSetup,
) -> anyhow::Result<Corpus> {
    let mode = setup.mode;
    let started = Instant::now();
    let resolve = |p: &std::path::Path| {
        std::fs::canonicalize(p).with_context(|| format!("index directory {}", p.display()))
    };
    let dir = resolve(dir)?;
    let overlays: Vec<std::path::PathBuf> = overlays
        .iter()
        .map(|p| resolve(p))
        .collect::<Result<_, _>>()?;
    // Every file against the build's checksums first: a same-size corruption passes the
    // structural checks of `open` and the warm-up, and then fails inside a search.
    for layer in std::iter::once(&dir).chain(&overlays) {
        verify_checksums(layer)?;
    }
    let layers: Vec<Arc<SearchIndex>> = stillweb_index::overlay::open_layers(&dir, &overlays)?
        .into_iter()
        .map(Arc::new)
        .collect();
    let info = CorpusInfo::of_layers(&layers);
    // A build without the vectors the collection's mode searches (a reload to one built with
    // --no-dense) is refused.
    Mode::resolve(Some(mode), info.dense.is_some()).map_err(anyhow::Error::msg)?;
    for layer in &layers {
        let m = layer.manifest();
        info!(
            index = %layer.dir().display(),
            build_id = %m.build_id,
            corpus = %m.corpus_name,
            documents = m.documents,
            chunks = m.chunks,
            shard = ?m.shard,
            overlay_of = ?m.overlay.as_ref().map(|o| &o.of),
            "index opened"
        );
    }
    // The warm-up runs the pipeline in place.
    let warm = Retriever::layered(
        layers.clone(),
        setup.embedder.clone(),
        setup.reranker.clone(),
    )?
    .search(
        &stillweb_index::parse("warm up"),
        &stillweb_index::SearchParams {
            weights: mode.weights(),
            ..config.search.clone()
        },
    )
    .context("warm-up query failed")?;
    info!(build_id = %info.build_id, results = warm.hits.len(), mode = ?mode, elapsed_ms = started.elapsed().as_millis() as u64, "warmed up");
    let parts = layers.into_iter().map(Part::Local).collect();
    Ok(Corpus::new(parts, info, setup)?)
}

/// Names a collection in an error about it.
fn collection_context(collection: &config::CollectionSource) -> String {
    match &collection.name {
        Some(name) => format!("collection {name}"),
        None => "the index".to_string(),
    }
}

/// Checks every file of the index at `dir` against its build's checksums.
fn verify_checksums(dir: &std::path::Path) -> anyhow::Result<()> {
    match stillweb_index::checksums::verify(dir)? {
        Verified::All {
            files,
            bytes,
            elapsed,
        } => info!(
            index = %dir.display(),
            files,
            bytes,
            elapsed_ms = elapsed.as_millis() as u64,
            "index files match their checksums"
        ),
        Verified::NoChecksums => warn!(
            index = %dir.display(),
            "the index has no checksums.sha256 (built by an older stillweb), so damage on disk cannot be detected; rebuild it to get them"
        ),
    }
    Ok(())
}

/// The query embedder (loaded when some collection's mode uses vectors): one copy per search
/// thread, lent to the search thread that embeds (no hop to a model thread: on SciFact, ~25% more
/// searches/s at 8 and 32 clients than model threads of its own, BENCHMARKS.md), with concurrent
/// queries gathered into one call by `--embed-batch-queries`. With a single copy the other
/// search threads idled in line behind it. The copies share one set of weights where the engine
/// allows ([`stillweb_models::Embedder::share`]).
fn load_query_embedder(config: &Config) -> anyhow::Result<Option<EmbedWorker>> {
    let load = || {
        load_embedder(
            &config.embedder,
            config.engine,
            config.provider,
            config.model_threads,
        )
        .with_context(|| {
            format!(
                "loading the query embedder from {}",
                config.embedder.display()
            )
        })
    };
    let mut copies: Vec<Box<dyn stillweb_models::Embedder>> = vec![load()?];
    while copies.len() < config.search_threads.max(1) {
        let copy = match copies[0].share() {
            Some(shared) => shared,
            None => load()?,
        };
        copies.push(copy);
    }
    info!(model = copies[0].model_id(), provider = %config.provider, sessions = copies.len(),
        batch = ?config.embed_batch, "query embedder loaded");
    let lent = EmbedWorker::lend_copies(copies);
    Ok(Some(match config.embed_batch {
        Some(max) => lent.gathering(max),
        None => lent,
    }))
}

/// The reranker, if one is configured: on a model thread of its own behind the dynamic batcher,
/// or a rerank tier.
fn load_reranker_worker(config: &Config) -> anyhow::Result<Option<RerankWorker>> {
    if !config.reranker_urls.is_empty() {
        let tier = rerank_tier::connect(
            &config.reranker_urls,
            config.reranker_timeout,
            Duration::from_secs(60),
        )?;
        info!(model = tier.model_id(), urls = ?config.reranker_urls, "reranking on a tier");
        return Ok(Some(tier));
    }
    let Some(dir) = &config.reranker else {
        return Ok(None);
    };
    let model = load_reranker(
        dir,
        config.reranker_engine,
        config.provider,
        config.reranker_threads,
    )
    .with_context(|| format!("loading the reranker from {}", dir.display()))?;
    info!(model = model.model_id(), provider = %config.provider, threads = config.reranker_threads,
        pool = config.search.rerank_pool, batch = ?config.rerank_batch, "reranker loaded");
    Ok(Some(RerankWorker::spawn_batching(
        vec![model],
        "stillweb-rerank",
        config.rerank_batch,
    )?))
}

/// Serves until SIGINT or SIGTERM, then stops accepting, finishes in-flight requests (for at
/// most `--shutdown-drain-secs`), and exits.
pub async fn run(config: Config) -> anyhow::Result<()> {
    info!(preset = config.preset.map_or("none", |p| p.name()), config = ?config, "starting");
    let address = config.listen;
    let state = tokio::task::spawn_blocking(move || prepare(config)).await??;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address}"))?;
    let local = listener.local_addr()?;
    info!(address = %local, "listening");
    // One line on stdout for scripts and tests that start the server on port 0.
    println!("stillweb-server listening on http://{local}");
    reload::on_sighup(state.clone());
    serve(listener, state, listen::shutdown_signal()).await;
    Ok(())
}
