//! Command-line flags (each also readable from an environment variable), validated once into the
//! typed [`Config`] the server runs with.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use stillweb_index::SearchParams;
use stillweb_index::search::{DEFAULT_RERANK_POOL, Mode, Preset};
use stillweb_models::ExecutionProvider;

use crate::session::SessionLimits;

/// Raw flags as given.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "stillweb-server",
    version,
    about = "Serve web_search and visit_web over a stillweb index"
)]
pub struct Args {
    #[command(flatten)]
    pub collections: CollectionFlags,
    #[command(flatten)]
    pub cluster: ClusterFlags,
    #[command(flatten)]
    pub listen: ListenFlags,
    #[command(flatten)]
    pub access: AccessFlags,
    #[command(flatten)]
    pub caches: CacheFlags,
    #[command(flatten)]
    pub models: ModelFlags,
}

/// The corpora served: an index (with overlays), named collections, or a shard set.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Collections: what is served")]
pub struct CollectionFlags {
    /// Index directory built by `stillweb-indexer build` (or one `shard-I` directory of a set
    /// built with `--shards N`, to serve that shard to a coordinator).
    #[arg(
        long,
        env = "STILLWEB_INDEX",
        required_unless_present_any = ["shard", "collection"],
        conflicts_with_all = ["shard", "collection"]
    )]
    pub index: Option<PathBuf>,
    /// An overlay of --index (built with `stillweb-indexer build --overlay-of INDEX`), served
    /// with it as one corpus; repeat for a stack of overlays, in the order they were built.
    #[arg(
        long,
        requires = "index",
        value_delimiter = ',',
        env = "STILLWEB_OVERLAYS"
    )]
    pub overlay: Vec<PathBuf>,
    /// Run as a coordinator over a shard set: one --shard per shard, in shard order, each the
    /// base URLs of that shard's replicas separated by commas
    /// (`--shard http://a:8081,http://b:8081 --shard http://c:8081`).
    #[arg(long, value_name = "URL[,URL...]", conflicts_with = "collection")]
    pub shard: Vec<String>,
    /// A named corpus, served beside the others (repeat for several; the first is the default):
    /// `NAME=DIR` for an index directory, or `NAME=URL[,URL...][;URL[,URL...]...]` for a shard
    /// set's replicas (shards separated by `;`, each shard's replicas by `,`). Requests name a
    /// collection with `"collection"` or the path prefix `/c/{name}/`.
    #[arg(long, value_name = "NAME=DIR|NAME=URLS")]
    pub collection: Vec<String>,
    /// An overlay of the index of collection NAME, served with it (repeat, in build order).
    #[arg(long, value_name = "NAME=DIR", requires = "collection")]
    pub collection_overlay: Vec<String>,
    /// The collection `/serper/scholar` and the MCP `scholar` tool search.
    #[arg(long, env = "STILLWEB_SCHOLAR_COLLECTION", default_value = "scholar")]
    pub scholar_collection: String,
}

/// Serving beyond one process: shard replicas and the session store servers share.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Cluster: shards and shared sessions")]
pub struct ClusterFlags {
    /// A coordinator's time limit for one call to one shard replica, in milliseconds; a call
    /// that fails or runs past it is retried on the shard's next replica.
    #[arg(long, env = "STILLWEB_SHARD_TIMEOUT_MS", default_value_t = 5000)]
    pub shard_timeout_ms: u64,
    /// How long a starting coordinator waits for every shard to have a replica that answers.
    #[arg(long, env = "STILLWEB_SHARD_STARTUP_SECS", default_value_t = 120)]
    pub shard_startup_secs: u64,
    /// Where sessions live: `memory` (this process, the default) or `redis://HOST:PORT/DB`
    /// (shared by every server pointed at it, so an episode may search on one and visit on
    /// another; survives restarts). With Redis unreachable, searches and visits answer 503
    /// `session_store_unavailable`.
    #[arg(long, env = "STILLWEB_SESSIONS", default_value = "memory")]
    pub sessions: String,
    /// Prefix of every Redis key stillweb writes (the servers of one cluster share it).
    #[arg(long, env = "STILLWEB_SESSIONS_PREFIX", default_value = "stillweb")]
    pub sessions_prefix: String,
    /// Deadline of one call to the Redis session store, in milliseconds.
    #[arg(long, env = "STILLWEB_SESSIONS_TIMEOUT_MS", default_value_t = 500)]
    pub sessions_timeout_ms: u64,
}

/// Where the server listens and what one request may ask of it.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Listen and limits")]
pub struct ListenFlags {
    /// Address to listen on; port 0 picks a free port (the chosen address is printed on stdout).
    #[arg(long, env = "STILLWEB_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Threads that run searches (tantivy queries, fusion, document fetches); 0 = one per core.
    /// The query embedder gets one session per search thread.
    #[arg(long, env = "STILLWEB_SEARCH_THREADS", default_value_t = 0)]
    pub search_threads: usize,
    /// Seconds after which a search is abandoned with a 504.
    #[arg(long, env = "STILLWEB_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,
    /// Largest accepted request body, in bytes (`/retrieve` takes more: see
    /// --max-retrieve-batch).
    #[arg(long, env = "STILLWEB_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Seconds a connection may take to send a request's headers; also how long an idle
    /// keep-alive connection is kept open (agents think between calls, so not much less than
    /// a minute; clients reconnect when it closes).
    #[arg(long, env = "STILLWEB_HEADER_READ_TIMEOUT_SECS", default_value_t = 60)]
    pub header_read_timeout_secs: u64,
    /// Seconds a client may take to send a request's body; a slower one gets 408. No in-flight
    /// slot is held while a body is read.
    #[arg(long, env = "STILLWEB_BODY_READ_TIMEOUT_SECS", default_value_t = 15)]
    pub body_read_timeout_secs: u64,
    /// Seconds a shutdown (SIGTERM, SIGINT) waits for in-flight requests before it closes the
    /// remaining connections.
    #[arg(long, env = "STILLWEB_SHUTDOWN_DRAIN_SECS", default_value_t = 20)]
    pub shutdown_drain_secs: u64,
    /// Longest accepted query, in characters.
    #[arg(long, env = "STILLWEB_MAX_QUERY_CHARS", default_value_t = 2048)]
    pub max_query_chars: usize,
    /// Requests served at once; beyond it the server answers 429 with Retry-After instead of
    /// queueing without bound.
    #[arg(long, env = "STILLWEB_MAX_IN_FLIGHT", default_value_t = 128)]
    pub max_in_flight: usize,
    /// Most results one native search (`/v1/search`, a batch entry) may ask for: 20, as live
    /// search APIs allow; up to 1,000 for evaluating a deployment's Recall@100
    /// (`stillweb-indexer eval --target`). Compatible endpoints keep their APIs' own limits.
    #[arg(long, env = "STILLWEB_MAX_K", default_value_t = 20)]
    pub max_k: i64,
    /// Most queries in one `POST /v1/search/batch`, and most messages in one MCP JSON-RPC
    /// batch.
    #[arg(long, env = "STILLWEB_MAX_BATCH", default_value_t = 64)]
    pub max_batch: usize,
    /// Most queries in one Search-R1 `POST /retrieve` (a GRPO step sends every rollout's query
    /// in one call: 512 prompts x 5 rollouts = 2,560). Its body limit grows to match:
    /// this many queries of --max-query-chars each.
    #[arg(long, env = "STILLWEB_MAX_RETRIEVE_BATCH", default_value_t = 4096)]
    pub max_retrieve_batch: usize,
}

/// Who may call, and what each session keeps.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Sessions and access")]
pub struct AccessFlags {
    /// A TOML file of API keys (`[[key]]` tables with `name`, `key`, optional `rate`, `burst`
    /// and `role`): every endpoint but /healthz and /readyz then needs a key, and each key has its
    /// own session namespace. See the README's "API keys".
    #[arg(long, env = "STILLWEB_API_KEYS", value_name = "FILE")]
    pub api_keys: Option<PathBuf>,
    /// Gold labels (JSON Lines: id, question, gold_url, negatives), kept in the server only:
    /// session transcripts then mark labelled URLs and say when each question's gold page was
    /// first shown and whether it was read. Never changes ranking or results.
    #[arg(long, env = "STILLWEB_GOLD", value_name = "FILE")]
    pub gold: Option<PathBuf>,
    /// Seconds a session may stay idle before it is forgotten.
    #[arg(long, env = "STILLWEB_SESSION_TTL_SECS", default_value_t = 3600)]
    pub session_ttl_secs: u64,
    /// Most sessions kept at once; the least recently used is evicted beyond it.
    #[arg(long, env = "STILLWEB_MAX_SESSIONS", default_value_t = 100_000)]
    pub max_sessions: usize,
    /// Most URLs remembered per session; the oldest are forgotten beyond it.
    #[arg(long, env = "STILLWEB_MAX_URLS_PER_SESSION", default_value_t = 10_000)]
    pub max_urls_per_session: usize,
    /// Transcript entries (searches, visits) kept per session; the oldest are dropped beyond it.
    #[arg(long, env = "STILLWEB_MAX_EVENTS_PER_SESSION", default_value_t = 1_000)]
    pub max_events_per_session: usize,
}

/// Results and query vectors kept for repeated requests.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Caches")]
pub struct CacheFlags {
    /// Finished searches kept for identical requests (0: no result cache).
    #[arg(long, env = "STILLWEB_RESULT_CACHE_ENTRIES", default_value_t = 10_000)]
    pub result_cache_entries: usize,
    /// Query vectors kept by query text (0: no embedding cache).
    #[arg(
        long,
        env = "STILLWEB_EMBEDDING_CACHE_ENTRIES",
        default_value_t = 10_000
    )]
    pub embedding_cache_entries: usize,
}

/// The models and ranking: a preset, or each part by its own flag (which wins over the preset's).
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Models and presets")]
pub struct ModelFlags {
    /// A named configuration of the models and ranking below: `fast` (RL rollouts: MiniLM-L6
    /// hybrid, no reranker) or `quality` (agent evaluation: the same, then the MiniLM-L12
    /// cross-encoder over a 50-chunk pool, interpolated with the retrieval score). Any flag below wins over the preset's
    /// value. Default: the preset the index was built with (`stillweb-indexer build --preset`),
    /// else none (each flag's own default, which is `fast`'s).
    #[arg(long, env = "STILLWEB_PRESET")]
    pub preset: Option<Preset>,
    /// Candidate documents that each stage-1 retriever hands to stage 2.
    #[arg(long, env = "STILLWEB_CANDIDATES", default_value_t = 100)]
    pub candidates: usize,
    /// Retrievers: bm25, dense or hybrid (rerank = hybrid and requires --reranker); default
    /// hybrid when the index has vectors, else bm25.
    #[arg(long, env = "STILLWEB_MODE")]
    pub mode: Option<Mode>,
    /// Embedder directory (with model.toml); default: the one `models/fetch` installs. Must be
    /// the model the index was built with.
    #[arg(long, env = "STILLWEB_EMBEDDER")]
    pub embedder: Option<PathBuf>,
    /// What runs the query embedder on the CPU: onnx or native-int8 (default: what its
    /// model.toml says). Use the engine the index was built with for identical vectors.
    #[arg(long, env = "STILLWEB_ENGINE")]
    pub engine: Option<stillweb_models::Engine>,
    /// Where the models run: cpu, cuda or cuda:N (CUDA needs the onnxruntime-gpu library in
    /// ORT_DYLIB_PATH).
    #[arg(long, env = "STILLWEB_PROVIDER", default_value = "cpu")]
    pub provider: ExecutionProvider,
    /// Intra-op threads of each model (query embedder, reranker).
    #[arg(long, env = "STILLWEB_MODEL_THREADS", default_value_t = 1)]
    pub model_threads: usize,
    /// Query embedding in batches: concurrent searches' queries (and a batch or `/retrieve`
    /// call's) wait in one queue, and a search thread embeds up to this many in one model call,
    /// with no wait: a lone query is embedded at once, and queries gather while the threads are
    /// busy. 0: each search embeds its own query.
    #[arg(long, env = "STILLWEB_EMBED_BATCH_QUERIES", default_value_t = 32)]
    pub embed_batch_queries: usize,
    /// Reranker directory (model.toml of kind cross-encoder or qwen3-reranker). With one, searches
    /// rerank their chunk pool unless a request says `"rerank": false`.
    #[arg(long, env = "STILLWEB_RERANKER", conflicts_with = "reranker_url")]
    pub reranker: Option<PathBuf>,
    /// Rerank on other servers instead (a rerank tier): their `POST /rerank` (stillweb with
    /// --reranker, text-embeddings-inference, vLLM), in turn, the next one on a failure.
    #[arg(
        long,
        env = "STILLWEB_RERANKER_URL",
        value_delimiter = ',',
        value_name = "URL[,URL...]"
    )]
    pub reranker_url: Vec<String>,
    /// Milliseconds one rerank call to the tier may take before the next URL is tried.
    #[arg(long, env = "STILLWEB_RERANKER_TIMEOUT_MS", default_value_t = 10_000)]
    pub reranker_timeout_ms: u64,
    /// Intra-op threads of the reranker; 0: one per core (it runs batches from every search,
    /// so it is the one model worth the whole machine).
    #[arg(long, env = "STILLWEB_RERANKER_THREADS", default_value_t = 0)]
    pub reranker_threads: usize,
    /// What runs a cross-encoder reranker on the CPU: onnx or native-int8 (default: what its
    /// model.toml says).
    #[arg(long, env = "STILLWEB_RERANKER_ENGINE")]
    pub reranker_engine: Option<stillweb_models::Engine>,
    /// Chunks reranked per search by default (a request may ask for 1..=--max-rerank-pool);
    /// default: the preset's, else 30.
    #[arg(long, env = "STILLWEB_RERANK_POOL")]
    pub rerank_pool: Option<usize>,
    /// The reranker's share of a reranked document's score: 1 orders the pool's documents by
    /// the reranker alone; below 1, its score is interpolated with the fused retrieval score
    /// (min-max normalised over them). Default: the preset's, else 1.
    #[arg(long, env = "STILLWEB_RERANK_WEIGHT")]
    pub rerank_weight: Option<f32>,
    /// Largest rerank pool a request may ask for.
    #[arg(long, env = "STILLWEB_MAX_RERANK_POOL", default_value_t = 100)]
    pub max_rerank_pool: usize,
    /// Dynamic batching: the reranker gathers concurrent searches' pools until they hold about
    /// this many tokens, then scores them in one run, pairs sorted by length across requests.
    /// 0: one pool per run.
    #[arg(long, env = "STILLWEB_RERANK_BATCH_TOKENS", default_value_t = 16_384)]
    pub rerank_batch_tokens: usize,
    /// Dynamic batching: how long an idle reranker waits, after the first pool arrives, for
    /// others to join it (a busy reranker never waits: pools queue while it runs).
    #[arg(long, env = "STILLWEB_RERANK_BATCH_WAIT_MS", default_value_t = 2)]
    pub rerank_batch_wait_ms: u64,
}

/// What a server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An index directory (a whole corpus, or one shard of a set), with its overlays in order.
    Index {
        dir: PathBuf,
        overlays: Vec<PathBuf>,
    },
    /// A set's shards: each one's replicas' base URLs.
    Shards {
        shards: Vec<Vec<String>>,
        call_timeout: Duration,
        startup_wait: Duration,
    },
}

/// One corpus the server serves and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionSource {
    /// Its name (`--collection NAME=...`); `None` for the one corpus of `--index` or `--shard`,
    /// which requests reach as `default`.
    pub name: Option<String>,
    pub source: Source,
}

/// The name a request gives the corpus of `--index` or `--shard`.
pub const DEFAULT_COLLECTION: &str = "default";

/// Longest collection name.
const MAX_COLLECTION_NAME: usize = 32;

/// Whether `name` is a usable collection name: 1-32 of `[a-z0-9_-]`, starting with a letter or
/// digit (it appears in URL paths, metric labels and session keys).
pub fn valid_collection_name(name: &str) -> bool {
    name.len() <= MAX_COLLECTION_NAME
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Where sessions live.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionStore {
    Memory,
    Redis {
        url: String,
        prefix: String,
        timeout: Duration,
    },
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// What the server serves, the default collection first (never empty).
    pub collections: Vec<CollectionSource>,
    /// The collection `/serper/scholar` searches.
    pub scholar_collection: String,
    pub listen: SocketAddr,
    pub search_threads: usize,
    /// The time limit of one whole request (a batch's searches share it).
    pub request_timeout: Duration,
    pub max_body_bytes: usize,
    /// The body limit of `/retrieve`, sized for --max-retrieve-batch full-length queries.
    pub max_retrieve_body_bytes: usize,
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub shutdown_drain: Duration,
    pub max_query_chars: usize,
    pub sessions: SessionLimits,
    pub session_store: SessionStore,
    /// The keys of `--api-keys`, if given.
    pub api_keys: Option<std::sync::Arc<crate::access::Keys>>,
    /// The labels of `--gold`, if given.
    pub gold: Option<std::sync::Arc<crate::gold::Gold>>,
    /// Ranking parameters; the weights are set from `mode` once the index is open.
    pub search: SearchParams,
    /// The preset the models and ranking come from (`--preset`, else the index's), if any.
    pub preset: Option<Preset>,
    pub mode: Option<Mode>,
    pub embedder: PathBuf,
    pub reranker: Option<PathBuf>,
    /// What runs `reranker` on the CPU (`--reranker-engine`; default: its model.toml's).
    pub reranker_engine: Option<stillweb_models::Engine>,
    /// A rerank tier's base URLs (`--reranker-url`), instead of `reranker`.
    pub reranker_urls: Vec<String>,
    pub reranker_timeout: Duration,
    pub max_rerank_pool: usize,
    /// How the reranker gathers concurrent pools (`--rerank-batch-tokens`, `--rerank-batch-wait-ms`).
    pub rerank_batch: stillweb_models::batcher::BatchPolicy,
    /// The reranker's intra-op threads (`--reranker-threads`, 0 resolved to the core count).
    pub reranker_threads: usize,
    /// Most queries the query embedder gathers into one model call; `None`: each search embeds
    /// its own (`--embed-batch-queries 0`).
    pub embed_batch: Option<usize>,
    pub max_k: i64,
    pub max_batch: usize,
    pub max_retrieve_batch: usize,
    pub max_in_flight: usize,
    pub result_cache_entries: usize,
    pub embedding_cache_entries: usize,
    pub provider: ExecutionProvider,
    pub model_threads: usize,
    pub engine: Option<stillweb_models::Engine>,
}

impl Args {
    pub fn validate(self) -> Result<Config, String> {
        if self.listen.request_timeout_secs == 0
            || self.listen.header_read_timeout_secs == 0
            || self.listen.body_read_timeout_secs == 0
        {
            return Err("--request-timeout-secs, --header-read-timeout-secs and --body-read-timeout-secs must be at least 1".into());
        }
        if self.listen.max_retrieve_batch == 0 {
            return Err("--max-retrieve-batch must be at least 1".into());
        }
        if self.listen.max_query_chars == 0 || self.listen.max_body_bytes < 1024 {
            return Err(
                "--max-query-chars must be positive and --max-body-bytes at least 1024".into(),
            );
        }
        if !(1..=1000).contains(&self.models.candidates) {
            return Err(format!(
                "--candidates must be between 1 and 1000, got {}",
                self.models.candidates
            ));
        }
        if self.access.max_sessions == 0
            || self.access.max_urls_per_session == 0
            || self.access.max_events_per_session == 0
            || self.access.session_ttl_secs == 0
        {
            return Err("session limits (--max-sessions, --max-urls-per-session, --max-events-per-session, --session-ttl-secs) must be positive".into());
        }
        if !(1..=1000).contains(&self.listen.max_k) {
            return Err(format!(
                "--max-k must be between 1 and 1000, got {}",
                self.listen.max_k
            ));
        }
        let shard_source = |lists: &[&str], flag: &str| -> Result<Source, String> {
            let shards = parse_shards(lists, flag)?;
            if self.cluster.shard_timeout_ms == 0 {
                return Err("--shard-timeout-ms must be at least 1".into());
            }
            Ok(Source::Shards {
                shards,
                call_timeout: Duration::from_millis(self.cluster.shard_timeout_ms),
                startup_wait: Duration::from_secs(self.cluster.shard_startup_secs),
            })
        };
        let collections = match &self.collections.index {
            Some(dir) => vec![CollectionSource {
                name: None,
                source: Source::Index {
                    dir: dir.clone(),
                    overlays: self.collections.overlay.clone(),
                },
            }],
            None if self.collections.collection.is_empty() => {
                let lists: Vec<&str> = self.collections.shard.iter().map(String::as_str).collect();
                vec![CollectionSource {
                    name: None,
                    source: shard_source(&lists, "--shard")?,
                }]
            }
            None => {
                let mut collections: Vec<CollectionSource> = Vec::new();
                for given in &self.collections.collection {
                    let (name, spec) = named("--collection", given)?;
                    if collections.iter().any(|c| c.name.as_deref() == Some(name)) {
                        return Err(format!("--collection {name} is given twice"));
                    }
                    let source = if spec.starts_with("http://") {
                        let lists: Vec<&str> = spec.split(';').collect();
                        shard_source(&lists, "--collection")?
                    } else {
                        Source::Index {
                            dir: PathBuf::from(spec),
                            overlays: Vec::new(),
                        }
                    };
                    collections.push(CollectionSource {
                        name: Some(name.to_string()),
                        source,
                    });
                }
                for given in &self.collections.collection_overlay {
                    let (name, dir) = named("--collection-overlay", given)?;
                    match collections
                        .iter_mut()
                        .find(|c| c.name.as_deref() == Some(name))
                    {
                        Some(CollectionSource {
                            source: Source::Index { overlays, .. },
                            ..
                        }) => overlays.push(PathBuf::from(dir)),
                        Some(_) => {
                            return Err(format!(
                                "--collection-overlay {name}: collection {name} is a shard set; its shard servers take the overlays"
                            ));
                        }
                        None => {
                            return Err(format!(
                                "--collection-overlay {name}: no --collection {name}=DIR"
                            ));
                        }
                    }
                }
                collections
            }
        };
        let models = self.models.resolve(index_preset(&collections))?;
        if !valid_collection_name(&self.collections.scholar_collection) {
            return Err(format!(
                "--scholar-collection takes a collection name, got `{}`",
                self.collections.scholar_collection
            ));
        }
        let session_store = match self.cluster.sessions.as_str() {
            "memory" => SessionStore::Memory,
            url if url.starts_with("redis://") => {
                if self.cluster.sessions_timeout_ms == 0 {
                    return Err("--sessions-timeout-ms must be at least 1".into());
                }
                if self.cluster.sessions_prefix.is_empty()
                    || self.cluster.sessions_prefix.contains(['{', '}'])
                {
                    return Err("--sessions-prefix must be non-empty and without `{` or `}`".into());
                }
                SessionStore::Redis {
                    url: url.to_string(),
                    prefix: self.cluster.sessions_prefix.clone(),
                    timeout: Duration::from_millis(self.cluster.sessions_timeout_ms),
                }
            }
            other => {
                return Err(format!(
                    "--sessions takes `memory` or a redis://HOST:PORT/DB URL, got `{other}`"
                ));
            }
        };
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        let search_threads = if self.listen.search_threads == 0 {
            cores
        } else {
            self.listen.search_threads
        };
        Ok(Config {
            collections,
            scholar_collection: self.collections.scholar_collection.clone(),
            listen: self.listen.listen,
            search_threads,
            request_timeout: Duration::from_secs(self.listen.request_timeout_secs),
            max_body_bytes: self.listen.max_body_bytes,
            // Each query as JSON: its characters (most are one byte), quotes, comma, escapes.
            max_retrieve_body_bytes: self.listen.max_body_bytes.max(
                self.listen
                    .max_retrieve_batch
                    .saturating_mul(self.listen.max_query_chars.saturating_add(64)),
            ),
            header_read_timeout: Duration::from_secs(self.listen.header_read_timeout_secs),
            body_read_timeout: Duration::from_secs(self.listen.body_read_timeout_secs),
            shutdown_drain: Duration::from_secs(self.listen.shutdown_drain_secs),
            max_query_chars: self.listen.max_query_chars,
            sessions: SessionLimits {
                idle_ttl: Duration::from_secs(self.access.session_ttl_secs),
                max_sessions: self.access.max_sessions,
                max_urls_per_session: self.access.max_urls_per_session,
                max_events_per_session: self.access.max_events_per_session,
            },
            session_store,
            api_keys: match &self.access.api_keys {
                Some(path) => Some(std::sync::Arc::new(crate::access::Keys::load(path)?)),
                None => None,
            },
            gold: match &self.access.gold {
                Some(path) => Some(std::sync::Arc::new(crate::gold::Gold::load(path)?)),
                None => None,
            },
            search: SearchParams {
                candidates: self.models.candidates,
                rerank_pool: models.rerank_pool,
                rerank_weight: models.rerank_weight,
                ..SearchParams::default()
            },
            preset: models.preset,
            mode: models.mode,
            embedder: models.embedder,
            reranker: models.reranker,
            reranker_engine: self.models.reranker_engine,
            reranker_urls: self
                .models
                .reranker_url
                .iter()
                .map(|u| u.trim_end_matches('/').to_string())
                .collect(),
            reranker_timeout: Duration::from_millis(self.models.reranker_timeout_ms),
            max_rerank_pool: self.models.max_rerank_pool,
            rerank_batch: stillweb_models::batcher::BatchPolicy {
                max_cost: self.models.rerank_batch_tokens,
                max_wait: Duration::from_millis(self.models.rerank_batch_wait_ms),
                queue: 1024,
            },
            embed_batch: (self.models.embed_batch_queries > 0)
                .then_some(self.models.embed_batch_queries),
            reranker_threads: if self.models.reranker_threads == 0 {
                cores
            } else {
                self.models.reranker_threads
            },
            max_k: self.listen.max_k,
            max_batch: self.listen.max_batch.max(1),
            max_retrieve_batch: self.listen.max_retrieve_batch,
            max_in_flight: self.listen.max_in_flight.max(1),
            result_cache_entries: self.caches.result_cache_entries,
            embedding_cache_entries: self.caches.embedding_cache_entries,
            provider: self.models.provider,
            model_threads: self.models.model_threads.max(1),
            engine: self.models.engine,
        })
    }
}

/// The models and ranking after the preset: each flag given wins over the preset's value.
struct ResolvedModels {
    preset: Option<Preset>,
    mode: Option<Mode>,
    embedder: PathBuf,
    reranker: Option<PathBuf>,
    /// The default rerank pool (0 without a reranker).
    rerank_pool: usize,
    rerank_weight: f32,
}

impl ModelFlags {
    /// Applies `--preset` (else `index_preset`, the one the default collection's index was built
    /// with) under the flags given, and checks the reranking flags.
    fn resolve(&self, index_preset: Option<Preset>) -> Result<ResolvedModels, String> {
        let preset = self.preset.or(index_preset);
        let tier = !self.reranker_url.is_empty();
        let reranker = match tier {
            true => None,
            false => self
                .reranker
                .clone()
                .or_else(|| preset.and_then(Preset::reranker_dir)),
        };
        let reranks = reranker.is_some() || tier;
        let mode = self.mode.or(preset.and_then(Preset::mode));
        if mode == Some(Mode::Rerank) && !reranks {
            return Err("--mode rerank needs --reranker DIR or --reranker-url URL".into());
        }
        let pool = self
            .rerank_pool
            .or(preset.map(Preset::rerank_pool).filter(|&p| p > 0))
            .unwrap_or(DEFAULT_RERANK_POOL);
        if pool == 0 || pool > self.max_rerank_pool {
            return Err(format!(
                "--rerank-pool must be between 1 and --max-rerank-pool ({}), got {pool}",
                self.max_rerank_pool
            ));
        }
        for url in &self.reranker_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "--reranker-url takes http(s) base URLs of rerank servers, got `{url}`"
                ));
            }
        }
        if self.reranker_timeout_ms == 0 {
            return Err("--reranker-timeout-ms must be at least 1".into());
        }
        let rerank_weight = self
            .rerank_weight
            .unwrap_or(preset.map_or(1.0, Preset::rerank_weight));
        if !(0.0..=1.0).contains(&rerank_weight) {
            return Err(format!(
                "--rerank-weight is the reranker's share of a score, from 0 to 1; got {rerank_weight}"
            ));
        }
        Ok(ResolvedModels {
            preset,
            mode,
            embedder: match (&self.embedder, preset) {
                (Some(dir), _) => dir.clone(),
                (None, Some(preset)) => preset.embedder_dir(),
                (None, None) => stillweb_models::config::default_embedder_dir(),
            },
            reranker,
            rerank_pool: if reranks { pool } else { 0 },
            rerank_weight,
        })
    }
}

/// The preset recorded in the default collection's index manifest, when it is an index
/// directory whose manifest names one (an unreadable manifest is refused later, at open).
fn index_preset(collections: &[CollectionSource]) -> Option<Preset> {
    let Source::Index { dir, .. } = &collections.first()?.source else {
        return None;
    };
    let manifest = stillweb_index::IndexManifest::read(dir).ok()?;
    match manifest.preset?.parse() {
        Ok(preset) => Some(preset),
        Err(e) => {
            tracing::warn!(index = %dir.display(), "{e}: serving it without a preset");
            None
        }
    }
}

/// Splits `NAME=VALUE` as `flag` takes it, with the name checked.
fn named<'a>(flag: &str, given: &'a str) -> Result<(&'a str, &'a str), String> {
    let Some((name, value)) = given.split_once('=') else {
        return Err(format!("{flag} takes NAME=VALUE, got `{given}`"));
    };
    if !valid_collection_name(name) {
        return Err(format!(
            "{flag} {given}: a collection name is 1-{MAX_COLLECTION_NAME} of a-z, 0-9, `_` and `-`, starting with a letter or digit"
        ));
    }
    if value.is_empty() {
        return Err(format!("{flag} {name}= names nothing to serve"));
    }
    Ok((name, value))
}

/// A shard set's replica URLs: one list per shard, each `URL[,URL...]`.
fn parse_shards(lists: &[&str], flag: &str) -> Result<Vec<Vec<String>>, String> {
    let shards: Vec<Vec<String>> = lists
        .iter()
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect();
    if let Some(bad) = shards
        .iter()
        .flatten()
        .find(|u| !(u.starts_with("http://") && u.len() > "http://".len()))
    {
        return Err(format!(
            "{flag} takes http:// base URLs separated by commas, got `{bad}`"
        ));
    }
    if shards.is_empty() || shards.iter().any(Vec::is_empty) {
        return Err(format!(
            "each shard of {flag} needs at least one replica URL"
        ));
    }
    Ok(shards)
}

impl Config {
    /// The largest body the route (a pattern, as axum matched it) accepts.
    pub fn body_limit(&self, route: &str) -> usize {
        if route.ends_with("/retrieve") {
            self.max_retrieve_body_bytes
        } else {
            self.max_body_bytes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(extra: &[&str]) -> Result<Config, String> {
        let mut args = vec!["stillweb-server", "--index", "/tmp/i"];
        args.extend_from_slice(extra);
        Args::parse_from(args).validate()
    }

    #[test]
    fn rerank_settings_are_checked_and_explained() {
        let err = validate(&["--mode", "rerank"]).expect_err("no reranker");
        assert!(err.contains("--mode rerank needs --reranker DIR"), "{err}");
        let err = validate(&["--rerank-pool", "0"]).expect_err("pool 0");
        assert!(err.contains("--rerank-pool must be between 1 and --max-rerank-pool (100)"));
        let err = validate(&["--rerank-pool", "30", "--max-rerank-pool", "10"]).expect_err("pool");
        assert!(err.contains("got 30"), "{err}");
        // Without a reranker nothing is reranked, whatever the pool says.
        assert_eq!(validate(&[]).expect("ok").search.rerank_pool, 0);
        let with = validate(&["--reranker", "/models/r"]).expect("ok");
        assert_eq!(with.search.rerank_pool, 30);
        // A tier instead of a local model.
        let tier = validate(&["--reranker-url", "http://a:8080/,http://b:8080"]).expect("ok");
        assert_eq!(tier.reranker_urls, ["http://a:8080", "http://b:8080"]);
        assert_eq!(tier.search.rerank_pool, 30);
        assert!(validate(&["--mode", "rerank", "--reranker-url", "http://a"]).is_ok());
        let err = validate(&["--reranker-url", "a:8080"]).expect_err("no scheme");
        assert!(err.contains("http(s) base URLs"), "{err}");
        let both = Args::try_parse_from([
            "s",
            "--index",
            "/i",
            "--reranker",
            "/r",
            "--reranker-url",
            "http://a",
        ]);
        assert!(both.is_err(), "--reranker and --reranker-url together");
    }

    #[test]
    fn a_preset_sets_models_and_ranking_and_each_flag_wins_over_it() {
        let quality = validate(&["--preset", "quality"]).expect("quality");
        assert_eq!(quality.preset, Some(Preset::Quality));
        assert_eq!(quality.embedder, Preset::Quality.embedder_dir());
        assert_eq!(quality.reranker, Preset::Quality.reranker_dir());
        assert_eq!(quality.mode, Some(Mode::Rerank));
        assert_eq!(quality.search.rerank_pool, Preset::Quality.rerank_pool());
        assert_eq!(
            quality.search.rerank_weight,
            Preset::Quality.rerank_weight()
        );
        let tuned = validate(&[
            "--preset",
            "quality",
            "--rerank-pool",
            "10",
            "--rerank-weight",
            "1",
            "--embedder",
            "/models/e",
        ])
        .expect("tuned");
        assert_eq!(
            (tuned.search.rerank_pool, tuned.search.rerank_weight),
            (10, 1.0)
        );
        assert_eq!(tuned.embedder, PathBuf::from("/models/e"));
        // A rerank tier replaces the preset's local reranker.
        let tier =
            validate(&["--preset", "quality", "--reranker-url", "http://a:1"]).expect("tier");
        assert_eq!(tier.reranker, None);
        assert_eq!(tier.search.rerank_pool, Preset::Quality.rerank_pool());
        let fast = validate(&["--preset", "fast"]).expect("fast");
        assert_eq!(
            (fast.reranker, fast.mode, fast.search.rerank_pool),
            (None, None, 0)
        );
        assert_eq!(fast.embedder, Preset::Fast.embedder_dir());
        // No preset and an index that names none: each flag's own default.
        assert_eq!(validate(&[]).expect("none").preset, None);
        let err = Args::try_parse_from(["s", "--index", "/i", "--preset", "best"])
            .expect_err("unknown preset")
            .to_string();
        assert!(
            err.contains("unknown preset `best` (fast, quality)"),
            "{err}"
        );
        let err = validate(&["--rerank-weight", "1.5"]).expect_err("weight");
        assert!(err.contains("from 0 to 1; got 1.5"), "{err}");
    }

    #[test]
    fn a_coordinator_takes_one_shard_flag_per_shard_with_its_replicas() {
        let args = [
            "stillweb-server",
            "--shard",
            "http://a:1,http://b:1",
            "--shard",
            "http://c:1",
        ];
        let config = Args::parse_from(args).validate().expect("valid");
        let Source::Shards { shards, .. } = &config.collections[0].source else {
            panic!("not a coordinator");
        };
        assert_eq!(
            shards,
            &vec![vec!["http://a:1", "http://b:1"], vec!["http://c:1"]]
        );
        let err = Args::parse_from(["stillweb-server", "--shard", "a:1"])
            .validate()
            .expect_err("no scheme");
        assert!(err.contains("http:// base URLs"), "{err}");
        // An index and shards at once is refused by the parser.
        assert!(
            Args::try_parse_from(["stillweb-server", "--index", "/i", "--shard", "http://a:1"])
                .is_err()
        );
    }

    #[test]
    fn the_session_store_is_memory_or_a_redis_url() {
        assert_eq!(
            validate(&[]).expect("defaults").session_store,
            SessionStore::Memory
        );
        let redis = validate(&["--sessions", "redis://127.0.0.1:6379/2"]).expect("redis");
        assert_eq!(
            redis.session_store,
            SessionStore::Redis {
                url: "redis://127.0.0.1:6379/2".into(),
                prefix: "stillweb".into(),
                timeout: Duration::from_millis(500),
            }
        );
        let err = validate(&["--sessions", "memcached://x"]).expect_err("unknown store");
        assert!(
            err.contains("`memory` or a redis://HOST:PORT/DB URL"),
            "{err}"
        );
        let err = validate(&["--sessions", "redis://h/0", "--sessions-prefix", "a{b}"])
            .expect_err("hash tag in the prefix");
        assert!(err.contains("--sessions-prefix"), "{err}");
        let err = validate(&["--sessions", "redis://h/0", "--sessions-timeout-ms", "0"])
            .expect_err("no deadline");
        assert!(err.contains("--sessions-timeout-ms"), "{err}");
    }

    #[test]
    fn max_k_defaults_to_the_live_apis_limit_and_is_bounded() {
        assert_eq!(validate(&[]).expect("defaults").max_k, 20);
        assert_eq!(validate(&["--max-k", "100"]).expect("raised").max_k, 100);
        for bad in ["0", "1001"] {
            let err = validate(&["--max-k", bad]).expect_err("out of range");
            assert!(err.contains("--max-k must be between 1 and 1000"), "{err}");
        }
    }

    #[test]
    fn retrieve_batches_get_a_body_limit_to_match_and_timeouts_are_positive() {
        let config = validate(&[]).expect("defaults");
        assert_eq!(config.max_retrieve_batch, 4096);
        // 4,096 queries of 2,048 characters, with room for the JSON around each.
        assert_eq!(config.max_retrieve_body_bytes, 4096 * (2048 + 64));
        assert_eq!(
            config.body_limit("/s/{session}/retrieve"),
            config.max_retrieve_body_bytes
        );
        assert_eq!(config.body_limit("/v1/search"), 1 << 20);
        let small = validate(&["--max-retrieve-batch", "2"]).expect("ok");
        assert_eq!(
            small.max_retrieve_body_bytes,
            1 << 20,
            "never below --max-body-bytes"
        );
        for flag in [
            "--body-read-timeout-secs",
            "--header-read-timeout-secs",
            "--max-retrieve-batch",
        ] {
            let err = validate(&[flag, "0"]).expect_err(flag);
            assert!(err.contains(flag), "{err}");
        }
    }

    #[test]
    fn collections_are_named_indexes_or_shard_sets_with_overlays() {
        let config = Args::parse_from([
            "stillweb-server",
            "--collection",
            "web=/idx/web",
            "--collection",
            "scholar=http://a:1,http://b:1;http://c:1",
            "--collection-overlay",
            "web=/idx/ov1",
            "--collection-overlay",
            "web=/idx/ov2",
        ])
        .validate()
        .expect("valid");
        assert_eq!(config.collections.len(), 2);
        assert_eq!(config.collections[0].name.as_deref(), Some("web"));
        assert_eq!(
            config.collections[0].source,
            Source::Index {
                dir: "/idx/web".into(),
                overlays: vec!["/idx/ov1".into(), "/idx/ov2".into()],
            }
        );
        let Source::Shards { shards, .. } = &config.collections[1].source else {
            panic!("scholar is a shard set");
        };
        assert_eq!(shards.len(), 2);
        assert_eq!(config.scholar_collection, "scholar");
        let refused = |args: &[&str]| {
            let mut all = vec!["stillweb-server"];
            all.extend_from_slice(args);
            Args::parse_from(all).validate().expect_err("refused")
        };
        let err = refused(&["--collection", "web"]);
        assert!(err.contains("NAME=VALUE"), "{err}");
        let err = refused(&["--collection", "Web=/i"]);
        assert!(err.contains("a collection name is"), "{err}");
        let err = refused(&["--collection", "a=/i", "--collection", "a=/j"]);
        assert!(err.contains("given twice"), "{err}");
        let err = refused(&["--collection", "a=/i", "--collection-overlay", "b=/o"]);
        assert!(err.contains("no --collection b=DIR"), "{err}");
        let err = refused(&[
            "--collection",
            "a=http://x:1",
            "--collection-overlay",
            "a=/o",
        ]);
        assert!(err.contains("is a shard set"), "{err}");
        let err = refused(&["--collection", "a=http://x:1;", "--scholar-collection", "p"]);
        assert!(err.contains("at least one replica"), "{err}");
        // --index stays the one unnamed collection, and does not mix with named ones.
        assert!(Args::try_parse_from(["s", "--index", "/i", "--collection", "a=/j"]).is_err());
        assert_eq!(validate(&[]).expect("ok").collections[0].name, None);
    }
}
