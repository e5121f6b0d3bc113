//! What every handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stillweb_index::{Retriever, SearchIndex, SearchResults};
use tokio::sync::Semaphore;

use crate::cache::LruCache;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::pool::SearchPool;
use crate::session::SessionStore;

/// Shared application state (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState {
    /// The index with its query embedder and reranker: every search runs through it.
    pub retriever: Arc<Retriever>,
    pub sessions: Arc<SessionStore>,
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

impl AppState {
    pub fn new(retriever: Retriever, config: Config) -> std::io::Result<AppState> {
        Ok(AppState {
            retriever: Arc::new(retriever),
            metrics: Arc::new(Metrics::default()),
            results: Arc::new(LruCache::new(config.result_cache_entries)),
            embeddings: Arc::new(LruCache::new(config.embedding_cache_entries)),
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            sessions: Arc::new(SessionStore::new(config.sessions.clone())),
            pool: SearchPool::new(config.search_threads)?,
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

    pub fn index(&self) -> &SearchIndex {
        self.retriever.index()
    }

    pub fn build_id(&self) -> &str {
        &self.index().manifest().build_id
    }
}
