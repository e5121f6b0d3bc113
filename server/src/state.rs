//! What every handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stillweb_index::{Retriever, SearchIndex, SearchResults};

use crate::sharding::Coordinator;
use tokio::sync::Semaphore;

use crate::cache::LruCache;
use crate::config::Config;
use crate::config::SessionStore;
use crate::metrics::Metrics;
use crate::pool::SearchPool;
use crate::session::{MemorySessions, RedisSessions, Sessions};

/// Shared application state (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState {
    /// What answers searches and visits: an index, or a coordinator over a shard set.
    pub backend: Backend,
    pub sessions: Arc<Sessions>,
    pub pool: SearchPool,
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    /// Finished searches by index build, parameters and parsed query.
    pub results: Arc<LruCache<String, Arc<SearchResults>>>,
    /// Query vectors by query text.
    pub embeddings: Arc<LruCache<String, Arc<Vec<f32>>>>,
    /// Requests being served; when none is left, new ones get 429 instead of queueing.
    pub in_flight: Arc<Semaphore>,
    ready: Arc<AtomicBool>,
}

/// What a server searches.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The index with its query embedder and reranker: every search runs through it.
    Index(Arc<Retriever>),
    /// The shards of a set, through a coordinator (which holds the models).
    Shards(Arc<Coordinator>),
}

impl Backend {
    /// The build id of the index (or shard set) that answers.
    pub fn build_id(&self) -> &str {
        match self {
            Backend::Index(r) => &r.index().manifest().build_id,
            Backend::Shards(c) => &c.set.build_id,
        }
    }

    pub fn embedder_id(&self) -> Option<&str> {
        match self {
            Backend::Index(r) => r.embedder_id(),
            Backend::Shards(c) => c.embedder_id(),
        }
    }

    pub fn reranker_id(&self) -> Option<&str> {
        match self {
            Backend::Index(r) => r.reranker_id(),
            Backend::Shards(c) => c.reranker_id(),
        }
    }

    /// The query embedder, if this server embeds queries.
    pub fn embedder(&self) -> Option<&stillweb_models::worker::EmbedWorker> {
        match self {
            Backend::Index(r) => r.embedder(),
            Backend::Shards(c) => c.embedder(),
        }
    }

    /// The reranker that reranks this server's searches, if it has one.
    pub fn reranker(&self) -> Option<&stillweb_models::worker::RerankWorker> {
        match self {
            Backend::Index(r) => r.reranker(),
            Backend::Shards(c) => c.reranker(),
        }
    }
}

impl AppState {
    pub fn new(backend: Backend, config: Config) -> anyhow::Result<AppState> {
        let sessions = match &config.session_store {
            SessionStore::Memory => Sessions::Memory(MemorySessions::new(config.sessions.clone())),
            SessionStore::Redis {
                url,
                prefix,
                timeout,
            } => Sessions::Redis(
                RedisSessions::connect(url, prefix, config.sessions.clone(), *timeout)
                    .map_err(anyhow::Error::msg)?,
            ),
        };
        let metrics = Arc::new(Metrics::default());
        if config.gold.is_some() {
            metrics.enable_gold();
        }
        Ok(AppState {
            backend,
            metrics,
            results: Arc::new(LruCache::new(config.result_cache_entries)),
            embeddings: Arc::new(LruCache::new(config.embedding_cache_entries)),
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            sessions: Arc::new(sessions),
            pool: SearchPool::new(config.search_threads)
                .map_err(|e| anyhow::anyhow!("cannot start the search thread pool: {e}"))?,
            config: Arc::new(config),
            ready: Arc::new(AtomicBool::new(false)),
        })
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// The server's own index (`None` on a coordinator).
    pub fn local_index(&self) -> Option<&Arc<SearchIndex>> {
        match &self.backend {
            Backend::Index(r) => Some(r.index()),
            Backend::Shards(_) => None,
        }
    }

    pub fn build_id(&self) -> &str {
        self.backend.build_id()
    }
}
