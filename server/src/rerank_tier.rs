//! A rerank tier (`--reranker-url URL[,URL…]`): this server's rerank pools are scored by other
//! servers' `POST /rerank` (stillweb servers with `--reranker`, or text-embeddings-inference and
//! vLLM servers, which answer the same shape), so a coordinator or a CPU front can use a pool of
//! GPU machines. Each pool is one request; requests go round the URLs in turn, and one that
//! fails to connect, times out or answers 5xx (or a server without a reranker) is sent to the
//! next URL. When none answers, the search fails with `rerank_unavailable`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use stillweb_models::batcher::BatchPolicy;
use stillweb_models::worker::RerankWorker;
use stillweb_models::{ModelError, Reranker};

/// Rerank calls in flight at once from one server (each a thread waiting on the tier).
const IN_FLIGHT: usize = 16;

#[derive(Debug, Deserialize)]
struct Scored {
    index: usize,
    score: f32,
}

/// One client of the tier; copies share the round-robin position.
#[derive(Debug, Clone)]
struct Tier {
    urls: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
    agent: ureq::Agent,
    model_id: String,
}

impl Tier {
    /// Scores `passages` on the first URL, from this call's turn, that answers.
    fn call(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, String> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut failures = Vec::new();
        for i in 0..self.urls.len() {
            let url = &self.urls[(start + i) % self.urls.len()];
            match self.call_one(url, query, passages) {
                Ok(scores) => return Ok(scores),
                Err(why) => failures.push(format!("{url}: {why}")),
            }
        }
        Err(failures.join("; "))
    }

    fn call_one(&self, url: &str, query: &str, passages: &[&str]) -> Result<Vec<f32>, String> {
        let mut response = self
            .agent
            .post(format!("{url}/rerank"))
            .send_json(json!({"query": query, "texts": passages}))
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        if status != 200 {
            let body = response.body_mut().read_to_string().unwrap_or_default();
            return Err(format!(
                "answered {status}: {}",
                body.chars().take(200).collect::<String>()
            ));
        }
        let scored: Vec<Scored> = response
            .body_mut()
            .read_json()
            .map_err(|e| format!("an answer that is not [{{index, score}}]: {e}"))?;
        let mut scores = vec![f32::NAN; passages.len()];
        for s in scored {
            if let Some(slot) = scores.get_mut(s.index) {
                *slot = s.score;
            }
        }
        if scores.iter().any(|s| s.is_nan()) {
            return Err(format!(
                "scores for some of the {} texts are missing",
                passages.len()
            ));
        }
        Ok(scores)
    }
}

impl Reranker for Tier {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        self.call(query, passages).map_err(|why| {
            ModelError::Unavailable(format!(
                "tier ({}) did not answer: {why}",
                self.urls.join(", ")
            ))
        })
    }
}

/// The tier behind `urls` as this server's reranker: waits up to `startup_wait` for one of them
/// to say (in `/info`) which reranker it runs, and refuses URLs that run different ones.
pub fn connect(
    urls: &[String],
    call_timeout: Duration,
    startup_wait: Duration,
) -> anyhow::Result<RerankWorker> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(call_timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let deadline = Instant::now() + startup_wait;
    let model_id = loop {
        let mut models = Vec::new();
        for url in urls {
            let info: Option<serde_json::Value> = agent
                .get(format!("{url}/info"))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_json().ok());
            if let Some(model) = info.as_ref().and_then(|i| i["models"]["reranker"].as_str()) {
                models.push((url.clone(), model.to_string()));
            }
        }
        if let Some((first_url, first)) = models.first() {
            if let Some((url, other)) = models.iter().find(|(_, m)| m != first) {
                anyhow::bail!(
                    "--reranker-url: {first_url} runs {first} but {url} runs {other}; a tier must run one reranker"
                );
            }
            break first.clone();
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "--reranker-url: none of {} answered /info with a reranker within {} s; start them with --reranker DIR",
            urls.join(", "),
            startup_wait.as_secs()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let tier = Tier {
        urls: Arc::new(urls.to_vec()),
        next: Arc::new(AtomicUsize::new(0)),
        agent,
        model_id,
    };
    let copies: Vec<Box<dyn Reranker>> = (0..IN_FLIGHT)
        .map(|_| Box::new(tier.clone()) as Box<dyn Reranker>)
        .collect();
    // One pool per call (TEI's /rerank takes one query), up to IN_FLIGHT at once: the tier's
    // servers batch what arrives together.
    Ok(RerankWorker::spawn_batching(
        copies,
        "stillweb-rerank-tier",
        BatchPolicy::UNBATCHED,
    )?)
}
