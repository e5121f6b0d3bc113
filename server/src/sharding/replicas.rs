//! One shard's replicas as the coordinator calls them: each call goes to the healthier, less busy
//! of two replicas (power of two choices over in-flight calls, healthy replicas first), and a
//! call that fails to connect, times out or gets a 5xx is retried on the next replica; a
//! background thread probes every replica's `/readyz` so that a replica that died is skipped
//! and one that came back is used again. When every replica fails, the call fails with
//! `shard_unavailable` naming the shard and what each replica answered — never a partial result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use crate::error::{ApiError, ErrorCode};

/// One replica of a shard.
#[derive(Debug)]
pub struct Replica {
    /// Base URL, `http://host:port`.
    pub url: String,
    healthy: AtomicBool,
    in_flight: AtomicUsize,
}

impl Replica {
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    fn set_healthy(&self, healthy: bool) {
        if self.healthy.swap(healthy, Ordering::Relaxed) != healthy {
            if healthy {
                info!(replica = %self.url, "shard replica is back");
            } else {
                warn!(replica = %self.url, "shard replica is down");
            }
        }
    }
}

/// A shard's replicas and the HTTP client that calls them.
#[derive(Debug, Clone)]
pub struct ReplicaSet {
    /// The shard's number in its set.
    pub shard: usize,
    pub replicas: Arc<Vec<Replica>>,
    client: Client<HttpConnector, Full<Bytes>>,
    /// Each attempt's time limit.
    timeout: Duration,
    turn: Arc<AtomicUsize>,
}

impl ReplicaSet {
    pub fn new(shard: usize, urls: &[String], timeout: Duration) -> ReplicaSet {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(timeout.min(Duration::from_secs(2))));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        ReplicaSet {
            shard,
            replicas: Arc::new(
                urls.iter()
                    .map(|u| Replica {
                        url: u.trim_end_matches('/').to_string(),
                        healthy: AtomicBool::new(true),
                        in_flight: AtomicUsize::new(0),
                    })
                    .collect(),
            ),
            client,
            timeout,
            turn: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The order in which a call tries the replicas: healthy ones first, the first of them the
    /// less busy of two taken in turn; then the ones marked down (a last resort, and how a
    /// replica's return is noticed between probes).
    fn order(&self) -> Vec<usize> {
        let n = self.replicas.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        let mut healthy: Vec<usize> = (0..n)
            .map(|i| (start + i) % n)
            .filter(|&i| self.replicas[i].is_healthy())
            .collect();
        if healthy.len() >= 2 {
            let busy = |i: usize| self.replicas[i].in_flight.load(Ordering::Relaxed);
            if busy(healthy[1]) < busy(healthy[0]) {
                healthy.swap(0, 1);
            }
        }
        let down = (0..n)
            .map(|i| (start + i) % n)
            .filter(|&i| !self.replicas[i].is_healthy());
        healthy.into_iter().chain(down).collect()
    }

    /// `POST path` with `body` as JSON to one replica after another until one answers, naming
    /// the set's `build` the answer must come from ([`super::protocol::BUILD_HEADER`]).
    pub async fn call<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
        build: &str,
    ) -> Result<T, ApiError> {
        let body = Bytes::from(serde_json::to_vec(body).map_err(ApiError::internal)?);
        let mut failures = Vec::new();
        for i in self.order() {
            let replica = &self.replicas[i];
            replica.in_flight.fetch_add(1, Ordering::Relaxed);
            let outcome = tokio::time::timeout(
                self.timeout,
                self.post(&replica.url, path, body.clone(), build),
            )
            .await;
            replica.in_flight.fetch_sub(1, Ordering::Relaxed);
            match outcome {
                Ok(Ok(bytes)) => {
                    replica.set_healthy(true);
                    return serde_json::from_slice(&bytes).map_err(|e| {
                        ApiError::internal(format!(
                            "shard {} ({}) answered {path} with a body that does not parse: {e}",
                            self.shard, replica.url
                        ))
                    });
                }
                Ok(Err(Attempt::Refused(message))) => {
                    // The replica is up and refused the call itself: another would too.
                    return Err(ApiError::internal(format!(
                        "shard {} ({}) refused {path}: {message}",
                        self.shard, replica.url
                    )));
                }
                Ok(Err(Attempt::Failed(reason))) => {
                    replica.set_healthy(false);
                    failures.push(format!("{}: {reason}", replica.url));
                }
                Err(_) => {
                    replica.set_healthy(false);
                    failures.push(format!(
                        "{}: no answer within {} ms",
                        replica.url,
                        self.timeout.as_millis()
                    ));
                }
            }
        }
        Err(ApiError::new(
            ErrorCode::ShardUnavailable,
            format!(
                "shard {} of the index is unavailable (every replica failed: {}); retry later",
                self.shard,
                failures.join("; ")
            ),
        ))
    }

    async fn post(
        &self,
        base: &str,
        path: &str,
        body: Bytes,
        build: &str,
    ) -> Result<Bytes, Attempt> {
        let request = hyper::Request::post(format!("{base}{path}"))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(super::protocol::BUILD_HEADER, build)
            .body(Full::new(body))
            .map_err(|e| Attempt::Failed(e.to_string()))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| Attempt::Failed(format!("{e:?}")))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Attempt::Failed(e.to_string()))?
            .to_bytes();
        if status.is_success() {
            Ok(bytes)
        } else if status.is_server_error() || status.as_u16() == 429 {
            Err(Attempt::Failed(format!("HTTP {status}")))
        } else {
            Err(Attempt::Refused(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            )))
        }
    }
}

/// Why one attempt did not answer.
enum Attempt {
    /// Worth another replica: no connection, a broken one, a 5xx or a 429.
    Failed(String),
    /// The request itself was refused (4xx): no replica would answer it.
    Refused(String),
}

/// Probes every replica of `sets` on `/readyz` every `every`, from a thread of its own, for the
/// life of the process, marking each up or down (a probe waits up to 2 s: a busy replica is
/// slow, not down).
pub fn watch(sets: Vec<ReplicaSet>, every: Duration) -> std::io::Result<()> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(2)))
        .http_status_as_error(false)
        .build()
        .into();
    std::thread::Builder::new()
        .name("stillweb-shard-health".into())
        .spawn(move || {
            loop {
                for set in &sets {
                    for replica in set.replicas.iter() {
                        let ready = agent
                            .get(format!("{}/readyz", replica.url))
                            .call()
                            .is_ok_and(|r| r.status().is_success());
                        replica.set_healthy(ready);
                    }
                }
                std::thread::sleep(every);
            }
        })?;
    Ok(())
}
