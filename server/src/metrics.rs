//! Prometheus metrics, kept by hand (a few counters and histograms need no framework): requests
//! and latency by route pattern, time per search stage, cache hits and misses, rejections, and
//! active sessions, rendered in the text exposition format at `GET /metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

use stillweb_models::batcher::BatchStats;

/// Histogram bucket bounds, in seconds: 1 ms to 30 s.
const BOUNDS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Debug, Clone, Default)]
struct Histogram {
    /// Observations at or below each bound (not cumulative; summed when rendered).
    buckets: [u64; BOUNDS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = BOUNDS.iter().position(|&b| seconds <= b) {
            self.buckets[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, n) in BOUNDS.iter().zip(self.buckets) {
            cumulative += n;
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

#[derive(Debug, Default)]
struct Inner {
    requests: BTreeMap<(String, String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    stages: BTreeMap<&'static str, Histogram>,
    /// Searches answered (from the cache too), by collection.
    searches: BTreeMap<String, u64>,
    cache: BTreeMap<(&'static str, &'static str), u64>,
    rejections: BTreeMap<&'static str, u64>,
    keys: BTreeMap<String, u64>,
    /// Sessions shown / reading a gold page (`--gold`); `None` without labels.
    gold: Option<BTreeMap<&'static str, u64>>,
    /// Builds swapped in by reloads.
    swaps: u64,
}

/// The server's metrics; cheap to share.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One finished request: its route pattern (`/v1/search`), method, status and duration.
    pub fn request(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        let mut inner = self.lock();
        *inner
            .requests
            .entry((route.to_string(), method.to_string(), status))
            .or_default() += 1;
        inner
            .latency
            .entry(route.to_string())
            .or_default()
            .observe(elapsed.as_secs_f64());
    }

    /// Time spent in one stage of a search (`embed`, `candidates`, `chunks`, `rerank`, `fetch`).
    pub fn stage(&self, stage: &'static str, elapsed: Duration) {
        self.lock()
            .stages
            .entry(stage)
            .or_default()
            .observe(elapsed.as_secs_f64());
    }

    /// A search of `collection` answered (run or from the result cache).
    pub fn search(&self, collection: &str) {
        let mut inner = self.lock();
        match inner.searches.get_mut(collection) {
            Some(n) => *n += 1,
            None => {
                inner.searches.insert(collection.to_string(), 1);
            }
        }
    }

    /// A lookup in `cache` (`results`, `embeddings`).
    pub fn cache(&self, cache: &'static str, hit: bool) {
        *self
            .lock()
            .cache
            .entry((cache, if hit { "hit" } else { "miss" }))
            .or_default() += 1;
    }

    /// A request turned away (`overloaded`, `timeout`, `payload_too_large`).
    pub fn rejection(&self, reason: &'static str) {
        *self.lock().rejections.entry(reason).or_default() += 1;
    }

    /// A request admitted under the API key named `key` (only with `--api-keys`).
    pub fn key_request(&self, key: &str) {
        let mut inner = self.lock();
        match inner.keys.get_mut(key) {
            Some(n) => *n += 1,
            None => {
                inner.keys.insert(key.to_string(), 1);
            }
        }
    }

    /// Starts the gold counters at 0 (a server with `--gold`).
    pub fn enable_gold(&self) {
        self.lock().gold = Some(BTreeMap::from([("surfaced", 0), ("visited", 0)]));
    }

    /// A reload swapped in another build.
    pub fn swapped(&self) {
        self.lock().swaps += 1;
    }

    /// Builds swapped in so far.
    pub fn swaps(&self) -> u64 {
        self.lock().swaps
    }

    /// A session shown (`surfaced`) or reading (`visited`) a gold page for the first time.
    pub fn gold(&self, event: &'static str) {
        if let Some(gold) = self.lock().gold.as_mut() {
            *gold.entry(event).or_default() += 1;
        }
    }

    /// The exposition text; `active_sessions` is `None` when the session store cannot say (the
    /// gauge is then left out rather than reported as 0).
    pub fn render(&self, active_sessions: Option<usize>) -> String {
        let inner = self.lock();
        let mut out = String::new();
        out.push_str("# HELP stillweb_http_requests_total Requests by route pattern, method and status.\n# TYPE stillweb_http_requests_total counter\n");
        for ((route, method, status), n) in &inner.requests {
            let _ = writeln!(
                out,
                "stillweb_http_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {n}"
            );
        }
        out.push_str("# HELP stillweb_http_request_duration_seconds Request latency by route pattern.\n# TYPE stillweb_http_request_duration_seconds histogram\n");
        for (route, h) in &inner.latency {
            h.render(
                &mut out,
                "stillweb_http_request_duration_seconds",
                &format!("route=\"{route}\""),
            );
        }
        out.push_str("# HELP stillweb_search_stage_seconds Time per search stage.\n# TYPE stillweb_search_stage_seconds histogram\n");
        for (stage, h) in &inner.stages {
            h.render(
                &mut out,
                "stillweb_search_stage_seconds",
                &format!("stage=\"{stage}\""),
            );
        }
        out.push_str("# HELP stillweb_searches_total Searches answered (the result cache's too), by collection.\n# TYPE stillweb_searches_total counter\n");
        for (collection, n) in &inner.searches {
            let _ = writeln!(
                out,
                "stillweb_searches_total{{collection=\"{collection}\"}} {n}"
            );
        }
        out.push_str("# HELP stillweb_cache_lookups_total Cache lookups by cache and result.\n# TYPE stillweb_cache_lookups_total counter\n");
        for ((cache, result), n) in &inner.cache {
            let _ = writeln!(
                out,
                "stillweb_cache_lookups_total{{cache=\"{cache}\",result=\"{result}\"}} {n}"
            );
        }
        out.push_str("# HELP stillweb_rejected_requests_total Requests turned away, by reason.\n# TYPE stillweb_rejected_requests_total counter\n");
        for (reason, n) in &inner.rejections {
            let _ = writeln!(
                out,
                "stillweb_rejected_requests_total{{reason=\"{reason}\"}} {n}"
            );
        }
        if !inner.keys.is_empty() {
            out.push_str("# HELP stillweb_key_requests_total Requests admitted, by API key name.\n# TYPE stillweb_key_requests_total counter\n");
            for (key, n) in &inner.keys {
                let _ = writeln!(out, "stillweb_key_requests_total{{key=\"{key}\"}} {n}");
            }
        }
        if let Some(gold) = &inner.gold {
            out.push_str("# HELP stillweb_gold_sessions_total Sessions in which a gold page (--gold) was first shown (surfaced) or read (visited).\n# TYPE stillweb_gold_sessions_total counter\n");
            for (event, n) in gold {
                let _ = writeln!(out, "stillweb_gold_sessions_total{{event=\"{event}\"}} {n}");
            }
        }
        if let Some(active) = active_sessions {
            out.push_str("# HELP stillweb_active_sessions Sessions alive now.\n# TYPE stillweb_active_sessions gauge\n");
            let _ = writeln!(out, "stillweb_active_sessions {active}");
        }
        out
    }
}

/// Reads one counter of a batcher's stats.
type BatchCounter = fn(&BatchStats) -> u64;

/// The model batchers' counters (`model` is `reranker` or `query_embedder`), for the exposition.
pub fn render_batches(out: &mut String, batchers: &[(&str, BatchStats)]) {
    if batchers.is_empty() {
        return;
    }
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
        let _ = writeln!(
            out,
            "# HELP stillweb_model_{name}_total {help}\n# TYPE stillweb_model_{name}_total counter"
        );
        for (model, stats) in batchers {
            let _ = writeln!(
                out,
                "stillweb_model_{name}_total{{model=\"{model}\"}} {}",
                value(stats)
            );
        }
    }
}

/// The build each collection serves (a gauge of 1 labelled with its id and the collection's
/// name) and the swaps so far.
pub fn render_builds(out: &mut String, builds: &[(&str, &str)], swaps: u64) {
    out.push_str("# HELP stillweb_index_build_info The build each collection serves now (by id).\n# TYPE stillweb_index_build_info gauge\n");
    for (collection, build_id) in builds {
        let _ = writeln!(
            out,
            "stillweb_index_build_info{{build_id=\"{build_id}\",collection=\"{collection}\"}} 1"
        );
    }
    out.push_str("# HELP stillweb_index_swaps_total Builds swapped in by reloads since the start.\n# TYPE stillweb_index_swaps_total counter\n");
    let _ = writeln!(out, "stillweb_index_swaps_total {swaps}");
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
        m.rejection("overloaded");
        m.key_request("team-a");
        let text = m.render(Some(5));
        assert!(text.contains("stillweb_searches_total{collection=\"scholar\"} 1"));
        assert!(text.contains(
            "stillweb_http_requests_total{route=\"/v1/search\",method=\"POST\",status=\"200\"} 2"
        ));
        assert!(text.contains(
            "stillweb_http_request_duration_seconds_bucket{route=\"/v1/search\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "stillweb_http_request_duration_seconds_bucket{route=\"/v1/search\",le=\"+Inf\"} 2"
        ));
        assert!(text.contains("stillweb_search_stage_seconds_count{stage=\"rerank\"} 1"));
        assert!(text.contains("stillweb_cache_lookups_total{cache=\"results\",result=\"hit\"} 1"));
        assert!(text.contains("stillweb_rejected_requests_total{reason=\"overloaded\"} 1"));
        assert!(text.contains("stillweb_active_sessions 5"));
        assert!(text.contains("stillweb_key_requests_total{key=\"team-a\"} 1"));
    }
}
