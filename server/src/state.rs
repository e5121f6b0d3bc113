//! What every handler shares.

use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use std::sync::atomic::{AtomicBool, Ordering};

use stillweb_index::SearchResults;
use tokio::sync::Semaphore;

use crate::cache::LruCache;
use crate::config::Config;
use crate::config::SessionStore;
use crate::corpus::Corpus;
use crate::metrics::Metrics;
use crate::pool::SearchPool;
use crate::session::{MemorySessions, RedisSessions, Sessions};

tokio::task_local! {
    /// The corpus the request being served took when it started ([`on_corpus`]).
    static REQUEST_CORPUS: Arc<Corpus>;
}

/// Runs `request` on `corpus`: everything it asks [`AppState::corpus`] for is that build, even
/// when a reload swaps another in meanwhile.
pub async fn on_corpus<F: std::future::Future>(corpus: Arc<Corpus>, request: F) -> F::Output {
    REQUEST_CORPUS.scope(corpus, request).await
}

/// Shared application state (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState {
    /// What answers searches and visits: the corpus's parts (an index, or a coordinator's
    /// shards) with the models that search them. A reload swaps it; a request takes it once
    /// ([`AppState::corpus`]) and finishes on that build.
    serving: Arc<ArcSwap<Corpus>>,
    /// The corpus before the last swap: a shard server answers its coordinator's calls that
    /// still name that build until the coordinator swaps too.
    previous: Arc<ArcSwapOption<Corpus>>,
    /// Held by the reload running (one at a time).
    pub reloading: Arc<tokio::sync::Mutex<()>>,
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

impl AppState {
    pub fn new(corpus: Corpus, config: Config) -> anyhow::Result<AppState> {
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
            serving: Arc::new(ArcSwap::from_pointee(corpus)),
            previous: Arc::new(ArcSwapOption::empty()),
            reloading: Arc::new(tokio::sync::Mutex::new(())),
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

    /// The corpus of the request being served (the one serving when it started, see
    /// [`on_corpus`]), or outside a request the one serving now: a request finishes on the build
    /// it started on.
    pub fn corpus(&self) -> Arc<Corpus> {
        REQUEST_CORPUS
            .try_with(Arc::clone)
            .unwrap_or_else(|_| self.serving.load_full())
    }

    /// Serves `corpus` from now on (requests that took the old one finish on it).
    pub fn swap(&self, corpus: Corpus) {
        let old = self.serving.swap(Arc::new(corpus));
        self.previous.store(Some(old));
    }

    /// The corpus of build `build`: the one serving, or the one before the last swap.
    pub fn corpus_of(&self, build: &str) -> Option<Arc<Corpus>> {
        let now = self.serving.load_full();
        if now.build_id() == build {
            return Some(now);
        }
        self.previous
            .load_full()
            .filter(|before| before.build_id() == build)
    }

    /// The build id of [`AppState::corpus`].
    pub fn build_id(&self) -> String {
        self.corpus().build_id().to_string()
    }
}
