//! Prometheus metrics on the `prometheus` crate's registry: requests and latency by route
//! pattern, errors by code, time per search stage, searches by collection, cache hits and
//! misses, rejections, requests by API key, gold-page sessions and swaps, each a typed counter or
//! histogram updated with atomics (no lock shared by every request). What is read at scrape time
//! instead (active sessions, each collection's build, shard replicas' health, the model
//! batchers' counters) is handed to [`Metrics::render`] as a [`Scrape`].

use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use stillweb_models::batcher::BatchStats;

/// Histogram bucket bounds, in seconds: 1 ms to 30 s.
const BOUNDS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The server's metrics; cheap to share.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    errors: IntCounterVec,
    stages: HistogramVec,
    searches: IntCounterVec,
    cache: IntCounterVec,
    rejections: IntCounterVec,
    keys: IntCounterVec,
    gold: IntCounterVec,
    swaps: IntCounter,
}

/// What `/metrics` reads at scrape time rather than counting as it happens.
#[derive(Debug, Default)]
pub struct Scrape<'a> {
    /// Sessions alive now; `None` when the session store cannot say (the gauge is then left
    /// out rather than reported as 0).
    pub active_sessions: Option<usize>,
    /// Each collection's name and the build it serves.
    pub builds: Vec<(&'a str, &'a str)>,
    /// Each shard replica of a coordinator's collections: collection, shard, URL, healthy.
    pub replicas: Vec<(&'a str, usize, &'a str, bool)>,
    /// The model batchers' counters (`reranker`, `query_embedder`).
    pub batchers: Vec<(&'a str, BatchStats)>,
}

/// A counter family with `labels`, registered in `registry`.
fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let family = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry
        .register(Box::new(family.clone()))
        .expect("a metric registered once");
    family
}

/// A latency histogram family with `labels`, registered in `registry`.
fn histogram(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> HistogramVec {
    let family = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(BOUNDS.to_vec()),
        labels,
    )
    .expect("a valid metric");
    registry
        .register(Box::new(family.clone()))
        .expect("a metric registered once");
    family
}

impl Default for Metrics {
    fn default() -> Metrics {
        let registry = Registry::new();
        let swaps = IntCounter::new(
            "stillweb_index_swaps_total",
            "Builds swapped in by reloads since the start.",
        )
        .expect("a valid metric");
        registry
            .register(Box::new(swaps.clone()))
            .expect("a metric registered once");
        Metrics {
            requests: counter(
                &registry,
                "stillweb_http_requests_total",
                "Requests by route pattern, method and status.",
                &["route", "method", "status"],
            ),
            latency: histogram(
                &registry,
                "stillweb_http_request_duration_seconds",
                "Request latency by route pattern.",
                &["route"],
            ),
            errors: counter(
                &registry,
                "stillweb_errors_total",
                "Error responses by stable code (as X-Stillweb-Error names it).",
                &["code"],
            ),
            stages: histogram(
                &registry,
                "stillweb_search_stage_seconds",
                "Time per search stage.",
                &["stage"],
            ),
            searches: counter(
                &registry,
                "stillweb_searches_total",
                "Searches answered (the result cache's too), by collection.",
                &["collection"],
            ),
            cache: counter(
                &registry,
                "stillweb_cache_lookups_total",
                "Cache lookups by cache and result.",
                &["cache", "result"],
            ),
            rejections: counter(
                &registry,
                "stillweb_rejected_requests_total",
                "Requests turned away, by reason.",
                &["reason"],
            ),
            keys: counter(
                &registry,
                "stillweb_key_requests_total",
                "Requests admitted, by API key name.",
                &["key"],
            ),
            gold: counter(
                &registry,
                "stillweb_gold_sessions_total",
                "Sessions in which a gold page (--gold) was first shown (surfaced) or read (visited).",
                &["event"],
            ),
            swaps,
            registry,
        }
    }
}

impl Metrics {
    /// One finished request: its route pattern (`/v1/search`), method, status and duration.
    pub fn request(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        self.requests
            .with_label_values(&[route, method, &status.to_string()])
            .inc();
        self.latency
            .with_label_values(&[route])
            .observe(elapsed.as_secs_f64());
    }

    /// An error response with stable code `code` (`url_not_seen`, `shard_unavailable`).
    pub fn error(&self, code: &str) {
        self.errors.with_label_values(&[code]).inc();
    }

    /// Time spent in one stage of a search (`embed`, `candidates`, `chunks`, `rerank`, `fetch`).
    pub fn stage(&self, stage: &str, elapsed: Duration) {
        self.stages
            .with_label_values(&[stage])
            .observe(elapsed.as_secs_f64());
    }

    /// A search of `collection` answered (run or from the result cache).
    pub fn search(&self, collection: &str) {
        self.searches.with_label_values(&[collection]).inc();
    }

    /// A lookup in `cache` (`results`, `embeddings`).
    pub fn cache(&self, cache: &str, hit: bool) {
        self.cache
            .with_label_values(&[cache, if hit { "hit" } else { "miss" }])
            .inc();
    }

    /// A request turned away (`overloaded`, `timeout`, `payload_too_large`).
    pub fn rejection(&self, reason: &str) {
        self.rejections.with_label_values(&[reason]).inc();
    }

    /// A request admitted under the API key named `key` (only with `--api-keys`).
    pub fn key_request(&self, key: &str) {
        self.keys.with_label_values(&[key]).inc();
    }

    /// Starts the gold counters at 0 (a server with `--gold`; without, they are not exported).
    pub fn enable_gold(&self) {
        for event in ["surfaced", "visited"] {
            self.gold.with_label_values(&[event]);
        }
    }

    /// A session shown (`surfaced`) or reading (`visited`) a gold page for the first time.
    pub fn gold(&self, event: &str) {
        self.gold.with_label_values(&[event]).inc();
    }

    /// A reload swapped in another build.
    pub fn swapped(&self) {
        self.swaps.inc();
    }

    /// Builds swapped in so far.
    pub fn swaps(&self) -> u64 {
        self.swaps.get()
    }

    /// The exposition text: the counters and histograms, then what `scrape` read now.
    pub fn render(&self, scrape: &Scrape<'_>) -> String {
        let mut families = self.registry.gather();
        families.extend(scrape.gather());
        let mut out = Vec::new();
        // Encoding into memory fails only on families the registry itself would refuse.
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            tracing::warn!(error = %e, "cannot encode the metrics");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Reads one counter of a batcher's stats.
type BatchCounter = fn(&BatchStats) -> u64;

impl Scrape<'_> {
    /// The scrape-time values as metric families (in a registry of their own, made per scrape).
    fn gather(&self) -> Vec<prometheus::proto::MetricFamily> {
        let registry = Registry::new();
        let register = |collector: Box<dyn prometheus::core::Collector>| {
            registry
                .register(collector)
                .expect("a metric registered once");
        };
        if let Some(active) = self.active_sessions {
            let gauge = IntGauge::new("stillweb_active_sessions", "Sessions alive now.")
                .expect("a valid metric");
            gauge.set(i64::try_from(active).unwrap_or(i64::MAX));
            register(Box::new(gauge));
        }
        let builds = IntGaugeVec::new(
            Opts::new(
                "stillweb_index_build_info",
                "The build each collection serves now (by id).",
            ),
            &["build_id", "collection"],
        )
        .expect("a valid metric");
        for (collection, build) in &self.builds {
            builds.with_label_values(&[build, collection]).set(1);
        }
        register(Box::new(builds));
        let replicas = IntGaugeVec::new(
            Opts::new(
                "stillweb_shard_replica_healthy",
                "Whether a coordinator's shard replica answers its health checks (1) or not (0).",
            ),
            &["collection", "shard", "replica"],
        )
        .expect("a valid metric");
        for (collection, shard, url, healthy) in &self.replicas {
            let shard = shard.to_string();
            replicas
                .with_label_values(&[*collection, shard.as_str(), *url])
                .set(i64::from(*healthy));
        }
        register(Box::new(replicas));
        let counters: [(&str, &str, BatchCounter); 3] = [
            (
                "batches",
                "Model runs of the dynamic batcher, by model.",
                |s| s.runs,
            ),
            (
                "batched_requests",
                "Requests those runs answered (divided by the runs: the mean batch).",
                |s| s.requests,
            ),
            (
                "cancelled_requests",
                "Requests dropped before they ran because their caller had gone.",
                |s| s.cancelled,
            ),
        ];
        for (name, help, value) in counters {
            let family = IntCounterVec::new(
                Opts::new(format!("stillweb_model_{name}_total"), help),
                &["model"],
            )
            .expect("a valid metric");
            for (model, stats) in &self.batchers {
                family.with_label_values(&[model]).inc_by(value(stats));
            }
            register(Box::new(family));
        }
        registry.gather()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.request("/v1/search", "POST", 200, Duration::from_millis(3));
        m.request("/v1/search", "POST", 200, Duration::from_millis(40));
        m.stage("rerank", Duration::from_millis(700));
        m.cache("results", true);
        m.search("scholar");
        m.error("url_not_seen");
        m.rejection("overloaded");
        m.key_request("team-a");
        let text = m.render(&Scrape {
            active_sessions: Some(5),
            builds: vec![("web", "b1")],
            replicas: vec![
                ("web", 0, "http://a:1", true),
                ("web", 1, "http://b:1", false),
            ],
            batchers: Vec::new(),
        });
        for line in [
            "stillweb_searches_total{collection=\"scholar\"} 1",
            // Labels in name order, as the registry writes them (readers match by name).
            "stillweb_http_requests_total{method=\"POST\",route=\"/v1/search\",status=\"200\"} 2",
            "stillweb_http_request_duration_seconds_bucket{route=\"/v1/search\",le=\"0.005\"} 1",
            "stillweb_http_request_duration_seconds_bucket{route=\"/v1/search\",le=\"0.05\"} 2",
            "stillweb_http_request_duration_seconds_bucket{route=\"/v1/search\",le=\"+Inf\"} 2",
            "stillweb_search_stage_seconds_bucket{stage=\"rerank\",le=\"1\"} 1",
            "stillweb_cache_lookups_total{cache=\"results\",result=\"hit\"} 1",
            "stillweb_errors_total{code=\"url_not_seen\"} 1",
            "stillweb_rejected_requests_total{reason=\"overloaded\"} 1",
            "stillweb_key_requests_total{key=\"team-a\"} 1",
            "stillweb_active_sessions 5",
            "stillweb_index_build_info{build_id=\"b1\",collection=\"web\"} 1",
            "stillweb_shard_replica_healthy{collection=\"web\",replica=\"http://b:1\",shard=\"1\"} 0",
            "stillweb_index_swaps_total 0",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert!(
            !text.contains("stillweb_gold_sessions_total"),
            "no gold counters without --gold"
        );
        let unknown = m.render(&Scrape::default());
        assert!(
            !unknown.contains("stillweb_active_sessions"),
            "left out when the store cannot say"
        );
    }

    #[test]
    fn gold_counters_start_at_zero_when_enabled() {
        let m = Metrics::default();
        m.enable_gold();
        m.gold("surfaced");
        let text = m.render(&Scrape::default());
        assert!(text.contains("stillweb_gold_sessions_total{event=\"surfaced\"} 1"));
        assert!(text.contains("stillweb_gold_sessions_total{event=\"visited\"} 0"));
    }
}
