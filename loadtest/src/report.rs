//! `report.json`: the run's plan and what it measured, in milliseconds and per second.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::drive::{Arrival, Plan, Workload};
use crate::record::Recorder;

#[derive(Debug, Serialize)]
pub struct Report {
    pub target: String,
    pub workload: Workload,
    pub arrival: Arrival,
    pub duration_s: f64,
    /// From the first scheduled unit to the last reply.
    pub elapsed_s: f64,
    pub seed: u64,
    pub k: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    pub distinct_queries: usize,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed (HTTP status ≥ 300, timeout, connection) or were never sent.
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    /// Requests answered per second of elapsed time.
    pub achieved_rate: f64,
    /// Every request, timed from its scheduled start (open loop) or its send (closed loop).
    pub latency_ms: Latency,
    pub operations: BTreeMap<String, Operation>,
    /// The server's own time by stage (`Server-Timing` of `/v1/search`).
    pub server_stages_ms: BTreeMap<String, Latency>,
    /// Share of searches the server answered from its result cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_hit_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episodes: Option<Episodes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerUsage>,
    pub percentiles: Vec<Percentile>,
    pub timeline: Vec<SecondReport>,
}

#[derive(Debug, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Debug, Serialize)]
pub struct Operation {
    pub requests: u64,
    pub errors: u64,
    pub rate: f64,
    pub latency_ms: Latency,
}

#[derive(Debug, Serialize)]
pub struct Episodes {
    pub completed: u64,
    pub failed: u64,
}

/// The server process over the run, when `--server-pid` names it.
#[derive(Debug, Serialize)]
pub struct ServerUsage {
    pub cpu_seconds: f64,
    /// CPU seconds per search answered (a batch counts each of its queries).
    pub cpu_seconds_per_search: f64,
    pub rss_bytes_end: u64,
    pub peak_rss_bytes: u64,
    /// Of `rss_bytes_end`: private memory, and pages of mapped files (the memory-mapped index,
    /// shared with the page cache and reclaimable under pressure).
    pub rss_anon_bytes_end: u64,
    pub rss_file_bytes_end: u64,
}

#[derive(Debug, Serialize)]
pub struct Percentile {
    pub percentile: f64,
    pub ms: f64,
}

#[derive(Debug, Serialize)]
pub struct SecondReport {
    pub second: usize,
    pub requests: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_rss_mib: Option<f64>,
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

pub fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency {
            p50: 0.0,
            p90: 0.0,
            p95: 0.0,
            p99: 0.0,
            p999: 0.0,
            max: 0.0,
            mean: 0.0,
        };
    }
    Latency {
        p50: ms(h.value_at_quantile(0.50)),
        p90: ms(h.value_at_quantile(0.90)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        p999: ms(h.value_at_quantile(0.999)),
        max: ms(h.max()),
        mean: h.mean() / 1000.0,
    }
}

/// Inputs of a report besides the recorder.
#[derive(Debug)]
pub struct RunFacts<'a> {
    pub target: &'a str,
    pub plan: &'a Plan,
    pub distinct_queries: usize,
    /// Server CPU seconds spent during the run, and its memory at the end.
    pub server: Option<(f64, crate::process::Memory)>,
}

pub fn build(recorder: &Recorder, facts: &RunFacts<'_>) -> Report {
    let plan = facts.plan;
    let elapsed = recorder.elapsed().as_secs_f64().max(1e-9);
    let operations = recorder
        .ops
        .iter()
        .map(|(name, op)| {
            let report = Operation {
                requests: op.latency.len(),
                errors: op.errors,
                rate: op.latency.len() as f64 / elapsed,
                latency_ms: latency(&op.latency),
            };
            (name.to_string(), report)
        })
        .collect::<BTreeMap<_, _>>();
    let searches = operations.get("search").map_or(0, |o| o.requests)
        + (operations.get("batch").map_or(0, |o| o.requests)
            + operations.get("retrieve").map_or(0, |o| o.requests))
            * plan.batch_size as u64;
    let percentiles = [
        0.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 100.0,
    ]
    .into_iter()
    .filter(|_| !recorder.all.is_empty())
    .map(|p| Percentile {
        percentile: p,
        ms: ms(recorder.all.value_at_quantile(p / 100.0)),
    })
    .collect();
    let timeline = recorder
        .timeline
        .iter()
        .enumerate()
        .map(|(second, s)| SecondReport {
            second,
            requests: s.latency.len(),
            errors: s.errors,
            p50_ms: if s.latency.is_empty() {
                0.0
            } else {
                ms(s.latency.value_at_quantile(0.5))
            },
            p99_ms: if s.latency.is_empty() {
                0.0
            } else {
                ms(s.latency.value_at_quantile(0.99))
            },
            server_rss_mib: s.server_rss_bytes.map(|b| b as f64 / (1024.0 * 1024.0)),
        })
        .collect();
    Report {
        target: facts.target.to_string(),
        workload: plan.workload,
        arrival: plan.arrival,
        duration_s: plan.duration.as_secs_f64(),
        elapsed_s: elapsed,
        seed: plan.seed,
        k: plan.k,
        batch_size: matches!(plan.workload, Workload::Batch | Workload::Retrieve)
            .then_some(plan.batch_size),
        distinct_queries: facts.distinct_queries,
        requests: recorder.requests(),
        errors: recorder.error_count(),
        error_kinds: recorder.errors.clone(),
        achieved_rate: recorder.requests() as f64 / elapsed,
        latency_ms: latency(&recorder.all),
        operations,
        server_stages_ms: recorder
            .stages
            .iter()
            .map(|(name, h)| (name.clone(), latency(h)))
            .collect(),
        cache_hit_ratio: (recorder.timed_searches > 0)
            .then(|| recorder.cache_hits as f64 / recorder.timed_searches as f64),
        episodes: (plan.workload == Workload::Episode).then_some(Episodes {
            completed: recorder.episodes_completed,
            failed: recorder.episodes_failed,
        }),
        server: facts.server.map(|(cpu, memory)| ServerUsage {
            cpu_seconds: cpu,
            cpu_seconds_per_search: cpu / searches.max(1) as f64,
            rss_bytes_end: memory.rss,
            peak_rss_bytes: memory.peak,
            rss_anon_bytes_end: memory.anon,
            rss_file_bytes_end: memory.file,
        }),
        percentiles,
        timeline,
    }
}
