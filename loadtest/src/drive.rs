//! The two ways to offer load, and the three workloads.
//!
//! Open loop: work units start on a fixed schedule (unit `i` at `i / rate`) whatever the server
//! is doing, and each unit's first request is timed from its scheduled start, so a stall shows up
//! in the latencies instead of silently lowering the offered rate (coordinated omission). Closed
//! loop: `concurrency` clients each start the next unit when the last one is done.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::client::{Client, Failure, Reply, parse_server_timing};
use crate::queries::{QuerySet, near_repeat};
use crate::record::{Outcome, Recorder};
use crate::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// One `POST /v1/search` per unit.
    Search,
    /// An agent episode per unit: search, visit a result, search again (a near-repeat), visit,
    /// end the session.
    Episode,
    /// One `POST /v1/search/batch` of `--batch-size` queries per unit.
    Batch,
    /// One Search-R1 `POST /retrieve` of `--batch-size` distinct queries per unit (consecutive
    /// lines of the query file, as an RL step sends every rollout's query in one call).
    Retrieve,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Arrival {
    /// Units started per second, on schedule.
    Open { rate: f64 },
    /// Units in flight at all times.
    Closed { concurrency: usize },
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub workload: Workload,
    pub arrival: Arrival,
    pub duration: Duration,
    /// Results asked per search.
    pub k: u32,
    pub batch_size: usize,
    /// Open loop: units allowed in flight before new ones are counted as not sent.
    pub max_outstanding: usize,
    pub seed: u64,
    /// Extra fields for every search (e.g. `{"rerank": false}`).
    pub search_fields: serde_json::Map<String, Value>,
}

type Shared = Arc<Mutex<Recorder>>;

/// Runs the plan; the recorder holds everything that happened.
pub async fn run(client: Client, queries: Arc<QuerySet>, plan: Plan, recorder: Shared) {
    let start = recorder
        .lock()
        .map(|r| r.start)
        .unwrap_or_else(|e| e.into_inner().start);
    let end = start + plan.duration;
    let plan = Arc::new(plan);
    match plan.arrival {
        Arrival::Open { rate } => {
            let slots = Arc::new(Semaphore::new(plan.max_outstanding));
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0u64.. {
                let scheduled = start + Duration::from_secs_f64(i as f64 / rate);
                if scheduled >= end {
                    break;
                }
                tokio::time::sleep_until(scheduled.into()).await;
                while tasks.try_join_next().is_some() {}
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    let mut r = lock(&recorder);
                    let op = first_op(plan.workload);
                    r.record(op, scheduled, scheduled, Outcome::NotSent);
                    continue;
                };
                let (client, queries, plan, recorder) = (
                    client.clone(),
                    queries.clone(),
                    plan.clone(),
                    recorder.clone(),
                );
                tasks.spawn(async move {
                    unit(&client, &queries, &plan, &recorder, i, scheduled).await;
                    drop(slot);
                });
            }
            while tasks.join_next().await.is_some() {}
        }
        Arrival::Closed { concurrency } => {
            let mut tasks = tokio::task::JoinSet::new();
            for worker in 0..concurrency as u64 {
                let (client, queries, plan, recorder) = (
                    client.clone(),
                    queries.clone(),
                    plan.clone(),
                    recorder.clone(),
                );
                tasks.spawn(async move {
                    let mut i = worker;
                    while Instant::now() < end {
                        unit(&client, &queries, &plan, &recorder, i, Instant::now()).await;
                        i += concurrency as u64;
                    }
                });
            }
            while tasks.join_next().await.is_some() {}
        }
    }
}

fn lock(recorder: &Shared) -> std::sync::MutexGuard<'_, Recorder> {
    recorder.lock().unwrap_or_else(|e| e.into_inner())
}

fn first_op(workload: Workload) -> &'static str {
    match workload {
        Workload::Search | Workload::Episode => "search",
        Workload::Batch => "batch",
        Workload::Retrieve => "retrieve",
    }
}

/// One unit of work, number `i` of the run (which fixes its queries and choices).
async fn unit(
    client: &Client,
    queries: &QuerySet,
    plan: &Plan,
    recorder: &Shared,
    i: u64,
    scheduled: Instant,
) {
    let mut rng = Rng::stream(plan.seed, i);
    match plan.workload {
        Workload::Search => {
            let query = queries.pick(&mut rng).to_string();
            search(client, plan, recorder, &query, None, scheduled).await;
        }
        Workload::Batch => {
            let entries: Vec<Value> = (0..plan.batch_size)
                .map(|_| search_body(plan, queries.pick(&mut rng), None))
                .collect();
            let body = json!({ "queries": entries });
            let reply = client.post_json("/v1/search/batch", &body).await;
            settle(recorder, "batch", scheduled, &reply);
        }
        Workload::Retrieve => {
            let first = (i as usize).wrapping_mul(plan.batch_size);
            let batch: Vec<&str> = (0..plan.batch_size)
                .map(|j| queries.nth(first.wrapping_add(j)))
                .collect();
            // As Search-R1's trainer sends it (its server fails a call without scores).
            let body = json!({ "queries": batch, "topk": plan.k, "return_scores": true });
            let reply = client.post_json("/retrieve", &body).await;
            settle(recorder, "retrieve", scheduled, &reply);
        }
        Workload::Episode => episode(client, queries, plan, recorder, i, scheduled, rng).await,
    }
}

async fn episode(
    client: &Client,
    queries: &QuerySet,
    plan: &Plan,
    recorder: &Shared,
    i: u64,
    scheduled: Instant,
    mut rng: Rng,
) {
    let session = format!("loadtest-{}-{i}", plan.seed);
    let first = queries.pick(&mut rng).to_string();
    let second = near_repeat(&first, &mut rng);
    let mut completed = true;
    let mut from = scheduled;
    for query in [first, second] {
        let Some(urls) = search(client, plan, recorder, &query, Some(&session), from).await else {
            completed = false;
            break;
        };
        from = Instant::now();
        if let Some(url) = urls.get(rng.below(urls.len().clamp(1, 3))) {
            let body = json!({ "url": url, "session": session });
            let reply = client.post_json("/v1/visit", &body).await;
            completed &= settle(recorder, "visit", from, &reply);
            from = Instant::now();
        }
    }
    let reply = client.delete(&format!("/v1/sessions/{session}")).await;
    completed &= settle(recorder, "end_session", from, &reply);
    let mut r = lock(recorder);
    if completed {
        r.episodes_completed += 1;
    } else {
        r.episodes_failed += 1;
    }
}

fn search_body(plan: &Plan, query: &str, session: Option<&str>) -> Value {
    let mut body = plan.search_fields.clone();
    body.insert("query".into(), query.into());
    body.insert("k".into(), plan.k.into());
    if let Some(session) = session {
        body.insert("session".into(), session.into());
    }
    Value::Object(body)
}

/// One search; the URLs it returned, or `None` when it failed.
async fn search(
    client: &Client,
    plan: &Plan,
    recorder: &Shared,
    query: &str,
    session: Option<&str>,
    from: Instant,
) -> Option<Vec<String>> {
    let reply = client
        .post_json("/v1/search", &search_body(plan, query, session))
        .await;
    if !settle(recorder, "search", from, &reply) {
        return None;
    }
    let reply = reply.ok()?;
    if let Some(header) = &reply.server_timing {
        let (stages, cached) = parse_server_timing(header);
        lock(recorder).record_stages(&stages, cached);
    }
    let body: Value = serde_json::from_slice(&reply.body).ok()?;
    Some(
        body["results"]
            .as_array()?
            .iter()
            .filter_map(|r| r["url"].as_str().map(str::to_string))
            .collect(),
    )
}

/// Records a request's outcome; whether it succeeded.
fn settle(
    recorder: &Shared,
    op: &'static str,
    from: Instant,
    reply: &Result<Reply, Failure>,
) -> bool {
    let done = Instant::now();
    let outcome = match reply {
        Ok(r) if (200..300).contains(&r.status) => Outcome::Ok,
        Ok(r) => Outcome::Status(r.status),
        Err(Failure::Timeout) => Outcome::Timeout,
        Err(Failure::Connection) => Outcome::Connection,
    };
    lock(recorder).record(op, from, done, outcome);
    matches!(outcome, Outcome::Ok)
}
