//! What every handler shares.

use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use stillweb_corpus::date::DateRange;
use stillweb_index::SearchResults;
use tokio::sync::Semaphore;

use crate::access::Caller;
use crate::cache::LruCache;
use crate::config::Config;
use crate::config::SessionStore;
use crate::corpus::Corpus;
use crate::error::{ApiError, ErrorCode};
use crate::metrics::Metrics;
use crate::pool::SearchPool;
use crate::session::SessionId;
use crate::session::{MemorySessions, RedisSessions, Sessions};

tokio::task_local! {
    /// The corpora the request being served took when it started ([`on_corpora`]).
    static REQUEST: Request;
}

/// What a request took when it started: every collection's corpus (so it finishes on the
/// builds it started on, whatever it asks for), which one it searches, and whether a handler
/// chose it (the response names that collection's build).
#[derive(Debug)]
pub struct Request {
    corpora: Vec<Arc<Corpus>>,
    /// The collection the path named (`/c/{name}/`), if it did.
    path: Option<usize>,
    /// The collection the request searches: the path's, one a handler chose, or the default.
    chosen: AtomicUsize,
    /// The dates its caller may see (an API key's `as_of`): every search and visit of the
    /// request keeps to them.
    sees: DateRange,
}

impl Request {
    /// The corpus the response's `X-Stillweb-Build` names.
    pub fn chosen(&self) -> &Arc<Corpus> {
        &self.corpora[self.chosen.load(Ordering::Relaxed)]
    }
}

/// Runs `handler` on `request`'s corpora: everything it asks [`AppState::corpus`] for is
/// from them, even when a reload swaps others in meanwhile. Returns the corpus it searched.
pub async fn on_corpora<F: std::future::Future>(
    request: Request,
    handler: F,
) -> (F::Output, Arc<Corpus>) {
    REQUEST
        .scope(request, async {
            let output = handler.await;
            let chosen = REQUEST.with(|r| Arc::clone(r.chosen()));
            (output, chosen)
        })
        .await
}

/// One named corpus the server serves, and the build it served before the last swap.
#[derive(Debug)]
struct Collection {
    serving: ArcSwap<Corpus>,
    /// A shard server answers its coordinator's calls that still name this build until the
    /// coordinator swaps too.
    previous: ArcSwapOption<Corpus>,
}

/// Shared application state (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState {
    /// What answers searches and visits, by collection (the default first): each a corpus's
    /// parts (an index, or a coordinator's shards) with the models that search them. A reload
    /// swaps them; a request takes them once ([`AppState::request`]) and finishes on those
    /// builds.
    collections: Arc<Vec<Collection>>,
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
    /// The state serving `corpora`, one per collection of `config` in its order.
    pub fn new(corpora: Vec<Corpus>, config: Config) -> anyhow::Result<AppState> {
        anyhow::ensure!(!corpora.is_empty(), "nothing to serve");
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
            collections: Arc::new(
                corpora
                    .into_iter()
                    .map(|corpus| Collection {
                        serving: ArcSwap::from_pointee(corpus),
                        previous: ArcSwapOption::empty(),
                    })
                    .collect(),
            ),
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

    /// Every collection's corpus serving now, default first.
    pub fn corpora(&self) -> Vec<Arc<Corpus>> {
        self.collections
            .iter()
            .map(|c| c.serving.load_full())
            .collect()
    }

    /// What a request takes as it starts: the corpora serving now, searching the one at
    /// `path` (a `/c/{name}/` prefix) or else the default; an error for a name not served.
    pub fn request(&self, path: Option<&str>, caller: &Caller) -> Result<Request, ApiError> {
        let corpora = self.corpora();
        let path = path.map(|name| position(&corpora, name)).transpose()?;
        Ok(Request {
            corpora,
            path,
            chosen: AtomicUsize::new(path.unwrap_or(0)),
            sees: DateRange {
                from: None,
                until: caller.sees_before,
            },
        })
    }

    /// The dates the request being served may see in `session`: up to its API key's `as_of`
    /// and the session's pin ([`crate::session::Pin`]), where either has one. Every search and
    /// visit keeps to them.
    pub async fn visible_dates(&self, session: Option<&SessionId>) -> Result<DateRange, ApiError> {
        let key = REQUEST.try_with(|r| r.sees).unwrap_or_default();
        let pin = match session {
            Some(session) => self.sessions.pin_of(session).await?,
            None => None,
        };
        Ok(key.intersect(DateRange {
            from: None,
            until: pin.map(|p| p.sees_before),
        }))
    }

    /// The corpus of the request being served: the collection its path named or a handler
    /// chose ([`AppState::choose`]), else the default, as it was when the request started (a
    /// request finishes on the builds it started on). Outside a request, the default serving
    /// now.
    pub fn corpus(&self) -> Arc<Corpus> {
        REQUEST
            .try_with(|r| Arc::clone(r.chosen()))
            .unwrap_or_else(|_| self.collections[0].serving.load_full())
    }

    /// Makes collection `name` the one the request searches (and its response names) and
    /// returns its corpus; `None` keeps the path's (or the default). Refused for a name the
    /// server does not serve, or one other than the path names.
    pub fn choose(&self, name: Option<&str>) -> Result<Arc<Corpus>, ApiError> {
        let Some(name) = name else {
            return Ok(self.corpus());
        };
        let chosen = REQUEST.try_with(|r| {
            let at = position(&r.corpora, name)?;
            if let Some(path) = r.path
                && path != at
            {
                return Err(ApiError::invalid(format!(
                    "conflicting collections: the path prefix `/c/{}/` names one, the request `{name}`; name one of them",
                    r.corpora[path].collection()
                )));
            }
            r.chosen.store(at, Ordering::Relaxed);
            Ok(Arc::clone(&r.corpora[at]))
        });
        chosen.unwrap_or_else(|_| self.collection(name))
    }

    /// Collection `name`'s corpus as the request took it (outside a request, serving now),
    /// without making it the request's; `collection_not_found` for a name not served.
    pub fn collection(&self, name: &str) -> Result<Arc<Corpus>, ApiError> {
        let corpora = REQUEST
            .try_with(|r| r.corpora.clone())
            .unwrap_or_else(|_| self.corpora());
        Ok(Arc::clone(&corpora[position(&corpora, name)?]))
    }

    /// Makes the scholar collection (`--scholar-collection`) the request's, as `/serper/scholar`
    /// searches it; refused, naming the flags, when the server serves none.
    pub fn choose_scholar(&self) -> Result<Arc<Corpus>, ApiError> {
        self.scholar()?;
        self.choose(Some(&self.config.scholar_collection))
    }

    /// The scholar collection's corpus (`--scholar-collection`), or why there is none.
    pub fn scholar(&self) -> Result<Arc<Corpus>, ApiError> {
        let name = &self.config.scholar_collection;
        self.collection(name).map_err(|_| {
            ApiError::new(
                ErrorCode::CollectionNotFound,
                format!(
                    "this server has no scholar collection `{name}`: start it with --collection {name}=DIR (a paper corpus), or name another with --scholar-collection"
                ),
            )
        })
    }

    /// Serves `corpus` from now on as collection `at` (requests that took the old one finish
    /// on it).
    pub fn swap(&self, at: usize, corpus: Corpus) {
        let collection = &self.collections[at];
        let old = collection.serving.swap(Arc::new(corpus));
        collection.previous.store(Some(old));
    }

    /// The default collection's corpus of build `build`: the one serving, or the one before
    /// the last swap (what a shard server answers its coordinator from).
    pub fn corpus_of(&self, build: &str) -> Option<Arc<Corpus>> {
        let collection = &self.collections[0];
        let now = collection.serving.load_full();
        if now.build_id() == build {
            return Some(now);
        }
        collection
            .previous
            .load_full()
            .filter(|before| before.build_id() == build)
    }

    /// The build id of [`AppState::corpus`].
    pub fn build_id(&self) -> String {
        self.corpus().build_id().to_string()
    }
}

/// Where collection `name` is among `corpora`, or `collection_not_found` naming those served.
fn position(corpora: &[Arc<Corpus>], name: &str) -> Result<usize, ApiError> {
    corpora
        .iter()
        .position(|c| c.collection() == name)
        .ok_or_else(|| {
            let served: Vec<&str> = corpora.iter().map(|c| c.collection()).collect();
            ApiError::new(
                ErrorCode::CollectionNotFound,
                format!(
                    "no collection `{name}` here; this server serves {} (see /info)",
                    served.join(", ")
                ),
            )
        })
}
